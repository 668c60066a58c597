//! When the TLS certificates this node is configured with stop being valid, for
//! `cronstable_tls_certificate_expiration_timestamp_seconds{tls, file}`: a gossip node whose
//! certificate expires can no longer attest or be attested, and drops out of the quorum; a CA
//! bundle that expires takes every node with it. An alert a few weeks ahead is the operator's
//! chance to roll them (`deploy/monitoring/alerts.yaml`).
//!
//! The files are the ones the config names (`cluster.tls`, `cluster.observability.tls`,
//! `cluster.etcd.tls`), read again at every scrape: a rotated file shows its new date at once,
//! and the files are a few kilobytes. A node's own certificate is judged by its first
//! certificate (the leaf; what follows is its chain); a CA file by the latest of its
//! certificates, because trust holds while any of them is valid (a CA roll keeps two). A file
//! that cannot be read or holds no certificate shows no series (the mesh or the store client
//! says why when it loads it), and one DEBUG line.

use std::path::PathBuf;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::config::cluster::ClusterConfig;

/// One configured certificate file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateFile {
    /// Which TLS configuration: `cluster` (the gossip mesh), `observability` (a lease
    /// backend's observability mesh) or `etcd` (the etcd client).
    pub tls: &'static str,
    /// `cert` (this node's own certificate) or `ca` (the trust bundle).
    pub file: &'static str,
    /// Where it is.
    pub path: PathBuf,
}

/// What a scrape shows of one certificate file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateNow {
    /// See [`CertificateFile::tls`].
    pub tls: &'static str,
    /// See [`CertificateFile::file`].
    pub file: &'static str,
    /// When it stops being valid (Unix seconds).
    pub not_after_s: i64,
}

/// The certificate files a cluster section names.
pub fn configured(cluster: Option<&ClusterConfig>) -> Vec<CertificateFile> {
    let Some(c) = cluster else {
        return Vec::new();
    };
    let mut files = Vec::new();
    let mut add = |tls, file, path: Option<&PathBuf>| {
        if let Some(path) = path {
            files.push(CertificateFile {
                tls,
                file,
                path: path.clone(),
            });
        }
    };
    if let Some(t) = &c.tls {
        add("cluster", "cert", Some(&t.cert));
        add("cluster", "ca", Some(&t.ca));
    }
    if let Some(crate::config::cluster::ObservabilityConfig::Mesh { tls, .. }) = &c.observability {
        add("observability", "cert", Some(&tls.cert));
        add("observability", "ca", Some(&tls.ca));
    }
    if let Some(t) = c.etcd.as_ref().and_then(|e| e.tls.as_ref()) {
        add("etcd", "cert", t.cert.as_ref());
        add("etcd", "ca", t.ca.as_ref());
    }
    files
}

/// When the certificates of `pem` stop being valid for a file of kind `file` (see the module
/// docs): Unix seconds, or why it cannot tell.
pub fn not_after(pem: &[u8], file: &str) -> Result<i64, String> {
    let mut dates = Vec::new();
    for der in CertificateDer::pem_slice_iter(pem) {
        let der = der.map_err(|e| format!("not PEM: {e}"))?;
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
            .map_err(|e| format!("not an X.509 certificate: {e}"))?;
        dates.push(cert.validity().not_after.timestamp());
        if file == "cert" {
            break;
        }
    }
    dates
        .into_iter()
        .max()
        .ok_or_else(|| "holds no certificate".to_owned())
}

/// Reads every file of `files` now; one that cannot be read or judged is left out.
pub fn read(files: &[CertificateFile]) -> Vec<CertificateNow> {
    files
        .iter()
        .filter_map(|f| {
            let judged = std::fs::read(&f.path)
                .map_err(|e| e.to_string())
                .and_then(|pem| not_after(&pem, f.file));
            match judged {
                Ok(not_after_s) => Some(CertificateNow {
                    tls: f.tls,
                    file: f.file,
                    not_after_s,
                }),
                Err(e) => {
                    tracing::debug!(path = %f.path.display(), "no certificate expiry: {e}");
                    None
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, KeyPair, date_time_ymd};

    use super::*;

    fn cert(year: i32) -> String {
        let mut params = CertificateParams::new(vec!["a.example".to_owned()]).unwrap();
        params.not_after = date_time_ymd(year, 3, 1);
        params
            .self_signed(&KeyPair::generate().unwrap())
            .unwrap()
            .pem()
    }

    /// 1 March of `year`, 00:00 UTC, in Unix seconds.
    fn march_first(year: i32) -> i64 {
        chrono::NaiveDate::from_ymd_opt(year, 3, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc()
            .timestamp()
    }

    #[test]
    fn a_node_certificate_is_judged_by_its_first_and_a_bundle_by_its_latest() {
        let chain = format!("{}{}", cert(2031), cert(2040));
        assert_eq!(not_after(chain.as_bytes(), "cert"), Ok(march_first(2031)));
        let bundle = format!("{}{}{}", cert(2033), cert(2035), cert(2030));
        assert_eq!(not_after(bundle.as_bytes(), "ca"), Ok(march_first(2035)));
    }

    #[test]
    fn a_file_without_a_certificate_says_why() {
        assert_eq!(not_after(b"", "ca"), Err("holds no certificate".to_owned()));
        let key = KeyPair::generate().unwrap().serialize_pem();
        assert!(not_after(key.as_bytes(), "cert").is_err());
        let broken = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let e = not_after(broken.as_bytes(), "cert").unwrap_err();
        assert!(e.contains("not an X.509 certificate"), "{e}");
    }

    #[test]
    fn every_configured_file_is_read_and_an_unreadable_one_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.pem");
        std::fs::write(&path, cert(2032)).unwrap();
        let files = [
            CertificateFile {
                tls: "cluster",
                file: "cert",
                path,
            },
            CertificateFile {
                tls: "cluster",
                file: "ca",
                path: dir.path().join("missing.pem"),
            },
        ];
        assert_eq!(
            read(&files),
            [CertificateNow {
                tls: "cluster",
                file: "cert",
                not_after_s: march_first(2032),
            }]
        );
    }
}
