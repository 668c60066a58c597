//! `jobs:`: a job file the coordinator loads itself, for executors that register nothing.
//!
//! `cronstable-gate` is started by an unchanged crond, so no shim registers its jobs; without
//! them the job-set ID would not cover what the node runs and peers could not compare it. The
//! config names the file crond reads (with its `# cronstable:` annotations), and the
//! coordinator registers its jobs at start under [`JobsConfig::executor_id`].
//!
//! ```yaml
//! jobs:
//!   systemCrontab: /etc/cron.d/app    # cron.d format: a user name after the schedule
//!   # or  crontab: /var/spool/cron/crontabs/app   (per-user format, no user field)
//!   # or  jobFile: /etc/cronstable/jobs.yaml       (the shim's YAML job file)
//! ```
//!
//! The file is parsed with the shim's own reader, so both sides agree on every job. Unlike the
//! shim, which skips a bad line and runs the rest, any error here fails the config: a node that
//! silently dropped one job would attest a job set its peers do not share.

use std::path::{Path, PathBuf};

use cronstable_core::JobSpec;
use cronstable_shim::schedule::source::{self, JobSource};

/// Which parser reads the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobFileFormat {
    /// A per-user crontab (`jobs.crontab`).
    Crontab,
    /// A system crontab, `/etc/crontab` or `/etc/cron.d/*` (`jobs.systemCrontab`): job lines
    /// have a user field, which is dropped before parsing.
    SystemCrontab,
    /// A YAML job file (`jobs.jobFile`).
    JobFile,
}

impl JobFileFormat {
    /// The config key that selects this format.
    pub fn key(self) -> &'static str {
        match self {
            Self::Crontab => "crontab",
            Self::SystemCrontab => "systemCrontab",
            Self::JobFile => "jobFile",
        }
    }
}

/// `jobs:`, with the file already read and parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobsConfig {
    /// The file, as written in the config.
    pub path: PathBuf,
    /// How it is parsed.
    pub format: JobFileFormat,
    /// Its jobs.
    pub specs: Vec<JobSpec>,
}

impl JobsConfig {
    /// The reserved executor id the jobs are registered under (`config:PATH`), which no shim
    /// or gate uses, so a registration of theirs never replaces these jobs.
    pub fn executor_id(&self) -> String {
        format!("config:{}", self.path.display())
    }
}

/// What a job file that loaded holds: its jobs, and a warning (`file:line: job "name":
/// reason`) for each whose schedule will not fire for years or ever.
pub type LoadedJobs = (Vec<JobSpec>, Vec<String>);

/// Reads and parses `path` as `format`: every job with its warnings, or every problem as
/// `file:line: reason`.
pub fn load(path: &Path, format: JobFileFormat) -> Result<LoadedJobs, Vec<String>> {
    let bytes = std::fs::read(path)
        .map_err(|e| vec![format!("cannot read the job file {}: {e}", path.display())])?;
    let (source, bytes) = match format {
        JobFileFormat::Crontab => (JobSource::Crontab(path.to_owned()), bytes),
        JobFileFormat::SystemCrontab => {
            let text = String::from_utf8_lossy(&bytes);
            let per_user = drop_user_fields(&text);
            (JobSource::Crontab(path.to_owned()), per_user.into_bytes())
        }
        JobFileFormat::JobFile => (JobSource::JobFile(path.to_owned()), bytes),
    };
    let loaded = source::parse(&source, bytes);
    if loaded.errors.is_empty() {
        Ok((
            loaded.jobs.iter().map(|j| (*j.spec).clone()).collect(),
            loaded.warnings,
        ))
    } else {
        Err(loaded.errors)
    }
}

/// Turns a system crontab into a per-user one by dropping the user field of every job line,
/// keeping line numbers, comments and environment lines as they are, so parse errors still
/// point at the right line of the real file.
pub fn drop_user_fields(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        out.push_str(&drop_user_field(line));
    }
    out
}

fn drop_user_field(line: &str) -> String {
    let trimmed = line.trim_start();
    let words: Vec<(usize, &str)> = word_spans(line);
    let is_env = words.first().is_some_and(|(_, w)| w.contains('='))
        || words.get(1).is_some_and(|(_, w)| w.starts_with('='));
    if trimmed.is_empty() || trimmed.starts_with('#') || is_env {
        return line.to_owned();
    }
    // The user is the word after the schedule: after an `@alias`, or after five fields.
    let user = if words[0].1.starts_with('@') { 1 } else { 5 };
    match (words.get(user), words.get(user + 1)) {
        (Some(&(start, _)), Some(&(next, _))) => format!("{}{}", &line[..start], &line[next..]),
        // Too short to have a user and a command: leave it for the parser to report.
        _ => line.to_owned(),
    }
}

/// The blank-separated words of `line` with their byte offsets.
fn word_spans(line: &str) -> Vec<(usize, &str)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                spans.push((s, &line[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, &line[s..]));
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_field_is_dropped_from_job_lines_only() {
        let system = "\
# cronstable: name=charge
0 * * * * app  cronstable-gate charge -- ./charge.sh --all
@hourly root /bin/true
MAILTO=ops
PATH = /usr/bin

";
        let per_user = "\
# cronstable: name=charge
0 * * * * cronstable-gate charge -- ./charge.sh --all
@hourly /bin/true
MAILTO=ops
PATH = /usr/bin

";
        assert_eq!(drop_user_fields(system), per_user);
    }

    #[test]
    fn a_system_crontab_loads_the_same_jobs_as_its_per_user_twin() {
        let dir = tempfile::tempdir().unwrap();
        let system = dir.path().join("app");
        let user = dir.path().join("app.user");
        std::fs::write(
            &system,
            "# cronstable: name=charge clusterPolicy=Leader\n0 * * * * app cronstable-gate charge -- ./c.sh\n",
        )
        .unwrap();
        std::fs::write(
            &user,
            "# cronstable: name=charge clusterPolicy=Leader\n0 * * * * cronstable-gate charge -- ./c.sh\n",
        )
        .unwrap();
        let (a, _) = load(&system, JobFileFormat::SystemCrontab).unwrap();
        let (b, _) = load(&user, JobFileFormat::Crontab).unwrap();
        assert_eq!(a, b);
        assert_eq!(a[0].name, "charge");
        assert_eq!(a[0].command, "cronstable-gate charge -- ./c.sh");
    }

    #[test]
    fn any_bad_line_fails_the_whole_file_naming_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app");
        std::fs::write(&path, "0 * * * * /bin/true\n61 * * * * /bin/false\n").unwrap();
        let errors = load(&path, JobFileFormat::Crontab).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains(&format!("{}:2", path.display())),
            "{errors:?}"
        );
        let missing = load(&dir.path().join("nope"), JobFileFormat::JobFile).unwrap_err();
        assert!(
            missing[0].contains("cannot read the job file"),
            "{missing:?}"
        );
    }
}
