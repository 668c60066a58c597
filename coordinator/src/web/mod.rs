//! The HTTP API on `web.listen`: the dashboard, `/cluster`, `/jobs`, `/fleet`, `/node`,
//! `/metrics`, manual starts, and the health endpoints (inventory §8.2).
//!
//! Every error is JSON with a readable message and the matching status code (MN-10): never an
//! empty 400 or an opaque 500. With `web.authToken` set, every route but `/healthz` and
//! `/readyz` needs the token ([`auth`]).

mod auth;
mod cache;
mod dashboard;
mod fleet;
mod jobs;
mod json;
mod node;
mod origin;
mod who_ran;

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::clock::now_ms;
use crate::observe::metrics::Metrics;
use crate::observe::next_fire::NextFires;
use crate::state::{CoordinatorState, ManualStartError};

use crate::observe::host::NodeStats;
pub use auth::{AuthToken, AuthTokens};
pub use dashboard::PAGE_WEIGHT;

/// What the handlers share: the coordinator's state and the web layer's own pieces.
#[derive(Debug, Clone)]
pub(crate) struct WebState {
    core: CoordinatorState,
    node: Arc<NodeStats>,
    schedules: Arc<crate::observe::next_fire::ScheduleCache>,
    list: Arc<cache::ListCache>,
    next_fires: Arc<std::sync::Mutex<NextFires>>,
}

/// The HTTP API's router over the shared state. `token` guards every route but the health
/// endpoints when set.
pub fn router(state: CoordinatorState, token: Option<AuthToken>) -> Router {
    // The sender is dropped: the receiver keeps its one value for good.
    router_with_tokens(state, tokio::sync::watch::channel(token.map(Arc::new)).1)
}

/// Serves the HTTP API on `listener` until `shutdown` resolves, then lets in-flight requests
/// finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: CoordinatorState,
    tokens: AuthTokens,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router_with_tokens(state, tokens))
        .with_graceful_shutdown(shutdown)
        .await
}

/// [`router`] whose token can change while it serves: each request is checked against the
/// latest value on `tokens` (a config reload's new `web.authToken` applies at once).
pub fn router_with_tokens(state: CoordinatorState, tokens: AuthTokens) -> Router {
    let web = WebState {
        core: state,
        node: Arc::new(NodeStats::new()),
        schedules: Arc::default(),
        list: Arc::default(),
        next_fires: Arc::default(),
    };
    let guarded = Router::new()
        .route("/", get(dashboard::index))
        .route("/assets/{file}", get(dashboard::asset))
        .route("/job-set-id", get(job_set_id))
        .route("/cluster", get(cluster))
        .route("/jobs", get(jobs::list))
        .route("/jobs/{name}", get(jobs::detail))
        .route("/jobs/{name}/firings", get(jobs::firings))
        .route("/jobs/{name}/start", post(start_job))
        .route("/fleet", get(fleet::fleet))
        .route("/node", get(node::node))
        .route("/metrics", get(metrics))
        .route_layer(axum::middleware::from_fn_with_state(
            tokens.clone(),
            auth::require_token,
        ))
        // Outermost: a change from another site is refused before the token is looked at.
        .route_layer(axum::middleware::from_fn_with_state(
            tokens,
            origin::same_origin_changes,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(guarded)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(web)
}

/// `GET /cluster`: the backend's status block (inventory §8.1).
async fn cluster(State(state): State<WebState>) -> Json<serde_json::Value> {
    Json(cluster_body(&state.core))
}

fn cluster_body(state: &CoordinatorState) -> serde_json::Value {
    let (status, node, manager, gate) = {
        let view = state.view.borrow();
        (
            view.status.clone(),
            view.node_name.clone(),
            view.manager_state(),
            view.gate_signals(tokio::time::Instant::now()),
        )
    };
    let mut body = status.to_json(&node);
    if let serde_json::Value::Object(map) = &mut body {
        map.insert(
            "process".into(),
            state.process.to_json(crate::clock::now_ms()),
        );
        if let Some(manager) = manager {
            map.insert("manager".into(), manager.into());
        }
        // What the gate itself would act on now, not the backend's last round: a backend's
        // own flags can read quorate while the gate still refuses (a gossip node before its
        // third quorate round, a view past its staleness bound), and operators alert on these.
        if let Some(g) = gate {
            for (key, value) in [("quorate", g.quorate), ("is_leader", g.is_leader)] {
                if map.contains_key(key) {
                    map.insert(key.into(), value.into());
                }
            }
            if let Some(leader) = g.leader
                && map.contains_key("leader")
            {
                map.insert("leader".into(), leader.into());
            }
        }
    }
    body
}

/// `GET /metrics`: the Prometheus text exposition.
async fn metrics(State(state): State<WebState>) -> Response {
    let jobs = jobs_now(&state, now_ms());
    let files = state.core.certificates();
    let certificates =
        tokio::task::spawn_blocking(move || crate::observe::certificates::read(&files))
            .await
            .unwrap_or_default();
    state.core.metrics.set_certificates(&certificates);
    let body = state
        .core
        .metrics
        .render_with(&cluster_body(&state.core), &jobs);
    ([(header::CONTENT_TYPE, Metrics::CONTENT_TYPE)], body).into_response()
}

/// Each job's series of the moment: its next fire (from the `/jobs` memo, searched again only
/// once it passed) and, for Leader and PreferLeader jobs, whether this node would run it now.
fn jobs_now(state: &WebState, now: i64) -> Vec<crate::observe::metrics::JobNow> {
    use cronstable_core::{ClusterPolicy, FiringKind, Verdict};
    let set = state.core.registry.current();
    let schedules = state.schedules.for_set(&set);
    let id = set.id.to_string();
    let mut next_fires = state
        .next_fires
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    set.jobs
        .iter()
        .map(|(name, job)| {
            let schedule = schedules.get(name).and_then(Option::as_ref);
            let next_fire_ms = next_fires.next_after(&id, name, schedule, now);
            let policy = job.spec.cluster_policy;
            let is_owner = (policy != ClusterPolicy::EveryNode).then(|| {
                let at = next_fire_ms.unwrap_or(now);
                state.core.peek_verdict(name, FiringKind::Scheduled, at) == Some(Verdict::Run)
            });
            crate::observe::metrics::JobNow {
                job: name.clone(),
                policy: policy.as_str(),
                next_fire_ms,
                is_owner,
            }
        })
        .collect()
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
async fn readyz(State(state): State<WebState>) -> Response {
    let set = state.core.registry.current();
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

async fn job_set_id(State(state): State<WebState>) -> Json<serde_json::Value> {
    let set = state.core.registry.current();
    Json(json!({ "job_set_id": set.id.to_string(), "jobs": set.jobs.len() }))
}

async fn start_job(
    State(state): State<WebState>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let request_id = state.core.start_manually(&name, now_ms())?;
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
