//! The one record format of the run ledger: a record as a JSON line, with codes as strings, so
//! a file reads well and survives enum changes. The ledger file ([`super::file`]) and the
//! etcd-backed ledger ([`crate::store::etcd::ledger`]) both store records in it; the HTTP API
//! has its own public JSON form ([`crate::web`]).

use cronstable_core::{FiringKind, Reason, Verdict};
use serde::{Deserialize, Serialize};

use super::{Event, Record, RunEnd};

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
            kind: FiringKind::code(r.kind).to_owned(),
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
            Event::Finished(end) => {
                line.ev = "finished".into();
                line.start = Some(end.started_at_ms);
                line.end = Some(end.finished_at_ms);
                line.dur = Some(end.duration_ms);
                line.exit = end.exit_code;
                line.signal = end.signal;
                line.timed_out = end.timed_out;
                line.text = end.output_tail.clone();
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
            "catch_up" => FiringKind::CatchUp,
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
            "finished" => Event::Finished(RunEnd {
                started_at_ms: self.start?,
                finished_at_ms: self.end?,
                duration_ms: self.dur.unwrap_or(0),
                exit_code: self.exit,
                signal: self.signal,
                timed_out: self.timed_out,
                output_tail: self.text,
            }),
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ledger::conformance::records;

    #[test]
    fn every_event_round_trips_through_a_line() {
        for r in records() {
            let text = String::from_utf8(encode(&r)).unwrap();
            let back = decode(text.as_bytes());
            assert_eq!(back.as_ref(), Some(&r), "{text}");
        }
    }
}
