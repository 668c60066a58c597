//! `cluster.observability` on the lease backends (GSP-113) against real coordinators over real
//! mTLS: the election-inert mesh shows every node's run summaries and CPU/memory on `/fleet`
//! beside a filesystem or a real etcd election, a dead node becomes "no data", and a mesh peer
//! whose answer says everything an election could read (a duplicate name, another size, a
//! quorum, a leader) changes no decision and no `/cluster` field.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use cronstable_coordinator::config::cluster::TlsPaths;
use cronstable_coordinator::gossip::server::{self, PeerEndpoint};
use cronstable_coordinator::gossip::tls::TlsMaterial;
use cronstable_coordinator::gossip::wire::ServedBody;
use cronstable_core::gossip::{Distribution, LocalNode, fresh_report};
use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, fleet, full_stats};
use cronstable_tests::lease::{doubled_ticks, lease_mesh, tick_shim, ticks};
use cronstable_tests::{Coordinator, free_port, http, start_shim, wait_for_state};
use serde_json::Value;

/// A node's `/fleet` entry with its stats (memory and a CPU rate) and a finished run.
fn full(node: &Value) -> bool {
    let ran = node["jobs"]
        .as_array()
        .is_some_and(|jobs| jobs.iter().any(|j| !j["lastRun"].is_null()));
    full_stats(node) && ran
}

/// A per-second EveryNode job on `node`, so every node has runs to show.
fn every_node_shim(dir: &Path, node: &Coordinator, name: &str) -> cronstable_tests::Proc {
    let tab = dir.join(format!("{name}-every.crontab"));
    std::fs::write(
        &tab,
        "# cronstable: name=beat clusterPolicy=EveryNode seconds=true\n* * * * * * true\n",
    )
    .unwrap();
    start_shim(&tab, &node.api, &[])
}

/// Three lease nodes with the mesh: n1's `/fleet` shows all three with runs and stats, and
/// then no data for a killed one.
fn every_node_on_fleet_then_no_data_for_a_dead_one(backend: &str, subnet: u8) {
    let dir = tempfile::tempdir().unwrap();
    let files = ClusterFiles::write(dir.path(), &ClusterPlan::new(3, subnet));
    lease_mesh(&files, backend, &[]);
    let mut nodes: Vec<Coordinator> = (0..3).map(|i| files.start(i)).collect();
    let _shims: Vec<_> = nodes
        .iter()
        .zip(["n1", "n2", "n3"])
        .map(|(c, name)| every_node_shim(dir.path(), c, name))
        .collect();

    let view = wait_for_state("every node's runs and stats in n1's /fleet", || {
        let v = fleet(nodes[0].web)?;
        let all = v["nodes"]
            .as_array()
            .is_some_and(|n| n.len() == 3 && n.iter().all(full));
        if all { Ok(v) } else { Err(v.to_string()) }
    });
    assert_eq!(view["enabled"], true, "{view}");
    assert_eq!(view["observability"], true, "{view}");
    assert!(view["mesh_error"].is_null(), "{view}");
    let names: Vec<&str> = view["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["n1", "n2", "n3"]);
    assert_eq!(view["nodes"][1]["status"], "reachable", "{view}");
    // Display only: /cluster has no trace of the mesh.
    let cluster = http(nodes[0].web, "GET", "/cluster").unwrap().body;
    assert!(
        !cluster.contains("node_stats") && !cluster.contains("n2"),
        "{cluster}"
    );

    nodes[2].proc.signal(9);
    wait_for_state("no data for n3", || {
        let v = fleet(nodes[0].web)?;
        let n3 = &v["nodes"][2];
        if n3["status"] == "unreachable"
            && n3["jobs"].is_null()
            && n3["node_stats"].is_null()
            && n3["node_name"] == "n3"
            && full(&v["nodes"][1])
        {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
    nodes.truncate(2);
}

#[test]
fn gsp_113_filesystem_fleet_shows_every_node_through_the_observability_mesh() {
    let shared = tempfile::tempdir().unwrap();
    let backend = format!(
        "  backend: filesystem\n  filesystem:\n    path: {}\n    ttl: 3\n    topology: single-node\n",
        shared.path().display()
    );
    every_node_on_fleet_then_no_data_for_a_dead_one(&backend, 131);
}

#[test]
fn gsp_113_etcd_fleet_shows_every_node_through_the_observability_mesh() {
    let etcd = cronstable_tests::etcd::Etcd::start();
    let backend = format!(
        "  backend: etcd\n  etcd:\n    endpoints: [\"{}\"]\n    ttl: 3\n",
        etcd.endpoint()
    );
    every_node_on_fleet_then_no_data_for_a_dead_one(&backend, 132);
}

/// The `/cluster` fields an election or an operator acts on.
fn decision_fields(web: SocketAddr) -> Value {
    let c = http(web, "GET", "/cluster").unwrap().json();
    let mut kept = serde_json::Map::new();
    for key in [
        "enabled",
        "backend",
        "node_name",
        "cluster_size",
        "quorum",
        "quorate",
        "is_leader",
        "leader",
        "conflict_names",
        "size_conflict",
        "policy_conflict",
        "peers",
    ] {
        kept.insert(key.into(), c[key].clone());
    }
    kept.insert("holder".into(), c["lease"]["holder"].clone());
    Value::Object(kept)
}

/// A mesh peer that claims to be n1, in a cluster of 99, quorate and leading, with a job set
/// of its own: n1 and n2 show it on `/fleet` (display data is display data) and decide
/// nothing differently.
#[test]
fn gsp_111_113_a_conflicting_mesh_peer_changes_no_decision_and_no_cluster_field() {
    let dir = tempfile::tempdir().unwrap();
    let plan = ClusterPlan::new(2, 133);
    let files = ClusterFiles::write(dir.path(), &plan);
    let rogue_ip = "127.0.133.20";
    let rogue_port = free_port();
    let rogue_host = format!("{rogue_ip}:{rogue_port}");
    let shared = dir.path().join("store");
    std::fs::create_dir_all(&shared).unwrap();
    let backend = format!(
        "  backend: filesystem\n  filesystem:\n    path: {}\n    ttl: 3\n    topology: single-node\n",
        shared.display()
    );
    lease_mesh(&files, &backend, std::slice::from_ref(&rogue_host));
    let nodes: Vec<Coordinator> = (0..2).map(|i| files.start(i)).collect();
    let out = dir.path().join("ticks");
    let _shims: Vec<_> = nodes
        .iter()
        .zip(["n1", "n2"])
        .map(|(c, name)| tick_shim(dir.path(), c, name, &out))
        .collect();
    let webs = [nodes[0].web, nodes[1].web];
    // Settled before the rogue appears: one holder, its Leader job running.
    wait_for_state("a holder running the Leader job", || {
        let holders: Vec<Value> = webs
            .iter()
            .map(|w| decision_fields(*w)["holder"].clone())
            .collect();
        let ran = ticks(&out).len();
        if holders[0].is_string() && holders[0] == holders[1] && ran >= 2 {
            Ok(())
        } else {
            Err(format!("{holders:?}, {ran} ticks"))
        }
    });
    let before: Vec<Value> = webs.iter().map(|w| decision_fields(*w)).collect();

    // The rogue: a real /peer listener with a certificate from the mesh's CA.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tls_paths: TlsPaths = files
        .ca
        .write_node(&dir.path().join("rogue"), "rogue", &[rogue_ip])
        .unwrap();
    let tls = TlsMaterial::load(&tls_paths).unwrap();
    let local = LocalNode {
        name: "n1".into(),
        instance_id: "rogue".into(),
        job_set_id: "v1:0000000000000000".into(),
        configured_size: 99,
        elect_leader: true,
        distribution: Distribution::Spread,
        drift_after: 1,
        interval_ms: 1000,
    };
    let mut report = fresh_report(&local);
    report.quorate = true;
    report.leading = Some(vec!["n1".into(), "rogue".into()]);
    report.mutual_agreeing = vec!["n1".into(), "n2".into()];
    report.quorate_vouched = vec!["n1".into(), "rogue".into()];
    let body = ServedBody::encode(&report, &[]);
    let (_body_tx, body_rx) = tokio::sync::watch::channel(Arc::new(body));
    let (_tls_tx, tls_rx) = tokio::sync::watch::channel(tls.server.clone());
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(&rogue_host))
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let rogue = rt.spawn(server::serve(
        listener,
        PeerEndpoint {
            tls: tls_rx,
            body: body_rx,
            idle_timeout: std::time::Duration::from_secs(3),
            node_stats: None,
        },
        async move {
            let _ = stopped.await;
        },
    ));

    for web in webs {
        wait_for_state("the rogue on /fleet", || {
            let v = fleet(web)?;
            let row = v["nodes"]
                .as_array()
                .and_then(|n| n.iter().find(|n| n["host"] == rogue_host.as_str()).cloned())
                .unwrap_or_default();
            if row["status"] == "reachable" && row["node_name"] == "n1" {
                Ok(())
            } else {
                Err(v.to_string())
            }
        });
    }
    // A few more mesh rounds with the rogue in view, then the same decisions.
    let seen = ticks(&out).len();
    wait_for_state("three more Leader runs", || {
        let n = ticks(&out).len();
        if n >= seen + 3 {
            Ok(())
        } else {
            Err(format!("{n}"))
        }
    });
    let after: Vec<Value> = webs.iter().map(|w| decision_fields(*w)).collect();
    assert_eq!(after, before, "the mesh changed a /cluster field");
    assert!(doubled_ticks(&out).is_empty(), "{:?}", doubled_ticks(&out));
    let holder = before[0]["holder"].as_str().unwrap().to_owned();
    let late: Vec<String> = ticks(&out)
        .into_iter()
        .skip(seen)
        .flat_map(|(_, nodes)| nodes)
        .collect();
    assert!(
        late.iter().all(|n| *n == holder),
        "the Leader job left its holder {holder}: {late:?}"
    );
    let _ = stop.send(());
    let _ = rt.block_on(rogue);
}
