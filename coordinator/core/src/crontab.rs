//! The crontab file parser: cronie/Vixie syntax, plus `# cronstable:` annotations that carry
//! what a crontab cannot say (a job's name, cluster policy, timeout, retries).
//!
//! The format is a **per-user crontab** (what `crontab -e` edits), so a job line has no user
//! field. Line by line:
//!
//! - **Comments and blank lines.** A line whose first non-blank character is `#` is a comment.
//!   Line endings may be `\n` or `\r\n`.
//! - **Environment lines**, `NAME=value` (spaces around `=` allowed): the value has surrounding
//!   blanks trimmed and one pair of matching `'` or `"` quotes stripped; `NAME=` sets it empty.
//!   A setting applies to the job lines *after* it, so [`JobSpec::environment`] holds what is
//!   in force at the job's line. The name must be `[A-Za-z_][A-Za-z0-9_]*` (cronie also allows
//!   quoted names; nobody needs them). A line is an environment line when its first word
//!   contains `=` or its second word starts with `=`; no schedule field can, so the two kinds
//!   of line never blur. `SHELL` and `MAILTO` are plain variables here: cronstable runs every
//!   command with `/bin/sh -c` and does not send mail.
//! - **`CRON_TZ=Zone`** sets the IANA time zone of the schedules below it
//!   ([`JobSpec::timezone`]); `CRON_TZ=` goes back to UTC. It is not passed to commands. An
//!   unknown zone is an error on that line, and the jobs below keep the zone they had, so a
//!   typo never silently moves jobs to UTC. **`TZ=` is an ordinary variable** for the command,
//!   as in cronie: it changes how the command sees time, never when it runs.
//! - **Job lines**: a schedule (five fields, or an `@` alias including `@reboot`; see
//!   [`crate::schedule`]) then the command. Six fields cannot be told from five fields and a
//!   command, so the seconds-first form is used only when the annotation says `seconds=true`.
//!   A command that starts with `*` is refused, as cronie refuses it: it is nearly always a
//!   sixth schedule field written without that annotation.
//! - **`%` in a command**, exactly as cronie runs it: the first unescaped `%` ends the
//!   command; the rest becomes standard input ([`JobSpec::stdin`]), with each further
//!   unescaped `%` turned into a newline and a final newline added unless one is there. `\%`
//!   is a literal `%` (the backslash is dropped); other backslashes stay.
//!
//! # Annotations
//!
//! A comment `# cronstable: key=value ...` directly above a job line configures that job.
//! Consecutive annotation lines combine. Keys: `name`, `clusterPolicy`
//! (`Leader|PreferLeader|EveryNode`), `timeout` (e.g. `30s`, `10m`, `1h`, or bare seconds),
//! `retries` (at most [`MAX_RETRIES`]), `retryBackoff`, `retryBackoffMax`,
//! `concurrencyPolicy` (`Allow|Forbid|Replace`), `startingDeadline` (how late a firing may
//! still start, default 90s), `catchUp` (`none|latest|all`), `catchUpWindow`, `catchUpLimit`
//! (see [`crate::catch_up`]), `expect.completeWithin` and `expect.maxDuration` (see
//! [`crate::expect`]) and `seconds` (`true|false`). Durations use
//! [`crate::duration`], as the YAML job file does, and unset keys take the job file's
//! defaults. An unknown key, a repeated key or a bad value is an error on the annotation line,
//! and the job below it is then not loaded (an error on its line says so) rather than loaded
//! with settings it did not ask for. An annotation that is not directly followed by a job line
//! (a blank line, a comment or an environment line comes first, or the file ends) is an error
//! too: it would otherwise be silently ignored, and a dropped `clusterPolicy=EveryNode`
//! changes who runs a job.
//!
//! # Job names
//!
//! `name=` gives a job its name, `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`. Without one, the name is
//! derived from the line: a slug of the command's first word (its basename, lowercased, runs
//! of other characters turned into `-`, at most 24 characters) and the first 8 hex digits of
//! SHA-256 over the schedule (fields joined by single spaces) and the command as written. So
//! `/usr/local/bin/backup.sh --all` is named `backup-sh-` and 8 hex digits; the name survives
//! reordering lines and editing comments, and changes when the job does. Names are unique in
//! a file: a repeated name is an error on the later line, naming the earlier one.
//!
//! A line containing a NUL character is an error: no command or variable can carry one.
//!
//! [`parse`] never fails as a whole: each bad line becomes a [`LineError`] naming
//! `source:line`, and every valid line still loads.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::catch_up::{CatchUpKeys, policy_from};
use crate::duration::{format_duration, parse_duration};
use crate::job::{ClusterPolicy, ConcurrencyPolicy, JobSpec, MAX_RETRIES, RetryPolicy};
use crate::jobfile::{DEFAULT_RETRY_BACKOFF, DEFAULT_RETRY_BACKOFF_MAX, MAX_NAME_LEN};
use crate::schedule::Schedule;

/// One job of a crontab and the line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrontabEntry {
    /// The job.
    pub job: JobSpec,
    /// The 1-based line of its schedule line (not of its annotation).
    pub line: usize,
}

/// A line that could not be used. Displays as `{source}:{line}: {message}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// The file name, as given to [`parse`].
    pub source: String,
    /// The 1-based line.
    pub line: usize,
    /// What is wrong, and where it matters, what happened to the job.
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.source, self.line, self.message)
    }
}

impl std::error::Error for LineError {}

/// The jobs and the errors of one crontab, each in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedCrontab {
    /// Every job that loaded.
    pub entries: Vec<CrontabEntry>,
    /// Every line that did not.
    pub errors: Vec<LineError>,
}

/// True for a name an annotation (or the YAML job file) accepts:
/// `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && name.len() <= MAX_NAME_LEN
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The settings one block of annotation lines gives the job below it.
#[derive(Debug, Default)]
struct Annotation {
    /// The block's first line, where a "not followed by a job" error goes.
    line: usize,
    /// Some line of the block had an error, already reported: the job is not loaded.
    invalid: bool,
    /// Keys already set, so a repeat is caught across lines too.
    keys: Vec<String>,
    name: Option<String>,
    policy: Option<ClusterPolicy>,
    timeout: Option<Duration>,
    retries: Option<u32>,
    backoff: Option<Duration>,
    max_backoff: Option<Duration>,
    concurrency: Option<ConcurrencyPolicy>,
    starting_deadline: Option<Duration>,
    catch_up: CatchUpKeys,
    expect: crate::expect::Expectation,
    seconds: bool,
}

/// The annotation keys, for the unknown-key error.
const KEYS: &str = "name, clusterPolicy, timeout, retries, retryBackoff, retryBackoffMax, \
                    concurrencyPolicy, startingDeadline, catchUp, catchUpWindow, catchUpLimit, \
                    expect.completeWithin, expect.maxDuration, seconds";

impl Annotation {
    /// Adds one annotation line's `key=value` words; the problems found, if any.
    fn add(&mut self, body: &str) -> Vec<String> {
        let mut problems = Vec::new();
        for word in body.split_whitespace() {
            let Some((key, value)) = word.split_once('=') else {
                problems.push(format!("annotation `{word}` is not key=value"));
                continue;
            };
            if self.keys.iter().any(|k| k == key) {
                problems.push(format!("annotation key `{key}` is given twice"));
                continue;
            }
            self.keys.push(key.to_owned());
            if let Err(why) = self.set(key, value) {
                problems.push(format!("annotation `{key}={value}`: {why}"));
            }
        }
        problems
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "name" if is_valid_name(value) => self.name = Some(value.to_owned()),
            "name" => {
                return Err(format!(
                    "a name is 1 to {MAX_NAME_LEN} letters, digits, '.', '_' or '-', starting \
                     with a letter or digit"
                ));
            }
            "clusterPolicy" => self.policy = Some(value.parse().map_err(|e| format!("{e}"))?),
            "timeout" => match parse_duration(value)? {
                Duration::ZERO => {
                    return Err("must be more than 0 (leave it out for no limit)".into());
                }
                d => self.timeout = Some(d),
            },
            "retries" => match value.parse() {
                Ok(n) if n <= MAX_RETRIES => self.retries = Some(n),
                Ok(n) => return Err(format!("{n} is more than the limit of {MAX_RETRIES}")),
                Err(_) => return Err("expected a whole number".into()),
            },
            "startingDeadline" => match parse_duration(value)? {
                Duration::ZERO => {
                    return Err("must be more than 0 (leave it out for the default, 90s)".into());
                }
                d => self.starting_deadline = Some(d),
            },
            "catchUp" => self.catch_up.mode = Some(value.parse()?),
            "catchUpWindow" => self.catch_up.window = Some(parse_duration(value)?),
            "catchUpLimit" => match value.parse() {
                Ok(n) => self.catch_up.limit = Some(n),
                Err(_) => return Err("expected a whole number".into()),
            },
            "expect.completeWithin" => self.expect.complete_within = Some(parse_duration(value)?),
            "expect.maxDuration" => self.expect.max_duration = Some(parse_duration(value)?),
            "retryBackoff" => self.backoff = Some(parse_duration(value)?),
            "retryBackoffMax" => self.max_backoff = Some(parse_duration(value)?),
            "concurrencyPolicy" => {
                self.concurrency = Some(match value {
                    "Allow" => ConcurrencyPolicy::Allow,
                    "Forbid" => ConcurrencyPolicy::Forbid,
                    "Replace" => ConcurrencyPolicy::Replace,
                    _ => return Err("expected Allow, Forbid or Replace".into()),
                });
            }
            "seconds" => {
                self.seconds = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err("expected true or false".into()),
                };
            }
            _ => return Err(format!("unknown key `{key}` (known keys: {KEYS})")),
        }
        Ok(())
    }

    /// The retry policy, with the job file's defaults and its consistency rule.
    fn retry(&self) -> Result<RetryPolicy, String> {
        let backoff = self.backoff.unwrap_or(DEFAULT_RETRY_BACKOFF);
        let max_backoff = self.max_backoff.unwrap_or(DEFAULT_RETRY_BACKOFF_MAX);
        if !max_backoff.is_zero() && max_backoff < backoff {
            return Err(format!(
                "annotation retryBackoffMax {} is shorter than retryBackoff {} (0 means no cap)",
                format_duration(max_backoff),
                format_duration(backoff)
            ));
        }
        Ok(RetryPolicy {
            retries: self.retries.unwrap_or(0),
            backoff,
            max_backoff,
        })
    }
}

/// The text after `cronstable:` if `line` (already trimmed) is an annotation comment.
fn annotation_body(line: &str) -> Option<&str> {
    line.strip_prefix('#')?
        .trim_start()
        .strip_prefix("cronstable:")
}

/// Whether a non-comment line is an environment setting (see the module docs).
fn is_assignment(line: &str) -> bool {
    let mut words = line.split_whitespace();
    let first = words.next().unwrap_or("");
    !line.starts_with('@')
        && (first.contains('=') || words.next().is_some_and(|w| w.starts_with('=')))
}

/// `NAME=value`, or why it is not a valid setting.
fn parse_assignment(line: &str) -> Result<(String, String), String> {
    let (name, value) = line.split_once('=').unwrap_or((line, ""));
    let name = name.trim();
    let mut chars = name.chars();
    let valid = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "invalid environment variable name `{name}`: use letters, digits and _, not \
             starting with a digit"
        ));
    }
    let value = value.trim();
    let Some(quote) = value.chars().next().filter(|c| matches!(c, '\'' | '"')) else {
        return Ok((name.to_owned(), value.to_owned()));
    };
    match value[1..].split_once(quote) {
        Some((inner, "")) => Ok((name.to_owned(), inner.to_owned())),
        Some((_, rest)) => Err(format!(
            "`{name}`: unexpected `{rest}` after the closing {quote}"
        )),
        None => Err(format!(
            "`{name}`: the value's opening {quote} is never closed"
        )),
    }
}

/// Splits a command at its first unescaped `%` into the command and its standard input,
/// translated exactly as cronie's `do_command.c` does.
fn split_percent(raw: &str) -> (String, Option<String>) {
    let mut command = String::new();
    let mut chars = raw.chars();
    let mut escaped = false;
    let mut rest = None;
    while let Some(c) = chars.next() {
        if escaped {
            // `\%` keeps only the `%`; any other escaped character keeps its backslash.
            if c == '%' {
                command.pop();
            }
            command.push(c);
            escaped = false;
        } else if c == '%' {
            rest = Some(chars.as_str());
            break;
        } else {
            command.push(c);
            escaped = c == '\\';
        }
    }
    let stdin = rest.filter(|r| !r.is_empty()).map(|rest| {
        let mut input = String::new();
        let mut escaped = false;
        for c in rest.chars() {
            if escaped && c != '%' {
                input.push('\\');
            }
            let c = if !escaped && c == '%' { '\n' } else { c };
            escaped = c == '\\';
            if !escaped {
                input.push(c);
            }
        }
        if escaped {
            input.push('\\');
        }
        if !input.ends_with('\n') {
            input.push('\n');
        }
        input
    });
    (command, stdin)
}

/// The first `n` blank-separated fields of `line` and the rest after the blanks that follow
/// them; `None` if there are fewer fields.
fn split_fields(line: &str, n: usize) -> Option<(Vec<&str>, &str)> {
    let mut rest = line;
    let mut fields = Vec::with_capacity(n);
    for _ in 0..n {
        rest = rest.trim_start_matches([' ', '\t']);
        let end = rest.find([' ', '\t']).unwrap_or(rest.len());
        if end == 0 {
            return None;
        }
        fields.push(&rest[..end]);
        rest = &rest[end..];
    }
    Some((fields, rest.trim_start_matches([' ', '\t'])))
}

/// The name of a job without a `name=` annotation (see the module docs).
fn derived_name(schedule: &str, raw_command: &str, command: &str) -> String {
    let first = command.split_whitespace().next().unwrap_or("");
    let base = first.rsplit('/').next().unwrap_or(first);
    let mut slug = String::new();
    for c in base.chars() {
        match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => slug.push(c),
            _ if !slug.is_empty() && !slug.ends_with('-') => slug.push('-'),
            _ => {}
        }
    }
    slug.truncate(24);
    let slug = slug.trim_end_matches('-');
    let slug = if slug.is_empty() { "job" } else { slug };
    let digest = Sha256::digest(format!("{schedule}\n{raw_command}").as_bytes());
    format!("{slug}-{}", &hex::encode(digest)[..8])
}

/// What the parser carries from line to line.
struct State<'a> {
    source: &'a str,
    out: ParsedCrontab,
    env: BTreeMap<String, String>,
    tz: Option<String>,
    pending: Option<Annotation>,
    /// Job name → the line that first used it.
    names: HashMap<String, usize>,
}

impl State<'_> {
    fn error(&mut self, line: usize, message: String) {
        self.out.errors.push(LineError {
            source: self.source.to_owned(),
            line,
            message,
        });
    }

    /// The pending annotation, if any, applies to nothing: say so (unless it already failed).
    fn drop_annotation(&mut self) {
        if let Some(a) = self.pending.take()
            && !a.invalid
        {
            let message = "annotation is not directly followed by a job line, so it applies to \
                           nothing"
                .to_owned();
            self.error(a.line, message);
        }
    }

    fn annotation(&mut self, line_no: usize, body: &str) {
        let mut a = self.pending.take().unwrap_or_else(|| Annotation {
            line: line_no,
            ..Annotation::default()
        });
        let problems = a.add(body);
        if !problems.is_empty() {
            a.invalid = true;
            self.error(line_no, problems.join("; "));
        }
        self.pending = Some(a);
    }

    fn assignment(&mut self, line_no: usize, line: &str) {
        let (name, value) = match parse_assignment(line) {
            Ok(pair) => pair,
            Err(why) => return self.error(line_no, why),
        };
        if name != "CRON_TZ" {
            self.env.insert(name, value);
        } else if value.is_empty() {
            self.tz = None;
        } else if value.parse::<chrono_tz::Tz>().is_ok() {
            self.tz = Some(value);
        } else {
            let keep = self.tz.as_deref().unwrap_or("UTC");
            let message = format!(
                "CRON_TZ: unknown time zone `{value}` (expected an IANA name such as \
                 Europe/Berlin); the jobs below stay in {keep}"
            );
            self.error(line_no, message);
        }
    }

    fn job(&mut self, line_no: usize, line: &str) {
        let annotation = self.pending.take().unwrap_or_default();
        if annotation.invalid {
            let first = annotation.line;
            let message = format!("job not loaded: its annotation (line {first}) is invalid");
            return self.error(line_no, message);
        }
        match self.build(line, &annotation) {
            Err(message) => self.error(line_no, message),
            Ok(job) => match self.names.get(&job.name) {
                Some(first) => {
                    let message = format!(
                        "job name `{}` is already used by the job on line {first}; give one of \
                         them a `# cronstable: name=...` annotation",
                        job.name
                    );
                    self.error(line_no, message);
                }
                None => {
                    self.names.insert(job.name.clone(), line_no);
                    self.out.entries.push(CrontabEntry { job, line: line_no });
                }
            },
        }
    }

    fn build(&self, line: &str, a: &Annotation) -> Result<JobSpec, String> {
        let alias = line.starts_with('@');
        if alias && a.seconds {
            return Err(
                "annotation seconds=true needs a six-field schedule, not an @ alias".into(),
            );
        }
        let count = if alias {
            1
        } else if a.seconds {
            6
        } else {
            5
        };
        let Some((fields, raw_command)) = split_fields(line, count) else {
            return Err(format!(
                "expected {count} schedule field(s), then a command"
            ));
        };
        let schedule = fields.join(" ");
        let parsed = Schedule::parse(&schedule, self.tz.as_deref()).map_err(|e| e.to_string())?;
        if raw_command.is_empty() {
            return Err(format!("no command after the schedule `{schedule}`"));
        }
        if raw_command.starts_with('*') {
            let hint = if a.seconds {
                "like a seventh schedule field; there is no year field"
            } else {
                "like a sixth schedule field; for a seconds-first schedule put \
                 `# cronstable: seconds=true` on the line above"
            };
            return Err(format!("the command starts with `*`, which looks {hint}"));
        }
        let (command, stdin) = split_percent(raw_command);
        if command.trim().is_empty() {
            return Err(
                "the command is empty: everything after an unescaped `%` is its input".into(),
            );
        }
        let name = match &a.name {
            Some(name) => name.clone(),
            None => derived_name(&schedule, raw_command, &command),
        };
        let mut job = JobSpec::new(name, schedule, command);
        job.stdin = stdin;
        job.timezone = self.tz.clone();
        job.environment = self.env.clone();
        job.cluster_policy = a.policy.unwrap_or_default();
        job.timeout = a.timeout;
        job.retry = a.retry()?;
        job.concurrency_policy = a.concurrency.unwrap_or_default();
        job.starting_deadline = a.starting_deadline;
        job.catch_up = policy_from(
            a.catch_up,
            &parsed,
            job.cluster_policy,
            job.starting_deadline(),
        )
        .map_err(annotation_problems)?;
        job.expect =
            crate::expect::expectation_from(a.expect, &parsed).map_err(annotation_problems)?;
        Ok(job)
    }
}

/// A check's problems as one sentence on the annotation's job line.
fn annotation_problems(problems: Vec<(&'static str, String)>) -> String {
    let said: Vec<String> = problems
        .into_iter()
        .map(|(key, why)| format!("annotation {key}: {why}"))
        .collect();
    said.join("; ")
}

/// Parses the crontab `text`; `source` names the file in errors. Never fails as a whole:
/// invalid lines become [`LineError`]s and every valid line still loads.
pub fn parse(text: &str, source: &str) -> ParsedCrontab {
    let mut state = State {
        source,
        out: ParsedCrontab::default(),
        env: BTreeMap::new(),
        tz: None,
        pending: None,
        names: HashMap::new(),
    };
    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.trim_start();
        if let Some(body) = annotation_body(line.trim_end()) {
            state.annotation(line_no, body);
        } else if line.trim_end().is_empty() || line.starts_with('#') {
            state.drop_annotation();
        } else if line.contains('\0') {
            // No command or environment can carry a NUL through exec; refuse it here, where
            // the error can name the line, rather than when the job first runs.
            state.drop_annotation();
            state.error(line_no, "the line contains a NUL character".to_owned());
        } else if is_assignment(line) {
            state.drop_annotation();
            state.assignment(line_no, line);
        } else {
            state.job(line_no, line);
        }
    }
    state.drop_annotation();
    state.out
}
