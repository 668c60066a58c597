//! `cluster.observability` on the gossip backend against real coordinators over real mTLS
//! (GSP-111, GSP-112): every node's CPU/memory reaches the other nodes' `GET /fleet` through
//! the `X-Cronstable-Node-Stats` header, and a node without the key neither sends nor reads it.
//! The lease backends' mesh is in `lease_observability.rs`.

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, fleet, full_stats, write_config};
use std::process::Command;

use cronstable_tests::{binary, http, wait_for_state};
use serde_json::Value;

#[test]
fn gsp_112_fleet_on_n1_shows_each_nodes_cpu_and_memory_and_no_data_for_a_dead_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(3, 74);
    plan.extra = "  observability: true\n".into();
    let files = ClusterFiles::write(dir.path(), &plan);
    let mut nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();

    // CPU needs two readings a round apart, so wait for the rate, not just the memory.
    let view = wait_for_state("every node's CPU/memory in n1's /fleet", || {
        let v = fleet(nodes[0].web)?;
        let all = v["nodes"]
            .as_array()
            .is_some_and(|n| n.len() == 3 && n.iter().all(full_stats));
        if all { Ok(v) } else { Err(v.to_string()) }
    });
    assert_eq!(view["enabled"], true);
    assert_eq!(view["observability"], true);
    let names: Vec<&str> = view["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["n1", "n2", "n3"]);
    // The stats are display-only: /cluster carries no trace of them.
    let cluster = http(nodes[0].web, "GET", "/cluster").unwrap().body;
    assert!(!cluster.contains("node_stats"), "{cluster}");

    // n3 dies: n1 has no stats for it rather than its last known ones.
    nodes[2].proc.signal(9);
    wait_for_state("no stats for n3", || {
        let v = fleet(nodes[0].web)?;
        let n3 = v["nodes"][2].clone();
        let n2_live = full_stats(&v["nodes"][1]);
        if n3["node_stats"].is_null() && n3["status"] == "unreachable" && n2_live {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
    nodes.truncate(2);
}

#[test]
fn gsp_112_without_observability_no_stats_are_sent_or_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(3, 72);
    plan.extra = "  observability: true\n".into();
    let files = ClusterFiles::write(dir.path(), &plan);
    // n1 runs without the key; n2 and n3 keep it and so send their header to n1 anyway.
    let n1 = &files.nodes[0];
    let peers: String = files.nodes[1..]
        .iter()
        .map(|p| format!("    - host: \"{}\"\n", p.peer_host()))
        .collect();
    let mut plain = plan.clone();
    plain.extra = String::new();
    write_config(n1, &peers, &plain);
    let nodes: Vec<_> = (0..3).map(|i| files.start(i)).collect();

    // n2 polls n1 successfully but gets no header from it: no data for n1, while its own and
    // n3's stats are there.
    let on_n2 = wait_for_state("n2 sees n1 reachable and n3's stats", || {
        let v = fleet(nodes[1].web)?;
        let n1 = &v["nodes"][1];
        if n1["node_name"] == "n1"
            && n1["status"] != "pending"
            && n1["status"] != "unreachable"
            && full_stats(&v["nodes"][0])
            && full_stats(&v["nodes"][2])
        {
            Ok(v)
        } else {
            Err(v.to_string())
        }
    });
    assert_eq!(on_n2["observability"], true);
    assert!(on_n2["nodes"][1]["node_stats"].is_null(), "{on_n2}");

    // n1 polls n2 and n3 fine but ignores the header they send: no stats anywhere.
    let on_n1 = wait_for_state("n1 sees n2 and n3 reachable", || {
        let v = fleet(nodes[0].web)?;
        let reachable = |n: &Value| n["status"] != "pending" && n["status"] != "unreachable";
        if reachable(&v["nodes"][1]) && reachable(&v["nodes"][2]) {
            Ok(v)
        } else {
            Err(v.to_string())
        }
    });
    assert_eq!(on_n1["observability"], false);
    for node in on_n1["nodes"].as_array().unwrap() {
        assert!(node.get("node_stats").is_none(), "{on_n1}");
    }
}

#[test]
fn gsp_113_a_lease_backend_observability_mesh_validates() {
    // The mesh runs now (tests in lease_observability.rs): validate-config accepts it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("coordinator.yaml");
    let text = format!(
        "cluster:\n  backend: filesystem\n  filesystem: {{path: {shared}}}\n  observability:\n    \
         listen: 127.0.0.1:9443\n    tls: {{ca: /ca.pem, cert: /o.pem, key: /o.key}}\n    \
         peers:\n      - host: 127.0.0.2:9443\n",
        shared = dir.path().display()
    );
    std::fs::write(&file, text).unwrap();
    let out = Command::new(binary("cronstable"))
        .arg("validate-config")
        .arg(&file)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "refused:\n{said}");
    assert!(!said.contains("not supported"), "{said}");
}
