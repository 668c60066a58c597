//! The job-set ID, the fingerprint nodes compare to decide whether they agree, and the firing ID
//! derived from it (seed 000, "The job-set ID foundation"; inventory §0 and §12).
//!
//! Two nodes whose job-set IDs match agree on every fingerprinted field of every job, including
//! jobs that are not currently running. Agreement is what admits a peer to the election, so the
//! ID must be identical for identical job sets on every node, in every coordinator version, and
//! must differ whenever a covered field differs.
//!
//! # What the ID covers
//!
//! Every field of [`JobSpec`], as the job set holds it after parsing and merging:
//!
//! | tag | field | encoded as |
//! |---|---|---|
//! | `0x01` | `name` | the string |
//! | `0x02` | `schedule` | the string exactly as written, leading and trailing whitespace trimmed |
//! | `0x03` | `command` | the string |
//! | `0x04` | `stdin` | absent, or the string |
//! | `0x05` | `cluster_policy` | its config spelling (`Leader`, `PreferLeader`, `EveryNode`) |
//! | `0x06` | `timezone` | absent, or the IANA name as written |
//! | `0x07` | `environment` | the entries in byte-wise key order, each key and literal value |
//! | `0x08` | `timeout` | absent, or whole milliseconds |
//! | `0x09` | `retry` | retries, then backoff and max backoff in whole milliseconds |
//! | `0x0a` | `concurrency_policy` | its config spelling (`Allow`, `Forbid`, `Replace`) |
//! | `0x0b` | `starting_deadline` | nothing when unset, else the tag and whole milliseconds |
//! | `0x0c` | `catch_up` | nothing for `none`, else the tag, the mode's spelling, the window in whole milliseconds and the limit |
//! | `0x0d` | `expect` | nothing when unset, else the tag, then `completeWithin` and `maxDuration`, each absent or whole milliseconds |
//!
//! A field added after `v1` is encoded only when it is set, so a job set that does not use it
//! keeps the ID it had before the field existed (nodes of two versions agree during a rolling
//! upgrade), and one that sets it differs.
//! Text is compared as written, not by meaning: `@daily` and `0 0 * * *` give different IDs.
//! That errs on the safe side: two nodes that spell one schedule differently show up as drift (a
//! false alarm an operator can fix), never as agreement on something they do not share.
//! Durations are covered at millisecond resolution, the finest any config format expresses.
//!
//! # What it deliberately leaves out
//!
//! - **The peer list, `electLeader`, `distribution` and the rest of the `cluster` section.** They
//!   are cluster config, not job properties; disagreement on them is caught by the size and
//!   policy conflict gates instead (inventory GSP-91).
//! - **Node-specific settings**: `nodeName`, listen addresses, TLS paths, the state store.
//!   They legitimately differ between nodes that agree on their jobs.
//! - **The executor's inherited process environment.** It is host-specific, and it is where
//!   secrets belong. Only a job definition's own literal variables are covered, so a secret
//!   written into a job definition would be fingerprinted (and a low-entropy one could be
//!   guessed from the published ID): keep secrets in the executor's environment.
//! - **Where a job came from**: source file, line number, comments, the order of jobs.
//!
//! # The encoding, exactly (scheme `v1`)
//!
//! ```text
//! str(s)       = u64_be(len(s)) || s                      (UTF-8 bytes)
//! opt(x)       = 0x00 | 0x01 || x                         (absent | present)
//! ms(d)        = u128_be(whole milliseconds of d)
//! job          = 0x01 str(name) || 0x02 str(trim(schedule)) || 0x03 str(command)
//!                || 0x04 opt(str(stdin)) || 0x05 str(cluster_policy) || 0x06 opt(str(timezone))
//!                || 0x07 u64_be(#env) || (str(key) || str(value))* in key order
//!                || 0x08 opt(ms(timeout)) || 0x09 u32_be(retries) || ms(backoff) || ms(max_backoff)
//!                || 0x0a str(concurrency_policy)
//!                [|| 0x0b ms(starting_deadline)]          (only when set)
//!                [|| 0x0c str(mode) || ms(window) || u32_be(limit)]  (only with catch-up)
//!                [|| 0x0d opt(ms(completeWithin)) || opt(ms(maxDuration))]  (only with expect)
//! set          = b"cronstable-job-set-v1\0" || u64_be(#jobs) || (u64_be(len(job)) || job)*
//!                with the job encodings sorted by bytes
//! job-set ID   = "v1:" || lowercase_hex(SHA-256(set))
//! ```
//!
//! Tags and length prefixes make the job encoding injective (no two different jobs encode the
//! same bytes); sorting the per-job encodings makes the ID independent of job order. The job set
//! is treated as a multiset: a job listed twice counts twice (parsers reject duplicate names).
//! Changing any of this breaks agreement across a mixed-version cluster, so a change must come
//! with a new prefix (`v2:`), which peers compare as simply different.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::job::{JobSpec, RetryPolicy};

/// Domain-separation prefix of the job-set hash (scheme `v1`).
const SET_DOMAIN: &[u8] = b"cronstable-job-set-v1\0";
/// Domain-separation prefix of the firing-ID hash (scheme `v1`).
const FIRING_DOMAIN: &[u8] = b"cronstable-firing-v1\0";
/// The scheme prefix of a job-set ID and of a firing ID.
const PREFIX: &str = "v1:";
/// Hex digits after the prefix of a job-set ID (a whole SHA-256 digest).
const ID_HEX_LEN: usize = 64;
/// Hex digits after the prefix of a firing ID (the first 16 bytes of a SHA-256 digest).
const FIRING_HEX_LEN: usize = 32;

/// A job-set ID: `v1:` followed by 64 lowercase hex digits. Built by [`job_set_id`], or parsed
/// from a peer's report with [`JobSetId::parse`], which accepts nothing else.
///
/// Compare IDs only for equality; their order means nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobSetId(String);

/// A string that is not a well-formed `v1` job-set ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid job-set ID {0:?}: expected \"v1:\" followed by 64 lowercase hex digits")]
pub struct InvalidJobSetId(pub String);

impl JobSetId {
    /// Validates `s` as a `v1` job-set ID. Uppercase hex, other prefixes (such as a future
    /// `v2:`), whitespace and wrong lengths are all rejected, so two valid IDs are equal exactly
    /// when their strings are.
    pub fn parse(s: &str) -> Result<Self, InvalidJobSetId> {
        let valid = s.strip_prefix(PREFIX).is_some_and(|hex| {
            hex.len() == ID_HEX_LEN && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
        if valid {
            Ok(Self(s.to_owned()))
        } else {
            Err(InvalidJobSetId(s.to_owned()))
        }
    }

    /// The ID as text, e.g. for `GET /job-set-id` and the `/peer` payload.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobSetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for JobSetId {
    type Err = InvalidJobSetId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<String> for JobSetId {
    type Error = InvalidJobSetId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<JobSetId> for String {
    fn from(id: JobSetId) -> Self {
        id.0
    }
}

/// The job-set ID of `jobs` (scheme `v1`; the module docs give the exact coverage and encoding).
///
/// Independent of the order of `jobs`. The empty job set has an ID too: the hash of the domain
/// prefix and a zero count. Takes the jobs by reference, so a caller holding them in a map
/// (the coordinator's registry) need not copy 10,000 of them to hash them.
///
/// # Examples
///
/// ```
/// use cronstable_core::fingerprint::job_set_id;
/// use cronstable_core::JobSpec;
/// let a = JobSpec::new("a", "@daily", "true");
/// let b = JobSpec::new("b", "*/5 * * * *", "date");
/// assert_eq!(job_set_id(&[a.clone(), b.clone()]), job_set_id(&[b, a]));
/// assert!(job_set_id(&[]).as_str().starts_with("v1:"));
/// ```
pub fn job_set_id<'a>(jobs: impl IntoIterator<Item = &'a JobSpec>) -> JobSetId {
    let mut encoded: Vec<Vec<u8>> = jobs.into_iter().map(encode_job).collect();
    encoded.sort_unstable();
    let mut hasher = Sha256::new();
    hasher.update(SET_DOMAIN);
    hasher.update((encoded.len() as u64).to_be_bytes());
    for job in &encoded {
        hasher.update((job.len() as u64).to_be_bytes());
        hasher.update(job);
    }
    JobSetId(format!("{PREFIX}{}", hex::encode(hasher.finalize())))
}

/// The cluster-wide ID of one firing: the same on every node that computes it for the same job
/// set, job and scheduled instant, and different for any other firing. The executor exposes it
/// to the command as `CRONSTABLE_FIRING_ID`, so a job can use it as an idempotency key.
///
/// Format: `v1:` followed by 32 lowercase hex digits, the first 16 bytes of
///
/// ```text
/// SHA-256(b"cronstable-firing-v1\0" || u64_be(len(set id)) || set id
///         || u64_be(len(job)) || job || i64_be(scheduled_at_unix_ms))
/// ```
///
/// A hash rather than a readable `job:time` string because job names are free text (a name
/// derived from a crontab line may contain `/`, spaces or quotes) and the ID must be safe to
/// drop into a file name, an HTTP header or a SQL literal. 128 bits leave collisions out of
/// reach. The job-set ID is part of the input: the same instant under a different job
/// configuration is a different firing.
///
/// Compute it once, when the firing is due, and carry it through retries and handoff: every
/// attempt of one firing shares its ID, even if the job set changes in between.
///
/// # Examples
///
/// ```
/// use cronstable_core::fingerprint::{firing_id, job_set_id};
/// let set = job_set_id(&[]);
/// let id = firing_id(&set, "backup", 1_750_000_000_000);
/// assert_eq!(id, firing_id(&set, "backup", 1_750_000_000_000));
/// assert_ne!(id, firing_id(&set, "backup", 1_750_000_060_000));
/// assert_eq!(id.len(), 3 + 32);
/// ```
pub fn firing_id(job_set_id: &JobSetId, job: &str, scheduled_at_unix_ms: i64) -> String {
    let mut hasher = Sha256::new();
    hasher.update(FIRING_DOMAIN);
    hasher.update((job_set_id.as_str().len() as u64).to_be_bytes());
    hasher.update(job_set_id.as_str().as_bytes());
    hasher.update((job.len() as u64).to_be_bytes());
    hasher.update(job.as_bytes());
    hasher.update(scheduled_at_unix_ms.to_be_bytes());
    let digest = hasher.finalize();
    let id = format!("{PREFIX}{}", hex::encode(&digest[..FIRING_HEX_LEN / 2]));
    debug_assert_eq!(id.len(), PREFIX.len() + FIRING_HEX_LEN);
    id
}

/// Field tags of the per-job encoding. Never renumber: the IDs of every deployed cluster depend
/// on them.
mod tag {
    pub(super) const NAME: u8 = 0x01;
    pub(super) const SCHEDULE: u8 = 0x02;
    pub(super) const COMMAND: u8 = 0x03;
    pub(super) const STDIN: u8 = 0x04;
    pub(super) const CLUSTER_POLICY: u8 = 0x05;
    pub(super) const TIMEZONE: u8 = 0x06;
    pub(super) const ENVIRONMENT: u8 = 0x07;
    pub(super) const TIMEOUT: u8 = 0x08;
    pub(super) const RETRY: u8 = 0x09;
    pub(super) const CONCURRENCY_POLICY: u8 = 0x0a;
    pub(super) const STARTING_DEADLINE: u8 = 0x0b;
    pub(super) const CATCH_UP: u8 = 0x0c;
    pub(super) const EXPECT: u8 = 0x0d;
}

/// The canonical `v1` encoding of one job (see the module docs).
fn encode_job(job: &JobSpec) -> Vec<u8> {
    // Destructured without `..` on purpose: a field added to `JobSpec` fails to compile here
    // until someone decides whether the job-set ID covers it (and documents the decision).
    let JobSpec {
        name,
        schedule,
        command,
        stdin,
        cluster_policy,
        timezone,
        environment,
        timeout,
        retry,
        concurrency_policy,
        starting_deadline,
        catch_up,
        expect,
    } = job;
    let RetryPolicy {
        retries,
        backoff,
        max_backoff,
    } = retry;

    let mut out = Vec::with_capacity(128 + name.len() + schedule.len() + command.len());
    out.push(tag::NAME);
    put_str(&mut out, name);
    out.push(tag::SCHEDULE);
    put_str(&mut out, schedule.trim());
    out.push(tag::COMMAND);
    put_str(&mut out, command);
    out.push(tag::STDIN);
    put_opt(&mut out, stdin.as_deref(), put_str);
    out.push(tag::CLUSTER_POLICY);
    put_str(&mut out, cluster_policy.as_str());
    out.push(tag::TIMEZONE);
    put_opt(&mut out, timezone.as_deref(), put_str);
    out.push(tag::ENVIRONMENT);
    out.extend_from_slice(&(environment.len() as u64).to_be_bytes());
    // A BTreeMap iterates in key order, and `String` orders byte-wise: the canonical order.
    for (key, value) in environment {
        put_str(&mut out, key);
        put_str(&mut out, value);
    }
    out.push(tag::TIMEOUT);
    put_opt(&mut out, *timeout, put_ms);
    out.push(tag::RETRY);
    out.extend_from_slice(&retries.to_be_bytes());
    put_ms(&mut out, *backoff);
    put_ms(&mut out, *max_backoff);
    out.push(tag::CONCURRENCY_POLICY);
    put_str(&mut out, concurrency_policy.as_str());
    // Added after v1: present only when set, so sets without it keep their IDs.
    if let Some(deadline) = starting_deadline {
        out.push(tag::STARTING_DEADLINE);
        put_ms(&mut out, *deadline);
    }
    if let Some(c) = catch_up {
        out.push(tag::CATCH_UP);
        put_str(&mut out, c.mode.as_str());
        put_ms(&mut out, c.window);
        out.extend_from_slice(&c.limit.to_be_bytes());
    }
    if let Some(e) = expect {
        out.push(tag::EXPECT);
        put_opt(&mut out, e.complete_within, put_ms);
        put_opt(&mut out, e.max_duration, put_ms);
    }
    out
}

/// `u64_be(len) || bytes`.
fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// `0x00` for absent, `0x01` followed by the value for present, so absent and present-but-empty
/// (say, no stdin versus an empty stdin) encode differently.
fn put_opt<T>(out: &mut Vec<u8>, value: Option<T>, put: fn(&mut Vec<u8>, T)) {
    match value {
        None => out.push(0x00),
        Some(v) => {
            out.push(0x01);
            put(out, v);
        }
    }
}

/// Whole milliseconds as `u128_be`: lossless for every `Duration`, so no two distinct
/// millisecond values can collide through saturation.
fn put_ms(out: &mut Vec<u8>, d: Duration) {
    out.extend_from_slice(&d.as_millis().to_be_bytes());
}
