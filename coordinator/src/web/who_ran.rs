//! Who ran each firing of a job, as far as this node can know, for the timeline of
//! `GET /jobs/{name}/firings`: this node's ledger says only what ran *here*, and "elsewhere"
//! leaves the operator's question ("where did my 02:00 run?") open.
//!
//! - **etcd, filesystem**: a Leader firing's claim names the node that was answered RUN for it
//!   (and whether as a catch-up); a job with `expect:` also has every node's run records.
//! - **gossip**: each peer names its own recent runs of the jobs with `expect:` on `/peer`.
//! - **Kubernetes**, and jobs without either record: nothing; the firing stays "elsewhere".
//!
//! A store that cannot be read costs the names, never the timeline: the answer says why.

use std::collections::BTreeMap;

use cronstable_core::ClusterPolicy;

use crate::state::CoordinatorState;
use crate::status::ClusterStatus;

/// What is known of who ran one instant.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Ran {
    /// The nodes that ran it (or were answered RUN for it), in name order.
    pub(super) nodes: Vec<String>,
    /// It ran as a catch-up of a missed instant.
    pub(super) catch_up: bool,
}

/// Instant (Unix ms) → who ran it, for `job` over `from..=to`; and why some of it could not
/// be read, if so.
pub(super) async fn who_ran(
    core: &CoordinatorState,
    job: &str,
    policy: ClusterPolicy,
    (from, to): (i64, i64),
) -> (BTreeMap<i64, Ran>, Option<String>) {
    let mut out: BTreeMap<i64, Ran> = BTreeMap::new();
    let mut add = |at: i64, node: &str, catch_up: bool| {
        let ran = out.entry(at).or_default();
        if !ran.nodes.iter().any(|n| n == node) {
            ran.nodes.push(node.to_owned());
            ran.nodes.sort();
        }
        ran.catch_up |= catch_up;
    };
    let mut error = None;
    let status = core.view.borrow().status.clone();
    if let ClusterStatus::Gossip(g) = status.as_ref() {
        for row in g.peers.iter().filter(|r| r.status != "untrusted") {
            let node = row.node_name.as_deref().unwrap_or(&row.host);
            let runs = row.jobs.as_deref().into_iter().flatten();
            for r in runs.filter(|s| s.name == job).flat_map(|s| &s.recent_runs) {
                if (from..=to).contains(&r.scheduled_at_ms) {
                    add(r.scheduled_at_ms, node, false);
                }
            }
        }
    }
    if let Some(store) = core.records_store() {
        if policy == ClusterPolicy::Leader {
            match store.claims_of(job, from, to).await {
                Ok(claims) => {
                    for c in claims {
                        add(c.scheduled_at_ms, &c.node, c.catch_up);
                    }
                }
                Err(e) => error = Some(format!("the claims cannot be read: {e}")),
            }
        }
        if store.keeps_runs() {
            match store.runs_between(from, to).await {
                Ok(runs) => {
                    for r in runs.iter().filter(|r| r.job == job) {
                        add(r.scheduled_at_ms, &r.node, false);
                    }
                }
                Err(e) => error = Some(format!("the run records cannot be read: {e}")),
            }
        }
    }
    (out, error)
}
