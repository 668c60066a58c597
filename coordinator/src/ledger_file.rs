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

use cronstable_core::{FiringKind, Reason, Verdict};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::ledger::{Event, Ledger, Record, WeakLedger};

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

/// One record as a line: codes as strings, so the file reads well and survives enum changes.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    job: String,
    at: i64,
    kind: String,
    attempt: u32,
    node: String,
    rec: i64,
    ev: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    verdict: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dur: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signal: Option<i32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    timed_out: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    remaining: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    transferred: bool,
}

fn kind_code(kind: FiringKind) -> &'static str {
    match kind {
        FiringKind::Scheduled => "scheduled",
        FiringKind::Reboot => "reboot",
        FiringKind::Retry { .. } => "retry",
        FiringKind::Manual => "manual",
    }
}

fn reason_of(code: &str) -> Option<Reason> {
    Reason::ALL.into_iter().find(|r| r.code() == code)
}

fn verdict_of(code: &str) -> Option<Verdict> {
    [Verdict::Run, Verdict::Skip, Verdict::Defer]
        .into_iter()
        .find(|v| v.as_str() == code)
}

impl Line {
    fn from_record(r: &Record) -> Self {
        let mut line = Line {
            job: r.job.clone(),
            at: r.scheduled_at_ms,
            kind: kind_code(r.kind).to_owned(),
            attempt: r.attempt,
            node: r.node.clone(),
            rec: r.recorded_at_ms,
            ev: String::new(),
            verdict: None,
            reason: None,
            pid: None,
            start: None,
            end: None,
            dur: None,
            exit: None,
            signal: None,
            timed_out: false,
            text: String::new(),
            remaining: None,
            transferred: false,
        };
        match &r.event {
            Event::Decided { verdict, reason } => {
                line.ev = "decided".into();
                line.verdict = Some(verdict.as_str().into());
                line.reason = Some(reason.code().into());
            }
            Event::Started { at_ms, pid } => {
                line.ev = "started".into();
                line.start = Some(*at_ms);
                line.pid = Some(*pid);
            }
            Event::Finished {
                started_at_ms,
                finished_at_ms,
                duration_ms,
                exit_code,
                signal,
                timed_out,
                output_tail,
            } => {
                line.ev = "finished".into();
                line.start = Some(*started_at_ms);
                line.end = Some(*finished_at_ms);
                line.dur = Some(*duration_ms);
                line.exit = *exit_code;
                line.signal = *signal;
                line.timed_out = *timed_out;
                line.text = output_tail.clone();
            }
            Event::Skipped { reason, message } => {
                line.ev = "skipped".into();
                line.reason = reason.map(|r| r.code().into());
                line.text = message.clone();
            }
            Event::HandedOff {
                remaining_attempts,
                transferred,
            } => {
                line.ev = "handed_off".into();
                line.remaining = Some(*remaining_attempts);
                line.transferred = *transferred;
            }
        }
        line
    }

    fn into_record(self) -> Option<Record> {
        let kind = match self.kind.as_str() {
            "scheduled" => FiringKind::Scheduled,
            "reboot" => FiringKind::Reboot,
            "retry" => FiringKind::Retry {
                attempt: self.attempt,
            },
            "manual" => FiringKind::Manual,
            _ => return None,
        };
        let event = match self.ev.as_str() {
            "decided" => Event::Decided {
                verdict: verdict_of(self.verdict.as_deref()?)?,
                reason: reason_of(self.reason.as_deref()?)?,
            },
            "started" => Event::Started {
                at_ms: self.start?,
                pid: self.pid.unwrap_or(0),
            },
            "finished" => Event::Finished {
                started_at_ms: self.start?,
                finished_at_ms: self.end?,
                duration_ms: self.dur.unwrap_or(0),
                exit_code: self.exit,
                signal: self.signal,
                timed_out: self.timed_out,
                output_tail: self.text,
            },
            "skipped" => Event::Skipped {
                reason: self.reason.as_deref().and_then(reason_of),
                message: self.text,
            },
            "handed_off" => Event::HandedOff {
                remaining_attempts: self.remaining.unwrap_or(0),
                transferred: self.transferred,
            },
            _ => return None,
        };
        Some(Record {
            job: self.job,
            scheduled_at_ms: self.at,
            kind,
            attempt: self.attempt,
            node: self.node,
            recorded_at_ms: self.rec,
            event,
        })
    }
}

/// One record in the ledger's line format (also the value format of the etcd-backed ledger).
pub(crate) fn encode(record: &Record) -> Vec<u8> {
    serde_json::to_vec(&Line::from_record(record)).unwrap_or_default()
}

/// A record back from [`encode`]'s format; `None` when it does not parse.
pub(crate) fn decode(bytes: &[u8]) -> Option<Record> {
    serde_json::from_slice::<Line>(bytes)
        .ok()
        .and_then(Line::into_record)
}

/// The file of `node`'s ledger under `dir`.
pub fn ledger_path(dir: &Path, node: &str) -> PathBuf {
    // A node name is a DNS-ish label; anything else is replaced so it cannot leave `dir`.
    let safe: String = node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!("ledger-{safe}.jsonl"))
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
        match serde_json::from_slice::<Line>(&line)
            .ok()
            .and_then(Line::into_record)
        {
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
pub fn open(dir: &Path, node: &str, ledger: &Ledger) -> Result<(), LedgerFileError> {
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
            let mut line = serde_json::to_vec(&Line::from_record(r)).unwrap_or_default();
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
            let mut line = serde_json::to_vec(&Line::from_record(&record)).unwrap_or_default();
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

    fn records() -> Vec<Record> {
        let base = |event| Record {
            job: "backup".into(),
            scheduled_at_ms: 1_000,
            kind: FiringKind::Retry { attempt: 2 },
            attempt: 2,
            node: "n1".into(),
            recorded_at_ms: 1_001,
            event,
        };
        vec![
            base(Event::Decided {
                verdict: Verdict::Defer,
                reason: Reason::NoQuorum,
            }),
            base(Event::Started { at_ms: 5, pid: 42 }),
            base(Event::Finished {
                started_at_ms: 5,
                finished_at_ms: 9,
                duration_ms: 4,
                exit_code: None,
                signal: Some(9),
                timed_out: true,
                output_tail: "line\nwith \"quotes\"".into(),
            }),
            base(Event::Skipped {
                reason: Some(Reason::TooLate),
                message: "late".into(),
            }),
            base(Event::HandedOff {
                remaining_attempts: 3,
                transferred: false,
            }),
        ]
    }

    #[test]
    fn every_event_round_trips_through_a_line() {
        for r in records() {
            let text = serde_json::to_string(&Line::from_record(&r)).unwrap();
            let back = serde_json::from_str::<Line>(&text).unwrap().into_record();
            assert_eq!(back.as_ref(), Some(&r), "{text}");
        }
    }

    #[test]
    fn history_survives_a_restart_and_a_torn_line_costs_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = ledger_path(dir.path(), "n1");
        let mut text = String::new();
        for r in records() {
            text.push_str(&serde_json::to_string(&Line::from_record(&r)).unwrap());
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
}
