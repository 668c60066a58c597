//! The gossip mesh's mTLS contexts, built from `cluster.tls` (GSP-01..03).
//!
//! One node certificate and key serve `/peer` and authenticate this node when it polls. The
//! server requires a client certificate that chains to `cluster.tls.ca`; the client trusts only
//! that CA and checks that the peer's certificate names the host it dialled (SAN pinning). The
//! CA file may hold several certificates, so a CA can be rolled with a trust overlap.
//!
//! [`TlsMaterial::load`] reads the three files once, fingerprints exactly the bytes it parsed,
//! and builds both contexts. Certificate rotation (ROT-01/02) compares [`TlsFiles::read`]'s
//! fingerprint with the loaded one and only swaps when a full load of the new bytes succeeds, so
//! a half-written file is retried on the next pass rather than tearing the mesh down.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use sha2::{Digest, Sha256};

use crate::config::cluster::TlsPaths;

/// Why the mesh's TLS files could not be used. Every message names the key and the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cluster.tls.{key}: cannot read {path}: {reason}")]
    Read {
        /// `ca`, `cert` or `key`.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// A file held no usable PEM item of the expected kind.
    #[error("cluster.tls.{key}: {path} {reason}")]
    Invalid {
        /// `ca`, `cert` or `key`.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// rustls refused the combination (a key that does not match the certificate, say).
    #[error("cluster.tls: {0}")]
    Build(String),
}

/// The raw bytes of the three TLS files and their combined SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    ca: Vec<u8>,
    cert: Vec<u8>,
    key: Vec<u8>,
    /// SHA-256 over the three files, each prefixed with its length.
    pub fingerprint: [u8; 32],
}

impl TlsFiles {
    /// Reads the three files (blocking; call from `spawn_blocking` on a hot path).
    pub fn read(paths: &TlsPaths) -> Result<Self, TlsError> {
        let ca = read("ca", &paths.ca)?;
        let cert = read("cert", &paths.cert)?;
        let key = read("key", &paths.key)?;
        let mut h = Sha256::new();
        for part in [&ca, &cert, &key] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
        Ok(Self {
            ca,
            cert,
            key,
            fingerprint: h.finalize().into(),
        })
    }
}

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::Read {
        key,
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Both TLS contexts of one node, built from one read of its files.
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    /// The `/peer` listener's context (client certificates required).
    pub server: Arc<ServerConfig>,
    /// The poller's context (CA-only trust, this node's certificate as client identity).
    pub client: Arc<ClientConfig>,
    /// The fingerprint of the files this was built from.
    pub fingerprint: [u8; 32],
}

impl TlsMaterial {
    /// Reads and loads the files named by `paths`.
    pub fn load(paths: &TlsPaths) -> Result<Self, TlsError> {
        Self::from_files(paths, &TlsFiles::read(paths)?)
    }

    /// Builds both contexts from bytes already read (the rotation dry run).
    pub fn from_files(paths: &TlsPaths, files: &TlsFiles) -> Result<Self, TlsError> {
        let ca_certs = certs("ca", &paths.ca, &files.ca)?;
        let mut roots = RootCertStore::empty();
        for c in ca_certs {
            roots.add(c).map_err(|e| TlsError::Invalid {
                key: "ca",
                path: paths.ca.clone(),
                reason: format!("holds a certificate that is not a usable trust anchor: {e}"),
            })?;
        }
        let chain = certs("cert", &paths.cert, &files.cert)?;
        let key = PrivateKeyDer::from_pem_slice(&files.key).map_err(|e| TlsError::Invalid {
            key: "key",
            path: paths.key.clone(),
            reason: format!("holds no PEM private key: {e}"),
        })?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = Arc::new(roots);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| TlsError::Build(format!("client verifier: {e}")))?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Build(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| {
                TlsError::Build(format!("cert and key do not form a server identity: {e}"))
            })?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Build(e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| {
                TlsError::Build(format!("cert and key do not form a client identity: {e}"))
            })?;
        Ok(Self {
            server: Arc::new(server),
            client: Arc::new(client),
            fingerprint: files.fingerprint,
        })
    }
}

fn certs(
    key: &'static str,
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let invalid = |reason: String| TlsError::Invalid {
        key,
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("is not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("holds no PEM CERTIFICATE block".into()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gossip::certgen::TestCa;

    #[test]
    fn loads_a_generated_node_identity() {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("test-ca");
        let paths = ca.write_node(dir.path(), "a", &["127.0.0.1"]).unwrap();
        let m = TlsMaterial::load(&paths).unwrap();
        assert_eq!(m.fingerprint, TlsFiles::read(&paths).unwrap().fingerprint);
    }

    #[test]
    fn errors_name_the_key_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("test-ca");
        let paths = ca.write_node(dir.path(), "a", &["127.0.0.1"]).unwrap();

        std::fs::write(&paths.cert, "not a certificate").unwrap();
        let e = TlsMaterial::load(&paths).unwrap_err().to_string();
        assert!(e.starts_with("cluster.tls.cert: "), "{e}");
        assert!(e.contains(&paths.cert.display().to_string()), "{e}");

        let missing = TlsPaths {
            ca: dir.path().join("nope.pem"),
            ..paths.clone()
        };
        let e = TlsMaterial::load(&missing).unwrap_err().to_string();
        assert!(e.starts_with("cluster.tls.ca: cannot read "), "{e}");
    }

    #[test]
    fn a_key_that_does_not_match_the_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("test-ca");
        let a = ca
            .write_node(&dir.path().join("a"), "a", &["127.0.0.1"])
            .unwrap();
        let b = ca
            .write_node(&dir.path().join("b"), "b", &["127.0.0.1"])
            .unwrap();
        let mixed = TlsPaths { key: b.key, ..a };
        let e = TlsMaterial::load(&mixed).unwrap_err();
        assert!(matches!(e, TlsError::Build(_)), "{e}");
    }
}
