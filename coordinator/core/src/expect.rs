//! Expectations: what an operator expects of every firing of a job (`expect:`), so that a
//! firing that did not run, ran twice, or ran too long is reported once for the cluster,
//! instead of being found later by reading every node's history.
//!
//! Two settings, each optional:
//!
//! - `completeWithin`: some run of the firing (any node, any attempt, a catch-up included)
//!   finished successfully no later than this long after the nominal instant. If none did, the
//!   firing is **missed**.
//! - `maxDuration`: no run of the firing lasted longer than this. A run still going when it
//!   passes is **too long** at that moment, not only once it ends: a hung job is found while it
//!   hangs.
//!
//! A firing of a `Leader` job that ran more than once (two runs of one attempt anywhere in the
//! cluster) is **duplicated**, whichever of the two is set: only jobs with an expectation are
//! watched, and for a Leader job a second run is never expected.
//!
//! This module is the pure part: the settings and their one check ([`expectation_from`],
//! shared by the YAML job file, the crontab annotations and a gRPC registration), and the
//! judgement of one firing from the runs seen of it ([`judge`]). Who judges, and where the runs
//! come from, is the coordinator's business.

use std::time::Duration;

use crate::duration::format_duration;
pub use crate::job::Expectation;
use crate::schedule::Schedule;

/// The longest `completeWithin`: the judge keeps every firing of the job until its deadline,
/// and the nodes keep the runs it reads that long.
pub const MAX_COMPLETE_WITHIN: Duration = Duration::from_secs(24 * 3600);

/// The most instants of the schedule `completeWithin` may span: the owner and each peer
/// remember a job's recent runs in a bounded ring (about 66 firings in 200 records), and a
/// firing must still be remembered when it is judged.
pub const MAX_INSTANTS_WITHIN: u32 = 50;

/// Checks a job's `expect` keys against its schedule; `None` when none is given. On failure,
/// every problem as (key, sentence), for the caller to place.
pub fn expectation_from(
    keys: Expectation,
    schedule: &Schedule,
) -> Result<Option<Expectation>, Vec<(&'static str, String)>> {
    if keys.is_empty() {
        return Ok(None);
    }
    let mut problems = Vec::new();
    for (key, value) in [
        ("expect.completeWithin", keys.complete_within),
        ("expect.maxDuration", keys.max_duration),
    ] {
        if value == Some(Duration::ZERO) {
            problems.push((
                key,
                "must be more than 0 (leave it out for none)".to_owned(),
            ));
        }
    }
    if let Some(within) = keys.complete_within {
        if schedule.is_reboot() {
            problems.push((
                "expect.completeWithin",
                "an @reboot job has no instants to complete by (maxDuration still applies)"
                    .to_owned(),
            ));
        } else if within > MAX_COMPLETE_WITHIN {
            problems.push((
                "expect.completeWithin",
                format!(
                    "{} is longer than the limit of {}",
                    format_duration(within),
                    format_duration(MAX_COMPLETE_WITHIN)
                ),
            ));
        } else if let Some(gap) = crate::catch_up::shortest_gap(schedule)
            && within > gap * MAX_INSTANTS_WITHIN
        {
            problems.push((
                "expect.completeWithin",
                format!(
                    "{} spans more than {MAX_INSTANTS_WITHIN} instants of the schedule (one \
                     every {}): the runs it is judged on are not remembered that long",
                    format_duration(within),
                    format_duration(gap)
                ),
            ));
        }
    }
    if problems.is_empty() {
        Ok(Some(keys))
    } else {
        Err(problems)
    }
}

/// One run of a firing, as some node reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSeen {
    /// The node it ran on.
    pub node: String,
    /// Its attempt number (1 for the first; a retry's is higher).
    pub attempt: u32,
    /// When it started (Unix ms, on the node that ran it).
    pub started_at_ms: i64,
    /// How it ended, once it has.
    pub ended: Option<RunEnded>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEnded {
    /// When (Unix ms, on the node that ran it).
    pub at_ms: i64,
    /// How long it ran, as its executor measured it.
    pub duration_ms: u64,
    /// Exit 0 within its timeout.
    pub succeeded: bool,
}

/// What went wrong with a firing. The spelling is the metric label and the webhook's `breach`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Breach {
    /// No run finished successfully within `completeWithin`.
    Missed,
    /// A Leader firing ran more than once.
    Duplicated,
    /// A run lasted (or has been going) longer than `maxDuration`.
    TooLong,
}

impl Breach {
    /// Every breach, in label order.
    pub const ALL: [Breach; 3] = [Self::Missed, Self::Duplicated, Self::TooLong];

    /// The label spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missed => "missed",
            Self::Duplicated => "duplicated",
            Self::TooLong => "too_long",
        }
    }
}

/// A breach found, with the sentence that explains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Which expectation failed.
    pub breach: Breach,
    /// Why, naming the setting and the runs.
    pub why: String,
    /// From when it could be known (Unix ms): the deadline of a missed firing, the start of
    /// the second run of a duplicate, the moment a run passed `maxDuration`. A judge that
    /// took over after that leaves it to the judge before it.
    pub since_ms: i64,
}

/// What the judge may assume when it looks at one firing.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// The job's expectation.
    pub expect: Expectation,
    /// Whether two runs of one attempt are a breach (a `Leader` job).
    pub single_run: bool,
    /// The firing's nominal instant (Unix ms).
    pub instant_ms: i64,
    /// Now (Unix ms).
    pub now_ms: i64,
    /// How long a finished run may take to be seen by the judge: `missed` is judged only this
    /// long after the deadline, so a run that finished just in time is not reported missed
    /// because its report was on the way.
    pub grace: Duration,
}

/// Judges one firing from the runs seen of it so far: every breach it shows now. A caller
/// reports each breach of a firing once, and may call again as more runs are seen (a
/// duplicate or a long run can show up late).
pub fn judge(look: Look, runs: &[RunSeen]) -> Vec<Finding> {
    let mut found = Vec::new();
    if let Some(within) = look.expect.complete_within {
        let deadline = look.instant_ms.saturating_add(ms(within));
        if look.now_ms >= deadline.saturating_add(ms(look.grace))
            && !met(look.expect, look.instant_ms, runs)
        {
            found.push(Finding {
                breach: Breach::Missed,
                why: missed_why(within, runs),
                since_ms: deadline,
            });
        }
    }
    if let Some((why, since_ms)) = duplicated_why(runs).filter(|_| look.single_run) {
        found.push(Finding {
            breach: Breach::Duplicated,
            why,
            since_ms,
        });
    }
    if let Some(max) = look.expect.max_duration {
        let limit = ms(max);
        let long = runs.iter().find(|r| match r.ended {
            Some(e) => e.duration_ms > limit as u64,
            None => look.now_ms.saturating_sub(r.started_at_ms) > limit,
        });
        if let Some(r) = long {
            let how = match r.ended {
                Some(e) => format!(
                    "ran {}",
                    format_duration(Duration::from_millis(e.duration_ms))
                ),
                None => "is still running".to_owned(),
            };
            found.push(Finding {
                breach: Breach::TooLong,
                since_ms: r.started_at_ms.saturating_add(limit),
                why: format!(
                    "the run on {} (attempt {}) {how}, longer than maxDuration {}",
                    r.node,
                    r.attempt,
                    format_duration(max)
                ),
            });
        }
    }
    found
}

fn missed_why(within: Duration, runs: &[RunSeen]) -> String {
    let within = format_duration(within);
    let ended: Vec<_> = runs
        .iter()
        .filter_map(|r| r.ended.map(|e| (r, e)))
        .collect();
    if runs.is_empty() {
        format!("no node ran it within completeWithin {within}")
    } else if ended.iter().any(|(_, e)| e.succeeded) {
        format!("its successful run finished after completeWithin {within}")
    } else if ended.is_empty() {
        format!("a run started but none finished within completeWithin {within}")
    } else {
        format!("no run succeeded within completeWithin {within}")
    }
}

/// Two runs of one attempt: on two nodes, or twice on one node (two start times); with the
/// later start.
fn duplicated_why(runs: &[RunSeen]) -> Option<(String, i64)> {
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if a.attempt == b.attempt && (a.node != b.node || a.started_at_ms != b.started_at_ms) {
                let why = if a.node == b.node {
                    format!("attempt {} ran twice on {}", a.attempt, a.node)
                } else {
                    format!(
                        "attempt {} ran on both {} and {}",
                        a.attempt, a.node, b.node
                    )
                };
                return Some((why, a.started_at_ms.max(b.started_at_ms)));
            }
        }
    }
    None
}

/// True when some run of the firing finished successfully by its deadline: the firing met
/// `completeWithin` for good, whatever is later forgotten of its runs.
pub fn met(expect: Expectation, instant_ms: i64, runs: &[RunSeen]) -> bool {
    let Some(within) = expect.complete_within else {
        return false;
    };
    let deadline = instant_ms.saturating_add(ms(within));
    runs.iter()
        .filter_map(|r| r.ended)
        .any(|e| e.succeeded && e.at_ms <= deadline)
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
