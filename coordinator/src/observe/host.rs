//! This machine's CPU and memory, and the coordinator process's own share: what `GET /node`
//! serves and what a gossip node tells its peers with `cluster.observability`.
//!
//! Read from `/proc` (Linux). CPU use is a rate, so it needs two readings: each request
//! compares `/proc/stat` with the reading kept from an earlier request at least
//! [`MIN_SAMPLE`] before, so a burst of requests cannot turn it into noise over a few
//! microseconds. Where `/proc` is missing the fields are `null`, with the reason.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

/// The shortest interval a CPU rate is computed over.
const MIN_SAMPLE: Duration = Duration::from_millis(500);

/// CPU counters from `/proc/stat`'s `cpu` line, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CpuTicks {
    busy: u64,
    total: u64,
}

/// Node and process CPU use, in percent.
type Rates = (f64, f64);

/// One reading and when it was taken.
#[derive(Debug, Clone, Copy)]
struct Reading {
    at: Instant,
    node: CpuTicks,
    process: u64,
}

/// The state behind `/node`: the last readings, to compute rates against.
#[derive(Debug, Default)]
pub struct NodeStats {
    /// The reading rates are computed against, and the last rates computed.
    last: Mutex<Option<(Reading, Option<Rates>)>>,
}

impl NodeStats {
    /// No readings yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current numbers as JSON.
    pub fn snapshot(&self) -> Value {
        let stat = std::fs::read_to_string("/proc/stat");
        let meminfo = std::fs::read_to_string("/proc/meminfo");
        let own = std::fs::read_to_string("/proc/self/stat");
        let status = std::fs::read_to_string("/proc/self/status");
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let reading = match (&stat, &own) {
            (Ok(stat), Ok(own)) => {
                parse_cpu(stat)
                    .zip(parse_process_ticks(own))
                    .map(|(node, process)| Reading {
                        at: Instant::now(),
                        node,
                        process,
                    })
            }
            _ => None,
        };
        let (node_cpu, process_cpu) = reading.map_or((None, None), |r| self.rates(r));
        let mem = meminfo.as_deref().ok().map(parse_meminfo);
        let rss = status.as_deref().ok().and_then(parse_rss_bytes);
        let error = stat
            .err()
            .or(meminfo.err())
            .map(|e| format!("cannot read /proc: {e}"));
        json!({
            "cpus": cpus,
            "cpu_percent": node_cpu.map(round1),
            "memory_total_bytes": mem.and_then(|m| m.0),
            "memory_available_bytes": mem.and_then(|m| m.1),
            "memory_used_percent": mem.and_then(|(t, a)| Some(round1(100.0 * (t? - a?) as f64 / t? as f64))),
            "process": {
                "cpu_percent": process_cpu.map(round1),
                "rss_bytes": rss,
            },
            "error": error,
        })
    }

    /// Rates since the kept reading, which is replaced once it is [`MIN_SAMPLE`] old. The
    /// first request (nothing to compare with yet) answers `None`.
    fn rates(&self, now: Reading) -> (Option<f64>, Option<f64>) {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((base, cached)) = *last else {
            *last = Some((now, None));
            return (None, None);
        };
        if now.at.duration_since(base.at) < MIN_SAMPLE {
            return cached.map_or((None, None), |(n, p)| (Some(n), Some(p)));
        }
        let total = now.node.total.saturating_sub(base.node.total);
        let busy = now.node.busy.saturating_sub(base.node.busy);
        let node = if total == 0 {
            0.0
        } else {
            100.0 * busy as f64 / total as f64
        };
        // The process's ticks against all CPUs' ticks, scaled so one busy core is 100%.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let process = if total == 0 {
            0.0
        } else {
            100.0 * cpus * now.process.saturating_sub(base.process) as f64 / total as f64
        };
        *last = Some((now, Some((node, process))));
        (Some(node), Some(process))
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The aggregate `cpu` line: busy is everything but idle and iowait.
fn parse_cpu(stat: &str) -> Option<CpuTicks> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    Some(CpuTicks {
        busy: total.saturating_sub(idle),
        total,
    })
}

/// utime + stime of `/proc/self/stat` (fields 14 and 15, after the parenthesised name).
fn parse_process_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // after_name starts at field 3 (state), so utime (14) is index 11.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// MemTotal and MemAvailable, in bytes.
fn parse_meminfo(text: &str) -> (Option<u64>, Option<u64>) {
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    (field("MemTotal:"), field("MemAvailable:"))
}

fn parse_rss_bytes(status: &str) -> Option<u64> {
    crate::observe::process::status_bytes(status, "VmRSS:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_proc_formats() {
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n";
        assert_eq!(
            parse_cpu(stat),
            Some(CpuTicks {
                busy: 150,
                total: 1000
            })
        );
        let own = "42 (cron stable) S 1 2 3 4 5 6 7 8 9 10 17 5 0 0";
        assert_eq!(parse_process_ticks(own), Some(22));
        let mem = "MemTotal:       1000 kB\nMemFree: 1 kB\nMemAvailable:    250 kB\n";
        assert_eq!(parse_meminfo(mem), (Some(1_024_000), Some(256_000)));
        assert_eq!(parse_rss_bytes("Name: x\nVmRSS:\t  10 kB\n"), Some(10_240));
    }

    #[test]
    fn reads_this_machine() {
        let stats = NodeStats::new();
        let first = stats.snapshot();
        assert!(first["memory_total_bytes"].as_u64().unwrap() > 0, "{first}");
        assert!(
            first["process"]["rss_bytes"].as_u64().unwrap() > 0,
            "{first}"
        );
        assert!(first["cpu_percent"].is_null(), "no rate from one reading");
    }
}
