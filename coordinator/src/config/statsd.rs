//! `statsd:`: the per-job run, duration and skip figures, sent as statsd datagrams over UDP.
//!
//! ```yaml
//! statsd:
//!   host: 127.0.0.1     # the default; a name is resolved again every minute
//!   port: 8125          # the default
//!   prefix: cronstable  # the default; every metric name starts with it
//!   tags: false         # the default: the job in the name; true: DogStatsD #job:… tags
//! ```
//!
//! Only the per-job series go to statsd, as the seed has it ("the statsd integration is still
//! per-job"); the cluster series stay on `GET /metrics`.

use serde::Deserialize;

use super::ctx::Ctx;

/// `statsd:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawStatsd {
    pub(crate) host: Option<String>,
    pub(crate) port: Option<u16>,
    pub(crate) prefix: Option<String>,
    pub(crate) tags: Option<bool>,
}

/// `statsd:`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsdConfig {
    /// The statsd server's host name or address.
    pub host: String,
    /// Its UDP port.
    pub port: u16,
    /// The first segment of every metric name (no trailing dot); may be empty.
    pub prefix: String,
    /// DogStatsD tags (`|#job:…,result:…`) instead of the job and result in the name.
    pub tags: bool,
}

pub(super) fn validate(ctx: &mut Ctx<'_>, raw: RawStatsd) -> Option<StatsdConfig> {
    let host = raw
        .host
        .as_deref()
        .map_or("127.0.0.1", str::trim)
        .to_owned();
    let mut ok = true;
    if host.is_empty() {
        ctx.error(
            "statsd.host",
            "is blank: the statsd server's host name or address",
        );
        ok = false;
    }
    let port = raw.port.unwrap_or(8125);
    if port == 0 {
        ctx.error("statsd.port", "must be a UDP port from 1 to 65535");
        ok = false;
    }
    let prefix = raw.prefix.unwrap_or_else(|| "cronstable".to_owned());
    let prefix = prefix.trim_end_matches('.').to_owned();
    if prefix.starts_with('.') || prefix.contains("..") {
        ctx.error(
            "statsd.prefix",
            format!("{prefix:?} has an empty segment: dots separate names (app.cron, not .app or app..cron)"),
        );
        ok = false;
    } else if let Some(bad) = prefix
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        ctx.error(
            "statsd.prefix",
            format!("{prefix:?} holds {bad:?}: use letters, digits, '_', '-' and '.'"),
        );
        ok = false;
    }
    ok.then_some(StatsdConfig {
        host,
        port,
        prefix,
        tags: raw.tags.unwrap_or(false),
    })
}
