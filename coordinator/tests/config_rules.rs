//! The typed result of config loading: defaults, normalisations, and the shape of errors.
//! (Which inputs are rejected, and where, is table-driven in `config_fixtures.rs`.)

use std::path::{Path, PathBuf};
use std::time::Duration;

use cronstable_coordinator::config::{
    self, Backend, ClientLibrary, ConfigErrors, Distribution, HostPort, ListenAddr, Loaded,
    ObservabilityConfig, SecretSource, Topology,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/config/valid")
        .join(name)
}

fn load(name: &str) -> Loaded {
    config::load(&fixture(name)).unwrap_or_else(|e| panic!("{e}"))
}

fn parse_err(text: &str) -> ConfigErrors {
    config::parse(text, "c.yaml").expect_err(text)
}

#[test]
fn empty_and_missing_configs_are_the_defaults() {
    for text in ["", "# nothing\n", "cluster:\n", "api:\nweb:\n"] {
        let loaded = config::parse(text, "c.yaml").unwrap();
        assert_eq!(loaded.config, config::Config::default(), "{text:?}");
        assert!(loaded.warnings.is_empty());
    }
    let d = config::Config::default();
    assert_eq!(
        d.api.listen,
        ListenAddr::Tcp(HostPort::new("127.0.0.1", 7400))
    );
    assert_eq!(d.web.listen, HostPort::new("127.0.0.1", 8080));
    assert_eq!(d.api.listen.to_string(), config::DEFAULT_API_LISTEN);
    assert_eq!(d.web.listen.to_string(), config::DEFAULT_WEB_LISTEN);
    assert!(d.cluster.is_none() && d.web.auth_token.is_none());

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.yaml");
    let loaded = config::load(&missing).unwrap();
    assert_eq!(loaded.config, config::Config::default());
    assert!(
        loaded.warnings[0].contains("not found"),
        "{:?}",
        loaded.warnings
    );
    // validate-config on a path that does not exist is a failure, not "valid".
    let (ok, report) = config::validate_report(&missing);
    assert!(
        !ok && report.contains("cannot read the config file"),
        "{report}"
    );
}

#[test]
fn a_reload_refuses_an_empty_or_missing_file_that_a_start_reads_as_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.yaml");
    for text in ["", "\n  \n", "# being rewritten\n", "---\n# x\n"] {
        std::fs::write(&file, text).unwrap();
        let e = config::load_for_reload(&file).unwrap_err();
        assert!(
            e.0[0].message.contains("the file is empty"),
            "{text:?}: {e:?}"
        );
        if !text.starts_with("---") {
            assert!(
                config::load(&file).is_ok(),
                "a start reads {text:?} as the defaults"
            );
        }
    }
    std::fs::write(&file, "cluster:\n").unwrap();
    assert!(
        config::load_for_reload(&file).is_ok(),
        "a key, even empty, is content"
    );
    assert!(config::load_for_reload(&dir.path().join("nope.yaml")).is_err());
}

#[test]
fn an_unreadable_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let ConfigErrors(errors) = config::load(dir.path()).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].file, dir.path().display().to_string());
    assert!(
        errors[0]
            .to_string()
            .contains("cannot read the config file")
    );
}

#[test]
fn unknown_keys_name_file_line_column_and_path() {
    let errors = parse_err("web:\n  listen: 127.0.0.1:8080\n  authtoken: {value: x}\n");
    let text = errors.to_string();
    assert!(
        text.starts_with("c.yaml:3:3: web.authtoken: unknown field `authtoken`"),
        "{text}"
    );
    assert!(
        text.contains("authToken"),
        "names the right spelling: {text}"
    );
    let errors = parse_err("clusters: {}\n");
    assert_eq!(errors.0[0].path, "clusters");
}

#[test]
fn every_error_is_reported_one_per_line() {
    let errors = parse_err(
        "api: {listen: nope}\nweb: {listen: \"::1:80\"}\ncluster:\n  backend: etcd\n  etcd: {ttl: 1}\n",
    );
    let text = errors.to_string();
    assert_eq!(text.lines().count(), errors.0.len());
    // api.listen, web.listen, etcd.endpoints (missing) and etcd.ttl, in file order.
    let sites: Vec<(&str, Option<usize>)> =
        errors.0.iter().map(|e| (e.path.as_str(), e.line)).collect();
    assert_eq!(
        sites,
        [
            ("api.listen", Some(1)),
            ("web.listen", Some(2)),
            ("cluster.etcd.endpoints", Some(5)),
            ("cluster.etcd.ttl", Some(5)),
        ],
        "{text}"
    );
}

#[test]
fn gossip_seed_example_is_typed_with_defaults() {
    let c = load("gossip-elect.yaml").config.cluster.unwrap();
    assert_eq!(c.backend, Backend::Gossip);
    assert!(c.elect_leader);
    assert_eq!(c.node_name.as_deref(), Some("cronstable-a"));
    assert_eq!(c.listen, Some(HostPort::new("0.0.0.0", 8443)));
    assert_eq!(
        c.tls.as_ref().unwrap().ca,
        PathBuf::from("/etc/cronstable/cluster-ca.pem")
    );
    assert_eq!(
        c.peers[1].host,
        HostPort::new("cronstable-c.internal", 8443)
    );
    assert_eq!(c.size(), 3);
    assert_eq!(c.interval, Duration::from_secs(30));
    assert_eq!(c.drift_after, 3);
    assert_eq!(c.connect_timeout, Duration::from_secs(10));
    assert_eq!(c.distribution, Distribution::SingleLeader);
    assert!(c.kubernetes.is_none() && c.etcd.is_none() && c.filesystem.is_none());

    let spread = load("gossip-spread.yaml").config.cluster.unwrap();
    assert_eq!(spread.distribution, Distribution::Spread);
    assert_eq!(spread.observability, Some(ObservabilityConfig::Marker));
}

#[test]
fn durations_accept_seconds_and_duration_strings() {
    let text = "cluster:\n  interval: 1m30s\n  connectTimeout: 2.5\n  driftAfter: 5\n";
    let c = config::parse(text, "c.yaml")
        .unwrap()
        .config
        .cluster
        .unwrap();
    assert_eq!(c.interval, Duration::from_secs(90));
    assert_eq!(c.connect_timeout, Duration::from_millis(2500));
    assert_eq!(c.drift_after, 5);
    let e = parse_err("cluster:\n  interval: soon\n");
    assert_eq!(
        (e.0[0].path.as_str(), e.0[0].line),
        ("cluster.interval", Some(2))
    );
    let e = parse_err("cluster:\n  interval: 0\n  driftAfter: 0\n  connectTimeout: 0s\n");
    assert_eq!(e.0.len(), 3, "{e}");
}

#[test]
fn duplicate_peers_are_dropped_and_do_not_count() {
    let text = "cluster:\n  peers:\n    - host: b:1\n    - host: b:1\n    - host: c:1\n";
    let loaded = config::parse(text, "c.yaml").unwrap();
    let c = loaded.config.cluster.unwrap();
    assert_eq!(c.size(), 3);
    assert!(
        loaded.warnings.iter().any(|w| w.contains("c.yaml:4:")),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn self_entry_is_only_provable_on_a_matching_listener() {
    // listen binds one routable address: 127.0.0.1:8443 does not reach this listener.
    let text = "cluster:\n  listen: 10.0.0.5:8443\n  tls: {ca: a, cert: b, key: c}\n  peers:\n    - host: 127.0.0.1:8443\n    - host: x:1\n  electLeader: true\n";
    assert!(config::parse(text, "c.yaml").is_ok());
    // A different port is a different process.
    let text = text.replace("10.0.0.5:8443", "0.0.0.0:9443");
    assert!(config::parse(&text, "c.yaml").is_ok());
    let text = text.replace("0.0.0.0:9443", "localhost:8443");
    let e = config::parse(&text, "c.yaml").unwrap_err();
    assert_eq!(e.0[0].path, "cluster.peers[0].host");
}

#[test]
fn loopback_peers_on_other_addresses_are_other_nodes() {
    // Three nodes on distinct loopback addresses and one port: the peers are other listeners.
    let text = "cluster:\n  listen: 127.0.0.11:8443\n  tls: {ca: a, cert: b, key: c}\n  peers:\n    - host: 127.0.0.12:8443\n    - host: 127.0.0.13:8443\n  electLeader: true\n";
    let loaded = config::parse(text, "c.yaml").unwrap();
    assert_eq!(loaded.config.cluster.unwrap().size(), 3);
    // The listener's own address and port is still this node.
    let own = text.replace("127.0.0.13:8443", "127.0.0.11:8443");
    let e = config::parse(&own, "c.yaml").unwrap_err();
    assert_eq!(e.0[0].path, "cluster.peers[1].host");
    // localhost reaches a listener on 127.0.0.1, not one on 127.0.0.11.
    let named = text.replace("127.0.0.13:8443", "localhost:8443");
    assert!(config::parse(&named, "c.yaml").is_ok());
    let named = named.replace("127.0.0.11:8443", "127.0.0.1:8443");
    let e = config::parse(&named, "c.yaml").unwrap_err();
    assert_eq!(e.0[0].path, "cluster.peers[1].host");
    // 0.0.0.0 accepts every IPv4 loopback address; [::1] is not one of them.
    let wildcard = text.replace("127.0.0.11:8443", "0.0.0.0:8443");
    let e = config::parse(&wildcard, "c.yaml").unwrap_err();
    assert_eq!(e.0[0].path, "cluster.peers[0].host");
    let v6 = "cluster:\n  listen: 0.0.0.0:8443\n  tls: {ca: a, cert: b, key: c}\n  peers:\n    - host: \"[::1]:8443\"\n    - host: x:1\n  electLeader: true\n";
    assert!(config::parse(v6, "c.yaml").is_ok());
}

#[test]
fn lease_backends_force_election_and_clear_gossip_keys() {
    let loaded = load("lease-advisories.yaml");
    let c = loaded.config.cluster.unwrap();
    assert_eq!(c.backend, Backend::Etcd);
    assert!(
        c.elect_leader,
        "electLeader: false is ignored on a lease backend"
    );
    assert!(c.listen.is_none() && c.peers.is_empty() && c.tls.is_none());
    assert!(
        c.kubernetes.is_none(),
        "another backend's section is dropped"
    );
    let advisories: Vec<_> = loaded
        .warnings
        .iter()
        .filter(|w| w.contains("ignores the gossip keys"))
        .collect();
    assert_eq!(advisories.len(), 1, "one advisory names every ignored key");
}

#[test]
fn kubernetes_defaults_fill_in() {
    let c = config::parse("cluster: {backend: kubernetes}\n", "c.yaml")
        .unwrap()
        .config;
    let k = c.cluster.unwrap().kubernetes.unwrap();
    assert_eq!(k.lease_name, "cronstable-leader");
    assert_eq!(k.lease_namespace, None);
    assert_eq!(
        (
            k.lease_duration_seconds,
            k.renew_deadline_seconds,
            k.retry_period_seconds
        ),
        (15, 10, 2)
    );
    assert_eq!(k.client_library, ClientLibrary::Auto);
    let seed = load("kubernetes.yaml")
        .config
        .cluster
        .unwrap()
        .kubernetes
        .unwrap();
    assert_eq!(seed, k);
    let e = parse_err("cluster:\n  backend: kubernetes\n  kubernetes: {clientLibrary: grpc}\n");
    assert_eq!(e.0[0].path, "cluster.kubernetes.clientLibrary");
}

#[test]
fn etcd_and_filesystem_are_typed() {
    let c = load("etcd-auth.yaml").config.cluster.unwrap();
    let etcd = c.etcd.unwrap();
    assert_eq!(
        etcd.endpoints,
        ["https://etcd-0:2379", "https://etcd-1:2379"]
    );
    assert_eq!(etcd.election_name, "cronstable/leader");
    assert_eq!(etcd.ttl, 15);
    assert_eq!(etcd.username.as_deref(), Some("root"));
    assert_eq!(
        etcd.password,
        Some(SecretSource::FromEnvVar("ETCD_PASSWORD".into()))
    );
    assert_eq!(
        etcd.tls.as_ref().unwrap().key,
        Some(PathBuf::from("/etc/etcd/client.key"))
    );
    assert!((etcd.renew_request_budget().as_secs_f64() - 1.8).abs() < 1e-9);

    let fs = load("filesystem.yaml")
        .config
        .cluster
        .unwrap()
        .filesystem
        .unwrap();
    assert_eq!(fs.path, PathBuf::from("/mnt/shared/cronstable"));
    assert_eq!(fs.election_name, "cluster/leader");
    assert_eq!(fs.ttl, 15);
    assert_eq!(fs.deployment_id, None);
    assert_eq!(fs.topology, Topology::Auto);
}

#[test]
fn listeners_and_the_web_token() {
    let c = load("listeners.yaml").config;
    assert_eq!(
        c.api.listen,
        ListenAddr::Unix("/run/cronstable/api.sock".into())
    );
    assert_eq!(c.web.listen.to_string(), "[::1]:8080");
    let token = c.web.auth_token.unwrap();
    assert_eq!(
        token,
        SecretSource::FromFile("/run/secrets/cronstable-token".into())
    );
    let read = |p: &Path| {
        assert_eq!(p, Path::new("/run/secrets/cronstable-token"));
        Ok("t0k3n\n".to_owned())
    };
    assert_eq!(token.resolve(&|_| None, &read).unwrap(), "t0k3n");
}

#[test]
fn gsp_113_observability_mesh_on_a_lease_backend_is_a_mesh_of_its_own() {
    let text = "cluster:\n  backend: filesystem\n  filesystem: {path: /mnt/shared}\n  \
                observability:\n    listen: 127.0.0.1:9443\n    \
                tls: {ca: /ca.pem, cert: /o.pem, key: /o.key}\n    \
                peers:\n      - host: 127.0.0.2:9443\n";
    let loaded = config::parse(text, "c.yaml").unwrap();
    match loaded.config.cluster.unwrap().observability {
        Some(ObservabilityConfig::Mesh {
            listen,
            peers,
            interval,
            ..
        }) => {
            assert_eq!(listen, HostPort::new("127.0.0.1", 9443));
            assert_eq!(peers.len(), 1);
            assert_eq!(interval, Duration::from_secs(30), "the default interval");
        }
        other => panic!("{other:?}"),
    }
    // Without peers it runs, alone, and says so.
    let alone = text.replace("    peers:\n      - host: 127.0.0.2:9443\n", "");
    let loaded = config::parse(&alone, "c.yaml").unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.to_string().contains("cluster.observability.peers")),
        "{:?}",
        loaded.warnings
    );
    let off = config::parse("cluster:\n  observability: false\n", "c.yaml").unwrap();
    assert_eq!(off.config.cluster.unwrap().observability, None);
}

#[test]
fn statsd_defaults_and_errors_name_the_key() {
    let on = config::parse("statsd: {}\n", "c.yaml").unwrap().config;
    let s = on.statsd.expect("statsd: {} is statsd with its defaults");
    assert_eq!(
        (s.host.as_str(), s.port, s.prefix.as_str(), s.tags),
        ("127.0.0.1", 8125, "cronstable", false)
    );
    let set = config::parse(
        "statsd:\n  host: statsd.internal\n  port: 9125\n  prefix: app.cron.\n  tags: true\n",
        "c.yaml",
    )
    .unwrap()
    .config
    .statsd
    .unwrap();
    assert_eq!(
        (set.host.as_str(), set.port, set.prefix.as_str(), set.tags),
        ("statsd.internal", 9125, "app.cron", true),
        "a trailing dot on the prefix is dropped"
    );
    assert_eq!(
        config::parse("statsd:\n", "c.yaml").unwrap().config.statsd,
        None
    );
    for (text, key, needle) in [
        ("statsd:\n  host: ' '\n", "statsd.host", "blank"),
        ("statsd:\n  port: 0\n", "statsd.port", "1 to 65535"),
        ("statsd:\n  port: 70000\n", "statsd.port", ""),
        ("statsd:\n  prefix: 'a b'\n", "statsd.prefix", "' '"),
        ("statsd:\n  prefix: 'a:b'\n", "statsd.prefix", "':'"),
        (
            "statsd:\n  prefix: a..b\n",
            "statsd.prefix",
            "empty segment",
        ),
        ("statsd:\n  prefix: .a\n", "statsd.prefix", "empty segment"),
        ("statsd:\n  server: x\n", "statsd.server", "unknown"),
    ] {
        let e = parse_err(text).to_string();
        assert!(e.contains(key) && e.contains(needle), "{text:?}: {e}");
        assert!(e.contains("c.yaml:2"), "names the file and line: {e}");
    }
}

#[test]
fn ntf_notify_webhook_defaults_and_errors_name_the_key() {
    let loaded = config::parse(
        "notify:\n  webhook:\n    url: http://hooks.local/x\n",
        "c.yaml",
    )
    .unwrap();
    let hook = loaded.config.notify.webhook.expect("a webhook");
    assert_eq!(hook.url, "http://hooks.local/x");
    assert_eq!(hook.events, config::NotifyEvent::ALL.to_vec());
    assert_eq!(hook.timeout, Duration::from_secs(5));
    assert_eq!(hook.retries, 3);

    let loaded = config::parse(
        "notify:\n  webhook:\n    url: https://h/x\n    events: [quorum_loss]\n    timeout: 500ms\n    retries: 0\n",
        "c.yaml",
    )
    .unwrap();
    let hook = loaded.config.notify.webhook.unwrap();
    assert_eq!(hook.events, [config::NotifyEvent::QuorumLoss]);
    assert_eq!(hook.timeout, Duration::from_millis(500));
    assert_eq!(hook.retries, 0);

    for (text, key, needle) in [
        (
            "notify:\n  webhook:\n    events: [quorum_loss]\n",
            "notify.webhook.url",
            "required",
        ),
        (
            "notify:\n  webhook:\n    url: ftp://h/x\n",
            "notify.webhook.url",
            "http://",
        ),
        (
            "notify:\n  webhook:\n    url: http://h/x\n    retries: 99\n",
            "notify.webhook.retries",
            "limit",
        ),
        (
            "notify:\n  webhook:\n    url: http://h/x\n    events: []\n",
            "notify.webhook.events",
            "empty",
        ),
        (
            "notify:\n  webhook:\n    url: http://h/x\n    events: [leader_lost]\n",
            "notify.webhook.events",
            "leader_lost",
        ),
        ("notify:\n  pager: {}\n", "notify.pager", "unknown"),
    ] {
        let e = parse_err(text).to_string();
        assert!(e.contains(key) && e.contains(needle), "{text:?}: {e}");
        assert!(e.contains("c.yaml:"), "names the file: {e}");
    }
}

/// The webhook signing key is a secret like the tokens: from a file, a variable or the config,
/// exactly one; resolved (and its length checked) at start and at each reload.
#[test]
fn ntf_the_webhook_signing_key_is_a_secret_source() {
    let text =
        "notify:\n  webhook:\n    url: http://h/x\n    signingKey:\n      fromEnvVar: HOOK_KEY\n";
    let hook = config::parse(text, "c.yaml")
        .unwrap()
        .config
        .notify
        .webhook
        .unwrap();
    assert_eq!(
        hook.signing_key,
        Some(config::SecretSource::FromEnvVar("HOOK_KEY".into()))
    );
    for (text, key, needle) in [
        (
            "notify:\n  webhook:\n    url: http://h/x\n    signingKey:\n      fromFile: /k\n      fromEnvVar: K\n",
            "notify.webhook.signingKey",
            "exactly one",
        ),
        (
            "notify:\n  webhook:\n    url: http://h/x\n    signingKey:\n",
            "notify.webhook.signingKey",
            "empty",
        ),
    ] {
        let e = parse_err(text).to_string();
        assert!(e.contains(key) && e.contains(needle), "{text:?}: {e}");
        assert!(e.contains("c.yaml:"), "names the file: {e}");
    }
}

#[test]
fn state_path_is_kept_and_a_blank_one_is_an_error() {
    let loaded = config::parse("state:\n  path: /var/lib/cronstable\n", "c.yaml").unwrap();
    assert_eq!(
        loaded.config.state.path.as_deref(),
        Some(Path::new("/var/lib/cronstable"))
    );
    assert_eq!(config::Config::default().state.path, None);
    for text in ["state:\n  path: \"\"\n", "state: {}\n"] {
        let e = parse_err(text).to_string();
        assert!(e.contains("state.path"), "{text:?}: {e}");
    }
}

#[test]
fn state_store_etcd_needs_the_etcd_backend_and_no_path() {
    let etcd = "cluster:\n  backend: etcd\n  nodeName: n1\n  etcd:\n    endpoints: [\"http://127.0.0.1:2379\"]\n";
    let loaded = config::parse(&format!("{etcd}state:\n  store: etcd\n"), "c.yaml").unwrap();
    assert_eq!(loaded.config.state.store, config::StateStore::Etcd);
    assert_eq!(loaded.config.state.path, None);
    let e = parse_err("state:\n  store: etcd\n").to_string();
    assert!(
        e.contains("state.store") && e.contains("cluster.backend: etcd"),
        "{e}"
    );
    let e = parse_err(&format!(
        "{etcd}state:\n  store: etcd\n  path: /var/lib/x\n"
    ))
    .to_string();
    assert!(
        e.contains("state.path") && e.contains("must not be set"),
        "{e}"
    );
    let e = parse_err("state:\n  store: redis\n  path: /x\n").to_string();
    assert!(e.contains("state.store") && e.contains("redis"), "{e}");
    let file = config::parse("state:\n  store: file\n  path: /x\n", "c.yaml").unwrap();
    assert_eq!(file.config.state.store, config::StateStore::File);
}

#[test]
fn leader_eligible_is_read_on_every_backend_and_warned_of_without_election() {
    let lease = |extra: &str| {
        let text = format!(
            "cluster:\n  backend: filesystem\n  nodeName: a\n{extra}  filesystem: {{path: /srv/cronstable}}\n"
        );
        config::parse(&text, "c.yaml")
            .unwrap_or_else(|e| panic!("{e}"))
            .config
            .cluster
            .unwrap()
    };
    assert!(lease("").leader_eligible, "may lead by default");
    assert!(!lease("  leaderEligible: false\n").leader_eligible);
    let gossip = |extra: &str| {
        config::parse(
            &format!(
                "cluster:\n  nodeName: a\n  leaderEligible: false\n{extra}  listen: 127.0.0.1:8443\n  tls: {{ca: /c, cert: /c, key: /k}}\n  peers: [{{host: 127.0.0.2:8443}}, {{host: 127.0.0.3:8443}}]\n"
            ),
            "c.yaml",
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let elect = gossip("  electLeader: true\n");
    assert!(!elect.config.cluster.unwrap().leader_eligible);
    assert!(elect.warnings.is_empty(), "{:?}", elect.warnings);
    let attest = gossip("");
    assert!(
        attest.warnings.iter().any(|w| w.contains(
            "c.yaml:3:3: cluster.leaderEligible: false has no effect without electLeader"
        )),
        "{:?}",
        attest.warnings
    );
}
