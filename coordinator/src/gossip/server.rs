//! The dedicated mTLS listener that serves `GET /peer` and nothing else (GSP-05/06, GSP-11).
//!
//! Every connection must present a client certificate that chains to the cluster CA (the
//! rustls server context enforces it). The listener caps the request head at
//! [`MAX_REQUEST_BYTES`] and, beyond what the seed describes, bounds connections in two stages,
//! so that anyone who can open a TCP connection cannot crowd out the peers:
//!
//! - **before the handshake** a connection is a stranger: it has [`HANDSHAKE_TIMEOUT`] to prove
//!   itself, one source address may hold at most [`MAX_HANDSHAKES_PER_SOURCE`] unfinished
//!   handshakes, and all sources together [`MAX_HANDSHAKES`]; past either the connection is
//!   closed at once;
//! - **after the handshake** it is a peer, and counts against [`MAX_CONNECTIONS`].
//!
//! A flood of idle sockets from one address therefore holds a handful of handshake slots and
//! none of the peers'. The TLS context and the body are read from `watch` channels per
//! connection / request, so a certificate rotation or a new round applies without rebinding.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, PoisonError};
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

/// The most concurrent authenticated (handshake finished) connections; further ones are closed.
pub const MAX_CONNECTIONS: usize = 256;

/// The most connections in their TLS handshake at once, from all sources together.
pub const MAX_HANDSHAKES: usize = 128;

/// The most connections one source address may hold in their TLS handshake at once. A peer
/// opens one connection per poll; a few more cover reconnects after a restart.
pub const MAX_HANDSHAKES_PER_SOURCE: usize = 8;

/// The largest request head the listener reads (hyper's minimum buffer).
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;

/// How long a client has to finish the TLS handshake (a peer on any network takes well under
/// a second).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Unfinished handshakes per source address; a slot is given back when its guard drops.
#[derive(Debug, Clone, Default)]
struct Strangers(Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>);

/// One source's handshake slot.
struct StrangerSlot {
    strangers: Strangers,
    source: IpAddr,
}

impl Strangers {
    /// A slot for `source`, unless it already holds [`MAX_HANDSHAKES_PER_SOURCE`].
    fn admit(&self, source: IpAddr) -> Option<StrangerSlot> {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let n = held.entry(source).or_default();
        if *n >= MAX_HANDSHAKES_PER_SOURCE {
            return None;
        }
        *n += 1;
        Some(StrangerSlot {
            strangers: self.clone(),
            source,
        })
    }
}

impl Drop for StrangerSlot {
    fn drop(&mut self) {
        let mut held = self
            .strangers
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = held.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.source);
            }
        }
    }
}

/// Says, at most once a minute, that connections are being refused and why: a flood must be
/// visible without one log line per refused socket.
#[derive(Debug, Default)]
struct RefusalLog {
    last: Option<tokio::time::Instant>,
    since: u64,
}

impl RefusalLog {
    fn refused(&mut self, remote: SocketAddr, why: &str) {
        self.since += 1;
        let now = tokio::time::Instant::now();
        if self.last.is_some_and(|t| now - t < Duration::from_secs(60)) {
            return;
        }
        tracing::warn!(
            %remote,
            refused = self.since,
            "cluster: refusing /peer connections: {why} (logged at most once a minute)"
        );
        self.last = Some(now);
        self.since = 0;
    }
}

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

/// A running `/peer` server and the senders that change what it serves: a new body each
/// round, a new TLS context at a certificate rotation, this node's stats header.
pub struct Served {
    /// The body answered to polls.
    pub body: watch::Sender<Arc<ServedBody>>,
    /// The TLS server context.
    pub tls: watch::Sender<Arc<ServerConfig>>,
    /// The `X-Cronstable-Node-Stats` value, when the server sends one.
    pub node_stats: watch::Sender<Option<header::HeaderValue>>,
    /// The address it listens on, for the log.
    pub addr: String,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    /// Serves `body` on `listener` with `tls`; kept-alive connections idle past `idle_timeout`
    /// are closed. `node_stats`: `Some(first value)` sends the stats header on every answer,
    /// `None` sends none.
    pub fn start(
        listener: TcpListener,
        tls: Arc<ServerConfig>,
        body: ServedBody,
        idle_timeout: Duration,
        node_stats: Option<Option<header::HeaderValue>>,
    ) -> Self {
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let (body_tx, body_rx) = watch::channel(Arc::new(body));
        let (tls_tx, tls_rx) = watch::channel(tls);
        let sends_stats = node_stats.is_some();
        let (stats_tx, stats_rx) = watch::channel(node_stats.flatten());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = crate::spawn(serve(
            listener,
            PeerEndpoint {
                tls: tls_rx,
                body: body_rx,
                idle_timeout,
                node_stats: sends_stats.then_some(stats_rx),
            },
            async move {
                let _ = stopped.await;
            },
        ));
        Self {
            body: body_tx,
            tls: tls_tx,
            node_stats: stats_tx,
            addr,
            stop,
            task,
        }
    }

    /// Serves `next` from now on, unless it is the body already served (same etag).
    pub fn replace_body(&self, next: ServedBody) {
        self.body.send_if_modified(|cur| {
            let changed = cur.etag != next.etag;
            if changed {
                *cur = Arc::new(next);
            }
            changed
        });
    }

    /// Stops the server (see [`stop`]).
    pub async fn stop(self) {
        stop(self.stop, self.task).await;
    }
}

/// How long a stopped `/peer` server gets to close its connections before it is aborted.
const STOP_BOUND: Duration = Duration::from_secs(5);

/// Stops a [`serve`] task: resolves its shutdown through `stop`, waits [`STOP_BOUND`], then
/// aborts it. Never detached: a server left running would keep the port and serve the last
/// report to peers.
pub async fn stop(stop: tokio::sync::oneshot::Sender<()>, mut server: tokio::task::JoinHandle<()>) {
    let _ = stop.send(());
    if tokio::time::timeout(STOP_BOUND, &mut server).await.is_err() {
        server.abort();
        let _ = server.await;
    }
}

/// Accepts connections on `listener` until `shutdown` resolves, then closes every connection.
pub async fn serve(
    listener: TcpListener,
    endpoint: PeerEndpoint,
    shutdown: impl Future<Output = ()> + Send,
) {
    let peers = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    let strangers = Strangers::default();
    let mut refusals = RefusalLog::default();
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
        let Some(slot) = strangers.admit(remote.ip().to_canonical()) else {
            refusals.refused(
                remote,
                "this address already holds the most unfinished TLS handshakes",
            );
            continue;
        };
        let Ok(handshake) = handshakes.clone().try_acquire_owned() else {
            refusals.refused(remote, "too many unfinished TLS handshakes");
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let endpoint = endpoint.clone();
        let peers = peers.clone();
        connections.spawn(tracing::Instrument::in_current_span(async move {
            let acceptor = TlsAcceptor::from(endpoint.tls.borrow().clone());
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%remote, error = %e, "cluster: /peer TLS handshake refused");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%remote, "cluster: /peer TLS handshake timed out");
                    return;
                }
            };
            // A peer now: its handshake slots go back, and it counts among the peers.
            drop((slot, handshake));
            let Ok(_permit) = peers.try_acquire_owned() else {
                tracing::warn!(%remote, "cluster: /peer connection limit reached; closing");
                return;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_source_holds_a_bounded_number_of_handshakes_and_gets_them_back() {
        let strangers = Strangers::default();
        let flood: IpAddr = "127.0.0.2".parse().unwrap();
        let held: Vec<StrangerSlot> = (0..MAX_HANDSHAKES_PER_SOURCE)
            .map(|_| strangers.admit(flood).expect("below the bound"))
            .collect();
        assert!(strangers.admit(flood).is_none(), "the bound holds");
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(
            strangers.admit(peer).is_some(),
            "another source is not affected"
        );
        drop(held);
        assert!(strangers.admit(flood).is_some(), "slots come back");
        assert!(
            strangers.0.lock().unwrap().is_empty(),
            "no entry is kept for a source without handshakes"
        );
    }
}
