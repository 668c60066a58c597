//! Gossip clusters of real coordinator (and shim) processes over real mTLS on loopback
//! (issue 3; inventory GSP-*, §3 rows 3-6, ROT-01/02). Each test uses its own 127.0.X.0/24 so
//! tests can run concurrently.

use std::path::Path;
use std::process::Command;

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster, write_config};
use cronstable_tests::{Proc, binary, lines, wait_for, wait_for_state};
use serde_json::Value;

/// Waits until node `web`'s `/cluster` satisfies `pred`, and returns it.
fn wait_cluster(
    what: &str,
    node: &cronstable_tests::Coordinator,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    wait_for_state(what, || {
        let v = cluster(node.web).ok_or("no /cluster answer")?;
        if pred(&v) {
            Ok(v)
        } else {
            Err(format!("/cluster {v}"))
        }
    })
}

fn leader_is(v: &Value, name: &str) -> bool {
    v["quorate"] == true && v["leader"] == name
}

/// A shim beside `coordinator` whose one job (every second, `policy`) appends its node's name
/// to `$OUT`. Every node runs the same crontab, so the job sets agree.
fn shim(dir: &Path, coordinator: &cronstable_tests::Coordinator, node: &str, policy: &str) -> Proc {
    shim_with(dir, coordinator, node, &[("tick", policy)])
}

/// Like [`shim`], with several per-second jobs `(name, policy)`, each appending
/// `$NODE $CRONSTABLE_JOB $CRONSTABLE_SCHEDULED_AT` to `$OUT`.
fn shim_with(
    dir: &Path,
    coordinator: &cronstable_tests::Coordinator,
    node: &str,
    jobs: &[(&str, &str)],
) -> Proc {
    let crontab = dir.join("crontab");
    let text: String = jobs
        .iter()
        .map(|(name, policy)| {
            format!(
                "# cronstable: name={name} clusterPolicy={policy} seconds=true\n\
                 * * * * * * echo \"$NODE $CRONSTABLE_JOB $CRONSTABLE_SCHEDULED_AT\" >> \"$OUT\"\n"
            )
        })
        .collect();
    std::fs::write(&crontab, text).unwrap();
    let mut cmd = Command::new(binary("cronstable-shim"));
    cmd.arg("--crontab")
        .arg(&crontab)
        .arg("--coordinator")
        .arg(&coordinator.api)
        .env("NODE", node)
        .env("OUT", dir.join(format!("runs-{node}")));
    Proc::spawn(&format!("shim {node}"), cmd)
}

/// Three nodes on distinct loopback addresses and one `/peer` port (the common local layout):
/// each peer is another node, not "this node itself", so they start and elect (CFG-05 counts
/// only an address the listener accepts as this node). On main every node refused to start.
#[test]
fn cfg_05_nodes_on_distinct_loopback_addresses_and_one_port_form_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(3, 111);
    plan.one_peer_port = true;
    let files = ClusterFiles::write(dir.path(), &plan);
    let nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    for node in &nodes {
        let v = wait_cluster("n1 elected everywhere", node, |v| leader_is(v, "n1"));
        assert_eq!(v["cluster_size"], 3, "{v}");
        assert_eq!(v["quorate"], true, "{v}");
    }
}

#[test]
fn gsp_40_three_nodes_elect_the_lowest_name_and_only_it_runs_leader_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 61));
    let nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    for node in &nodes {
        let v = wait_cluster("n1 elected everywhere", node, |v| leader_is(v, "n1"));
        assert_eq!(v["backend"], "gossip");
        assert_eq!(v["cluster_size"], 3);
        assert_eq!(v["quorum"], 2);
        assert_eq!(v["conflict"], false);
        let peers = v["peers"].as_array().unwrap();
        assert_eq!(peers.len(), 2);
        for p in peers {
            assert_eq!(p["status"], "agreed", "{p}");
            assert!(p["last_seen"].as_str().unwrap().ends_with("+00:00"), "{p}");
            assert_eq!(p["mismatch_streak"], 0);
        }
    }
    assert_eq!(cluster(nodes[0].web).unwrap()["is_leader"], true);
    // GSP-05: /peer lives only on the mTLS listener, never on the web API.
    assert_eq!(
        cronstable_tests::http(nodes[0].web, "GET", "/peer")
            .unwrap()
            .status,
        404
    );
    assert_eq!(cluster(nodes[1].web).unwrap()["is_leader"], false);

    // The gate: a Leader job runs on n1 only.
    let shims: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(i, c)| shim(dir.path(), c, &format!("n{}", i + 1), "Leader"))
        .collect();
    // The shims re-register the same job set on every node, so the cluster re-converges.
    cronstable_tests::wait_same_job_set(&nodes, 1);
    // While the shims register one by one, two nodes that already share the new job set are
    // a quorum of their own and may elect n2 (a rolling job-set change, GSP-20); leadership is
    // sticky, so n2 may keep it. Judge the runs after every node agrees on the shims' job set
    // and names one leader: only that leader runs the Leader job.
    let leader = wait_cluster("agreement on the shims' job set", &nodes[0], |v| {
        v["quorate"] == true
            && v["leader"].is_string()
            && v["peers"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["status"] == "agreed")
    })["leader"]
        .as_str()
        .unwrap()
        .to_owned();
    for node in &nodes {
        wait_cluster("every node names the same leader", node, |v| {
            leader_is(v, &leader)
        });
    }
    let names = ["n1", "n2", "n3"];
    let settled = settle_instant();
    let late = wait_runs_after(dir.path(), &names, settled, 3);
    for (node, _, at) in &late {
        assert_eq!(
            node, &leader,
            "{node} ran a Leader job for {at} while {leader} led: {late:?}"
        );
    }
    // The owner is a series an alert can count: summed over the nodes, one owner, the leader.
    let owners: Vec<&str> = nodes
        .iter()
        .zip(names)
        .filter(|(node, _)| {
            let metrics = cronstable_tests::http(node.web, "GET", "/metrics")
                .unwrap()
                .body;
            metrics.lines().any(|l| {
                l.starts_with("cronstable_job_is_owner{")
                    && l.contains("Leader")
                    && l.ends_with(" 1")
            })
        })
        .map(|(_, name)| name)
        .collect();
    assert_eq!(owners, [leader.as_str()]);
    // When the mesh's certificate and CA expire, read from the files the config names.
    let year_from_now = (cronstable_tests::now_ms() / 1000 + 365 * 86_400) as f64;
    for node in &nodes {
        let metrics = cronstable_tests::http(node.web, "GET", "/metrics")
            .unwrap()
            .body;
        for file in ["cert", "ca"] {
            let series = format!(
                "cronstable_tls_certificate_expiration_timestamp_seconds{{file=\"{file}\",tls=\"cluster\"}} "
            );
            let at: f64 = metrics
                .lines()
                .find_map(|l| l.strip_prefix(series.as_str()))
                .unwrap_or_else(|| panic!("no {series}in {metrics}"))
                .parse()
                .unwrap();
            assert!(at > year_from_now, "{series}{at}");
        }
    }
    drop(shims);
}

#[test]
fn gsp_122_killing_the_leader_moves_leadership_and_a_restart_rejoins() {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 62));
    let mut nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    for node in &nodes {
        wait_cluster("n1 elected", node, |v| leader_is(v, "n1"));
    }
    nodes[0].proc.signal(9);
    nodes[0].proc.wait_exit();
    for node in &nodes[1..] {
        let v = wait_cluster("n2 takes over", node, |v| leader_is(v, "n2"));
        let n1 = v["peers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["status"] == "unreachable")
            .unwrap_or_else(|| panic!("n1 is unreachable: {v}"));
        assert!(
            n1["node_name"].is_null() && n1["last_seen"].is_null(),
            "{n1}"
        );
        assert!(
            n1["last_error"]
                .as_str()
                .unwrap()
                .starts_with("Cannot connect to host"),
            "{n1}"
        );
    }
    nodes[1].proc.wait_log("this node is now the leader");

    // A restarted n1 is a new incarnation; it rejoins as a follower: n2 keeps the lead it
    // holds (rule 4a), so the rejoin costs no Leader firing and never makes two leaders.
    nodes[0] = files.start(0);
    wait_cluster("n1 back and quorate under n2", &nodes[0], |v| {
        leader_is(v, "n2")
            && v["peers"]
                .as_array()
                .is_some_and(|p| p.iter().all(|r| r["status"] == "agreed"))
    });
    for _ in 0..5 {
        for node in &nodes {
            let v = cluster(node.web).expect("answers");
            assert!(
                leader_is(&v, "n2"),
                "n2 keeps the lead after n1 returns: {v}"
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

#[test]
fn gsp_123_a_node_without_a_majority_leads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 63));
    let n1 = files.start(0);
    // Alone, n1 never becomes quorate.
    let v = wait_cluster("n1 polled its peers", &n1, |v| {
        v["peers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["status"] == "unreachable")
    });
    assert_eq!(v["quorate"], false);
    assert!(v["leader"].is_null());
    // One more node gives a majority of 3.
    let n2 = files.start(1);
    wait_cluster("n1 quorate with n2", &n1, |v| leader_is(v, "n1"));
    wait_cluster("n2 follows n1", &n2, |v| leader_is(v, "n1"));
}

#[test]
fn gsp_70_a_duplicate_node_name_is_a_conflict_that_clears() {
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(3, 64);
    plan.names = vec!["n1".into(), "n2".into(), "n2".into()];
    let files = ClusterFiles::write(dir.path(), &plan);
    let nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    let v = wait_cluster("the name conflict", &nodes[0], |v| v["conflict"] == true);
    assert_eq!(v["conflict_names"], serde_json::json!(["n2"]));
    nodes[0].proc.wait_log("duplicate nodeName conflict: n2");
    assert!(
        nodes[0].proc.log().contains("ERROR"),
        "{}",
        nodes[0].proc.log()
    );
    // The second n2 goes away: the conflict clears by itself, logged at INFO.
    let mut nodes = nodes;
    nodes.pop();
    wait_cluster("the conflict to clear", &nodes[0], |v| {
        v["conflict"] == false
    });
    nodes[0]
        .proc
        .wait_log("duplicate nodeName conflict cleared");
}

#[test]
fn gsp_81_a_peer_declaring_another_size_is_a_size_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let plan = ClusterPlan::new(3, 65);
    let files = ClusterFiles::write(dir.path(), &plan);
    // n3 believes in a fourth member that does not exist: it declares N = 4.
    let n3 = &files.nodes[2];
    let peers = format!(
        "    - host: \"{}\"\n    - host: \"{}\"\n    - host: \"127.0.65.99:1\"\n",
        files.nodes[0].peer_host(),
        files.nodes[1].peer_host()
    );
    write_config(n3, &peers, &plan);
    let nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    let v = wait_cluster("the size conflict", &nodes[0], |v| {
        v["size_conflict"] == true
    });
    assert_eq!(v["conflicting_sizes"], serde_json::json!([3, 4]));
    assert_eq!(v["conflict"], true);
    nodes[0].proc.wait_log("cluster size conflict");
}

#[test]
fn gsp_01_a_node_from_another_ca_is_untrusted() {
    let dir = tempfile::tempdir().unwrap();
    let plan = ClusterPlan::new(3, 66);
    let files = ClusterFiles::write(dir.path(), &plan);
    // Re-issue n3 from a foreign CA, trusting only that CA.
    let foreign = cronstable_coordinator::gossip::certgen::TestCa::new("foreign");
    let n3 = &files.nodes[2];
    foreign
        .write_node(n3.tls.ca.parent().unwrap(), "n3", &[&n3.ip])
        .unwrap();
    let nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    let v = wait_cluster("n3 untrusted on n1", &nodes[0], |v| {
        v["peers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["status"] == "untrusted")
    });
    // n1 and n2 are a majority of 3 without n3.
    wait_cluster("n1 leads with n2", &nodes[0], |v| leader_is(v, "n1"));
    assert!(v["peers"].to_string().contains("TLS with"), "{v}");
    nodes[0].proc.wait_log("is untrusted");
}

#[test]
fn rot_01_02_rotated_certificates_apply_without_a_restart_and_half_written_ones_wait() {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 67));
    let nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    for node in &nodes {
        wait_cluster("n1 elected", node, |v| leader_is(v, "n1"));
    }
    let n2 = &files.nodes[1];
    // A half-written certificate: warned about, not applied; the mesh keeps working.
    std::fs::write(&n2.tls.cert, "-----BEGIN CERTIFICATE-----\nMIIB").unwrap();
    nodes[1].proc.wait_log("do not load yet");
    // The renewal completes: new key and certificate from the same CA.
    let (cert, key) = files.ca.issue("n2", &[&n2.ip]).unwrap();
    std::fs::write(&n2.tls.key, key).unwrap();
    std::fs::write(&n2.tls.cert, cert).unwrap();
    nodes[1]
        .proc
        .wait_log("new certificates loaded without a restart");
    // n2 reconnects to its peers with its new client identity, and they accept it: every peer
    // is seen again after the rotation (last_seen has second precision, so allow one more).
    // Real processes on the real clock: the test compares against their wall-clock stamps.
    #[allow(clippy::disallowed_methods)]
    let rotated = chrono::Utc::now() + chrono::Duration::seconds(1);
    wait_cluster("n2 polls with its new identity", &nodes[1], |v| {
        leader_is(v, "n1")
            && v["peers"].as_array().unwrap().iter().all(|p| {
                p["status"] == "agreed"
                    && p["last_seen"]
                        .as_str()
                        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                        .is_some_and(|t| t > rotated)
            })
    });
    for node in &nodes {
        wait_cluster("still whole after rotation", node, |v| leader_is(v, "n1"));
    }
}

#[test]
fn a_listener_that_cannot_bind_leaves_no_manager_and_the_coordinator_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 68));
    let n1 = &files.nodes[0];
    // Someone else holds n1's /peer port.
    let _squatter = std::net::TcpListener::bind((n1.ip.as_str(), n1.peer_port)).unwrap();
    let c = files.start(0);
    c.proc.wait_log("the gossip manager could not start");
    let v = wait_cluster("manager_error on /cluster", &c, |v| {
        v["manager_error"].is_string()
    });
    assert!(
        v["manager_error"]
            .as_str()
            .unwrap()
            .contains("cannot listen"),
        "{v}"
    );
    assert_eq!(v["quorate"], false);
    // Still serving: health and the API answer.
    assert_eq!(
        cronstable_tests::http(c.web, "GET", "/healthz")
            .unwrap()
            .status,
        200
    );
}

/// Every node's run lines from `runs-<node>` files: `(node, job, scheduled_at)`.
fn runs(dir: &Path, nodes: &[&str]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for node in nodes {
        for l in lines(&dir.join(format!("runs-{node}"))) {
            let f: Vec<&str> = l.split(' ').collect();
            if f.len() == 3 {
                out.push((f[0].to_owned(), f[1].to_owned(), f[2].to_owned()));
            }
        }
    }
    out
}

/// The instant after which firings are judged: one second past now, because a firing due at
/// or just before the moment the test saw agreement may have been decided on an older view.
#[allow(clippy::disallowed_methods)] // the shims stamp runs with wall-clock instants
fn settle_instant() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now() + chrono::Duration::seconds(1)
}

/// Waits until at least `count` runs scheduled strictly after `after` are on disk and returns
/// exactly those runs. The run files are read per node, so the filter is by scheduled instant,
/// never by position in the concatenated list.
fn wait_runs_after(
    dir: &Path,
    nodes: &[&str],
    after: chrono::DateTime<chrono::Utc>,
    count: usize,
) -> Vec<(String, String, String)> {
    let late = || -> Vec<_> {
        runs(dir, nodes)
            .into_iter()
            .filter(|(_, _, at)| {
                chrono::DateTime::parse_from_rfc3339(at)
                    .map(|t| t > after)
                    .unwrap_or_else(|e| panic!("run line with a bad instant {at:?}: {e}"))
            })
            .collect()
    };
    wait_for("runs scheduled after the cluster settled", || {
        Some(late()).filter(|l| l.len() >= count)
    })
}

fn all_agreed(v: &Value) -> bool {
    v["peers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["status"] == "agreed")
}

#[test]
fn dst_01_spread_gives_each_leader_job_one_owner_and_uses_several_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(3, 69);
    plan.extra = "  distribution: spread\n".into();
    let files = ClusterFiles::write(dir.path(), &plan);
    let nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    let jobs: Vec<(String, &str)> = (0..8).map(|i| (format!("job-{i}"), "Leader")).collect();
    let jobs: Vec<(&str, &str)> = jobs.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    let _shims: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(i, c)| shim_with(dir.path(), c, &format!("n{}", i + 1), &jobs))
        .collect();
    cronstable_tests::wait_same_job_set(&nodes, 8);
    for node in &nodes {
        let v = wait_cluster("spread cluster agreed", node, |v| {
            v["quorate"] == true && all_agreed(v)
        });
        assert!(v["leader"].is_null(), "no single leader under spread: {v}");
        assert_eq!(v["distribution"], "spread");
    }
    // Past convergence, every firing of every job runs on exactly one node.
    let names = ["n1", "n2", "n3"];
    let settled = settle_instant();
    let late = wait_runs_after(dir.path(), &names, settled, 8 * 4);
    let mut owners: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    let mut per_firing: std::collections::BTreeMap<(String, String), usize> = Default::default();
    for (node, job, at) in &late {
        owners.entry(job.clone()).or_default().insert(node.clone());
        *per_firing.entry((job.clone(), at.clone())).or_default() += 1;
    }
    for (job, nodes) in &owners {
        assert_eq!(nodes.len(), 1, "{job} ran on {nodes:?}");
    }
    for (firing, count) in &per_firing {
        assert_eq!(*count, 1, "{firing:?} ran {count} times");
    }
    let used: std::collections::BTreeSet<_> = owners.values().flatten().collect();
    assert!(used.len() >= 2, "spread used only {used:?}");

    // GET /jobs names each job's owner as clusterOwner (inventory §8.2), the same on every
    // node, and it is the node that ran the job.
    for node in &nodes {
        let r = cronstable_tests::http(node.web, "GET", "/jobs").unwrap();
        for job in r.json()["jobs"].as_array().unwrap() {
            let name = job["name"].as_str().unwrap();
            assert_eq!(job["clusterPolicy"], "Leader", "{job}");
            let ran_on: Vec<_> = owners[name].iter().collect();
            assert_eq!(
                job["clusterOwner"].as_str(),
                Some(ran_on[0].as_str()),
                "{name}: /jobs on {:?} disagrees with where it ran",
                node.web
            );
        }
    }
}

#[test]
fn pol_prefer_leader_runs_on_the_lowest_reachable_node_and_moves_when_it_dies() {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 70));
    let nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    let mut shims: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(i, c)| shim(dir.path(), c, &format!("n{}", i + 1), "PreferLeader"))
        .collect();
    cronstable_tests::wait_same_job_set(&nodes, 1);
    for node in &nodes {
        // Any leader (sticky leadership may keep one that won while the shims registered):
        // PreferLeader goes to the lowest reachable agreeing node, n1, whoever leads.
        wait_cluster("agreed", node, |v| v["quorate"] == true && all_agreed(v));
    }
    let names = ["n1", "n2", "n3"];
    let settled = settle_instant();
    let late = wait_runs_after(dir.path(), &names, settled, 3);
    assert!(late.iter().all(|(n, _, _)| n == "n1"), "{late:?}");

    // n1 dies: n2 is now the lowest reachable agreeing node and runs it.
    shims.remove(0);
    nodes[0].proc.signal(9);
    let killed = settle_instant();
    wait_runs_after(dir.path(), &["n2"], killed, 2);
    // n3 may have run before the cluster first settled (it was alone for a moment); after
    // that it always sees n2, a lower reachable agreeing node, and defers to it.
    let n3_late = wait_runs_after(dir.path(), &["n3"], settled, 0);
    assert!(n3_late.is_empty(), "n3 deferred to n2: {n3_late:?}");
}

#[test]
fn gsp_90_a_peer_with_another_distribution_is_a_policy_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let plan = ClusterPlan::new(3, 73);
    let files = ClusterFiles::write(dir.path(), &plan);
    let mut spread = plan.clone();
    spread.extra = "  distribution: spread\n".into();
    let n3 = &files.nodes[2];
    let peers = format!(
        "    - host: \"{}\"\n    - host: \"{}\"\n",
        files.nodes[0].peer_host(),
        files.nodes[1].peer_host()
    );
    write_config(n3, &peers, &spread);
    let nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    let v = wait_cluster("the policy conflict", &nodes[0], |v| {
        v["policy_conflict"] == true
    });
    assert_eq!(v["conflict"], true);
    let policies = v["conflicting_policies"].to_string();
    assert!(policies.contains("spread"), "{v}");
    nodes[0].proc.wait_log("coordination policy conflict");
}

/// `cluster.leaderEligible: false` on gossip (issue 46, item 6): n1, the name every node would
/// elect, may not lead. It still attests and counts toward quorum, every node elects n2, and
/// with n2 killed n3 leads, never n1: the two left are a quorum of three, and n1 in it.
#[test]
fn a_gossip_node_that_may_not_lead_counts_toward_quorum_and_is_never_elected() {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, 121));
    let n1 = &files.nodes[0].config;
    let yaml = std::fs::read_to_string(n1).unwrap();
    std::fs::write(n1, format!("{yaml}  leaderEligible: false\n")).unwrap();
    let mut nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();
    for node in &nodes {
        wait_cluster("n2 elected", node, |v| {
            leader_is(v, "n2")
                && v["peers"]
                    .as_array()
                    .is_some_and(|p| p.iter().all(|r| r["status"] == "agreed"))
        });
    }
    let own = cluster(nodes[0].web).unwrap();
    assert_eq!(own["leader_eligible"], false, "{own}");
    assert_eq!(own["is_leader"], false, "{own}");
    let seen_by_n2 = cluster(nodes[1].web).unwrap();
    let row = seen_by_n2["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["node_name"] == "n1")
        .unwrap_or_else(|| panic!("n1 in n2's peers: {seen_by_n2}"));
    assert_eq!(row["standing_down"], true, "{row}");
    nodes[1].proc.signal(9);
    nodes[1].proc.wait_exit();
    for i in [0, 2] {
        wait_cluster("n3 takes over, with n1 in its quorum", &nodes[i], |v| {
            leader_is(v, "n3")
        });
    }
    drop(nodes);
}
