//! This coordinator process over time: when it started, an instance id new at every start,
//! and how often this node's coordinator started before (seed 003: "monitor uptime to catch
//! restart loops").
//!
//! A crash loop looks healthy between two crashes: every field an operator reads on
//! `/cluster` is fresh again a second after each start. The start time and instance id say a
//! process is new; the restart count, kept in `state.path` beside the run ledger, says how
//! many came before it, so a loop shows as a number that climbs. Without `state.path` nothing
//! outlives the process and the count is `null`.
//!
//! The counter is one decimal number in `<state.path>/starts-<node>` (the node name made safe
//! for a file name, as the ledger's is), replaced atomically (written to a temporary file,
//! synced, then renamed) at every start. A file that cannot be read as a number is kept aside
//! as `starts-<node>.corrupt-<unix ms>` (never overwritten) and the count starts again.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// What this process says about itself on `/cluster`, `/node` and `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// When this coordinator started, Unix milliseconds.
    pub started_at_ms: i64,
    /// Sixteen hex digits, random, new at every start.
    pub instance_id: String,
    /// How many times this node's coordinator started before this process, as counted in
    /// `state.path`; `None` without `state.path` or when the count could not be kept.
    pub restarts: Option<u64>,
}

impl ProcessInfo {
    /// A process that started at `started_at_ms`, with a fresh instance id and no count.
    pub fn started(started_at_ms: i64) -> Self {
        let mut bytes = [0u8; 8];
        if getrandom::fill(&mut bytes).is_err() {
            // No OS randomness: the pid and the start time, still distinct per process.
            let seed = (u64::from(std::process::id()) << 32) ^ started_at_ms.unsigned_abs();
            bytes = seed.to_be_bytes();
        }
        Self {
            started_at_ms,
            instance_id: hex::encode(bytes),
            restarts: None,
        }
    }

    /// With the restart count.
    #[must_use]
    pub fn with_restarts(mut self, restarts: Option<u64>) -> Self {
        self.restarts = restarts;
        self
    }

    /// Whole seconds since the start, at `now_ms`.
    pub fn uptime_seconds(&self, now_ms: i64) -> i64 {
        (now_ms - self.started_at_ms).max(0) / 1000
    }

    /// The `process` object of `/cluster` and `/node`.
    pub fn to_json(&self, now_ms: i64) -> Value {
        json!({
            "instance_id": self.instance_id,
            "started_at": chrono::DateTime::<chrono::Utc>::from_timestamp_millis(self.started_at_ms)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            "uptime_seconds": self.uptime_seconds(now_ms),
            "restarts": self.restarts,
        })
    }
}

/// Why the start count could not be kept.
#[derive(Debug, thiserror::Error)]
#[error("cannot keep the restart count in {path}: {source}")]
pub struct CountError {
    path: PathBuf,
    #[source]
    source: io::Error,
}

/// What [`count_start`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    /// Starts before this one.
    pub restarts: u64,
    /// Where an unreadable count was moved to, when there was one.
    pub set_aside: Option<PathBuf>,
}

/// Counts this start in `<dir>/starts-<node>`: reads the starts before it (none when the file
/// is missing), writes the new total, and returns the starts before this one.
pub fn count_start(dir: &Path, node: &str) -> Result<Counted, CountError> {
    let node = crate::ledger::file::file_safe(node);
    let path = dir.join(format!("starts-{node}"));
    let err = |source| CountError {
        path: path.clone(),
        source,
    };
    // Created like the ledger creates it: the count may be the first thing kept there.
    std::fs::create_dir_all(dir).map_err(err)?;
    let (before, set_aside) = match std::fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(n) => (n, None),
            Err(_) => {
                let stamp = crate::clock::now_ms();
                let mut aside = dir.join(format!("starts-{node}.corrupt-{stamp}"));
                let mut n = 1;
                while aside.exists() {
                    aside = dir.join(format!("starts-{node}.corrupt-{stamp}-{n}"));
                    n += 1;
                }
                std::fs::rename(&path, &aside).map_err(err)?;
                (0, Some(aside))
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => (0, None),
        Err(e) => return Err(err(e)),
    };
    let tmp = dir.join(format!(".starts-{node}.tmp"));
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&tmp).map_err(err)?;
        writeln!(file, "{}", before.saturating_add(1)).map_err(err)?;
        // Synced before the rename, so a crash right after a start cannot leave the count empty.
        file.sync_all().map_err(err)?;
    }
    std::fs::rename(&tmp, &path).map_err(err)?;
    Ok(Counted {
        restarts: before,
        set_aside,
    })
}

/// This process's resource use from `/proc/self`, for the standard `process_*` series.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    /// User and system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident set size, bytes.
    pub resident_bytes: Option<u64>,
    /// Virtual memory size, bytes.
    pub virtual_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit on open file descriptors.
    pub max_fds: Option<u64>,
}

/// Reads [`Usage`] now; a field `/proc` cannot give stays `None`.
pub fn usage() -> Usage {
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    let status = std::fs::read_to_string("/proc/self/status").ok();
    let kb = |key| status.as_deref().and_then(|s| status_bytes(s, key));
    Usage {
        cpu_seconds: stat.as_deref().and_then(parse_cpu_seconds),
        resident_bytes: kb("VmRSS:"),
        virtual_bytes: kb("VmSize:"),
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64),
        max_fds: std::fs::read_to_string("/proc/self/limits")
            .ok()
            .as_deref()
            .and_then(parse_max_fds),
    }
}

/// When this OS process started, Unix milliseconds (to the clock tick; the boot time `/proc`
/// gives is whole seconds, so about a second either way): `starttime` of `/proc/self/stat`
/// after `btime` of `/proc/stat`. The standard `process_start_time_seconds`, and the start a
/// gossip peer is shown with. `None` without `/proc`.
pub fn os_start_ms() -> Option<i64> {
    static START: std::sync::OnceLock<Option<i64>> = std::sync::OnceLock::new();
    *START.get_or_init(|| {
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        let system = std::fs::read_to_string("/proc/stat").ok()?;
        parse_start_ms(&own, &system)
    })
}

fn parse_start_ms(own: &str, system: &str) -> Option<i64> {
    let rest = &own[own.rfind(')')? + 1..];
    // Field 22 of proc(5), counted from field 3 after the command name.
    let ticks: i64 = rest.split_whitespace().nth(22 - 3)?.parse().ok()?;
    let boot: i64 = system
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(boot * 1000 + ticks * 1000 / TICKS_PER_SECOND as i64)
}

/// Clock ticks per second of `/proc`'s CPU times (`USER_HZ`): 100 on every Linux
/// architecture this is built for (the memory figures come in kB from `/proc/self/status`, so
/// no page size is assumed).
const TICKS_PER_SECOND: f64 = 100.0;

/// User and system CPU seconds from `/proc/self/stat`.
fn parse_cpu_seconds(stat: &str) -> Option<f64> {
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 3.. of proc(5): utime is 14, stime 15.
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    Some((field(14)? + field(15)?) as f64 / TICKS_PER_SECOND)
}

/// A `kB` line of `/proc/self/status` (`VmRSS:`, `VmSize:`), in bytes.
pub(crate) fn status_bytes(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|kb| kb * 1024)
}

/// The soft "Max open files" limit from `/proc/self/limits`.
fn parse_max_fds(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_climbs_at_every_start_and_survives_in_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        for expected in 0..3 {
            let counted = count_start(dir.path(), "n1").unwrap();
            assert_eq!(counted.restarts, expected);
            assert_eq!(counted.set_aside, None);
        }
        // Another node's count beside it is its own.
        assert_eq!(count_start(dir.path(), "n2").unwrap().restarts, 0);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("starts-n1")).unwrap(),
            "3\n"
        );
    }

    #[test]
    fn a_node_name_that_is_no_file_name_is_counted_under_a_safe_one() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(count_start(dir.path(), "team/a").unwrap().restarts, 0);
        assert_eq!(count_start(dir.path(), "team/a").unwrap().restarts, 1);
        assert!(dir.path().join("starts-team_a").exists());
    }

    #[test]
    fn an_unreadable_count_is_set_aside_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("starts-n1"), "garbage").unwrap();
        let counted = count_start(dir.path(), "n1").unwrap();
        assert_eq!(counted.restarts, 0);
        let aside = counted.set_aside.expect("set aside");
        assert_eq!(std::fs::read_to_string(&aside).unwrap(), "garbage");
        assert_eq!(count_start(dir.path(), "n1").unwrap().restarts, 1);
        // A second corrupt count is set aside beside the first, not over it.
        std::fs::write(dir.path().join("starts-n1"), "again").unwrap();
        let second = count_start(dir.path(), "n1").unwrap().set_aside.unwrap();
        assert_ne!(second, aside);
        assert_eq!(std::fs::read_to_string(second).unwrap(), "again");
        assert_eq!(std::fs::read_to_string(&aside).unwrap(), "garbage");
    }

    #[test]
    fn a_directory_that_cannot_be_written_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let e = count_start(&file.join("below"), "n1").unwrap_err();
        assert!(e.to_string().contains("starts-n1"), "{e}");
    }

    #[test]
    fn uptime_and_json() {
        let p = ProcessInfo::started(1_000_000).with_restarts(Some(4));
        assert_eq!(p.instance_id.len(), 16);
        assert_ne!(p.instance_id, ProcessInfo::started(1_000_000).instance_id);
        assert_eq!(p.uptime_seconds(1_065_900), 65);
        assert_eq!(
            p.uptime_seconds(0),
            0,
            "a clock stepped back is not a negative uptime"
        );
        let j = p.to_json(1_065_900);
        assert_eq!(j["uptime_seconds"], 65);
        assert_eq!(j["restarts"], 4);
        assert_eq!(j["instance_id"], p.instance_id.as_str());
        assert!(
            j["started_at"]
                .as_str()
                .unwrap()
                .starts_with("1970-01-01T00:16:40")
        );
    }

    #[test]
    fn parses_proc_self() {
        let stat = "4242 (cron stable) S 1 4242 4242 0 -1 4194560 2000 0 0 0 250 50 0 0 20 0 \
                    12 0 3000 104857600 2560 18446744073709551615";
        assert_eq!(parse_cpu_seconds(stat), Some(3.0));
        let status = "Name:\tcronstable\nVmSize:\t  102400 kB\nVmRSS:\t    2560 kB\n";
        assert_eq!(status_bytes(status, "VmSize:"), Some(102_400 * 1024));
        assert_eq!(status_bytes(status, "VmRSS:"), Some(2560 * 1024));
        assert_eq!(status_bytes(status, "VmSwap:"), None);
        let system = "cpu  1 2 3\nbtime 1700000000\nprocesses 5\n";
        assert_eq!(
            parse_start_ms(stat, system),
            Some(1_700_000_000_000 + 30_000)
        );
        let start = os_start_ms().expect("a start time on Linux");
        let now = crate::clock::now_ms();
        assert!(
            start <= now + 1_000 && start > now - 86_400_000,
            "{start} vs {now}"
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_max_fds(limits), Some(1024));
        let now = usage();
        assert!(now.open_fds.unwrap() > 0);
        assert!(now.resident_bytes.unwrap() > 0);
    }
}
