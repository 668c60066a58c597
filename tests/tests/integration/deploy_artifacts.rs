//! The deployment artefacts under `deploy/` checked as far as this machine can check them (issue
//! 8): no cluster and no container runtime here, so instead every Kubernetes document parses
//! into its typed k8s-openapi object with no field left over, cert-manager objects and the
//! kustomization match serde structs of the fields they use, every embedded cronstable config
//! passes the real `cronstable validate-config`, every crontab parses, the manifests agree
//! with each other (mounted files exist, the Role names the configured Lease, gossip peers are
//! the StatefulSet's stable DNS names and the certificate's SAN covers them), the compose files
//! have services whose mounted files exist, and the systemd units pass `systemd-analyze verify`.

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PodSpec, PodTemplateSpec, Service, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use serde_json::Value;

use cronstable_tests::binary;
use cronstable_tests::deploy::{
    CertManagerObject, CertificateSpec, IssuerSpec, Kustomization, documents, typed,
};

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every object of the Kubernetes base, typed.
#[derive(Default)]
struct Manifests {
    config_maps: Vec<ConfigMap>,
    deployments: Vec<Deployment>,
    stateful_sets: Vec<StatefulSet>,
    services: Vec<Service>,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
    service_accounts: Vec<ServiceAccount>,
    certificates: Vec<(String, CertificateSpec)>,
    issuers: Vec<(String, IssuerSpec)>,
}

fn load_manifests(kustomization: &Kustomization) -> Manifests {
    let dir = deploy().join("kubernetes");
    let mut m = Manifests::default();
    for file in &kustomization.resources {
        let path = dir.join(file);
        for (i, doc) in documents(&path).iter().enumerate() {
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            let what = format!("{file} document {} ({kind})", i + 1);
            match kind.as_str() {
                "Namespace" => drop(typed::<Namespace>(doc, &what)),
                "ServiceAccount" => m.service_accounts.push(typed(doc, &what)),
                "Role" => m.roles.push(typed(doc, &what)),
                "RoleBinding" => m.role_bindings.push(typed(doc, &what)),
                "ConfigMap" => m.config_maps.push(typed(doc, &what)),
                "Deployment" => m.deployments.push(typed(doc, &what)),
                "StatefulSet" => m.stateful_sets.push(typed(doc, &what)),
                "Service" => m.services.push(typed(doc, &what)),
                "Certificate" | "Issuer" => {
                    let o: CertManagerObject = serde_json::from_value(doc.clone())
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(o.api_version, "cert-manager.io/v1", "{what}");
                    let name = o.metadata.name.clone().expect("a name");
                    let spec = o.spec.clone();
                    if o.kind == "Certificate" {
                        let s =
                            serde_json::from_value(spec).unwrap_or_else(|e| panic!("{what}: {e}"));
                        m.certificates.push((name, s));
                    } else {
                        let s =
                            serde_json::from_value(spec).unwrap_or_else(|e| panic!("{what}: {e}"));
                        m.issuers.push((name, s));
                    }
                }
                other => panic!("{what}: no check for kind {other:?}; add one to this test"),
            }
        }
    }
    m
}

fn kustomization() -> Kustomization {
    let path = deploy().join("kubernetes/kustomization.yaml");
    let k: Kustomization =
        serde_saphyr::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(k.api_version, "kustomize.config.k8s.io/v1beta1");
    assert_eq!(k.kind, "Kustomization");
    k
}

/// Runs the real `cronstable validate-config` on `text`; panics with its report unless valid.
fn validate_config(text: &str, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("coordinator.yaml");
    std::fs::write(&file, text).unwrap();
    let out = Command::new(binary("cronstable"))
        .arg("validate-config")
        .arg(&file)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what}: validate-config failed:\n{report}"
    );
    eprintln!("{what}: {}", report.trim());
}

fn assert_crontab_parses(text: &str, what: &str) {
    let parsed = cronstable_core::crontab::parse(text, what);
    assert!(parsed.errors.is_empty(), "{what}: {:?}", parsed.errors);
    assert!(!parsed.entries.is_empty(), "{what}: no jobs");
}

/// The config a ConfigMap holds under `key`, parsed as YAML.
fn config_value(m: &Manifests, name: &str) -> Value {
    let cm = m
        .config_maps
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name));
    let text = &cm.and_then(|c| c.data.as_ref()).expect("data")["coordinator.yaml"];
    serde_saphyr::from_str(text).unwrap()
}

/// The pod templates of every workload, by workload name.
fn pods(m: &Manifests) -> Vec<(String, &PodTemplateSpec)> {
    let d = m
        .deployments
        .iter()
        .map(|d| (&d.metadata, &d.spec.as_ref().unwrap().template));
    let s = m
        .stateful_sets
        .iter()
        .map(|s| (&s.metadata, &s.spec.as_ref().unwrap().template));
    d.chain(s)
        .map(|(meta, t)| (meta.name.clone().unwrap(), t))
        .collect()
}

/// `(mountPath, key)` of every single-key (`subPath`) mount of ConfigMap `name` in any pod.
fn sub_path_mounts(m: &Manifests, name: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (_, template) in pods(m) {
        let pod = template.spec.as_ref().unwrap();
        let from_cm = |volume: &str| {
            pod.volumes
                .iter()
                .flatten()
                .any(|v| v.name == volume && v.config_map.as_ref().is_some_and(|c| c.name == name))
        };
        for c in pod
            .containers
            .iter()
            .chain(pod.init_containers.iter().flatten())
        {
            for v in c.volume_mounts.iter().flatten() {
                if let Some(key) = &v.sub_path
                    && from_cm(&v.name)
                {
                    out.push((v.mount_path.clone(), key.clone()));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Every file a container names after `--config` or `--crontab` must be a key of a ConfigMap
/// mounted at that file's directory in that container.
fn assert_mounted_files_exist(m: &Manifests, workload: &str, pod: &PodSpec) {
    let containers = pod
        .containers
        .iter()
        .chain(pod.init_containers.iter().flatten());
    for c in containers {
        let args = c.args.clone().unwrap_or_default();
        for flag in ["--config", "--crontab"] {
            let Some(i) = args.iter().position(|a| a == flag) else {
                continue;
            };
            let file = Path::new(&args[i + 1]);
            let (dir, key) = (
                file.parent().unwrap(),
                file.file_name().unwrap().to_str().unwrap(),
            );
            // The directory holding the ConfigMap, or the file itself mounted by subPath.
            let mount = c
                .volume_mounts
                .iter()
                .flatten()
                .find(|v| match &v.sub_path {
                    None => Path::new(&v.mount_path) == dir,
                    Some(k) => Path::new(&v.mount_path) == file && k == key,
                });
            let mount = mount.unwrap_or_else(|| {
                panic!(
                    "{workload}/{}: nothing mounted at {}",
                    c.name,
                    dir.display()
                )
            });
            let volume = pod
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == mount.name)
                .unwrap();
            let cm_name = &volume.config_map.as_ref().expect("a configMap volume").name;
            let cm = m
                .config_maps
                .iter()
                .find(|c| &c.metadata.name.clone().unwrap() == cm_name);
            let data = cm.and_then(|c| c.data.as_ref());
            assert!(
                data.is_some_and(|d| d.contains_key(key)),
                "{workload}/{}: {flag} {} is not in ConfigMap {cm_name}",
                c.name,
                file.display()
            );
        }
    }
}

#[test]
fn kubernetes_manifests_parse_into_typed_objects_and_agree_with_each_other() {
    let k = kustomization();
    let dir = deploy().join("kubernetes");
    // Every manifest in the directory is part of the base, and every listed one exists.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            assert!(
                k.resources.contains(&name),
                "{name} is not listed in kustomization.yaml"
            );
        }
    }
    let m = load_manifests(&k);
    assert!(!m.deployments.is_empty() && !m.stateful_sets.is_empty());

    for cm in &m.config_maps {
        let name = cm.metadata.name.clone().unwrap();
        let data = cm.data.clone().unwrap_or_default();
        let config = data
            .get("coordinator.yaml")
            .unwrap_or_else(|| panic!("{name}: no coordinator.yaml"));
        // A config may name another key of its ConfigMap by the path the pods mount it at
        // (`jobs.systemCrontab: /etc/cron.d/app`): validate it against that key's text.
        let files = tempfile::tempdir().unwrap();
        let mut config = config.clone();
        for (mount_path, key) in sub_path_mounts(&m, &name) {
            let local = files.path().join(&key);
            std::fs::write(&local, &data[&key]).unwrap();
            config = config.replace(&mount_path, &local.display().to_string());
        }
        validate_config(&config, &format!("ConfigMap {name} coordinator.yaml"));
        if let Some(crontab) = data.get("crontab") {
            assert_crontab_parses(crontab, &format!("ConfigMap {name} crontab"));
        }
    }
    let entry = k
        .images
        .iter()
        .find(|i| i.name == "cronstable")
        .expect("an images entry");
    assert!(
        entry.new_name.is_some() && entry.new_tag.is_some(),
        "{entry:?}"
    );
    assert!(!k.labels.is_empty());
    let image = &entry.name;
    for (workload, template) in pods(&m) {
        let pod = template.spec.as_ref().unwrap();
        assert_mounted_files_exist(&m, &workload, pod);
        for c in pod
            .containers
            .iter()
            .chain(pod.init_containers.iter().flatten())
        {
            assert_eq!(c.image.as_ref(), Some(image), "{workload}/{}", c.name);
        }
    }

    // The lease backend's pods run as a ServiceAccount bound to a Role for exactly that Lease.
    let lease_config = config_value(&m, "cronstable-lease");
    let lease_name = lease_config["cluster"]["kubernetes"]["leaseName"]
        .as_str()
        .unwrap();
    let lease = m
        .deployments
        .iter()
        .find(|d| d.metadata.name.as_deref() == Some("cronstable-lease"))
        .unwrap();
    let sa = lease
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .service_account_name
        .clone()
        .unwrap();
    assert!(
        m.service_accounts
            .iter()
            .any(|s| s.metadata.name.as_deref() == Some(sa.as_str()))
    );
    let binding = m
        .role_bindings
        .iter()
        .find(|b| {
            b.subjects
                .iter()
                .flatten()
                .any(|s| s.kind == "ServiceAccount" && s.name == sa)
        })
        .expect("a RoleBinding for the lease ServiceAccount");
    assert_eq!(binding.role_ref.kind, "Role");
    let role = m
        .roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(binding.role_ref.name.as_str()))
        .unwrap();
    let rules = role.rules.clone().unwrap_or_default();
    let named = rules
        .iter()
        .find(|r| r.resource_names.is_some())
        .expect("a rule scoped by name");
    // The election Lease and the retry handoff records' Lease beside it (RTY-04).
    assert_eq!(
        named.resource_names.clone().unwrap(),
        [lease_name.to_owned(), format!("{lease_name}-handoff")]
    );
    assert_eq!(named.verbs, ["get", "update"]);
    assert!(
        rules
            .iter()
            .any(|r| r.verbs == ["create"] && r.resource_names.is_none())
    );
    for r in &rules {
        assert_eq!(r.api_groups.clone().unwrap(), ["coordination.k8s.io"]);
        assert_eq!(r.resources.clone().unwrap(), ["leases"]);
    }
    check_gossip(&m, &k.namespace);
}

/// Gossip peers are dialled by the StatefulSet pods' stable DNS names, and the certificate
/// every pod presents must name the host it was dialled at (SAN pinning).
fn check_gossip(m: &Manifests, namespace: &str) {
    let sts = &m.stateful_sets[0];
    let name = sts.metadata.name.clone().unwrap();
    let spec = sts.spec.as_ref().unwrap();
    let service_name = spec.service_name.clone().expect("serviceName");
    let service = m
        .services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(service_name.as_str()))
        .unwrap();
    let svc = service.spec.as_ref().unwrap();
    assert_eq!(
        svc.cluster_ip.as_deref(),
        Some("None"),
        "the peer Service must be headless"
    );
    assert_eq!(svc.publish_not_ready_addresses, Some(true));
    let config = config_value(m, &name);
    let peers: Vec<&str> = config["cluster"]["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["host"].as_str().unwrap())
        .collect();
    let replicas = spec.replicas.unwrap() as usize;
    assert_eq!(
        peers.len(),
        replicas,
        "one peer entry per replica (the pod's own is recognised at run time)"
    );
    let port = config["cluster"]["listen"]
        .as_str()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    assert!(
        svc.ports
            .iter()
            .flatten()
            .any(|p| p.port.to_string() == port)
    );
    let pod = spec.template.spec.as_ref().unwrap();
    let tls_volume = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref())
        .find(|s| s.secret_name.as_deref() != Some(TOKENS))
        .expect("a Secret volume for the TLS files");
    let secret = tls_volume.secret_name.clone().unwrap();
    let (_, cert) = m
        .certificates
        .iter()
        .find(|(_, c)| c.secret_name == secret)
        .expect("a Certificate for the mounted Secret");
    for (i, peer) in peers.iter().enumerate() {
        let host = format!("{name}-{i}.{service_name}.{namespace}.svc.cluster.local");
        assert_eq!(*peer, format!("{host}:{port}"));
        assert!(
            cert.dns_names.iter().any(|san| san == &host
                || san
                    .strip_prefix("*.")
                    .is_some_and(|d| host.split_once('.').unwrap().1 == d)),
            "no SAN of {:?} names {host}",
            cert.dns_names
        );
    }
    for usage in ["server auth", "client auth"] {
        assert!(
            cert.usages.iter().any(|u| u == usage),
            "the peer certificate needs {usage}"
        );
    }
    // The certificate chain ends in Issuers defined here: a dedicated CA, not a shared one.
    let issuer = m
        .issuers
        .iter()
        .find(|(n, _)| *n == cert.issuer_ref.name)
        .expect("the peer Issuer");
    let ca_secret = &issuer.1.ca.as_ref().expect("a CA Issuer").secret_name;
    let (_, ca) = m
        .certificates
        .iter()
        .find(|(_, c)| &c.secret_name == ca_secret)
        .expect("the CA Certificate");
    assert!(ca.is_ca);
    let root = m
        .issuers
        .iter()
        .find(|(n, _)| *n == ca.issuer_ref.name)
        .expect("the CA's Issuer");
    assert!(root.1.self_signed.is_some());
    for (_, c) in &m.certificates {
        assert_eq!(c.issuer_ref.kind, "Issuer");
        if let Some(k) = &c.private_key {
            assert!(k.size >= 256 && !k.algorithm.is_empty());
        }
    }
}

#[test]
fn compose_files_have_services_and_their_configs_pass_validate_config() {
    let dir = deploy().join("compose");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        files += 1;
        let doc: Value = serde_saphyr::from_str(&read(&path))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let services = doc["services"]
            .as_object()
            .unwrap_or_else(|| panic!("{}: no services", path.display()));
        assert!(!services.is_empty());
        for (name, s) in services {
            assert!(
                s.get("image").is_some() || s.get("build").is_some(),
                "{name}: no image"
            );
            for v in s["volumes"].as_array().into_iter().flatten() {
                let source = v.as_str().unwrap().split(':').next().unwrap();
                // certs/ and tokens/ are made by make-certs.sh and make-tokens.sh, not committed.
                if source.starts_with("./config") {
                    assert!(
                        dir.join(source).exists(),
                        "{}: {name} mounts missing {source}",
                        path.display()
                    );
                }
            }
        }
    }
    assert_eq!(files, 3, "gossip-3, spread-10 and etcd");
    let mut configs = 0;
    let mut stack = vec![dir.join("config")];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(d).unwrap() {
            let path = entry.unwrap().path();
            let what = path.strip_prefix(&dir).unwrap().display().to_string();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                validate_config(&read(&path), &what);
                configs += 1;
            } else {
                assert_crontab_parses(&read(&path), &what);
            }
        }
    }
    assert_eq!(configs, 3 + 10 + 1);
}

/// The Secret every Kubernetes pod reads its tokens from.
const TOKENS: &str = "cronstable-tokens";

/// A coordinator config's `api.authToken.fromFile` and `web.authToken.fromFile`.
fn token_files(config: &Value, what: &str) -> (String, String) {
    let file = |api: &str| {
        config[api]["authToken"]["fromFile"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: {api}.authToken is not read from a file: {config}"))
            .to_owned()
    };
    (file("api"), file("web"))
}

/// Red on the artefacts before the origin issue: none set a token, so every shipped HTTP API
/// (on 0.0.0.0:8080) let anyone who reached it start a job.
#[test]
fn every_shipped_coordinator_reads_both_tokens_from_a_secret_or_file() {
    // Kubernetes: the Secret is generated from two files, mounted in every pod, named by
    // every coordinator config, and sent by every shim and every gate line.
    let k = kustomization();
    let generator = k
        .secret_generator
        .iter()
        .find(|g| g.name == TOKENS)
        .expect("a secretGenerator for the tokens");
    assert_eq!(generator.files, ["api=tokens/api", "web=tokens/web"]);
    let ignored = read(&deploy().join("../.gitignore"));
    assert!(
        ignored.contains("/deploy/kubernetes/tokens/"),
        "tokens/ must not be committed"
    );
    let m = load_manifests(&k);
    for cm in &m.config_maps {
        let name = cm.metadata.name.clone().unwrap();
        let data = cm.data.as_ref().unwrap();
        if let Some(text) = data.get("coordinator.yaml") {
            let config: Value = serde_saphyr::from_str(text).unwrap();
            let (api, web) = token_files(&config, &name);
            assert_eq!(
                (api.as_str(), web.as_str()),
                ("/etc/cronstable-tokens/api", "/etc/cronstable-tokens/web"),
                "{name}"
            );
        }
        for (key, text) in data {
            for line in text.lines().filter(|l| l.contains("cronstable-gate ")) {
                assert!(
                    line.contains("--api-token-file /etc/cronstable-tokens/api"),
                    "{name}/{key}: a gate line without the token: {line}"
                );
            }
        }
    }
    for (workload, template) in pods(&m) {
        let pod = template.spec.as_ref().unwrap();
        let from_secret = pod.volumes.iter().flatten().any(|v| {
            v.name == "tokens"
                && v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some(TOKENS)
        });
        assert!(from_secret, "{workload}: no tokens volume from {TOKENS}");
        for c in pod
            .containers
            .iter()
            .chain(pod.init_containers.iter().flatten())
        {
            let mounted = c
                .volume_mounts
                .iter()
                .flatten()
                .any(|v| v.name == "tokens" && v.mount_path == "/etc/cronstable-tokens");
            assert!(mounted, "{workload}/{}: the tokens are not mounted", c.name);
            let args = c.args.clone().unwrap_or_default();
            if c.command.as_deref() == Some(&["cronstable-shim".to_owned()][..]) {
                let at = args.iter().position(|a| a == "--api-token-file");
                assert_eq!(
                    at.map(|i| args[i + 1].as_str()),
                    Some("/etc/cronstable-tokens/api"),
                    "{workload}/{}: {args:?}",
                    c.name
                );
            }
        }
    }

    // docker compose: every config names the mounted files, every service that runs a
    // coordinator or a shim mounts them, every shim sends the api token.
    let compose = deploy().join("compose");
    assert!(read(&compose.join(".gitignore")).contains("tokens/"));
    for entry in std::fs::read_dir(compose.join("config")).unwrap() {
        let path = entry.unwrap().path();
        let configs: Vec<PathBuf> = if path.is_dir() {
            std::fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect()
        } else {
            vec![path]
        };
        for config in configs
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        {
            let what = config.display().to_string();
            let value: Value = serde_saphyr::from_str(&read(config)).unwrap();
            assert_eq!(
                token_files(&value, &what),
                (
                    "/etc/cronstable/tokens/api".to_owned(),
                    "/etc/cronstable/tokens/web".to_owned()
                ),
                "{what}"
            );
        }
    }
    for file in ["gossip-3.yaml", "spread-10.yaml", "etcd.yaml"] {
        let doc: Value = serde_saphyr::from_str(&read(&compose.join(file))).unwrap();
        for (name, s) in doc["services"].as_object().unwrap() {
            let command: Vec<&str> = s["command"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let Some(program) = command.first() else {
                continue;
            };
            if !program.starts_with("cronstable") {
                continue;
            }
            let mounts_tokens = s["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v.as_str() == Some("./tokens:/etc/cronstable/tokens:ro"));
            assert!(mounts_tokens, "{file}/{name}: the tokens are not mounted");
            if *program == "cronstable-shim" {
                assert!(
                    command
                        .windows(2)
                        .any(|w| w == ["--api-token-file", "/etc/cronstable/tokens/api"]),
                    "{file}/{name}: {command:?}"
                );
            }
        }
    }
}

#[test]
fn systemd_units_pass_systemd_analyze_verify() {
    // Failing, not skipping, without systemd-analyze: a silent pass would hide that the units
    // were never checked. Debian's `systemd` package provides it.
    let probe = Command::new("systemd-analyze").arg("--version").output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "systemd-analyze is not available; install Debian's systemd package to check deploy/systemd"
    );
    // verify insists that ExecStart programs exist, so the units are checked with the paths
    // pointed at the binaries just built instead of /usr/local/bin.
    let bin_dir = binary("cronstable").parent().unwrap().to_owned();
    let tmp = tempfile::tempdir().unwrap();
    let mut units = Vec::new();
    for name in ["cronstable.service", "cronstable-shim.service"] {
        let text = read(&deploy().join("systemd").join(name));
        assert!(text.contains("/usr/local/bin/"), "{name}");
        let path = tmp.path().join(name);
        std::fs::write(
            &path,
            text.replace("/usr/local/bin/", &format!("{}/", bin_dir.display())),
        )
        .unwrap();
        units.push(path);
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(&units)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Unknown keys are only warnings (exit 0), so any output at all fails the test.
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify:\n{stderr}"
    );
}

#[test]
fn the_dockerfile_copies_the_binaries_the_workspace_builds() {
    let text = read(&deploy().join("Dockerfile"));
    for bin in ["cronstable", "cronstable-shim", "cronstable-gate"] {
        assert!(binary(bin).exists());
        assert!(
            text.contains(&format!("target/release/{bin} "))
                || text.contains(&format!("target/release/{bin}\n")),
            "{bin}"
        );
    }
    assert!(text.contains("FROM debian:bookworm-slim"));
}
