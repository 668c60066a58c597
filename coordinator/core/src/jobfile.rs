//! The YAML job file read by `cronstable-shim --jobs FILE`.
//!
//! ```yaml
//! jobs:
//!   - name: charge-cards          # required, unique, [A-Za-z0-9][A-Za-z0-9._-]{0,127}
//!     command: ./charge.sh        # required, run with /bin/sh -c
//!     schedule: "0 * * * *"       # required: 5 fields, 6 fields (seconds first), @alias, @reboot
//!     clusterPolicy: Leader       # Leader (default) | PreferLeader | EveryNode
//!     timezone: Europe/Berlin     # optional IANA zone, default UTC
//!     environment: {FOO: bar}     # optional literal variables
//!     stdin: "text"               # optional text fed to the command's standard input
//!     timeout: 10m                # optional: "90s", "10m", "1h", "1h30m" or seconds; no limit
//!     retries: 3                  # optional relaunches after a failure, default 0
//!     retryBackoff: 10s           # optional wait before the first relaunch, default 10s
//!     retryBackoffMax: 5m         # optional cap on the doubled wait, default 5m; 0 = no cap
//!     concurrencyPolicy: Forbid   # Allow (default) | Forbid | Replace
//!     startingDeadline: 5m        # optional: how late a firing may still start, default 90s
//!     catchUp: latest             # none (default) | latest | all: run an instant nobody ran
//!     catchUpWindow: 30m          # with catchUp: how late a missed instant may still run
//!     catchUpLimit: 10            # with catchUp all: most missed instants run per window
//!     expect:                     # optional, judged for the cluster (see crate::expect)
//!       completeWithin: 15m       # a run succeeded by then, or the firing is `missed`
//!       maxDuration: 10m          # no run takes longer, or the firing is `too_long`
//!
//!   - name: rotate-local-logs
//!     command: ./rotate.sh
//!     schedule: "@daily"          # quote it: a plain scalar cannot start with @ or *
//!     clusterPolicy: EveryNode
//! ```
//!
//! # Errors, and what still loads
//!
//! Like the crontab parser, [`parse`] never fails as a whole because of one job: an invalid job
//! is reported as a [`JobFileError`] naming the file, the line and the key
//! (`jobs.yaml:14: jobs[2].schedule: ...`), and the other jobs still load. A job with any error
//! is left out entirely, never loaded half-configured. Later duplicates of a name are errors
//! that name the line of the first one, which stays loaded.
//!
//! Some problems leave nothing trustworthy, and give one error and no jobs at all: a YAML
//! syntax error (the parser cannot resynchronise, so nothing after it can be read, and a
//! partial job set would silently drop jobs), an empty document, a document that is not a
//! mapping, and a mapping without `jobs:`. An unknown top-level key is an error too, but the
//! jobs still load.
//!
//! # How one bad job is isolated
//!
//! serde cannot resume inside a stream after an element failed, so the document is read in
//! passes: a failure inside item `i` records that item's error, and the next pass skips item
//! `i` unread ([`serde::de::IgnoredAny`]). If skipping an item fails too, the problem is the
//! YAML itself, not the job. That takes one pass per bad job plus one, each linear in the file.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::catch_up::{CatchUp, CatchUpKeys, policy_from};
use crate::expect::{Expectation, expectation_from};
use crate::job::{ClusterPolicy, ConcurrencyPolicy, JobSpec, RetryPolicy};
use crate::schedule::Schedule;
use crate::yaml::{self, KeyLines, YamlError};

/// `retryBackoff` when the job does not set it.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(10);
/// `retryBackoffMax` when the job does not set it.
pub const DEFAULT_RETRY_BACKOFF_MAX: Duration = Duration::from_secs(300);
/// Longest job name.
pub const MAX_NAME_LEN: usize = 128;

/// One job that loaded, with the line its entry starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFileEntry {
    /// The job.
    pub job: JobSpec,
    /// 1-based line of the job's entry (its `- name:` line, typically).
    pub line: usize,
}

/// Something wrong in a job file: `jobs.yaml:14: jobs[2].schedule: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default(),
    if path.is_empty() { String::new() } else { format!(": {path}") })]
pub struct JobFileError {
    /// The file name as passed to [`parse`].
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Key path (`jobs[2].schedule`); empty for the document as a whole.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl From<YamlError> for JobFileError {
    fn from(e: YamlError) -> Self {
        Self {
            file: e.source,
            line: e.line,
            path: e.path,
            message: e.message,
        }
    }
}

/// The result of reading a job file: every job that is valid, and every error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedJobFile {
    /// The valid jobs, in file order.
    pub entries: Vec<JobFileEntry>,
    /// Every problem found, in file order; empty when the whole file is valid.
    pub errors: Vec<JobFileError>,
}

impl ParsedJobFile {
    /// The loaded jobs, in file order.
    pub fn jobs(&self) -> impl Iterator<Item = &JobSpec> {
        self.entries.iter().map(|e| &e.job)
    }
}

/// One job entry as written; checked and converted into a [`JobSpec`] afterwards.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawJob {
    name: String,
    command: String,
    schedule: String,
    #[serde(default)]
    cluster_policy: ClusterPolicy,
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    environment: BTreeMap<String, String>,
    #[serde(default)]
    stdin: Option<String>,
    #[serde(default, deserialize_with = "crate::duration::deserialize_option")]
    timeout: Option<Duration>,
    #[serde(default)]
    retries: u32,
    #[serde(default, deserialize_with = "crate::duration::deserialize_option")]
    retry_backoff: Option<Duration>,
    #[serde(default, deserialize_with = "crate::duration::deserialize_option")]
    retry_backoff_max: Option<Duration>,
    #[serde(default)]
    concurrency_policy: ConcurrencyPolicy,
    #[serde(default, deserialize_with = "crate::duration::deserialize_option")]
    starting_deadline: Option<Duration>,
    #[serde(default)]
    catch_up: Option<CatchUp>,
    #[serde(default, deserialize_with = "crate::duration::deserialize_option")]
    catch_up_window: Option<Duration>,
    #[serde(default)]
    catch_up_limit: Option<u32>,
    #[serde(default)]
    expect: Option<RawExpect>,
}

/// `expect:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawExpect {
    #[serde(default, deserialize_with = "crate::duration::deserialize_option")]
    complete_within: Option<Duration>,
    #[serde(default, deserialize_with = "crate::duration::deserialize_option")]
    max_duration: Option<Duration>,
}

/// Reads a job file. `source` names the file in errors. See the module docs for what loads
/// when something is wrong.
pub fn parse(text: &str, source: &str) -> ParsedJobFile {
    let lines = KeyLines::new(text);
    let mut skip = BTreeSet::new();
    let mut item_errors = Vec::new();
    let doc = loop {
        let pass = RefCell::new(Pass::default());
        let seed = DocSeed {
            skip: &skip,
            pass: &pass,
        };
        match yaml::parse_seed(text, source, seed) {
            Ok(doc) => break doc,
            Err(e) => match pass.into_inner().failed {
                Some(Failed::Job(i)) if skip.insert(i) => item_errors.push(e),
                _ => {
                    let mut e = JobFileError::from(e);
                    e.message.push_str(" (no jobs were loaded from this file)");
                    return only_error(e);
                }
            },
        }
    };
    let mut errors: Vec<JobFileError> = item_errors.into_iter().map(Into::into).collect();
    let at = |path: String, message: String| -> JobFileError {
        YamlError::at(source, &lines, path, message).into()
    };
    let jobs = match doc {
        Doc::Empty => return only_error(at(String::new(), empty_message("the document is empty"))),
        Doc::Map {
            jobs: None,
            unknown,
        } => {
            let (path, what) = match unknown.first() {
                Some(key) => (
                    key.clone(),
                    format!("there is no `jobs:` key, only `{key}`"),
                ),
                None => (String::new(), "there is no `jobs:` key".to_owned()),
            };
            return only_error(at(path, empty_message(&what)));
        }
        Doc::Map {
            jobs: Some(jobs),
            unknown,
        } => {
            errors.extend(unknown.into_iter().map(|key| {
                at(
                    key.clone(),
                    format!("unknown top-level key `{key}`, expected `jobs`"),
                )
            }));
            jobs
        }
    };
    let mut entries = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for (index, raw) in jobs {
        let base = format!("jobs[{index}]");
        let line = lines.line(&base).unwrap_or(1);
        match convert(raw) {
            Err(problems) => errors.extend(
                problems
                    .into_iter()
                    .map(|(key, message)| at(format!("{base}.{key}"), message)),
            ),
            Ok(job) => {
                if let Some(first) = first_line.get(&job.name) {
                    let message = format!(
                        "duplicate job name {:?} (first defined at line {first})",
                        job.name
                    );
                    errors.push(at(format!("{base}.name"), message));
                } else {
                    first_line.insert(job.name.clone(), line);
                    entries.push(JobFileEntry { job, line });
                }
            }
        }
    }
    errors.sort_by_key(|e| e.line.unwrap_or(0));
    ParsedJobFile { entries, errors }
}

fn only_error(e: JobFileError) -> ParsedJobFile {
    ParsedJobFile {
        entries: Vec::new(),
        errors: vec![e],
    }
}

fn empty_message(what: &str) -> String {
    format!("{what}: a job file is a mapping with a `jobs:` list (`jobs: []` for none)")
}

/// Checks one job and builds its [`JobSpec`]; on failure, every problem as (key, message).
fn convert(raw: RawJob) -> Result<JobSpec, Vec<(&'static str, String)>> {
    let mut problems = Vec::new();
    if let Err(why) = check_name(&raw.name) {
        problems.push(("name", why));
    }
    if raw.command.trim().is_empty() {
        problems.push(("command", "must not be empty".to_owned()));
    } else if raw.command.contains('\0') {
        problems.push(("command", "must not contain a NUL character".to_owned()));
    }
    let tz_ok = match &raw.timezone {
        Some(tz) if tz.parse::<chrono_tz::Tz>().is_err() => {
            problems.push(("timezone", format!("unknown IANA time zone {tz:?}")));
            false
        }
        _ => true,
    };
    let mut job = JobSpec::new(raw.name, raw.schedule.trim(), raw.command);
    // With a bad zone the schedule cannot be judged, and the zone error already says why.
    let schedule = if tz_ok {
        Schedule::parse(&job.schedule, raw.timezone.as_deref())
            .map_err(|e| problems.push(("schedule", e.to_string())))
            .ok()
    } else {
        None
    };
    let keys = CatchUpKeys {
        mode: raw.catch_up,
        window: raw.catch_up_window,
        limit: raw.catch_up_limit,
    };
    let deadline = raw
        .starting_deadline
        .unwrap_or(crate::job::DEFAULT_STARTING_DEADLINE);
    let catch_up = match &schedule {
        Some(s) => policy_from(keys, s, raw.cluster_policy, deadline)
            .map_err(|found| problems.extend(found))
            .unwrap_or(None),
        None => None,
    };
    let expect = match (&raw.expect, &schedule) {
        (Some(e), _) if e.complete_within.is_none() && e.max_duration.is_none() => {
            let why = "is empty: give completeWithin, maxDuration or both (or leave expect out)";
            problems.push(("expect", why.to_owned()));
            None
        }
        (Some(e), Some(s)) => {
            let keys = Expectation {
                complete_within: e.complete_within,
                max_duration: e.max_duration,
            };
            expectation_from(keys, s)
                .map_err(|found| problems.extend(found))
                .unwrap_or(None)
        }
        _ => None,
    };
    for (key, value) in &raw.environment {
        if !is_env_name(key) {
            let why = format!("invalid variable name {key:?}: use letters, digits and _");
            problems.push(("environment", why));
        } else if value.contains('\0') {
            problems.push((
                "environment",
                format!("{key}: value contains a NUL character"),
            ));
        }
    }
    if raw.timeout == Some(Duration::ZERO) {
        problems.push((
            "timeout",
            "must be more than 0 (leave it out for no limit)".to_owned(),
        ));
    }
    if raw.starting_deadline == Some(Duration::ZERO) {
        problems.push((
            "startingDeadline",
            "must be more than 0 (leave it out for the default, 90s)".to_owned(),
        ));
    }
    let backoff = raw.retry_backoff.unwrap_or(DEFAULT_RETRY_BACKOFF);
    let max_backoff = raw.retry_backoff_max.unwrap_or(DEFAULT_RETRY_BACKOFF_MAX);
    if !max_backoff.is_zero() && max_backoff < backoff {
        problems.push((
            "retryBackoffMax",
            format!(
                "{} is shorter than retryBackoff {} (0 means no cap)",
                crate::duration::format_duration(max_backoff),
                crate::duration::format_duration(backoff)
            ),
        ));
    }
    if raw.retries > crate::job::MAX_RETRIES {
        let max = crate::job::MAX_RETRIES;
        problems.push((
            "retries",
            format!("{} is more than the limit of {max}", raw.retries),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    job.cluster_policy = raw.cluster_policy;
    job.timezone = raw.timezone;
    job.environment = raw.environment;
    job.stdin = raw.stdin;
    job.timeout = raw.timeout;
    job.retry = RetryPolicy {
        retries: raw.retries,
        backoff,
        max_backoff,
    };
    job.concurrency_policy = raw.concurrency_policy;
    job.starting_deadline = raw.starting_deadline;
    job.catch_up = catch_up;
    job.expect = expect;
    Ok(job)
}

/// `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`: safe in URLs (`POST /jobs/{name}/start`), metric labels
/// and file names.
fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = match chars.next() {
        Some(first) => {
            first.is_ascii_alphanumeric()
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                && name.len() <= MAX_NAME_LEN
        }
        None => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid job name {name:?}: use 1 to {MAX_NAME_LEN} letters, digits, '.', '_' or \
             '-', starting with a letter or digit"
        ))
    }
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What the document held, as far as one pass is concerned.
enum Doc {
    /// Null: nothing but comments and whitespace.
    Empty,
    /// A mapping; `jobs` is `None` without a `jobs` key, else the jobs read (index, job).
    Map {
        jobs: Option<Vec<(usize, RawJob)>>,
        unknown: Vec<String>,
    },
}

/// Where a pass failed.
enum Failed {
    /// While reading job `i`: that job is bad.
    Job(usize),
    /// While skipping a job that an earlier pass found bad: the YAML itself is broken.
    Skipping,
}

#[derive(Default)]
struct Pass {
    failed: Option<Failed>,
}

struct DocSeed<'a> {
    skip: &'a BTreeSet<usize>,
    pass: &'a RefCell<Pass>,
}

impl<'de> DeserializeSeed<'de> for DocSeed<'_> {
    type Value = Doc;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Doc, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DocSeed<'_> {
    type Value = Doc;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping with a `jobs:` list")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Doc, E> {
        Ok(Doc::Empty)
    }

    fn visit_none<E: de::Error>(self) -> Result<Doc, E> {
        Ok(Doc::Empty)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Doc, A::Error> {
        let mut jobs = None;
        let mut unknown = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "jobs" {
                let seed = JobsSeed {
                    skip: self.skip,
                    pass: self.pass,
                };
                jobs = Some(map.next_value_seed(seed)?);
            } else {
                map.next_value::<IgnoredAny>()?;
                unknown.push(key);
            }
        }
        Ok(Doc::Map { jobs, unknown })
    }
}

struct JobsSeed<'a> {
    skip: &'a BTreeSet<usize>,
    pass: &'a RefCell<Pass>,
}

impl<'de> DeserializeSeed<'de> for JobsSeed<'_> {
    type Value = Vec<(usize, RawJob)>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for JobsSeed<'_> {
    type Value = Vec<(usize, RawJob)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of jobs")
    }

    /// `jobs:` with nothing after it: no jobs, like `jobs: []`.
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut jobs = Vec::new();
        for index in 0.. {
            let next = if self.skip.contains(&index) {
                seq.next_element::<IgnoredAny>()
                    .map(|item| item.map(|_| None))
                    .inspect_err(|_| self.pass.borrow_mut().failed = Some(Failed::Skipping))
            } else {
                seq.next_element::<RawJob>()
                    .map(|item| item.map(Some))
                    .inspect_err(|_| self.pass.borrow_mut().failed = Some(Failed::Job(index)))
            };
            match next? {
                None => break,
                Some(None) => {}
                Some(Some(job)) => jobs.push((index, job)),
            }
        }
        Ok(jobs)
    }
}
