//! What the other nodes said of their runs, read once per pass of the judge: on gossip each
//! peer's first-hand report of its recent runs of the jobs with `expect` (on `/peer`); on the
//! lease stores with per-firing claims, the run records every node writes to the store.

use std::collections::HashMap;

use cronstable_core::expect::{RunEnded, RunSeen};

use super::Judge;

use crate::ledger::runs::InstantRun;
use crate::state::CoordinatorState;
use crate::status::{ClusterStatus, PeerRow};

/// The other nodes' runs, by job.
#[derive(Debug, Default)]
pub struct Runs {
    by_job: HashMap<String, Vec<InstantRun>>,
}

impl Runs {
    /// The runs of `job` of instants at or after `since_ms`.
    pub fn of<'a>(&'a self, job: &str, since_ms: i64) -> impl Iterator<Item = InstantRun> + 'a {
        self.by_job
            .get(job)
            .into_iter()
            .flatten()
            .filter(move |r| r.scheduled_at_ms >= since_ms)
            .cloned()
    }

    /// Adds one run of `job`.
    pub fn add(&mut self, job: &str, run: InstantRun) {
        self.by_job.entry(job.to_owned()).or_default().push(run);
    }
}

/// Reads what the other nodes said, for the jobs `judge` owns; nothing when it owns none.
pub async fn read(state: &CoordinatorState, judge: &mut Judge) -> Runs {
    if judge.jobs.values().all(|w| w.owned_since_ms.is_none()) {
        return Runs::default();
    }
    let status = state.view.borrow().status.clone();
    if let ClusterStatus::Gossip(g) = status.as_ref() {
        return from_peers(&g.peers);
    }
    let Some(store) = state.records_store().filter(|s| s.keeps_runs()) else {
        return Runs::default();
    };
    // From the oldest firing an owned job still watches (the next pass opens only instants
    // after its cursor).
    let from = judge
        .jobs
        .values()
        .filter(|w| w.owned_since_ms.is_some())
        .map(|w| {
            w.open
                .keys()
                .next()
                .copied()
                .unwrap_or(w.cursor_ms)
                .min(w.cursor_ms)
        })
        .min()
        .unwrap_or(i64::MAX);
    from_store(state, &store, from, &mut judge.store_error).await
}

/// The other nodes' run records of the instants from `from` on. A store that cannot be read
/// gives nothing this pass (one WARNING per change of error).
async fn from_store(
    state: &CoordinatorState,
    store: &crate::lease::records_store::RecordsStore,
    from: i64,
    last_error: &mut Option<String>,
) -> Runs {
    let me = state.node_name();
    match store.runs_between(from, i64::MAX).await {
        Ok(records) => {
            if last_error.take().is_some() {
                tracing::info!("expectations read the run records again");
            }
            let mut runs = Runs::default();
            // This node's own runs come from its ledger, which also knows the ones its
            // writer has not stored yet.
            for r in records.into_iter().filter(|r| r.node != me) {
                let ended = ended(r.ended_at_ms, r.duration_ms, r.succeeded);
                let run = RunSeen {
                    node: r.node,
                    attempt: r.attempt,
                    started_at_ms: r.started_at_ms,
                    ended,
                };
                let scheduled_at_ms = r.scheduled_at_ms;
                runs.add(
                    &r.job,
                    InstantRun {
                        scheduled_at_ms,
                        run,
                    },
                );
            }
            runs
        }
        Err(e) => {
            let said = e.to_string();
            if last_error.as_ref() != Some(&said) {
                tracing::warn!(
                    "expectations cannot read the run records ({said}); firings are judged on \
                     this node's runs alone until they can"
                );
                *last_error = Some(said);
            }
            Runs::default()
        }
    }
}

/// Each answering peer's own recent runs, from its last `/peer` body.
pub fn from_peers(rows: &[PeerRow]) -> Runs {
    let mut runs = Runs::default();
    for row in rows
        .iter()
        .filter(|r| r.status != "self" && r.status != "untrusted")
    {
        let Some(jobs) = row.jobs.as_deref() else {
            continue;
        };
        let node = row.node_name.clone().unwrap_or_else(|| row.host.clone());
        for job in jobs {
            for r in &job.recent_runs {
                let ended = ended(r.ended_at_ms, r.duration_ms, r.succeeded);
                runs.add(
                    &job.name,
                    InstantRun {
                        scheduled_at_ms: r.scheduled_at_ms,
                        run: RunSeen {
                            node: node.clone(),
                            attempt: r.attempt,
                            started_at_ms: r.started_at_ms,
                            ended,
                        },
                    },
                );
            }
        }
    }
    runs
}

/// How a reported run ended, from the optional end fields a peer's report and a store's run
/// record share; `None` while it runs.
fn ended(at: Option<i64>, duration_ms: Option<u64>, succeeded: Option<bool>) -> Option<RunEnded> {
    at.map(|at_ms| RunEnded {
        at_ms,
        duration_ms: duration_ms.unwrap_or_default(),
        succeeded: succeeded.unwrap_or(false),
    })
}
