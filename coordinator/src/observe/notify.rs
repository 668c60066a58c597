//! The webhook reporter of `notify:` (inventory NTF-01..03): JSON POSTs for `leader_change`,
//! `quorum_loss` and `job_failure`.
//!
//! Delivery never blocks what produced the event: [`Notifier::send`] puts it on a bounded
//! queue and one task posts the queue in order. Each attempt has the configured deadline
//! (connect, TLS, request and response together); a failure or a non-2xx answer is retried
//! with doubling backoff from one second, up to `retries` more times, then dropped with a
//! WARNING. A full queue (the receiver has been down a long while) drops the new event with a
//! WARNING rather than grow without bound. A 4xx other than 408 and 429 is not retried: the
//! receiver said the request itself is wrong.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, Uri, header};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::TlsConnector;

use crate::config::{NotifyEvent, WebhookConfig};

/// Events waiting for delivery; more than this while the receiver is down are dropped.
const QUEUE: usize = 256;

/// A handle that queues events for the webhook. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Notifier {
    tx: mpsc::Sender<Value>,
    events: Arc<[NotifyEvent]>,
}

/// Why one delivery attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// The URL does not parse, or has no host.
    #[error("bad webhook URL: {0}")]
    Url(String),
    /// Connecting, the TLS handshake, or the exchange failed.
    #[error("{0}")]
    Transport(String),
    /// The attempt's deadline passed.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The receiver answered with a status that is not 2xx.
    #[error("the receiver answered HTTP {0}")]
    Status(StatusCode),
}

impl DeliveryError {
    fn retryable(&self) -> bool {
        match self {
            Self::Url(_) => false,
            Self::Status(s) => {
                !s.is_client_error()
                    || *s == StatusCode::REQUEST_TIMEOUT
                    || *s == StatusCode::TOO_MANY_REQUESTS
            }
            Self::Transport(_) | Self::Timeout(_) => true,
        }
    }
}

impl Notifier {
    /// Starts the delivery task for `config` and returns its handle. The task ends when every
    /// handle is dropped and the queue is drained.
    pub fn start(config: WebhookConfig) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let events: Arc<[NotifyEvent]> = config.events.clone().into();
        crate::spawn(deliver_all(config, rx));
        Self { tx, events }
    }

    /// Whether `event` is subscribed.
    pub fn wants(&self, event: NotifyEvent) -> bool {
        self.events.contains(&event)
    }

    /// Queues `payload` (which carries its `event` field) when `event` is subscribed.
    pub fn send(&self, event: NotifyEvent, payload: Value) {
        if !self.wants(event) {
            return;
        }
        if self.tx.try_send(payload).is_err() {
            tracing::warn!(
                event = event.as_str(),
                "notify: webhook queue is full (the receiver has been failing); event dropped"
            );
        }
    }
}

async fn deliver_all(config: WebhookConfig, mut rx: mpsc::Receiver<Value>) {
    let tls = match client_tls() {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(error = %e, "notify: no TLS trust roots; https:// webhooks will fail");
            None
        }
    };
    while let Some(payload) = rx.recv().await {
        let body = Bytes::from(payload.to_string());
        let event = payload["event"].as_str().unwrap_or("event").to_owned();
        let mut backoff = Duration::from_secs(1);
        for attempt in 0..=config.retries {
            match post_once(&config.url, body.clone(), config.timeout, tls.as_ref()).await {
                Ok(()) => {
                    tracing::debug!(event, attempt, "notify: webhook delivered");
                    break;
                }
                Err(e) if e.retryable() && attempt < config.retries => {
                    tracing::info!(event, attempt, error = %e, retry_in = ?backoff, "notify: webhook attempt failed");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                }
                Err(e) => {
                    tracing::warn!(event, attempts = attempt + 1, error = %e, url = config.url, "notify: webhook delivery failed; event dropped");
                    break;
                }
            }
        }
    }
}

fn client_tls() -> Result<TlsConnector, String> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        // One unparsable system certificate should not cost every other root.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(format!(
            "no system trust roots found ({} errors)",
            found.errors.len()
        ));
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// One POST of `body` to `url`, within `timeout`.
pub async fn post_once(
    url: &str,
    body: Bytes,
    timeout: Duration,
    tls: Option<&TlsConnector>,
) -> Result<(), DeliveryError> {
    tokio::time::timeout(timeout, post(url, body, tls))
        .await
        .map_err(|_| DeliveryError::Timeout(timeout))?
}

async fn post(url: &str, body: Bytes, tls: Option<&TlsConnector>) -> Result<(), DeliveryError> {
    let uri: Uri = url
        .parse()
        .map_err(|e| DeliveryError::Url(format!("{e}")))?;
    let host = uri
        .host()
        .ok_or_else(|| DeliveryError::Url(format!("{url} has no host")))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let authority = uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .unwrap_or_else(|| host.clone());
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let tcp = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| DeliveryError::Transport(format!("cannot connect to {authority}: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let request = Request::post(path)
        .header(header::HOST, authority.as_str())
        .header(header::CONTENT_TYPE, "application/json")
        .header(
            header::USER_AGENT,
            concat!("cronstable/", env!("CARGO_PKG_VERSION")),
        )
        .body(Full::new(body))
        .map_err(|e| DeliveryError::Url(e.to_string()))?;
    let status = if https {
        let tls = tls.ok_or_else(|| {
            DeliveryError::Transport("https:// needs TLS trust roots, and none were found".into())
        })?;
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|e| DeliveryError::Url(format!("{host}: {e}")))?;
        let stream = tls
            .connect(name, tcp)
            .await
            .map_err(|e| DeliveryError::Transport(format!("TLS with {authority}: {e}")))?;
        exchange(TokioIo::new(stream), request).await?
    } else {
        exchange(TokioIo::new(tcp), request).await?
    };
    if status.is_success() {
        Ok(())
    } else {
        Err(DeliveryError::Status(status))
    }
}

async fn exchange<IO>(io: IO, request: Request<Full<Bytes>>) -> Result<StatusCode, DeliveryError>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| DeliveryError::Transport(format!("HTTP handshake: {e}")))?;
    let driver = crate::spawn(conn);
    let result = sender
        .send_request(request)
        .await
        .map(|r| r.status())
        .map_err(|e| DeliveryError::Transport(format!("request failed: {e}")));
    driver.abort();
    result
}
