//! The filesystem store's "already ran" records for deferred `@reboot` one-shots (RBT-21,
//! LSE-FS-09): the append-only stream `<path>/<deploymentId>/cluster/reboot-ran`.
//!
//! One JSON line per newly ran job, `{"jobSetId": "...", "job": "..."}`, appended while
//! `cluster/reboot-ran.lock` is held with the store's flock. Readers take the union of lines
//! whose `jobSetId` is the live one. A line that does not parse (a writer that died mid-append
//! leaves a torn last line) is skipped, and the next append starts on a fresh line. Past
//! [`MAX_RECORDS`] lines the stream is rewritten atomically (temporary file, fsync, rename) with
//! only the newest [`MAX_RECORDS`], so it stays bounded however many job sets come and go.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{open_lock_file, store_err};
use crate::lease::LeaseError;

/// The newest records the stream keeps (LSE-FS-09).
pub const MAX_RECORDS: usize = 512;

/// One line of the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RebootRanLine {
    /// The job-set ID the one-shot ran under.
    pub job_set_id: String,
    /// The job whose one-shot ran.
    pub job: String,
}

/// The stream's path under the deployment directory (`<path>/<deploymentId>`).
pub fn stream_path(deployment_dir: &Path) -> PathBuf {
    deployment_dir.join("cluster").join("reboot-ran")
}

/// The stream's bytes, empty when it does not exist yet.
fn read_bytes(stream: &Path) -> Result<Vec<u8>, LeaseError> {
    match std::fs::read(stream) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(store_err("cannot read", stream, e)),
    }
}

/// Every line that parses, oldest first; torn or foreign lines are skipped.
fn parse(bytes: &[u8]) -> Vec<RebootRanLine> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect()
}

/// How long a reader or writer of the stream waits for its lock. The lease itself waits on
/// its own lock as long as the round allows; this record is not worth holding up the next
/// renewal for (the store's blocking calls run one at a time), so a peer that holds the lock
/// (SIGSTOPped mid-append, a dead NFS client) only costs this round's read or write.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// Takes the stream's lock, giving up after [`LOCK_PATIENCE`].
fn lock_briefly(stream: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, LeaseError> {
    // Counted in tries rather than read off a clock: the pause between tries is the unit.
    let pause = std::time::Duration::from_millis(20);
    let mut tries_left = LOCK_PATIENCE.as_millis() / pause.as_millis();
    loop {
        let (f, lock_path) = open_lock_file(stream)?;
        match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(guard) => return Ok(guard),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) if tries_left > 0 => {
                tries_left -= 1;
                std::thread::sleep(pause);
            }
            Err((_, e)) => {
                return Err(store_err(
                    "cannot lock",
                    &lock_path,
                    format!("{e} (held by another node for over {LOCK_PATIENCE:?})"),
                ));
            }
        }
    }
}

/// The jobs recorded under `job_set_id` (blocking; takes the stream's lock).
pub fn read_jobs(stream: &Path, job_set_id: &str) -> Result<BTreeSet<String>, LeaseError> {
    // A store where nothing was recorded yet has no `cluster/` directory, and the lock file
    // cannot be made in it: that is an empty record, not an unreadable one. A missing
    // deployment directory is a store that is gone, and stays an error.
    let dir = stream.parent().unwrap_or(stream);
    if !dir.exists() {
        let deployment = dir.parent().unwrap_or(dir);
        return if deployment.is_dir() {
            Ok(BTreeSet::new())
        } else {
            Err(store_err(
                "cannot read",
                deployment,
                "the store's directory is missing",
            ))
        };
    }
    let _guard = lock_briefly(stream)?;
    Ok(parse(&read_bytes(stream)?)
        .into_iter()
        .filter(|l| l.job_set_id == job_set_id)
        .map(|l| l.job)
        .collect())
}

/// Appends one record per job of `jobs` not yet recorded under `job_set_id`, then prunes the
/// stream to the newest [`MAX_RECORDS`] (blocking; takes the stream's lock).
pub fn append_jobs(
    stream: &Path,
    job_set_id: &str,
    jobs: &BTreeSet<String>,
) -> Result<(), LeaseError> {
    let dir = stream.parent().unwrap_or(stream);
    std::fs::create_dir_all(dir).map_err(|e| store_err("cannot create", dir, e))?;
    let _guard = lock_briefly(stream)?;
    let bytes = read_bytes(stream)?;
    let mut lines = parse(&bytes);
    let known: BTreeSet<&str> = lines
        .iter()
        .filter(|l| l.job_set_id == job_set_id)
        .map(|l| l.job.as_str())
        .collect();
    let fresh: Vec<RebootRanLine> = jobs
        .iter()
        .filter(|j| !known.contains(j.as_str()))
        .map(|job| RebootRanLine {
            job_set_id: job_set_id.to_owned(),
            job: job.clone(),
        })
        .collect();
    if fresh.is_empty() {
        return Ok(());
    }
    let mut appended = Vec::new();
    // A torn last line must not swallow the first new record.
    if bytes.last().is_some_and(|b| *b != b'\n') {
        appended.push(b'\n');
    }
    for line in &fresh {
        let mut json =
            serde_json::to_vec(line).map_err(|e| store_err("cannot encode", stream, e))?;
        json.push(b'\n');
        appended.extend(json);
    }
    lines.extend(fresh);
    if lines.len() > MAX_RECORDS {
        let keep = &lines[lines.len() - MAX_RECORDS..];
        return rewrite(stream, keep);
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(stream)
        .map_err(|e| store_err("cannot open", stream, e))?;
    f.write_all(&appended)
        .and_then(|()| f.sync_all())
        .map_err(|e| store_err("cannot append to", stream, e))
}

/// Replaces the stream with `lines` atomically.
fn rewrite(stream: &Path, lines: &[RebootRanLine]) -> Result<(), LeaseError> {
    let tmp = PathBuf::from(format!("{}.tmp", stream.display()));
    let mut body = Vec::new();
    for line in lines {
        body.extend(serde_json::to_vec(line).map_err(|e| store_err("cannot encode", stream, e))?);
        body.push(b'\n');
    }
    let mut f = std::fs::File::create(&tmp).map_err(|e| store_err("cannot write", &tmp, e))?;
    f.write_all(&body)
        .and_then(|()| f.sync_all())
        .map_err(|e| store_err("cannot write", &tmp, e))?;
    std::fs::rename(&tmp, stream).map_err(|e| store_err("cannot replace", stream, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_lock_held_elsewhere_costs_one_read_not_a_wedge() {
        let dir = tempfile::tempdir().unwrap();
        let deployment = dir.path().join("default");
        let stream = stream_path(&deployment);
        append_jobs(&stream, "v1:a", &jobs(&["migrate"])).unwrap();
        let held = lock_briefly(&stream).unwrap();
        let e = read_jobs(&stream, "v1:a").unwrap_err().to_string();
        assert!(e.contains("held by another node"), "{e}");
        drop(held);
        assert_eq!(read_jobs(&stream, "v1:a").unwrap(), jobs(&["migrate"]));
    }

    #[test]
    fn a_fresh_store_reads_as_no_records_and_a_missing_store_as_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let deployment = dir.path().join("default");
        std::fs::create_dir_all(&deployment).unwrap();
        assert_eq!(
            read_jobs(&stream_path(&deployment), "v1:a").unwrap(),
            BTreeSet::new()
        );
        let gone = dir.path().join("elsewhere");
        assert!(read_jobs(&stream_path(&gone), "v1:a").is_err());
    }

    #[test]
    fn lse_fs_09_stream_is_pruned_to_the_newest_512_records() {
        let dir = tempfile::tempdir().unwrap();
        let stream = stream_path(dir.path());
        for i in 0..600 {
            append_jobs(&stream, &format!("v1:{i}"), &jobs(&["job"])).unwrap();
        }
        let lines = parse(&std::fs::read(&stream).unwrap());
        assert_eq!(lines.len(), MAX_RECORDS);
        assert_eq!(
            lines[0].job_set_id, "v1:88",
            "the oldest 88 records were dropped"
        );
        assert!(read_jobs(&stream, "v1:87").unwrap().is_empty());
        assert_eq!(read_jobs(&stream, "v1:599").unwrap(), jobs(&["job"]));
    }

    #[test]
    fn lse_fs_09_torn_last_line_is_tolerated_and_not_glued_to_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let stream = stream_path(dir.path());
        append_jobs(&stream, "v1:a", &jobs(&["first"])).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&stream)
            .unwrap();
        f.write_all(br#"{"jobSetId":"v1:a","jo"#).unwrap();
        drop(f);
        assert_eq!(read_jobs(&stream, "v1:a").unwrap(), jobs(&["first"]));
        append_jobs(&stream, "v1:a", &jobs(&["second"])).unwrap();
        assert_eq!(
            read_jobs(&stream, "v1:a").unwrap(),
            jobs(&["first", "second"])
        );
        // Appending a job already recorded adds no line.
        let before = std::fs::read(&stream).unwrap().len();
        append_jobs(&stream, "v1:a", &jobs(&["first"])).unwrap();
        assert_eq!(std::fs::read(&stream).unwrap().len(), before);
    }
}
