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
//!
//! The client is `reqwest` over the project's rustls (ring): it honours the standard proxy
//! variables. With a signing key each attempt is signed ([`crate::observe::signing`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::config::{NotifyEvent, WebhookConfig};
use crate::observe::signing::SigningKey;

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
    /// The attempt's deadline (`timeout`) passed.
    #[error("no answer within the webhook's timeout")]
    Timeout,
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
            Self::Transport(_) | Self::Timeout => true,
        }
    }
}

impl Notifier {
    /// Starts the delivery task for `config`, signing with `signing` (the resolved
    /// `signingKey`), and returns its handle. The task ends when every handle is dropped and
    /// the queue is drained.
    pub fn start(config: WebhookConfig, signing: Option<SigningKey>) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let events: Arc<[NotifyEvent]> = config.events.clone().into();
        crate::spawn(deliver_all(config, signing, rx));
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

async fn deliver_all(
    config: WebhookConfig,
    signing: Option<SigningKey>,
    mut rx: mpsc::Receiver<Value>,
) {
    let client = match client(config.timeout) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "notify: the webhook client cannot be built; events are dropped");
            return;
        }
    };
    while let Some(payload) = rx.recv().await {
        let body = Bytes::from(payload.to_string());
        let event = payload["event"].as_str().unwrap_or("event").to_owned();
        let mut backoff = Duration::from_secs(1);
        for attempt in 0..=config.retries {
            match post_once(&client, &config.url, body.clone(), signing.as_ref()).await {
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

/// The webhook client: each attempt within `timeout` (connect, TLS, request and response),
/// the proxy from `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` unless `NO_PROXY` exempts the host,
/// no redirects (a moved webhook is a config error, not something to POST to blindly), and
/// the system's trust roots over rustls with ring.
pub fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .use_preconfigured_tls(client_tls())
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("cronstable/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| e.to_string())
}

fn client_tls() -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        // One unparsable system certificate should not cost every other root.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        tracing::warn!(
            errors = found.errors.len(),
            "notify: no system trust roots found; https:// webhooks will fail"
        );
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// One POST of `body` to `url`, signed with `signing` when a key is configured.
pub async fn post_once(
    client: &reqwest::Client,
    url: &str,
    body: Bytes,
    signing: Option<&SigningKey>,
) -> Result<(), DeliveryError> {
    let mut request = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json");
    if let Some(key) = signing {
        for (name, value) in key.headers(crate::clock::now_ms() / 1000, &body) {
            request = request.header(name, value);
        }
    }
    let response = request.body(body).send().await.map_err(|e| {
        if e.is_timeout() {
            DeliveryError::Timeout
        } else if e.is_builder() {
            DeliveryError::Url(e.to_string())
        } else {
            DeliveryError::Transport(error_chain(&e))
        }
    })?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(DeliveryError::Status(status))
    }
}

/// An error with its causes, as one line: reqwest's own message alone says only "error
/// sending request".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}
