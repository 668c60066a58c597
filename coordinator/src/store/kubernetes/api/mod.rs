//! How the Kubernetes lease store reaches the apiserver: credentials (in-cluster service
//! account, or a kubeconfig), and a small REST client over hyper and rustls (CFG-11).
//!
//! The REST client is `clientLibrary: http` (`library` and `auto` use the kube crate,
//! [`library`], built from the same credentials). It speaks only what the Lease algorithm
//! needs, JSON over HTTP/1.1, one
//! connection per request: a round is a GET and at most one write every `retryPeriodSeconds`,
//! so keep-alive would save little and a fresh connection never carries a stale TLS context.
//!
//! The library reads no environment variables: the caller fills a [`K8sEnv`] with
//! `KUBERNETES_SERVICE_HOST`/`PORT` and the service-account directory. The bearer token is read
//! from its file on every request by the REST client (the kube client re-reads it about once a
//! minute), because projected service-account tokens are rotated in place by the kubelet
//! (ROT-03 for the token; the CA and client certificate are checked by the store).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::config::cluster::KubernetesConfig;

/// The largest answer read from the apiserver.
const MAX_BODY: usize = 1 << 20;

/// Where in-cluster credentials live in every pod.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// What the store needs from the process environment, filled by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct K8sEnv {
    /// `KUBERNETES_SERVICE_HOST`, set by the kubelet in every pod.
    pub service_host: Option<String>,
    /// `KUBERNETES_SERVICE_PORT`.
    pub service_port: Option<String>,
    /// The service-account directory (`token`, `ca.crt`, `namespace`); normally
    /// [`SERVICE_ACCOUNT_DIR`].
    pub service_account_dir: PathBuf,
}

impl Default for K8sEnv {
    fn default() -> Self {
        Self {
            service_host: None,
            service_port: None,
            service_account_dir: PathBuf::from(SERVICE_ACCOUNT_DIR),
        }
    }
}

/// Why the store cannot reach an apiserver at all. The message names the key or file to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// A credential file could not be read.
    #[error("{key}: cannot read {}: {why}", path.display())]
    Read {
        /// The config key the file comes from.
        key: String,
        /// The file.
        path: PathBuf,
        /// The OS error.
        why: String,
    },
    /// A credential is malformed or names something this client cannot do.
    #[error("{key}: {why}")]
    Invalid {
        /// The config key (or kubeconfig field) at fault.
        key: String,
        /// What is wrong.
        why: String,
    },
}

fn invalid(key: &str, why: impl Into<String>) -> CredentialError {
    CredentialError::Invalid {
        key: key.to_owned(),
        why: why.into(),
    }
}

fn read_file(key: &str, path: &Path) -> Result<Vec<u8>, CredentialError> {
    std::fs::read(path).map_err(|e| CredentialError::Read {
        key: key.to_owned(),
        path: path.to_owned(),
        why: e.to_string(),
    })
}

/// How requests authenticate.
#[derive(Debug, Clone)]
enum Auth {
    None,
    Token(String),
    /// Re-read per request (rotated in place).
    TokenFile(PathBuf),
}

/// How to verify an https:// apiserver and prove who we are to it: the built connector, and
/// the PEM it was built from (the library client builds its own from the same bytes).
#[derive(Clone)]
struct Tls {
    connector: TlsConnector,
    name: ServerName<'static>,
    ca_pem: Vec<u8>,
    identity_pem: Option<(Vec<u8>, Vec<u8>)>,
}

/// A resolved apiserver: where it is, how to trust it, how to authenticate, and the default
/// namespace for the Lease.
#[derive(Clone)]
pub struct ApiClient {
    /// The server URL, for logs and errors.
    pub url: String,
    host: String,
    port: u16,
    authority: String,
    base_path: String,
    tls: Option<Tls>,
    auth: Auth,
    /// The namespace when `leaseNamespace` is unset (the pod's, or the kubeconfig context's).
    pub default_namespace: String,
    /// Where the credentials came from, for the start log line.
    pub source: String,
    /// The credential files this client was built from (kubeconfig, CA, client certificate and
    /// key), with their bytes, so the store can notice an in-place rotation (ROT-03).
    pub tls_files: Vec<(PathBuf, Vec<u8>)>,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("url", &self.url)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// An HTTP answer: status and body.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body (JSON from a real apiserver, a `Status` object on errors).
    pub body: Vec<u8>,
}

/// Aborts the spawned connection task when the request future is dropped (a round the driver
/// cancelled), so no request outlives its round.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl ApiClient {
    /// Sends one request (`body` is JSON) and reads the whole answer, within `timeout`.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Answer, String> {
        let what = format!("{method} {}{path}", self.url);
        match tokio::time::timeout(timeout, self.send_inner(method, path, body)).await {
            Ok(Ok(a)) => Ok(a),
            Ok(Err(e)) => Err(format!("{what}: {e}")),
            Err(_) => Err(format!("{what}: no answer within {timeout:?}")),
        }
    }

    async fn send_inner(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Answer, String> {
        let token = match &self.auth {
            Auth::None => None,
            Auth::Token(t) => Some(t.clone()),
            Auth::TokenFile(p) => Some(
                tokio::fs::read_to_string(p)
                    .await
                    .map_err(|e| format!("cannot read the token {}: {e}", p.display()))?
                    .trim()
                    .to_owned(),
            ),
        };
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base_path))
            .header(http::header::HOST, &self.authority)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::USER_AGENT, "cronstable");
        if let Some(t) = token {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(bytes::Bytes::from(body.unwrap_or_default())))
            .map_err(|e| format!("cannot build the request: {e}"))?;
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let resp = match &self.tls {
            Some(t) => {
                let tls = t
                    .connector
                    .connect(t.name.clone(), tcp)
                    .await
                    .map_err(|e| format!("TLS handshake failed: {e}"))?;
                exchange(TokioIo::new(tls), req).await?
            }
            None => exchange(TokioIo::new(tcp), req).await?,
        };
        Ok(resp)
    }
}

async fn exchange<IO>(io: IO, req: Request<Full<bytes::Bytes>>) -> Result<Answer, String>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    let _driver = AbortOnDrop(crate::spawn(async move {
        let _ = conn.await;
    }));
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let status = resp.status();
    // A Lease is a few hundred bytes; a server that sends megabytes is not one to trust.
    let body = http_body_util::Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("reading the answer failed: {e}"))?
        .to_bytes()
        .to_vec();
    Ok(Answer { status, body })
}

pub mod library;

// === credentials ===

mod kubeconfig;

/// Splits a server URL into (https, host, port, authority, base path).
fn parse_url(key: &str, url: &str) -> Result<(bool, String, u16, String, String), CredentialError> {
    let uri: Uri = url
        .parse()
        .map_err(|e| invalid(key, format!("{url:?} is not a URL: {e}")))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(invalid(key, format!("{url:?} is not an http(s):// URL"))),
    };
    let authority = uri
        .authority()
        .ok_or_else(|| invalid(key, format!("{url:?} has no host")))?
        .to_string();
    let host = uri
        .host()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let base = uri.path().trim_end_matches('/').to_owned();
    Ok((https, host, port, authority, base))
}

/// The TLS client for `host`, trusting `ca` (PEM) and presenting `identity` (cert, key PEM).
fn tls_for(
    host: &str,
    ca: Option<&[u8]>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    ca_key: &str,
) -> Result<Tls, CredentialError> {
    let ca = ca.ok_or_else(|| {
        invalid(
            ca_key,
            "an https:// apiserver needs a CA to verify it (this build carries no public roots)",
        )
    })?;
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_slice_iter(ca)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(ca_key, format!("is not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(ca_key, "holds no PEM CERTIFICATE block"));
    }
    for c in certs {
        roots
            .add(c)
            .map_err(|e| invalid(ca_key, format!("holds an unusable trust anchor: {e}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(ca_key, e.to_string()))?
        .with_root_certificates(roots);
    let config = match identity.clone() {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(&cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| invalid("client-certificate", format!("is not valid PEM: {e}")))?;
            let key = PrivateKeyDer::from_pem_slice(&key)
                .map_err(|e| invalid("client-key", format!("holds no PEM private key: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| invalid("client-certificate", format!("unusable with its key: {e}")))?
        }
    };
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| invalid(ca_key, format!("{host:?} is not a TLS server name: {e}")))?;
    Ok(Tls {
        connector: TlsConnector::from(Arc::new(config)),
        name,
        ca_pem: ca.to_vec(),
        identity_pem: identity,
    })
}

/// Resolves how to reach the apiserver for `config`: the kubeconfig when one is set, else the
/// pod's service account; `apiServer` overrides the URL either way. Reads small local files.
pub fn resolve(config: &KubernetesConfig, env: &K8sEnv) -> Result<ApiClient, CredentialError> {
    match &config.kubeconfig {
        Some(path) => kubeconfig::from_kubeconfig(config, path),
        None => in_cluster(config, env),
    }
}

fn in_cluster(config: &KubernetesConfig, env: &K8sEnv) -> Result<ApiClient, CredentialError> {
    const KEY: &str = "cluster.kubernetes (in-cluster credentials)";
    let dir = &env.service_account_dir;
    let url = match (&config.api_server, &env.service_host) {
        (Some(url), _) => url.clone(),
        (None, Some(host)) => {
            let port = env.service_port.as_deref().unwrap_or("443");
            if host.contains(':') {
                format!("https://[{host}]:{port}")
            } else {
                format!("https://{host}:{port}")
            }
        }
        (None, None) => {
            return Err(invalid(
                KEY,
                "not running in a pod (KUBERNETES_SERVICE_HOST is unset); set \
                 cluster.kubernetes.kubeconfig or cluster.kubernetes.apiServer",
            ));
        }
    };
    let key = if config.api_server.is_some() {
        "cluster.kubernetes.apiServer"
    } else {
        KEY
    };
    let (https, host, port, authority, base_path) = parse_url(key, &url)?;
    let token_path = dir.join("token");
    // Read once now so a missing token fails at start, not on the first round.
    read_file(KEY, &token_path)?;
    let default_namespace = if config.lease_namespace.is_some() {
        String::new()
    } else {
        let ns_path = dir.join("namespace");
        let ns =
            String::from_utf8_lossy(&read_file("cluster.kubernetes.leaseNamespace", &ns_path)?)
                .trim()
                .to_owned();
        if ns.is_empty() {
            return Err(invalid(
                "cluster.kubernetes.leaseNamespace",
                format!("unset, and {} is empty", ns_path.display()),
            ));
        }
        ns
    };
    let mut tls_files = Vec::new();
    let tls = if https {
        let ca_path = dir.join("ca.crt");
        let ca = read_file(KEY, &ca_path)?;
        tls_files.push((ca_path.clone(), ca.clone()));
        Some(tls_for(
            &host,
            Some(&ca),
            None,
            &ca_path.display().to_string(),
        )?)
    } else {
        None
    };
    Ok(ApiClient {
        url,
        host,
        port,
        authority,
        base_path,
        tls,
        auth: Auth::TokenFile(token_path),
        default_namespace,
        source: format!("service account {}", dir.display()),
        tls_files,
    })
}
