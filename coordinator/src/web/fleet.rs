//! `GET /fleet`: the fleet-wide picture of what ran where (inventory §2.13, §8.2).
//!
//! This node contributes its own per-job run summary from its ledger. On gossip every peer
//! appears with the status this node last saw; its `jobs` are `null` ("no data for that
//! node") because peers do not yet piggyback run summaries on `/peer`: the exchange carries
//! only the display-only job list today. Lease backends exchange nothing node to node, so
//! there `/fleet` is `enabled: false`, as the seed specifies.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::WebState;

/// `GET /fleet`.
pub(super) async fn fleet(State(state): State<WebState>) -> Json<Value> {
    let cluster = super::cluster_body(&state.core);
    let gossip = cluster["backend"] == "gossip";
    let me = state.core.node_name();
    let set = state.core.registry.current();
    let own: Vec<Value> = set
        .jobs
        .keys()
        .map(|name| {
            let mut v = state.core.ledger.inspect(name, super::jobs::run_summary);
            v["name"] = json!(name);
            v
        })
        .collect();
    let mut nodes = vec![json!({
        "node_name": me,
        "self": true,
        "status": "self",
        "job_set_id": set.id.to_string(),
        "jobs": own,
    })];
    if gossip {
        for peer in cluster["peers"].as_array().into_iter().flatten() {
            nodes.push(json!({
                "node_name": peer["node_name"],
                "host": peer["host"],
                "self": false,
                "status": peer["status"],
                "job_set_id": peer["job_set_id"],
                "last_seen": peer["last_seen"],
                "jobs": null,
            }));
        }
    }
    Json(json!({ "enabled": gossip, "nodes": nodes }))
}
