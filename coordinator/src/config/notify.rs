//! `notify:`: where the coordinator reports events an operator may want to be paged for.
//!
//! ```yaml
//! notify:
//!   webhook:
//!     url: https://hooks.example.internal/cronstable   # http:// or https://
//!     events: [leader_change, quorum_loss, job_failure, job_expectation] # the default: all
//!     timeout: 5s                                       # per attempt
//!     retries: 3                                        # after the first attempt
//!     signingKey: {fromFile: /etc/cronstable/webhook-key} # or fromEnvVar, value
//! ```
//!
//! The events (inventory NTF-01): `leader_change` (this node gained or lost scheduled-job
//! leadership), `quorum_loss` (this node left quorum, so its Leader jobs stood down) and
//! `job_failure` (a run on this node ended non-zero, by a signal or at its timeout), and
//! `job_expectation` (a firing of a job with `expect:` was missed, ran twice or ran too long;
//! sent once for the cluster, by the node that judges the job).

use std::time::Duration;

use serde::Deserialize;

use super::ctx::Ctx;

/// One event kind a reporter can be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyEvent {
    /// This node acquired or lost scheduled-job leadership.
    LeaderChange,
    /// This node left quorum.
    QuorumLoss,
    /// A run on this node failed.
    JobFailure,
    /// A firing broke its job's expectation.
    JobExpectation,
}

impl NotifyEvent {
    /// Every event, the default subscription.
    pub const ALL: [NotifyEvent; 4] = [
        Self::LeaderChange,
        Self::QuorumLoss,
        Self::JobFailure,
        Self::JobExpectation,
    ];

    /// The spelling in config and payloads.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LeaderChange => "leader_change",
            Self::QuorumLoss => "quorum_loss",
            Self::JobFailure => "job_failure",
            Self::JobExpectation => "job_expectation",
        }
    }
}

/// `notify:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawNotify {
    pub(crate) webhook: Option<RawWebhook>,
}

/// `notify.webhook:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawWebhook {
    pub(crate) url: Option<String>,
    pub(crate) events: Option<Vec<NotifyEvent>>,
    #[serde(deserialize_with = "cronstable_core::duration::deserialize_option")]
    pub(crate) timeout: Option<Duration>,
    pub(crate) retries: Option<u32>,
    pub(crate) signing_key: Option<super::secret::RawSecret>,
}

/// `notify:`, validated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NotifyConfig {
    /// The webhook reporter, when configured.
    pub webhook: Option<WebhookConfig>,
}

/// `notify.webhook:`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// Where events are POSTed as JSON.
    pub url: String,
    /// The events sent; the default is all.
    pub events: Vec<NotifyEvent>,
    /// The deadline of one attempt (connect, send, response).
    pub timeout: Duration,
    /// Attempts after the first, with doubling backoff from one second.
    pub retries: u32,
    /// Where the key each delivery is signed with comes from, when one is configured
    /// (resolved at start and reload: [`crate::observe::signing::resolve`]).
    pub signing_key: Option<super::SecretSource>,
}

/// The most `retries` a webhook may ask for: past this an outage of the receiver only piles
/// up stale pages.
pub(super) const MAX_WEBHOOK_RETRIES: u32 = 10;

pub(super) fn validate(ctx: &mut Ctx<'_>, raw: RawNotify) -> NotifyConfig {
    let Some(hook) = raw.webhook else {
        return NotifyConfig::default();
    };
    let url = match hook.url.as_deref().map(str::trim) {
        None | Some("") => {
            ctx.error(
                "notify.webhook.url",
                "is required: the URL events are POSTed to",
            );
            None
        }
        Some(u) if u.starts_with("http://") || u.starts_with("https://") => {
            match u.parse::<http::Uri>() {
                Ok(uri) if uri.host().is_some() => Some(u.to_owned()),
                Ok(_) => {
                    ctx.error("notify.webhook.url", format!("{u:?} has no host"));
                    None
                }
                Err(e) => {
                    ctx.error("notify.webhook.url", format!("{u:?} is not a URL: {e}"));
                    None
                }
            }
        }
        Some(u) => {
            ctx.error(
                "notify.webhook.url",
                format!("{u:?} must start with http:// or https://"),
            );
            None
        }
    };
    let timeout = hook.timeout.unwrap_or(Duration::from_secs(5));
    if timeout.is_zero() {
        ctx.error("notify.webhook.timeout", "must be more than zero");
    }
    let retries = hook.retries.unwrap_or(3);
    if retries > MAX_WEBHOOK_RETRIES {
        ctx.error(
            "notify.webhook.retries",
            format!("{retries} is more than the limit of {MAX_WEBHOOK_RETRIES}"),
        );
    }
    let signing_key =
        super::ctx::secret(ctx, "notify.webhook.signingKey", hook.signing_key.as_ref());
    let mut events = hook.events.unwrap_or_else(|| NotifyEvent::ALL.to_vec());
    if events.is_empty() {
        ctx.error(
            "notify.webhook.events",
            "is empty: list the events to send, or leave the key out for all of them",
        );
    }
    events.dedup();
    NotifyConfig {
        webhook: url.map(|url| WebhookConfig {
            url,
            events,
            timeout,
            retries,
            signing_key,
        }),
    }
}
