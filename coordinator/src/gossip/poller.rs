//! Polling one configured peer's `/peer` over mTLS (GSP-01, GSP-10/11).
//!
//! A [`Poller`] keeps one HTTP/1.1 connection per peer alive between rounds, so a steady-state
//! round costs one conditional request and a bodyless 304, not a TLS handshake. The peer's
//! certificate must chain to the cluster CA and name the host it was dialled at (SAN pinning,
//! done by rustls against the configured host). Each poll has one deadline, `connectTimeout`,
//! covering connect, handshake, request and body; a poll that misses it, or fails in any way,
//! drops the connection so the next round starts clean.
//!
//! Outcomes map onto the core's [`PollOutcome`]: any TLS or certificate failure is
//! `Untrusted`; every other failure, including an oversize or malformed body, is `Unreachable`
//! with a reason for `peers[].last_error`.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cronstable_core::gossip::PollOutcome;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

use super::node_stats::{HEADER as NODE_STATS_HEADER, PeerNodeStats};
use super::wire::{self, JobSummary, MAX_BODY_BYTES, PeerBody};
use crate::config::address::HostPort;

/// A TLS client context and the generation it belongs to (bumped on every rotation).
#[derive(Clone)]
pub struct ClientTls {
    /// The context.
    pub config: Arc<ClientConfig>,
    /// Connections made under an older generation are dropped before reuse.
    pub generation: u64,
}

impl ClientTls {
    /// The first context (generation 0).
    pub fn new(config: Arc<ClientConfig>) -> Self {
        Self {
            config,
            generation: 0,
        }
    }

    /// The context after a certificate rotation: a new generation, so connections made under
    /// the old one are not reused.
    pub fn rotated(&self, config: Arc<ClientConfig>) -> Self {
        Self {
            config,
            generation: self.generation + 1,
        }
    }
}

/// What one poll gave.
#[derive(Debug, Clone)]
pub struct PollResult {
    /// The outcome the gossip round consumes.
    pub outcome: PollOutcome,
    /// The display-only summary, when the peer sent a usable one.
    pub jobs: Option<Arc<Vec<JobSummary>>>,
    /// The poll succeeded (a fresh body or a 304).
    pub fresh: bool,
    /// The peer's `X-Cronstable-Node-Stats` on this answer, when this poller reads it and the
    /// value parsed; display-only (GSP-111/112).
    pub node_stats: Option<PeerNodeStats>,
}

struct Connection {
    sender: SendRequest<Empty<Bytes>>,
    driver: JoinHandle<()>,
    generation: u64,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Counters of what a poller did, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollerStats {
    /// TCP+TLS connections opened.
    pub connects: u64,
    /// 200 responses with a body.
    pub full_bodies: u64,
    /// 304 responses.
    pub not_modified: u64,
    /// Body bytes received.
    pub body_bytes: u64,
    /// Requests sent again on a new connection after a kept-alive one died under them.
    pub retried: u64,
}

/// The polling side of one configured peer.
pub struct Poller {
    /// What this poller did so far.
    pub stats: PollerStats,
    host: HostPort,
    server_name: Result<ServerName<'static>, String>,
    conn: Option<Connection>,
    etag: Option<String>,
    last: Option<PeerBody>,
    read_node_stats: bool,
    node_stats: Option<PeerNodeStats>,
    /// Woken when the peer closes a kept-alive connection of this poller (its process
    /// exited or restarted); a connection this poller drops itself wakes nobody.
    closed: Option<Arc<tokio::sync::Notify>>,
}

enum Failure {
    Unreachable(String),
    Untrusted(String),
}

impl Poller {
    /// A poller for the peer at `host`.
    pub fn new(host: HostPort) -> Self {
        let server_name = ServerName::try_from(host.host.clone())
            .map_err(|e| format!("{} is not a name a certificate can carry: {e}", host.host));
        Self {
            stats: PollerStats::default(),
            host,
            server_name,
            conn: None,
            etag: None,
            last: None,
            read_node_stats: false,
            node_stats: None,
            closed: None,
        }
    }

    /// Wakes `closed` whenever the peer closes one of this poller's kept-alive connections:
    /// a crashed or stopped process closes its sockets at once, long before the next poll.
    #[must_use]
    pub fn notify_on_close(mut self, closed: Arc<tokio::sync::Notify>) -> Self {
        self.closed = Some(closed);
        self
    }

    /// Whether to read the peer's `X-Cronstable-Node-Stats` header (`cluster.observability`);
    /// off by default, so a header a peer sends unasked is ignored.
    #[must_use]
    pub fn reading_node_stats(mut self, on: bool) -> Self {
        self.read_node_stats = on;
        self
    }

    /// The configured address.
    pub fn host(&self) -> &HostPort {
        &self.host
    }

    /// Polls once, within `timeout`.
    pub async fn poll(&mut self, tls: &ClientTls, timeout: Duration) -> PollResult {
        let result = match tokio::time::timeout(timeout, self.exchange(tls)).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Unreachable(format!(
                "Cannot connect to host {}: no answer within {} ms",
                self.host,
                timeout.as_millis()
            ))),
        };
        match result {
            Ok(body) => PollResult {
                outcome: PollOutcome::Report(body.report.clone()),
                jobs: body.jobs.clone(),
                fresh: true,
                node_stats: self.node_stats.take(),
            },
            Err(f) => {
                // Whatever state the connection is in, it is not trusted for the next round.
                self.conn = None;
                let outcome = match f {
                    Failure::Unreachable(error) => PollOutcome::Unreachable { error },
                    Failure::Untrusted(error) => PollOutcome::Untrusted { error },
                };
                PollResult {
                    outcome,
                    jobs: None,
                    fresh: false,
                    node_stats: None,
                }
            }
        }
    }

    async fn exchange(&mut self, tls: &ClientTls) -> Result<PeerBody, Failure> {
        let mut reused = true;
        let resp = loop {
            if self
                .conn
                .as_ref()
                .is_some_and(|c| c.generation != tls.generation || c.sender.is_closed())
            {
                self.conn = None;
            }
            if self.conn.is_none() {
                self.conn = Some(self.connect(tls).await?);
                self.stats.connects += 1;
                reused = false;
            }
            match self.send().await {
                Ok(resp) => break resp,
                // A kept-alive connection can die under the request: the peer's idle timer
                // and our round tick fire together (both processes were stopped, or the
                // peer's timer runs just ahead of ours). That says nothing about the peer, so
                // the request goes out once more on a new connection; GET /peer is
                // idempotent, and the whole poll stays within its timeout.
                Err(Failure::Unreachable(_)) if reused => {
                    self.conn = None;
                    self.stats.retried += 1;
                }
                Err(f) => return Err(f),
            }
        };
        let host = &self.host;
        let status = resp.status();
        let etag = resp
            .headers()
            .get(header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // Read on 200 and 304 alike: the stats change every round while the body may not.
        self.node_stats = if self.read_node_stats {
            resp.headers()
                .get(NODE_STATS_HEADER)
                .and_then(PeerNodeStats::from_header)
        } else {
            None
        };
        match status {
            StatusCode::NOT_MODIFIED if self.last.is_some() => {
                self.stats.not_modified += 1;
                self.last.clone().ok_or_else(|| {
                    Failure::Unreachable(format!("{host} answered 304 without a cached body"))
                })
            }
            StatusCode::OK => {
                let bytes = Limited::new(resp.into_body(), MAX_BODY_BYTES)
                    .collect()
                    .await
                    .map_err(|e| {
                        if e.is::<http_body_util::LengthLimitError>() {
                            Failure::Unreachable(format!("{host}: {}", wire::WireError::TooLarge))
                        } else {
                            Failure::Unreachable(format!("{host}: reading the body: {e}"))
                        }
                    })?
                    .to_bytes();
                let body = wire::decode(&bytes)
                    .map_err(|e| Failure::Unreachable(format!("{host}: {e}")))?;
                self.stats.full_bodies += 1;
                self.stats.body_bytes += bytes.len() as u64;
                self.etag = etag;
                self.last = Some(body.clone());
                Ok(body)
            }
            other => Err(Failure::Unreachable(format!(
                "{host} answered HTTP {other} to GET /peer"
            ))),
        }
    }

    /// Sends `GET /peer` (conditional once a body is cached) on the current connection.
    async fn send(&mut self) -> Result<http::Response<hyper::body::Incoming>, Failure> {
        let host = &self.host;
        let Some(conn) = self.conn.as_mut() else {
            return Err(Failure::Unreachable("no connection".into()));
        };
        let fail = |what: &str, e: &(dyn StdError + 'static)| classify(host, what, e);
        conn.sender
            .ready()
            .await
            .map_err(|e| fail("connection closed", &e))?;
        let mut req = Request::get("/peer").header(header::HOST, host.to_string());
        if let (Some(etag), Some(_)) = (&self.etag, &self.last) {
            req = req.header(header::IF_NONE_MATCH, etag.as_str());
        }
        let req = req
            .body(Empty::new())
            .map_err(|e| Failure::Unreachable(format!("building the request: {e}")))?;
        conn.sender
            .send_request(req)
            .await
            .map_err(|e| fail("request failed", &e))
    }

    async fn connect(&self, tls: &ClientTls) -> Result<Connection, Failure> {
        let host = &self.host;
        let server_name = self
            .server_name
            .clone()
            .map_err(|e| Failure::Untrusted(e.clone()))?;
        let tcp = TcpStream::connect(host.to_socket_addr_string())
            .await
            .map_err(|e| Failure::Unreachable(format!("Cannot connect to host {host}: {e}")))?;
        let _ = tcp.set_nodelay(true);
        let stream = TlsConnector::from(tls.config.clone())
            .connect(server_name, tcp)
            .await
            .map_err(|e| classify(host, "TLS handshake failed", &e))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| classify(host, "HTTP handshake failed", &e))?;
        let closed = self.closed.clone();
        // Dropping the `Connection` aborts this task, so only the peer's side ends it here.
        let driver = crate::spawn(async move {
            let _ = conn.await;
            if let Some(closed) = closed {
                closed.notify_one();
            }
        });
        Ok(Connection {
            sender,
            driver,
            generation: tls.generation,
        })
    }
}

/// A failure is `untrusted` when TLS refused it anywhere in its cause chain (a peer that
/// rejects our client certificate only says so after the client's side of the handshake
/// finished, so the alert surfaces on the first read).
fn classify(host: &HostPort, what: &str, e: &(dyn StdError + 'static)) -> Failure {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    let mut message = e.to_string();
    while let Some(err) = cur {
        let tls = err.downcast_ref::<rustls::Error>().or_else(|| {
            err.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(tls) = tls {
            return Failure::Untrusted(format!("TLS with {host} failed: {tls}"));
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            message = io.to_string();
        }
        cur = err.source();
    }
    Failure::Unreachable(format!("Cannot connect to host {host}: {what}: {message}"))
}
