//! Binding the coordinator's listeners before it runs, so a bind failure is reported up front
//! and tests can pass in listeners bound to port 0.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixListener, UnixStream};

use crate::config::{Config, HostPort, ListenAddr};

/// The gRPC listener: TCP or a Unix socket.
#[derive(Debug)]
pub enum ApiListener {
    /// A TCP listener.
    Tcp(TcpListener),
    /// A Unix-domain socket listener, and the path it owns.
    Unix(UnixListener, PathBuf),
}

impl ApiListener {
    /// The address clients dial: `http://host:port` or `unix:/path`.
    pub fn url(&self) -> String {
        match self {
            ApiListener::Tcp(l) => match l.local_addr() {
                Ok(a) => format!("http://{a}"),
                Err(_) => "http://(unknown)".into(),
            },
            ApiListener::Unix(_, p) => format!("unix:{}", p.display()),
        }
    }
}

/// Every listener the coordinator serves on.
#[derive(Debug)]
pub struct Listeners {
    /// `api.listen`: gRPC for executors.
    pub api: ApiListener,
    /// `web.listen`: the HTTP API.
    pub web: TcpListener,
}

impl Listeners {
    /// The HTTP API's bound address.
    pub fn web_addr(&self) -> io::Result<SocketAddr> {
        self.web.local_addr()
    }
}

/// A listener that could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The TCP address could not be bound (in use, not local, no permission).
    #[error("cannot listen on {key} {addr}: {source}")]
    Tcp {
        /// The config key.
        key: &'static str,
        /// The address as configured.
        addr: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Another process is serving on the Unix socket already (MN-02: never two coordinators on
    /// one socket).
    #[error("cannot listen on api.listen unix:{0}: another process is already serving there")]
    UnixInUse(PathBuf),
    /// The Unix socket could not be bound.
    #[error("cannot listen on api.listen unix:{path}: {source}")]
    Unix {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

async fn bind_tcp(key: &'static str, addr: &HostPort) -> Result<TcpListener, BindError> {
    let text = addr.to_socket_addr_string();
    TcpListener::bind(&text)
        .await
        .map_err(|source| BindError::Tcp {
            key,
            addr: text,
            source,
        })
}

async fn bind_unix(path: &Path) -> Result<UnixListener, BindError> {
    if path.exists() {
        // A socket file left by a crashed coordinator is stale; a live one means a second
        // coordinator is being started, which must fail rather than steal the socket.
        if UnixStream::connect(path).await.is_ok() {
            return Err(BindError::UnixInUse(path.to_owned()));
        }
        let _ = std::fs::remove_file(path);
    }
    UnixListener::bind(path).map_err(|source| BindError::Unix {
        path: path.to_owned(),
        source,
    })
}

impl Listeners {
    /// Binds `api.listen` and `web.listen` as configured.
    pub async fn bind(config: &Config) -> Result<Self, BindError> {
        let api = match &config.api.listen {
            ListenAddr::Tcp(addr) => ApiListener::Tcp(bind_tcp("api.listen", addr).await?),
            ListenAddr::Unix(path) => ApiListener::Unix(bind_unix(path).await?, path.clone()),
        };
        let web = bind_tcp("web.listen", &config.web.listen).await?;
        Ok(Self { api, web })
    }
}
