//! The judgement of one firing: each breach at the moment it shows, and none before.

use super::*;

const MIN: i64 = 60_000;

fn look(now_ms: i64) -> Look {
    Look {
        expect: Expectation {
            complete_within: Some(Duration::from_secs(600)),
            max_duration: Some(Duration::from_secs(120)),
        },
        single_run: true,
        instant_ms: 0,
        now_ms,
        grace: Duration::from_secs(5),
    }
}

fn run(node: &str, attempt: u32, start: i64, end: Option<(i64, bool)>) -> RunSeen {
    RunSeen {
        node: node.into(),
        attempt,
        started_at_ms: start,
        ended: end.map(|(at_ms, succeeded)| RunEnded {
            at_ms,
            duration_ms: (at_ms - start) as u64,
            succeeded,
        }),
    }
}

fn breaches(found: &[Finding]) -> Vec<Breach> {
    found.iter().map(|f| f.breach).collect()
}

#[test]
fn a_firing_nobody_ran_is_missed_only_after_its_deadline_and_the_grace() {
    assert!(judge(look(10 * MIN), &[]).is_empty(), "at the deadline");
    assert!(
        judge(look(10 * MIN + 4_999), &[]).is_empty(),
        "inside the grace"
    );
    let found = judge(look(10 * MIN + 5_000), &[]);
    assert_eq!(breaches(&found), [Breach::Missed]);
    assert!(
        found[0]
            .why
            .contains("no node ran it within completeWithin 10m"),
        "{}",
        found[0].why
    );
}

#[test]
fn a_success_in_time_anywhere_meets_it_and_a_failure_or_a_late_success_does_not() {
    let now = 11 * MIN;
    let ok = [run("n2", 1, 1_000, Some((MIN, true)))];
    assert!(judge(look(now), &ok).is_empty());
    let retried = [
        run("n1", 1, 1_000, Some((MIN, false))),
        run("n3", 2, 2 * MIN, Some((3 * MIN, true))),
    ];
    assert!(
        judge(look(now), &retried).is_empty(),
        "a retry that succeeds in time meets it"
    );
    let failed = [run("n1", 1, 1_000, Some((MIN, false)))];
    let found = judge(look(now), &failed);
    assert_eq!(breaches(&found), [Breach::Missed]);
    assert!(
        found[0].why.contains("no run succeeded"),
        "{}",
        found[0].why
    );
    let mut late = look(now);
    late.expect.max_duration = None;
    let found = judge(late, &[run("n1", 1, 9 * MIN, Some((10 * MIN + 1, true)))]);
    assert_eq!(breaches(&found), [Breach::Missed]);
    assert!(found[0].why.contains("finished after"), "{}", found[0].why);
}

#[test]
fn two_runs_of_one_attempt_are_a_duplicate_on_a_leader_job_only() {
    let runs = [
        run("n1", 1, 1_000, Some((2_000, true))),
        run("n2", 1, 1_500, Some((2_500, true))),
    ];
    let found = judge(look(3_000), &runs);
    assert_eq!(breaches(&found), [Breach::Duplicated]);
    assert!(
        found[0].why.contains("attempt 1 ran on both n1 and n2"),
        "{}",
        found[0].why
    );
    let mut shared = look(3_000);
    shared.single_run = false;
    assert!(
        judge(shared, &runs).is_empty(),
        "EveryNode and PreferLeader may run twice"
    );
    let handed_on = [
        run("n1", 1, 1_000, Some((2_000, false))),
        run("n2", 2, 3_000, Some((4_000, true))),
    ];
    assert!(
        judge(look(5_000), &handed_on).is_empty(),
        "a retry on another node is no duplicate"
    );
    let twice_here = [run("n1", 1, 1_000, None), run("n1", 1, 1_200, None)];
    assert_eq!(
        breaches(&judge(look(3_000), &twice_here)),
        [Breach::Duplicated]
    );
}

#[test]
fn a_run_is_too_long_while_it_still_runs_past_max_duration_or_once_it_ended_past_it() {
    let going = [run("n1", 1, 1_000, None)];
    assert!(
        judge(look(1_000 + 2 * MIN), &going).is_empty(),
        "exactly at the limit"
    );
    let found = judge(look(1_001 + 2 * MIN), &going);
    assert_eq!(breaches(&found), [Breach::TooLong]);
    assert!(
        found[0].why.contains("is still running"),
        "{}",
        found[0].why
    );
    let ended = [run("n1", 1, 1_000, Some((1_000 + 3 * MIN, true)))];
    let found = judge(look(4 * MIN), &ended);
    assert_eq!(breaches(&found), [Breach::TooLong]);
    assert!(found[0].why.contains("ran 3m"), "{}", found[0].why);
}

#[test]
fn the_settings_are_checked_once_for_every_door() {
    let every_minute = Schedule::parse("* * * * *", None).unwrap();
    let reboot = Schedule::parse("@reboot", None).unwrap();
    assert_eq!(
        expectation_from(Expectation::default(), &every_minute),
        Ok(None)
    );
    let zero = Expectation {
        complete_within: Some(Duration::ZERO),
        max_duration: Some(Duration::ZERO),
    };
    let problems = expectation_from(zero, &every_minute).unwrap_err();
    assert_eq!(
        problems.iter().map(|p| p.0).collect::<Vec<_>>(),
        ["expect.completeWithin", "expect.maxDuration"]
    );
    let long = Expectation {
        complete_within: Some(MAX_COMPLETE_WITHIN + Duration::from_secs(1)),
        max_duration: None,
    };
    assert!(
        expectation_from(long, &every_minute).unwrap_err()[0]
            .1
            .contains("limit")
    );
    let within = Expectation {
        complete_within: Some(Duration::from_secs(60)),
        max_duration: None,
    };
    assert!(
        expectation_from(within, &reboot).unwrap_err()[0]
            .1
            .contains("@reboot")
    );
    let max_only = Expectation {
        complete_within: None,
        max_duration: Some(Duration::from_secs(60)),
    };
    assert_eq!(expectation_from(max_only, &reboot), Ok(Some(max_only)));
}

#[test]
fn complete_within_spans_at_most_fifty_instants_and_each_finding_says_since_when() {
    let every_minute = Schedule::parse("* * * * *", None).unwrap();
    let at = |mins: u64| Expectation {
        complete_within: Some(Duration::from_secs(mins * 60)),
        max_duration: None,
    };
    assert!(expectation_from(at(50), &every_minute).is_ok());
    let problems = expectation_from(at(51), &every_minute).unwrap_err();
    assert!(
        problems[0].1.contains("more than 50 instants"),
        "{problems:?}"
    );
    let found = judge(
        look(11 * MIN),
        &[run("n1", 1, 1_000, None), run("n2", 1, 2_000, None)],
    );
    let since: Vec<_> = found.iter().map(|f| (f.breach, f.since_ms)).collect();
    assert_eq!(
        since,
        [
            (Breach::Missed, 10 * MIN),
            (Breach::Duplicated, 2_000),
            (Breach::TooLong, 1_000 + 2 * MIN)
        ]
    );
}
