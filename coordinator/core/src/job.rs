//! The job model shared by every part of cronstable: what a job is, independent of where it was
//! written down (a crontab line, a YAML job file, a gRPC registration).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Who runs a firing of a job when leader election is on (seed 000, "Per-job policy").
///
/// Inert while election is off: then every node runs every job.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub enum ClusterPolicy {
    /// Only the quorum-gated leader (or, under `distribution: spread`, the job's quorum-gated
    /// owner) runs it. Fails closed: skips rather than risk a second run.
    #[default]
    Leader,
    /// Never skips: runs on the leader, or on any node that cannot see one. May run twice.
    PreferLeader,
    /// Runs on every node, never gated.
    EveryNode,
}

impl ClusterPolicy {
    /// Every policy, in declaration order (for exhaustive tests and docs).
    pub const ALL: [ClusterPolicy; 3] = [Self::Leader, Self::PreferLeader, Self::EveryNode];

    /// The spelling used in config files and JSON (`Leader`, `PreferLeader`, `EveryNode`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Leader => "Leader",
            Self::PreferLeader => "PreferLeader",
            Self::EveryNode => "EveryNode",
        }
    }
}

impl fmt::Display for ClusterPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`ClusterPolicy`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown clusterPolicy {0:?}: expected Leader, PreferLeader or EveryNode")]
pub struct UnknownPolicy(pub String);

impl FromStr for ClusterPolicy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}

/// What to do with a firing while the previous run of the same job is still going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ConcurrencyPolicy {
    /// Start the new run beside the old one.
    #[default]
    Allow,
    /// Skip the new firing (reported with reason `concurrency policy`).
    Forbid,
    /// Stop the old run (its process group), then start the new one.
    Replace,
}

impl ConcurrencyPolicy {
    /// The spelling used in config files (`Allow`, `Forbid`, `Replace`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "Allow",
            Self::Forbid => "Forbid",
            Self::Replace => "Replace",
        }
    }
}

/// The `catchUp` key as written: `none` (the default), `latest` or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatchUp {
    /// A missed instant stays missed (and is not counted: nothing watches for it).
    #[default]
    None,
    /// Of the missed instants inside the window, only the newest runs.
    Latest,
    /// Every missed instant inside the window runs, oldest first, up to `catchUpLimit`.
    All,
}

impl CatchUp {
    /// The spelling in config files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Latest => "latest",
            Self::All => "all",
        }
    }
}

impl fmt::Display for CatchUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CatchUp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Self::None),
            "latest" => Ok(Self::Latest),
            "all" => Ok(Self::All),
            _ => Err(format!(
                "unknown catchUp {s:?}: expected none, latest or all"
            )),
        }
    }
}

/// How a job that catches up does it. A job without one (`catchUp: none`) never does. Checked,
/// with the rest of the job, by [`crate::catch_up::policy_from`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CatchUpPolicy {
    /// `latest` or `all` (never `none`: that is no policy).
    pub mode: CatchUp,
    /// How long after its instant a missed firing may still run (`catchUpWindow`).
    pub window: Duration,
    /// The most missed instants one job runs from one window (`catchUpLimit`, the storm limit).
    pub limit: u32,
}

/// A job's expectation (`expect:`, checked and judged in [`crate::expect`]). At least one of
/// the two is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Expectation {
    /// A successful run finished at most this long after the nominal instant.
    pub complete_within: Option<Duration>,
    /// No run lasted longer than this.
    pub max_duration: Option<Duration>,
}

impl Expectation {
    /// True when neither setting is given.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// How long after its instant a firing can still be judged: its deadline, or the longest
    /// a run started at its deadline may take, whichever is later.
    pub fn horizon(&self) -> Duration {
        let within = self.complete_within.unwrap_or_default();
        within + self.max_duration.unwrap_or_default()
    }
}

/// The most relaunches a job may ask for: enough for any real retry policy, and small enough
/// that attempt arithmetic can never overflow.
pub const MAX_RETRIES: u32 = 1000;

/// How a failed run is relaunched. Every relaunch re-asks the coordinator first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RetryPolicy {
    /// Relaunches after the first failed attempt; 0 disables retries.
    pub retries: u32,
    /// Wait before the first relaunch; doubled for each later one.
    pub backoff: Duration,
    /// Upper bound on the doubled wait.
    pub max_backoff: Duration,
}

impl RetryPolicy {
    /// The wait before attempt `attempt` (2 for the first relaunch): `backoff · 2^(attempt−2)`,
    /// capped at `max_backoff` (or uncapped when `max_backoff` is zero).
    pub fn backoff_before(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(2).min(32);
        let wait = self.backoff.saturating_mul(1u32 << doublings.min(31));
        if self.max_backoff.is_zero() {
            wait
        } else {
            wait.min(self.max_backoff)
        }
    }
}

/// One job, as the executor will run it.
///
/// Which of these fields the job-set ID covers is documented in [`crate::fingerprint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// Unique name within the job set: from the YAML `name`, a crontab annotation, or derived
    /// from the crontab line.
    pub name: String,
    /// The schedule as written: five fields, six fields (seconds first), an `@` alias, or
    /// `@reboot`.
    pub schedule: String,
    /// The command, run with `/bin/sh -c`.
    pub command: String,
    /// Text fed to the command's standard input (the part of a crontab command after an
    /// unescaped `%`, with further `%` turned into newlines); `None` for none.
    pub stdin: Option<String>,
    /// Who runs a firing when election is on.
    pub cluster_policy: ClusterPolicy,
    /// IANA time zone the schedule is evaluated in; `None` for UTC.
    pub timezone: Option<String>,
    /// Literal environment variables of the job definition (crontab `VAR=value` lines in force
    /// at the job's line, or YAML `environment`). The executor's own inherited environment is
    /// host-specific and not part of the job.
    pub environment: BTreeMap<String, String>,
    /// Kill the run's process group after this long; `None` for no limit.
    pub timeout: Option<Duration>,
    /// Relaunch policy after a failed attempt.
    pub retry: RetryPolicy,
    /// What to do when a firing comes while a run is still going.
    pub concurrency_policy: ConcurrencyPolicy,
    /// How long after its instant a scheduled firing may still be asked about and started
    /// (`startingDeadline`); `None` for [`DEFAULT_STARTING_DEADLINE`]. A question that comes
    /// later is answered SKIP (`starting_deadline`): it is no new firing.
    pub starting_deadline: Option<Duration>,
    /// Whether, and how, an instant no node ran still runs later on the job's owner
    /// (`catchUp`, `catchUpWindow`, `catchUpLimit`); `None` for `catchUp: none`, the default.
    pub catch_up: Option<CatchUpPolicy>,
    /// What every firing is expected to do, judged for the cluster (`expect:`,
    /// [`crate::expect`]); `None` for no expectation, the default.
    pub expect: Option<Expectation>,
}

/// A scheduled firing's start deadline when the job sets none: a real crond starts the
/// gate's command about 1.3 s after the minute, and the gate and the shim ask again about a
/// deferred firing for up to 60 s; 90 s covers both with room.
pub const DEFAULT_STARTING_DEADLINE: Duration = Duration::from_secs(90);

impl JobSpec {
    /// A job with the given name, schedule and command and every other field at its default.
    pub fn new(
        name: impl Into<String>,
        schedule: impl Into<String>,
        command: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            schedule: schedule.into(),
            command: command.into(),
            stdin: None,
            cluster_policy: ClusterPolicy::default(),
            timezone: None,
            environment: BTreeMap::new(),
            timeout: None,
            retry: RetryPolicy::default(),
            concurrency_policy: ConcurrencyPolicy::default(),
            starting_deadline: None,
            catch_up: None,
            expect: None,
        }
    }

    /// The job's start deadline, or the default.
    pub fn starting_deadline(&self) -> Duration {
        self.starting_deadline.unwrap_or(DEFAULT_STARTING_DEADLINE)
    }

    /// How long after its instant a firing can still show a breach of the job's expectation
    /// ([`crate::expect`]): a run may start as late as the start deadline or the catch-up
    /// window and then run `maxDuration`, and the firing must outlive `completeWithin`. A
    /// minute more covers reports on their way. What the judge and the nodes' reports keep.
    pub fn expectation_span(&self) -> Duration {
        let expect = self.expect.unwrap_or_default();
        let start = self
            .starting_deadline()
            .max(self.catch_up.map_or(Duration::ZERO, |c| c.window));
        start.max(expect.complete_within.unwrap_or_default())
            + expect.max_duration.unwrap_or_default()
            + Duration::from_secs(60)
    }

    /// True for an `@reboot` job: it fires once when the executor starts, never on a schedule.
    pub fn is_reboot(&self) -> bool {
        self.schedule.trim().eq_ignore_ascii_case("@reboot")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_round_trips_through_its_config_spelling() {
        for p in ClusterPolicy::ALL {
            assert_eq!(p.as_str().parse::<ClusterPolicy>(), Ok(p));
        }
        assert!("leader".parse::<ClusterPolicy>().is_err());
    }

    #[test]
    fn backoff_doubles_from_the_second_attempt_and_is_capped() {
        let r = RetryPolicy {
            retries: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(5),
        };
        assert_eq!(r.backoff_before(2), Duration::from_secs(1));
        assert_eq!(r.backoff_before(3), Duration::from_secs(2));
        assert_eq!(r.backoff_before(4), Duration::from_secs(4));
        assert_eq!(r.backoff_before(5), Duration::from_secs(5));
        assert_eq!(r.backoff_before(60), Duration::from_secs(5));
    }
}
