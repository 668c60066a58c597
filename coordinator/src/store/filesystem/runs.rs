//! Run records on the filesystem store ([`crate::lease::run_records`]): one small JSON file per
//! run of a job with `expect:`.
//!
//! ```text
//! <path>/<deploymentId or "default">/cluster/runs/<scheduledAtMs>@<job>@<node>@<attempt>.json
//! ```
//!
//! Only the node that ran a run writes its file: whole, to a hidden temporary file, then
//! renamed over the name, so a reader sees the start or the end, never half of either. The
//! name starts with the instant, so a read or a prune lists names and opens only the files of
//! the instants it wants.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::claims::{dir_below, encode};
use super::{FilesystemStore, store_err};
use crate::lease::LeaseError;
use crate::lease::run_records::{RunRecord, RunRecordStore};

/// Makes temporary names unique within this process.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// The file name of a run's record.
fn file_name(run: &RunRecord) -> String {
    format!(
        "{}@{}@{}@{}.json",
        run.scheduled_at_ms,
        encode(&run.job),
        encode(&run.node),
        run.attempt
    )
}

/// The instant a record's file name starts with; `None` for anything else (a temporary file).
fn instant_of(name: &str) -> Option<i64> {
    let (at, rest) = name.split_once('@')?;
    rest.ends_with(".json").then(|| at.parse().ok())?
}

fn put(root: &Path, dir: &Path, run: &RunRecord) -> Result<(), LeaseError> {
    dir_below(root, dir)?;
    let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let temporary = dir.join(format!(".run-{}-{n}", std::process::id()));
    let target = dir.join(file_name(run));
    let body = serde_json::to_vec(run).expect("a run record serialises");
    let written = File::create(&temporary)
        .and_then(|mut f| f.write_all(&body))
        .and_then(|()| std::fs::rename(&temporary, &target))
        .map_err(|e| store_err("cannot write the run record", &target, e));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// The names in `dir` with their instants; nothing when it does not exist yet.
fn listed(dir: &Path) -> Result<Vec<(String, i64)>, LeaseError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(store_err("cannot list", dir, e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| store_err("cannot list", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(at) = instant_of(&name) {
            found.push((name, at));
        }
    }
    Ok(found)
}

fn between(dir: &Path, from_ms: i64, to_ms: i64) -> Result<Vec<RunRecord>, LeaseError> {
    let mut runs = Vec::new();
    for (name, at) in listed(dir)? {
        if !(from_ms..=to_ms).contains(&at) {
            continue;
        }
        // Gone since the listing (pruned) or undecodable: no data.
        if let Ok(bytes) = std::fs::read(dir.join(&name))
            && let Ok(run) = serde_json::from_slice::<RunRecord>(&bytes)
        {
            runs.push(run);
        }
    }
    Ok(runs)
}

/// Removes the records of instants before `before_ms`, and temporary files a writer that died
/// mid-write left (older than an hour).
fn prune(dir: &Path, before_ms: i64) -> Result<usize, LeaseError> {
    let mut removed = 0;
    for (name, at) in listed(dir)? {
        if at < before_ms && std::fs::remove_file(dir.join(name)).is_ok() {
            removed += 1;
        }
    }
    let stale = |e: &std::fs::DirEntry| {
        e.metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > std::time::Duration::from_secs(3600))
    };
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.filter_map(Result::ok) {
            if e.file_name().to_string_lossy().starts_with(".run-") && stale(&e) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(removed)
}

impl FilesystemStore {
    fn runs_dir(&self) -> PathBuf {
        self.leases
            .parent()
            .unwrap_or(&self.root)
            .join("cluster")
            .join("runs")
    }
}

#[tonic::async_trait]
impl RunRecordStore for FilesystemStore {
    async fn put_run(&mut self, run: &RunRecord) -> Result<(), LeaseError> {
        let (root, dir, run) = (self.root.clone(), self.runs_dir(), run.clone());
        self.blocking(move || put(&root, &dir, &run)).await
    }

    async fn runs_between(
        &mut self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<RunRecord>, LeaseError> {
        let dir = self.runs_dir();
        self.blocking(move || between(&dir, from_ms, to_ms)).await
    }

    async fn prune_runs(&mut self, before_ms: i64) -> Result<usize, LeaseError> {
        let dir = self.runs_dir();
        self.blocking(move || prune(&dir, before_ms)).await
    }
}
