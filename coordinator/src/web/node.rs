//! `GET /node`: this machine's CPU and memory and the coordinator process's own share
//! ([`crate::observe::host`]), with the process's start, instance and restart count.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::WebState;

/// `GET /node`.
pub(super) async fn node(State(state): State<WebState>) -> Json<Value> {
    let mut body = state.node.snapshot();
    body["node_name"] = json!(state.core.node_name());
    // The process block gains when it started, its instance id and the restart count.
    if let (Value::Object(process), Value::Object(info)) = (
        &mut body["process"],
        state.core.process.to_json(crate::clock::now_ms()),
    ) {
        process.extend(info);
    }
    Json(body)
}
