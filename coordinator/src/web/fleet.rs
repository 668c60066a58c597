//! `GET /fleet`: the fleet-wide picture of what ran where (inventory §2.13, §8.2).
//!
//! On gossip every node piggybacks a compact per-job run summary (running, next fire, last
//! finished run) on its `/peer` body; this node lists its own summary beside each peer's from
//! the last successful poll, so a peer's entry is at most one interval stale. A peer that is
//! unreachable, or whose summary was malformed, has `jobs: null`: "no data for that node".
//! Lease backends exchange nothing node to node, so there `/fleet` is `enabled: false` and
//! lists this node alone, unless `cluster.observability` runs the election-inert mesh of
//! [`crate::gossip::observability`] (GSP-113): then `enabled: true`, `observability: true`, and
//! one entry per mesh peer with its summaries and stats from the mesh's last poll (`status`
//! `reachable`, `unreachable`, `untrusted` or `pending`; `mesh_error` while the mesh cannot
//! start).
//!
//! With `cluster.observability` on gossip (GSP-112) every node also carries `node_stats`:
//! whole-machine CPU and memory, this node's read now and each peer's from the
//! `X-Cronstable-Node-Stats` header of its last successful poll (`null`: no data for that
//! node). Without it the field is absent and `observability` is `false`.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::WebState;
use crate::gossip::node_stats::PeerNodeStats;
use crate::observe::summary::{RunSummaries, to_json};
use crate::status::ClusterStatus;

/// `GET /fleet`.
pub(super) async fn fleet(State(state): State<WebState>) -> Json<Value> {
    let (status, me) = {
        let view = state.core.view.borrow();
        (view.status.clone(), view.node_name.clone())
    };
    let set = state.core.registry.current();
    let mut own = RunSummaries::new();
    own.refresh(&set, &state.core.ledger, crate::clock::now_ms());
    let mesh = state.core.fleet_mesh.as_ref().map(|rx| rx.borrow().clone());
    let observability =
        mesh.is_some() || matches!(status.as_ref(), ClusterStatus::Gossip(g) if g.observability);
    let mut own_node = json!({
        "node_name": me,
        "self": true,
        "status": "self",
        "job_set_id": set.id.to_string(),
        "jobs": own.jobs().iter().map(to_json).collect::<Vec<_>>(),
    });
    if observability {
        own_node["node_stats"] = json!(PeerNodeStats::from_snapshot(&state.node.snapshot()));
    }
    let mut nodes = vec![own_node];
    let gossip = match status.as_ref() {
        ClusterStatus::Gossip(g) => {
            for peer in &g.peers {
                let mut node = peer_row(
                    json!(peer.node_name),
                    &peer.host,
                    &peer.status,
                    json!(peer.job_set_id),
                    json!(peer.last_seen),
                    peer.jobs.as_deref().map(Vec::as_slice),
                );
                if observability {
                    node["node_stats"] = json!(peer.node_stats);
                }
                nodes.push(node);
            }
            true
        }
        _ => false,
    };
    let mut body = json!({ "enabled": gossip, "observability": observability, "nodes": nodes });
    if let Some(mesh) = mesh.filter(|_| !gossip) {
        let rows = mesh.peers.iter().map(|peer| {
            let mut node = peer_row(
                json!(peer.node_name),
                &peer.host,
                peer.status.as_str(),
                json!(peer.job_set_id),
                json!(peer.last_seen_ms.and_then(super::json::rfc3339)),
                peer.jobs.as_deref().map(Vec::as_slice),
            );
            node["last_error"] = json!(peer.last_error);
            node["node_stats"] = json!(peer.node_stats);
            node
        });
        if let Some(nodes) = body["nodes"].as_array_mut() {
            nodes.extend(rows);
        }
        body["enabled"] = true.into();
        body["mesh_error"] = mesh.error.clone().into();
    }
    Json(body)
}

/// One peer's `/fleet` entry; `jobs: None` is "no data for that node".
fn peer_row(
    node_name: Value,
    host: &str,
    status: &str,
    job_set_id: Value,
    last_seen: Value,
    jobs: Option<&[crate::gossip::wire::JobSummary]>,
) -> Value {
    json!({
        "node_name": node_name,
        "host": host,
        "self": false,
        "status": status,
        "job_set_id": job_set_id,
        "last_seen": last_seen,
        "jobs": jobs.map(|jobs| jobs.iter().map(to_json).collect::<Vec<_>>()),
    })
}
