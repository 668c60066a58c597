//! The `X-Cronstable-Node-Stats` header: a node's whole-machine CPU and memory, riding the
//! `/peer` response when `cluster.observability` is on (GSP-112).
//!
//! It travels in a header, not the body, so it refreshes on bodyless 304s without breaking
//! the body's ETag. The value is a small JSON object built from this node's `GET /node`
//! numbers. It is display-only (GSP-111): the poller parses it into [`PeerNodeStats`] for
//! `GET /fleet` and nothing else reads it. A value that is too long, not JSON, or carries
//! numbers outside their plausible range parses to `None` ("no data for that node"), never to
//! an error, so a hostile or buggy peer cannot disturb the view.

use http::HeaderValue;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The header's name.
pub const HEADER: &str = "x-cronstable-node-stats";

/// The longest value sent or accepted; anything longer is dropped unread.
pub const MAX_HEADER_BYTES: usize = 512;

/// The most CPUs a peer may claim before the value is treated as nonsense.
const MAX_CPUS: u64 = 1 << 16;

/// One node's CPU and memory, as gossiped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerNodeStats {
    /// Logical CPUs.
    pub cpus: u64,
    /// Whole-machine CPU use in percent; `None` before the node has two readings.
    pub cpu_percent: Option<f64>,
    /// Memory in use, in percent of the total.
    pub memory_used_percent: Option<f64>,
    /// Total memory in bytes.
    pub memory_total_bytes: Option<u64>,
    /// Available memory in bytes.
    pub memory_available_bytes: Option<u64>,
    /// When the node's coordinator process started, Unix seconds, for its uptime on the
    /// dashboard. Absent from older nodes' values; an older node reading a value that has it
    /// (unknown fields are refused) shows "no stats" for this node until it is upgraded too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_s: Option<i64>,
}

impl PeerNodeStats {
    /// This node's stats header as it is each time the returned function is called: CPU and
    /// memory from `/proc`, the CPU rate taken between two calls (so the first call has
    /// memory but no CPU figure yet).
    pub fn own_header() -> impl Fn() -> Option<HeaderValue> + Send {
        let own = crate::observe::host::NodeStats::new();
        move || Self::from_snapshot(&own.snapshot()).and_then(|s| s.to_header())
    }

    /// The gossiped subset of a `GET /node` snapshot (`NodeStats::snapshot`).
    pub fn from_snapshot(snapshot: &Value) -> Option<Self> {
        let stats = Self {
            cpus: snapshot.get("cpus")?.as_u64()?,
            cpu_percent: snapshot.get("cpu_percent").and_then(Value::as_f64),
            memory_used_percent: snapshot.get("memory_used_percent").and_then(Value::as_f64),
            memory_total_bytes: snapshot.get("memory_total_bytes").and_then(Value::as_u64),
            memory_available_bytes: snapshot
                .get("memory_available_bytes")
                .and_then(Value::as_u64),
            // The process start is this process's, not a reading: taken from /proc once.
            started_at_s: crate::observe::process::os_start_ms().map(|ms| ms / 1000),
        };
        stats.plausible().then_some(stats)
    }

    /// The header value, or `None` if it would not fit.
    pub fn to_header(&self) -> Option<HeaderValue> {
        let text = serde_json::to_string(self).ok()?;
        if text.len() > MAX_HEADER_BYTES {
            return None;
        }
        HeaderValue::from_str(&text).ok()
    }

    /// A received header value; `None` for anything oversized, malformed or implausible.
    pub fn from_header(value: &HeaderValue) -> Option<Self> {
        let bytes = value.as_bytes();
        if bytes.len() > MAX_HEADER_BYTES {
            return None;
        }
        let stats: Self = serde_json::from_slice(bytes).ok()?;
        stats.plausible().then_some(stats)
    }

    /// Percentages within 0..=100, a sane CPU count, available memory not above the total.
    fn plausible(&self) -> bool {
        let percent =
            |p: Option<f64>| p.is_none_or(|p| p.is_finite() && (0.0..=100.0).contains(&p));
        let memory = match (self.memory_total_bytes, self.memory_available_bytes) {
            (Some(total), Some(available)) => available <= total,
            _ => true,
        };
        (1..=MAX_CPUS).contains(&self.cpus)
            && self.started_at_s.is_none_or(|s| s > 0)
            && percent(self.cpu_percent)
            && percent(self.memory_used_percent)
            && memory
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PeerNodeStats {
        PeerNodeStats {
            cpus: 8,
            cpu_percent: Some(12.5),
            memory_used_percent: Some(40.0),
            memory_total_bytes: Some(16 << 30),
            memory_available_bytes: Some(9 << 30),
            started_at_s: crate::observe::process::os_start_ms().map(|ms| ms / 1000),
        }
    }

    #[test]
    fn gsp_112_round_trips_within_the_size_cap() {
        let header = sample().to_header().unwrap();
        assert!(header.len() <= MAX_HEADER_BYTES);
        assert_eq!(PeerNodeStats::from_header(&header), Some(sample()));
        let first = PeerNodeStats {
            cpu_percent: None,
            ..sample()
        };
        let header = first.to_header().unwrap();
        assert_eq!(PeerNodeStats::from_header(&header), Some(first));
        // An older node's value, without the start time, still reads.
        let older = HeaderValue::from_static(
            r#"{"cpus":2,"cpu_percent":5,"memory_used_percent":1,"memory_total_bytes":1,"memory_available_bytes":1}"#,
        );
        let read = PeerNodeStats::from_header(&older).expect("an older value");
        assert_eq!(read.started_at_s, None);
    }

    #[test]
    fn gsp_111_malformed_oversized_or_hostile_headers_give_none() {
        let long = format!(
            r#"{{"cpus":1,"cpu_percent":1.0,"memory_used_percent":1.0,"memory_total_bytes":1,"memory_available_bytes":1{}}}"#,
            " ".repeat(MAX_HEADER_BYTES)
        );
        for bad in [
            "",
            "not json",
            "[]",
            "{}",
            r#"{"cpus":0,"cpu_percent":1,"memory_used_percent":1,"memory_total_bytes":1,"memory_available_bytes":1}"#,
            r#"{"cpus":2,"cpu_percent":-5,"memory_used_percent":1,"memory_total_bytes":1,"memory_available_bytes":1}"#,
            r#"{"cpus":2,"cpu_percent":1e400,"memory_used_percent":1,"memory_total_bytes":1,"memory_available_bytes":1}"#,
            r#"{"cpus":2,"cpu_percent":5,"memory_used_percent":101,"memory_total_bytes":1,"memory_available_bytes":1}"#,
            r#"{"cpus":2,"cpu_percent":5,"memory_used_percent":1,"memory_total_bytes":1,"memory_available_bytes":2}"#,
            r#"{"cpus":2,"cpu_percent":"5","memory_used_percent":1,"memory_total_bytes":1,"memory_available_bytes":1}"#,
            r#"{"cpus":2,"cpu_percent":5,"memory_used_percent":1,"memory_total_bytes":1,"memory_available_bytes":1,"leader":"me"}"#,
            r#"{"cpus":2,"cpu_percent":5,"memory_used_percent":1,"memory_total_bytes":1,"memory_available_bytes":1,"started_at_s":-1}"#,
            r#"{"cpus":2,"cpu_percent":5,"memory_used_percent":1,"memory_total_bytes":1,"memory_available_bytes":1,"started_at_s":"x"}"#,
            long.as_str(),
        ] {
            let value = HeaderValue::from_str(bad).unwrap();
            assert_eq!(PeerNodeStats::from_header(&value), None, "{bad:?}");
        }
        // Not even valid UTF-8.
        let value = HeaderValue::from_bytes(b"{\"cpus\":\xff}").unwrap();
        assert_eq!(PeerNodeStats::from_header(&value), None);
    }

    #[test]
    fn takes_the_gossiped_subset_of_a_node_snapshot() {
        let snapshot = serde_json::json!({
            "cpus": 8, "cpu_percent": 12.5, "memory_total_bytes": 16u64 << 30,
            "memory_available_bytes": 9u64 << 30, "memory_used_percent": 40.0,
            "process": {"cpu_percent": 1.0, "rss_bytes": 1000}, "error": null,
        });
        assert_eq!(PeerNodeStats::from_snapshot(&snapshot), Some(sample()));
        let real = crate::observe::host::NodeStats::new().snapshot();
        let stats = PeerNodeStats::from_snapshot(&real).expect("this machine's numbers");
        assert!(stats.to_header().is_some());
    }
}
