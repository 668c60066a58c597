//! Out-of-cluster credentials: the parts of a kubeconfig file this client can use (the current
//! context's server, CA, bearer token or token file, and client certificate). What it cannot
//! run (exec plugins, auth providers, basic auth) or must not (`insecure-skip-tls-verify`) is
//! refused at start with the reason, rather than half-working.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

use super::{ApiClient, Auth, CredentialError, invalid, parse_url, read_file, tls_for};
use crate::config::cluster::KubernetesConfig;

#[derive(Debug, Default, Deserialize)]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<Named<KcCluster>>,
    #[serde(default)]
    users: Vec<Named<KcUser>>,
    #[serde(default)]
    contexts: Vec<Named<KcContext>>,
    #[serde(rename = "current-context", default)]
    current_context: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    item: T,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct KcCluster {
    server: Option<String>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct KcUser {
    token: Option<String>,
    token_file: Option<String>,
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    exec: Option<serde::de::IgnoredAny>,
    auth_provider: Option<serde::de::IgnoredAny>,
    username: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct KcContext {
    cluster: String,
    user: Option<String>,
    namespace: Option<String>,
}

/// A PEM blob from a kubeconfig `*-data` field (base64) or file field (a path relative to the
/// kubeconfig's directory).
fn pem_source(
    key: &str,
    data: Option<&String>,
    file: Option<&String>,
    dir: &Path,
    files: &mut Vec<(PathBuf, Vec<u8>)>,
) -> Result<Option<Vec<u8>>, CredentialError> {
    if let Some(d) = data {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(d.trim())
            .map_err(|e| invalid(&format!("{key}-data"), format!("is not base64: {e}")))?;
        return Ok(Some(bytes));
    }
    let Some(f) = file else { return Ok(None) };
    let path = dir.join(f);
    let bytes = read_file(key, &path)?;
    files.push((path, bytes.clone()));
    Ok(Some(bytes))
}

/// The kubeconfig key every error names.
const KEY: &str = "cluster.kubernetes.kubeconfig";

/// The current context, resolved: its name, and the cluster and user it names.
struct Selected<'a> {
    context_name: String,
    context: &'a KcContext,
    cluster: &'a KcCluster,
    user: &'a KcUser,
}

static NO_USER: KcUser = KcUser {
    token: None,
    token_file: None,
    client_certificate: None,
    client_certificate_data: None,
    client_key: None,
    client_key_data: None,
    exec: None,
    auth_provider: None,
    username: None,
};

impl Kubeconfig {
    /// The current context (or the only one), with its cluster and user; refuses what this
    /// client cannot run or must not trust.
    fn select(&self) -> Result<Selected<'_>, CredentialError> {
        let context_name = self
            .current_context
            .clone()
            .or_else(|| (self.contexts.len() == 1).then(|| self.contexts[0].name.clone()))
            .ok_or_else(|| invalid(KEY, "has no current-context"))?;
        let context = find(&self.contexts, &context_name).ok_or_else(|| {
            invalid(
                KEY,
                format!("current-context {context_name:?} is not defined"),
            )
        })?;
        let cluster = find(&self.clusters, &context.cluster)
            .ok_or_else(|| invalid(KEY, format!("cluster {:?} is not defined", context.cluster)))?;
        let user = match &context.user {
            None => &NO_USER,
            Some(u) => find(&self.users, u)
                .ok_or_else(|| invalid(KEY, format!("user {u:?} is not defined")))?,
        };
        if user.exec.is_some() || user.auth_provider.is_some() || user.username.is_some() {
            return Err(invalid(
                KEY,
                format!(
                    "user {:?} authenticates by exec plugin, auth-provider or basic auth, which \
                     this client does not run; use a token, tokenFile or client certificate",
                    context.user.as_deref().unwrap_or_default()
                ),
            ));
        }
        if cluster.insecure_skip_tls_verify {
            return Err(invalid(
                KEY,
                format!(
                    "cluster {:?} sets insecure-skip-tls-verify, which cronstable refuses: a \
                     lease store that anyone can impersonate is no fence; give its CA instead",
                    context.cluster
                ),
            ));
        }
        Ok(Selected {
            context_name,
            context,
            cluster,
            user,
        })
    }
}

fn find<'a, T>(items: &'a [Named<T>], name: &str) -> Option<&'a T> {
    items.iter().find(|n| n.name == name).map(|n| &n.item)
}

pub(super) fn from_kubeconfig(
    config: &KubernetesConfig,
    path: &Path,
) -> Result<ApiClient, CredentialError> {
    let text = read_file(KEY, path)?;
    let text = String::from_utf8(text).map_err(|_| invalid(KEY, "is not UTF-8"))?;
    let kc: Kubeconfig = serde_saphyr::from_str(&text)
        .map_err(|e| invalid(KEY, format!("{} is not a kubeconfig: {e}", path.display())))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let Selected {
        context_name,
        context,
        cluster,
        user,
    } = kc.select()?;
    let (url, url_key) = match (&config.api_server, &cluster.server) {
        (Some(u), _) => (u.clone(), "cluster.kubernetes.apiServer"),
        (None, Some(u)) => (u.clone(), KEY),
        (None, None) => {
            return Err(invalid(
                KEY,
                format!("cluster {:?} has no server", context.cluster),
            ));
        }
    };
    let (https, host, port, authority, base_path) = parse_url(url_key, &url)?;
    // The kubeconfig itself is watched too: a rewritten one (new token, new server) is picked
    // up the same way as a rotated certificate.
    let mut tls_files = vec![(path.to_owned(), text.clone().into_bytes())];
    let tls = if https {
        Some(tls_of(cluster, user, &host, dir, &mut tls_files)?)
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
        auth: auth_of(user, dir)?,
        default_namespace: context
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        source: format!("kubeconfig {} (context {context_name})", path.display()),
        tls_files,
    })
}

/// The TLS client for an `https` server: the cluster's CA and the user's client certificate,
/// each from its `*-data` field or its file (added to `files`, which are watched).
fn tls_of(
    cluster: &KcCluster,
    user: &KcUser,
    host: &str,
    dir: &Path,
    files: &mut Vec<(PathBuf, Vec<u8>)>,
) -> Result<super::Tls, CredentialError> {
    let ca = pem_source(
        "certificate-authority",
        cluster.certificate_authority_data.as_ref(),
        cluster.certificate_authority.as_ref(),
        dir,
        files,
    )?;
    let cert = pem_source(
        "client-certificate",
        user.client_certificate_data.as_ref(),
        user.client_certificate.as_ref(),
        dir,
        files,
    )?;
    let key = pem_source(
        "client-key",
        user.client_key_data.as_ref(),
        user.client_key.as_ref(),
        dir,
        files,
    )?;
    let identity = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => {
            return Err(invalid(
                KEY,
                "client-certificate and client-key must be given together",
            ));
        }
    };
    tls_for(host, ca.as_deref(), identity, "certificate-authority")
}

/// The user's bearer token, inline or from a file (read once now, so a missing file is an
/// error at start; the client reads it again per request, so a rotated token is picked up).
fn auth_of(user: &KcUser, dir: &Path) -> Result<Auth, CredentialError> {
    Ok(match (&user.token, &user.token_file) {
        (Some(t), _) => Auth::Token(t.trim().to_owned()),
        (None, Some(f)) => {
            let p = dir.join(f);
            read_file("tokenFile", &p)?;
            Auth::TokenFile(p)
        }
        (None, None) => Auth::None,
    })
}
