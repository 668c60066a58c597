//! What catch-up on gossip knows of the other nodes' runs: no store holds per-firing claims,
//! so each node says in its run summary through which instant each job is settled as far as
//! it knows (`settled_through_ms` on `/peer`), and every node folds what it hears into its own
//! ledger ([`crate::ledger::Ledger::settle_elsewhere`]), which its own summary passes on. A
//! node that comes to own a job then looks for missed instants only after that.
//!
//! A peer's summary is at most one poll old, so the last moments of a peer that stopped
//! answering are unknown: it may have run an instant after its last summary. Such a peer
//! settles every job through the pass that first found it silent, so catch-up never offers an
//! instant a silent peer may have run (it may lose one instead). A peer never heard in this
//! process's life settles nothing: what it ran, the peers that did hear it pass on.

use std::collections::HashMap;

use crate::ledger::Ledger;
use crate::status::PeerRow;

/// Whether each peer (by configured address) answered at the last pass.
#[derive(Debug, Default)]
pub(super) struct Heard {
    answered: HashMap<String, bool>,
}

impl Heard {
    /// Folds one look at the peers into `ledger`, for the catch-up jobs `jobs`, at `now_ms`.
    pub(super) fn fold<'j>(
        &mut self,
        rows: &[PeerRow],
        jobs: impl Iterator<Item = &'j str> + Clone,
        ledger: &Ledger,
        now_ms: i64,
    ) {
        for row in rows.iter().filter(|r| r.status != "self") {
            let answered = !matches!(row.status.as_str(), "unreachable" | "untrusted" | "pending");
            let summary = row.jobs.as_deref().filter(|_| answered);
            match summary {
                Some(summary) => {
                    for s in summary {
                        let wanted = jobs.clone().any(|j| j == s.name);
                        if let (true, Some(at)) = (wanted, s.settled_through_ms) {
                            ledger.settle_elsewhere(&s.name, at);
                        }
                    }
                }
                None if self.answered.get(&row.host) == Some(&true) => {
                    tracing::info!(
                        peer = row.host,
                        settled_through_ms = now_ms,
                        "catch-up: a peer fell silent; what it may have run before now is \
                         not caught up"
                    );
                    for job in jobs.clone() {
                        ledger.settle_elsewhere(job, now_ms);
                    }
                }
                None => {}
            }
            self.answered.insert(row.host.clone(), summary.is_some());
        }
    }
}

/// A peer row as the gossip manager shows it, for tests: a summary of job `tick` (settled
/// through `settled`) when `status` is `agreed`, none otherwise.
#[cfg(test)]
pub(super) fn peer_row(host: &str, status: &str, settled: Option<i64>) -> PeerRow {
    use crate::gossip::wire::JobSummary;
    PeerRow {
        host: host.into(),
        status: status.into(),
        jobs: (status == "agreed").then(|| {
            std::sync::Arc::new(vec![JobSummary {
                name: "tick".into(),
                cluster_policy: "Leader".into(),
                schedule: "* * * * * *".into(),
                running: false,
                next_fire: None,
                last_run: None,
                settled_through_ms: settled,
            }])
        }),
        ..PeerRow::default()
    }
}

#[cfg(test)]
mod tests {
    use super::peer_row as row;
    use super::*;

    const JOBS: [&str; 1] = ["tick"];

    #[test]
    fn a_peer_settles_what_it_reports_and_a_silent_one_everything_until_it_fell_silent() {
        let (ledger, mut heard) = (Ledger::new(), Heard::default());
        heard.fold(
            &[row("a:1", "agreed", Some(10_000))],
            JOBS.into_iter(),
            &ledger,
            11_000,
        );
        assert_eq!(ledger.settled_elsewhere("tick"), Some(10_000));
        // Silent now: it may have run 10_000 < t ≤ 15_000 after its last summary.
        heard.fold(
            &[row("a:1", "unreachable", None)],
            JOBS.into_iter(),
            &ledger,
            15_000,
        );
        assert_eq!(ledger.settled_elsewhere("tick"), Some(15_000));
        // Still silent: nothing more is settled by it (it cannot run what it cannot lead).
        heard.fold(
            &[row("a:1", "unreachable", None)],
            JOBS.into_iter(),
            &ledger,
            20_000,
        );
        assert_eq!(ledger.settled_elsewhere("tick"), Some(15_000));
    }

    #[test]
    fn a_peer_never_heard_settles_nothing_and_other_jobs_are_not_touched() {
        let (ledger, mut heard) = (Ledger::new(), Heard::default());
        heard.fold(
            &[row("a:1", "pending", None), row("b:1", "unreachable", None)],
            JOBS.into_iter(),
            &ledger,
            9_000,
        );
        assert_eq!(ledger.settled_elsewhere("tick"), None);
        heard.fold(
            &[row("b:1", "agreed", Some(8_000))],
            [].into_iter(),
            &ledger,
            9_000,
        );
        assert_eq!(
            ledger.settled_elsewhere("tick"),
            None,
            "not a catch-up job here"
        );
    }

    #[test]
    fn a_malformed_summary_from_a_reachable_peer_is_silence() {
        let (ledger, mut heard) = (Ledger::new(), Heard::default());
        heard.fold(
            &[row("a:1", "agreed", Some(1_000))],
            JOBS.into_iter(),
            &ledger,
            2_000,
        );
        let mut bad = row("a:1", "agreed", None);
        bad.jobs = None; // reachable, but its summary did not parse
        heard.fold(&[bad], JOBS.into_iter(), &ledger, 7_000);
        assert_eq!(ledger.settled_elsewhere("tick"), Some(7_000));
    }
}
