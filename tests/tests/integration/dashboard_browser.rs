//! The dashboard in a real headless Chromium, driven over W3C WebDriver by Debian's
//! `chromedriver` (issue 6; inventory §8.3): the page loads with no console errors and no
//! failed requests, the cluster panel follows a live 3-node gossip cluster, run-now starts a
//! run that appears in the drawer, `web.authToken` shows the login form, and screenshots are
//! saved under `target/test-artifacts/`.
//!
//! Console errors are read with chromedriver's legacy `POST /session/{id}/se/log`
//! `{"type": "browser"}` endpoint (with `goog:loggingPrefs: {browser: ALL}`), which works
//! with Debian's chromedriver; Chromium also reports every failed resource load there as a
//! SEVERE entry, and the page's Resource Timing entries are checked besides.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster};
use cronstable_tests::webdriver::{Session, artifact_dir};
use cronstable_tests::{Coordinator, Proc, http, start_shim, wait_for, wait_for_state};
use serde_json::{Value, json};

/// A job that fires every second, so the tables have runs to show, and one that fires once a
/// year, so any run of it in a test is the manual one.
const CRONTAB: &str = "# cronstable: name=heartbeat seconds=true\n* * * * * * echo beat\n\
                       # cronstable: name=yearly-report\n0 0 1 1 * echo report-from-run-now\n";

fn url(web: SocketAddr, path: &str) -> String {
    format!("http://{web}{path}")
}

/// A coordinator with election off and a shim that registered [`CRONTAB`].
fn single_node(dir: &Path, extra: &str) -> (Coordinator, Proc) {
    let tab = dir.join("crontab");
    std::fs::write(&tab, CRONTAB).unwrap();
    let coordinator = Coordinator::start_extra(dir, extra);
    let shim = start_shim(&tab, &coordinator.api, &[]);
    (coordinator, shim)
}

fn get_json(web: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Value {
    let r = cronstable_tests::http_with(web, "GET", path, headers).unwrap();
    assert_eq!(r.status, 200, "GET {path}: {}", r.body);
    r.json()
}

/// Fails on any SEVERE console entry (script errors, failed loads) since the last call.
fn assert_no_console_errors(browser: &Session, when: &str) {
    let severe: Vec<Value> = browser
        .browser_log()
        .into_iter()
        .filter(|e| e["level"] == "SEVERE")
        .collect();
    assert!(
        severe.is_empty(),
        "console errors {when}:\n{}",
        severe
            .iter()
            .map(|e| format!("  {}: {}", e["source"], e["message"]))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The page's requests so far, from Resource Timing: `[{url, status, bytes}]`, the
/// navigation first.
fn requests(browser: &Session) -> Vec<Value> {
    let v = browser.execute(
        "return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))\
         .map(e => ({ url: e.name, status: e.responseStatus, bytes: e.encodedBodySize, kind: e.initiatorType, start: e.startTime }));",
        json!([]),
    );
    v.as_array().cloned().unwrap_or_default()
}

fn save_screenshot(browser: &Session, name: &str) -> PathBuf {
    let path = artifact_dir().join(name);
    browser.screenshot(&path);
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size > 1000, "{} is only {size} bytes", path.display());
    println!("screenshot: {}", path.display());
    path
}

#[test]
fn the_dashboard_loads_clean_with_node_name_and_job_set_id() {
    let dir = tempfile::tempdir().unwrap();
    let (coordinator, _shim) = single_node(dir.path(), "");
    let web = coordinator.web;
    let set = wait_for("the shim to register its job set", || {
        let v = get_json(web, "/job-set-id", &[]);
        (v["jobs"] == 2).then_some(v)
    });
    // Without a cluster section `/cluster` is the seed's bare body; `/fleet` names this node.
    let node_name = get_json(web, "/fleet", &[])["nodes"][0]["node_name"]
        .as_str()
        .expect("/fleet names this node first")
        .to_owned();

    let browser = Session::new();
    browser.goto(&url(web, "/"));
    browser.wait_for_text("#node-name", &node_name);
    browser.wait_for_text("#job-set-id", set["job_set_id"].as_str().unwrap());
    browser.wait_for_text("#jobs-table tbody", "heartbeat");
    browser.wait_for_text("#jobs-table tbody", "yearly-report");
    // The every-second job's last run shows up in its row, and in the fleet view.
    browser.wait_for_text("#jobs-table tr[data-job=heartbeat]", "ok ·");
    browser.wait_for_text("#fleet", "heartbeat");
    // Inventory §8.3: the fleet view shows this node's live CPU and memory (`/node`); the CPU
    // rate needs a second sample, so it fills in on a later refresh.
    browser.wait_for_text(".fleet-node .load", "memory");
    // The uptime, in the cluster panel (with its start time) and in the fleet view.
    browser.wait_for_text("#uptime", "since ");
    browser.wait_for_text(".fleet-node .load", "up ");
    wait_for("a CPU rate in the fleet view", || {
        let load = browser.text(".fleet-node .load");
        (!load.contains("cpu …")).then_some(load)
    });
    // A few refresh cycles go by, each of which must render without an error.
    let first = browser.wait_for_text("#refresh-state", "live");
    wait_for("a later refresh", || {
        let now = browser.text("#refresh-state");
        (now.starts_with("live") && now != first).then_some(())
    });
    assert_no_console_errors(&browser, "loading the dashboard");

    let all = requests(&browser);
    let origin = format!("http://{web}/");
    for r in &all {
        assert!(
            r["url"].as_str().unwrap().starts_with(&origin),
            "a request to another origin: {r}"
        );
        assert_eq!(r["status"], 200, "a failed request: {r}");
    }
    // The first load: the page, its two assets, and the first poll of four endpoints.
    let first_load: Vec<&str> = all
        .iter()
        .filter_map(|r| r["url"].as_str())
        .map(|u| u.trim_start_matches(&origin))
        .take(7)
        .collect();
    for expected in [
        "",
        "assets/app.css",
        "assets/app.js",
        "cluster",
        "jobs",
        "fleet",
        "node",
    ] {
        assert!(
            first_load.contains(&expected),
            "first load {first_load:?} lacks /{expected}"
        );
    }
    let weight: u64 = all.iter().take(3).filter_map(|r| r["bytes"].as_u64()).sum();
    println!(
        "page weight: first load {} requests, page and assets {weight} bytes",
        first_load.len()
    );
    save_screenshot(&browser, "dashboard.png");
    assert_no_console_errors(&browser, "after the screenshot");

    // The every-second job's drawer plots its targets against its runs: green targets that
    // ran here, each with a run bar below it.
    browser.click_css("#jobs-table tr[data-job=heartbeat]");
    browser.wait_for_text("#drawer-title", "heartbeat");
    let met = wait_for("met targets and their runs in the timeline", || {
        let v = browser.execute(
            "const rects = [...document.querySelectorAll('#timeline svg rect')];\
             const ran = rects.filter(r => r.getAttribute('fill') === '#2e9d57');\
             return { targets: ran.filter(r => r.getAttribute('y') === '6').length,\
                      runs: ran.filter(r => r.getAttribute('y') === '36').length };",
            json!([]),
        );
        (v["targets"].as_u64() >= Some(3) && v["runs"].as_u64() >= Some(3)).then_some(v)
    });
    println!("timeline: {met}");
    browser.wait_for_text("#history tr.run-row[data-kind=scheduled]", "ok");
    save_screenshot(&browser, "dashboard-timeline.png");
    assert_no_console_errors(&browser, "with the heartbeat drawer open");
}

#[test]
fn run_now_from_the_drawer_appears_in_its_run_history() {
    let dir = tempfile::tempdir().unwrap();
    let (coordinator, _shim) = single_node(dir.path(), "");
    let web = coordinator.web;

    let browser = Session::new();
    browser.goto(&url(web, "/"));
    browser.click_css("#jobs-table tr[data-job=yearly-report]");
    browser.wait_for_text("#drawer-title", "yearly-report");
    browser.wait_for_text("#drawer-facts", "0 0 1 1 *");
    browser.wait_for_text("#history", "no finished runs");
    assert!(
        browser.find_all("#history tr[data-kind]").is_empty(),
        "a once-a-year job has no runs yet"
    );

    // The shim registers its watch a moment after its job set; until then a manual start is
    // refused, and the drawer says so instead of failing silently.
    let mut refusals = 0;
    wait_for_state("the manual start to be accepted", || {
        browser.click_css("#run-now");
        let shown = wait_for("the run-now result", || {
            let t = browser.text("#run-now-result");
            (t.starts_with("started") || t.starts_with("could not")).then_some(t)
        });
        if shown.starts_with("started") {
            Ok(())
        } else {
            refusals += 1;
            Err(shown)
        }
    });
    // Each refusal is a non-2xx response, which Chromium logs as a failed load; nothing else
    // may be in the log.
    let unexpected: Vec<Value> = browser
        .browser_log()
        .into_iter()
        .filter(|e| e["level"] == "SEVERE")
        .filter(|e| refusals == 0 || !e["message"].as_str().unwrap_or("").contains("/start - "))
        .collect();
    assert!(
        unexpected.is_empty(),
        "console errors while starting: {unexpected:?}"
    );
    // The run shows up in the open drawer by itself (live refresh), as a manual run with its
    // output tail.
    browser.wait_for_text("#history tr.run-row[data-kind=manual]", "manual");
    browser.wait_for_text("#history", "report-from-run-now");
    browser.wait_for_text("#history tr.run-row[data-kind=manual]", "ok");
    save_screenshot(&browser, "dashboard-drawer.png");
    assert_no_console_errors(&browser, "with the drawer open");

    // Closing the drawer hides it.
    browser.click_css("#drawer-close");
    wait_for("the drawer to close", || {
        (browser.execute("return document.querySelector('#drawer').hidden", json!([])) == true)
            .then_some(())
    });
}

/// GSP-113: on a lease backend the observability mesh brings the other nodes into the fleet
/// panel, with their runs, CPU/memory and uptime.
#[test]
fn gsp_113_the_fleet_panel_shows_a_lease_clusters_nodes_through_the_mesh() {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(2, 134));
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    cronstable_tests::lease::lease_mesh(
        &files,
        &format!(
            "  backend: filesystem\n  filesystem:\n    path: {}\n    ttl: 3\n    topology: single-node\n",
            store.display()
        ),
        &[],
    );
    let nodes: Vec<Coordinator> = (0..2).map(|i| files.start(i)).collect();
    let tab = dir.path().join("crontab");
    std::fs::write(&tab, CRONTAB).unwrap();
    let _shims: Vec<Proc> = nodes
        .iter()
        .map(|n| start_shim(&tab, &n.api, &[]))
        .collect();

    let browser = Session::new();
    browser.goto(&url(nodes[0].web, "/"));
    browser.wait_for_text("#node-name", "n1");
    browser.wait_for_text("#backend", "filesystem");
    let n2 = browser.wait_for_text(".fleet-node[data-node=n2] .load", "memory");
    assert!(n2.contains("CPUs") && n2.contains("up "), "{n2}");
    browser.wait_for_text(".fleet-node[data-node=n2]", "heartbeat");
    assert_eq!(
        browser
            .find_all(".fleet-node[data-node=n2] .dot.reachable")
            .len(),
        1
    );
    let fleet = browser.text("#fleet");
    assert!(!fleet.contains("exchanges nothing"), "{fleet}");
    assert_no_console_errors(&browser, "on a lease node's dashboard with the mesh");
    save_screenshot(&browser, "dashboard-lease-fleet.png");

    // The timeline names the node that ran each instant, from the store's claims, whichever
    // node holds the lease: "did my firing run, and where" is one look.
    browser.click_css("#jobs-table tr[data-job=heartbeat]");
    browser.wait_for_text("#drawer-title", "heartbeat");
    let named = wait_for("timeline targets that name the node that ran them", || {
        let v = browser.execute(
            "return [...document.querySelectorAll('#timeline svg rect[y=\"6\"] title')]\
               .map(t => t.textContent).filter(t => / · ran on n[12]$/.test(t));",
            json!([]),
        );
        v.as_array().filter(|a| a.len() >= 3).cloned()
    });
    println!("named: {:?}", &named[..3]);
    let firings = get_json(nodes[0].web, "/jobs/heartbeat/firings", &[]);
    assert!(
        firings["firings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["ranOn"].as_array().is_some_and(|n| n.len() == 1)),
        "{firings}"
    );
    save_screenshot(&browser, "dashboard-lease-timeline.png");
    assert_no_console_errors(&browser, "with the lease node's heartbeat drawer open");
}

#[test]
fn gsp_13_the_cluster_panel_follows_a_live_gossip_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(3, 78);
    // With observability the fleet view also shows each peer's CPU/memory (GSP-112).
    plan.extra = "  observability: true\n".into();
    let files = ClusterFiles::write(dir.path(), &plan);
    let nodes: Vec<Coordinator> = (0..3).map(|i| files.start(i)).collect();
    wait_for_state("n1 to lead a quorate cluster", || {
        let v = cluster(nodes[0].web).ok_or("no answer")?;
        (v["is_leader"] == true).then_some(()).ok_or(v.to_string())
    });

    let browser = Session::new();
    browser.goto(&url(nodes[0].web, "/"));
    browser.wait_for_text("#node-name", "n1");
    browser.wait_for_text("#backend", "gossip");
    browser.wait_for_text("#role", "leader");
    browser.wait_for_text("#tally", "3 of 3 agree");
    wait_for("two agreed peers on n1's page", || {
        (browser.find_all("#peers li .dot.agreed").len() == 2).then_some(())
    });
    assert_no_console_errors(&browser, "on n1's dashboard");

    browser.goto(&url(nodes[1].web, "/"));
    browser.wait_for_text("#node-name", "n2");
    let role = browser.wait_for_text("#role", "follower");
    assert!(!role.contains("leader"), "{role}");
    browser.wait_for_text("#leader", "n1");
    wait_for("one dot per peer, both agreed, on n2's page", || {
        let peers = browser.find_all("#peers li");
        let agreed = browser.find_all("#peers li .dot.agreed");
        (peers.len() == 2 && agreed.len() == 2).then_some(())
    });
    browser.wait_for_text("#peers", "n1");
    browser.wait_for_text("#peers", "n3");
    // GSP-112: a peer's figures, gossiped in X-Cronstable-Node-Stats, reach n2's fleet view.
    let n3_load = browser.wait_for_text(".fleet-node[data-node=n3] .load", "memory");
    assert!(n3_load.contains("CPUs"), "{n3_load}");
    save_screenshot(&browser, "dashboard-cluster.png");

    // n3 dies without a word; the page, never reloaded, turns its dot grey.
    browser.execute("window.__sameDocument = true; return null;", json!([]));
    nodes[2].proc.signal(9);
    wait_for_state("n3's dot to turn unreachable", || {
        let n3 = browser
            .try_find("#peers li[data-status=unreachable] .dot.unreachable")
            .and_then(|_| {
                browser
                    .try_find("#peers li[data-status=unreachable]")
                    .and_then(|li| browser.text_of(&li))
            })
            .unwrap_or_default();
        if n3.contains("n3") {
            Ok(())
        } else {
            Err(browser.text("#peers"))
        }
    });
    assert_eq!(
        browser.execute("return window.__sameDocument === true;", json!([])),
        true,
        "the page was reloaded instead of refreshed in place"
    );
    // Two of three still agree, so n2 stays a quorate follower.
    browser.wait_for_text("#tally", "2 of 3 agree");
    browser.wait_for_text("#role", "follower");
    save_screenshot(&browser, "dashboard-cluster-peer-down.png");
    assert_no_console_errors(&browser, "after a peer died");
    drop(nodes);
}

#[test]
fn with_an_auth_token_the_login_form_leads_to_the_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let (coordinator, _shim) = single_node(
        dir.path(),
        "  authToken:\n    value: \"browser s3cret;=\"\n",
    );
    let web = coordinator.web;
    assert_eq!(http(web, "GET", "/jobs").unwrap().status, 401);

    let browser = Session::new();
    browser.goto(&url(web, "/"));
    let field = browser.find("input[type=password]");
    assert!(
        browser.try_find("#jobs-table").is_none(),
        "the dashboard shows before signing in"
    );
    assert!(
        !browser.text("body").contains("not accepted"),
        "the first visit complains about a token nobody typed"
    );
    // The 401 of the page load itself is expected; nothing else may fail.
    let errors: Vec<Value> = browser
        .browser_log()
        .into_iter()
        .filter(|e| e["level"] == "SEVERE" && !e["message"].as_str().unwrap_or("").contains("401"))
        .collect();
    assert!(
        errors.is_empty(),
        "console errors on the login form: {errors:?}"
    );

    // A wrong token leaves the form in place, in a reloaded document.
    browser.execute("window.__beforeSubmit = true; return null;", json!([]));
    browser.send_keys(&field, "wrong\n");
    wait_for("the login form again after a wrong token", || {
        let reloaded = browser.execute("return window.__beforeSubmit === undefined;", json!([]));
        (reloaded == true)
            .then(|| browser.try_find("input[type=password]"))
            .flatten()
            .filter(|_| browser.try_find("#jobs-table").is_none())
    });
    browser.wait_for_text("body", "That token was not accepted");
    save_screenshot(&browser, "dashboard-login-wrong-token.png");
    let _ = browser.browser_log();

    // The right one (with characters the cookie must escape) opens the dashboard.
    let field = browser.find("input[type=password]");
    browser.send_keys(&field, "browser s3cret;=\n");
    browser.wait_for_text("#jobs-table tbody", "yearly-report");
    browser.wait_for_text("#refresh-state", "live");
    assert_no_console_errors(&browser, "after signing in");
    let cookie = browser.execute("return document.cookie;", json!([]));
    assert!(
        cookie.as_str().unwrap_or("").contains("cronstable_token="),
        "{cookie}"
    );
    save_screenshot(&browser, "dashboard-after-login.png");
}
