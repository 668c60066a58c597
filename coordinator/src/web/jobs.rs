//! `GET /jobs`, `GET /jobs/{name}` and `GET /jobs/{name}/firings`: the registered jobs, their
//! next fire and recent runs, and for one job an explanation of every nominal instant.
//!
//! Keys follow the seed's `GET /jobs` spelling (camelCase: `clusterPolicy`, `clusterOwner`).
//! `clusterPolicy` appears only when election is configured and `clusterOwner` only under
//! `distribution: spread` (inventory §8.2), so the common single-node poll stays lean.
//!
//! Everything here reads the ledger of *this* node: a firing another node ran shows up as
//! `elsewhere` (this node's gate skipped it as not leader or not owner), and `/firings` adds
//! the nodes that ran each instant where the cluster's records name them
//! ([`super::who_ran`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::PoisonError;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use cronstable_core::schedule::Schedule;
use cronstable_core::{ClusterPolicy, FiringKind};
use serde::Deserialize;
use serde_json::{Value, json};

use super::cache::{ListKey, ViewFacts};
use super::json::{ClusterFields, JobRow, NextFire, Output, record_json, rfc3339};
use super::{ApiError, WebState};
use crate::clock::{now_ms, now_utc};
use crate::cluster::Election;
use crate::jobs::JobSet;
use crate::ledger::{Event, Outcome, Record, RunEnd, RunStatus, explain};

/// The most nominal instants one `/firings` answer explains.
const MAX_FIRINGS: usize = 500;
/// The window `/firings` explains when none is given.
const DEFAULT_WINDOW_MS: i64 = 60 * 60 * 1000;
/// Records `/jobs/{name}` returns, newest first.
const DETAIL_RECORDS: usize = 50;

fn view_facts(state: &WebState, set: &JobSet) -> ViewFacts {
    let view = state.core.view.borrow();
    let (election, spread) = match &view.election {
        Election::Off => (false, false),
        Election::NoManager { .. } | Election::Starting => (true, false),
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

impl ViewFacts {
    /// The cluster keys of one job's row.
    fn cluster_fields(&self, name: &str, policy: ClusterPolicy) -> ClusterFields<'_> {
        ClusterFields {
            policy: self.election.then(|| policy.as_str()),
            owner: if self.spread {
                self.owners.get(name).map(Option::as_deref)
            } else {
                None
            },
        }
    }
}

/// `GET /jobs`: served from [`super::cache::ListCache`] while nothing it shows has changed.
pub(super) async fn list(State(state): State<WebState>) -> Response {
    let set = state.core.registry.current();
    let facts = view_facts(&state, &set);
    let key = ListKey {
        job_set: set.clone(),
        job_set_id: set.id.to_string(),
        ledger_generation: state.core.ledger.generation(),
        breaches_generation: state.core.expectations.generation(),
        facts,
    };
    let now = now_ms();
    let body = state.list.get_or_build(key, now, |key| {
        let schedules = state.schedules.for_set(&set);
        let mut next_fires = state
            .next_fires
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut next_change = i64::MAX;
        // Written row by row into one buffer, each row under its job's ledger lock only.
        let mut out: Vec<u8> = Vec::with_capacity(set.jobs.len() * 800);
        out.extend_from_slice(b"{\"node_name\":");
        write_json(&mut out, &state.core.node_name());
        out.extend_from_slice(b",\"job_set_id\":");
        write_json(&mut out, &key.job_set_id);
        out.extend_from_slice(b",\"jobs\":[");
        for (i, (name, job)) in set.jobs.iter().enumerate() {
            let schedule = schedules.get(name).and_then(Option::as_ref);
            let next = next_fires.next_after(&key.job_set_id, name, schedule, now);
            if let Some(next) = next {
                next_change = next_change.min(next);
            }
            if i > 0 {
                out.push(b',');
            }
            let cluster = key.facts.cluster_fields(name, job.spec.cluster_policy);
            state.core.ledger.inspect(name, |records| {
                let status = RunStatus::of(records);
                let next = NextFire::of(schedule, next);
                let row = JobRow::new(name, job, next, cluster, status, Output::Omitted)
                    .with_breaches(&state.core.expectations.of(name), 1);
                write_json(&mut out, &row);
            });
        }
        out.extend_from_slice(b"]}");
        (Bytes::from(out), next_change)
    });
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Appends `value` as JSON. Serialising these types into memory cannot fail (string keys,
/// no maps with non-string keys), so a failure is a bug worth a log line, not a 500.
fn write_json(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    if let Err(e) = serde_json::to_writer(&mut *out, value) {
        tracing::error!(error = %e, "serialising GET /jobs failed");
    }
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
    let schedules = state.schedules.for_set(&set);
    let facts = view_facts(&state, &set);
    let schedule = schedules.get(&name).and_then(Option::as_ref);
    let next = NextFire::of(
        schedule,
        schedule
            .and_then(|s| s.next_after(now_utc()))
            .map(|t| t.timestamp_millis()),
    );
    let cluster = facts.cluster_fields(&name, job.spec.cluster_policy);
    let (mut v, history) = state.core.ledger.inspect(&name, |records| {
        let status = RunStatus::of(records);
        let row = JobRow::new(&name, job, next, cluster, status, Output::Included)
            .with_breaches(&state.core.expectations.of(&name), usize::MAX);
        let history: Vec<Value> = records
            .iter()
            .rev()
            .take(DETAIL_RECORDS)
            .map(record_json)
            .collect();
        (serde_json::to_value(row).unwrap_or_default(), history)
    });
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
    let policy = set
        .get(&name)
        .ok_or_else(|| unknown_job(&name))?
        .spec
        .cluster_policy;
    let now = now_ms();
    let to = window.to.unwrap_or(now);
    let from = window.from.unwrap_or(to - DEFAULT_WINDOW_MS);
    if from > to {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("from ({from}) is after to ({to})"),
        ));
    }
    let schedules = state.schedules.for_set(&set);
    let schedule = schedules.get(&name).and_then(Option::as_ref);
    let records = state.core.ledger.records(&name);
    let known_since = records.first().map(|r| r.recorded_at_ms);
    let mut by_instant: HashMap<i64, Vec<&Record>> = HashMap::new();
    for r in &records {
        by_instant.entry(r.scheduled_at_ms).or_default().push(r);
    }
    let instants = nominal_instants(schedule, from, to.min(now));
    let span = (
        instants.first().copied().unwrap_or(from),
        instants.last().copied().unwrap_or(to),
    );
    let (who, who_error) = super::who_ran::who_ran(&state.core, &name, policy, span).await;
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
                .find(|r| matches!(r.event, Event::Finished(RunEnd { .. })))
                .map(|r| record_json(r));
            let ran = who.get(&t);
            let caught_up = recs.iter().any(|r| {
                r.kind == FiringKind::CatchUp
                    && matches!(r.event, Event::Started { .. } | Event::Finished(_))
            });
            json!({
                "scheduledAt": rfc3339(t),
                "scheduledAtMs": t,
                "outcome": outcome,
                "reason": reason,
                "run": run,
                "ranOn": ran.map(|r| r.nodes.clone()),
                "catchUp": caught_up || ran.is_some_and(|r| r.catch_up),
            })
        })
        .collect();
    // Manual and @reboot runs have no nominal instant; list them beside the schedule.
    let other_runs: Vec<Value> = records
        .iter()
        .filter(|r| matches!(r.kind, FiringKind::Manual | FiringKind::Reboot))
        .filter(|r| matches!(r.event, Event::Finished(RunEnd { .. })))
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
        "ranOnUnknown": who_error,
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
