//! The schedule checker against the spec's vectors and an exact oracle
//! (partition-checker.md §4.4, §7, §11; issue 7).

use cronstable_core::ClusterPolicy;
use cronstable_core::checker::matching::{self, Window};
use cronstable_core::checker::{
    Ack, CheckInput, CheckJob, CutOff, Exemption, FORGIVENESS_MS, Lifecycle, OneShot, Period, Run,
    TargetStatus, Validity, check, check_with, live_spans, svg,
};
use proptest::prelude::*;

const S: i64 = 1000;
/// 2000-01-01T00:00:00Z.
const Y2K: i64 = 946_684_800_000;

fn job(name: &str, start: i64, count: u32, interval_s: i64, eps_s: i64, dur_s: i64) -> CheckJob {
    CheckJob {
        name: name.into(),
        start,
        count,
        interval_ms: interval_s * S,
        epsilon_ms: eps_s * S,
        duration_ms: dur_s * S,
        policy: ClusterPolicy::PreferLeader,
        ack: Ack::Acked { at: start - 10 * S },
        nodes: vec![],
        catch_up_window_ms: 0,
    }
}

fn run(job: &str, node: &str, start: i64, end: Option<i64>) -> Run {
    Run {
        job: job.into(),
        node: node.into(),
        start,
        end,
        run_id: format!("{node}-{start}"),
        scheduled_at: None,
    }
}

fn input(jobs: Vec<CheckJob>, runs: Vec<Run>, read_time: i64, test_start: i64) -> CheckInput {
    CheckInput {
        jobs,
        runs,
        read_time,
        test_start,
        ..CheckInput::default()
    }
}

#[test]
fn jepsen_vector_targets_and_solution() {
    let j = job("1", Y2K, 3, 60, 10, 0);
    let runs = vec![
        run("1", "n1", Y2K + 3 * S, Some(Y2K + 13 * S)),
        run("1", "n1", Y2K + 65 * S, Some(Y2K + 75 * S)),
        run("1", "n1", Y2K + 127 * S, Some(Y2K + 137 * S)),
        run("1", "n1", Y2K + 180 * S, Some(Y2K + 190 * S)),
        run("1", "n2", Y2K, None),
    ];
    let far = Y2K + 365 * 24 * 3600 * S;
    let r = check(&input(vec![j.clone()], runs.clone(), far, Y2K));
    let jr = &r.jobs["1"];
    let windows: Vec<(i64, i64)> = jr.targets.iter().map(|t| (t.start, t.end)).collect();
    assert_eq!(
        windows,
        vec![
            (Y2K, Y2K + 15 * S),
            (Y2K + 60 * S, Y2K + 75 * S),
            (Y2K + 120 * S, Y2K + 135 * S)
        ]
    );
    let met: Vec<i64> = jr
        .targets
        .iter()
        .map(|t| t.run.as_ref().unwrap().start)
        .collect();
    assert_eq!(met, vec![Y2K + 3 * S, Y2K + 65 * S, Y2K + 127 * S]);
    assert_eq!(jr.stray.len(), 1, "r4 at 00:03:00 lies in no window");
    assert_eq!(
        jr.incomplete.len(),
        1,
        "r5 never finished and meets nothing"
    );
    // Every target is met (Jepsen's "valid"); the stray r4 is what makes this history fail
    // cronstable's stricter no-stray verdict (MN-09).
    assert_eq!(r.verdicts.at_least_once, Validity::Valid);
    assert_eq!(r.verdicts.no_stray, Validity::Invalid);
    assert!(!jr.valid);

    // Without r2 the middle target is missed.
    let without: Vec<Run> = runs
        .into_iter()
        .filter(|r| r.start != Y2K + 65 * S)
        .collect();
    let r = check(&input(vec![j], without, far, Y2K));
    let jr = &r.jobs["1"];
    assert_eq!(jr.missed, vec![1]);
    assert_eq!(jr.targets[0].run.as_ref().unwrap().start, Y2K + 3 * S);
    assert_eq!(jr.targets[2].run.as_ref().unwrap().start, Y2K + 127 * S);
    assert_eq!(r.verdicts.at_least_once, Validity::Invalid);
}

#[test]
fn the_cutoff_includes_forgiveness_and_duration() {
    // Window of target 1 is [60, 75] s; with duration 3 it is required iff 78 s <= read.
    let j = job("c", Y2K, 3, 60, 10, 3);
    let at = |read_s: i64| {
        let r = check(&input(vec![j.clone()], vec![], Y2K + read_s * S, Y2K));
        r.jobs["c"].targets.iter().filter(|t| t.required).count()
    };
    assert_eq!(at(78), 2);
    assert_eq!(at(77), 1);
    assert_eq!(at(17), 0);
    assert_eq!(at(18), 1);
}

#[test]
fn window_ends_are_inclusive_to_the_millisecond() {
    let j = job("b", Y2K, 1, 60, 10, 0);
    let end = Y2K + 10 * S + FORGIVENESS_MS;
    let met = |start: i64| {
        let r = check(&input(
            vec![j.clone()],
            vec![run("b", "n1", start, Some(start + 1))],
            Y2K + 600 * S,
            Y2K,
        ));
        r.jobs["b"].targets[0].status == TargetStatus::Met
    };
    assert!(met(Y2K));
    assert!(met(end));
    assert!(!met(Y2K - 1));
    assert!(!met(end + 1));
}

#[test]
fn example_a_disjoint_windows_classify_every_run() {
    let t0 = Y2K;
    let mut j = job("7", t0 + 100 * S, 5, 40, 10, 3);
    j.policy = ClusterPolicy::Leader;
    let runs = vec![
        run("7", "n4", t0 + 103 * S, Some(t0 + 106 * S)),
        run("7", "n5", t0 + 112 * S, Some(t0 + 115 * S)),
        run("7", "n4", t0 + 158 * S, Some(t0 + 161 * S)),
        run("7", "n5", t0 + 181 * S, Some(t0 + 184 * S)),
        run("7", "n4", t0 + 183 * S, None),
        run("7", "n4", t0 + 221 * S, Some(t0 + 224 * S)),
        run("7", "n5", t0 + 262 * S, Some(t0 + 265 * S)),
    ];
    let r = check(&input(vec![j], runs, t0 + 260 * S, t0));
    let jr = &r.jobs["7"];
    assert_eq!(jr.algorithm, "merge");
    assert_eq!(jr.targets.iter().filter(|t| t.required).count(), 4);
    assert_eq!(jr.missed, vec![1]);
    assert_eq!(
        jr.duplicates.iter().map(|r| r.start).collect::<Vec<_>>(),
        vec![t0 + 112 * S]
    );
    assert_eq!(
        jr.stray.iter().map(|r| r.start).collect::<Vec<_>>(),
        vec![t0 + 158 * S]
    );
    assert_eq!(
        jr.unrequired.iter().map(|r| r.start).collect::<Vec<_>>(),
        vec![t0 + 262 * S]
    );
    assert_eq!(jr.incomplete.len(), 1);
    // W0 holds two started runs, W2 holds a complete and an incomplete one: 2 extra runs.
    assert_eq!(jr.double_runs, 2);
    assert_eq!(r.verdicts.at_most_once, Validity::Invalid);
    assert_eq!(
        r.verdicts.no_concurrency,
        Validity::Invalid,
        "181..184 overlaps 183.."
    );
    assert!(!jr.valid);
}

#[test]
fn example_b_one_run_cannot_serve_two_overlapping_windows() {
    let j = job("b", Y2K, 3, 10, 20, 0);
    let r = check(&input(
        vec![j.clone()],
        vec![
            run("b", "n1", Y2K + 22 * S, Some(Y2K + 23 * S)),
            run("b", "n1", Y2K + 23 * S, Some(Y2K + 24 * S)),
        ],
        Y2K + 600 * S,
        Y2K,
    ));
    assert_eq!(r.jobs["b"].missed, vec![2]);
    let r = check(&input(
        vec![j],
        vec![
            run("b", "n1", Y2K + 22 * S, Some(Y2K + 23 * S)),
            run("b", "n1", Y2K + 23 * S, Some(Y2K + 24 * S)),
            run("b", "n1", Y2K + 40 * S, Some(Y2K + 41 * S)),
        ],
        Y2K + 600 * S,
        Y2K,
    ));
    assert!(r.jobs["b"].missed.is_empty());
}

#[test]
fn example_c_nested_windows_need_the_greedy() {
    let windows: Vec<Window> = vec![(0, 100), (10, 20)];
    let runs = vec![15, 50];
    assert!(matching::nested(&windows));
    assert_eq!(
        matching::merge(&windows, &runs),
        None,
        "the merge refuses nested input"
    );
    let m = matching::greedy_by_deadline(&windows, &runs);
    assert_eq!(m, vec![Some(1), Some(0)]);
}

#[test]
fn an_exempt_target_cannot_steal_a_required_targets_run() {
    // Overlapping windows; the first is exempt. One run lies in both.
    let mut j = job("e", Y2K, 2, 10, 20, 0);
    j.policy = ClusterPolicy::PreferLeader;
    let mut i = input(
        vec![j],
        vec![run("e", "n1", Y2K + 12 * S, Some(Y2K + 13 * S))],
        Y2K + 600 * S,
        Y2K,
    );
    i.exempt.push(Exemption {
        from: Y2K,
        to: Y2K + 5 * S,
        policy: ClusterPolicy::PreferLeader,
        node: None,
        reason: "GSP-100 hold".into(),
    });
    let r = check(&i);
    let t = &r.jobs["e"].targets;
    assert_eq!(t[0].status, TargetStatus::ExemptMissed);
    assert_eq!(t[1].status, TargetStatus::Met);
    assert_eq!(r.verdicts.at_least_once, Validity::Valid);
}

#[test]
fn gossip_double_runs_inside_an_exemption_are_counted_not_failed() {
    let mut j = job("l", Y2K, 1, 60, 10, 0);
    j.policy = ClusterPolicy::Leader;
    let runs = vec![
        run("l", "n1", Y2K + S, Some(Y2K + 2 * S)),
        run("l", "n3", Y2K + 2 * S, Some(Y2K + 3 * S)),
    ];
    let mut i = input(vec![j], runs, Y2K + 600 * S, Y2K);
    i.exempt.push(Exemption {
        from: Y2K,
        to: Y2K + 30 * S,
        policy: ClusterPolicy::Leader,
        node: None,
        reason: "GSP-121".into(),
    });
    let r = check(&i);
    assert_eq!(r.summary.exempt_double_runs, 1);
    assert_eq!(r.summary.double_runs, 0);
    assert_eq!(r.verdicts.at_most_once, Validity::Valid);
    // The same history without the exemption is a violation (fenced backends).
    i.exempt.clear();
    assert_eq!(check(&i).verdicts.at_most_once, Validity::Invalid);
}

#[test]
fn every_node_jobs_are_judged_per_node() {
    let mut j = job("a", Y2K, 2, 60, 10, 0);
    j.policy = ClusterPolicy::EveryNode;
    j.nodes = vec!["n1".into(), "n2".into()];
    let runs = vec![
        run("a", "n1", Y2K + S, Some(Y2K + 2 * S)),
        run("a", "n1", Y2K + 61 * S, Some(Y2K + 62 * S)),
        run("a", "n2", Y2K + S, Some(Y2K + 2 * S)),
    ];
    let r = check(&input(vec![j], runs, Y2K + 600 * S, Y2K));
    let jr = &r.jobs["a"];
    assert_eq!(jr.targets.len(), 4);
    let missed: Vec<_> = jr
        .missed
        .iter()
        .map(|&i| (jr.targets[i].node.clone(), jr.targets[i].index))
        .collect();
    assert_eq!(missed, vec![(Some("n2".into()), 1)]);
}

#[test]
fn nothing_to_judge_is_unknown_and_phantoms_fail() {
    assert_eq!(check(&CheckInput::default()).valid, Validity::Unknown);
    let j = job("x", Y2K, 1, 60, 10, 0);
    // Read before the first window closes: no required target.
    assert_eq!(
        check(&input(vec![j.clone()], vec![], Y2K + S, Y2K)).valid,
        Validity::Unknown
    );
    // A run of a job nobody defined.
    let r = check(&input(
        vec![j.clone()],
        vec![
            run("x", "n1", Y2K + S, Some(Y2K + 2 * S)),
            run("ghost", "n1", Y2K, Some(Y2K + S)),
        ],
        Y2K + 600 * S,
        Y2K,
    ));
    assert_eq!(r.phantom_runs.len(), 1);
    assert_eq!(r.valid, Validity::Invalid);
    // Indeterminate jobs: runs reported, not judged.
    let mut ind = j;
    ind.ack = Ack::Indeterminate;
    let r = check(&input(
        vec![ind],
        vec![run("x", "n1", Y2K, Some(Y2K + S))],
        Y2K + 600 * S,
        Y2K,
    ));
    assert_eq!(r.unjudged_runs.len(), 1);
    assert_eq!(r.valid, Validity::Unknown);
}

#[test]
fn no_wedge_judges_only_targets_after_the_final_heal() {
    let mut j = job("w", Y2K, 10, 60, 10, 0);
    j.policy = ClusterPolicy::Leader;
    // Runs only for the last three targets (after the heal at 400 s).
    let runs = (7..10)
        .map(|k| {
            run(
                "w",
                "n1",
                Y2K + k * 60 * S + S,
                Some(Y2K + k * 60 * S + 2 * S),
            )
        })
        .collect();
    let mut i = input(vec![j], runs, Y2K + 1200 * S, Y2K);
    i.final_heal = Some(Y2K + 400 * S);
    i.recovery_bound_ms = 10 * S;
    assert_eq!(check(&i).verdicts.no_wedge, Validity::Valid);
    i.final_heal = Some(Y2K + 300 * S);
    assert_eq!(
        check(&i).verdicts.no_wedge,
        Validity::Invalid,
        "target 6 at 360 s is after this heal"
    );
}

#[test]
fn the_report_serialises_with_three_valued_verdicts_and_an_svg_renders() {
    let j = job("s", Y2K, 2, 60, 10, 0);
    let r = check(&input(
        vec![j],
        vec![run("s", "n1", Y2K + S, Some(Y2K + 2 * S))],
        Y2K + 600 * S,
        Y2K,
    ));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["valid"], false);
    assert_eq!(json["verdicts"]["noWedge"], false);
    assert_eq!(json["jobs"]["s"]["targets"][1]["status"], "missed");
    let plot = svg::timeline(&r, &[], "unit <test>");
    assert!(plot.starts_with("<svg") && plot.trim_end().ends_with("</svg>"));
    assert!(plot.contains("#AB0001") && plot.contains("#00AB01"));
    assert!(plot.contains("unit &lt;test&gt;"), "text is escaped");
}

fn one_shot(quorum_formed: bool) -> Lifecycle {
    Lifecycle {
        one_shots: vec![OneShot {
            name: "boot".into(),
            quorum_formed,
        }],
        ..Lifecycle::default()
    }
}

/// A healthy base history: one PreferLeader job met at both targets, so only the lifecycle
/// verdicts decide the overall validity.
fn healthy() -> CheckInput {
    let j = job("p", Y2K, 2, 60, 10, 0);
    input(
        vec![j],
        vec![
            run("p", "n1", Y2K + S, Some(Y2K + 2 * S)),
            run("p", "n1", Y2K + 61 * S, Some(Y2K + 62 * S)),
        ],
        Y2K + 600 * S,
        Y2K,
    )
}

#[test]
fn a_leader_reboot_one_shot_runs_exactly_once_when_a_quorum_formed() {
    let mut i = healthy();
    assert_eq!(check(&i).valid, Validity::Valid);
    // Not run at all although a quorum formed: a missed one-shot.
    let r = check_with(&i, &one_shot(true));
    assert_eq!(r.verdicts.reboot_once, Validity::Invalid);
    assert_eq!(r.valid, Validity::Invalid);
    // Without a quorum, not running is right.
    assert_eq!(
        check_with(&i, &one_shot(false)).verdicts.reboot_once,
        Validity::Valid
    );
    // Run once: valid either way, and the run is no phantom.
    i.runs
        .push(run("boot", "n1", Y2K + 3 * S, Some(Y2K + 3 * S)));
    let r = check_with(&i, &one_shot(true));
    assert_eq!(r.verdicts.reboot_once, Validity::Valid);
    assert_eq!(r.valid, Validity::Valid);
    assert!(r.phantom_runs.is_empty());
    assert_eq!(r.summary.reboot_runs, 1);
    assert_eq!(
        check_with(&i, &one_shot(false)).verdicts.reboot_once,
        Validity::Valid
    );
    // A second start, even one that never finished and long after the first, is a double run.
    i.runs.push(run("boot", "n3", Y2K + 300 * S, None));
    let r = check_with(&i, &one_shot(true));
    assert_eq!(r.verdicts.reboot_once, Validity::Invalid);
    assert_eq!(r.valid, Validity::Invalid);
    let nodes: Vec<&str> = r.one_shots["boot"]
        .runs
        .iter()
        .map(|r| r.node.as_str())
        .collect();
    assert_eq!(nodes, vec!["n1", "n3"]);
    assert_eq!(
        check_with(&i, &one_shot(false)).verdicts.reboot_once,
        Validity::Invalid
    );
    // Not asked for: unknown, and the runs are phantoms as before.
    let r = check(&i);
    assert_eq!(r.verdicts.reboot_once, Validity::Unknown);
    assert_eq!(r.phantom_runs.len(), 2);
}

#[test]
fn live_spans_run_from_each_heal_plus_grace_to_the_next_fault() {
    let p = |from: i64, to: i64| Period {
        from,
        to,
        label: String::new(),
    };
    assert_eq!(live_spans(&[], 2), vec![(i64::MIN, i64::MAX)]);
    // Out of order, one overlap (30..50 inside 20..60 and 55..70) and a gap shorter than the
    // grace (70 + 5 > 72): all of 20..80 is one fault.
    let spans = live_spans(
        &[p(100, 110), p(20, 60), p(30, 50), p(55, 70), p(72, 80)],
        5,
    );
    assert_eq!(spans, vec![(i64::MIN, 20), (85, 100), (115, i64::MAX)]);
    // A fault that starts inside the previous grace leaves no span between them.
    assert_eq!(
        live_spans(&[p(0, 10), p(12, 20)], 5),
        vec![(i64::MIN, 0), (25, i64::MAX)]
    );
}

#[test]
fn leader_liveness_judges_targets_between_faults_only() {
    // Leader, a target every 20 s from 0 to 380 s; ε 5 s.
    let mut j = job("l", Y2K, 20, 20, 5, 0);
    j.policy = ClusterPolicy::Leader;
    j.ack = Ack::Acked { at: Y2K };
    // Runs at every target except k = 3 (60 s), 5 (100 s), 8 (160 s) and 9 (180 s).
    let runs: Vec<Run> = (0..20)
        .filter(|k| ![3, 5, 8, 9].contains(k))
        .map(|k| {
            run(
                "l",
                "n1",
                Y2K + k * 20 * S + 100,
                Some(Y2K + k * 20 * S + 200),
            )
        })
        .collect();
    let mut i = input(vec![j], runs, Y2K + 600 * S, Y2K);
    // Faults 50..90 s and 150..170 s; grace 8 s, so spans are ..50, 98..150, 178.. .
    i.nemesis = vec![
        Period {
            from: Y2K + 50 * S,
            to: Y2K + 90 * S,
            label: "partition".into(),
        },
        Period {
            from: Y2K + 150 * S,
            to: Y2K + 170 * S,
            label: "kill".into(),
        },
    ];
    // no-wedge looks only from 185 s on, where every target is met.
    i.final_heal = Some(Y2K + 170 * S);
    i.recovery_bound_ms = 15 * S;
    let grace = |ms: i64| Lifecycle {
        liveness_grace_ms: Some(ms),
        ..Lifecycle::default()
    };
    let r = check_with(&i, &grace(8 * S));
    // k = 3 (60 s) is inside the fault; k = 8 (160 s) too. k = 5 (100 s) lies in 98..150 with
    // ε to spare: missed. k = 9 (180 s) lies in 178.. : missed. k = 7 (140 s): 145 <= 150,
    // judged and met; k = 2 (40 s): 45 <= 50, judged and met.
    let jr = &r.jobs["l"];
    let missed: Vec<u32> = jr
        .missed_between_faults
        .iter()
        .map(|&t| jr.targets[t].index)
        .collect();
    assert_eq!(missed, vec![5, 9]);
    assert_eq!(r.verdicts.leader_liveness, Validity::Invalid);
    assert_eq!(r.valid, Validity::Invalid);
    assert!(!jr.valid);
    assert_eq!(r.summary.liveness_missed, 2);
    // Judged: k 0..=2 (before the first fault, 45 <= 50), 5..=7, 9..=19 (read at 600 s).
    assert_eq!(r.summary.liveness_judged, 3 + 3 + 11);
    // The same history without the liveness verdict passes: Leader may skip (fail closed),
    // and the final heal is long before these misses matter to no-wedge.
    let plain = check(&i);
    assert_eq!(plain.valid, Validity::Valid);
    assert_eq!(plain.verdicts.leader_liveness, Validity::Unknown);
    assert!(plain.liveness.is_none());
    // A grace of 12 s puts both misses inside a grace: 90 + 12 = 102 > 100, 170 + 12 > 180.
    let r = check_with(&i, &grace(12 * S));
    assert_eq!(r.verdicts.leader_liveness, Validity::Valid);
    assert_eq!(r.summary.liveness_missed, 0);
    // An exemption does not excuse a miss between faults: the grace is the allowance.
    i.exempt.push(Exemption {
        from: Y2K + 95 * S,
        to: Y2K + 105 * S,
        policy: ClusterPolicy::Leader,
        node: None,
        reason: "GSP-121".into(),
    });
    let r = check_with(&i, &grace(8 * S));
    assert_eq!(r.verdicts.leader_liveness, Validity::Invalid);
    assert_eq!(r.summary.liveness_missed, 2);
}

#[test]
fn a_target_too_close_to_the_next_fault_is_not_judged_for_liveness() {
    // Leader target at 46 s; the fault starts at 50 s; ε 5 s: 51 > 50, so not judged.
    let mut j = job("l", Y2K + 46 * S, 1, 60, 5, 0);
    j.policy = ClusterPolicy::Leader;
    let mut i = input(vec![j], vec![], Y2K + 600 * S, Y2K);
    i.nemesis = vec![Period {
        from: Y2K + 50 * S,
        to: Y2K + 60 * S,
        label: "kill".into(),
    }];
    let live = Lifecycle {
        liveness_grace_ms: Some(2 * S),
        ..Lifecycle::default()
    };
    let r = check_with(&i, &live);
    assert_eq!(r.summary.liveness_judged, 0);
    assert_eq!(
        r.verdicts.leader_liveness,
        Validity::Unknown,
        "asked, but nothing to judge"
    );
    // At 45 s it is judged (50 <= 50) and missed.
    i.jobs[0].start = Y2K + 45 * S;
    let r = check_with(&i, &live);
    assert_eq!(r.summary.liveness_judged, 1);
    assert_eq!(r.verdicts.leader_liveness, Validity::Invalid);
}

#[test]
fn a_node_started_cut_off_runs_no_leader_job_until_let_back() {
    let mut l = job("l", Y2K, 10, 20, 5, 0);
    l.policy = ClusterPolicy::Leader;
    let p = job("p", Y2K, 10, 20, 5, 0);
    let mut i = input(
        vec![l, p],
        vec![
            // Before the cut-off span, on the node: fine.
            run("l", "n3", Y2K + 20 * S, Some(Y2K + 21 * S)),
            // In the span on another node (the majority's leader): fine.
            run("l", "n1", Y2K + 40 * S, Some(Y2K + 41 * S)),
            // PreferLeader on the cut-off node: its documented trade, fine.
            run("p", "n3", Y2K + 40 * S, Some(Y2K + 41 * S)),
            // A Leader tick and the Leader one-shot on the cut-off node: violations.
            run("l", "n3", Y2K + 40 * S + 200, None),
            run("boot", "n3", Y2K + 35 * S, Some(Y2K + 35 * S)),
            // At the very end of the span (the heal instant): still inside, closed interval.
            run("l", "n3", Y2K + 60 * S, Some(Y2K + 61 * S)),
            // After it: fine.
            run("l", "n3", Y2K + 80 * S, Some(Y2K + 81 * S)),
        ],
        Y2K + 600 * S,
        Y2K,
    );
    i.jobs[0].ack = Ack::Acked { at: Y2K };
    let mut lc = Lifecycle {
        one_shots: vec![OneShot {
            name: "boot".into(),
            quorum_formed: true,
        }],
        cut_off: vec![CutOff {
            node: "n3".into(),
            from: Y2K + 30 * S,
            to: Y2K + 60 * S,
            label: "restart n3 isolated".into(),
        }],
        ..Lifecycle::default()
    };
    let r = check_with(&i, &lc);
    assert_eq!(r.verdicts.no_leader_cut_off, Validity::Invalid);
    assert_eq!(r.valid, Validity::Invalid);
    let found: Vec<(&str, i64)> = r
        .leader_runs_cut_off
        .iter()
        .map(|c| (c.job.as_str(), c.run.start))
        .collect();
    assert_eq!(
        found,
        vec![
            ("boot", Y2K + 35 * S),
            ("l", Y2K + 40 * S + 200),
            ("l", Y2K + 60 * S)
        ]
    );
    assert_eq!(r.summary.leader_runs_cut_off, 3);
    // Another node's span sees none of them.
    lc.cut_off[0].node = "n4".into();
    assert_eq!(
        check_with(&i, &lc).verdicts.no_leader_cut_off,
        Validity::Valid
    );
    // Not asked for: unknown.
    lc.cut_off.clear();
    assert_eq!(
        check_with(&i, &lc).verdicts.no_leader_cut_off,
        Validity::Unknown
    );
}

/// An exact maximum matching by augmenting paths (Kuhn), the oracle.
fn kuhn(windows: &[Window], runs: &[i64]) -> usize {
    fn try_assign(
        w: usize,
        windows: &[Window],
        runs: &[i64],
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for (r, &t) in runs.iter().enumerate() {
            if windows[w].0 <= t && t <= windows[w].1 && !seen[r] {
                seen[r] = true;
                if owner[r].is_none_or(|o| try_assign(o, windows, runs, seen, owner)) {
                    owner[r] = Some(w);
                    return true;
                }
            }
        }
        false
    }
    let mut owner = vec![None; runs.len()];
    (0..windows.len())
        .filter(|&w| try_assign(w, windows, runs, &mut vec![false; runs.len()], &mut owner))
        .count()
}

fn windows_strategy(uniform: bool) -> impl Strategy<Value = Vec<Window>> {
    prop::collection::vec((0i64..200, 0i64..60), 0..12).prop_map(move |v| {
        v.into_iter()
            .map(|(s, w)| (s, s + if uniform { 25 } else { w }))
            .collect()
    })
}

proptest! {
    #[test]
    fn greedy_is_maximum_and_valid(windows in windows_strategy(false), mut runs in prop::collection::vec(0i64..260, 0..14)) {
        runs.sort_unstable();
        let m = matching::greedy_by_deadline(&windows, &runs);
        prop_assert_eq!(matching::size(&m), kuhn(&windows, &runs));
        let mut used = std::collections::BTreeSet::new();
        for (w, r) in m.iter().enumerate() {
            if let Some(r) = r {
                prop_assert!(windows[w].0 <= runs[*r] && runs[*r] <= windows[w].1);
                prop_assert!(used.insert(*r), "run {} used twice", r);
            }
        }
    }

    #[test]
    fn merge_equals_greedy_without_nesting(windows in windows_strategy(true), mut runs in prop::collection::vec(0i64..260, 0..14)) {
        runs.sort_unstable();
        let merged = matching::merge(&windows, &runs).expect("uniform widths never nest");
        prop_assert_eq!(matching::size(&merged), kuhn(&windows, &runs));
    }

    #[test]
    fn the_result_does_not_depend_on_input_order(seed in 0u64..1000) {
        let j = job("p", Y2K, 6, 40, 10, 2);
        let mut runs: Vec<Run> = (0..10i64)
            .map(|i| run("p", if i % 2 == 0 { "n1" } else { "n2" }, Y2K + ((i * 37 + seed as i64) % 240) * S, Some(Y2K + 250 * S)))
            .collect();
        let a = check(&input(vec![j.clone()], runs.clone(), Y2K + 600 * S, Y2K));
        runs.reverse();
        runs.rotate_left((seed % 10) as usize);
        let b = check(&input(vec![j], runs, Y2K + 600 * S, Y2K));
        prop_assert_eq!(a, b);
    }
}

fn named(job: &str, node: &str, at: i64, start: i64) -> Run {
    Run {
        scheduled_at: Some(at),
        ..run(job, node, start, Some(start + 100))
    }
}

/// A per-second Leader job: with ε + F far wider than the interval, start times cannot say
/// which instant a run was for; runs that name their instant are judged by it exactly, a
/// catch-up as late as the job's window allows meets its own instant, and one instant run on
/// two nodes is a double run.
#[test]
fn runs_that_name_their_instant_are_judged_by_it_catch_ups_included() {
    let mut j = job("tick", Y2K, 6, 1, 0, 0);
    j.policy = ClusterPolicy::Leader;
    j.catch_up_window_ms = 10 * S;
    let at = |k: i64| Y2K + k * S;
    let runs = vec![
        named("tick", "n1", at(0), at(0) + 20),
        named("tick", "n1", at(1), at(1) + 20),
        // 2 caught up 9 s late on another node; 3 never ran.
        named("tick", "n2", at(2), at(2) + 9 * S),
        named("tick", "n2", at(4), at(4) + 15),
        named("tick", "n3", at(4), at(4) + 30),
        named("tick", "n2", at(5), at(5) + 10),
        // Past ε + F + the window: a stray that meets nothing, but a second start of
        // instant 5 all the same.
        named("tick", "n3", at(5), at(5) + 16 * S),
        // An instant the job does not have.
        named("tick", "n1", at(0) + 500, at(0) + 600),
    ];
    let report = check(&input(vec![j], runs, Y2K + 60 * S, Y2K));
    let r = &report.jobs["tick"];
    let status: Vec<_> = r.targets.iter().map(|t| t.status).collect();
    use TargetStatus::*;
    assert_eq!(status, [Met, Met, Met, Missed, Met, Met], "{r:#?}");
    assert_eq!(r.double_runs, 2, "instants 4 and 5 each started twice");
    assert_eq!(r.duplicates.len(), 1);
    assert_eq!(
        r.stray.len(),
        2,
        "the run 16 s after its instant, and the off-grid one"
    );
    assert_eq!(report.verdicts.at_most_once, Validity::Invalid);
}

/// Without the names the same start times are matched by window: a late catch-up meets
/// nothing of its own and the double run hides among neighbouring windows.
#[test]
fn loose_runs_are_still_matched_by_start_time() {
    let mut j = job("tick", Y2K, 3, 60, 1, 0);
    j.policy = ClusterPolicy::Leader;
    let runs = vec![
        run("tick", "n1", Y2K + 100, Some(Y2K + 200)),
        run("tick", "n1", Y2K + 60 * S + 100, Some(Y2K + 60 * S + 200)),
        named("tick", "n2", Y2K + 120 * S, Y2K + 120 * S + 50),
    ];
    let report = check(&input(vec![j], runs, Y2K + 600 * S, Y2K));
    assert_eq!(report.summary.met, 3, "{report:#?}");
    assert_eq!(report.verdicts.at_most_once, Validity::Valid);
}

/// A one-shot (one firing, no interval) named by its instant meets its target; a named run
/// of a target that is not required yet is reported as unrequired, not as meeting it.
#[test]
fn a_named_one_shot_meets_its_target_and_an_unrequired_one_is_not_met() {
    let mut j = job("once", Y2K, 1, 0, 10, 0);
    j.policy = ClusterPolicy::Leader;
    let report = check(&input(
        vec![j.clone()],
        vec![named("once", "n1", Y2K, Y2K + 200)],
        Y2K + 60 * S,
        Y2K,
    ));
    assert_eq!(report.jobs["once"].targets[0].status, TargetStatus::Met);
    let early = check(&input(
        vec![j],
        vec![named("once", "n1", Y2K, Y2K + 200)],
        Y2K + 2 * S,
        Y2K,
    ));
    let r = &early.jobs["once"];
    assert_eq!(r.targets[0].status, TargetStatus::Unrequired);
    assert_eq!(r.unrequired.len(), 1);
}
