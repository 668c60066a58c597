//! `X-Cronstable-Node-Stats` over a real `/peer` listener and real mTLS (GSP-111, GSP-112):
//! the header rides both full 200s and bodyless 304s, a poller only reads it when told to
//! (observability on), and a hostile value reaches the poll result as "no data".

use crate::peer_harness::{TIMEOUT, client, report, serve};

use cronstable_coordinator::gossip::certgen::TestCa;
use cronstable_coordinator::gossip::node_stats::PeerNodeStats;
use cronstable_coordinator::gossip::poller::Poller;
use cronstable_coordinator::gossip::wire::ServedBody;
use cronstable_core::gossip::PollOutcome;
use http::HeaderValue;

fn stats(cpu: f64) -> PeerNodeStats {
    PeerNodeStats {
        cpus: 4,
        cpu_percent: Some(cpu),
        memory_used_percent: Some(50.0),
        memory_total_bytes: Some(8 << 30),
        memory_available_bytes: Some(4 << 30),
        started_at_s: Some(1_700_000_000),
    }
}

#[tokio::test]
async fn gsp_112_node_stats_ride_200s_and_304s_and_bad_values_are_no_data() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let a = ca
        .write_node(&dir.path().join("a"), "a", &["127.0.0.41"])
        .unwrap();
    let b = ca
        .write_node(&dir.path().join("b"), "b", &["127.0.0.42"])
        .unwrap();
    let served = serve(
        "127.0.0.42",
        &b,
        ServedBody::encode(&report("b"), &[]),
        true,
    )
    .await;
    served.stats.send_replace(stats(10.0).to_header());
    let tls = client(&a);
    let mut poller = Poller::new(served.host.clone()).reading_node_stats(true);

    let first = poller.poll(&tls, TIMEOUT).await;
    assert!(matches!(first.outcome, PollOutcome::Report(_)));
    assert_eq!(first.node_stats, Some(stats(10.0)));
    assert_eq!(poller.stats.full_bodies, 1);

    // The body is unchanged, so the next answer is a bodyless 304, yet it carries the new stats.
    served.stats.send_replace(stats(55.5).to_header());
    let second = poller.poll(&tls, TIMEOUT).await;
    assert_eq!(poller.stats.not_modified, 1, "the second answer is a 304");
    assert_eq!(second.node_stats, Some(stats(55.5)));

    // Hostile values degrade to "no data" while the poll itself stays a good report.
    for bad in [
        "garbage",
        r#"{"cpus":4,"cpu_percent":900,"memory_used_percent":1,"memory_total_bytes":1,"memory_available_bytes":1}"#,
        &"x".repeat(2000),
    ] {
        served
            .stats
            .send_replace(Some(HeaderValue::from_str(bad).unwrap()));
        let out = poller.poll(&tls, TIMEOUT).await;
        assert!(matches!(out.outcome, PollOutcome::Report(_)), "{bad}");
        assert_eq!(out.node_stats, None, "{bad}");
    }

    // A poller without observability ignores a header the peer sends anyway.
    served.stats.send_replace(stats(20.0).to_header());
    let mut unasked = Poller::new(served.host.clone());
    let out = unasked.poll(&tls, TIMEOUT).await;
    assert!(matches!(out.outcome, PollOutcome::Report(_)));
    assert_eq!(out.node_stats, None);
}
