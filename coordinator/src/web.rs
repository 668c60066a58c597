//! The HTTP API on `web.listen`: health, readiness, the job-set ID and manual starts.
//!
//! Every error is JSON with a readable message and the matching status code (MN-10): never an
//! empty 400 or an opaque 500.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::clock::now_ms;
use crate::state::{CoordinatorState, ManualStartError};

/// The HTTP API's router over the shared state.
pub fn router(state: CoordinatorState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/job-set-id", get(job_set_id))
        .route("/cluster", get(cluster))
        .route("/jobs/{name}/start", post(start_job))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

/// `GET /cluster`: the backend's status block (inventory §8.1).
async fn cluster(State(state): State<CoordinatorState>) -> Json<serde_json::Value> {
    let (status, node) = {
        let view = state.view.borrow();
        (view.status.clone(), view.node_name.clone())
    };
    Json(status.to_json(&node))
}

/// An HTTP error: a status and a readable message, rendered as JSON.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.message, "status": self.status.as_u16() });
        (self.status, Json(body)).into_response()
    }
}

impl From<ManualStartError> for ApiError {
    fn from(e: ManualStartError) -> Self {
        let status = match e {
            ManualStartError::UnknownJob(_) => StatusCode::NOT_FOUND,
            ManualStartError::ExecutorNotWatching { .. } => StatusCode::SERVICE_UNAVAILABLE,
        };
        Self::new(status, e.to_string())
    }
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// Ready once at least one executor has registered: before that this node attests an empty job
/// set, which is not what it will run.
async fn readyz(State(state): State<CoordinatorState>) -> Response {
    let set = state.registry.current();
    if set.jobs.is_empty() {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no executor has registered a job set yet",
        )
        .into_response()
    } else {
        Json(json!({ "status": "ready", "jobs": set.jobs.len() })).into_response()
    }
}

async fn job_set_id(State(state): State<CoordinatorState>) -> Json<serde_json::Value> {
    let set = state.registry.current();
    Json(json!({ "job_set_id": set.id.to_string(), "jobs": set.jobs.len() }))
}

async fn start_job(
    State(state): State<CoordinatorState>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let request_id = state.start_manually(&name, now_ms())?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "job": name, "request_id": request_id, "status": "started" })),
    ))
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no such endpoint: {}", uri.path()),
    )
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}
