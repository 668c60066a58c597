//! The gossip transport over real sockets and real mTLS (GSP-01..11): a `/peer` listener from
//! `gossip::server` and a `gossip::poller::Poller`, with certificates from a throwaway CA.
//! Hosts are distinct loopback addresses (127.0.0.0/8 all reach `lo`), so SAN pinning is real.

use std::sync::Arc;
use std::time::Duration;

use crate::peer_harness::{TIMEOUT, client, report, serve};

use bytes::Bytes;
use cronstable_coordinator::config::address::HostPort;
use cronstable_coordinator::config::cluster::TlsPaths;
use cronstable_coordinator::gossip::certgen::TestCa;
use cronstable_coordinator::gossip::poller::{ClientTls, Poller};
use cronstable_coordinator::gossip::wire::{JobSummary, LastRun, ServedBody};
use cronstable_core::gossip::PollOutcome;
use rustls::pki_types::pem::PemObject;
use tokio::net::TcpListener;

fn unreachable_error(o: &PollOutcome) -> &str {
    match o {
        PollOutcome::Unreachable { error } => error,
        other => panic!("expected unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn gsp_10_11_a_poll_reads_the_report_then_gets_304s_over_one_connection() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let a = ca
        .write_node(&dir.path().join("a"), "a", &["127.0.0.21"])
        .unwrap();
    let b = ca
        .write_node(&dir.path().join("b"), "b", &["127.0.0.22"])
        .unwrap();
    let job = JobSummary {
        name: "backup".into(),
        cluster_policy: "Leader".into(),
        schedule: "0 3 * * *".into(),
        running: true,
        next_fire: Some("2026-12-04T03:00:00Z".into()),
        last_run: Some(LastRun {
            finished_at: "2026-12-03T03:00:04Z".into(),
            exit_code: Some(0),
            succeeded: true,
            duration_ms: 4000,
        }),
        last_run_scheduled_at_ms: Some(1_764_730_800_000),
        recent_runs: Vec::new(),
    };
    let served = serve(
        "127.0.0.22",
        &b,
        ServedBody::encode(&report("b"), std::slice::from_ref(&job)),
        false,
    )
    .await;
    let tls = client(&a);
    let mut poller = Poller::new(served.host.clone());

    let first = poller.poll(&tls, TIMEOUT).await;
    let PollOutcome::Report(r) = &first.outcome else {
        panic!("{:?}", first.outcome)
    };
    assert_eq!(r.node_name, "b");
    assert_eq!(first.jobs.as_deref().map(Vec::as_slice), Some(&[job][..]));
    for _ in 0..3 {
        let again = poller.poll(&tls, TIMEOUT).await;
        assert_eq!(again.outcome, first.outcome);
    }
    assert_eq!(poller.stats.connects, 1, "the connection is kept alive");
    assert_eq!(poller.stats.full_bodies, 1);
    assert_eq!(poller.stats.not_modified, 3, "unchanged body answered 304");

    served
        .body
        .send_replace(Arc::new(ServedBody::encode(&report("b2"), &[])));
    let PollOutcome::Report(r) = poller.poll(&tls, TIMEOUT).await.outcome else {
        panic!("expected a report")
    };
    assert_eq!(r.node_name, "b2", "a changed body is fetched in full");
    assert_eq!(poller.stats.full_bodies, 2);
}

#[tokio::test]
async fn gsp_01_a_certificate_for_another_host_is_untrusted() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let a = ca
        .write_node(&dir.path().join("a"), "a", &["127.0.0.23"])
        .unwrap();
    // b's certificate names a different address than the one it is reached at.
    let b = ca
        .write_node(&dir.path().join("b"), "b", &["127.0.0.99"])
        .unwrap();
    let served = serve(
        "127.0.0.24",
        &b,
        ServedBody::encode(&report("b"), &[]),
        false,
    )
    .await;
    let out = Poller::new(served.host).poll(&client(&a), TIMEOUT).await;
    let PollOutcome::Untrusted { error } = &out.outcome else {
        panic!("{:?}", out.outcome)
    };
    assert!(error.contains("TLS with 127.0.0.24"), "{error}");
}

#[tokio::test]
async fn gsp_01_a_peer_from_another_ca_is_untrusted_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let ours = TestCa::new("ours");
    let theirs = TestCa::new("theirs");
    let a = ours
        .write_node(&dir.path().join("a"), "a", &["127.0.0.25"])
        .unwrap();
    let x = theirs
        .write_node(&dir.path().join("x"), "x", &["127.0.0.26"])
        .unwrap();

    // We poll an outsider: its certificate does not chain to our CA.
    let outsider = serve(
        "127.0.0.26",
        &x,
        ServedBody::encode(&report("x"), &[]),
        false,
    )
    .await;
    let out = Poller::new(outsider.host).poll(&client(&a), TIMEOUT).await;
    assert!(
        matches!(out.outcome, PollOutcome::Untrusted { .. }),
        "{:?}",
        out.outcome
    );

    // An outsider polls us: our listener refuses its client certificate. The outsider trusts
    // our CA here, so only the client-certificate check can refuse it.
    let x_trusting_us = TlsPaths {
        ca: a.ca.clone(),
        ..x.clone()
    };
    let member = serve(
        "127.0.0.25",
        &a,
        ServedBody::encode(&report("a"), &[]),
        false,
    )
    .await;
    let out = Poller::new(member.host)
        .poll(&client(&x_trusting_us), TIMEOUT)
        .await;
    assert!(
        matches!(out.outcome, PollOutcome::Untrusted { .. }),
        "{:?}",
        out.outcome
    );
}

#[tokio::test]
async fn gsp_12_a_closed_port_is_unreachable_with_the_seed_wording() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let a = ca
        .write_node(&dir.path().join("a"), "a", &["127.0.0.27"])
        .unwrap();
    // Bind then drop: the port is very likely closed for the moment of the test.
    let port = TcpListener::bind(("127.0.0.28", 0))
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Poller::new(HostPort::new("127.0.0.28", port))
        .poll(&client(&a), TIMEOUT)
        .await;
    let error = unreachable_error(&out.outcome);
    assert!(
        error.starts_with("Cannot connect to host 127.0.0.28:"),
        "{error}"
    );
}

#[tokio::test]
async fn a_peer_that_never_answers_costs_one_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let a = ca
        .write_node(&dir.path().join("a"), "a", &["127.0.0.29"])
        .unwrap();
    // Accepts TCP and then says nothing: the handshake never completes.
    let silent = TcpListener::bind(("127.0.0.30", 0)).await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let _held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((c, _)) = silent.accept().await {
            conns.push(c);
        }
    });
    let out = Poller::new(HostPort::new("127.0.0.30", port))
        .poll(&client(&a), Duration::from_millis(300))
        .await;
    assert!(unreachable_error(&out.outcome).contains("no answer within 300 ms"));
}

#[tokio::test]
async fn gsp_07_08_oversize_and_malformed_bodies_are_no_data_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let a = ca
        .write_node(&dir.path().join("a"), "a", &["127.0.0.31"])
        .unwrap();
    let b = ca
        .write_node(&dir.path().join("b"), "b", &["127.0.0.32"])
        .unwrap();
    let huge = ServedBody {
        bytes: Bytes::from(vec![b'x'; 2 * 1024 * 1024]),
        etag: "\"huge\"".into(),
    };
    let served = serve("127.0.0.32", &b, huge, false).await;
    let tls = client(&a);
    let mut poller = Poller::new(served.host.clone());
    let out = poller.poll(&tls, TIMEOUT).await;
    assert!(unreachable_error(&out.outcome).contains("gossip limit"));

    let mut long_name = report("b");
    long_name.node_name = "n".repeat(300);
    for body in [
        ServedBody {
            bytes: Bytes::from_static(b"{\"node_name\": [1, 2]}"),
            etag: "\"bad\"".into(),
        },
        ServedBody::encode(&long_name, &[]),
    ] {
        served.body.send_replace(Arc::new(body));
        let out = poller.poll(&tls, TIMEOUT).await;
        assert!(
            unreachable_error(&out.outcome).contains("/peer"),
            "{:?}",
            out.outcome
        );
    }

    // The same peer recovers as soon as it serves a good body again.
    served
        .body
        .send_replace(Arc::new(ServedBody::encode(&report("b"), &[])));
    assert!(matches!(
        poller.poll(&tls, TIMEOUT).await.outcome,
        PollOutcome::Report(_)
    ));
}

/// Sends one request over a fresh mTLS connection and returns the status.
async fn raw_status(host: &HostPort, tls: &ClientTls, method: &str, path: &str) -> u16 {
    use http_body_util::Empty;
    let tcp = tokio::net::TcpStream::connect(host.to_socket_addr_string())
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from(host.host.clone()).unwrap();
    let stream = tokio_rustls::TlsConnector::from(tls.config.clone())
        .connect(name, tcp)
        .await
        .unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, host.to_string())
        .body(Empty::<Bytes>::new())
        .unwrap();
    sender.send_request(req).await.unwrap().status().as_u16()
}

#[tokio::test]
async fn gsp_05_the_cluster_listener_serves_get_peer_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let a = ca
        .write_node(&dir.path().join("a"), "a", &["127.0.0.33"])
        .unwrap();
    let b = ca
        .write_node(&dir.path().join("b"), "b", &["127.0.0.34"])
        .unwrap();
    let served = serve(
        "127.0.0.34",
        &b,
        ServedBody::encode(&report("b"), &[]),
        false,
    )
    .await;
    let tls = client(&a);
    assert_eq!(raw_status(&served.host, &tls, "GET", "/peer").await, 200);
    assert_eq!(raw_status(&served.host, &tls, "GET", "/cluster").await, 404);
    assert_eq!(raw_status(&served.host, &tls, "GET", "/").await, 404);
    assert_eq!(raw_status(&served.host, &tls, "POST", "/peer").await, 405);
}

#[tokio::test]
async fn gsp_01_a_client_without_a_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let b = ca
        .write_node(&dir.path().join("b"), "b", &["127.0.0.36"])
        .unwrap();
    let served = serve(
        "127.0.0.36",
        &b,
        ServedBody::encode(&report("b"), &[]),
        false,
    )
    .await;
    // Trusts the right CA but presents no client certificate.
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(&b.ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let anonymous = ClientTls {
        config: Arc::new(config),
        generation: 0,
    };
    let out = Poller::new(served.host).poll(&anonymous, TIMEOUT).await;
    let PollOutcome::Untrusted { error } = &out.outcome else {
        panic!("{:?}", out.outcome)
    };
    assert!(error.contains("TLS with 127.0.0.36"), "{error}");
}

/// A kept-alive connection the peer closes just as the next poll goes out (its idle timer and
/// our round tick firing together: both processes stopped for a while, then resumed) is not
/// the peer being unreachable: the poll goes out once more on a new connection. Before this,
/// every coordinator of a frozen majority found every peer unreachable at the thaw, lost
/// quorum and spent three rounds re-forming it. The peer here answers the first request on
/// each connection and drops the connection when a second one arrives.
#[tokio::test]
async fn a_kept_alive_connection_closed_under_the_poll_is_retried_on_a_new_one() {
    use hyper::server::conn::http1;
    use hyper_util::rt::TokioIo;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let a = ca
        .write_node(&dir.path().join("a"), "a", &["127.0.0.37"])
        .unwrap();
    let b = ca
        .write_node(&dir.path().join("b"), "b", &["127.0.0.38"])
        .unwrap();
    let server = cronstable_coordinator::gossip::tls::TlsMaterial::load(&b)
        .unwrap()
        .server;
    let body = ServedBody::encode(&report("b"), &[]);
    let listener = TcpListener::bind(("127.0.0.38", 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let accepted = connections.clone();
    let serving = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            accepted.fetch_add(1, Ordering::SeqCst);
            let tls = tokio_rustls::TlsAcceptor::from(server.clone());
            let body = body.clone();
            tokio::spawn(async move {
                let Ok(stream) = tls.accept(tcp).await else {
                    return;
                };
                let answered = Arc::new(AtomicUsize::new(0));
                let service = hyper::service::service_fn(move |_req| {
                    let n = answered.fetch_add(1, Ordering::SeqCst);
                    let bytes = body.bytes.clone();
                    async move {
                        if n == 0 {
                            Ok(http::Response::new(http_body_util::Full::new(bytes)))
                        } else {
                            Err("closing as the request arrived")
                        }
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    let tls = client(&a);
    let mut poller = Poller::new(HostPort::new("127.0.0.38", port));
    for round in 0..3 {
        let out = poller.poll(&tls, TIMEOUT).await;
        assert!(
            matches!(out.outcome, PollOutcome::Report(_)),
            "poll {round}: {:?}",
            out.outcome
        );
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        3,
        "one new connection per poll"
    );
    assert_eq!(
        poller.stats.retried, 2,
        "each poll after the first was sent twice"
    );
    serving.abort();
}

/// A peer that stops (its process exits and its sockets close) wakes the poller's close
/// notification at once, long before the next poll, so the manager can look again instead of
/// waiting out the interval (a crashed leader's failover).
#[tokio::test]
async fn a_peer_that_stops_wakes_the_close_notification() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let a = ca
        .write_node(&dir.path().join("a"), "a", &["127.0.0.39"])
        .unwrap();
    let b = ca
        .write_node(&dir.path().join("b"), "b", &["127.0.0.40"])
        .unwrap();
    let served = serve(
        "127.0.0.40",
        &b,
        ServedBody::encode(&report("b"), &[]),
        false,
    )
    .await;
    let closed = Arc::new(tokio::sync::Notify::new());
    let mut poller = Poller::new(served.host.clone()).notify_on_close(closed.clone());
    let out = poller.poll(&client(&a), TIMEOUT).await;
    assert!(matches!(out.outcome, PollOutcome::Report(_)));
    // Nothing closed yet: no wake-up.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), closed.notified())
            .await
            .is_err()
    );
    drop(served);
    tokio::time::timeout(TIMEOUT, closed.notified())
        .await
        .expect("the close woke the notification");
    // A connection the poller drops itself wakes nobody.
    drop(poller);
    assert!(
        tokio::time::timeout(Duration::from_millis(200), closed.notified())
            .await
            .is_err()
    );
}
