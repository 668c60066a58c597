//! The pure part of the Kubernetes lease algorithm (LSE-K-02, LSE-K-04): what a round does
//! with the Lease record it read, judged on this node's monotonic clock from when it saw the
//! record last change, never from the remote `renewTime`. No I/O, so the rules are tested
//! without an apiserver.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::cluster::KubernetesConfig;
use crate::lease::LeaseTiming;

/// The cadence for a config: rounds every retryPeriod, bounded by renewDeadline.
pub fn timing(config: &KubernetesConfig) -> LeaseTiming {
    LeaseTiming {
        round_every: Duration::from_secs(config.retry_period_seconds),
        round_timeout: Duration::from_secs(config.renew_deadline_seconds),
        duration: Duration::from_secs(config.lease_duration_seconds),
    }
}

/// The readable holder: `<identity>#<token>` with the token stripped (LSE-K-04).
pub fn strip_token(holder: &str) -> &str {
    holder.rsplit_once('#').map_or(holder, |(name, _)| name)
}

/// What this node last saw of the Lease, and when it saw it change (client-go's
/// `observedRecord` and `observedTime`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// `spec.holderIdentity`; `None` when absent or empty (released).
    pub holder: Option<String>,
    /// `spec.renewTime`, as written (compared, never read as a time).
    pub renew_time: Option<String>,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `spec.leaseDurationSeconds`, as the holder wrote it.
    pub duration_secs: Option<u64>,
    /// When this node first saw the record in this state, on its own monotonic clock.
    pub at: Instant,
}

impl Observed {
    pub(super) fn same_record(&self, other: &Observed) -> bool {
        self.holder == other.holder
            && self.renew_time == other.renew_time
            && self.resource_version == other.resource_version
    }
}

/// What a round does with the Lease it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Held by this process: refresh renewTime.
    Renew,
    /// Free, or unchanged for a whole lease duration: take it over.
    TakeOver,
    /// Another holder's lease is still live by this node's clock.
    Follow,
}

/// The client-go rule on an observed record, at `now` on this node's clock. `fallback` is the
/// configured duration, for a record that carries none.
pub fn decide(obs: &Observed, me: &str, now: Instant, fallback: Duration) -> Action {
    match obs.holder.as_deref() {
        Some(h) if h == me => Action::Renew,
        None => Action::TakeOver,
        Some(_) => {
            // The holder's own duration is the promise it made (client-go reads it from the
            // record); the clock is ours, from when we saw the record last change.
            let d = obs.duration_secs.map_or(fallback, Duration::from_secs);
            if now.saturating_duration_since(obs.at) >= d {
                Action::TakeOver
            } else {
                Action::Follow
            }
        }
    }
}
