//! `cronstable verify`: checks a run history against its job set with the core's schedule
//! checker (seed 003: "instrument jobs to track whether they actually ran").
//!
//! Inputs are files, so operators can use it on their own clusters:
//!
//! - a **jobs file**, JSON: `{"jobs": [CheckJob…], "exempt": [...], "nemesis": [...],
//!   "finalHeal": ms, "recoveryBoundMs": ms, "testStart": ms}` (only `jobs` is required; the
//!   shapes are the checker's, camelCase);
//! - one or more **run logs** in the harness format, JSON Lines, one event per line:
//!   `{"ev":"start","job":"j1","node":"n1","runId":"…","t":<ms>}` and the matching
//!   `{"ev":"end",…}`. A job appends both with `O_APPEND` single writes, so concurrent runs on
//!   one host cannot interleave within a line. A start may carry `"scheduledAt":<ms>`, the
//!   nominal instant (`CRONSTABLE_SCHEDULED_AT`): the run is then judged against that instant
//!   alone, so a catch-up is matched to the instant it caught up however late it started (up
//!   to the job's `catchUpWindowMs`).
//!
//! Malformed lines are collected as errors naming file and line, never a crash; they make the
//! verdict `unknown` unless a violation was found anyway.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cronstable_core::checker::{CheckInput, CheckJob, Exemption, Period, Run};
use serde::Deserialize;

/// Why the inputs could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The jobs file is not the expected JSON.
    #[error("{path}: not a jobs file: {reason}")]
    Jobs {
        /// The file.
        path: PathBuf,
        /// What serde said (with line and column).
        reason: String,
    },
}

/// The jobs file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JobsFile {
    jobs: Vec<CheckJob>,
    #[serde(default)]
    exempt: Vec<Exemption>,
    #[serde(default)]
    nemesis: Vec<Period>,
    #[serde(default)]
    final_heal: Option<i64>,
    #[serde(default)]
    recovery_bound_ms: i64,
    #[serde(default)]
    test_start: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    ev: String,
    job: String,
    node: String,
    run_id: String,
    t: i64,
    #[serde(default)]
    scheduled_at: Option<i64>,
}

fn read(path: &Path) -> Result<String, VerifyError> {
    std::fs::read_to_string(path).map_err(|source| VerifyError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Pairs start and end events into runs; bad lines become `errors`.
pub fn parse_run_log(path: &Path, text: &str, errors: &mut Vec<String>) -> Vec<Run> {
    let mut open: BTreeMap<(String, String), Run> = BTreeMap::new();
    let mut done = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e: Event = match serde_json::from_str(line) {
            Ok(e) => e,
            Err(err) => {
                errors.push(format!("{}:{}: {err}", path.display(), i + 1));
                continue;
            }
        };
        let key = (e.node.clone(), e.run_id.clone());
        match e.ev.as_str() {
            "start" => {
                open.insert(
                    key,
                    Run {
                        job: e.job,
                        node: e.node,
                        start: e.t,
                        end: None,
                        run_id: e.run_id,
                        scheduled_at: e.scheduled_at,
                    },
                );
            }
            "end" => match open.remove(&key) {
                Some(mut r) => {
                    r.end = Some(e.t);
                    done.push(r);
                }
                None => errors.push(format!(
                    "{}:{}: end of run {} on {} without its start",
                    path.display(),
                    i + 1,
                    e.run_id,
                    e.node
                )),
            },
            other => errors.push(format!(
                "{}:{}: unknown event {other:?} (expected start or end)",
                path.display(),
                i + 1
            )),
        }
    }
    // Runs with no end never finished (killed, or still running at the read).
    done.extend(open.into_values());
    done
}

/// Builds the checker's input from a jobs file and run logs, judged as of `read_time`.
pub fn load(jobs: &Path, logs: &[PathBuf], read_time: i64) -> Result<CheckInput, VerifyError> {
    let file: JobsFile = serde_json::from_str(&read(jobs)?).map_err(|e| VerifyError::Jobs {
        path: jobs.to_owned(),
        reason: e.to_string(),
    })?;
    let mut errors = Vec::new();
    let mut runs = Vec::new();
    for log in logs {
        runs.extend(parse_run_log(log, &read(log)?, &mut errors));
    }
    let test_start = file
        .test_start
        .or_else(|| file.jobs.iter().map(|j| j.start).min())
        .unwrap_or(read_time);
    Ok(CheckInput {
        jobs: file.jobs,
        runs,
        read_time,
        test_start,
        nemesis: file.nemesis,
        exempt: file.exempt,
        final_heal: file.final_heal,
        recovery_bound_ms: file.recovery_bound_ms,
        errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_and_ends_pair_up_and_bad_lines_are_reported() {
        let log = r#"{"ev":"start","job":"j1","node":"n1","runId":"a","t":1000}
not json
{"ev":"end","job":"j1","node":"n1","runId":"a","t":2000}
{"ev":"start","job":"j1","node":"n2","runId":"b","t":1500}
{"ev":"end","job":"j1","node":"n2","runId":"zzz","t":1600}
{"ev":"restart","job":"j1","node":"n2","runId":"b","t":1700}
"#;
        let mut errors = Vec::new();
        let mut runs = parse_run_log(Path::new("h1.jsonl"), log, &mut errors);
        runs.sort();
        assert_eq!(runs.len(), 2);
        assert_eq!((runs[0].start, runs[0].end), (1000, Some(2000)));
        assert_eq!((runs[1].start, runs[1].end), (1500, None), "never finished");
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].starts_with("h1.jsonl:2: "), "{errors:?}");
        assert_eq!(runs[0].scheduled_at, None);
    }

    #[test]
    fn a_start_may_name_its_nominal_instant() {
        let log = r#"{"ev":"start","job":"j1","node":"n1","runId":"a","t":9000,"scheduledAt":4000}
{"ev":"end","job":"j1","node":"n1","runId":"a","t":9500}
"#;
        let mut errors = Vec::new();
        let runs = parse_run_log(Path::new("h1.jsonl"), log, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            (runs[0].start, runs[0].end, runs[0].scheduled_at),
            (9000, Some(9500), Some(4000))
        );
    }
}
