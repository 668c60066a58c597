//! The runs in a job's records, one per started command, paired with how each ended: what the
//! expectation judge reads of this node ([`crate::observe::expectations`]) and what a gossip
//! node tells its peers of its recent runs of a job with `expect`.
//!
//! Only runs of scheduled instants count (scheduled, caught up, retried): an `@reboot`
//! one-shot or an operator's manual start is no firing of the schedule.

use std::collections::VecDeque;

use cronstable_core::FiringKind;
use cronstable_core::expect::{RunEnded, RunSeen};

use super::{Event, Record};

/// One run of this node, with the instant it was a firing of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstantRun {
    /// The nominal instant (Unix ms).
    pub scheduled_at_ms: i64,
    /// The run.
    pub run: RunSeen,
}

/// The runs of instants at or after `since_ms` in `records` (oldest first), newest last. A run
/// whose start record fell out of the bounded ring still shows, from its end record, and so
/// does one whose end was recorded before its start (the shim reports a start off the launch
/// path, so a short run's end can arrive first): a start that names a run already seen, by
/// instant, attempt and start time, adds nothing.
pub fn runs_since(records: &VecDeque<Record>, since_ms: i64) -> Vec<InstantRun> {
    let mut runs: Vec<InstantRun> = Vec::new();
    let counted = |r: &Record| {
        r.scheduled_at_ms >= since_ms
            && matches!(
                r.kind,
                FiringKind::Scheduled | FiringKind::CatchUp | FiringKind::Retry { .. }
            )
    };
    for r in records.iter().filter(|r| counted(r)) {
        let same_start = |o: &InstantRun, at_ms: i64| {
            o.scheduled_at_ms == r.scheduled_at_ms
                && o.run.attempt == r.attempt
                && o.run.started_at_ms == at_ms
        };
        match &r.event {
            Event::Started { at_ms, .. } if runs.iter().any(|o| same_start(o, *at_ms)) => {}
            Event::Started { at_ms, .. } => runs.push(InstantRun {
                scheduled_at_ms: r.scheduled_at_ms,
                run: RunSeen {
                    node: r.node.clone(),
                    attempt: r.attempt,
                    started_at_ms: *at_ms,
                    ended: None,
                },
            }),
            Event::Finished(end) => {
                let ended = RunEnded {
                    at_ms: end.finished_at_ms,
                    duration_ms: end.duration_ms,
                    succeeded: end.succeeded(),
                };
                let open = runs.iter_mut().rev().find(|o| {
                    o.scheduled_at_ms == r.scheduled_at_ms
                        && o.run.attempt == r.attempt
                        && o.run.ended.is_none()
                });
                match open {
                    Some(o) => o.run.ended = Some(ended),
                    None => runs.push(InstantRun {
                        scheduled_at_ms: r.scheduled_at_ms,
                        run: RunSeen {
                            node: r.node.clone(),
                            attempt: r.attempt,
                            started_at_ms: end.started_at_ms,
                            ended: Some(ended),
                        },
                    }),
                }
            }
            _ => {}
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::RunEnd;

    fn record(at: i64, kind: FiringKind, event: Event) -> Record {
        Record {
            job: "j".into(),
            scheduled_at_ms: at,
            kind,
            attempt: kind.attempt(),
            node: "n1".into(),
            recorded_at_ms: 0,
            event,
        }
    }

    fn end(start: i64, finish: i64, code: i32) -> Event {
        Event::Finished(RunEnd {
            started_at_ms: start,
            finished_at_ms: finish,
            duration_ms: (finish - start) as u64,
            exit_code: Some(code),
            signal: None,
            timed_out: false,
            output_tail: String::new(),
        })
    }

    #[test]
    fn starts_pair_with_their_ends_and_other_kinds_and_old_instants_are_left_out() {
        let started = |at_ms| Event::Started { at_ms, pid: 1 };
        let records: VecDeque<Record> = [
            record(0, FiringKind::Scheduled, started(10)),
            record(60_000, FiringKind::Scheduled, started(60_010)),
            record(60_000, FiringKind::Manual, started(60_020)),
            record(60_000, FiringKind::Scheduled, end(60_010, 61_000, 1)),
            record(60_000, FiringKind::Retry { attempt: 2 }, started(62_000)),
            record(120_000, FiringKind::CatchUp, end(120_500, 121_000, 0)),
            // A short run whose end was recorded before its start.
            record(180_000, FiringKind::Scheduled, end(180_010, 180_020, 0)),
            record(180_000, FiringKind::Scheduled, started(180_010)),
        ]
        .into_iter()
        .collect();
        let runs = runs_since(&records, 60_000);
        let summary: Vec<_> = runs
            .iter()
            .map(|r| {
                let ended = r.run.ended.map(|e| (e.at_ms, e.succeeded));
                (r.scheduled_at_ms, r.run.attempt, r.run.started_at_ms, ended)
            })
            .collect();
        assert_eq!(
            summary,
            [
                (60_000, 1, 60_010, Some((61_000, false))),
                (60_000, 2, 62_000, None),
                (120_000, 1, 120_500, Some((121_000, true))),
                (180_000, 1, 180_010, Some((180_020, true))),
            ]
        );
    }
}
