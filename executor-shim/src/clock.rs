//! The shim's only wall-clock reads. Cron schedules are defined on wall-clock time, so the
//! scheduler reads it here and passes it to the pure planning code.

use chrono::{DateTime, Utc};

/// The current UTC time.
#[allow(clippy::disallowed_methods)] // the one sanctioned wall-clock read
pub fn now() -> DateTime<Utc> {
    Utc::now()
}

/// The current time as Unix milliseconds.
pub fn now_ms() -> i64 {
    now().timestamp_millis()
}
