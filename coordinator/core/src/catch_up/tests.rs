use std::collections::BTreeSet;

use super::*;

/// 2026-03-02T00:00:00Z, a Monday.
const T0: i64 = 1_772_409_600_000;

fn every_second() -> Schedule {
    Schedule::parse("* * * * * *", None).unwrap()
}

fn policy(mode: CatchUp, window_s: u64, limit: u32) -> CatchUpPolicy {
    CatchUpPolicy {
        mode,
        window: Duration::from_secs(window_s),
        limit,
    }
}

fn keys(mode: Option<&str>, window: Option<u64>, limit: Option<u32>) -> CatchUpKeys {
    CatchUpKeys {
        mode: mode.map(|m| m.parse().unwrap()),
        window: window.map(Duration::from_secs),
        limit,
    }
}

fn check(
    k: CatchUpKeys,
    schedule: &str,
    policy: ClusterPolicy,
    deadline_s: u64,
) -> Result<Option<CatchUpPolicy>, Vec<(&'static str, String)>> {
    let schedule = Schedule::parse(schedule, None).unwrap();
    policy_from(k, &schedule, policy, Duration::from_secs(deadline_s))
}

fn problem_keys(
    r: Result<Option<CatchUpPolicy>, Vec<(&'static str, String)>>,
) -> Vec<&'static str> {
    r.expect_err("a config error")
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

#[test]
fn no_keys_or_none_is_no_policy_and_a_policy_keeps_what_was_written() {
    use ClusterPolicy::Leader;
    assert_eq!(
        check(keys(None, None, None), "* * * * *", Leader, 90),
        Ok(None)
    );
    assert_eq!(
        check(keys(Some("none"), None, None), "* * * * *", Leader, 90),
        Ok(None)
    );
    assert_eq!(
        check(keys(Some("all"), Some(600), None), "* * * * *", Leader, 90),
        Ok(Some(policy(CatchUp::All, 600, DEFAULT_LIMIT)))
    );
    assert_eq!(
        check(
            keys(Some("latest"), Some(3600), None),
            "0 * * * *",
            Leader,
            90
        ),
        Ok(Some(policy(CatchUp::Latest, 3600, DEFAULT_LIMIT)))
    );
    // The limit bounds `all` only: `latest` runs one instant however long its window.
    assert_eq!(
        check(
            keys(Some("latest"), Some(86_400), None),
            "* * * * *",
            Leader,
            90
        ),
        Ok(Some(policy(CatchUp::Latest, 86_400, DEFAULT_LIMIT)))
    );
}

#[test]
fn an_unknown_mode_names_the_three_spellings() {
    let e = "sometimes".parse::<CatchUp>().unwrap_err();
    assert!(
        e.contains("\"sometimes\"") && e.contains("none, latest or all"),
        "{e}"
    );
    for m in [CatchUp::None, CatchUp::Latest, CatchUp::All] {
        assert_eq!(m.as_str().parse::<CatchUp>(), Ok(m));
    }
}

/// Every bad combination is refused with the key it is about, never loaded half-configured.
#[test]
fn bad_combinations_name_their_key() {
    use ClusterPolicy::{EveryNode, Leader, PreferLeader};
    let cases: Vec<(CatchUpKeys, &str, ClusterPolicy, u64, Vec<&str>)> = vec![
        // Settings for a catch-up that is off.
        (
            keys(None, Some(60), None),
            "* * * * *",
            Leader,
            90,
            vec!["catchUpWindow"],
        ),
        (
            keys(Some("none"), None, Some(3)),
            "* * * * *",
            Leader,
            90,
            vec!["catchUpLimit"],
        ),
        // No window, or an empty one.
        (
            keys(Some("all"), None, None),
            "* * * * *",
            Leader,
            90,
            vec!["catchUpWindow"],
        ),
        (
            keys(Some("all"), Some(0), None),
            "* * * * *",
            Leader,
            90,
            vec!["catchUpWindow"],
        ),
        // A deadline longer than the window.
        (
            keys(Some("all"), Some(60), None),
            "* * * * *",
            Leader,
            90,
            vec!["catchUpWindow"],
        ),
        // A window longer than the period times the limit: 11 minutes of a per-minute job.
        (
            keys(Some("all"), Some(660), None),
            "* * * * *",
            Leader,
            90,
            vec!["catchUpWindow"],
        ),
        (
            keys(Some("all"), Some(11), Some(10)),
            "* * * * * *",
            Leader,
            5,
            vec!["catchUpWindow"],
        ),
        // A limit means nothing to `latest`.
        (
            keys(Some("latest"), Some(60), Some(3)),
            "* * * * *",
            Leader,
            5,
            vec!["catchUpLimit"],
        ),
        // The limit's range.
        (
            keys(Some("all"), Some(600), Some(0)),
            "* * * * *",
            Leader,
            90,
            vec!["catchUpLimit"],
        ),
        (
            keys(Some("all"), Some(600), Some(101)),
            "* * * * *",
            Leader,
            90,
            vec!["catchUpLimit"],
        ),
        // Only Leader jobs are claimed.
        (
            keys(Some("all"), Some(600), None),
            "* * * * *",
            PreferLeader,
            90,
            vec!["catchUp"],
        ),
        (
            keys(Some("all"), Some(600), None),
            "* * * * *",
            EveryNode,
            90,
            vec!["catchUp"],
        ),
        // Nothing to miss.
        (
            keys(Some("latest"), Some(600), None),
            "@reboot",
            Leader,
            90,
            vec!["catchUp"],
        ),
    ];
    for (k, schedule, p, deadline, want) in cases {
        let got = problem_keys(check(k, schedule, p, deadline));
        assert_eq!(got, want, "{k:?} {schedule} {p} deadline {deadline}s");
    }
    // The sentences say what to do.
    let why = check(keys(Some("all"), Some(660), None), "* * * * *", Leader, 90).unwrap_err();
    assert!(
        why[0].1.contains("11m") && why[0].1.contains("1m") && why[0].1.contains("10"),
        "{why:?}"
    );
    let why = check(keys(Some("all"), Some(60), None), "* * * * *", Leader, 90).unwrap_err();
    assert!(why[0].1.contains("startingDeadline 1m30s"), "{why:?}");
}

#[test]
fn the_shortest_gap_is_the_tightest_spacing_of_an_irregular_schedule() {
    let gap = |s: &str| shortest_gap(&Schedule::parse(s, None).unwrap());
    assert_eq!(gap("* * * * * *"), Some(Duration::from_secs(1)));
    assert_eq!(gap("0,10 * * * *"), Some(Duration::from_secs(600)));
    assert_eq!(gap("0 9 * * 1-5"), Some(Duration::from_secs(86_400)));
    assert_eq!(gap("@reboot"), None);
}

/// The owner offers an instant nobody claimed once it is [`GRACE`] old, offers it again after
/// [`REOFFER`] while it stays unclaimed, and forgets it once it is claimed.
#[test]
fn an_unclaimed_instant_is_offered_again_until_it_is_claimed() {
    let s = every_second();
    let p = policy(CatchUp::All, 10, 10);
    let mut t = Tracker::new(T0);
    let claimed: BTreeSet<i64> = [T0 + 2000].into();
    // At T0+3.5 s the instants T0+1 s .. T0+1.5 s are past the grace; T0+1 s is unclaimed.
    let pass = t.step(&s, &p, T0 + 3500, Duration::from_secs(3600), |at| {
        claimed.contains(&at)
    });
    assert_eq!(pass.offer, [T0 + 1000]);
    assert!(pass.given_up.is_empty());
    // A second later: T0+2 s is claimed, T0+1 s was offered a second ago (not again yet).
    let pass = t.step(&s, &p, T0 + 4500, Duration::from_secs(3600), |at| {
        claimed.contains(&at)
    });
    assert_eq!(pass.offer, Vec::<i64>::new());
    let pass = t.step(&s, &p, T0 + 8600, Duration::from_secs(3600), |at| {
        claimed.contains(&at) || at > T0 + 2000
    });
    assert_eq!(pass.offer, [T0 + 1000], "offered again after REOFFER");
    let pass = t.step(&s, &p, T0 + 9600, Duration::from_secs(3600), |_| true);
    assert_eq!(pass, Pass::default());
    assert_eq!(t.pending().count(), 0);
}

/// An instant that leaves the window unclaimed is given up (`window`), once.
#[test]
fn an_instant_that_leaves_the_window_is_given_up_once() {
    let s = every_second();
    let p = policy(CatchUp::All, 5, 10);
    let mut t = Tracker::new(T0);
    let only_first_missed = |at: i64| at != T0 + 1000;
    t.step(
        &s,
        &p,
        T0 + 3500,
        Duration::from_secs(3600),
        only_first_missed,
    );
    let pass = t.step(
        &s,
        &p,
        T0 + 6100,
        Duration::from_secs(3600),
        only_first_missed,
    );
    assert_eq!(
        pass.given_up,
        [GivenUp {
            reason: GiveUp::Window,
            instants: vec![T0 + 1000]
        }]
    );
    let pass = t.step(
        &s,
        &p,
        T0 + 7100,
        Duration::from_secs(3600),
        only_first_missed,
    );
    assert!(pass.given_up.is_empty(), "{pass:?}");
}

/// A node that owns the job only after a gap looks back to where it stopped looking: what the
/// gap left unclaimed inside the window runs; what is older is given up (`window`).
#[test]
fn a_new_owner_finds_what_nobody_ran_since_it_last_looked() {
    let s = every_second();
    let p = policy(CatchUp::All, 5, 10);
    let mut t = Tracker::new(T0);
    // Owner at first, everything ran.
    t.step(&s, &p, T0 + 3000, Duration::from_secs(3600), |_| true);
    // Another node owned the job; then it died at T0+10 s, and nothing ran until T0+20 s.
    t.not_owner();
    let ran = |at: i64| at <= T0 + 10_000;
    let pass = t.step(&s, &p, T0 + 20_500, Duration::from_secs(3600), ran);
    let given: Vec<i64> = pass
        .given_up
        .iter()
        .flat_map(|g| g.instants.clone())
        .collect();
    assert_eq!(given, (11..=15).map(|s| T0 + s * 1000).collect::<Vec<_>>());
    assert!(pass.given_up.iter().all(|g| g.reason == GiveUp::Window));
    assert_eq!(
        pass.offer,
        (16..=18).map(|s| T0 + s * 1000).collect::<Vec<_>>()
    );
}

/// Instants from before this node knew the job are nobody's misses, and instants older than
/// the claims' retention cannot be judged: neither is looked at.
#[test]
fn nothing_before_the_job_was_known_or_past_the_lookback_is_looked_at() {
    let s = every_second();
    let p = policy(CatchUp::All, 10, 10);
    let mut t = Tracker::new(T0 + 5000);
    let pass = t.step(&s, &p, T0 + 9000, Duration::from_secs(3600), |_| false);
    assert_eq!(pass.offer, [T0 + 6000, T0 + 7000]);
    let mut t = Tracker::new(T0);
    let pass = t.step(&s, &p, T0 + 100_000, Duration::from_secs(4), |_| false);
    assert_eq!(pass.offer, [T0 + 97_000, T0 + 98_000]);
    assert!(pass.given_up.is_empty(), "{pass:?}");
}

/// `latest` runs only the newest missed instant; `all` runs them oldest first up to the limit.
#[test]
fn latest_keeps_the_newest_and_all_keeps_the_newest_up_to_the_limit() {
    let s = every_second();
    let missed = |_: i64| false;
    let mut t = Tracker::new(T0);
    let pass = t.step(
        &s,
        &policy(CatchUp::Latest, 10, 10),
        T0 + 6000,
        Duration::from_secs(3600),
        missed,
    );
    assert_eq!(pass.offer, [T0 + 4000]);
    assert_eq!(
        pass.given_up,
        [GivenUp {
            reason: GiveUp::Superseded,
            instants: vec![T0 + 1000, T0 + 2000, T0 + 3000]
        }]
    );
    let mut t = Tracker::new(T0);
    let pass = t.step(
        &s,
        &policy(CatchUp::All, 10, 3),
        T0 + 7000,
        Duration::from_secs(3600),
        missed,
    );
    assert_eq!(pass.offer, [T0 + 3000, T0 + 4000, T0 + 5000]);
    assert_eq!(
        pass.given_up,
        [GivenUp {
            reason: GiveUp::StormLimit,
            instants: vec![T0 + 1000, T0 + 2000]
        }]
    );
}

/// Losing the job drops what was pending without counting it: the new owner finds it
/// unclaimed and counts it, so one node's count is not repeated by the next.
#[test]
fn losing_the_job_forgets_its_pending_instants() {
    let s = every_second();
    let p = policy(CatchUp::All, 10, 10);
    let mut t = Tracker::new(T0);
    let pass = t.step(&s, &p, T0 + 4000, Duration::from_secs(3600), |_| false);
    assert_eq!(pass.offer.len(), 2);
    t.not_owner();
    assert_eq!(t.pending().count(), 0);
}

/// A coordinator restarted a moment ago that wins the lease at once first knew the job after
/// the instant its predecessor process let pass: anchored at the newest claim (where the last
/// owner stopped), it still finds it.
#[test]
fn an_owner_anchored_at_the_newest_claim_finds_what_passed_before_it_started() {
    let s = every_second();
    let p = policy(CatchUp::All, 10, 10);
    let mut t = Tracker::new(T0 + 5000);
    assert!(!t.is_anchored());
    assert_eq!(
        t.anchor(
            Some((T0 + 1000, T0 + 3000)),
            T0 + 5000,
            Duration::from_secs(1)
        ),
        T0 + 3000
    );
    let ran = |at: i64| at <= T0 + 3000 || at >= T0 + 5000;
    let pass = t.step(&s, &p, T0 + 7500, Duration::from_secs(3600), ran);
    assert_eq!(pass.offer, [T0 + 4000]);
    // Without a claim to go by, it looks from when it first knew the job.
    t.not_owner();
    assert!(!t.is_anchored());
    assert_eq!(
        t.anchor(None, T0 + 9000, Duration::from_secs(10)),
        T0 + 5000
    );
}

/// The look always covers the whole window (an owner that died may have left older missed
/// instants pending), but never reaches before the job's oldest claim, nor before a
/// redefinition.
#[test]
fn the_anchor_covers_the_window_but_not_before_the_job_or_its_redefinition() {
    let window = Duration::from_secs(10);
    let mut t = Tracker::new(T0 + 50_000);
    let (now, oldest, newest) = (T0 + 60_000, T0, T0 + 58_000);
    assert_eq!(t.anchor(Some((oldest, newest)), now, window), T0 + 50_000);
    assert_eq!(
        t.anchor(Some((T0 + 55_000, newest)), now, window),
        T0 + 55_000
    );
    assert_eq!(
        t.anchor(Some((oldest, T0 + 20_000)), now, window),
        T0 + 20_000
    );
    let mut r = Tracker::redefined(T0 + 57_000);
    assert_eq!(r.anchor(Some((oldest, newest)), now, window), T0 + 57_000);
}

/// An offer made is not withdrawn: a newer missed instant supersedes only older ones not yet
/// offered, and the storm limit drops only unoffered ones; at most
/// [`MAX_OFFERS_PER_PASS`] go out per pass.
#[test]
fn offers_once_made_stand_and_a_pass_offers_a_bounded_burst() {
    let s = every_second();
    let missed = |_: i64| false;
    let lookback = Duration::from_secs(3600);
    let mut t = Tracker::new(T0);
    let pass = t.step(
        &s,
        &policy(CatchUp::Latest, 10, 10),
        T0 + 3000,
        lookback,
        missed,
    );
    assert_eq!(pass.offer, [T0 + 1000]);
    let pass = t.step(
        &s,
        &policy(CatchUp::Latest, 10, 10),
        T0 + 5000,
        lookback,
        missed,
    );
    assert_eq!(pass.offer, [T0 + 3000], "the newest; T0+1 s stays offered");
    assert_eq!(
        pass.given_up,
        [GivenUp {
            reason: GiveUp::Superseded,
            instants: vec![T0 + 2000]
        }]
    );
    let mut t = Tracker::new(T0);
    let pass = t.step(
        &s,
        &policy(CatchUp::All, 60, 100),
        T0 + 42_000,
        lookback,
        missed,
    );
    assert_eq!(pass.offer.len(), MAX_OFFERS_PER_PASS);
    assert_eq!(pass.offer[0], T0 + 1000, "oldest first");
    let pass = t.step(
        &s,
        &policy(CatchUp::All, 60, 100),
        T0 + 42_500,
        lookback,
        missed,
    );
    assert_eq!(pass.offer.len(), MAX_OFFERS_PER_PASS);
    assert_eq!(pass.offer[0], T0 + 17_000, "the next ones, a pass later");
}
