//! Gossip under real network partitions: five coordinators, each in its own network namespace,
//! with the links between them cut and healed (issue 3; inventory GSP-50..56, GSP-120..123,
//! MN-*: no wedge after a heal, no restarts). Needs root (`ip netns`); fails loudly without.

use cronstable_tests::gossip::{ClusterFiles, ClusterPlan, cluster, write_config};
use cronstable_tests::netns::Lab;
use cronstable_tests::{Coordinator, binary, wait_for, wait_for_state};
use serde_json::Value;

struct Cluster {
    nodes: Vec<Coordinator>,
}

fn views(nodes: &[Coordinator]) -> Vec<Option<Value>> {
    nodes.iter().map(|n| cluster(n.web)).collect()
}

fn summary(vs: &[Option<Value>]) -> String {
    vs.iter()
        .map(|v| match v {
            Some(v) => format!(
                "{}: quorate={} leader={} is_leader={}",
                v["node_name"], v["quorate"], v["leader"], v["is_leader"]
            ),
            None => "down".into(),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Waits until each listed node reports its expected leader (`None`: not quorate, no leader)
/// and at most one node claims leadership.
fn settle(c: &Cluster, what: &str, expect: &[(usize, Option<&str>)]) {
    wait_for_state(what, || {
        let vs = views(&c.nodes);
        let ok = expect.iter().all(|(i, leader)| {
            vs[*i].as_ref().is_some_and(|v| match leader {
                Some(l) => v["quorate"] == true && v["leader"] == *l,
                None => v["quorate"] == false && v["leader"].is_null(),
            })
        });
        let claimants = vs
            .iter()
            .flatten()
            .filter(|v| v["is_leader"] == true)
            .count();
        if ok && claimants <= 1 {
            Ok(())
        } else {
            Err(summary(&vs))
        }
    });
}

fn all(leader: &str) -> Vec<(usize, Option<&str>)> {
    (0..5).map(|i| (i, Some(leader))).collect()
}

#[test]
fn gsp_120_majority_minority_isolated_leader_and_bridge_all_heal_without_restarts() {
    let lab = Lab::new(71, 5);
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(5, 0);
    plan.hosts = Some(lab.hosts.iter().map(|h| h.ip.clone()).collect());
    let files = ClusterFiles::write(dir.path(), &plan);
    let nodes = files
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut c = Coordinator::start_in(
                lab.command(i, &binary("cronstable")),
                n.config.clone(),
                n.api(),
                n.web(),
            );
            c.proc.name = format!("coordinator {}", n.name);
            c
        })
        .collect();
    // Declared after `lab`, so the processes stop before the namespaces go.
    let c = Cluster { nodes };
    settle(&c, "n1 elected on all five", &all("n1"));

    // Majority/minority: [n1 n2] | [n3 n4 n5]. The minority stands down, the majority elects
    // its lowest member.
    lab.split(&[0, 1], &[2, 3, 4]);
    settle(
        &c,
        "minority without a leader, majority led by n3",
        &[
            (0, None),
            (1, None),
            (2, Some("n3")),
            (3, Some("n3")),
            (4, Some("n3")),
        ],
    );
    lab.heal();
    // Leadership is sticky (rule 4a): n1 and n2 come back as followers of n3.
    settle(&c, "n3 keeps the lead after the heal", &all("n3"));

    // The leader alone is cut off: it stands down, the lowest of the rest (n1) takes over.
    lab.isolate(2);
    settle(
        &c,
        "isolated n3 stands down, n1 leads",
        &[
            (0, Some("n1")),
            (1, Some("n1")),
            (2, None),
            (3, Some("n1")),
            (4, Some("n1")),
        ],
    );
    lab.heal();
    settle(&c, "n1 keeps the lead, n3 follows", &all("n1"));

    // A bridge: n3 sees everyone; {n1 n2} and {n4 n5} do not see each other. Each side is a
    // majority with n3, so both are quorate; one-hop discovery through n3 lets {n4 n5} see that
    // n1 is a quorate candidate, so they defer to it and there is one leader, not two.
    lab.split(&[0, 1], &[3, 4]);
    wait_for("both sides of the bridge to notice the cut", || {
        let vs = views(&c.nodes);
        let unreachable = |v: &Option<Value>| {
            v.as_ref().map_or(0, |v| {
                v["peers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|p| p["status"] == "unreachable")
                    .count()
            })
        };
        (unreachable(&vs[0]) == 2 && unreachable(&vs[4]) == 2).then_some(())
    });
    settle(&c, "one leader across the bridge", &all("n1"));
    // Watch it for several rounds: never two claimants.
    for _ in 0..10 {
        let vs = views(&c.nodes);
        let claimants = vs
            .iter()
            .flatten()
            .filter(|v| v["is_leader"] == true)
            .count();
        assert!(
            claimants <= 1,
            "two leaders across the bridge: {}",
            summary(&vs)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    lab.heal();
    settle(&c, "whole again", &all("n1"));

    // Every node sees every peer again: nothing stays unreachable after the heal.
    wait_for("every peer agreed on every node", || {
        views(&c.nodes)
            .iter()
            .all(|v| {
                v.as_ref().is_some_and(|v| {
                    v["peers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|p| p["status"] == "agreed")
                })
            })
            .then_some(())
    });
}

#[test]
fn gsp_32_33_a_node_listing_its_own_routable_address_recognises_it_at_runtime() {
    let lab = Lab::new(72, 3);
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ClusterPlan::new(3, 0);
    plan.hosts = Some(lab.hosts.iter().map(|h| h.ip.clone()).collect());
    let files = ClusterFiles::write(dir.path(), &plan);
    // n1 also lists its own routable address: not provably local at load (it is not a loopback
    // address), so only the runtime instance_id check can recognise it.
    let n1 = &files.nodes[0];
    let peers: String = files
        .nodes
        .iter()
        .map(|n| format!("    - host: \"{}\"\n", n.peer_host()))
        .collect();
    write_config(n1, &peers, &plan);
    let nodes: Vec<_> = files
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            Coordinator::start_in(
                lab.command(i, &binary("cronstable")),
                n.config.clone(),
                n.api(),
                n.web(),
            )
        })
        .collect();
    let v = wait_for_state("n1 recognises itself and leads", || {
        let v = cluster(nodes[0].web).ok_or("no answer")?;
        let has_self = v["peers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["status"] == "self");
        if has_self && v["leader"] == "n1" && v["quorate"] == true {
            Ok(v)
        } else {
            Err(v.to_string())
        }
    });
    // N excludes the self entry, so it matches what n2 and n3 declare: no size conflict.
    assert_eq!(v["cluster_size"], 3, "{v}");
    assert_eq!(v["size_conflict"], false, "{v}");
    nodes[0].proc.wait_log("is this node itself");
    let logged = nodes[0].proc.log().matches("is this node itself").count();
    assert_eq!(logged, 1, "logged once (GSP-33)");
}
