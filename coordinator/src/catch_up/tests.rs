//! The owner's catch-up pass over a real filesystem store (a temporary directory), and on a
//! gossip view (this node's ledger and its peers' reports), with the gate answering the
//! executor's catch-up questions; on etcd, gossip and across processes in
//! `tests/tests/integration/catch_up.rs`.

use std::time::Duration;

use cronstable_core::catch_up::{CatchUp, CatchUpPolicy};
use cronstable_core::{ClusterPolicy, Firing, FiringKind, JobSpec, Reason, Verdict};
use tokio::sync::{mpsc, watch};

use super::*;
use crate::cluster::{ClusterView, Election, ManagedView};
use crate::lease::conformance::fs_config;
use crate::lease::records_store::RecordsStore;
use crate::store::filesystem::FilesystemStore;

/// 2026-03-02T00:00:00Z.
const T0: i64 = 1_772_409_600_000;

fn view(node: &str, leader: &str) -> ClusterView {
    let mut v = ClusterView::election_off(node);
    v.election = Election::Managed(ManagedView {
        quorate: true,
        leader: Some(leader.to_owned()),
        ..ManagedView::default()
    });
    v
}

fn every_second() -> JobSpec {
    let mut job = JobSpec::new("tick", "* * * * * *", "true");
    job.cluster_policy = ClusterPolicy::Leader;
    job.starting_deadline = Some(Duration::from_secs(5));
    job.catch_up = Some(CatchUpPolicy {
        mode: CatchUp::All,
        window: Duration::from_secs(10),
        limit: 10,
    });
    job
}

/// Node `node` (leading when `leader` is itself) over the store in `dir`, with `job` registered
/// by executor "shim-1" and its Watch stream open.
fn node(
    dir: &std::path::Path,
    node: &str,
    leader: &str,
    job: JobSpec,
) -> (
    CoordinatorState,
    watch::Sender<ClusterView>,
    mpsc::Receiver<Instruction>,
) {
    let store = RecordsStore::over(FilesystemStore::new(&fs_config(dir), node));
    let (tx, rx) = watch::channel(view(node, leader));
    let state = CoordinatorState::new(rx).with_records_store(Some(store));
    state.registry.register("shim-1", vec![job]).unwrap();
    let watch = state.open_watch("shim-1");
    (state, tx, watch)
}

fn offers(rx: &mut mpsc::Receiver<Instruction>) -> Vec<i64> {
    let mut out = Vec::new();
    while let Ok(i) = rx.try_recv() {
        if let Instruction::CatchUp {
            scheduled_at_ms, ..
        } = i
        {
            out.push(scheduled_at_ms);
        }
    }
    out
}

fn firing(at_ms: i64, kind: FiringKind) -> Firing {
    Firing {
        job: "tick".into(),
        scheduled_at_ms: at_ms,
        kind,
    }
}

fn series(state: &CoordinatorState, name: &str) -> Option<String> {
    let text = state.metrics.render(&serde_json::json!({}));
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.trim().to_owned())
}

/// The holder offers what nobody claimed, the executor's catch-up question claims and runs it,
/// and a claimed instant is neither offered again nor run again by any other question.
#[tokio::test]
async fn the_holder_offers_unclaimed_instants_and_each_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _view, mut watch) = node(dir.path(), "a", "a", every_second());
    let mut memory = CatchUps::default();
    pass(&state, &mut memory, Now::with_unix_ms(T0)).await;
    assert!(
        offers(&mut watch).is_empty(),
        "nothing before the job was known"
    );
    // T0+1 s ran the ordinary way; T0+2 s and T0+3 s nobody asked about.
    let ordinary = state
        .should_run(
            &firing(T0 + 1000, FiringKind::Scheduled),
            Now::with_unix_ms(T0 + 1010),
        )
        .await
        .unwrap();
    assert_eq!(ordinary.decision.verdict, Verdict::Run);
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 5500)).await;
    assert_eq!(offers(&mut watch), [T0 + 2000, T0 + 3000]);

    let caught = state
        .should_run(
            &firing(T0 + 2000, FiringKind::CatchUp),
            Now::with_unix_ms(T0 + 5600),
        )
        .await
        .unwrap();
    assert_eq!(caught.decision.verdict, Verdict::Run, "{caught:?}");
    // A late ordinary question about the caught-up instant, and a catch-up of the ordinary one:
    // each meets the other's claim.
    for (at, kind) in [
        (T0 + 2000, FiringKind::Scheduled),
        (T0 + 1000, FiringKind::CatchUp),
    ] {
        let again = state
            .should_run(&firing(at, kind), Now::with_unix_ms(T0 + 5700))
            .await
            .unwrap();
        assert_eq!(
            (again.decision.verdict, again.decision.reason),
            (Verdict::Skip, Reason::AlreadyRan),
            "{kind:?} at {at}: {again:?}"
        );
    }
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 6500)).await;
    assert_eq!(
        offers(&mut watch),
        [T0 + 4000],
        "T0+2 s is claimed now; T0+3 s was offered a second ago; T0+4 s is new"
    );
    let kinds: Vec<FiringKind> = state
        .ledger
        .records("tick")
        .iter()
        .map(|r| r.kind)
        .collect();
    assert!(kinds.contains(&FiringKind::CatchUp), "{kinds:?}");
    assert_eq!(
        series(&state, "cronstable_job_catch_up_runs_total{job=\"tick\"} ").as_deref(),
        Some("1")
    );
}

/// A follower offers nothing; once it leads, it finds what nobody ran since it last looked,
/// and gives up (counted, by reason) what left the window first.
#[tokio::test]
async fn a_new_holder_catches_up_the_gap_and_counts_what_it_gives_up() {
    let dir = tempfile::tempdir().unwrap();
    let (state, view_tx, mut watch) = node(dir.path(), "b", "a", every_second());
    let mut memory = CatchUps::default();
    pass(&state, &mut memory, Now::with_unix_ms(T0)).await;
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 5000)).await;
    assert!(offers(&mut watch).is_empty(), "a follower offers nothing");
    // "a" died after T0; "b" leads from T0+14.5 s: T0+1 s .. T0+4 s left the 10 s window.
    view_tx.send_replace(view("b", "b"));
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 14_500)).await;
    assert_eq!(
        offers(&mut watch),
        (5..=12).map(|s| T0 + s * 1000).collect::<Vec<_>>()
    );
    assert_eq!(
        series(
            &state,
            "cronstable_job_catch_up_given_up_total{job=\"tick\",reason=\"window\"} "
        )
        .as_deref(),
        Some("4")
    );
}

/// The gate's row for catch-up questions: past the window, for a job without catch-up, or where
/// no claims are kept, SKIP `not_caught_up`; inside the window on the holder, RUN.
#[tokio::test]
async fn a_catch_up_question_is_answered_only_inside_the_window_where_claims_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _view, _watch) = node(dir.path(), "a", "a", every_second());
    let ask = |state: &CoordinatorState, at: i64, now: i64| {
        let state = state.clone();
        async move {
            let a = state
                .should_run(&firing(at, FiringKind::CatchUp), Now::with_unix_ms(now))
                .await
                .unwrap();
            (a.decision.verdict, a.decision.reason, a.message)
        }
    };
    let (v, r, why) = ask(&state, T0, T0 + 10_001).await;
    assert_eq!((v, r), (Verdict::Skip, Reason::NotCaughtUp));
    assert!(why.contains("catchUpWindow"), "{why}");
    let inside = ask(&state, T0, T0 + 9_000).await;
    assert_eq!(inside.0, Verdict::Run, "{inside:?}");

    let mut plain = every_second();
    plain.catch_up = None;
    state.registry.register("shim-1", vec![plain]).unwrap();
    let (v, r, why) = ask(&state, T0 + 1000, T0 + 2000).await;
    assert_eq!((v, r), (Verdict::Skip, Reason::NotCaughtUp));
    assert!(why.contains("has no catchUp"), "{why}");

    let (_tx, rx) = watch::channel(view("a", "a"));
    let no_claims = CoordinatorState::new(rx);
    no_claims
        .registry
        .register("shim-1", vec![every_second()])
        .unwrap();
    let (v, r, why) = ask(&no_claims, T0, T0 + 3000).await;
    assert_eq!((v, r), (Verdict::Skip, Reason::NotCaughtUp));
    assert!(why.contains("no firing claims"), "{why}");
    let mut memory = CatchUps::default();
    pass(&no_claims, &mut memory, Now::with_unix_ms(T0 + 3000)).await;
    assert!(memory.jobs.is_empty(), "no claims: no tracking");
}

/// A coordinator restarted a moment ago that wins the lease at once (it released the lease at
/// its graceful stop, and its new process was quicker than the followers) knew the job only
/// from its start, after the instant nobody ran between the two processes. It looks back to the
/// newest claim before it owned the job, and finds that instant.
#[tokio::test]
async fn a_restarted_holder_looks_back_to_where_its_predecessor_stopped() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (before, _view, _watch) = node(dir.path(), "a", "a", every_second());
        for s in 1..=3 {
            let at = T0 + s * 1000;
            let a = before
                .should_run(
                    &firing(at, FiringKind::Scheduled),
                    Now::with_unix_ms(at + 10),
                )
                .await
                .unwrap();
            assert_eq!(a.decision.verdict, Verdict::Run);
        }
    }
    // T0+4 s passes with nobody leading; the new process leads from T0+5 s.
    let (after, _view, mut watch) = node(dir.path(), "a", "a", every_second());
    let mut memory = CatchUps::default();
    pass(&after, &mut memory, Now::with_unix_ms(T0 + 5000)).await;
    assert!(offers(&mut watch).is_empty());
    pass(&after, &mut memory, Now::with_unix_ms(T0 + 6500)).await;
    assert_eq!(offers(&mut watch), [T0 + 4000]);
}

/// A gossip view of node `node` that names `leader`, with `peers` as the manager shows them.
fn gossip_view(node: &str, leader: &str, peers: Vec<crate::status::PeerRow>) -> ClusterView {
    use crate::status::{ClusterStatus, GossipStatus};
    let mut v = view(node, leader);
    v.status = std::sync::Arc::new(ClusterStatus::Gossip(Box::new(GossipStatus {
        peers,
        interval: Duration::from_secs(1),
        ..GossipStatus::default()
    })));
    v
}

/// Peer `b:1` (process `b1`), answering and last polled at `polled_ms`, whose newest RUN of
/// `tick` was `ran`.
fn b(polled_ms: i64, ran: Option<i64>) -> crate::status::PeerRow {
    super::peers::peer_row("b:1", "agreed", "b1", polled_ms, ran)
}

/// A gossip node over `view` (no store: catch-up there works from this node's ledger and
/// the peers' reports), with the per-second job registered by executor "shim-1" and its Watch
/// open.
fn gossip_node(
    view: ClusterView,
) -> (
    CoordinatorState,
    watch::Sender<ClusterView>,
    mpsc::Receiver<Instruction>,
) {
    let (tx, rx) = watch::channel(view);
    let state = CoordinatorState::new(rx);
    state
        .registry
        .register("shim-1", vec![every_second()])
        .unwrap();
    let watch = state.open_watch("shim-1");
    (state, tx, watch)
}

/// On gossip the leader offers the instants its own ledger has no RUN for and no peer
/// reported, once every peer has reported after them; its ledger stands in for the claim: one
/// instant is answered RUN as one kind only.
#[tokio::test]
async fn on_gossip_the_leader_catches_up_what_neither_it_nor_a_peer_ran() {
    let (state, view_tx, mut watch) = gossip_node(gossip_view("a", "a", vec![b(T0, None)]));
    let mut memory = CatchUps::default();
    pass(&state, &mut memory, Now::with_unix_ms(T0)).await;
    view_tx.send_replace(gossip_view("a", "a", vec![b(T0 + 3100, Some(T0 + 2000))]));
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 3100)).await;
    assert!(offers(&mut watch).is_empty());
    let ordinary = state
        .should_run(
            &firing(T0 + 4000, FiringKind::Scheduled),
            Now::with_unix_ms(T0 + 4010),
        )
        .await
        .unwrap();
    assert_eq!(ordinary.decision.verdict, Verdict::Run);
    view_tx.send_replace(gossip_view("a", "a", vec![b(T0 + 6500, Some(T0 + 2000))]));
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 6500)).await;
    assert_eq!(
        offers(&mut watch),
        [T0 + 3000],
        "T0+1 s and T0+2 s: b ran them; T0+4 s ran here"
    );
    let ask = |at: i64, kind: FiringKind| {
        let state = state.clone();
        async move {
            let a = state
                .should_run(&firing(at, kind), Now::with_unix_ms(T0 + 6600))
                .await
                .unwrap();
            (a.decision.verdict, a.decision.reason)
        }
    };
    assert_eq!(
        ask(T0 + 3000, FiringKind::CatchUp).await,
        (Verdict::Run, Reason::Leader)
    );
    // The executor asking the same again (its answer was lost) is answered the same.
    assert_eq!(ask(T0 + 3000, FiringKind::CatchUp).await.0, Verdict::Run);
    for (at, kind) in [
        (T0 + 3000, FiringKind::Scheduled),
        (T0 + 4000, FiringKind::CatchUp),
    ] {
        assert_eq!(
            ask(at, kind).await,
            (Verdict::Skip, Reason::AlreadyRan),
            "{kind:?} at {at}"
        );
    }
    view_tx.send_replace(gossip_view("a", "a", vec![b(T0 + 12_000, Some(T0 + 2000))]));
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 12_000)).await;
    assert!(
        !offers(&mut watch).contains(&(T0 + 3000)),
        "an instant answered RUN here is not offered again"
    );
}

/// Leadership moves while the previous leader still answers: what it ran after this node's
/// first look is in its later reports, and nothing it ran is offered again. (The first cut
/// anchored on the report of the moment and never read another, and offered T0+4 s and T0+5 s
/// a second time.)
#[tokio::test]
async fn on_gossip_a_live_previous_leaders_later_reports_settle_what_it_ran() {
    let (state, view_tx, mut watch) = gossip_node(gossip_view("a", "b", vec![b(T0, None)]));
    let mut memory = CatchUps::default();
    pass(&state, &mut memory, Now::with_unix_ms(T0)).await;
    view_tx.send_replace(gossip_view("a", "a", vec![b(T0 + 4500, Some(T0 + 3000))]));
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 4500)).await;
    view_tx.send_replace(gossip_view("a", "a", vec![b(T0 + 7000, Some(T0 + 5000))]));
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 7000)).await;
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 7000)).await;
    assert!(offers(&mut watch).is_empty());
}

/// A peer that falls silent may have run instants after its last report: they are settled
/// through the pass that found it silent, and only what came after is caught up.
#[tokio::test]
async fn on_gossip_what_a_silent_leader_may_have_run_is_not_caught_up() {
    let (state, view_tx, mut watch) =
        gossip_node(gossip_view("a", "b", vec![b(T0 + 1000, Some(T0 + 500))]));
    let mut memory = CatchUps::default();
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 1000)).await;
    // b stops answering; a leads from T0+4 s.
    let silent = super::peers::peer_row("b:1", "unreachable", "", 0, None);
    view_tx.send_replace(gossip_view("a", "a", vec![silent]));
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 4000)).await;
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 9000)).await;
    assert_eq!(
        offers(&mut watch),
        [T0 + 5000, T0 + 6000, T0 + 7000],
        "T0+1 s..T0+4 s: b may have run them before it fell silent"
    );
    assert_eq!(state.ledger.settled_elsewhere("tick"), Some(T0 + 4000));
}

/// A restarted node cannot know what a peer's previous process ran before it first heard the
/// peer (that process may be gone, its memory with it): nothing from before then is caught
/// up, even with this node's own ledger kept in `state.path`; what nobody ran after it is.
#[tokio::test]
async fn on_gossip_nothing_from_before_this_node_first_heard_its_peers_is_caught_up() {
    let (state, view_tx, mut watch) = gossip_node(gossip_view("a", "a", vec![b(T0 + 6000, None)]));
    let before = crate::ledger::Record::decided(
        &firing(T0 + 1000, FiringKind::Scheduled),
        cronstable_core::Decision::run(Reason::Leader),
        "a",
        T0 + 1000,
    );
    state.ledger.restore(before);
    let mut memory = CatchUps::default();
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 6000)).await;
    assert!(offers(&mut watch).is_empty());
    view_tx.send_replace(gossip_view("a", "a", vec![b(T0 + 12_000, None)]));
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 12_000)).await;
    assert_eq!(
        offers(&mut watch),
        (7..=10).map(|s| T0 + s * 1000).collect::<Vec<_>>()
    );
}

/// Kubernetes keeps no claims and exchanges no summaries: nothing is offered and a catch-up
/// question is SKIP `not_caught_up`.
#[tokio::test]
async fn without_claims_or_summaries_nothing_is_caught_up() {
    let (state, _view, mut watch) = gossip_node(view("a", "a"));
    let mut memory = CatchUps::default();
    pass(&state, &mut memory, Now::with_unix_ms(T0)).await;
    pass(&state, &mut memory, Now::with_unix_ms(T0 + 9000)).await;
    assert!(offers(&mut watch).is_empty());
    let a = state
        .should_run(
            &firing(T0 + 3000, FiringKind::CatchUp),
            Now::with_unix_ms(T0 + 9100),
        )
        .await
        .unwrap();
    assert_eq!(
        (a.decision.verdict, a.decision.reason),
        (Verdict::Skip, Reason::NotCaughtUp)
    );
}
