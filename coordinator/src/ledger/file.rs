//! The run ledger on disk (`state.path`), so run history survives a coordinator restart.
//!
//! One JSON Lines file per node, `<state.path>/ledger-<node>.jsonl`: every ledger record is
//! appended as one line by a single writer task, so request handlers never wait on the disk.
//! At start the file is read back into the bounded in-memory ledger. A line that does not
//! parse (a torn last write after a crash, a hand edit) is skipped and counted in one WARNING:
//! it costs that record, never the rest. When the file outgrows [`COMPACT_AT`] it is rewritten
//! from the in-memory ledger (the newest records per job) through a temporary file and an
//! atomic rename, so a crash mid-compaction leaves the old file whole.
//!
//! Lines are written with `write_all` and flushed once the queue drains; they are not fsynced
//! one by one: a power cut may lose the last records, a process crash loses none already
//! written.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use tokio::sync::mpsc;

use super::codec::{decode, encode};
use crate::ledger::{Ledger, LedgerStore, LedgerStoreError, Record, WeakLedger};

/// The file size past which the ledger is compacted.
const COMPACT_AT: u64 = 32 * 1024 * 1024;
/// Records waiting for the writer; past this a burst is dropped from the file (not from memory)
/// with a WARNING rather than grow without bound while the disk is stuck.
const QUEUE: usize = 16 * 1024;

/// Why the ledger file could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LedgerFileError {
    /// The directory or file could not be created, read or opened for append.
    #[error("state.path: {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The ledger kept in files under a directory (`state.path`), one per node.
#[derive(Debug, Clone)]
pub struct FileLedger {
    dir: PathBuf,
}

impl FileLedger {
    /// The ledger files under `dir` (created at the first open).
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
        }
    }
}

#[tonic::async_trait]
impl LedgerStore for FileLedger {
    fn store_name(&self) -> &'static str {
        "file"
    }

    async fn open(&self, node: &str, ledger: &Ledger) -> Result<(), LedgerStoreError> {
        open(&self.dir, node, ledger).map_err(|e| LedgerStoreError::from(Box::new(e) as Box<_>))
    }
}

/// The file of `node`'s ledger under `dir`.
pub fn ledger_path(dir: &Path, node: &str) -> PathBuf {
    dir.join(format!("ledger-{}.jsonl", file_safe(node)))
}

/// A node name as part of a file name under `state.path`. A node name is a DNS-ish label;
/// anything else is replaced so it cannot leave the directory.
pub fn file_safe(node: &str) -> String {
    node.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LedgerFileError + '_ {
    move |source| LedgerFileError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Loads `path` into `ledger`; returns (records loaded, lines skipped).
fn load(path: &Path, ledger: &Ledger) -> Result<(usize, usize), LedgerFileError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(io_error(path)(e)),
    };
    let (mut loaded, mut skipped) = (0, 0);
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(io_error(path))?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match decode(&line) {
            Some(record) => {
                ledger.restore(record);
                loaded += 1;
            }
            None => skipped += 1,
        }
    }
    Ok((loaded, skipped))
}

/// Opens (creating) `dir`, loads `node`'s ledger file into `ledger`, and starts the writer
/// task that appends every later record. Call before anything records.
fn open(dir: &Path, node: &str, ledger: &Ledger) -> Result<(), LedgerFileError> {
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let path = ledger_path(dir, node);
    let (loaded, skipped) = load(&path, ledger)?;
    if skipped > 0 {
        tracing::warn!(
            path = %path.display(),
            skipped,
            "ledger: skipped unreadable lines (a torn write or a hand edit); the rest is loaded"
        );
    }
    tracing::info!(path = %path.display(), records = loaded, "ledger: history loaded");
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(io_error(&path))?;
    let (tx, rx) = mpsc::channel(QUEUE);
    ledger.set_sink(tx);
    let ledger = ledger.downgrade();
    std::thread::Builder::new()
        .name("ledger-writer".into())
        .spawn(move || write_all(path, file, rx, ledger))
        .map_err(io_error(dir))?;
    Ok(())
}

/// The writer: blocking file I/O on its own thread, ending when the last ledger handle (and
/// with it the sender) is dropped.
fn write_all(path: PathBuf, file: File, mut rx: mpsc::Receiver<Record>, ledger: WeakLedger) {
    let mut out = BufWriter::new(file);
    let mut failing = false;
    while let Some(first) = rx.blocking_recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let mut result = batch.iter().try_for_each(|r| {
            let mut line = encode(r);
            line.push(b'\n');
            out.write_all(&line)
        });
        if result.is_ok() {
            result = out.flush();
        }
        match result {
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(path = %path.display(), error = %e, "ledger: writing the history file failed; records stay in memory");
            }
            Ok(()) if failing => {
                failing = false;
                tracing::info!(path = %path.display(), "ledger: writing the history file works again");
            }
            _ => {}
        }
        if out.get_ref().metadata().is_ok_and(|m| m.len() > COMPACT_AT) {
            match compact(&path, &ledger) {
                Ok(file) => out = BufWriter::new(file),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "ledger: compaction failed; appending to the old file")
                }
            }
        }
    }
}

/// Rewrites the file from the in-memory ledger and returns the new file, open for append.
fn compact(path: &Path, ledger: &WeakLedger) -> std::io::Result<File> {
    let tmp = path.with_extension("jsonl.tmp");
    {
        let mut w = BufWriter::new(File::create(&tmp)?);
        for record in ledger.all_records() {
            let mut line = encode(&record);
            line.push(b'\n');
            w.write_all(&line)?;
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    OpenOptions::new().append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::conformance::{self, records};

    #[test]
    fn history_survives_a_restart_and_a_torn_line_costs_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = ledger_path(dir.path(), "n1");
        let mut text = String::new();
        for r in records() {
            text.push_str(std::str::from_utf8(&encode(&r)).unwrap());
            text.push('\n');
        }
        text.push_str("{\"job\":\"backup\",\"at\":1");
        std::fs::write(&path, text).unwrap();
        let ledger = Ledger::new();
        assert_eq!(load(&path, &ledger).unwrap(), (5, 1));
        assert_eq!(ledger.records("backup"), records());
    }

    #[test]
    fn node_names_cannot_escape_the_directory() {
        let p = ledger_path(Path::new("/state"), "../../etc/x");
        assert_eq!(p, Path::new("/state/ledger-.._.._etc_x.jsonl"));
    }

    #[tokio::test]
    async fn the_file_passes_the_ledger_store_suite() {
        let dir = tempfile::tempdir().unwrap();
        conformance::history_is_read_back_by_the_next_start(&FileLedger::new(dir.path())).await;
        let dir = tempfile::tempdir().unwrap();
        conformance::a_reopened_ledger_goes_on_after_its_history(&FileLedger::new(dir.path()))
            .await;
        let dir = tempfile::tempdir().unwrap();
        conformance::a_read_back_keeps_the_newest_records_per_job(&FileLedger::new(dir.path()))
            .await;
    }
}
