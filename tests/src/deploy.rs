//! Helpers for checking the deployment artefacts under `deploy/` (`tests/deploy_artifacts.rs`):
//! reading multi-document YAML, a strict typed parse that fails on fields the type does not
//! know, and serde structs for the non-Kubernetes objects (cert-manager, kustomize).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every YAML document of `path`, as JSON values.
pub fn documents(path: &Path) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(&read(path))
        .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()))
}

/// Where `a` and `b` differ, as key paths (for a field serde dropped or changed).
pub fn differences(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let null = Value::Null;
                let (l, r) = (x.get(key).unwrap_or(&null), y.get(key).unwrap_or(&null));
                differences(l, r, &format!("{at}.{key}"), out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (l, r)) in x.iter().zip(y).enumerate() {
                differences(l, r, &format!("{at}[{i}]"), out);
            }
        }
        _ if a != b => out.push(format!("{at}: written {a}, understood as {b}")),
        _ => {}
    }
}

/// `doc` as a `T`, failing unless serializing it back gives the document again: a misspelt or
/// misplaced field is silently ignored by the typed parse, and this catches it.
pub fn typed<T: DeserializeOwned + serde::Serialize>(doc: &Value, what: &str) -> T {
    let t: T = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let back = serde_json::to_value(&t).unwrap();
    let mut diff = Vec::new();
    differences(doc, &back, "", &mut diff);
    assert!(
        diff.is_empty(),
        "{what}: fields not understood:\n{}",
        diff.join("\n")
    );
    t
}

/// A cert-manager object: apiVersion, kind, metadata and its spec, nothing else.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CertManagerObject {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata`.
    pub metadata: ObjectMeta,
    /// `spec`.
    pub spec: Value,
}

/// A cert-manager `Certificate` spec: the fields these manifests use, and no others.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CertificateSpec {
    /// `secretName`.
    pub secret_name: String,
    /// `isCA`.
    #[serde(default, rename = "isCA")]
    pub is_ca: bool,
    /// `commonName`.
    pub common_name: Option<String>,
    /// `dnsNames`.
    #[serde(default)]
    pub dns_names: Vec<String>,
    /// `duration`.
    pub duration: Option<String>,
    /// `renewBefore`.
    pub renew_before: Option<String>,
    /// `privateKey`.
    pub private_key: Option<PrivateKey>,
    /// `usages`.
    #[serde(default)]
    pub usages: Vec<String>,
    /// `issuerRef`.
    pub issuer_ref: IssuerRef,
}

/// `Certificate.spec.privateKey`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrivateKey {
    /// `algorithm`.
    pub algorithm: String,
    /// `size`.
    pub size: u32,
    /// `encoding`.
    pub encoding: Option<String>,
    /// `rotationPolicy`.
    pub rotation_policy: Option<String>,
}

/// `Certificate.spec.issuerRef`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerRef {
    /// `kind`.
    pub kind: String,
    /// `name`.
    pub name: String,
}

/// A cert-manager `Issuer` spec: self-signed or CA.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IssuerSpec {
    /// `selfSigned`.
    pub self_signed: Option<BTreeMap<String, Value>>,
    /// `ca`.
    pub ca: Option<CaIssuer>,
}

/// `Issuer.spec.ca`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CaIssuer {
    /// `secretName`.
    pub secret_name: String,
}

/// `kustomization.yaml`: the fields the base uses, and no others.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Kustomization {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `namespace`.
    pub namespace: String,
    /// `labels`.
    #[serde(default)]
    pub labels: Vec<Value>,
    /// `resources`.
    pub resources: Vec<String>,
    /// `images`.
    #[serde(default)]
    pub images: Vec<KustomizeImage>,
    /// `secretGenerator`.
    #[serde(default)]
    pub secret_generator: Vec<SecretGenerator>,
}

/// One `secretGenerator:` entry of a kustomization.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretGenerator {
    /// `name`: kustomize rewrites every `secretName` reference to it.
    pub name: String,
    /// `files`: `key=path` (relative to the kustomization).
    pub files: Vec<String>,
}

/// One `images:` entry of a kustomization.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KustomizeImage {
    /// `name`.
    pub name: String,
    /// `newName`.
    pub new_name: Option<String>,
    /// `newTag`.
    pub new_tag: Option<String>,
}
