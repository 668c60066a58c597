//! The channel to the coordinator: one lazily connected HTTP/2 connection (TCP or a Unix
//! socket) with keepalives, the API token added to every call. [`super::client`] and
//! [`super::batch`] both call through it.

use std::time::Duration;

use cronstable_proto::v1::executor_client::ExecutorClient;
use hyper_util::rt::TokioIo;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::coordinator::token::{ApiToken, Bearer};

/// The gRPC client every call goes through: the channel, with the API token added to each call.
pub type Client = ExecutorClient<InterceptedService<Channel, Bearer>>;

/// HTTP/2 ping interval on the coordinator connection.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long a ping may go unanswered before the connection counts as dead.
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// A coordinator address that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid coordinator address {addr:?}: {reason} (expected http://host:port or unix:/path)")]
pub struct AddressError {
    addr: String,
    reason: String,
}

/// A client for `addr` (`http://host:port` or `unix:/path`) that sends `token` with every
/// call, connecting lazily: a coordinator that starts after the shim is picked up on the first
/// call that reaches it.
pub fn connect(
    addr: &str,
    deadline: Duration,
    token: Option<ApiToken>,
) -> Result<Client, AddressError> {
    let bad = |reason: &str| AddressError {
        addr: addr.to_owned(),
        reason: reason.to_owned(),
    };
    let channel = if let Some(path) = addr.strip_prefix("unix:") {
        if path.is_empty() {
            return Err(bad("the socket path is empty"));
        }
        let path = std::path::PathBuf::from(path);
        // The URI is a placeholder: the connector below ignores it and dials the socket.
        Endpoint::from_static("http://[::1]:1")
            .connect_timeout(deadline)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true)
            .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }))
    } else {
        if !addr.starts_with("http://") && !addr.starts_with("https://") {
            return Err(bad("unknown scheme"));
        }
        Endpoint::from_shared(addr.to_owned())
            .map_err(|e| bad(&e.to_string()))?
            .connect_timeout(deadline)
            .tcp_nodelay(true)
            // A half-open connection (the coordinator's host vanished) must break the
            // Watch stream so the session reconnects and re-registers.
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true)
            .connect_lazy()
    };
    Ok(ExecutorClient::with_interceptor(
        channel,
        Bearer::new(token),
    ))
}
