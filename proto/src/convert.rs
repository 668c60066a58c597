//! Conversions between the wire types of `cronstable.v1` and the core's domain types.
//!
//! Wire types stop here: everything past this module works on `JobSpec`, `FiringKind`,
//! `Decision`. A malformed field becomes a [`FieldError`] that names the field, which the
//! service turns into `INVALID_ARGUMENT`.

use std::time::Duration;

use crate::v1 as pb;
use cronstable_core::catch_up::{CatchUp, CatchUpKeys, CatchUpPolicy, policy_from};
use cronstable_core::expect::{Expectation, expectation_from};
use cronstable_core::mode::{ElectionMode, ElectionStamp};
use cronstable_core::schedule::Schedule;
use cronstable_core::{
    ClusterPolicy, ConcurrencyPolicy, Firing, FiringKind, JobSpec, Reason, RetryPolicy, Verdict,
};

/// A request field that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct FieldError {
    /// The field's path in the request, e.g. `jobs[2].schedule`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

/// The longest job name `RegisterJobs` takes, in bytes: what a peer accepts in a node's `/peer`
/// report (`ran_reboot_jobs`), so one long name cannot make every peer refuse this node's body.
pub const MAX_JOB_NAME_BYTES: usize = cronstable_core::gossip::report::MAX_FIELD_BYTES;

fn bad(field: impl Into<String>, reason: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// The domain policy of a wire policy. Unspecified means the default, Leader.
pub fn policy_from_wire(value: i32, field: &str) -> Result<ClusterPolicy, FieldError> {
    match pb::ClusterPolicy::try_from(value) {
        Ok(pb::ClusterPolicy::Unspecified | pb::ClusterPolicy::Leader) => Ok(ClusterPolicy::Leader),
        Ok(pb::ClusterPolicy::PreferLeader) => Ok(ClusterPolicy::PreferLeader),
        Ok(pb::ClusterPolicy::EveryNode) => Ok(ClusterPolicy::EveryNode),
        Err(_) => Err(bad(field, format!("unknown cluster policy value {value}"))),
    }
}

/// The wire policy of a domain policy.
pub fn policy_to_wire(policy: ClusterPolicy) -> pb::ClusterPolicy {
    match policy {
        ClusterPolicy::Leader => pb::ClusterPolicy::Leader,
        ClusterPolicy::PreferLeader => pb::ClusterPolicy::PreferLeader,
        ClusterPolicy::EveryNode => pb::ClusterPolicy::EveryNode,
    }
}

fn concurrency_from_wire(value: i32, field: &str) -> Result<ConcurrencyPolicy, FieldError> {
    match pb::ConcurrencyPolicy::try_from(value) {
        Ok(pb::ConcurrencyPolicy::Unspecified | pb::ConcurrencyPolicy::Allow) => {
            Ok(ConcurrencyPolicy::Allow)
        }
        Ok(pb::ConcurrencyPolicy::Forbid) => Ok(ConcurrencyPolicy::Forbid),
        Ok(pb::ConcurrencyPolicy::Replace) => Ok(ConcurrencyPolicy::Replace),
        Err(_) => Err(bad(
            field,
            format!("unknown concurrency policy value {value}"),
        )),
    }
}

/// The domain job of a wire job definition at `jobs[index]`. The schedule is checked here so
/// a client learns about a bad expression at registration, not at its first firing.
pub fn job_from_wire(def: pb::JobDefinition, index: usize) -> Result<JobSpec, FieldError> {
    let at = |f: &str| format!("jobs[{index}].{f}");
    if def.name.trim().is_empty() {
        return Err(bad(at("name"), "must not be empty"));
    }
    if def.name.len() > MAX_JOB_NAME_BYTES {
        return Err(bad(
            at("name"),
            format!(
                "is {} bytes; the limit is {MAX_JOB_NAME_BYTES} (a peer refuses a longer name in \
                 the cluster's reports)",
                def.name.len()
            ),
        ));
    }
    if def.command.trim().is_empty() {
        return Err(bad(
            at("command"),
            format!("job {:?} has an empty command", def.name),
        ));
    }
    let timezone = (!def.timezone.is_empty()).then(|| def.timezone.clone());
    let schedule = Schedule::parse(&def.schedule, timezone.as_deref())
        .map_err(|e| bad(at("schedule"), format!("job {:?}: {e}", def.name)))?;
    let cluster_policy = policy_from_wire(def.cluster_policy, &at("cluster_policy"))?;
    let starting_deadline =
        (def.starting_deadline_ms > 0).then(|| Duration::from_millis(def.starting_deadline_ms));
    let catch_up = catch_up_from_wire(&def, &schedule, cluster_policy, starting_deadline)
        .map_err(|(key, why)| bad(at(key), format!("job {:?}: {why}", def.name)))?;
    let expect = expectation_from(
        Expectation {
            complete_within: millis(def.expect_complete_within_ms),
            max_duration: millis(def.expect_max_duration_ms),
        },
        &schedule,
    )
    .map_err(|problems| {
        let (key, why) = problems.into_iter().next().unwrap_or_default();
        let field = match key {
            "expect.maxDuration" => "expect_max_duration_ms",
            _ => "expect_complete_within_ms",
        };
        bad(at(field), format!("job {:?}: {why}", def.name))
    })?;
    Ok(JobSpec {
        cluster_policy,
        catch_up,
        expect,
        concurrency_policy: concurrency_from_wire(
            def.concurrency_policy,
            &at("concurrency_policy"),
        )?,
        stdin: (!def.stdin.is_empty()).then_some(def.stdin),
        timezone,
        environment: def.environment.into_iter().collect(),
        timeout: (def.timeout_ms > 0).then(|| Duration::from_millis(def.timeout_ms)),
        starting_deadline,
        retry: RetryPolicy {
            retries: def.retries,
            backoff: Duration::from_millis(def.retry_backoff_ms),
            max_backoff: Duration::from_millis(def.retry_backoff_max_ms),
        },
        name: def.name,
        schedule: def.schedule,
        command: def.command,
    })
}

/// A wire job's catch-up fields as a policy, checked as a job file's are
/// ([`cronstable_core::catch_up::policy_from`]); the first problem as (wire field, sentence).
fn catch_up_from_wire(
    def: &pb::JobDefinition,
    schedule: &Schedule,
    policy: ClusterPolicy,
    starting_deadline: Option<Duration>,
) -> Result<Option<CatchUpPolicy>, (&'static str, String)> {
    let mode = match pb::CatchUp::try_from(def.catch_up) {
        Ok(pb::CatchUp::Unspecified | pb::CatchUp::None) => CatchUp::None,
        Ok(pb::CatchUp::Latest) => CatchUp::Latest,
        Ok(pb::CatchUp::All) => CatchUp::All,
        Err(_) => {
            let value = def.catch_up;
            return Err(("catch_up", format!("unknown catch-up value {value}")));
        }
    };
    let keys = CatchUpKeys {
        mode: Some(mode),
        window: (def.catch_up_window_ms > 0).then(|| Duration::from_millis(def.catch_up_window_ms)),
        limit: (def.catch_up_limit > 0).then_some(def.catch_up_limit),
    };
    let deadline = starting_deadline.unwrap_or(cronstable_core::job::DEFAULT_STARTING_DEADLINE);
    policy_from(keys, schedule, policy, deadline).map_err(|problems| {
        let (key, why) = problems
            .into_iter()
            .next()
            .unwrap_or(("catchUp", String::new()));
        let field = match key {
            "catchUpWindow" => "catch_up_window_ms",
            "catchUpLimit" => "catch_up_limit",
            _ => "catch_up",
        };
        (field, why)
    })
}

/// A wire duration in milliseconds, 0 meaning unset.
fn millis(ms: u64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// The wire form of a domain job (used by executors when they register).
pub fn job_to_wire(job: &JobSpec) -> pb::JobDefinition {
    pb::JobDefinition {
        name: job.name.clone(),
        schedule: job.schedule.clone(),
        command: job.command.clone(),
        stdin: job.stdin.clone().unwrap_or_default(),
        cluster_policy: policy_to_wire(job.cluster_policy) as i32,
        timezone: job.timezone.clone().unwrap_or_default(),
        environment: job.environment.clone().into_iter().collect(),
        timeout_ms: job.timeout.map_or(0, |d| d.as_millis() as u64),
        starting_deadline_ms: job.starting_deadline.map_or(0, |d| d.as_millis() as u64),
        catch_up: match job.catch_up.map(|c| c.mode) {
            None | Some(CatchUp::None) => pb::CatchUp::Unspecified,
            Some(CatchUp::Latest) => pb::CatchUp::Latest,
            Some(CatchUp::All) => pb::CatchUp::All,
        } as i32,
        catch_up_window_ms: job.catch_up.map_or(0, |c| c.window.as_millis() as u64),
        catch_up_limit: job.catch_up.map_or(0, |c| c.limit),
        expect_complete_within_ms: job
            .expect
            .and_then(|e| e.complete_within)
            .map_or(0, |d| d.as_millis() as u64),
        expect_max_duration_ms: job
            .expect
            .and_then(|e| e.max_duration)
            .map_or(0, |d| d.as_millis() as u64),
        retries: job.retry.retries,
        retry_backoff_ms: job.retry.backoff.as_millis() as u64,
        retry_backoff_max_ms: job.retry.max_backoff.as_millis() as u64,
        concurrency_policy: match job.concurrency_policy {
            ConcurrencyPolicy::Allow => pb::ConcurrencyPolicy::Allow,
            ConcurrencyPolicy::Forbid => pb::ConcurrencyPolicy::Forbid,
            ConcurrencyPolicy::Replace => pb::ConcurrencyPolicy::Replace,
        } as i32,
    }
}

/// The domain firing kind of a wire kind and attempt.
pub fn kind_from_wire(kind: i32, attempt: u32) -> Result<FiringKind, FieldError> {
    match pb::FiringKind::try_from(kind) {
        Ok(pb::FiringKind::Scheduled) => Ok(FiringKind::Scheduled),
        Ok(pb::FiringKind::Reboot) => Ok(FiringKind::Reboot),
        Ok(pb::FiringKind::Manual) => Ok(FiringKind::Manual),
        Ok(pb::FiringKind::CatchUp) => Ok(FiringKind::CatchUp),
        Ok(pb::FiringKind::Retry) if attempt >= 2 => Ok(FiringKind::Retry { attempt }),
        Ok(pb::FiringKind::Retry) => Err(bad(
            "attempt",
            format!("a RETRY firing needs attempt >= 2, got {attempt}"),
        )),
        Ok(pb::FiringKind::Unspecified) => Err(bad(
            "kind",
            "must be SCHEDULED, REBOOT, RETRY, MANUAL or CATCH_UP",
        )),
        Err(_) => Err(bad("kind", format!("unknown firing kind value {kind}"))),
    }
}

/// The firing a request names: its job, nominal instant, and kind with its attempt (see
/// [`kind_from_wire`]). Converted once, at the adapter.
pub fn firing_from_wire(
    job: &str,
    scheduled_at_ms: i64,
    kind: i32,
    attempt: u32,
) -> Result<Firing, FieldError> {
    Ok(Firing {
        job: job.to_owned(),
        scheduled_at_ms,
        kind: kind_from_wire(kind, attempt)?,
    })
}

/// The wire firing kind of a domain kind.
pub fn kind_to_wire(kind: FiringKind) -> pb::FiringKind {
    match kind {
        FiringKind::Scheduled => pb::FiringKind::Scheduled,
        FiringKind::Reboot => pb::FiringKind::Reboot,
        FiringKind::Retry { .. } => pb::FiringKind::Retry,
        FiringKind::Manual => pb::FiringKind::Manual,
        FiringKind::CatchUp => pb::FiringKind::CatchUp,
    }
}

/// The wire verdict of a domain verdict.
pub fn verdict_to_wire(verdict: Verdict) -> pb::Verdict {
    match verdict {
        Verdict::Run => pb::Verdict::Run,
        Verdict::Skip => pb::Verdict::Skip,
        Verdict::Defer => pb::Verdict::Defer,
    }
}

/// The domain verdict of a wire verdict; `None` for unspecified or unknown values, which an
/// executor must read as "do not run".
pub fn verdict_from_wire(value: i32) -> Option<Verdict> {
    match pb::Verdict::try_from(value).ok()? {
        pb::Verdict::Run => Some(Verdict::Run),
        pb::Verdict::Skip => Some(Verdict::Skip),
        pb::Verdict::Defer => Some(Verdict::Defer),
        pb::Verdict::Unspecified => None,
    }
}

/// The wire reason of a domain reason (one to one).
pub fn reason_to_wire(reason: Reason) -> pb::Reason {
    match reason {
        Reason::ElectionOff => pb::Reason::ElectionOff,
        Reason::Manual => pb::Reason::Manual,
        Reason::EveryNode => pb::Reason::EveryNode,
        Reason::NoManager => pb::Reason::NoManager,
        Reason::Conflict => pb::Reason::Conflict,
        Reason::NoQuorum => pb::Reason::NoQuorum,
        Reason::Leader => pb::Reason::Leader,
        Reason::NotLeader => pb::Reason::NotLeader,
        Reason::Owner => pb::Reason::Owner,
        Reason::NotOwner => pb::Reason::NotOwner,
        Reason::ConvergenceHold => pb::Reason::ConvergenceHold,
        Reason::CoordinatorUnreachable => pb::Reason::CoordinatorUnreachable,
        Reason::ConcurrencyPolicy => pb::Reason::ConcurrencyPolicy,
        Reason::TooLate => pb::Reason::TooLate,
        Reason::AlreadyRan => pb::Reason::AlreadyRan,
        Reason::Starting => pb::Reason::Starting,
        Reason::StartingDeadline => pb::Reason::StartingDeadline,
        Reason::NotCaughtUp => pb::Reason::NotCaughtUp,
        Reason::NotLaunched => pb::Reason::NotLaunched,
    }
}

/// The domain reason of a wire reason; `None` for unspecified or unknown values.
pub fn reason_from_wire(value: i32) -> Option<Reason> {
    let wire = pb::Reason::try_from(value).ok()?;
    Reason::ALL.into_iter().find(|r| reason_to_wire(*r) == wire)
}

/// The wire form of an election stamp.
pub fn stamp_to_wire(stamp: ElectionStamp) -> pb::ElectionStamp {
    pb::ElectionStamp {
        mode: match stamp.mode {
            ElectionMode::Unknown => pb::ElectionMode::Unspecified,
            ElectionMode::Off => pb::ElectionMode::Off,
            ElectionMode::On => pb::ElectionMode::On,
        } as i32,
        generation: stamp.generation,
    }
}

/// The election stamp of a message; an absent stamp (an older coordinator) or a mode this
/// build does not know is [`ElectionMode::Unknown`].
pub fn stamp_from_wire(stamp: Option<&pb::ElectionStamp>) -> ElectionStamp {
    let Some(stamp) = stamp else {
        return ElectionStamp::default();
    };
    let mode = match pb::ElectionMode::try_from(stamp.mode) {
        Ok(pb::ElectionMode::Off) => ElectionMode::Off,
        Ok(pb::ElectionMode::On) => ElectionMode::On,
        Ok(pb::ElectionMode::Unspecified) | Err(_) => ElectionMode::Unknown,
    };
    ElectionStamp {
        mode,
        generation: stamp.generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_name_longer_than_a_peer_accepts_is_refused_naming_the_limit() {
        let def = |name: String| pb::JobDefinition {
            name,
            schedule: "0 3 * * *".into(),
            command: "true".into(),
            cluster_policy: pb::ClusterPolicy::Leader as i32,
            ..Default::default()
        };
        assert!(job_from_wire(def("a".repeat(MAX_JOB_NAME_BYTES)), 0).is_ok());
        let e = job_from_wire(def("é".repeat(129)), 3).unwrap_err();
        assert_eq!(e.field, "jobs[3].name");
        assert!(
            e.reason.contains("258 bytes") && e.reason.contains("256"),
            "{e:?}"
        );
    }

    #[test]
    fn verdicts_round_trip_and_what_is_not_known_is_none() {
        for v in [Verdict::Run, Verdict::Skip, Verdict::Defer] {
            assert_eq!(verdict_from_wire(verdict_to_wire(v) as i32), Some(v));
        }
        assert_eq!(verdict_from_wire(pb::Verdict::Unspecified as i32), None);
        assert_eq!(verdict_from_wire(99), None);
    }

    #[test]
    fn election_stamps_round_trip_and_what_is_not_known_is_unknown() {
        for mode in [ElectionMode::Unknown, ElectionMode::Off, ElectionMode::On] {
            let s = ElectionStamp {
                mode,
                generation: 42,
            };
            assert_eq!(stamp_from_wire(Some(&stamp_to_wire(s))), s);
        }
        assert_eq!(stamp_from_wire(None), ElectionStamp::default());
        let future = pb::ElectionStamp {
            mode: 99,
            generation: 7,
        };
        assert_eq!(stamp_from_wire(Some(&future)).mode, ElectionMode::Unknown);
    }

    #[test]
    fn every_reason_round_trips_through_the_wire() {
        for r in Reason::ALL {
            assert_eq!(reason_from_wire(reason_to_wire(r) as i32), Some(r));
        }
        assert_eq!(reason_from_wire(0), None);
        assert_eq!(reason_from_wire(9999), None);
    }

    #[test]
    fn a_job_round_trips_through_the_wire() {
        let mut job = JobSpec::new("backup", "0 3 * * *", "./backup.sh");
        job.cluster_policy = ClusterPolicy::PreferLeader;
        job.timezone = Some("Europe/Berlin".into());
        job.environment.insert("A".into(), "1".into());
        job.timeout = Some(Duration::from_secs(30));
        job.starting_deadline = Some(Duration::from_secs(120));
        job.stdin = Some("hello\n".into());
        job.retry = RetryPolicy {
            retries: 2,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(8),
        };
        job.concurrency_policy = ConcurrencyPolicy::Forbid;
        assert_eq!(job_from_wire(job_to_wire(&job), 0).unwrap(), job);
        job.expect = Some(Expectation {
            complete_within: Some(Duration::from_secs(900)),
            max_duration: None,
        });
        assert_eq!(job_from_wire(job_to_wire(&job), 0).unwrap(), job);
    }

    #[test]
    fn a_bad_expectation_names_its_wire_field() {
        let mut def = job_to_wire(&JobSpec::new("x", "@reboot", "true"));
        def.expect_complete_within_ms = 60_000;
        let err = job_from_wire(def, 1).unwrap_err();
        assert_eq!(err.field, "jobs[1].expect_complete_within_ms");
        assert!(err.reason.contains("@reboot"), "{err}");
    }

    #[test]
    fn a_bad_schedule_names_the_field_and_the_job() {
        let mut def = job_to_wire(&JobSpec::new("x", "61 * * * *", "true"));
        let err = job_from_wire(def.clone(), 3).unwrap_err();
        assert_eq!(err.field, "jobs[3].schedule");
        assert!(err.reason.contains("\"x\""), "{err}");
        def.schedule = "* * * * *".into();
        def.cluster_policy = 42;
        assert_eq!(
            job_from_wire(def, 0).unwrap_err().field,
            "jobs[0].cluster_policy"
        );
    }

    #[test]
    fn retry_kinds_need_a_relaunch_attempt_number() {
        assert_eq!(
            kind_from_wire(pb::FiringKind::Retry as i32, 2),
            Ok(FiringKind::Retry { attempt: 2 })
        );
        assert_eq!(
            kind_from_wire(pb::FiringKind::Retry as i32, 1)
                .unwrap_err()
                .field,
            "attempt"
        );
        assert_eq!(kind_from_wire(0, 1).unwrap_err().field, "kind");
    }
}
