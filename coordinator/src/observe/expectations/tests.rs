//! The judge over a gossip view: each breach reported once, by the owner only, from its own
//! ledger and its peers' reports; across real processes in
//! `tests/tests/integration/expectations.rs`.

use std::time::Duration;

use cronstable_core::expect::Expectation;
use cronstable_core::{ClusterPolicy, FiringKind, JobSpec};
use tokio::sync::watch;

use super::*;
use crate::cluster::{ClusterView, Election, ManagedView};
use crate::gossip::wire::{JobSummary, RecentRun};
use crate::ledger::{Event, Record, RunEnd};
use crate::status::{ClusterStatus, GossipStatus, PeerRow};

/// 2026-03-02T00:00:00Z, a whole minute.
const T0: i64 = 1_772_409_600_000;
const MIN: i64 = 60_000;

/// Every minute, a run must succeed within 30 s and take at most 20 s.
fn report_job(policy: ClusterPolicy) -> JobSpec {
    let mut job = JobSpec::new("report", "* * * * *", "true");
    job.cluster_policy = policy;
    job.expect = Some(Expectation {
        complete_within: Some(Duration::from_secs(30)),
        max_duration: Some(Duration::from_secs(20)),
    });
    job
}

/// Node `a`'s gossip view naming `leader`, with peer `b` reporting `runs` of `report`.
fn view(leader: &str, runs: Vec<RecentRun>) -> ClusterView {
    let mut v = ClusterView::election_off("a");
    v.election = Election::Managed(ManagedView {
        quorate: true,
        leader: Some(leader.to_owned()),
        ..ManagedView::default()
    });
    let b = PeerRow {
        host: "b:1".into(),
        status: "agreed".into(),
        node_name: Some("b".into()),
        jobs: Some(std::sync::Arc::new(vec![JobSummary {
            name: "report".into(),
            cluster_policy: "Leader".into(),
            schedule: "* * * * *".into(),
            running: false,
            next_fire: None,
            last_run: None,
            last_run_scheduled_at_ms: None,
            recent_runs: runs,
        }])),
        ..PeerRow::default()
    };
    v.status = std::sync::Arc::new(ClusterStatus::Gossip(Box::new(GossipStatus {
        peers: vec![b],
        interval: Duration::from_secs(1),
        ..GossipStatus::default()
    })));
    v
}

fn node(view: ClusterView, job: JobSpec) -> (CoordinatorState, watch::Sender<ClusterView>) {
    let (tx, rx) = watch::channel(view);
    let state = CoordinatorState::new(rx);
    state.registry.register("shim-1", vec![job]).unwrap();
    (state, tx)
}

/// This node ran `at`'s firing from `start` to `end`, exiting `code`.
fn ran_here(state: &CoordinatorState, at: i64, start: i64, end: i64, code: i32) {
    let record = |event| Record {
        job: "report".into(),
        scheduled_at_ms: at,
        kind: FiringKind::Scheduled,
        attempt: 1,
        node: "a".into(),
        recorded_at_ms: start,
        event,
    };
    state.record(record(Event::Started {
        at_ms: start,
        pid: 7,
    }));
    state.record(record(Event::Finished(RunEnd {
        started_at_ms: start,
        finished_at_ms: end,
        duration_ms: (end - start) as u64,
        exit_code: Some(code),
        signal: None,
        timed_out: false,
        output_tail: String::new(),
    })));
}

fn b_ran(at: i64, start: i64, end: i64) -> RecentRun {
    RecentRun {
        scheduled_at_ms: at,
        attempt: 1,
        started_at_ms: start,
        ended_at_ms: Some(end),
        duration_ms: Some((end - start) as u64),
        succeeded: Some(true),
    }
}

/// Runs passes at each of `times`, with the peers' runs read from the view as the task does.
async fn passes(state: &CoordinatorState, judge: &mut Judge, times: &[i64]) {
    for &t in times {
        let elsewhere = others::read(state, judge).await;
        pass(state, judge, &elsewhere, Now::with_unix_ms(t));
    }
}

fn found(state: &CoordinatorState) -> Vec<(Breach, i64)> {
    state
        .expectations
        .of("report")
        .iter()
        .map(|n| (n.breach, n.scheduled_at_ms - T0))
        .collect()
}

/// The leader reports a firing nobody ran once its deadline and grace passed, and only then;
/// a firing its peer ran in time is met; a run here that failed is no completion.
#[tokio::test]
async fn the_owner_reports_a_missed_firing_once_after_its_deadline() {
    let (state, _tx) = node(
        view("a", vec![b_ran(T0 + MIN, T0 + MIN + 100, T0 + MIN + 900)]),
        report_job(ClusterPolicy::Leader),
    );
    let mut judge = Judge::default();
    // Known from just before T0; the grace on this view is 2 × 1 s + 1 s.
    passes(&state, &mut judge, &[T0 - 1_000, T0 + 30_000, T0 + 32_999]).await;
    assert!(found(&state).is_empty(), "{:?}", found(&state));
    passes(&state, &mut judge, &[T0 + 33_000, T0 + 34_000]).await;
    assert_eq!(found(&state), [(Breach::Missed, 0)]);
    ran_here(
        &state,
        T0 + 2 * MIN,
        T0 + 2 * MIN + 50,
        T0 + 2 * MIN + 500,
        1,
    );
    passes(
        &state,
        &mut judge,
        &[T0 + MIN + 40_000, T0 + 2 * MIN + 40_000],
    )
    .await;
    assert_eq!(
        found(&state),
        [(Breach::Missed, 0), (Breach::Missed, 2 * MIN)],
        "the peer's run met T0+1m; the failed run here did not meet T0+2m"
    );
    let notes = state.expectations.of("report");
    assert!(notes[1].why.contains("no run succeeded"), "{notes:?}");
    let id = cronstable_core::fingerprint::firing_id(&state.registry.current().id, "report", T0);
    assert_eq!(notes[0].firing_id, id);
    let text = state.metrics.render(&serde_json::json!({}));
    assert!(
        text.contains(
            r#"cronstable_job_expectation_breaches_total{breach="missed",job="report"} 2"#
        ),
        "{text}"
    );
    assert!(
        text.contains(
            r#"cronstable_job_expectation_breaches_total{breach="duplicated",job="report"} 0"#
        ),
        "shown at 0 before the first"
    );
}

/// A node that does not own the job judges nothing; a Leader firing that ran here and on the
/// peer is a duplicate; a run past maxDuration is too long.
#[tokio::test]
async fn only_the_owner_judges_and_it_sees_duplicates_and_long_runs_anywhere() {
    let job = report_job(ClusterPolicy::Leader);
    let (follower, _tx) = node(view("b", vec![]), job.clone());
    let mut judge = Judge::default();
    passes(&follower, &mut judge, &[T0 - 1_000, T0 + 5 * MIN]).await;
    assert!(found(&follower).is_empty(), "the follower judges nothing");

    let long = RecentRun {
        ended_at_ms: None,
        duration_ms: None,
        succeeded: None,
        ..b_ran(T0 + MIN, T0 + MIN + 100, 0)
    };
    let (state, _tx) = node(view("a", vec![b_ran(T0, T0 + 200, T0 + 900), long]), job);
    let mut judge = Judge::default();
    ran_here(&state, T0, T0 + 100, T0 + 800, 0);
    passes(&state, &mut judge, &[T0 - 1_000, T0 + 1_000, T0 + 2_000]).await;
    assert_eq!(found(&state), [(Breach::Duplicated, 0)]);
    passes(&state, &mut judge, &[T0 + MIN + 20_099, T0 + MIN + 20_100]).await;
    assert_eq!(
        found(&state),
        [(Breach::Duplicated, 0)],
        "exactly at maxDuration"
    );
    passes(&state, &mut judge, &[T0 + MIN + 20_200, T0 + MIN + 21_000]).await;
    assert_eq!(
        found(&state),
        [(Breach::Duplicated, 0), (Breach::TooLong, MIN)]
    );
    let notes = state.expectations.of("report");
    assert!(notes[0].why.contains("ran on both a and b"), "{notes:?}");
    assert!(
        notes[1].why.contains("on b (attempt 1) is still running"),
        "{notes:?}"
    );
}

/// A node that comes to own the job leaves a firing whose judgement fell before that to the
/// judge before it; an instant from before this process saw the job is not judged.
#[tokio::test]
async fn a_new_owner_judges_only_what_falls_due_in_its_term() {
    let (state, tx) = node(view("b", vec![]), report_job(ClusterPolicy::Leader));
    let mut judge = Judge::default();
    passes(&state, &mut judge, &[T0 - MIN - 1_000, T0 + 40_000]).await;
    tx.send_modify(|v| *v = view("a", vec![]));
    passes(&state, &mut judge, &[T0 + 50_000, T0 + MIN + 34_000]).await;
    assert_eq!(
        found(&state),
        [(Breach::Missed, MIN)],
        "T0's judgement (T0+33s) was the old leader's; T0+1m's is this node's"
    );
}

/// An EveryNode job is judged on every node, from its own runs only.
#[tokio::test]
async fn every_node_judges_its_own_runs_of_an_every_node_job() {
    let (state, _tx) = node(
        view("b", vec![b_ran(T0, T0 + 100, T0 + 200)]),
        report_job(ClusterPolicy::EveryNode),
    );
    let mut judge = Judge::default();
    ran_here(&state, T0 + MIN, T0 + MIN + 100, T0 + MIN + 900, 0);
    passes(&state, &mut judge, &[T0 - 1_000, T0 + MIN + 40_000]).await;
    assert_eq!(
        found(&state),
        [(Breach::Missed, 0)],
        "b's run of T0 is b's own firing, not this node's"
    );
}

/// On a lease store the holder sees the other nodes' runs through the store's run records:
/// the previous holder's run of a firing just before a handover meets it, and the same
/// firing run on both nodes is a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_lease_store_the_holder_judges_runs_on_other_nodes_from_the_run_records() {
    use crate::lease::conformance::fs_config;
    use crate::lease::records_store::RecordsStore;
    use crate::store::filesystem::FilesystemStore;
    let dir = tempfile::tempdir().unwrap();
    let config = fs_config(dir.path());
    let on = |node: &str, leader: &str| {
        let store = RecordsStore::with_runs(
            FilesystemStore::new(&config, node),
            FilesystemStore::new(&config, node),
        );
        let mut v = ClusterView::election_off(node);
        v.election = Election::Managed(ManagedView {
            quorate: true,
            leader: Some(leader.to_owned()),
            ..ManagedView::default()
        });
        let (tx, rx) = watch::channel(v);
        let state = CoordinatorState::new(rx).with_records_store(Some(store));
        state
            .registry
            .register("shim-1", vec![report_job(ClusterPolicy::Leader)])
            .unwrap();
        (state, tx)
    };
    let (a, _ta) = on("a", "a");
    let (b, _tb) = on("b", "a");
    let now = crate::clock::now_ms();
    let at = now - now.rem_euclid(MIN) - 2 * MIN;
    let ran_on = |state: &CoordinatorState, node: &str, at: i64| {
        let record = |event| Record {
            job: "report".into(),
            scheduled_at_ms: at,
            kind: FiringKind::Scheduled,
            attempt: 1,
            node: node.into(),
            recorded_at_ms: at,
            event,
        };
        state.record(record(Event::Started {
            at_ms: at + 100,
            pid: 7,
        }));
        state.record(record(Event::Finished(RunEnd {
            started_at_ms: at + 100,
            finished_at_ms: at + 900,
            duration_ms: 800,
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            output_tail: String::new(),
        })));
    };
    ran_on(&b, "b", at);
    ran_on(&b, "b", at + MIN);
    ran_on(&a, "a", at + MIN);
    // The writer stores in the background: wait until the reader sees all three.
    let store = a.records_store().unwrap();
    for _ in 0..200 {
        if store.runs_between(at, at + MIN).await.unwrap().len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut judge = Judge::default();
    // Known since before `at`; a came to own the job then too.
    let times = [at - 1_000, at + 2 * MIN - 1];
    for t in times {
        let elsewhere = others::read(&a, &mut judge).await;
        pass(&a, &mut judge, &elsewhere, Now::with_unix_ms(t));
    }
    let found: Vec<_> = a
        .expectations
        .of("report")
        .iter()
        .map(|n| (n.breach, n.scheduled_at_ms - at))
        .collect();
    assert_eq!(
        found,
        [(Breach::Duplicated, MIN)],
        "b's run of `at` met it; `at + 1m` ran on both"
    );
}

/// A firing seen met stays met after the bounded ledger forgets its run, and a gossip grace
/// longer than a minute still leaves time to judge a miss.
#[tokio::test]
async fn a_met_firing_stays_met_and_a_long_grace_still_judges_a_miss() {
    let mut job = report_job(ClusterPolicy::Leader);
    job.expect = Some(Expectation {
        complete_within: Some(Duration::from_secs(600)),
        max_duration: None,
    });
    let mut slow = view("a", vec![]);
    if let ClusterStatus::Gossip(g) = std::sync::Arc::make_mut(&mut slow.status) {
        g.interval = Duration::from_secs(30);
    }
    let (state, _tx) = node(slow, job);
    let mut judge = Judge::default();
    ran_here(&state, T0, T0 + 100, T0 + 900, 0);
    passes(&state, &mut judge, &[T0 - 1_000, T0 + 1_000]).await;
    // Push the run out of the ring with decisions about a later instant.
    for i in 0..crate::ledger::Ledger::PER_JOB {
        state.record(Record {
            job: "report".into(),
            scheduled_at_ms: T0 + 30 * MIN,
            kind: FiringKind::Scheduled,
            attempt: 1,
            node: "a".into(),
            recorded_at_ms: T0 + 2_000 + i as i64,
            event: Event::Skipped {
                reason: None,
                message: String::new(),
            },
        });
    }
    assert!(
        crate::ledger::runs::runs_since(&state.ledger.records("report").into(), T0).is_empty(),
        "the run is forgotten"
    );
    // Grace on this view: 2 × 30 s + 1 s.
    passes(
        &state,
        &mut judge,
        &[T0 + 10 * MIN + 61_000, T0 + 11 * MIN + 61_000],
    )
    .await;
    assert_eq!(
        found(&state),
        [(Breach::Missed, MIN)],
        "T0 was seen met; T0+1m, which nobody ran, is judged a grace after its deadline"
    );
}

/// A long run the previous owner could already see is left to it; one that passes
/// maxDuration in this node's term is this node's to report.
#[tokio::test]
async fn a_new_owner_leaves_an_earlier_long_run_to_the_judge_before_it() {
    let going = |at: i64| RecentRun {
        ended_at_ms: None,
        duration_ms: None,
        succeeded: None,
        ..b_ran(at, at + 100, 0)
    };
    let (state, tx) = node(
        view("b", vec![going(T0), going(T0 + MIN)]),
        report_job(ClusterPolicy::Leader),
    );
    let mut judge = Judge::default();
    passes(&state, &mut judge, &[T0 - 1_000, T0 + 40_000]).await;
    tx.send_modify(|v| *v = view("a", vec![going(T0), going(T0 + MIN)]));
    passes(&state, &mut judge, &[T0 + 40_000, T0 + MIN + 30_000]).await;
    let got: Vec<_> = found(&state)
        .into_iter()
        .filter(|(b, _)| *b == Breach::TooLong)
        .collect();
    assert_eq!(
        got,
        [(Breach::TooLong, MIN)],
        "T0's run passed maxDuration at T0+20.1s, in b's term; T0+1m's in this node's"
    );
}

/// A node whose election manager is not running (starting, stopping, or failed to start)
/// does not know who owns a Leader job, so it judges nothing: found in the gossip rolling
/// restart, where each stopping node reported the seconds after its stop as missed.
#[tokio::test]
async fn a_node_without_its_manager_judges_no_leader_job() {
    let mut stopping = view("a", vec![]);
    stopping.election = Election::NoManager {
        reason: "the gossip manager stopped".into(),
    };
    let (state, _tx) = node(stopping, report_job(ClusterPolicy::Leader));
    let mut judge = Judge::default();
    passes(&state, &mut judge, &[T0 - 1_000, T0 + MIN + 40_000]).await;
    assert!(found(&state).is_empty(), "{:?}", found(&state));
}
