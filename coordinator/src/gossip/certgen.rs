//! A throwaway certificate authority for the local multi-node demo and the tests.
//!
//! The coordinator itself never issues certificates (GSP-02): production meshes bring their own
//! dedicated CA. This exists so `cronstable demo --nodes 3` and the integration tests can build a
//! real mTLS mesh with no external tooling. Node certificates carry both the serverAuth and
//! clientAuth usages, because one identity serves `/peer` and polls (GSP-03).

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

use crate::config::cluster::TlsPaths;

/// Why a certificate could not be generated or written.
#[derive(Debug, thiserror::Error)]
pub enum CertGenError {
    /// rcgen refused the parameters.
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A self-signed CA that signs node certificates.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    cert_pem: String,
}

impl TestCa {
    /// A fresh CA with common name `name`.
    ///
    /// # Panics
    /// Never in practice: the fixed parameters are always accepted by rcgen.
    pub fn new(name: &str) -> Self {
        Self::try_new(name).expect("fixed CA parameters are valid")
    }

    /// A fresh CA with common name `name`.
    pub fn try_new(name: &str) -> Result<Self, CertGenError> {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        let cert_pem = issuer.pem();
        Ok(Self { issuer, cert_pem })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A node certificate and key (PEM) for `node` with the given SANs (DNS names or IPs).
    pub fn issue(&self, node: &str, sans: &[&str]) -> Result<(String, String), CertGenError> {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, node);
        params.subject_alt_names = sans
            .iter()
            .map(|s| match s.parse::<std::net::IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => Ok(SanType::DnsName((*s).try_into()?)),
            })
            .collect::<Result<_, rcgen::Error>>()?;
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &*self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// Writes `ca.pem`, `<node>.pem` and `<node>-key.pem` into `dir` (created if missing) and
    /// returns the paths as a `cluster.tls` section would name them.
    pub fn write_node(
        &self,
        dir: &Path,
        node: &str,
        sans: &[&str],
    ) -> Result<TlsPaths, CertGenError> {
        let (cert, key) = self.issue(node, sans)?;
        let paths = TlsPaths {
            ca: dir.join("ca.pem"),
            cert: dir.join(format!("{node}.pem")),
            key: dir.join(format!("{node}-key.pem")),
        };
        write(dir, None)?;
        write(&paths.ca, Some(&self.cert_pem))?;
        write(&paths.cert, Some(&cert))?;
        write(&paths.key, Some(&key))?;
        Ok(paths)
    }
}

fn write(path: &Path, contents: Option<&str>) -> Result<(), CertGenError> {
    let result = match contents {
        None => std::fs::create_dir_all(path),
        Some(c) => std::fs::write(path, c),
    };
    result.map_err(|source| CertGenError::Write {
        path: path.display().to_string(),
        source,
    })
}
