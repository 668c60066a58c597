//! Where the shim's jobs come from: a crontab or a YAML job file, read and parsed.
//!
//! A file with some invalid lines still yields its valid jobs; each invalid one is reported as
//! `file:line: reason` and skipped, so one typo never stops every other job.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cronstable_core::schedule::Schedule;
use cronstable_core::{JobSpec, crontab, jobfile};

/// The file the shim reads its jobs from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobSource {
    /// A crontab (`--crontab FILE`).
    Crontab(PathBuf),
    /// A YAML job file (`--jobs FILE`).
    JobFile(PathBuf),
}

impl JobSource {
    /// The file's path.
    pub fn path(&self) -> &Path {
        match self {
            JobSource::Crontab(p) | JobSource::JobFile(p) => p,
        }
    }
}

/// A job with its parsed schedule.
#[derive(Debug, Clone)]
pub struct LoadedJob {
    /// The job (shared: the scheduler, the session and reloads hold the same one).
    pub spec: Arc<JobSpec>,
    /// Its schedule, parsed once.
    pub schedule: Schedule,
}

/// The current definition of the job named `name` among `jobs`.
pub fn job_named(jobs: &[LoadedJob], name: &str) -> Option<Arc<JobSpec>> {
    jobs.iter()
        .find(|j| j.spec.name == name)
        .map(|j| j.spec.clone())
}

/// The result of reading a job source.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Every valid job.
    pub jobs: Vec<LoadedJob>,
    /// One message per invalid line or job, `file:line: reason`.
    pub errors: Vec<String>,
    /// One message per valid job whose schedule will not fire for years (or ever), `file:line:
    /// job "name": reason`; the job still loads, as in cron.
    pub warnings: Vec<String>,
    /// The file's bytes, to notice changes.
    pub content: Vec<u8>,
}

/// A source file that could not be read at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}: {source}")]
pub struct ReadError {
    /// The file.
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub source: std::io::Error,
}

/// Reads and parses `source`.
pub fn load(source: &JobSource) -> Result<Loaded, ReadError> {
    let path = source.path();
    let content = std::fs::read(path).map_err(|e| ReadError {
        path: path.to_owned(),
        source: e,
    })?;
    Ok(parse(source, content))
}

/// Parses the bytes of `source`.
pub fn parse(source: &JobSource, content: Vec<u8>) -> Loaded {
    let name = source.path().display().to_string();
    let text = String::from_utf8_lossy(&content);
    let (specs, mut errors): (Vec<(JobSpec, usize)>, Vec<String>) = match source {
        JobSource::Crontab(_) => {
            let parsed = crontab::parse(&text, &name);
            (
                parsed
                    .entries
                    .into_iter()
                    .map(|e| (e.job, e.line))
                    .collect(),
                parsed.errors.iter().map(ToString::to_string).collect(),
            )
        }
        JobSource::JobFile(_) => {
            let parsed = jobfile::parse(&text, &name);
            (
                parsed
                    .entries
                    .into_iter()
                    .map(|e| (e.job, e.line))
                    .collect(),
                parsed.errors.iter().map(ToString::to_string).collect(),
            )
        }
    };
    let now = crate::clock::now();
    let mut jobs = Vec::with_capacity(specs.len());
    let mut warnings = Vec::new();
    for (spec, line) in specs {
        // The parsers already validated every schedule; a failure here would be a parser bug,
        // reported like any bad line rather than a panic.
        match Schedule::parse(&spec.schedule, spec.timezone.as_deref()) {
            Ok(schedule) => {
                if let Some(why) = schedule.idle_warning(now) {
                    warnings.push(format!(
                        "{name}:{line}: job {:?}: {why}; it is registered and will not run",
                        spec.name
                    ));
                }
                jobs.push(LoadedJob {
                    spec: Arc::new(spec),
                    schedule,
                });
            }
            Err(e) => errors.push(format!("{name}: job {:?}: {e}", spec.name)),
        }
    }
    Loaded {
        jobs,
        errors,
        warnings,
        content,
    }
}

/// Notices changes of the job file. A change is reported once two polls in a row read the same
/// bytes, so a file caught mid-write is never loaded half-written; a forced poll (SIGHUP)
/// reports it at once. Only the bytes are compared; the file is parsed only when it changed.
#[derive(Debug)]
pub struct FileWatch {
    content: Vec<u8>,
    /// Bytes seen once but not yet confirmed; empty after a failed read.
    candidate: Option<Vec<u8>>,
}

impl FileWatch {
    /// Watches a file whose current bytes are `content`.
    pub fn new(content: Vec<u8>) -> Self {
        Self {
            content,
            candidate: None,
        }
    }

    /// Reads `source` and returns its parsed jobs if it changed and settled.
    pub fn poll(&mut self, source: &JobSource, forced: bool) -> Option<Loaded> {
        let bytes = match std::fs::read(source.path()) {
            Ok(b) => b,
            Err(e) => {
                // Keep running the jobs we have: a file being replaced may be briefly missing.
                // Said once per outage (or on every SIGHUP), not on every poll.
                if forced || self.candidate.as_deref() != Some(&[]) {
                    let path = source.path().display();
                    tracing::error!("cannot read {path}: {e}; keeping the current jobs");
                }
                self.candidate = Some(Vec::new());
                return None;
            }
        };
        if bytes == self.content {
            self.candidate = None;
            return None;
        }
        if !forced && self.candidate.as_deref() != Some(&bytes[..]) {
            self.candidate = Some(bytes);
            return None;
        }
        self.candidate = None;
        self.content.clone_from(&bytes);
        Some(parse(source, bytes))
    }
}
