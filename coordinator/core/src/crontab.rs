//! The crontab file parser: cronie/Vixie compatible, with cronstable annotations.
//!
//! The format is a per-user crontab (what `crontab -e` edits): no user field.
//!
//! - Blank lines and lines whose first non-blank character is `#` are comments.
//! - `NAME=value` lines (spaces around `=` allowed, value optionally in single or double
//!   quotes) set an environment variable for every job line after them. `CRON_TZ=Zone` sets the
//!   time zone the following schedules are evaluated in (it is not passed to the command; an
//!   unknown zone is an error on that line and the previous zone stays). `TZ=` is an ordinary
//!   variable for the command, as in cronie.
//! - A job line is a schedule (five fields, or an `@` alias) and a command. In the command, the
//!   first unescaped `%` ends the command; the rest is fed to its standard input, with each
//!   further unescaped `%` turned into a newline and a final newline added (as cronie does);
//!   `\%` is a literal `%`.
//! - An annotation comment directly above a job line configures that job:
//!   `# cronstable: name=charge-cards clusterPolicy=Leader timeout=30s retries=2
//!   retryBackoff=10s retryBackoffMax=5m concurrencyPolicy=Forbid seconds=true`.
//!   `seconds=true` makes the first six fields the schedule (seconds first); six fields cannot
//!   be told apart from five fields and a command otherwise. An annotation that is not directly
//!   followed by a job line is an error, so a misplaced one is never silently ignored.
//! - Without a `name`, a job is named from its line: a slug of the command's first word and the
//!   first 8 hex digits of SHA-256 over the schedule and command as written, so the name
//!   survives reordering and comment edits, and changes when the job itself changes.
//!
//! Parsing never fails as a whole: each bad line is a [`LineError`] naming `source:line`, and
//! every valid line still loads.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use sha2::{Digest, Sha256};

use crate::duration::parse_duration;
use crate::job::{ClusterPolicy, ConcurrencyPolicy, JobSpec, MAX_RETRIES};
use crate::jobfile::{DEFAULT_RETRY_BACKOFF, DEFAULT_RETRY_BACKOFF_MAX};
use crate::schedule::Schedule;

/// One job and the line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrontabEntry {
    /// The job.
    pub job: JobSpec,
    /// The 1-based line of its schedule line.
    pub line: usize,
}

/// A line that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// The file name, as given to [`parse`].
    pub source: String,
    /// The 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.source, self.line, self.message)
    }
}

/// The jobs and errors of one crontab.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedCrontab {
    /// Every valid job, in file order.
    pub entries: Vec<CrontabEntry>,
    /// Every invalid line, in file order.
    pub errors: Vec<LineError>,
}

/// The settings an annotation comment gives the job below it.
#[derive(Debug, Default)]
struct Annotation {
    line: usize,
    name: Option<String>,
    policy: Option<ClusterPolicy>,
    timeout: Option<std::time::Duration>,
    retries: Option<u32>,
    backoff: Option<std::time::Duration>,
    max_backoff: Option<std::time::Duration>,
    concurrency: Option<ConcurrencyPolicy>,
    seconds: bool,
}

const ANNOTATION: &str = "cronstable:";

/// True for a name the job file and annotations accept: `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && name.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn parse_annotation(body: &str, line: usize) -> Result<Annotation, String> {
    let mut a = Annotation {
        line,
        ..Annotation::default()
    };
    for pair in body.split_whitespace() {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("annotation item {pair:?} is not key=value"))?;
        let bad = |what: &str| format!("annotation {key}={value:?}: {what}");
        match key {
            "name" if is_valid_name(value) => a.name = Some(value.to_owned()),
            "name" => return Err(bad("names are [A-Za-z0-9][A-Za-z0-9._-]{0,127}")),
            "clusterPolicy" => a.policy = Some(value.parse().map_err(|e| bad(&format!("{e}")))?),
            "timeout" => a.timeout = Some(parse_duration(value).map_err(|e| bad(&e))?),
            "retries" => {
                let n: u32 = value.parse().map_err(|_| bad("expected a whole number"))?;
                if n > MAX_RETRIES {
                    return Err(bad(&format!("at most {MAX_RETRIES}")));
                }
                a.retries = Some(n);
            }
            "retryBackoff" => a.backoff = Some(parse_duration(value).map_err(|e| bad(&e))?),
            "retryBackoffMax" => a.max_backoff = Some(parse_duration(value).map_err(|e| bad(&e))?),
            "concurrencyPolicy" => {
                a.concurrency = Some(match value {
                    "Allow" => ConcurrencyPolicy::Allow,
                    "Forbid" => ConcurrencyPolicy::Forbid,
                    "Replace" => ConcurrencyPolicy::Replace,
                    _ => return Err(bad("expected Allow, Forbid or Replace")),
                })
            }
            "seconds" => {
                a.seconds = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad("expected true or false")),
                }
            }
            _ => {
                return Err(format!(
                    "unknown annotation key {key:?}: expected name, clusterPolicy, timeout, \
                     retries, retryBackoff, retryBackoffMax, concurrencyPolicy or seconds"
                ));
            }
        }
    }
    Ok(a)
}

/// `NAME=value` with an optional quoted value; `None` if the line is not an assignment.
fn parse_assignment(line: &str) -> Option<(String, String)> {
    let (name, value) = line.split_once('=')?;
    let name = name.trim();
    let valid = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !valid {
        return None;
    }
    let value = value.trim();
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
        .unwrap_or(value);
    Some((name.to_owned(), unquoted.to_owned()))
}

/// Splits a crontab command at its first unescaped `%`: the command, and the stdin text.
fn split_percent(raw: &str) -> (String, Option<String>) {
    let mut command = String::new();
    let mut stdin: Option<String> = None;
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' && stdin.is_none() {
            stdin = Some(String::new());
            continue;
        }
        let target = stdin.as_mut().unwrap_or(&mut command);
        match c {
            '\\' if chars.peek() == Some(&'%') => {
                chars.next();
                target.push('%');
            }
            '%' => target.push('\n'),
            c => target.push(c),
        }
    }
    (command, stdin.map(|s| s + "\n"))
}

/// Splits off the first `n` whitespace-separated fields; the rest (trimmed) is the command.
fn split_fields(line: &str, n: usize) -> Option<(Vec<&str>, &str)> {
    let mut rest = line.trim_start();
    let mut fields = Vec::with_capacity(n);
    for _ in 0..n {
        let end = rest.find(char::is_whitespace)?;
        fields.push(&rest[..end]);
        rest = rest[end..].trim_start();
    }
    Some((fields, rest.trim_end()))
}

fn derived_name(schedule: &str, command: &str) -> String {
    let first = command.split_whitespace().next().unwrap_or("job");
    let base = first.rsplit('/').next().unwrap_or(first);
    let mut slug: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    slug = slug.trim_matches('-').chars().take(24).collect();
    if slug.is_empty() {
        slug.push_str("job");
    }
    let digest = Sha256::digest(format!("{schedule}\n{command}").as_bytes());
    format!("{slug}-{}", &hex::encode(digest)[..8])
}

/// Parses a crontab; `source` names the file in errors.
pub fn parse(text: &str, source: &str) -> ParsedCrontab {
    let mut out = ParsedCrontab::default();
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let mut tz: Option<String> = None;
    let mut pending: Option<Annotation> = None;
    let mut seen: HashMap<String, usize> = HashMap::new();
    let error = |out: &mut ParsedCrontab, line: usize, message: String| {
        out.errors.push(LineError {
            source: source.to_owned(),
            line,
            message,
        })
    };

    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            if let Some(a) = pending.take() {
                error(
                    &mut out,
                    a.line,
                    "annotation is not directly followed by a job line".into(),
                );
            }
            if let Some(body) = line.strip_prefix('#').map(str::trim)
                && let Some(body) = body.strip_prefix(ANNOTATION)
            {
                match parse_annotation(body, line_no) {
                    Ok(a) => pending = Some(a),
                    Err(m) => {
                        error(&mut out, line_no, m);
                        // Keep a marker so the job below it is not loaded with defaults.
                        pending = Some(Annotation {
                            line: line_no,
                            name: Some(String::new()),
                            ..Annotation::default()
                        });
                    }
                }
            }
            continue;
        }
        if !line.starts_with('@')
            && let Some((name, value)) = parse_assignment(line)
        {
            if let Some(a) = pending.take() {
                error(
                    &mut out,
                    a.line,
                    "annotation is not directly followed by a job line".into(),
                );
            }
            if name == "CRON_TZ" {
                match Schedule::parse("@daily", Some(&value)) {
                    Ok(_) => tz = Some(value),
                    Err(e) => error(&mut out, line_no, format!("CRON_TZ: {e}")),
                }
            } else {
                env.insert(name, value);
            }
            continue;
        }

        let annotation = pending.take();
        if annotation
            .as_ref()
            .is_some_and(|a| a.name.as_deref() == Some(""))
        {
            error(
                &mut out,
                line_no,
                "job not loaded because its annotation is invalid".into(),
            );
            continue;
        }
        let seconds = annotation.as_ref().is_some_and(|a| a.seconds);
        let field_count = if line.starts_with('@') {
            1
        } else if seconds {
            6
        } else {
            5
        };
        let Some((fields, raw_command)) = split_fields(line, field_count) else {
            error(
                &mut out,
                line_no,
                format!("expected {field_count} schedule field(s) and a command"),
            );
            continue;
        };
        if raw_command.is_empty() {
            error(&mut out, line_no, "the command is empty".into());
            continue;
        }
        let schedule = fields.join(" ");
        if let Err(e) = Schedule::parse(&schedule, tz.as_deref()) {
            error(&mut out, line_no, e.to_string());
            continue;
        }
        let (command, stdin) = split_percent(raw_command);
        let mut job = JobSpec::new(String::new(), schedule, command.trim_end().to_owned());
        job.stdin = stdin;
        job.timezone = tz.clone();
        job.environment = env.clone();
        job.name = match annotation.as_ref().and_then(|a| a.name.clone()) {
            Some(n) => n,
            None => derived_name(&job.schedule, raw_command),
        };
        if let Some(a) = annotation {
            job.cluster_policy = a.policy.unwrap_or_default();
            job.timeout = a.timeout;
            job.concurrency_policy = a.concurrency.unwrap_or_default();
            job.retry.retries = a.retries.unwrap_or(0);
            job.retry.backoff = a.backoff.unwrap_or(DEFAULT_RETRY_BACKOFF);
            job.retry.max_backoff = a.max_backoff.unwrap_or(DEFAULT_RETRY_BACKOFF_MAX);
        } else {
            job.retry.backoff = DEFAULT_RETRY_BACKOFF;
            job.retry.max_backoff = DEFAULT_RETRY_BACKOFF_MAX;
        }
        if let Some(first) = seen.get(&job.name) {
            error(
                &mut out,
                line_no,
                format!("job name {:?} is already used on line {first}", job.name),
            );
            continue;
        }
        seen.insert(job.name.clone(), line_no);
        out.entries.push(CrontabEntry { job, line: line_no });
    }
    if let Some(a) = pending {
        error(
            &mut out,
            a.line,
            "annotation is not directly followed by a job line".into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_splits_command_and_stdin() {
        assert_eq!(
            split_percent("mail -s hi root%line one%line two"),
            (
                "mail -s hi root".to_owned(),
                Some("line one\nline two\n".to_owned())
            )
        );
        assert_eq!(split_percent(r"date +\%s"), ("date +%s".to_owned(), None));
        assert_eq!(split_percent("echo"), ("echo".to_owned(), None));
    }

    #[test]
    fn assignments_strip_quotes_and_allow_spaces() {
        assert_eq!(
            parse_assignment("A = 'x y'"),
            Some(("A".into(), "x y".into()))
        );
        assert_eq!(
            parse_assignment("PATH=/bin:/usr/bin"),
            Some(("PATH".into(), "/bin:/usr/bin".into()))
        );
        assert_eq!(parse_assignment("* * * * * a=b"), None);
    }

    #[test]
    fn derived_names_are_stable_and_change_with_the_job() {
        let a = derived_name("0 * * * *", "/usr/local/bin/backup.sh --all");
        assert!(a.starts_with("backup-sh-"), "{a}");
        assert_eq!(
            a,
            derived_name("0 * * * *", "/usr/local/bin/backup.sh --all")
        );
        assert_ne!(
            a,
            derived_name("5 * * * *", "/usr/local/bin/backup.sh --all")
        );
        assert!(is_valid_name(&a));
    }
}
