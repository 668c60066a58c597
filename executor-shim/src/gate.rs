//! `cronstable-gate JOB -- COMMAND...`: one firing of one job for people who keep their crond.
//!
//! crond starts the gate at the job's minute; the gate asks the coordinator `ShouldRun` for the
//! firing every node names the same way (the schedule's most recent due instant, or the current
//! minute), runs COMMAND on RUN, reports start and finish, and passes COMMAND's exit status
//! back to crond. When the coordinator does not answer, the gate applies the same "no manager"
//! row of the decision table the shim applies (MAP-05), using the policy given on the command
//! line since it has no job file of its own.
//!
//! Exit codes ([`exit_code`]) follow sysexits where one fits, and the shell's 126/127 for a
//! command that cannot be started, so a crond user reads them the way they already read them.

use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use cronstable_core::schedule::Schedule;
use cronstable_core::{ClusterPolicy, FiringKind, Gate, JobSpec, Reason, Verdict, decide};
use cronstable_proto::v1 as pb;

use crate::clock;
use crate::coordinator::client::Coordinator;
use crate::firing::{Identity, firing_env};

/// Exit code: the arguments are wrong (sysexits `EX_USAGE`).
pub const EXIT_USAGE: u8 = 64;
/// Exit code: the coordinator gave no usable answer and the job's policy says skip
/// (sysexits `EX_UNAVAILABLE`). Not 0, so a dead coordinator that silences a Leader job on
/// every node is never mistaken for an ordinary skip.
pub const EXIT_UNAVAILABLE: u8 = 69;
/// Exit code: an internal error, e.g. the async runtime could not start (`EX_SOFTWARE`).
pub const EXIT_INTERNAL: u8 = 70;
/// Exit code: the coordinator has no job by that name (`EX_CONFIG`): the job is missing from
/// the job set the coordinator loaded, or is spelled differently there.
pub const EXIT_UNKNOWN_JOB: u8 = 78;
/// Exit code: COMMAND exists but could not be started, as a shell reports it.
pub const EXIT_CANNOT_EXECUTE: u8 = 126;
/// Exit code: COMMAND was not found, as a shell reports it.
pub const EXIT_COMMAND_NOT_FOUND: u8 = 127;

/// The longest a gate keeps re-asking after DEFER answers before it treats the firing as
/// skipped: crond starts the next firing a minute later anyway.
pub const MAX_DEFERRAL: Duration = Duration::from_secs(60);

/// What the gate was asked to do, as the binary parsed it.
#[derive(Debug, Clone)]
pub struct GateConfig {
    /// The job's name in the coordinator's job set.
    pub job: String,
    /// COMMAND and its arguments, run directly (no shell).
    pub command: Vec<String>,
    /// The coordinator: `http://host:port` or `unix:/path`.
    pub coordinator: String,
    /// The executor id the gate reports under.
    pub executor_id: String,
    /// The deadline of each coordinator call.
    pub ask_timeout: Duration,
    /// The job's schedule, to name the firing by its due instant; `None` for the current minute.
    pub schedule: Option<Schedule>,
    /// The policy the no-manager rule applies when the coordinator does not answer.
    pub policy: ClusterPolicy,
    /// The token sent with every call (the coordinator's `api.authToken`).
    pub api_token: Option<crate::coordinator::token::ApiToken>,
}

/// How one gate invocation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateOutcome {
    /// COMMAND ran and exited with this code.
    Exited(i32),
    /// COMMAND ran and was killed by this signal.
    Signalled(i32),
    /// COMMAND could not be started; `not_found` when it does not exist.
    SpawnFailed {
        /// True when the program does not exist.
        not_found: bool,
        /// The OS error.
        message: String,
    },
    /// The coordinator (or, without one, the no-manager rule) said not to run.
    Skipped {
        /// The reason code, e.g. `not_leader`.
        reason: String,
        /// A readable sentence.
        message: String,
    },
    /// No usable answer from the coordinator, and the policy says skip.
    Unavailable(String),
    /// The coordinator does not know the job.
    UnknownJob(String),
}

/// The process exit code for `outcome`: COMMAND's own status when it ran (a signal `n` as
/// `128 + n`, as shells report it), 0 for a skip, and the documented codes otherwise.
pub fn exit_code(outcome: &GateOutcome) -> u8 {
    match outcome {
        GateOutcome::Exited(code) => u8::try_from(*code).unwrap_or(1),
        GateOutcome::Signalled(sig) => u8::try_from(128 + sig).unwrap_or(255),
        GateOutcome::SpawnFailed { not_found, .. } => {
            if *not_found {
                EXIT_COMMAND_NOT_FOUND
            } else {
                EXIT_CANNOT_EXECUTE
            }
        }
        GateOutcome::Skipped { .. } => 0,
        GateOutcome::Unavailable(_) => EXIT_UNAVAILABLE,
        GateOutcome::UnknownJob(_) => EXIT_UNKNOWN_JOB,
    }
}

/// The firing this invocation names: the most recent due instant of `schedule` at or before
/// `now`, or without a schedule `now` truncated to the minute. Either way every node that crond
/// starts in the same minute names the same instant, so they ask about the same firing.
pub fn firing_instant(schedule: Option<&Schedule>, now: DateTime<Utc>) -> DateTime<Utc> {
    let minute = now.duration_trunc(TimeDelta::minutes(1)).unwrap_or(now);
    schedule
        .and_then(|s| s.latest_at_or_before(now))
        .unwrap_or(minute)
}

/// Runs one gated firing and returns how it ended.
pub async fn run(
    config: &GateConfig,
) -> Result<GateOutcome, crate::coordinator::client::AddressError> {
    let coordinator = Coordinator::new(
        &config.coordinator,
        config.executor_id.clone(),
        config.ask_timeout,
        config.api_token.clone(),
    )?;
    let scheduled_at = firing_instant(config.schedule.as_ref(), clock::now());
    let at_ms = scheduled_at.timestamp_millis();
    let kind = FiringKind::Scheduled;
    let asked_from = tokio::time::Instant::now();
    let answer = loop {
        match coordinator.should_run(&config.job, at_ms, kind, 1).await {
            Ok(a) if a.verdict == Verdict::Defer => {
                if asked_from.elapsed() + a.retry_after > MAX_DEFERRAL {
                    return Ok(GateOutcome::Skipped {
                        reason: code_of(a.reason),
                        message: format!(
                            "still deferred after {} s ({}); skipping this firing",
                            MAX_DEFERRAL.as_secs(),
                            a.message
                        ),
                    });
                }
                tokio::time::sleep(a.retry_after).await;
            }
            Ok(a) => break Some(a),
            Err(e) if e.is_not_found() => {
                return Ok(GateOutcome::UnknownJob(format!(
                    "the coordinator at {} has no job named {:?}: add it to the job file named \
                     in the coordinator's config (jobs:) or fix the name ({e})",
                    config.coordinator, config.job
                )));
            }
            Err(e) => {
                // Unreachable, or refused: the shim applies the no-manager rule to both.
                let local = decide(config.policy, kind, Gate::NoManager);
                if local.verdict != Verdict::Run {
                    return Ok(GateOutcome::Unavailable(format!(
                        "{e}; job {:?} has policy {}, so it is skipped (no-manager rule)",
                        config.job, config.policy
                    )));
                }
                eprintln!(
                    "cronstable-gate: {e}; job {:?} has policy {}, so it runs anyway \
                     (no-manager rule)",
                    config.job, config.policy
                );
                break None;
            }
        }
    };
    if let Some(a) = &answer
        && a.verdict != Verdict::Run
    {
        return Ok(GateOutcome::Skipped {
            reason: code_of(a.reason),
            message: a.message.clone(),
        });
    }
    let (firing_id, fence, node) = match &answer {
        Some(a) => (a.firing_id.clone(), a.fence.clone(), a.node_name.clone()),
        None => (String::new(), None, String::new()),
    };
    let job = JobSpec::new(config.job.clone(), "* * * * *", config.command.join(" "));
    let id = Identity {
        scheduled_at,
        firing_id: &firing_id,
        attempt: 1,
        fence: fence.as_deref(),
        node: &node,
        catch_up: false,
    };
    let env = firing_env(&job, id);
    let reporting = answer.is_some();
    Ok(launch(config, &coordinator, env, at_ms, reporting).await)
}

fn code_of(reason: Option<Reason>) -> String {
    reason.map_or("unknown", Reason::code).to_owned()
}

/// Spawns COMMAND with stdio inherited (crond collects its output), reports its start and
/// finish when the coordinator answered, and returns its status.
async fn launch(
    config: &GateConfig,
    coordinator: &Coordinator,
    env: std::collections::BTreeMap<String, String>,
    at_ms: i64,
    reporting: bool,
) -> GateOutcome {
    let kind = FiringKind::Scheduled;
    let job = config.job.as_str();
    let started_at = clock::now();
    let spawned = tokio::process::Command::new(&config.command[0])
        .args(&config.command[1..])
        .envs(&env)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let not_found = e.kind() == std::io::ErrorKind::NotFound;
            let message = format!("cannot start {:?}: {e}", config.command[0]);
            if reporting {
                // Recorded as a run without an exit code, so the ledger's RUN has an end.
                let now = clock::now_ms();
                let event = finished(now, now, None, None, message.clone());
                let _ = coordinator.report(job, at_ms, kind, 1, event).await;
            }
            return GateOutcome::SpawnFailed { not_found, message };
        }
    };
    if reporting {
        let event = pb::report_run_request::Event::Started(pb::RunStarted {
            started_at_ms: started_at.timestamp_millis(),
            pid: child.id().unwrap_or(0),
        });
        // The job is already running: a slow report only delays the report.
        if let Err(e) = coordinator.report(job, at_ms, kind, 1, event).await {
            eprintln!("cronstable-gate: could not report the start of {job:?}: {e}");
        }
    }
    let status = child.wait().await;
    let finished_at = clock::now();
    let outcome = match status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            match (s.code(), s.signal()) {
                (Some(code), _) => GateOutcome::Exited(code),
                (None, Some(sig)) => GateOutcome::Signalled(sig),
                (None, None) => GateOutcome::Exited(1),
            }
        }
        // wait() fails only if the child was already reaped; nothing sensible to pass on.
        Err(e) => GateOutcome::SpawnFailed {
            not_found: false,
            message: format!("lost track of {:?}: {e}", config.command[0]),
        },
    };
    if reporting {
        let (code, sig) = match outcome {
            GateOutcome::Exited(c) => (Some(c), None),
            GateOutcome::Signalled(s) => (None, Some(s)),
            _ => (None, None),
        };
        let event = finished(
            started_at.timestamp_millis(),
            finished_at.timestamp_millis(),
            code,
            sig,
            String::new(),
        );
        if let Err(e) = coordinator.report(job, at_ms, kind, 1, event).await {
            eprintln!("cronstable-gate: could not report the finish of {job:?}: {e}");
        }
    }
    outcome
}

fn finished(
    started_ms: i64,
    finished_ms: i64,
    exit_code: Option<i32>,
    signal: Option<i32>,
    output_tail: String,
) -> pb::report_run_request::Event {
    pb::report_run_request::Event::Finished(pb::RunFinished {
        started_at_ms: started_ms,
        finished_at_ms: finished_ms,
        exit_code,
        signal,
        timed_out: false,
        output_tail,
        duration_ms: (finished_ms - started_ms).max(0) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 3, h, m, s).unwrap()
    }

    #[test]
    fn without_a_schedule_the_firing_is_the_current_minute() {
        let now = at(10, 17, 42) + TimeDelta::milliseconds(250);
        assert_eq!(firing_instant(None, now), at(10, 17, 0));
        assert_eq!(firing_instant(None, at(10, 17, 0)), at(10, 17, 0));
    }

    #[test]
    fn with_a_schedule_the_firing_is_its_latest_due_instant() {
        let hourly = Schedule::parse("0 * * * *", None).unwrap();
        // crond starts the gate a little after the instant; a late start still names it.
        assert_eq!(firing_instant(Some(&hourly), at(10, 0, 3)), at(10, 0, 0));
        assert_eq!(firing_instant(Some(&hourly), at(10, 59, 59)), at(10, 0, 0));
        let every5 = Schedule::parse("*/5 * * * *", None).unwrap();
        assert_eq!(firing_instant(Some(&every5), at(10, 7, 0)), at(10, 5, 0));
    }

    #[test]
    fn the_schedules_time_zone_moves_the_instant() {
        // 09:00 in Berlin is 08:00 UTC in December.
        let berlin = Schedule::parse("0 9 * * *", Some("Europe/Berlin")).unwrap();
        assert_eq!(firing_instant(Some(&berlin), at(8, 30, 0)), at(8, 0, 0));
    }

    #[test]
    fn a_schedule_without_instants_falls_back_to_the_minute() {
        let reboot = Schedule::parse("@reboot", None).unwrap();
        assert_eq!(firing_instant(Some(&reboot), at(10, 1, 30)), at(10, 1, 0));
    }

    #[test]
    fn exit_codes_pass_the_command_through_and_name_everything_else() {
        assert_eq!(exit_code(&GateOutcome::Exited(0)), 0);
        assert_eq!(exit_code(&GateOutcome::Exited(3)), 3);
        assert_eq!(exit_code(&GateOutcome::Signalled(9)), 137);
        assert_eq!(exit_code(&GateOutcome::Signalled(15)), 143);
        let skipped = GateOutcome::Skipped {
            reason: "not_leader".into(),
            message: String::new(),
        };
        assert_eq!(exit_code(&skipped), 0);
        assert_eq!(exit_code(&GateOutcome::Unavailable(String::new())), 69);
        assert_eq!(exit_code(&GateOutcome::UnknownJob(String::new())), 78);
        let missing = GateOutcome::SpawnFailed {
            not_found: true,
            message: String::new(),
        };
        assert_eq!(exit_code(&missing), 127);
        let denied = GateOutcome::SpawnFailed {
            not_found: false,
            message: String::new(),
        };
        assert_eq!(exit_code(&denied), 126);
    }
}
