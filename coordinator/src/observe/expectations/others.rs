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
pub async fn read(state: &CoordinatorState, judge: &Judge) -> Runs {
    if judge.jobs.values().all(|w| w.owned_since_ms.is_none()) {
        return Runs::default();
    }
    let status = state.view.borrow().status.clone();
    match status.as_ref() {
        ClusterStatus::Gossip(g) => from_peers(&g.peers),
        _ => Runs::default(),
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
                let ended = r.ended_at_ms.map(|at_ms| RunEnded {
                    at_ms,
                    duration_ms: r.duration_ms.unwrap_or_default(),
                    succeeded: r.succeeded.unwrap_or(false),
                });
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
