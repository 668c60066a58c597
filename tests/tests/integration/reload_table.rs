//! README's reload table, row by row, with real processes: for every [`ReloadKey`] a running
//! coordinator's file is edited and SIGHUP sent, and the change is seen in effect (a live row),
//! or the reload is refused naming the key with the node unchanged (a refused row), or the key
//! is named in a WARNING and its running value still serves (a restart row).
//!
//! The rows come from the coordinator's own table ([`ReloadKey::ALL`], which README's table is
//! rendered from): [`node_of`] matches on it without a wildcard, so a new key does not compile
//! until it has a node here, and a node's case function panics on a key it has no case for.
//!
//! Red on the code before the table: the `api.authToken` row (a token added, changed, or moved
//! to a file was logged as reloaded and never checked) and the `cluster.filesystem.topology`
//! row (the reload rebuilt the manager without the mount guard).

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use cronstable_coordinator::gossip::certgen::TestCa;
use cronstable_coordinator::reload::{ReloadKey, ReloadRule};
use cronstable_tests::etcd::Etcd;
use cronstable_tests::gossip::{ClusterFiles, ClusterPlan};
use cronstable_tests::{
    Coordinator, Proc, free_port, http_with, register_jobs, start_shim, wait_for_state,
    webhook_receiver,
};
use serde_json::Value;

/// Which running coordinator a row is tried on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    /// A filesystem-lease node with both tokens, `notify:`, `statsd:`, `jobs:` and a shim.
    Filesystem,
    /// An etcd-lease node whose run ledger is in etcd (`state.store: etcd`).
    Etcd,
    /// A Kubernetes-lease node whose API server does not answer: a refusal happens before any
    /// request, so none is needed.
    Kubernetes,
    /// A gossip node with `electLeader`, alone (its two peers never start).
    Gossip,
}

fn node_of(key: ReloadKey) -> Node {
    use ReloadKey as K;
    match key {
        K::Notify
        | K::Statsd
        | K::WebAuthToken
        | K::ApiAuthToken
        | K::Jobs
        | K::ClusterTuning
        | K::ClusterOnOff
        | K::WebAuthTokenRemoved
        | K::ApiAuthTokenRemoved
        | K::Backend
        | K::FilesystemPath
        | K::FilesystemDeploymentId
        | K::FilesystemElectionName
        | K::FilesystemTopology
        | K::ApiListen
        | K::WebListen
        | K::StatePath
        | K::NodeName
        | K::LeaseObservability => Node::Filesystem,
        K::EtcdEndpoints | K::EtcdElectionName | K::StateStore | K::EtcdLedger => Node::Etcd,
        K::KubernetesLeaseName | K::KubernetesLeaseNamespace => Node::Kubernetes,
        K::ElectLeader => Node::Gossip,
    }
}

fn keys_on(node: Node) -> Vec<ReloadKey> {
    ReloadKey::ALL
        .into_iter()
        .filter(|k| node_of(*k) == node)
        .collect()
}

/// A running coordinator, its config text as the running config has it, and its tokens.
struct Subject {
    c: Coordinator,
    web_token: Option<String>,
    refused: u64,
}

impl Subject {
    fn text(&self) -> String {
        std::fs::read_to_string(&self.c.config).unwrap()
    }

    fn get(&self, path: &str) -> cronstable_tests::Response {
        let bearer = self.web_token.as_ref().map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = bearer
            .as_deref()
            .map(|b| vec![("Authorization", b)])
            .unwrap_or_default();
        http_with(self.c.web, "GET", path, &headers).unwrap()
    }

    fn cluster(&self) -> Value {
        self.get("/cluster").json()
    }

    fn reloads(&self, result: &str) -> u64 {
        let series = format!("cronstable_config_reloads_total{{result=\"{result}\"}} ");
        let body = self.get("/metrics").body;
        body.lines()
            .find_map(|l| l.strip_prefix(&series))
            .unwrap_or_else(|| panic!("no {series} in /metrics:\n{body}"))
            .trim()
            .parse()
            .unwrap()
    }

    /// Writes `edited`, reloads, and returns the reload's log lines.
    fn reload_to(&self, edited: &str) -> String {
        assert_ne!(edited, self.text(), "the edit changed nothing");
        std::fs::write(&self.c.config, edited).unwrap();
        self.c.reload()
    }

    /// A refused row: the reload names `key`, counts as refused, and `unchanged` still holds;
    /// the file goes back to what runs.
    fn refused(&mut self, key: ReloadKey, edited: &str, unchanged: impl Fn(&Subject)) {
        assert_eq!(key.rule(), ReloadRule::Refused, "{key:?}");
        let running = self.text();
        let log = self.reload_to(edited);
        assert!(
            log.contains(&format!("config reload refused: {} changed", key.name())),
            "{key:?}: {log}"
        );
        self.refused += 1;
        assert_eq!(self.reloads("refused"), self.refused, "{key:?}");
        unchanged(self);
        std::fs::write(&self.c.config, running).unwrap();
    }

    /// A restart row: the reload applies, names `key` in a WARNING, and `kept` shows the running
    /// value still in force; the file goes back to what runs (which is what the reload kept).
    fn at_restart(&self, key: ReloadKey, edited: &str, kept: impl Fn(&Subject)) {
        assert_eq!(key.rule(), ReloadRule::AtRestart, "{key:?}");
        let running = self.text();
        let log = self.reload_to(edited);
        assert_warned(&log, key);
        assert!(log.contains("config reloaded"), "{key:?}: {log}");
        kept(self);
        std::fs::write(&self.c.config, running).unwrap();
    }

    /// A live row: the reload names `key` among what it changed; the file stays as edited.
    fn live(&self, key: ReloadKey, edited: &str) -> String {
        assert_eq!(key.rule(), ReloadRule::Live, "{key:?}");
        let log = self.reload_to(edited);
        let line = log
            .lines()
            .find(|l| l.contains("config reloaded"))
            .unwrap_or_else(|| panic!("{key:?}: the reload did not apply: {log}"));
        assert!(
            line.contains("changed=") && line.contains(key.name()),
            "{key:?}: {line}"
        );
        log
    }
}

/// The WARNING of a restart row, in a reload's log lines.
fn assert_warned(log: &str, key: ReloadKey) {
    let warning = format!(
        "config reload: {} changed; restart the coordinator to apply it",
        key.name()
    );
    assert!(log.contains(&warning), "{key:?}: {log}");
}

/// `RegisterJobs` of an empty job set under an executor id of its own, with `token`: any call
/// the API guards.
fn grpc_call(api: &str, token: Option<&str>) -> Result<(), tonic::Status> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(register_jobs(api, "reload-table-probe", Vec::new(), token))
}

fn unauthenticated(api: &str, token: Option<&str>) -> bool {
    grpc_call(api, token).is_err_and(|e| e.code() == tonic::Code::Unauthenticated)
}

fn wait_leading(s: &Subject) {
    wait_for_state("the node to lead", || {
        let v = s.cluster();
        if v["is_leader"] == true {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
}

fn next_failure(rx: &mpsc::Receiver<Value>) -> Value {
    loop {
        let v = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a job_failure at the webhook within 30 s");
        if v["event"] == "job_failure" {
            return v;
        }
    }
}

/// Waits for a statsd datagram about `job` at `socket`.
fn statsd_datagram(socket: &UdpSocket, job: &str) -> String {
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 2048];
    loop {
        let n = socket
            .recv(&mut buf)
            .expect("a statsd datagram within 30 s");
        let d = String::from_utf8_lossy(&buf[..n]).into_owned();
        if d.contains(job) {
            return d;
        }
    }
}

fn udp() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").unwrap()
}

/// The filesystem node's files.
struct FsFiles {
    store: PathBuf,
    crontab: PathBuf,
    state: PathBuf,
}

fn start_filesystem(dir: &Path, hook: &str, statsd: u16) -> (Subject, FsFiles) {
    let files = FsFiles {
        store: dir.join("store"),
        crontab: dir.join("gate.cron"),
        state: dir.join("state"),
    };
    std::fs::create_dir(&files.store).unwrap();
    std::fs::write(
        &files.crontab,
        "# cronstable: name=nightly\n0 3 * * * root true\n",
    )
    .unwrap();
    let (api, web) = (free_port(), free_port());
    let config = dir.join("coordinator.yaml");
    std::fs::write(
        &config,
        format!(
            "api:\n  listen: 127.0.0.1:{api}\n  authToken:\n    value: api-1\nweb:\n  listen: \
             127.0.0.1:{web}\n  authToken:\n    value: web-1\nstate:\n  path: {state}\nnotify:\n  \
             webhook:\n    url: {hook}\n    timeout: 2s\nstatsd:\n  port: {statsd}\njobs:\n  \
             systemCrontab: {crontab}\ncluster:\n  nodeName: a\n  backend: filesystem\n  \
             filesystem:\n    path: {store}\n    ttl: 3\n    topology: single-node\n",
            state = files.state.display(),
            crontab = files.crontab.display(),
            store = files.store.display(),
        ),
    )
    .unwrap();
    let c = Coordinator::start_with(
        config,
        format!("http://127.0.0.1:{api}"),
        ([127, 0, 0, 1], web).into(),
    );
    let s = Subject {
        c,
        web_token: Some("web-1".into()),
        refused: 0,
    };
    wait_leading(&s);
    (s, files)
}

/// The shim beside the filesystem node: one job that fails every two seconds, so the
/// webhook and statsd rows have something to send.
fn start_failing_shim(dir: &Path, api: &str) -> Proc {
    let crontab = dir.join("shim.cron");
    std::fs::write(
        &crontab,
        "# cronstable: name=broken seconds=true\n*/2 * * * * * exit 7\n",
    )
    .unwrap();
    let token = dir.join("shim-token");
    std::fs::write(&token, "api-1\n").unwrap();
    let token = token.display().to_string();
    start_shim(&crontab, api, &["--api-token-file", &token])
}

/// The node's fixed answers, unchanged by a refused reload.
fn still_leading_on(store: &Path) -> impl Fn(&Subject) + '_ {
    move |s: &Subject| {
        let v = s.cluster();
        assert_eq!(v["enabled"], true, "{v}");
        assert_eq!(v["lease"]["path"], store.display().to_string(), "{v}");
        assert_eq!(v["node_name"], "a", "{v}");
    }
}

#[test]
fn every_filesystem_row_of_the_reload_table_holds_with_real_processes() {
    use ReloadKey as K;
    let dir = tempfile::tempdir().unwrap();
    let (first_hook, first_events) = webhook_receiver(0);
    let (second_hook, second_events) = webhook_receiver(0);
    let (first_statsd, second_statsd) = (udp(), udp());
    let port = |u: &UdpSocket| u.local_addr().unwrap().port();
    let (mut s, files) = start_filesystem(dir.path(), &first_hook, port(&first_statsd));
    let shim = start_failing_shim(dir.path(), &s.c.api);
    assert_eq!(next_failure(&first_events)["job"], "broken");
    statsd_datagram(&first_statsd, "broken");
    let mut api_token = "api-1".to_owned();

    // In ALL's order: the token rows change the tokens that the later rows use.
    for key in keys_on(Node::Filesystem) {
        let text = s.text();
        match key {
            K::Notify => {
                s.live(key, &text.replace(&first_hook, &second_hook));
                assert_eq!(next_failure(&second_events)["job"], "broken");
            }
            K::Statsd => {
                let edited = text.replace(
                    &format!("port: {}", port(&first_statsd)),
                    &format!("port: {}", port(&second_statsd)),
                );
                s.live(key, &edited);
                statsd_datagram(&second_statsd, "broken");
            }
            K::WebAuthToken => {
                s.live(key, &text.replace("value: web-1", "value: web-2"));
                let old = http_with(
                    s.c.web,
                    "GET",
                    "/jobs",
                    &[("Authorization", "Bearer web-1")],
                )
                .unwrap();
                assert_eq!(old.status, 401, "the old web token");
                s.web_token = Some("web-2".into());
                assert_eq!(s.get("/jobs").status, 200, "the new web token");
            }
            K::ApiAuthToken => {
                // Another value, then another source: a file.
                s.live(key, &text.replace("value: api-1", "value: api-2"));
                assert!(
                    unauthenticated(&s.c.api, Some("api-1")),
                    "the old api token"
                );
                grpc_call(&s.c.api, Some("api-2")).expect("the new api token");
                let file = dir.path().join("api-token");
                std::fs::write(&file, "api-3\n").unwrap();
                let moved = s
                    .text()
                    .replace("value: api-2", &format!("fromFile: {}", file.display()));
                s.live(key, &moved);
                assert!(
                    unauthenticated(&s.c.api, Some("api-2")),
                    "the api token's old value"
                );
                grpc_call(&s.c.api, Some("api-3")).expect("the api token from its file");
                api_token = "api-3".into();
            }
            K::Jobs => {
                std::fs::write(
                    &files.crontab,
                    "# cronstable: name=nightly\n0 3 * * * root true\n\
                     # cronstable: name=weekly\n0 4 * * 0 root true\n",
                )
                .unwrap();
                // The file's jobs changed, not the config: the same text, reloaded.
                let log = s.c.reload();
                assert!(
                    log.lines()
                        .any(|l| l.contains("config reloaded") && l.contains("jobs")),
                    "{log}"
                );
                let jobs = s.get("/jobs").body;
                assert!(jobs.contains("weekly"), "{jobs}");
            }
            K::ClusterTuning => {
                let log = s.live(key, &text.replace("ttl: 3", "ttl: 4"));
                assert!(log.contains("cluster manager rebuilt"), "{log}");
                wait_leading(&s);
            }
            K::ClusterOnOff => {
                let off = &text[..text.find("cluster:").unwrap()];
                s.refused(key, off, still_leading_on(&files.store));
            }
            K::WebAuthTokenRemoved => {
                let edited = text.replace("  authToken:\n    value: web-2\n", "");
                s.refused(key, &edited, |s| {
                    let open = http_with(s.c.web, "GET", "/jobs", &[]).unwrap();
                    assert_eq!(open.status, 401, "the web API must stay guarded");
                });
            }
            K::ApiAuthTokenRemoved => {
                let start = text.find("  authToken:\n    fromFile:").unwrap();
                let end = start + text[start..].find("web:").unwrap();
                let edited = format!("{}{}", &text[..start], &text[end..]);
                s.refused(key, &edited, |s| {
                    assert!(
                        unauthenticated(&s.c.api, None),
                        "the gRPC API must stay guarded"
                    );
                });
            }
            K::Backend => {
                let at = text.find("cluster:").unwrap();
                let edited = format!(
                    "{}cluster:\n  nodeName: a\n  backend: etcd\n  etcd:\n    endpoints: \
                     [\"http://127.0.0.1:{}\"]\n",
                    &text[..at],
                    free_port()
                );
                s.refused(key, &edited, still_leading_on(&files.store));
            }
            K::FilesystemPath => {
                let elsewhere = dir.path().join("elsewhere");
                std::fs::create_dir_all(&elsewhere).unwrap();
                let edited = text.replace(
                    &files.store.display().to_string(),
                    &elsewhere.display().to_string(),
                );
                s.refused(key, &edited, still_leading_on(&files.store));
            }
            K::FilesystemDeploymentId => {
                let edited = text.replace(
                    "    topology: single-node\n",
                    "    topology: single-node\n    deploymentId: other\n",
                );
                s.refused(key, &edited, still_leading_on(&files.store));
            }
            K::FilesystemElectionName => {
                let edited = text.replace(
                    "    topology: single-node\n",
                    "    topology: single-node\n    electionName: other/leader\n",
                );
                s.refused(key, &edited, still_leading_on(&files.store));
            }
            K::FilesystemTopology => {
                let edited = text.replace("topology: single-node", "topology: auto");
                s.refused(key, &edited, |s| {
                    still_leading_on(&files.store)(s);
                    assert_eq!(s.cluster()["is_leader"], true);
                });
            }
            K::ApiListen => {
                let edited = text.replace(
                    &s.c.api.replace("http://", ""),
                    &format!("127.0.0.1:{}", free_port()),
                );
                s.at_restart(key, &edited, |s| {
                    grpc_call(&s.c.api, Some(&api_token)).expect("the running gRPC listener");
                });
            }
            K::WebListen => {
                let edited =
                    text.replace(&s.c.web.to_string(), &format!("127.0.0.1:{}", free_port()));
                s.at_restart(key, &edited, |s| {
                    assert_eq!(s.get("/jobs").status, 200, "the running HTTP listener");
                });
            }
            K::StatePath => {
                let moved = dir.path().join("state-moved");
                let edited = text.replace(
                    &files.state.display().to_string(),
                    &moved.display().to_string(),
                );
                s.at_restart(key, &edited, |_| {
                    assert!(!moved.exists(), "the running state path stays in use");
                    assert!(files.state.exists());
                });
            }
            K::NodeName => {
                s.at_restart(key, &text.replace("nodeName: a", "nodeName: b"), |s| {
                    assert_eq!(s.cluster()["node_name"], "a");
                });
            }
            K::LeaseObservability => {
                let ca = TestCa::new("reload-table-ca");
                let tls = ca
                    .write_node(&dir.path().join("mesh"), "a", &["127.0.0.1"])
                    .unwrap();
                let mesh = free_port();
                let edited = text.replace(
                    "  backend: filesystem\n",
                    &format!(
                        "  backend: filesystem\n  observability:\n    listen: 127.0.0.1:{mesh}\n    \
                         tls:\n      ca: {}\n      cert: {}\n      key: {}\n    peers:\n      \
                         - host: 127.0.0.2:{mesh}\n",
                        tls.ca.display(),
                        tls.cert.display(),
                        tls.key.display()
                    ),
                );
                s.at_restart(key, &edited, |_| {
                    let addr: SocketAddr = ([127, 0, 0, 1], mesh).into();
                    assert!(
                        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
                        "a mesh started at a reload"
                    );
                });
            }
            other => panic!("{other:?} has no case on the filesystem node"),
        }
    }
    drop(shim);
}

#[test]
fn every_etcd_row_of_the_reload_table_holds_with_real_processes() {
    use ReloadKey as K;
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let c = Coordinator::start_extra(
        dir.path(),
        &format!(
            "state:\n  store: etcd\ncluster:\n  nodeName: a\n  backend: etcd\n  etcd:\n    \
             endpoints: [\"{}\"]\n    ttl: 3\n",
            etcd.endpoint()
        ),
    );
    let mut s = Subject {
        c,
        web_token: None,
        refused: 0,
    };
    wait_leading(&s);
    let unchanged = |s: &Subject| {
        let v = s.cluster();
        assert_eq!(v["backend"], "etcd", "{v}");
        assert_eq!(v["is_leader"], true, "{v}");
    };
    for key in keys_on(Node::Etcd) {
        let text = s.text();
        match key {
            K::EtcdEndpoints => {
                let edited = text.replace(
                    &format!("[\"{}\"]", etcd.endpoint()),
                    &format!(
                        "[\"{}\", \"http://127.0.0.1:{}\"]",
                        etcd.endpoint(),
                        free_port()
                    ),
                );
                s.refused(key, &edited, unchanged);
            }
            K::EtcdElectionName => {
                let edited = text.replace("    ttl: 3\n", "    ttl: 3\n    electionName: other\n");
                s.refused(key, &edited, unchanged);
            }
            K::StateStore => {
                let files = dir.path().join("state");
                let edited = text.replace(
                    "  store: etcd\n",
                    &format!("  store: file\n  path: {}\n", files.display()),
                );
                s.at_restart(key, &edited, |s| {
                    assert_eq!(s.get("/node").status, 200);
                    assert!(!files.exists(), "a file ledger was opened at a reload");
                });
            }
            K::EtcdLedger => {
                // Any etcd key but the two refused ones: the election applies it (the manager
                // is rebuilt), the ledger keeps the client it opened at start.
                let log = s.reload_to(&text.replace("ttl: 3", "ttl: 4"));
                assert_warned(&log, key);
                assert!(log.contains("cluster manager rebuilt"), "{log}");
                wait_leading(&s);
            }
            other => panic!("{other:?} has no case on the etcd node"),
        }
    }
}

#[test]
fn every_kubernetes_row_of_the_reload_table_holds_with_real_processes() {
    use ReloadKey as K;
    let dir = tempfile::tempdir().unwrap();
    let nothing = free_port();
    let c = Coordinator::start_extra(
        dir.path(),
        &format!(
            "cluster:\n  nodeName: a\n  backend: kubernetes\n  kubernetes:\n    leaseName: \
             cronstable\n    leaseNamespace: jobs\n    apiServer: http://127.0.0.1:{nothing}\n"
        ),
    );
    let mut s = Subject {
        c,
        web_token: None,
        refused: 0,
    };
    // The manager keeps retrying (no credentials here): a refused reload leaves it running,
    // never rebuilt for the other lease.
    let unchanged = |s: &Subject| {
        let v = s.cluster();
        assert_eq!(v["backend"], "kubernetes", "{v}");
        assert_eq!(v["enabled"], true, "{v}");
        assert!(
            !s.c.proc.log().contains("cluster manager rebuilt"),
            "{}",
            s.c.proc.log()
        );
    };
    for key in keys_on(Node::Kubernetes) {
        let text = s.text();
        match key {
            K::KubernetesLeaseName => {
                s.refused(
                    key,
                    &text.replace("leaseName: cronstable", "leaseName: other"),
                    unchanged,
                );
            }
            K::KubernetesLeaseNamespace => {
                s.refused(
                    key,
                    &text.replace("leaseNamespace: jobs", "leaseNamespace: other"),
                    unchanged,
                );
            }
            other => panic!("{other:?} has no case on the Kubernetes node"),
        }
    }
}

#[test]
fn every_gossip_row_of_the_reload_table_holds_with_real_processes() {
    use ReloadKey as K;
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 71));
    let n1 = &files.nodes[0];
    let c = Coordinator::start_with(n1.config.clone(), n1.api(), n1.web());
    let mut s = Subject {
        c,
        web_token: None,
        refused: 0,
    };
    for key in keys_on(Node::Gossip) {
        let text = s.text();
        match key {
            K::ElectLeader => {
                s.refused(
                    key,
                    &text.replace("electLeader: true", "electLeader: false"),
                    |s| {
                        let v = s.cluster();
                        assert_eq!(v["elect_leader"], true, "{v}");
                    },
                );
            }
            other => panic!("{other:?} has no case on the gossip node"),
        }
    }
}
