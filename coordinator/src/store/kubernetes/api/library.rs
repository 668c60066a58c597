//! The `clientLibrary: library` client (and what `auto` picks): the kube crate's `Client` with
//! `Api<Lease>` from k8s-openapi.
//!
//! It is built from the same resolved credentials as the REST client (this crate's own
//! service-account and kubeconfig reading, which never touches the environment), so the two
//! clients reach the same server the same way and differ only in who speaks HTTP. The Lease
//! algorithm works on JSON either way: a typed Lease is converted at this boundary, so
//! everything the algorithm keeps (resourceVersion, unknown metadata) round-trips.

use std::time::Duration;

use base64::Engine;
use http::StatusCode;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use serde_json::Value;

use super::{ApiClient, Auth};

/// A kube client for one resolved apiserver.
#[derive(Clone)]
pub struct LibraryClient {
    client: kube::Client,
}

/// The answer shape the store works on: the HTTP status, and the Lease as JSON on success or
/// the `Status` message on failure.
pub type Answer = (StatusCode, Value);

fn b64(pem: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(pem)
}

impl LibraryClient {
    /// A kube client for `api`, each request bounded by `timeout`. Needs a tokio runtime.
    pub fn new(api: &ApiClient, timeout: Duration) -> Result<Self, String> {
        let uri: http::Uri = api.url.parse().map_err(|e| format!("{}: {e}", api.url))?;
        let mut config = kube::Config::new(uri);
        config.default_namespace = api.default_namespace.clone();
        // The store bounds every call by `timeout` itself (with a clearer message); kube's own
        // socket timeouts are a backstop behind it.
        config.connect_timeout = Some(timeout * 2);
        config.read_timeout = Some(timeout * 2);
        config.write_timeout = Some(timeout * 2);
        if let Some(tls) = &api.tls {
            use rustls::pki_types::pem::PemObject;
            let ders = rustls::pki_types::CertificateDer::pem_slice_iter(&tls.ca_pem)
                .map(|c| c.map(|c| c.to_vec()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the CA is not valid PEM: {e}"))?;
            config.root_cert = Some(ders);
            if let Some((cert, key)) = &tls.identity_pem {
                config.auth_info.client_certificate_data = Some(b64(cert));
                config.auth_info.client_key_data = Some(b64(key).into());
            }
        }
        match &api.auth {
            Auth::None => {}
            Auth::Token(t) => config.auth_info.token = Some(t.clone().into()),
            // kube re-reads a token file about once a minute, as the kubelet rotates it. It
            // sends the file verbatim, so a trailing newline (which the kubelet never writes,
            // but an editor does) would break every request: refuse it here with the reason.
            Auth::TokenFile(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| format!("cannot read the token {}: {e}", p.display()))?;
                if text.trim() != text {
                    return Err(format!(
                        "the token file {} has leading or trailing whitespace (a final \
                         newline?), which the kube client library would send as part of the \
                         token; remove it, or set cluster.kubernetes.clientLibrary: http",
                        p.display()
                    ));
                }
                config.auth_info.token_file = Some(p.display().to_string());
            }
        }
        let client = kube::Client::try_from(config).map_err(|e| format!("kube client: {e}"))?;
        Ok(Self { client })
    }

    fn leases(&self, ns: &str) -> Api<Lease> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// GET the Lease; 404 comes back as a status, like the REST client's.
    pub async fn get(&self, ns: &str, name: &str) -> Result<Answer, String> {
        answer(self.leases(ns).get(name).await)
    }

    /// POST a new Lease.
    pub async fn create(&self, ns: &str, lease: &Value) -> Result<Answer, String> {
        let typed = typed(lease)?;
        answer(self.leases(ns).create(&PostParams::default(), &typed).await)
    }

    /// PUT the Lease back; its `metadata.resourceVersion` makes it conditional.
    pub async fn replace(&self, ns: &str, name: &str, lease: &Value) -> Result<Answer, String> {
        let typed = typed(lease)?;
        answer(
            self.leases(ns)
                .replace(name, &PostParams::default(), &typed)
                .await,
        )
    }
}

fn typed(lease: &Value) -> Result<Lease, String> {
    serde_json::from_value(lease.clone()).map_err(|e| format!("not a Lease: {e}"))
}

fn answer(r: Result<Lease, kube::Error>) -> Result<Answer, String> {
    match r {
        Ok(l) => serde_json::to_value(&l)
            .map(|v| (StatusCode::OK, v))
            .map_err(|e| format!("cannot encode the Lease: {e}")),
        // The apiserver answered with a Status: the store decides what a 404 or 409 means.
        Err(kube::Error::Api(status)) => {
            let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::BAD_GATEWAY);
            Ok((code, Value::String(status.message.clone())))
        }
        Err(e) => Err(e.to_string()),
    }
}
