//! The coordinator's HTTP API against real processes: `/jobs`, `/jobs/{name}`,
//! `/jobs/{name}/firings`, `/metrics` (checked by Prometheus' own `promtool`), `/node`,
//! `/fleet`, the dashboard's assets, `web.authToken`, and the `notify:` webhook
//! (inventory §8.2, §8.4, NTF-01, MN-10).

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster};
use cronstable_tests::{
    Coordinator, free_port, http, http_with, now_ms, start_shim, wait_for, wait_for_state,
    webhook_receiver,
};
use serde_json::Value;

fn crontab(dir: &Path, body: &str) -> std::path::PathBuf {
    let path = dir.join("crontab");
    std::fs::write(&path, body).unwrap();
    path
}

fn coordinator_with(dir: &Path, extra: &str) -> Coordinator {
    Coordinator::start_extra(dir, extra)
}

fn get(web: SocketAddr, path: &str) -> Value {
    let r = http(web, "GET", path).unwrap();
    assert_eq!(r.status, 200, "GET {path}: {}", r.body);
    r.json()
}

/// The row of job `name` in a `GET /jobs` body.
fn row(jobs: &Value, name: &str) -> Value {
    jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == name)
        .unwrap_or_else(|| panic!("no job {name} in {jobs}"))
        .clone()
}

#[test]
fn jobs_firings_and_node_describe_what_ran() {
    let dir = tempfile::tempdir().unwrap();
    let tab = crontab(
        dir.path(),
        "# cronstable: name=ok seconds=true\n* * * * * * echo hello\n\
         # cronstable: name=fails seconds=true\n* * * * * * echo oops; exit 3\n",
    );
    let coordinator = Coordinator::start(dir.path());
    let _shim = start_shim(&tab, &coordinator.api, &[]);

    let jobs = wait_for("runs of both jobs in /jobs", || {
        let v = get(coordinator.web, "/jobs");
        let done = v["jobs"]
            .as_array()
            .is_some_and(|j| j.len() == 2 && j.iter().all(|j| !j["lastRun"].is_null()));
        done.then_some(v)
    });
    let by_name = |name: &str| row(&jobs, name);
    let ok = by_name("ok");
    assert_eq!(ok["schedule"], "* * * * * *");
    assert!(ok["nextFire"].as_str().unwrap().ends_with('Z'), "{ok}");
    assert_eq!(ok["lastRun"]["exitCode"], 0);
    assert_eq!(ok["lastRun"]["succeeded"], true);
    // Election is off: the payload carries no clusterPolicy and no clusterOwner (§8.2).
    assert!(ok.get("clusterPolicy").is_none(), "{ok}");
    assert!(ok.get("clusterOwner").is_none(), "{ok}");
    let fails = by_name("fails");
    assert_eq!(fails["lastRun"]["exitCode"], 3);
    assert_eq!(fails["lastRun"]["succeeded"], false);

    // The drawer's detail: the run history with the output tail.
    let detail = get(coordinator.web, "/jobs/fails");
    let finished = detail["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["event"] == "finished")
        .unwrap()
        .clone();
    assert!(
        finished["outputTail"].as_str().unwrap().contains("oops"),
        "{finished}"
    );

    // Every nominal instant since the coordinator started is explained.
    let firings = get(coordinator.web, "/jobs/ok/firings");
    let list = firings["firings"].as_array().unwrap();
    assert!(
        list.iter()
            .any(|f| f["outcome"] == "ran" && f["run"]["exitCode"] == 0),
        "{firings}"
    );
    for f in list {
        let outcome = f["outcome"].as_str().unwrap();
        assert!(
            ["ran", "running", "unknown", "no_record"].contains(&outcome),
            "election off runs everything: {f}"
        );
    }

    // Errors are JSON with a readable message (MN-10).
    let missing = http(coordinator.web, "GET", "/jobs/nope").unwrap();
    assert_eq!(missing.status, 404);
    assert!(missing.json()["error"].as_str().unwrap().contains("nope"));
    let bad = http(coordinator.web, "GET", "/jobs/ok/firings?from=10&to=5").unwrap();
    assert_eq!(bad.status, 400);
    assert!(bad.json()["error"].as_str().unwrap().contains("after"));
    let bad = http(coordinator.web, "GET", "/jobs/ok/firings?from=yesterday").unwrap();
    assert_eq!(bad.status, 400, "{}", bad.body);

    // /node: this machine's numbers; the second reading has a CPU rate.
    let node = get(coordinator.web, "/node");
    assert!(node["memory_total_bytes"].as_u64().unwrap() > 0, "{node}");
    assert!(node["process"]["rss_bytes"].as_u64().unwrap() > 0, "{node}");
    let node = wait_for("a CPU rate", || {
        let v = get(coordinator.web, "/node");
        (!v["cpu_percent"].is_null()).then_some(v)
    });
    let cpu = node["cpu_percent"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&cpu), "{node}");

    // /fleet without a cluster: only this node, not enabled.
    let fleet = get(coordinator.web, "/fleet");
    assert_eq!(fleet["enabled"], false);
    assert_eq!(fleet["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(fleet["nodes"][0]["jobs"].as_array().unwrap().len(), 2);

    // The dashboard and its assets are served from the binary.
    let page = http(coordinator.web, "GET", "/").unwrap();
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/assets/app.js"));
    let js = http(coordinator.web, "GET", "/assets/app.js").unwrap();
    assert_eq!(js.status, 200);
    assert!(js.head.to_ascii_lowercase().contains("text/javascript"));
    assert_eq!(
        http(coordinator.web, "GET", "/assets/nope.js")
            .unwrap()
            .status,
        404
    );
}

#[test]
fn metrics_pass_promtool_and_count_runs() {
    let promtool = Path::new("/usr/bin/promtool");
    assert!(
        promtool.exists(),
        "promtool is missing: install Debian's prometheus package (tests/run.sh does as root)"
    );
    let dir = tempfile::tempdir().unwrap();
    let tab = crontab(
        dir.path(),
        "# cronstable: name=tick seconds=true\n* * * * * * true\n",
    );
    let coordinator = Coordinator::start(dir.path());
    let _shim = start_shim(&tab, &coordinator.api, &[]);
    let text = wait_for("two counted runs", || {
        let r = http(coordinator.web, "GET", "/metrics").unwrap();
        assert_eq!(r.status, 200);
        r.body
            .lines()
            .find(|l| l.starts_with("cronstable_job_runs_total{job=\"tick\",result=\"success\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .filter(|n| *n >= 2)
            .map(|_| r)
    });
    assert!(
        text.head.contains("text/plain; version=0.0.4"),
        "{}",
        text.head
    );
    for series in [
        "cronstable_cluster_enabled 0",
        "cronstable_cluster_quorate 1",
        "cronstable_cluster_size 1",
        "cronstable_job_firings_total{job=\"tick\",verdict=\"run\"}",
        "cronstable_job_run_duration_seconds_count{job=\"tick\"}",
        "cronstable_job_last_success_timestamp_seconds{job=\"tick\"}",
        "cronstable_job_last_run_timestamp_seconds{job=\"tick\",result=\"success\"}",
        "cronstable_job_next_fire_timestamp_seconds{job=\"tick\"}",
        "cronstable_job_is_owner{job=\"tick\",policy=",
    ] {
        assert!(
            text.body.contains(series),
            "missing {series}:\n{}",
            text.body
        );
    }
    let mut check = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.body.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\n--- exposition ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        text.body
    );
}

#[test]
fn the_auth_token_guards_everything_but_health() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator = coordinator_with(dir.path(), "  authToken:\n    value: s3cret-token\n");
    for path in [
        "/cluster",
        "/jobs",
        "/metrics",
        "/node",
        "/fleet",
        "/job-set-id",
    ] {
        let r = http(coordinator.web, "GET", path).unwrap();
        assert_eq!(r.status, 401, "{path} without a token: {}", r.body);
        assert!(r.json()["error"].as_str().unwrap().contains("authToken"));
        assert!(r.head.contains("WWW-Authenticate") || r.head.contains("www-authenticate"));
        let wrong = http_with(
            coordinator.web,
            "GET",
            path,
            &[("Authorization", "Bearer nope")],
        )
        .unwrap();
        assert_eq!(wrong.status, 401, "{path} with a wrong token");
        let right = http_with(
            coordinator.web,
            "GET",
            path,
            &[("Authorization", "Bearer s3cret-token")],
        )
        .unwrap();
        assert_eq!(right.status, 200, "{path} with the token: {}", right.body);
    }
    let cookie = http_with(
        coordinator.web,
        "GET",
        "/cluster",
        &[("Cookie", "theme=dark; cronstable_token=s3cret-token")],
    )
    .unwrap();
    assert_eq!(cookie.status, 200, "the dashboard's cookie works too");
    // POST is guarded as well: a manual start needs the token.
    assert_eq!(
        http(coordinator.web, "POST", "/jobs/x/start")
            .unwrap()
            .status,
        401
    );
    // A browser gets the login form instead of JSON.
    let page = http_with(coordinator.web, "GET", "/", &[("Accept", "text/html")]).unwrap();
    assert_eq!(page.status, 401);
    assert!(page.body.contains("<form"), "{}", page.body);
    for open in ["/healthz", "/readyz"] {
        let r = http(coordinator.web, "GET", open).unwrap();
        assert_ne!(r.status, 401, "{open} stays open");
    }
}

/// Red on the code before the origin guard: without `web.authToken` every one of these starts
/// was served (202), so any page a browser on the operator's network opened could start an
/// ungated run.
#[test]
fn a_page_on_another_site_cannot_start_a_job_even_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator = coordinator_with(dir.path(), "");
    let jobs = crontab(
        dir.path(),
        "# cronstable: name=deploy clusterPolicy=Leader\n0 3 * * * true\n",
    );
    let _shim = start_shim(&jobs, &coordinator.api, &[]);
    let web = coordinator.web;
    wait_for("the shim to register deploy", || {
        http(web, "GET", "/jobs/deploy")
            .ok()
            .filter(|r| r.status == 200)
    });
    // A script (no Origin, no fetch metadata) is no browser: served, as before.
    let script = cronstable_tests::start_job(web, "deploy");
    assert_eq!(script.status, 202, "{}", script.body);

    let own = format!("http://{web}");
    let rebound = format!("evil.example:{}", web.port());
    let rebound_origin = format!("http://{rebound}");
    let refused: [(&str, Vec<(&str, &str)>); 4] = [
        (
            "a cross-site fetch",
            vec![
                ("Origin", "https://evil.example"),
                ("Sec-Fetch-Site", "cross-site"),
            ],
        ),
        (
            "an older browser's form post",
            vec![("Origin", "https://evil.example")],
        ),
        ("an opaque origin", vec![("Origin", "null")]),
        (
            // A name the attacker points at this address after the page loaded: the browser
            // thinks it is same-origin.
            "DNS rebinding",
            vec![
                ("Host", &rebound),
                ("Origin", &rebound_origin),
                ("Sec-Fetch-Site", "same-origin"),
            ],
        ),
    ];
    for (what, headers) in refused {
        let r = http_with(web, "POST", "/jobs/deploy/start", &headers).unwrap();
        assert_eq!(r.status, 403, "{what}: {}", r.body);
        let why = r.json()["error"].as_str().unwrap().to_owned();
        assert!(
            why.contains("cannot change anything here") || why.contains("set web.authToken"),
            "{what}: {why}"
        );
    }
    let same_site = http_with(
        web,
        "POST",
        "/jobs/deploy/start",
        &[("Sec-Fetch-Site", "same-site"), ("Origin", &own)],
    )
    .unwrap();
    assert_eq!(
        same_site.status, 403,
        "another port or subdomain is another origin"
    );
    // The dashboard's own button: same origin, an address.
    let dashboard = http_with(
        web,
        "POST",
        "/jobs/deploy/start",
        &[("Origin", &own), ("Sec-Fetch-Site", "same-origin")],
    )
    .unwrap();
    assert_eq!(dashboard.status, 202, "{}", dashboard.body);
    // Reading stays open to a browser: only changes are guarded.
    let read = http_with(web, "GET", "/jobs", &[("Origin", "https://evil.example")]).unwrap();
    assert_eq!(read.status, 200);
}

#[test]
fn an_auth_token_from_an_unset_variable_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let (api, web) = (free_port(), free_port());
    let config = dir.path().join("coordinator.yaml");
    std::fs::write(
        &config,
        format!(
            "api:\n  listen: 127.0.0.1:{api}\nweb:\n  listen: 127.0.0.1:{web}\n  authToken:\n    fromEnvVar: CRONSTABLE_TEST_UNSET_TOKEN\n"
        ),
    )
    .unwrap();
    let out = std::process::Command::new(cronstable_tests::binary("cronstable"))
        .arg("coordinator")
        .arg("--config")
        .arg(&config)
        .env_remove("CRONSTABLE_TEST_UNSET_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("web.authToken") && stderr.contains("CRONSTABLE_TEST_UNSET_TOKEN"),
        "{stderr}"
    );
}

fn next_event(rx: &mpsc::Receiver<Value>, event: &str) -> Value {
    let deadline = std::time::Duration::from_secs(30);
    loop {
        let v = rx
            .recv_timeout(deadline)
            .unwrap_or_else(|_| panic!("no {event} webhook within {deadline:?}"));
        if v["event"] == event {
            return v;
        }
    }
}

#[test]
fn ntf_01_a_failed_run_is_posted_to_the_webhook_after_retries() {
    let (url, events) = webhook_receiver(2);
    let dir = tempfile::tempdir().unwrap();
    let tab = crontab(
        dir.path(),
        "# cronstable: name=broken seconds=true\n*/2 * * * * * echo disk full; exit 7\n",
    );
    let coordinator = coordinator_with(
        dir.path(),
        &format!("notify:\n  webhook:\n    url: {url}\n    timeout: 2s\n    retries: 3\n"),
    );
    let _shim = start_shim(&tab, &coordinator.api, &[]);
    let v = next_event(&events, "job_failure");
    assert_eq!(v["job"], "broken");
    assert_eq!(v["exit_code"], 7);
    assert!(
        v["output_tail"].as_str().unwrap().contains("disk full"),
        "{v}"
    );
    assert!(v["message"].as_str().unwrap().contains("exited 7"), "{v}");
}

/// With a signing key every delivery carries a timestamp and an HMAC-SHA256 over the
/// timestamp, a dot and the body, which a receiver holding the key recomputes (README's
/// recipe).
#[test]
fn a_signed_delivery_verifies_with_the_shared_key() {
    let (url, deliveries) = cronstable_tests::webhook_deliveries(0);
    let dir = tempfile::tempdir().unwrap();
    let key = "3f8a1c0e9b7d4a6f2e5c8b1d0a9f7e6c";
    std::fs::write(dir.path().join("webhook-key"), format!("{key}\n")).unwrap();
    let tab = crontab(
        dir.path(),
        "# cronstable: name=broken seconds=true\n*/2 * * * * * exit 3\n",
    );
    let coordinator = coordinator_with(
        dir.path(),
        &format!(
            "notify:\n  webhook:\n    url: {url}\n    events: [job_failure]\n    \
             signingKey:\n      fromFile: {}\n",
            dir.path().join("webhook-key").display()
        ),
    );
    let _shim = start_shim(&tab, &coordinator.api, &[]);
    let d = deliveries
        .recv_timeout(Duration::from_secs(30))
        .expect("a signed job_failure delivery");
    let timestamp = d.header("x-cronstable-timestamp").expect("a timestamp");
    let at: i64 = timestamp.parse().unwrap();
    assert!((at - now_ms() / 1000).abs() < 60, "{timestamp}");
    let mut signed = format!("{timestamp}.").into_bytes();
    signed.extend_from_slice(&d.body);
    let expected = cronstable_coordinator::observe::signing::hmac_sha256(key.as_bytes(), &signed);
    assert_eq!(
        d.header("x-cronstable-signature"),
        Some(format!("v1={}", hex_of(&expected)).as_str()),
        "{d:?}"
    );
    let v: serde_json::Value = serde_json::from_slice(&d.body).unwrap();
    assert_eq!(v["event"], "job_failure");
}

/// `HTTP_PROXY` carries the delivery: the webhook's host does not even resolve, the proxy (the
/// receiver here) gets the request and answers it.
#[test]
fn a_webhook_goes_through_the_http_proxy_from_the_environment() {
    let (proxy, deliveries) = cronstable_tests::webhook_deliveries(0);
    let dir = tempfile::tempdir().unwrap();
    let tab = crontab(
        dir.path(),
        "# cronstable: name=broken seconds=true\n*/2 * * * * * exit 3\n",
    );
    let mut program = std::process::Command::new(cronstable_tests::binary("cronstable"));
    let proxy_root = proxy.trim_end_matches("/hook");
    program.env("HTTP_PROXY", proxy_root).env("NO_PROXY", "");
    let coordinator = Coordinator::start_named_in(
        program,
        dir.path(),
        "coordinator",
        "notify:\n  webhook:\n    url: http://webhook.invalid/hook\n    events: [job_failure]\n",
    );
    let _shim = start_shim(&tab, &coordinator.api, &[]);
    let d = deliveries
        .recv_timeout(Duration::from_secs(30))
        .expect("a delivery through the proxy");
    assert_eq!(d.header("host"), Some("webhook.invalid"), "{d:?}");
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn ntf_01_leader_change_and_quorum_loss_reach_the_webhook() {
    let (url, events) = webhook_receiver(0);
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(3, 77);
    plan.extra =
        format!("notify:\n  webhook:\n    url: {url}\n    events: [leader_change, quorum_loss]\n");
    let files = ClusterFiles::write(dir.path(), &plan);
    let mut nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    let leader = next_event(&events, "leader_change");
    assert_eq!(leader["node"], "n1", "{leader}");
    assert_eq!(leader["is_leader"], true);
    wait_for_state("n1 leads", || {
        let v = cluster(nodes[0].web).ok_or("no answer")?;
        if v["is_leader"] == true {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
    // n1's metrics count the edge it just reported.
    let metrics = http(nodes[0].web, "GET", "/metrics").unwrap().body;
    assert!(
        metrics.contains("cronstable_cluster_is_leader 1"),
        "{metrics}"
    );
    assert!(metrics.contains("cronstable_cluster_leader_info{leader=\"n1\"} 1"));
    assert!(!metrics.contains("cronstable_cluster_leader_transitions_total 0"));

    // Both peers die: n1 is alone, loses its quorum, and with it leadership.
    for n in nodes.iter_mut().skip(1) {
        n.proc.signal(9);
    }
    // Both edges happen at one instant; the two events may come in either order.
    let mut got: Vec<Value> = (0..2)
        .map(|_| {
            events
                .recv_timeout(Duration::from_secs(30))
                .expect("two webhooks after the peers died")
        })
        .collect();
    got.sort_by_key(|v| v["event"].as_str().unwrap_or_default().to_owned());
    assert_eq!(got[0]["event"], "leader_change", "{got:?}");
    assert_eq!(got[0]["is_leader"], false, "{got:?}");
    assert_eq!(got[1]["event"], "quorum_loss", "{got:?}");
    assert_eq!(got[1]["node"], "n1");
    let metrics = http(nodes[0].web, "GET", "/metrics").unwrap().body;
    assert!(
        metrics.contains("cronstable_cluster_quorate 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("cronstable_cluster_peers{status=\"unreachable\"} 2"),
        "{metrics}"
    );
}

#[test]
fn gsp_110_fleet_shows_each_peers_runs_and_no_data_for_a_dead_one() {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 79));
    let mut nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    let tab = crontab(
        dir.path(),
        "# cronstable: name=local-cleanup clusterPolicy=EveryNode seconds=true\n* * * * * * true\n",
    );
    let _shims: Vec<_> = nodes
        .iter()
        .map(|c| start_shim(&tab, &c.api, &[]))
        .collect();
    // Every node runs the EveryNode job; n1's fleet view shows the runs of all three.
    let fleet = wait_for_state("every node's runs in n1's /fleet", || {
        let v = get(nodes[0].web, "/fleet");
        let ran = |n: &Value| {
            n["jobs"].as_array().is_some_and(|jobs| {
                jobs.iter()
                    .any(|j| j["name"] == "local-cleanup" && j["lastRun"]["succeeded"] == true)
            })
        };
        let all = v["nodes"]
            .as_array()
            .is_some_and(|n| n.len() == 3 && n.iter().all(ran));
        if all { Ok(v) } else { Err(v.to_string()) }
    });
    assert_eq!(fleet["enabled"], true);
    let names: Vec<&str> = fleet["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["n1", "n2", "n3"]);
    let peer_job = &fleet["nodes"][1]["jobs"][0];
    assert_eq!(peer_job["clusterPolicy"], "EveryNode");
    assert!(
        peer_job["nextFire"].as_str().unwrap().ends_with('Z'),
        "{peer_job}"
    );
    // The newest instant the peer ran (catch-up on gossip reads it).
    assert!(
        peer_job["lastRunScheduledAt"]
            .as_str()
            .unwrap()
            .ends_with('Z'),
        "{peer_job}"
    );

    // n3 dies: n1 has no data for it, and says so, rather than showing stale runs.
    nodes[2].proc.signal(9);
    wait_for_state("no data for n3", || {
        let v = get(nodes[0].web, "/fleet");
        let n3 = v["nodes"][2].clone();
        if n3["jobs"].is_null() && n3["status"] == "unreachable" {
            Ok(())
        } else {
            Err(n3.to_string())
        }
    });
    nodes.truncate(2);
}

#[test]
fn run_history_survives_a_restart_with_a_state_path() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let extra = format!("state:\n  path: {}\n", state.display());
    history_survives_a_restart(dir.path(), &extra, || {
        assert!(
            std::fs::read_dir(&state).unwrap().count() >= 1,
            "the ledger file is in state.path"
        );
    });
}

/// The same with `state.store: etcd` on the etcd backend: a real etcd keeps the history, so a
/// coordinator without any local state finds it again.
#[test]
fn run_history_survives_a_restart_with_the_etcd_store() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = cronstable_tests::etcd::Etcd::start();
    let extra = format!(
        "cluster:\n  backend: etcd\n  nodeName: n1\n  etcd:\n    endpoints: [\"{}\"]\n    \
         ttl: 6\nstate:\n  store: etcd\n",
        etcd.endpoint()
    );
    history_survives_a_restart(dir.path(), &extra, || {
        let out = std::process::Command::new("etcdctl")
            .args([
                "--endpoints",
                &etcd.endpoint(),
                "get",
                "--prefix",
                "--keys-only",
            ])
            .arg("cronstable/leader/ledger/n1/")
            .output()
            .expect("etcdctl runs");
        let keys = String::from_utf8_lossy(&out.stdout);
        assert!(
            keys.lines().filter(|l| !l.is_empty()).count() >= 2,
            "the ledger is in etcd: {keys}"
        );
    });
}

/// Runs a job, stops the shim and coordinator, checks `stored` (where the history went), and
/// shows the restarted coordinator serving that history.
fn history_survives_a_restart(dir: &Path, extra: &str, stored: impl FnOnce()) {
    let tab = crontab(
        dir,
        "# cronstable: name=report seconds=true\n* * * * * * echo made a report\n",
    );
    let mut coordinator = coordinator_with(dir, extra);
    let mut shim = start_shim(&tab, &coordinator.api, &[]);
    let before = wait_for("a finished run", || {
        let r = http(coordinator.web, "GET", "/jobs/report").ok()?;
        let v = (r.status == 200).then(|| r.json())?;
        (!v["lastRun"].is_null()).then_some(v)
    });
    shim.signal(15);
    shim.wait_exit();
    coordinator.proc.signal(15);
    coordinator.proc.wait_exit();
    stored();

    // The same job, now on a schedule that will not fire during the test: whatever /jobs
    // shows as its last run came from the store.
    let quiet = crontab(
        dir,
        "# cronstable: name=report\n0 0 1 1 * echo made a report\n",
    );
    let restarted = Coordinator::start_with(
        coordinator.config.clone(),
        coordinator.api.clone(),
        coordinator.web,
    );
    let _shim = start_shim(&quiet, &restarted.api, &[]);
    let after = wait_for("the job registered again", || {
        let r = http(restarted.web, "GET", "/jobs/report").ok()?;
        (r.status == 200).then(|| r.json())
    });
    assert!(!after["lastRun"].is_null(), "history lost: {after}");
    assert!(
        after["lastRun"]["finishedAt"].as_str() >= before["lastRun"]["finishedAt"].as_str(),
        "{after}"
    );
    let tail = after["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["event"] == "finished")
        .map(|r| r["outputTail"].clone());
    assert!(
        tail.is_some_and(|t| t.as_str().unwrap().contains("made a report")),
        "{after}"
    );
}

#[test]
fn a_job_that_can_never_fire_registers_with_a_warning_and_shows_never() {
    let dir = tempfile::tempdir().unwrap();
    let tab = crontab(
        dir.path(),
        "# cronstable: name=daily\n0 3 * * * true\n# cronstable: name=parked\n0 0 31 2 * true\n",
    );
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&tab, &coordinator.api, &[]);
    shim.wait_log(&format!("{}:4: job \"parked\"", tab.display()));
    assert!(shim.log().contains("never fires"), "{}", shim.log());
    coordinator
        .proc
        .wait_log("job \"parked\": schedule \"0 0 31 2 *\" never fires");

    let jobs = wait_for("both jobs in /jobs", || {
        let v = get(coordinator.web, "/jobs");
        (v["jobs"].as_array().map(Vec::len) == Some(2)).then_some(v)
    });
    let row = |name: &str| row(&jobs, name);
    let parked = row("parked");
    assert_eq!(parked["neverFires"], true, "{parked}");
    assert!(parked["nextFire"].is_null(), "{parked}");
    let daily = row("daily");
    assert_eq!(daily["neverFires"], false, "{daily}");
    assert!(daily["nextFire"].is_string(), "{daily}");
}

/// A crash loop must show: each start is a new instance with a fresh start time, and with
/// `state.path` the count of starts before it climbs, crash (SIGKILL) or not. `/cluster`,
/// `/node` and `/metrics` say the same.
#[test]
fn a_restarted_coordinator_says_it_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let extra = format!("state:\n  path: {}\n", state.display());
    let mut coordinator = coordinator_with(dir.path(), &extra);
    let first = get(coordinator.web, "/cluster")["process"].clone();
    assert_eq!(first["restarts"], 0, "{first}");
    assert_eq!(first["instance_id"].as_str().unwrap().len(), 16, "{first}");
    assert!(first["uptime_seconds"].as_i64().unwrap() >= 0, "{first}");
    let node = get(coordinator.web, "/node");
    assert_eq!(
        node["process"]["instance_id"], first["instance_id"],
        "{node}"
    );
    assert_eq!(node["process"]["restarts"], 0, "{node}");
    assert!(node["process"]["rss_bytes"].as_u64().is_some(), "{node}");

    let mut instances = vec![first["instance_id"].clone()];
    for (n, sig) in [(1, 9), (2, 15)] {
        coordinator.proc.signal(sig);
        coordinator.proc.wait_exit();
        coordinator = Coordinator::start_with(
            coordinator.config.clone(),
            coordinator.api.clone(),
            coordinator.web,
        );
        let now = get(coordinator.web, "/cluster")["process"].clone();
        assert_eq!(now["restarts"], n, "after restart {n}: {now}");
        assert!(
            !instances.contains(&now["instance_id"]),
            "a new instance id at every start: {now}"
        );
        instances.push(now["instance_id"].clone());
        let metrics = http(coordinator.web, "GET", "/metrics").unwrap().body;
        let value = |name: &str| {
            metrics
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .unwrap_or_else(|| panic!("no {name} in:\n{metrics}"))
        };
        assert_eq!(value("cronstable_restarts_total"), f64::from(n));
        assert!(value("process_open_fds") > 0.0);
        assert!(value("process_resident_memory_bytes") > 0.0);
        assert!(value("process_max_fds") > 0.0);
        let started = chrono::DateTime::parse_from_rfc3339(now["started_at"].as_str().unwrap())
            .unwrap()
            .timestamp() as f64;
        assert!(
            (value("process_start_time_seconds") - started).abs() < 2.0,
            "process_start_time_seconds is the start /cluster shows: {now}"
        );
    }
    // One count per node name (the host's name here: no cluster section), three starts.
    let counts: Vec<String> = std::fs::read_dir(&state)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("starts-"))
        .collect();
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert_eq!(
        std::fs::read_to_string(state.join(&counts[0])).unwrap(),
        "3\n"
    );
}

/// Without `state.path` nothing outlives the process: the count is `null`, not a made-up 0,
/// and `cronstable_restarts_total` is absent.
#[test]
fn without_a_state_path_the_restart_count_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator = Coordinator::start(dir.path());
    let process = get(coordinator.web, "/cluster")["process"].clone();
    assert!(process["restarts"].is_null(), "{process}");
    let metrics = http(coordinator.web, "GET", "/metrics").unwrap().body;
    assert!(!metrics.contains("cronstable_restarts_total"), "{metrics}");
    assert!(metrics.contains("process_start_time_seconds "), "{metrics}");
}
