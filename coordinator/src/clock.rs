//! The coordinator's only wall-clock read. Everything else takes time as an argument: a
//! decision reads the clock once, as a [`Now`], and passes it down.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now.
#[allow(clippy::disallowed_methods)] // the one sanctioned wall-clock read
pub fn now_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        // A clock set before 1970 is broken; report it as the epoch rather than panic.
        Err(_) => 0,
    }
}

/// The wall clock now, as a date (for schedules).
pub fn now_utc() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_millis(now_ms()).unwrap_or_default()
}

/// One reading of both clocks: the monotonic instant deadlines are checked against, and the
/// wall clock records are stamped with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// For leases, deadlines and staleness.
    pub at: tokio::time::Instant,
    /// For records (Unix ms).
    pub unix_ms: i64,
}

impl Now {
    /// Reads both clocks.
    pub fn read() -> Self {
        Self {
            at: tokio::time::Instant::now(),
            unix_ms: now_ms(),
        }
    }

    /// Both clocks again, later in the same decision: the monotonic clock now, and the wall
    /// clock advanced by what the monotonic clock measured since `self`, so a wall-clock step
    /// between the two readings cannot move the second one.
    pub fn again(self) -> Self {
        let at = tokio::time::Instant::now();
        let elapsed = at.saturating_duration_since(self.at).as_millis();
        Self {
            at,
            unix_ms: self.unix_ms + i64::try_from(elapsed).unwrap_or(i64::MAX / 2),
        }
    }
}

#[cfg(test)]
impl Now {
    /// The monotonic clock now, with the wall clock at `unix_ms` (tests).
    pub fn with_unix_ms(unix_ms: i64) -> Self {
        Self {
            at: tokio::time::Instant::now(),
            unix_ms,
        }
    }
}
