//! The coordinator's only wall-clock read. Everything else takes time as an argument.

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
