//! SIGHUP reloads the coordinator's config (lifecycle issue, defect 6), with real processes:
//! a new `web.authToken` is checked at once, a broken file keeps the running config, a changed
//! `jobs:` file is registered again, a changed `notify:` webhook gets the next events, and a
//! changed cluster section rebuilds the manager (and an unchanged one does not).
//!
//! Every test here fails on the code before the reload: the coordinator installed no SIGHUP
//! handler, so the signal's default action ended the process.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use cronstable_tests::lease::{Store, start_lease_node};
use cronstable_tests::{
    Coordinator, http, http_with, start_shim, wait_for_state, webhook_receiver,
};
use serde_json::Value;

fn alive(web: SocketAddr) -> bool {
    http(web, "GET", "/healthz").is_ok_and(|r| r.status == 200)
}

/// The status of `GET /jobs` with `token` as the bearer token.
fn status_with(web: SocketAddr, token: &str) -> u16 {
    let bearer = format!("Bearer {token}");
    http_with(web, "GET", "/jobs", &[("Authorization", &bearer)])
        .unwrap()
        .status
}

fn cluster(web: SocketAddr) -> Value {
    http(web, "GET", "/cluster").unwrap().json()
}

fn job_set(web: SocketAddr) -> Value {
    http(web, "GET", "/job-set-id").unwrap().json()
}

/// Rewrites `c`'s config file with `f` applied to its text.
fn edit(c: &Coordinator, f: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(&c.config).unwrap();
    std::fs::write(&c.config, f(text)).unwrap();
}

#[test]
fn a_reload_checks_the_new_auth_token_from_its_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "first-token\n").unwrap();
    let c = Coordinator::start_extra(
        dir.path(),
        &format!("  authToken:\n    fromFile: {}\n", token.display()),
    );
    assert_eq!(status_with(c.web, "first-token"), 200);
    assert_eq!(status_with(c.web, "second-token"), 401);

    // Only the file's bytes change: the config itself is the same.
    std::fs::write(&token, "second-token\n").unwrap();
    let log = c.reload();
    assert!(log.contains("web.authToken"), "{log}");
    assert_eq!(status_with(c.web, "first-token"), 401, "the old token");
    assert_eq!(status_with(c.web, "second-token"), 200, "the new token");

    // A token file that cannot be read keeps the token in force, and says why.
    std::fs::remove_file(&token).unwrap();
    let log = c.reload();
    assert!(
        log.contains("ERROR") && log.contains("the previous token stays in force"),
        "{log}"
    );
    assert_eq!(status_with(c.web, "second-token"), 200);
}

#[test]
fn a_broken_file_keeps_the_running_config_and_logs_every_error() {
    let dir = tempfile::tempdir().unwrap();
    let c = Coordinator::start_extra(dir.path(), "  authToken:\n    value: kept\n");
    let good = std::fs::read_to_string(&c.config).unwrap();
    // Two errors, on lines 6 and 9.
    edit(&c, |t| {
        t.replace("value: kept", "value: \"\"") + "notify:\n  webhook:\n    url: ftp://nowhere\n"
    });
    let log = c.reload();
    let file = c.config.display().to_string();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains(" ERROR ")).collect();
    assert!(
        errors
            .iter()
            .any(|l| l.contains(&format!("{file}:6:")) && l.contains("web.authToken.value")),
        "{log}"
    );
    assert!(
        errors
            .iter()
            .any(|l| l.contains(&format!("{file}:9:")) && l.contains("notify.webhook.url")),
        "{log}"
    );
    assert!(
        errors
            .iter()
            .any(|l| l.contains("has 2 error(s); the running config stays")),
        "{log}"
    );
    assert!(alive(c.web));
    assert_eq!(status_with(c.web, "kept"), 200, "the running token stays");

    // The same file fixed is applied: the token it names now holds.
    std::fs::write(&c.config, good.replace("value: kept", "value: fixed")).unwrap();
    let log = c.reload();
    assert!(log.contains("config reloaded"), "{log}");
    assert_eq!(status_with(c.web, "fixed"), 200);
    assert_eq!(status_with(c.web, "kept"), 401);
}

#[test]
fn a_changed_jobs_file_is_registered_again_and_a_removed_key_unregisters_it() {
    let dir = tempfile::tempdir().unwrap();
    let tab = dir.path().join("jobs.crontab");
    std::fs::write(&tab, "# cronstable: name=one\n0 3 * * * true\n").unwrap();
    let c = Coordinator::start_extra(
        dir.path(),
        &format!("jobs:\n  crontab: {}\n", tab.display()),
    );
    let before = job_set(c.web);
    assert_eq!(before["jobs"], 1, "{before}");

    std::fs::write(
        &tab,
        "# cronstable: name=one\n0 3 * * * true\n# cronstable: name=two\n0 4 * * * true\n",
    )
    .unwrap();
    let log = c.reload();
    assert!(log.contains("jobs"), "{log}");
    let after = job_set(c.web);
    assert_eq!(after["jobs"], 2, "{after}");
    assert_ne!(after["job_set_id"], before["job_set_id"]);
    let names: Vec<String> = http(c.web, "GET", "/jobs").unwrap().json()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|j| j["name"].as_str().map(str::to_owned))
        .collect();
    assert!(names.contains(&"two".to_owned()), "{names:?}");

    edit(&c, |t| t[..t.find("jobs:").unwrap()].to_owned());
    c.reload();
    assert_eq!(
        job_set(c.web)["jobs"],
        0,
        "a removed jobs: key unregisters its jobs"
    );
}

fn wait_leader(web: SocketAddr, what: &str) -> Value {
    wait_for_state(what, || {
        let v = cluster(web);
        if v["is_leader"] == true && v["manager"] == "running" {
            Ok(v)
        } else {
            Err(v.to_string())
        }
    })
}

#[test]
fn a_changed_cluster_section_rebuilds_the_manager_and_an_unchanged_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("leases-1");
    let c = start_lease_node(dir.path(), "a", &Store::Filesystem(first.clone()), 3);
    // A per-second Leader job through both reloads: every answer is in the decision log, so an
    // answer from an election-off view, however brief, would show there.
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        "# cronstable: name=tick clusterPolicy=Leader seconds=true
* * * * * * true
",
    )
    .unwrap();
    let shim = start_shim(&crontab, &c.api, &[]);
    let led = wait_leader(c.web, "a to lead on the first directory");
    assert_eq!(led["lease"]["path"], first.display().to_string(), "{led}");

    // The same file again: nothing to rebuild, the lease held all along.
    let log = c.reload();
    assert!(!log.contains("cluster manager rebuilt"), "{log}");
    assert!(!log.contains("lease released"), "{log}");
    let still = cluster(c.web);
    assert_eq!(still["is_leader"], true, "{still}");
    assert_eq!(still["lease"]["fence"], led["lease"]["fence"], "{still}");

    // Another ttl: the old manager releases its lease, the new one starts blank and elects
    // again. (Moving to another directory is refused: the election's place is restart-only.)
    // That the view between the two managers is the new one's starting view, never election
    // off, is pinned by reload::tests::switching with a backend that never publishes; here
    // every answer the shim got is in the decision log, checked below.
    edit(&c, |t| t.replace("ttl: 3", "ttl: 4"));
    let log = c.reload();
    assert!(log.contains("cluster manager rebuilt"), "{log}");
    assert!(log.contains("lease released"), "{log}");
    let led = wait_leader(c.web, "a to lead again after the rebuild");
    assert_eq!(led["backend"], "filesystem", "{led}");
    assert_eq!(led["lease"]["path"], first.display().to_string(), "{led}");
    c.proc.wait_log("job=\"tick\"");
    let decisions = c.proc.log();
    assert!(
        !decisions.contains("election_off"),
        "a firing was answered from an election-off view:\n{decisions}"
    );
    drop(shim);
}

#[test]
fn a_reload_that_adds_a_cluster_section_is_refused_until_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let c = Coordinator::start(dir.path());
    assert_eq!(cluster(c.web)["enabled"], false);
    let leases = dir.path().join("leases");
    std::fs::create_dir(&leases).unwrap();
    edit(&c, |t| {
        t + &format!(
            "cluster:\n  nodeName: solo\n  backend: filesystem\n  filesystem:\n    path: {}\n    ttl: 3\n    topology: single-node\n",
            leases.display()
        )
    });
    let log = c.reload();
    assert!(
        log.contains("config reload refused: cluster (election turned on or off) changed"),
        "{log}"
    );
    assert!(!log.contains("cluster manager rebuilt"), "{log}");
    assert_eq!(cluster(c.web)["enabled"], false);
    assert_eq!(reloads(c.web, "", "refused"), 1);
}

/// `cronstable_config_reloads_total{result}` from `/metrics`.
fn reloads(web: SocketAddr, token: &str, result: &str) -> u64 {
    let bearer = format!("Bearer {token}");
    let metrics = http_with(web, "GET", "/metrics", &[("Authorization", &bearer)])
        .unwrap()
        .body;
    let series = format!("cronstable_config_reloads_total{{result=\"{result}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .unwrap_or_else(|| panic!("no {series} in /metrics:\n{metrics}"))
        .trim()
        .parse()
        .unwrap()
}

/// `GET /cluster` with the guarded nodes' token.
fn guarded_cluster(web: SocketAddr) -> Value {
    http_with(
        web,
        "GET",
        "/cluster",
        &[("Authorization", "Bearer s3cret")],
    )
    .unwrap()
    .json()
}

fn wait_guarded_leader(web: SocketAddr) {
    wait_for_state("the node to lead", || {
        let v = guarded_cluster(web);
        if v["is_leader"] == true {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
}

/// A filesystem-lease node with `web.authToken: s3cret`.
fn start_guarded_lease_node(dir: &Path) -> (Coordinator, std::path::PathBuf) {
    let store = dir.join("store");
    std::fs::create_dir(&store).unwrap();
    let c = Coordinator::start_named(
        dir,
        "coordinator",
        &format!(
            "  authToken:\n    value: s3cret\ncluster:\n  nodeName: a\n  backend: filesystem\n  \
             filesystem:\n    path: {}\n    ttl: 3\n    topology: single-node\n",
            store.display()
        ),
    );
    (c, store)
}

#[test]
fn an_emptied_config_file_is_refused_and_the_node_keeps_its_election_and_token() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _store) = start_guarded_lease_node(dir.path());
    wait_guarded_leader(c.web);
    assert_eq!(http(c.web, "GET", "/jobs").unwrap().status, 401);
    // A non-atomic rewrite, caught between truncate and write.
    std::fs::write(&c.config, "").unwrap();
    let log = c.reload();
    assert_eq!(
        http(c.web, "GET", "/jobs").unwrap().status,
        401,
        "the API must stay guarded"
    );
    let v = guarded_cluster(c.web);
    assert_eq!(v["enabled"], true, "{v}");
    assert_eq!(v["is_leader"], true, "{v}");
    assert!(log.contains("the file is empty"), "{log}");
    assert_eq!(status_with(c.web, "s3cret"), 200);
    assert_eq!(reloads(c.web, "s3cret", "refused"), 1);
    // Comments and document markers alone are empty too.
    std::fs::write(&c.config, "---\n# being rewritten\n").unwrap();
    let log = c.reload();
    assert!(log.contains("the file is empty"), "{log}");
    assert_eq!(guarded_cluster(c.web)["enabled"], true);
}

#[test]
fn a_reload_that_would_open_the_door_is_refused_naming_the_key_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (c, store) = start_guarded_lease_node(dir.path());
    wait_guarded_leader(c.web);
    let original = std::fs::read_to_string(&c.config).unwrap();
    let moved = dir.path().join("elsewhere");
    std::fs::create_dir(&moved).unwrap();
    for (edit_to, key) in [
        (
            original.replace("  authToken:\n    value: s3cret\n", ""),
            "web.authToken (removed)",
        ),
        (
            original.replace(&store.display().to_string(), &moved.display().to_string()),
            "cluster.filesystem.path",
        ),
        (
            original[..original.find("cluster:").unwrap()].to_owned(),
            "cluster (election turned on or off)",
        ),
    ] {
        std::fs::write(&c.config, &edit_to).unwrap();
        let log = c.reload();
        assert!(
            log.contains(&format!("config reload refused: {key} changed")),
            "{key}: {log}"
        );
        let v = guarded_cluster(c.web);
        assert_eq!(v["enabled"], true, "{key}: {v}");
        assert_eq!(
            v["lease"]["path"],
            store.display().to_string(),
            "{key}: {v}"
        );
        assert_eq!(http(c.web, "GET", "/jobs").unwrap().status, 401, "{key}");
    }
    assert_eq!(reloads(c.web, "s3cret", "refused"), 3);
    // A change that narrows or tunes still applies: a new token.
    std::fs::write(&c.config, original.replace("s3cret", "n3w")).unwrap();
    let log = c.reload();
    assert!(log.contains("config reloaded"), "{log}");
    assert_eq!(status_with(c.web, "n3w"), 200);
    assert_eq!(reloads(c.web, "n3w", "applied"), 1);
}

fn next_failure(rx: &mpsc::Receiver<Value>, which: &str) -> Value {
    let deadline = Duration::from_secs(30);
    loop {
        let v = rx.recv_timeout(deadline).unwrap_or_else(|_| {
            panic!("no job_failure at the {which} webhook within {deadline:?}")
        });
        if v["event"] == "job_failure" {
            return v;
        }
    }
}

fn crontab(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("crontab");
    std::fs::write(
        &path,
        "# cronstable: name=broken seconds=true\n*/2 * * * * * exit 7\n",
    )
    .unwrap();
    path
}

#[test]
fn a_reload_sends_the_next_events_to_the_new_webhook() {
    let (first_url, first) = webhook_receiver(0);
    let (second_url, second) = webhook_receiver(0);
    let dir = tempfile::tempdir().unwrap();
    let c = Coordinator::start_extra(
        dir.path(),
        &format!("notify:\n  webhook:\n    url: {first_url}\n    timeout: 2s\n"),
    );
    let _shim = start_shim(&crontab(dir.path()), &c.api, &[]);
    assert_eq!(next_failure(&first, "first")["job"], "broken");

    edit(&c, |t| t.replace(&first_url, &second_url));
    let log = c.reload();
    assert!(log.contains("notify"), "{log}");
    assert_eq!(next_failure(&second, "second")["job"], "broken");
    // Whatever the first receiver still gets was queued before the reload; nothing after.
    while first.try_recv().is_ok() {}
    next_failure(&second, "second");
    assert!(
        first.try_recv().is_err(),
        "a failure after the reload went to the old webhook"
    );
}
