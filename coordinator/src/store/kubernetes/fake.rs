//! An in-process fake of the apiserver's Lease REST API, for tests: no real apiserver can be run
//! on the machines this project is built on.
//!
//! It serves, on `127.0.0.1:<ephemeral>` over HTTP/1.1 (plain, or TLS with a given
//! certificate), what the Kubernetes store uses, and behaves the way the real API does for it:
//!
//! - `GET    /apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}` → 200 Lease | 404;
//! - `POST   /apis/coordination.k8s.io/v1/namespaces/{ns}/leases` → 201 | 409 AlreadyExists;
//! - `PUT    /apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}` → 200 | 404 | 409
//!   Conflict when `metadata.resourceVersion` is not the stored one (an absent one is an
//!   unconditional update, as Leases allow);
//! - one cluster-wide, strictly increasing resourceVersion, bumped on every write, with `uid`
//!   and `creationTimestamp` set on create;
//! - errors as `Status` objects with the real `reason`, `message`, `details` and `code`;
//! - an optional bearer token (401 Unauthorized otherwise).
//!
//! Faults: [`FakeApiServer::set_down`] drops every connection unanswered (an unreachable
//! apiserver), [`FakeApiServer::set_delay`] holds each answer back (a slow one), and
//! [`FakeApiServer::race_next_get`] slips a write in between a reader's GET and its PUT.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

const PREFIX: &str = "/apis/coordination.k8s.io/v1/namespaces/";

/// The service's error while the fake is down.
#[derive(Debug)]
struct Down;

impl std::fmt::Display for Down {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the fake apiserver is down")
    }
}

impl std::error::Error for Down {}

#[derive(Default)]
struct Inner {
    leases: Mutex<HashMap<(String, String), Value>>,
    version: AtomicU64,
    down: AtomicBool,
    delay_ms: AtomicU64,
    token: Mutex<Option<String>>,
    requests: AtomicU64,
    race_next_get: AtomicBool,
}

/// A running fake apiserver; it stops when dropped.
pub struct FakeApiServer {
    addr: SocketAddr,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
    scheme: &'static str,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeApiServer {
    /// Starts one on an ephemeral loopback port, plain HTTP.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// Starts one serving HTTPS with the PEM certificate chain and key (the in-cluster shape).
    pub async fn start_tls(cert_pem: &str, key_pem: &str) -> Self {
        use rustls::pki_types::pem::PemObject;
        let chain = rustls::pki_types::CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("a PEM chain");
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .expect("a PEM key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("a server identity");
        Self::start_with(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))).await
    }

    async fn start_with(tls: Option<tokio_rustls::TlsAcceptor>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake apiserver");
        let addr = listener.local_addr().expect("its address");
        let inner = Arc::new(Inner::default());
        let shared = inner.clone();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                if shared.down.load(Ordering::SeqCst) {
                    // Unreachable: close without a byte, like a dead endpoint behind a proxy.
                    drop(tcp);
                    continue;
                }
                let inner = shared.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let inner = inner.clone();
                        async move {
                            // Down also breaks kept-alive connections (the kube client pools
                            // them): an error from the service makes hyper drop the connection
                            // without an answer.
                            if inner.down.load(Ordering::SeqCst) {
                                return Err(Down);
                            }
                            Ok(serve(&inner, req).await)
                        }
                    });
                    let http = hyper::server::conn::http1::Builder::new();
                    match tls {
                        None => {
                            let _ = http.serve_connection(TokioIo::new(tcp), svc).await;
                        }
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(tcp).await {
                                let _ = http.serve_connection(TokioIo::new(stream), svc).await;
                            }
                        }
                    }
                });
            }
        });
        Self {
            addr,
            inner,
            task,
            scheme,
        }
    }

    /// `http(s)://127.0.0.1:<port>`, for `cluster.kubernetes.apiServer`.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Requires `Authorization: Bearer <token>` from now on.
    pub fn require_token(&self, token: &str) {
        *self.inner.token.lock().unwrap() = Some(token.to_owned());
    }

    /// Makes the server unreachable (true) or reachable again.
    pub fn set_down(&self, down: bool) {
        self.inner.down.store(down, Ordering::SeqCst);
    }

    /// Holds every answer back by `delay`.
    pub fn set_delay(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.inner.delay_ms.store(ms, Ordering::SeqCst);
    }

    /// The stored Lease, if any.
    pub fn lease(&self, ns: &str, name: &str) -> Option<Value> {
        let leases = self.inner.leases.lock().unwrap();
        leases.get(&(ns.to_owned(), name.to_owned())).cloned()
    }

    /// Edits the stored Lease in place as another writer would (bumping resourceVersion).
    pub fn edit(&self, ns: &str, name: &str, f: impl FnOnce(&mut Value)) {
        let mut leases = self.inner.leases.lock().unwrap();
        let lease = leases
            .get_mut(&(ns.to_owned(), name.to_owned()))
            .expect("the lease exists");
        f(lease);
        let rv = self.inner.version.fetch_add(1, Ordering::SeqCst) + 1;
        lease["metadata"]["resourceVersion"] = Value::String(rv.to_string());
    }

    /// After answering the next GET, bumps that Lease's resourceVersion as if another writer
    /// got in between: the reader's next PUT then meets a 409 Conflict.
    pub fn race_next_get(&self) {
        self.inner.race_next_get.store(true, Ordering::SeqCst);
    }

    /// How many requests were answered.
    pub fn requests(&self) -> u64 {
        self.inner.requests.load(Ordering::SeqCst)
    }
}

/// A `Status` failure body as the apiserver sends it.
pub fn status(code: StatusCode, reason: &str, name: &str, message: String) -> Value {
    let mut details = json!({"group": "coordination.k8s.io", "kind": "leases"});
    if !name.is_empty() {
        details["name"] = Value::String(name.to_owned());
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details,
        "code": code.as_u16(),
    })
}

fn reply(code: StatusCode, body: &Value) -> Response<Full<bytes::Bytes>> {
    let mut r = Response::new(Full::new(bytes::Bytes::from(body.to_string())));
    *r.status_mut() = code;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn not_found(name: &str) -> Response<Full<bytes::Bytes>> {
    let m = format!("leases.coordination.k8s.io \"{name}\" not found");
    reply(
        StatusCode::NOT_FOUND,
        &status(StatusCode::NOT_FOUND, "NotFound", name, m),
    )
}

fn bad_request(message: String) -> Response<Full<bytes::Bytes>> {
    reply(
        StatusCode::BAD_REQUEST,
        &status(StatusCode::BAD_REQUEST, "BadRequest", "", message),
    )
}

async fn serve(inner: &Inner, req: Request<Incoming>) -> Response<Full<bytes::Bytes>> {
    let delay = inner.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    inner.requests.fetch_add(1, Ordering::SeqCst);
    let required = inner.token.lock().unwrap().clone();
    if let Some(t) = required {
        let given = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if given != Some(format!("Bearer {t}").as_str()) {
            let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized",
                "code": 401});
            return reply(StatusCode::UNAUTHORIZED, &body);
        }
    }
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let Some(rest) = path.strip_prefix(PREFIX) else {
        return reply(
            StatusCode::NOT_FOUND,
            &status(
                StatusCode::NOT_FOUND,
                "NotFound",
                "",
                "the server could not find the requested resource".into(),
            ),
        );
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return bad_request(format!("cannot read the body: {e}")),
    };
    match (method, parts.as_slice()) {
        (Method::GET, [ns, "leases", name]) => get(inner, ns, name),
        (Method::POST, [ns, "leases"]) => create(inner, ns, &body),
        (Method::PUT, [ns, "leases", name]) => update(inner, ns, name, &body),
        (m, _) => reply(
            StatusCode::METHOD_NOT_ALLOWED,
            &status(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "",
                format!("{m} is not supported by the fake"),
            ),
        ),
    }
}

fn get(inner: &Inner, ns: &str, name: &str) -> Response<Full<bytes::Bytes>> {
    let mut leases = inner.leases.lock().unwrap();
    match leases.get_mut(&(ns.to_owned(), name.to_owned())) {
        Some(l) => {
            let answer = reply(StatusCode::OK, l);
            if inner.race_next_get.swap(false, Ordering::SeqCst) {
                let rv = inner.version.fetch_add(1, Ordering::SeqCst) + 1;
                l["metadata"]["resourceVersion"] = Value::String(rv.to_string());
            }
            answer
        }
        None => not_found(name),
    }
}

fn parse(body: &[u8]) -> Option<Value> {
    serde_json::from_slice::<Value>(body)
        .ok()
        .filter(Value::is_object)
}

fn create(inner: &Inner, ns: &str, body: &[u8]) -> Response<Full<bytes::Bytes>> {
    let Some(mut lease) = parse(body) else {
        return bad_request("the body is not a JSON object".into());
    };
    let Some(name) = lease["metadata"]["name"].as_str().map(str::to_owned) else {
        return bad_request(
            "metadata.name: Required value: name or generateName is required".into(),
        );
    };
    let mut leases = inner.leases.lock().unwrap();
    let key = (ns.to_owned(), name.clone());
    if leases.contains_key(&key) {
        let m = format!("leases.coordination.k8s.io \"{name}\" already exists");
        return reply(
            StatusCode::CONFLICT,
            &status(StatusCode::CONFLICT, "AlreadyExists", &name, m),
        );
    }
    let rv = inner.version.fetch_add(1, Ordering::SeqCst) + 1;
    let meta = &mut lease["metadata"];
    meta["namespace"] = Value::String(ns.to_owned());
    meta["resourceVersion"] = Value::String(rv.to_string());
    meta["uid"] = Value::String(format!("00000000-0000-4000-8000-{rv:012}"));
    meta["creationTimestamp"] = Value::String("2026-01-01T00:00:00Z".into());
    lease["apiVersion"] = json!("coordination.k8s.io/v1");
    lease["kind"] = json!("Lease");
    leases.insert(key, lease.clone());
    reply(StatusCode::CREATED, &lease)
}

fn update(inner: &Inner, ns: &str, name: &str, body: &[u8]) -> Response<Full<bytes::Bytes>> {
    let Some(mut lease) = parse(body) else {
        return bad_request("the body is not a JSON object".into());
    };
    if lease["metadata"]["name"].as_str() != Some(name) {
        return bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            lease["metadata"]["name"].as_str().unwrap_or_default()
        ));
    }
    let mut leases = inner.leases.lock().unwrap();
    let key = (ns.to_owned(), name.to_owned());
    let Some(stored) = leases.get(&key) else {
        return not_found(name);
    };
    let given = lease["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    let current = stored["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    if !given.is_empty() && given != current {
        let m = format!(
            "Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": the object \
             has been modified; please apply your changes to the latest version and try again"
        );
        return reply(
            StatusCode::CONFLICT,
            &status(StatusCode::CONFLICT, "Conflict", name, m),
        );
    }
    // The server owns these: keep the stored uid and creationTimestamp.
    let (uid, created) = (
        stored["metadata"]["uid"].clone(),
        stored["metadata"]["creationTimestamp"].clone(),
    );
    let rv = inner.version.fetch_add(1, Ordering::SeqCst) + 1;
    let meta = &mut lease["metadata"];
    meta["namespace"] = Value::String(ns.to_owned());
    meta["resourceVersion"] = Value::String(rv.to_string());
    meta["uid"] = uid;
    meta["creationTimestamp"] = created;
    leases.insert(key, lease.clone());
    reply(StatusCode::OK, &lease)
}
