//! The dedicated mTLS listener that serves `GET /peer` and nothing else (GSP-05/06, GSP-11).
//!
//! Every connection must present a client certificate that chains to the cluster CA (the
//! rustls server context enforces it). The listener caps the request head at
//! [`MAX_REQUEST_BYTES`] and, beyond what the seed describes, the number of concurrent
//! connections at [`MAX_CONNECTIONS`], so a flood of idle sockets cannot exhaust the node. The
//! TLS context and the body are read from `watch` channels per connection / request, so a
//! certificate rotation or a new round applies without rebinding.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::node_stats::HEADER as NODE_STATS_HEADER;
use super::wire::ServedBody;

/// The most concurrent connections the listener keeps open; further ones are closed at once.
pub const MAX_CONNECTIONS: usize = 256;

/// The largest request head the listener reads (hyper's minimum buffer).
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;

/// How long a client has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the listener serves from.
#[derive(Clone)]
pub struct PeerEndpoint {
    /// The current TLS server context.
    pub tls: watch::Receiver<Arc<ServerConfig>>,
    /// The current `/peer` body.
    pub body: watch::Receiver<Arc<ServedBody>>,
    /// How long a kept-alive connection may sit without a request (about two poll intervals).
    pub idle_timeout: Duration,
    /// With `cluster.observability`: this node's current `X-Cronstable-Node-Stats` value, sent
    /// on every `/peer` answer (200 and 304). `None` sends no header at all.
    pub node_stats: Option<watch::Receiver<Option<header::HeaderValue>>>,
}

/// Accepts connections on `listener` until `shutdown` resolves, then closes every connection.
pub async fn serve(
    listener: TcpListener,
    endpoint: PeerEndpoint,
    shutdown: impl Future<Output = ()> + Send,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = listener.accept() => a,
            // Reap finished connection tasks so the set does not grow without bound.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (tcp, remote) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(error = %e, "cluster: accepting a /peer connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%remote, "cluster: /peer connection limit reached; closing");
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let endpoint = endpoint.clone();
        connections.spawn(tracing::Instrument::in_current_span(async move {
            let _permit = permit;
            let acceptor = TlsAcceptor::from(endpoint.tls.borrow().clone());
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%remote, error = %e, "cluster: /peer TLS handshake refused");
                    return;
                }
                Err(_) => return,
            };
            let body = endpoint.body.clone();
            let node_stats = endpoint.node_stats.clone();
            let service = service_fn(move |req| {
                let body = body.borrow().clone();
                let stats = node_stats.as_ref().and_then(|s| s.borrow().clone());
                async move {
                    let mut r = respond(&req, &body);
                    if let Some(stats) = stats.filter(|_| {
                        r.status().is_success() || r.status() == StatusCode::NOT_MODIFIED
                    }) {
                        r.headers_mut().insert(NODE_STATS_HEADER, stats);
                    }
                    Ok::<_, Infallible>(r)
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(endpoint.idle_timeout)
                .max_buf_size(MAX_REQUEST_BYTES)
                .serve_connection(TokioIo::new(tls), service);
            if let Err(e) = conn.await {
                tracing::debug!(%remote, error = %e, "cluster: /peer connection ended");
            }
        }));
    }
    // Stop listening first, so no peer connects while the open connections are ended.
    drop(listener);
    connections.shutdown().await;
}

fn respond(req: &Request<Incoming>, body: &ServedBody) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, msg: &str| {
        let mut r = Response::new(Full::new(Bytes::from(format!("{msg}\n"))));
        *r.status_mut() = status;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    };
    if req.uri().path() != "/peer" {
        return text(
            StatusCode::NOT_FOUND,
            "not found: the cluster listener serves only GET /peer",
        );
    }
    if req.method() != Method::GET {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: /peer accepts only GET",
        );
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
        return r;
    }
    let etag = header::HeaderValue::from_str(&body.etag).ok();
    let unchanged = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .zip(etag.as_ref())
        .is_some_and(|(seen, ours)| seen == ours);
    let mut r = if unchanged {
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(Full::new(body.bytes.clone()));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        r
    };
    if let Some(etag) = etag {
        r.headers_mut().insert(header::ETAG, etag);
    }
    r
}
