//! `GET /jobs`, `GET /jobs/{name}` and `GET /jobs/{name}/firings`: the registered jobs, their
//! next fire and recent runs, and for one job an explanation of every nominal instant.
//!
//! Keys follow the seed's `GET /jobs` spelling (camelCase: `clusterPolicy`, `clusterOwner`).
//! `clusterPolicy` appears only when election is configured and `clusterOwner` only under
//! `distribution: spread` (inventory §8.2), so the common single-node poll stays lean.
//!
//! Everything here reads the ledger of *this* node: a firing another node ran shows up as
//! `elsewhere` (this node's gate skipped it as not leader or not owner).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use chrono::{DateTime, SecondsFormat, Utc};
use cronstable_core::schedule::Schedule;
use cronstable_core::{ClusterPolicy, FiringKind};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, WebState};
use crate::clock::now_ms;
use crate::cluster::Election;
use crate::jobs::{JobSet, RegisteredJob};
use crate::ledger::{Event, Outcome, Record, explain};

/// The most nominal instants one `/firings` answer explains.
const MAX_FIRINGS: usize = 500;
/// The window `/firings` explains when none is given.
const DEFAULT_WINDOW_MS: i64 = 30 * 60 * 1000;
/// Records `/jobs/{name}` returns, newest first.
const DETAIL_RECORDS: usize = 50;

/// Parsed schedules of the current job set, so `/jobs` over a thousand jobs does not parse a
/// thousand cron expressions per request. Rebuilt when the job-set ID changes.
#[derive(Debug, Default)]
pub(crate) struct ScheduleCache {
    /// The job-set ID the schedules were parsed for, and the schedules.
    parsed: Mutex<Option<(String, Schedules)>>,
}

/// Each job's parsed schedule; `None` where it does not parse (the shim reported that).
type Schedules = Arc<HashMap<String, Option<Schedule>>>;

impl ScheduleCache {
    fn for_set(&self, set: &JobSet) -> Schedules {
        let id = set.id.to_string();
        let mut cached = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((cached_id, map)) = cached.as_ref()
            && *cached_id == id
        {
            return map.clone();
        }
        let map: Arc<HashMap<_, _>> = Arc::new(
            set.jobs
                .iter()
                .map(|(name, job)| {
                    let spec = &job.spec;
                    let parsed = Schedule::parse(&spec.schedule, spec.timezone.as_deref()).ok();
                    (name.clone(), parsed)
                })
                .collect(),
        );
        *cached = Some((id, map.clone()));
        map
    }
}

fn rfc3339(ms: i64) -> Option<String> {
    DateTime::<Utc>::from_timestamp_millis(ms).map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// What the cluster view says about policies and owners, read once per request.
struct ViewFacts {
    election: bool,
    spread: bool,
    owners: BTreeMap<String, Option<String>>,
}

fn view_facts(state: &WebState, set: &JobSet) -> ViewFacts {
    let view = state.core.view.borrow();
    let (election, spread) = match &view.election {
        Election::Off => (false, false),
        Election::NoManager { .. } => (true, false),
        Election::Managed(m) => (true, m.spread),
    };
    let now = tokio::time::Instant::now();
    let owners = if spread {
        set.jobs
            .iter()
            .filter(|(_, j)| j.spec.cluster_policy != ClusterPolicy::EveryNode)
            .map(|(name, j)| {
                (
                    name.clone(),
                    view.owner_of(name, j.spec.cluster_policy, now),
                )
            })
            .collect()
    } else {
        BTreeMap::new()
    };
    ViewFacts {
        election,
        spread,
        owners,
    }
}

/// The newest finished run, whether one is running, and the newest gate decision.
pub(super) fn run_summary(records: &VecDeque<Record>) -> Value {
    let mut last_run = Value::Null;
    let mut running = false;
    let mut last_decision = Value::Null;
    let mut finished: Vec<(i64, u32)> = Vec::new();
    for r in records.iter().rev() {
        match &r.event {
            Event::Finished { .. } => {
                if last_run.is_null() {
                    last_run = record_json(r);
                }
                finished.push((r.scheduled_at_ms, r.attempt));
            }
            Event::Started { .. } if !finished.contains(&(r.scheduled_at_ms, r.attempt)) => {
                running = true;
            }
            Event::Decided { .. } if last_decision.is_null() => last_decision = record_json(r),
            _ => {}
        }
    }
    json!({ "running": running, "lastRun": last_run, "lastDecision": last_decision })
}

/// One ledger record as JSON.
fn record_json(r: &Record) -> Value {
    let mut v = json!({
        "scheduledAt": rfc3339(r.scheduled_at_ms),
        "scheduledAtMs": r.scheduled_at_ms,
        "kind": kind_str(r.kind),
        "attempt": r.attempt,
        "node": r.node,
        "recordedAt": rfc3339(r.recorded_at_ms),
    });
    let extra = match &r.event {
        Event::Decided { verdict, reason } => {
            json!({"event": "decided", "verdict": verdict.as_str(), "reason": reason.code()})
        }
        Event::Started { at_ms, pid } => {
            json!({"event": "started", "startedAt": rfc3339(*at_ms), "pid": pid})
        }
        Event::Finished {
            started_at_ms,
            finished_at_ms,
            duration_ms,
            exit_code,
            signal,
            timed_out,
            output_tail,
        } => json!({
            "event": "finished",
            "startedAt": rfc3339(*started_at_ms),
            "finishedAt": rfc3339(*finished_at_ms),
            "durationMs": duration_ms,
            "exitCode": exit_code,
            "signal": signal,
            "timedOut": timed_out,
            "succeeded": *exit_code == Some(0) && !timed_out,
            "outputTail": output_tail,
        }),
        Event::Skipped { reason, message } => json!({
            "event": "skipped",
            "reason": reason.map_or("unknown", |r| r.code()),
            "message": message,
        }),
        Event::HandedOff {
            remaining_attempts,
            transferred,
        } => json!({
            "event": "handed_off",
            "remainingAttempts": remaining_attempts,
            "transferred": transferred,
        }),
    };
    if let (Value::Object(v), Value::Object(extra)) = (&mut v, extra) {
        v.extend(extra);
    }
    v
}

fn kind_str(kind: FiringKind) -> &'static str {
    match kind {
        FiringKind::Scheduled => "scheduled",
        FiringKind::Reboot => "reboot",
        FiringKind::Retry { .. } => "retry",
        FiringKind::Manual => "manual",
    }
}

/// The definition fields of one job, plus policy and owner where the view calls for them.
fn job_json(
    name: &str,
    job: &RegisteredJob,
    schedule: Option<&Schedule>,
    facts: &ViewFacts,
    now: DateTime<Utc>,
) -> Value {
    let spec = &job.spec;
    let next = schedule
        .and_then(|s| s.next_after(now))
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true));
    let mut v = json!({
        "name": name,
        "schedule": spec.schedule,
        "timezone": spec.timezone,
        "command": spec.command,
        "executor": job.executor_id,
        "concurrencyPolicy": spec.concurrency_policy.as_str(),
        "retries": spec.retry.retries,
        "nextFire": next,
    });
    if facts.election {
        v["clusterPolicy"] = json!(spec.cluster_policy.as_str());
    }
    if facts.spread
        && let Some(owner) = facts.owners.get(name)
    {
        v["clusterOwner"] = json!(owner);
    }
    v
}

fn now_utc() -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(now_ms()).unwrap_or_default()
}

/// `GET /jobs`.
pub(super) async fn list(State(state): State<WebState>) -> Json<Value> {
    let set = state.core.registry.current();
    let schedules = state.jobs.for_set(&set);
    let facts = view_facts(&state, &set);
    let now = now_utc();
    let jobs: Vec<Value> = set
        .jobs
        .iter()
        .map(|(name, job)| {
            let schedule = schedules.get(name).and_then(Option::as_ref);
            let mut v = job_json(name, job, schedule, &facts, now);
            let summary = state.core.ledger.inspect(name, run_summary);
            if let (Value::Object(v), Value::Object(s)) = (&mut v, summary) {
                v.extend(s);
            }
            v
        })
        .collect();
    Json(json!({
        "node_name": state.core.node_name(),
        "job_set_id": set.id.to_string(),
        "jobs": jobs,
    }))
}

fn unknown_job(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no job named {name:?} is registered on this node"),
    )
}

/// `GET /jobs/{name}`: the job, its run summary, and its newest records (output tails
/// included).
pub(super) async fn detail(
    State(state): State<WebState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let set = state.core.registry.current();
    let job = set.get(&name).ok_or_else(|| unknown_job(&name))?;
    let schedules = state.jobs.for_set(&set);
    let facts = view_facts(&state, &set);
    let schedule = schedules.get(&name).and_then(Option::as_ref);
    let mut v = job_json(&name, job, schedule, &facts, now_utc());
    let (summary, history) = state.core.ledger.inspect(&name, |records| {
        let history: Vec<Value> = records
            .iter()
            .rev()
            .take(DETAIL_RECORDS)
            .map(record_json)
            .collect();
        (run_summary(records), history)
    });
    if let (Value::Object(v), Value::Object(s)) = (&mut v, summary) {
        v.extend(s);
    }
    v["history"] = json!(history);
    Ok(Json(v))
}

/// `/firings` query: a window in Unix ms.
#[derive(Debug, Deserialize)]
pub(super) struct Window {
    from: Option<i64>,
    to: Option<i64>,
}

/// `GET /jobs/{name}/firings?from=MS&to=MS`: every nominal instant of the job's schedule in
/// the window (default the last 30 minutes, at most the newest 500), each with what became of
/// it on this node and why. Instants older than the oldest record the bounded ledger still
/// holds are `unknown`, not `no_record`: the ledger forgot them, nothing says they were missed.
pub(super) async fn firings(
    State(state): State<WebState>,
    Path(name): Path<String>,
    window: Result<Query<Window>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    // axum's own rejection is plain text; the API answers JSON everywhere (MN-10).
    let Query(window) = window.map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "bad query: {}; from and to are Unix milliseconds",
                e.body_text()
            ),
        )
    })?;
    let set = state.core.registry.current();
    set.get(&name).ok_or_else(|| unknown_job(&name))?;
    let now = now_ms();
    let to = window.to.unwrap_or(now);
    let from = window.from.unwrap_or(to - DEFAULT_WINDOW_MS);
    if from > to {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("from ({from}) is after to ({to})"),
        ));
    }
    let schedules = state.jobs.for_set(&set);
    let schedule = schedules.get(&name).and_then(Option::as_ref);
    let records = state.core.ledger.records(&name);
    let known_since = records.first().map(|r| r.recorded_at_ms);
    let mut by_instant: HashMap<i64, Vec<&Record>> = HashMap::new();
    for r in &records {
        by_instant.entry(r.scheduled_at_ms).or_default().push(r);
    }
    let instants = nominal_instants(schedule, from, to.min(now));
    let firings: Vec<Value> = instants
        .iter()
        .map(|&t| {
            let recs = by_instant.get(&t).map(Vec::as_slice).unwrap_or_default();
            let (outcome, reason) = explain(recs);
            let outcome = match outcome {
                Outcome::NoRecord if known_since.is_none_or(|k| t < k) => "unknown",
                o => o.as_str(),
            };
            let run = recs
                .iter()
                .rev()
                .find(|r| matches!(r.event, Event::Finished { .. }))
                .map(|r| record_json(r));
            json!({
                "scheduledAt": rfc3339(t),
                "scheduledAtMs": t,
                "outcome": outcome,
                "reason": reason,
                "run": run,
            })
        })
        .collect();
    // Manual and @reboot runs have no nominal instant; list them beside the schedule.
    let other_runs: Vec<Value> = records
        .iter()
        .filter(|r| matches!(r.kind, FiringKind::Manual | FiringKind::Reboot))
        .filter(|r| matches!(r.event, Event::Finished { .. }))
        .filter(|r| (from..=to).contains(&r.recorded_at_ms))
        .map(record_json)
        .collect();
    Ok(Json(json!({
        "job": name,
        "node_name": state.core.node_name(),
        "from": rfc3339(from),
        "to": rfc3339(to),
        "knownSince": known_since.and_then(rfc3339),
        "truncated": instants.len() == MAX_FIRINGS,
        "firings": firings,
        "otherRuns": other_runs,
    })))
}

/// The schedule's due instants in `[from, to]` (Unix ms), the newest [`MAX_FIRINGS`].
fn nominal_instants(schedule: Option<&Schedule>, from: i64, to: i64) -> Vec<i64> {
    let (Some(schedule), Some(start)) = (
        schedule,
        DateTime::<Utc>::from_timestamp_millis(from - 1000),
    ) else {
        return Vec::new();
    };
    let mut out = VecDeque::with_capacity(MAX_FIRINGS);
    let mut cursor = start;
    while let Some(t) = schedule.next_after(cursor) {
        let ms = t.timestamp_millis();
        if ms > to {
            break;
        }
        if ms >= from {
            if out.len() == MAX_FIRINGS {
                out.pop_front();
            }
            out.push_back(ms);
        }
        cursor = t;
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nominal_instants_cover_the_window_and_keep_the_newest() {
        let every_minute = Schedule::parse("* * * * *", None).unwrap();
        let t0 = 1_700_000_040_000; // a whole minute
        assert_eq!(
            nominal_instants(Some(&every_minute), t0, t0 + 120_000),
            vec![t0, t0 + 60_000, t0 + 120_000]
        );
        let every_second = Schedule::parse("* * * * * *", None).unwrap();
        let many = nominal_instants(Some(&every_second), t0, t0 + 3_600_000);
        assert_eq!(many.len(), MAX_FIRINGS);
        assert_eq!(*many.last().unwrap(), t0 + 3_600_000);
        let reboot = Schedule::parse("@reboot", None).unwrap();
        assert!(nominal_instants(Some(&reboot), t0, t0 + 60_000).is_empty());
    }
}
