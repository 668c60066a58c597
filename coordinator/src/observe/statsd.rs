//! `statsd:`: the per-job figures of [`crate::observe::metrics`] (runs by result, run
//! durations, skips by reason), also sent as statsd datagrams over UDP.
//!
//! One ledger record makes at most one datagram, so a firing costs one datagram however it
//! ends: a finished run sends its result counter and its duration timer together
//! (newline-separated, as statsd servers and the DogStatsD agent read them), a skip its
//! counter. Decisions to run and starts send nothing: the run's end says it ran.
//!
//! Names, plain (`tags: false`), with the job and result in the name:
//!
//! ```text
//! cronstable.job.backup.runs.success:1|c
//! cronstable.job.backup.duration:1532|ms
//! cronstable.job.backup.skips.no_quorum:1|c
//! ```
//!
//! DogStatsD (`tags: true`): `cronstable.job.runs:1|c|#job:backup,result:success`,
//! `cronstable.job.duration:1532|ms|#job:backup`, `cronstable.job.skips:1|c|#job:backup,reason:no_quorum`.
//!
//! The cluster series are not sent: they stay on `GET /metrics` (the seed: "the statsd
//! integration is still per-job").
//!
//! Sending never holds up a decision: records go on a bounded queue to one task that sends
//! them; a full queue drops the datagram. The host is resolved at start and again every
//! minute and after a failed send (a statsd server that moves is found again without a
//! restart); a host that does not resolve is tried again 5 s later, its datagrams counted as
//! failed meanwhile, so a DNS outage costs no lookup per firing. Every datagram is counted in `cronstable_statsd_datagrams_total{result}` (`sent`,
//! `failed`, `dropped`), and one WARN line is logged when sending starts failing, one INFO
//! line when it works again.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use crate::config::StatsdConfig;
use crate::ledger::{Event, Record};
use crate::observe::metrics::Metrics;

/// Datagrams waiting to be sent; past this a datagram is dropped (and counted).
const QUEUE: usize = 1024;

/// How often the host is resolved again while sends succeed.
const RESOLVE_EVERY: Duration = Duration::from_secs(60);

/// After a failed resolution or bind, how long datagrams are dropped before the next try (a
/// DNS outage must not cost one slow lookup per firing).
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The running sender. Cheap to clone; the task ends when the last clone is dropped (a
/// reload that changes or removes `statsd:` replaces it).
#[derive(Debug, Clone)]
pub struct Statsd {
    config: StatsdConfig,
    tx: mpsc::Sender<String>,
    metrics: Metrics,
}

impl Statsd {
    /// Starts the sending task for `config`. Call within a Tokio runtime.
    pub fn start(config: StatsdConfig, metrics: Metrics) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        tracing::info!(
            host = config.host,
            port = config.port,
            prefix = config.prefix,
            tags = config.tags,
            "sending per-job figures to statsd"
        );
        crate::spawn(send_loop(config.clone(), rx, metrics.clone()));
        Self {
            config,
            tx,
            metrics,
        }
    }

    /// Queues the datagram for `record`, if it makes one.
    pub fn observe(&self, record: &Record) {
        let Some(datagram) = datagram(&self.config, record) else {
            return;
        };
        if self.tx.try_send(datagram).is_err() {
            self.metrics.statsd_datagram("dropped");
        }
    }
}

/// The datagram one ledger record makes (`None`: it makes none).
pub fn datagram(config: &StatsdConfig, record: &Record) -> Option<String> {
    let job = record.job.as_str();
    let lines = match &record.event {
        Event::Decided { verdict, reason } if *verdict == cronstable_core::Verdict::Skip => {
            vec![counter(config, job, "skips", "reason", reason.code())]
        }
        Event::Skipped { reason, .. } => {
            let code = reason.map_or("unknown", |r| r.code());
            vec![counter(config, job, "skips", "reason", code)]
        }
        Event::Finished(end) => vec![
            counter(config, job, "runs", "result", end.result()),
            timer(config, job, end.duration_ms),
        ],
        Event::Decided { .. } | Event::Started { .. } | Event::HandedOff { .. } => return None,
    };
    Some(lines.join("\n"))
}

fn name(config: &StatsdConfig, parts: &[&str]) -> String {
    let mut out = config.prefix.clone();
    for part in parts {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(part);
    }
    out
}

fn counter(config: &StatsdConfig, job: &str, what: &str, key: &str, value: &str) -> String {
    if config.tags {
        format!(
            "{}:1|c|#job:{},{key}:{}",
            name(config, &["job", what]),
            tag(job),
            tag(value)
        )
    } else {
        format!(
            "{}:1|c",
            name(config, &["job", &segment(job), what, &segment(value)])
        )
    }
}

fn timer(config: &StatsdConfig, job: &str, ms: u64) -> String {
    if config.tags {
        format!(
            "{}:{ms}|ms|#job:{}",
            name(config, &["job", "duration"]),
            tag(job)
        )
    } else {
        format!(
            "{}:{ms}|ms",
            name(config, &["job", &segment(job), "duration"])
        )
    }
}

/// A job name as one segment of a metric name: anything but letters, digits, `_` and `-`
/// (a `.` would add a level, `:` `|` `@` `#` and newlines would end the name) becomes `_`.
fn segment(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A tag value: DogStatsD reads `,` `|` `#` and newlines as separators, so they become `_`.
fn tag(s: &str) -> String {
    s.chars()
        .map(|c| {
            if matches!(c, ',' | '|' | '#' | '\n' | '\r' | ' ') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// Sends queued datagrams until every [`Statsd`] clone is gone.
async fn send_loop(config: StatsdConfig, mut rx: mpsc::Receiver<String>, metrics: Metrics) {
    let mut target: Option<(SocketAddr, UdpSocket, tokio::time::Instant)> = None;
    let mut failing = false;
    let mut next_try = tokio::time::Instant::now();
    while let Some(datagram) = rx.recv().await {
        if target
            .as_ref()
            .is_some_and(|(_, _, at)| at.elapsed() >= RESOLVE_EVERY)
        {
            target = None;
        }
        if target.is_none() && tokio::time::Instant::now() >= next_try {
            target = connect(&config)
                .await
                .map_err(|e| fail(&mut failing, &e))
                .ok();
            if target.is_none() {
                next_try = tokio::time::Instant::now() + RETRY_AFTER;
            }
        }
        let Some((addr, socket, _)) = &target else {
            metrics.statsd_datagram("failed");
            continue;
        };
        match socket.send_to(datagram.as_bytes(), *addr).await {
            Ok(_) => {
                metrics.statsd_datagram("sent");
                if failing {
                    failing = false;
                    tracing::info!(
                        host = config.host,
                        port = config.port,
                        "statsd: sending again"
                    );
                }
            }
            Err(e) => {
                metrics.statsd_datagram("failed");
                fail(&mut failing, &format!("sending to {addr}: {e}"));
                // Resolve again: the server may have moved.
                target = None;
            }
        }
    }
}

fn fail(failing: &mut bool, error: &dyn std::fmt::Display) {
    if !*failing {
        *failing = true;
        tracing::warn!(
            error = %error,
            "statsd: datagrams cannot be sent; they are dropped (counted in \
             cronstable_statsd_datagrams_total) until it works again"
        );
    }
}

/// Resolves the host and binds a socket of the same family.
async fn connect(
    config: &StatsdConfig,
) -> Result<(SocketAddr, UdpSocket, tokio::time::Instant), String> {
    let addr = tokio::net::lookup_host((config.host.as_str(), config.port))
        .await
        .map_err(|e| format!("cannot resolve {}: {e}", config.host))?
        .next()
        .ok_or_else(|| format!("{} resolves to no address", config.host))?;
    let local: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0".parse().expect("an address")
    } else {
        "[::]:0".parse().expect("an address")
    };
    let socket = UdpSocket::bind(local)
        .await
        .map_err(|e| format!("cannot bind a UDP socket: {e}"))?;
    Ok((addr, socket, tokio::time::Instant::now()))
}

#[cfg(test)]
mod tests {
    use cronstable_core::{FiringKind, Reason, Verdict};

    use crate::ledger::RunEnd;

    use super::*;

    fn config(tags: bool) -> StatsdConfig {
        StatsdConfig {
            host: "127.0.0.1".into(),
            port: 8125,
            prefix: "cronstable".into(),
            tags,
        }
    }

    fn record(job: &str, event: Event) -> Record {
        Record {
            job: job.into(),
            scheduled_at_ms: 0,
            kind: FiringKind::Scheduled,
            attempt: 1,
            node: "n1".into(),
            recorded_at_ms: 0,
            event,
        }
    }

    fn finished(exit_code: Option<i32>, signal: Option<i32>, timed_out: bool) -> Event {
        Event::Finished(RunEnd {
            started_at_ms: 0,
            finished_at_ms: 1532,
            duration_ms: 1532,
            exit_code,
            signal,
            timed_out,
            output_tail: String::new(),
        })
    }

    #[test]
    fn a_finished_run_is_one_datagram_with_its_result_and_duration() {
        let r = record("backup", finished(Some(0), None, false));
        assert_eq!(
            datagram(&config(false), &r).unwrap(),
            "cronstable.job.backup.runs.success:1|c\ncronstable.job.backup.duration:1532|ms"
        );
        assert_eq!(
            datagram(&config(true), &r).unwrap(),
            "cronstable.job.runs:1|c|#job:backup,result:success\n\
             cronstable.job.duration:1532|ms|#job:backup"
        );
        for (event, result) in [
            (finished(Some(3), None, false), "failure"),
            (finished(None, Some(9), false), "signal"),
            (finished(None, Some(9), true), "timeout"),
        ] {
            let d = datagram(&config(false), &record("j", event)).unwrap();
            assert!(
                d.starts_with(&format!("cronstable.job.j.runs.{result}:1|c\n")),
                "{d}"
            );
        }
    }

    #[test]
    fn skips_by_the_gate_or_the_executor_count_by_reason() {
        let gate = record(
            "backup",
            Event::Decided {
                verdict: Verdict::Skip,
                reason: Reason::NoQuorum,
            },
        );
        assert_eq!(
            datagram(&config(false), &gate).unwrap(),
            "cronstable.job.backup.skips.no_quorum:1|c"
        );
        let executor = record(
            "backup",
            Event::Skipped {
                reason: Some(Reason::TooLate),
                message: String::new(),
            },
        );
        assert_eq!(
            datagram(&config(true), &executor).unwrap(),
            "cronstable.job.skips:1|c|#job:backup,reason:too_late"
        );
    }

    #[test]
    fn a_decision_to_run_and_a_start_send_nothing() {
        let run = record(
            "backup",
            Event::Decided {
                verdict: Verdict::Run,
                reason: Reason::Leader,
            },
        );
        assert_eq!(datagram(&config(false), &run), None);
        let started = record("backup", Event::Started { at_ms: 0, pid: 1 });
        assert_eq!(datagram(&config(false), &started), None);
    }

    #[test]
    fn a_job_name_cannot_break_the_line_format() {
        let r = record("a.b:c|d@e#f g\nh", finished(Some(0), None, false));
        let plain = datagram(&config(false), &r).unwrap();
        assert_eq!(plain.lines().count(), 2, "{plain}");
        assert!(
            plain.starts_with("cronstable.job.a_b_c_d_e_f_g_h.runs.success:1|c"),
            "{plain}"
        );
        let tagged = datagram(&config(true), &r).unwrap();
        assert_eq!(tagged.lines().count(), 2, "{tagged}");
        assert!(tagged.contains("#job:a.b:c_d@e_f_g_h,"), "{tagged}");
        // No prefix: no leading dot.
        let bare = StatsdConfig {
            prefix: String::new(),
            ..config(false)
        };
        assert!(datagram(&bare, &r).unwrap().starts_with("job."));
    }
}
