//! What catch-up on gossip knows of the other nodes' runs: no store holds per-firing claims,
//! so each node names in its run summary the newest instant of each job it answered RUN for
//! (`last_run_scheduled_at_ms` on `/peer`), and every node folds what it hears from each peer
//! directly into its own ledger ([`crate::ledger::Ledger::settle_elsewhere`]). Only first-hand
//! reports count: a node that passed on what it heard would echo this node's own runs back,
//! which would settle a gap this node has yet to catch up.
//!
//! The rules keep a catch-up from repeating what another node may have run:
//!
//! - a peer's report settles what it says ran, whenever it arrives;
//! - a peer whose past this node cannot know settles every catch-up job through the moment it
//!   was noticed: one heard for the first time in this process's life (its previous process
//!   may have run instants it no longer remembers), one that comes back as a new process, and
//!   one that stops answering (it may have run an instant after its last report). Catch-up on
//!   gossip therefore recovers instants only while the coordinators stay up and answering;
//! - an instant is looked at only once every answering peer has reported after it: a report
//!   can be a round old when it is polled, so the poll must come at least an interval after the
//!   instant ([`Heard::fold`] returns how far that reaches).

use std::collections::HashMap;
use std::time::Duration;

use crate::ledger::Ledger;
use crate::status::PeerRow;

/// What a report's age is allowed beyond one interval: the time between a RUN answer and the
/// start that refreshes the summary.
const REPORT_SLACK: Duration = Duration::from_millis(500);

/// What the last pass saw of one peer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    answering: bool,
    instance: Option<String>,
}

/// What this node saw of each peer (by configured address) at the last pass.
#[derive(Debug, Default)]
pub(super) struct Heard {
    peers: HashMap<String, Seen>,
}

impl Heard {
    /// Folds one look at the peers (`interval` apart) into `ledger`, for the catch-up jobs
    /// `jobs`, at `now_ms`. Returns the newest instant every answering peer has reported after.
    pub(super) fn fold<'j>(
        &mut self,
        rows: &[PeerRow],
        interval: Duration,
        jobs: impl Iterator<Item = &'j str> + Clone,
        ledger: &Ledger,
        now_ms: i64,
    ) -> i64 {
        let mut known_until = now_ms;
        for row in rows.iter().filter(|r| r.status != "self") {
            let ok = !matches!(row.status.as_str(), "unreachable" | "untrusted" | "pending");
            let summary = row.jobs.as_deref().filter(|_| ok);
            let seen = Seen {
                answering: summary.is_some(),
                instance: row.instance_id.clone().filter(|_| summary.is_some()),
            };
            let news = match self.peers.get(&row.host) {
                None => Some("first heard"),
                Some(before) if before.answering && !seen.answering => Some("fell silent"),
                Some(before)
                    if seen.answering
                        && before.instance.is_some()
                        && before.instance != seen.instance =>
                {
                    Some("restarted")
                }
                Some(_) => None,
            };
            if let Some(what) = news {
                tracing::debug!(
                    peer = row.host,
                    what,
                    settled_through_ms = now_ms,
                    "catch-up: what this peer may have run before now is not caught up"
                );
                for job in jobs.clone() {
                    ledger.settle_elsewhere(job, now_ms);
                }
            }
            if let Some(summary) = summary {
                for s in summary {
                    let wanted = jobs.clone().any(|j| j == s.name);
                    if let (true, Some(at)) = (wanted, s.last_run_scheduled_at_ms) {
                        ledger.settle_elsewhere(&s.name, at.min(now_ms));
                    }
                }
                let polled = row
                    .last_seen
                    .as_deref()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map_or(i64::MIN, |t| t.timestamp_millis());
                let age = i64::try_from((interval + REPORT_SLACK).as_millis()).unwrap_or(i64::MAX);
                known_until = known_until.min(polled.saturating_sub(age));
            }
            if seen.answering || !self.peers.contains_key(&row.host) {
                self.peers.insert(row.host.clone(), seen);
            } else if let Some(before) = self.peers.get_mut(&row.host) {
                // Silent now: keep the instance it had, so a new process is noticed when it
                // answers again.
                before.answering = false;
            }
        }
        known_until
    }
}

/// A peer row as the gossip manager shows it, for tests: process `instance`, last polled at
/// `polled_ms`, with a summary of job `tick` (newest RUN `ran`) when `status` is `agreed`,
/// none otherwise.
#[cfg(test)]
pub(super) fn peer_row(
    host: &str,
    status: &str,
    instance: &str,
    polled_ms: i64,
    ran: Option<i64>,
) -> PeerRow {
    use crate::gossip::wire::JobSummary;
    let answering = status == "agreed";
    PeerRow {
        host: host.into(),
        status: status.into(),
        instance_id: answering.then(|| instance.to_owned()),
        last_seen: chrono::DateTime::from_timestamp_millis(polled_ms)
            .filter(|_| answering)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, false)),
        jobs: answering.then(|| {
            std::sync::Arc::new(vec![JobSummary {
                name: "tick".into(),
                cluster_policy: "Leader".into(),
                schedule: "* * * * * *".into(),
                running: false,
                next_fire: None,
                last_run: None,
                last_run_scheduled_at_ms: ran,
                recent_runs: Vec::new(),
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
    const SECOND: Duration = Duration::from_secs(1);

    fn fold(heard: &mut Heard, rows: &[PeerRow], ledger: &Ledger, now: i64) -> i64 {
        heard.fold(rows, SECOND, JOBS.into_iter(), ledger, now)
    }

    #[test]
    fn a_peer_first_heard_settles_what_came_before_then_what_it_reports() {
        let (ledger, mut heard) = (Ledger::new(), Heard::default());
        let known = fold(
            &mut heard,
            &[row("a:1", "pending", "a1", 0, None)],
            &ledger,
            1_000,
        );
        assert_eq!(
            ledger.settled_elsewhere("tick"),
            Some(1_000),
            "its past is unknown"
        );
        assert_eq!(known, 1_000, "no peer answers yet: nothing to wait for");
        let known = fold(
            &mut heard,
            &[row("a:1", "agreed", "a1", 9_000, Some(8_000))],
            &ledger,
            9_500,
        );
        assert_eq!(ledger.settled_elsewhere("tick"), Some(8_000));
        assert_eq!(
            known,
            9_000 - 1_500,
            "its report may be a round and a start old"
        );
    }

    /// Peer `a:1` pending at 0, then answering as process `a1` at 2 s, having run 1 s.
    fn heard_a1_once() -> (Ledger, Heard) {
        let (ledger, mut heard) = (Ledger::new(), Heard::default());
        fold(
            &mut heard,
            &[row("a:1", "pending", "", 0, None)],
            &ledger,
            0,
        );
        let answering = [row("a:1", "agreed", "a1", 2_000, Some(1_000))];
        fold(&mut heard, &answering, &ledger, 2_000);
        (ledger, heard)
    }

    #[test]
    fn a_peer_that_falls_silent_or_restarts_settles_everything_until_then() {
        let (ledger, mut heard) = heard_a1_once();
        assert_eq!(ledger.settled_elsewhere("tick"), Some(1_000));
        fold(
            &mut heard,
            &[row("a:1", "unreachable", "", 0, None)],
            &ledger,
            5_000,
        );
        assert_eq!(ledger.settled_elsewhere("tick"), Some(5_000), "fell silent");
        fold(
            &mut heard,
            &[row("a:1", "unreachable", "", 0, None)],
            &ledger,
            7_000,
        );
        assert_eq!(
            ledger.settled_elsewhere("tick"),
            Some(5_000),
            "still silent"
        );
        fold(
            &mut heard,
            &[row("a:1", "agreed", "a1", 8_000, None)],
            &ledger,
            8_000,
        );
        assert_eq!(
            ledger.settled_elsewhere("tick"),
            Some(5_000),
            "back, the same process"
        );
        fold(
            &mut heard,
            &[row("a:1", "agreed", "a2", 9_000, None)],
            &ledger,
            9_000,
        );
        assert_eq!(
            ledger.settled_elsewhere("tick"),
            Some(9_000),
            "a new process"
        );
    }

    #[test]
    fn other_jobs_are_not_touched_and_a_report_from_the_future_is_clamped() {
        let (ledger, mut heard) = (Ledger::new(), Heard::default());
        heard.fold(
            &[row("b:1", "agreed", "b1", 9_000, Some(8_000))],
            SECOND,
            [].into_iter(),
            &ledger,
            9_000,
        );
        assert_eq!(
            ledger.settled_elsewhere("tick"),
            None,
            "not a catch-up job here"
        );
        fold(
            &mut heard,
            &[row("b:1", "agreed", "b1", 9_000, Some(60_000))],
            &ledger,
            10_000,
        );
        assert_eq!(
            ledger.settled_elsewhere("tick"),
            Some(10_000),
            "a skewed peer clock"
        );
    }

    #[test]
    fn a_malformed_summary_from_a_reachable_peer_is_silence() {
        let (ledger, mut heard) = heard_a1_once();
        let mut bad = row("a:1", "agreed", "a1", 7_000, None);
        bad.jobs = None; // reachable, but its summary did not parse
        fold(&mut heard, &[bad], &ledger, 7_000);
        assert_eq!(ledger.settled_elsewhere("tick"), Some(7_000));
    }
}
