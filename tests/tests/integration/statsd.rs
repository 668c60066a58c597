//! `statsd:` against a real UDP listener: the per-job runs, durations and skips of real
//! processes arrive as statsd datagrams, one per firing, with no cluster series; a reload
//! moves them to another server.

use std::net::UdpSocket;
use std::path::Path;
use std::time::Duration;

use cronstable_tests::{Coordinator, http, start_shim, wait_for};

fn listener() -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    socket
}

/// Every datagram that arrives until the socket is quiet for its read timeout.
fn drain(socket: &UdpSocket, into: &mut Vec<String>) {
    let mut buf = [0u8; 65_536];
    while let Ok(n) = socket.recv(&mut buf) {
        into.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
}

fn crontab(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("crontab");
    std::fs::write(
        &path,
        "# cronstable: name=tick seconds=true\n* * * * * * true\n\
         # cronstable: name=broken seconds=true\n* * * * * * exit 3\n\
         # cronstable: name=slow concurrencyPolicy=Forbid seconds=true\n* * * * * * sleep 2.5\n",
    )
    .unwrap();
    path
}

fn metric(web: std::net::SocketAddr, series: &str) -> u64 {
    let body = http(web, "GET", "/metrics").unwrap().body;
    body.lines()
        .find(|l| l.starts_with(&format!("{series} ")))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn per_job_runs_durations_and_skips_reach_a_statsd_listener_one_datagram_per_firing() {
    let dir = tempfile::tempdir().unwrap();
    let udp = listener();
    let port = udp.local_addr().unwrap().port();
    let coordinator = Coordinator::start_extra(
        dir.path(),
        &format!("statsd:\n  host: 127.0.0.1\n  port: {port}\n"),
    );
    let mut shim = start_shim(&crontab(dir.path()), &coordinator.api, &[]);
    let mut got = Vec::new();
    wait_for("a success, a failure and a skip over statsd", || {
        drain(&udp, &mut got);
        let all = got.join("\n");
        (all.contains("cronstable.job.tick.runs.success:1|c")
            && all.contains("cronstable.job.broken.runs.failure:1|c")
            && all.contains("cronstable.job.slow.skips.concurrency_policy:1|c"))
        .then_some(())
    });
    shim.signal(15);
    shim.wait_exit();
    // The shim is gone: whatever it reported has been sent once the socket is quiet.
    drain(&udp, &mut got);

    for datagram in &got {
        for line in datagram.lines() {
            let (name, value) = line.split_once(':').unwrap_or_else(|| panic!("{line:?}"));
            assert!(name.starts_with("cronstable.job."), "{line:?}");
            assert!(!name.contains("cluster"), "no cluster series: {line:?}");
            assert!(
                value == "1|c" || (name.ends_with(".duration") && value.ends_with("|ms")),
                "{line:?}"
            );
        }
    }
    // One datagram per finished run, holding its result and its duration.
    let tick: Vec<&String> = got
        .iter()
        .filter(|d| d.starts_with("cronstable.job.tick.runs.success:"))
        .collect();
    for d in &tick {
        assert_eq!(d.lines().count(), 2, "{d:?}");
        assert!(
            d.lines()
                .nth(1)
                .unwrap()
                .starts_with("cronstable.job.tick.duration:")
        );
    }
    let runs = metric(
        coordinator.web,
        "cronstable_job_runs_total{job=\"tick\",result=\"success\"}",
    );
    assert!(runs >= 1);
    assert_eq!(
        tick.len() as u64,
        runs,
        "one datagram per successful run of tick"
    );
    let sent = metric(
        coordinator.web,
        "cronstable_statsd_datagrams_total{result=\"sent\"}",
    );
    assert_eq!(
        sent,
        got.len() as u64,
        "every datagram counted as sent arrived"
    );
    let bytes: usize = got.iter().map(String::len).sum();
    eprintln!(
        "statsd: {} datagrams, {} bytes, for {} finished runs and {} executor skips",
        got.len(),
        bytes,
        got.iter().filter(|d| d.contains(".runs.")).count(),
        got.iter().filter(|d| d.contains(".skips.")).count()
    );
}

#[test]
fn a_reload_moves_statsd_to_another_server_with_tags() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (listener(), listener());
    let port = |s: &UdpSocket| s.local_addr().unwrap().port();
    let coordinator =
        Coordinator::start_extra(dir.path(), &format!("statsd:\n  port: {}\n", port(&first)));
    let _shim = start_shim(&crontab(dir.path()), &coordinator.api, &[]);
    let mut at_first = Vec::new();
    wait_for("a datagram at the first server", || {
        drain(&first, &mut at_first);
        (!at_first.is_empty()).then_some(())
    });
    let config = std::fs::read_to_string(&coordinator.config).unwrap();
    let config = config.replace(
        &format!("statsd:\n  port: {}\n", port(&first)),
        &format!(
            "statsd:\n  port: {}\n  prefix: app\n  tags: true\n",
            port(&second)
        ),
    );
    std::fs::write(&coordinator.config, config).unwrap();
    coordinator.proc.signal(1);
    wait_for("the reload to apply statsd", || {
        coordinator
            .proc
            .log()
            .lines()
            .any(|l| {
                l.contains("config reloaded") && l.contains("changed=") && l.contains("statsd")
            })
            .then_some(())
    });
    let mut at_second = Vec::new();
    wait_for("tagged datagrams at the second server", || {
        drain(&second, &mut at_second);
        at_second
            .iter()
            .any(|d| d.starts_with("app.job.runs:1|c|#job:tick,result:success"))
            .then_some(())
    });
    // In-flight datagrams aside, nothing more goes to the first server.
    drain(&first, &mut at_first);
    let before = at_first.len();
    let mut more = Vec::new();
    wait_for("three more datagrams at the second server", || {
        drain(&second, &mut more);
        (more.len() >= 3).then_some(())
    });
    drain(&first, &mut at_first);
    assert_eq!(at_first.len(), before, "{:?}", &at_first[before..]);
}
