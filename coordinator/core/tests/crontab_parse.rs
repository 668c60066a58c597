//! The crontab parser against a fixture that uses every feature, and its error cases.

use std::time::Duration;

use cronstable_core::crontab::parse;
use cronstable_core::{ClusterPolicy, ConcurrencyPolicy};
use proptest::prelude::*;

const FEATURES: &str = include_str!("../testdata/crontab/features.crontab");

#[test]
fn every_feature_of_the_fixture_loads() {
    let parsed = parse(FEATURES, "features.crontab");
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let names: Vec<&str> = parsed.entries.iter().map(|e| e.job.name.as_str()).collect();
    assert_eq!(
        names[..5],
        [
            "charge-cards",
            "refresh-cache",
            "rotate-local-logs",
            "mail-report",
            "heartbeat"
        ]
    );

    let charge = &parsed.entries[0];
    assert_eq!(charge.line, 6);
    assert_eq!(charge.job.schedule, "0 * * * *");
    assert_eq!(charge.job.command, "./charge.sh --all");
    assert_eq!(charge.job.cluster_policy, ClusterPolicy::Leader);
    assert_eq!(charge.job.timeout, Some(Duration::from_secs(600)));
    assert_eq!(charge.job.retry.retries, 2);
    assert_eq!(charge.job.retry.backoff, Duration::from_secs(30));
    assert_eq!(charge.job.retry.max_backoff, Duration::from_secs(300));
    assert_eq!(charge.job.concurrency_policy, ConcurrencyPolicy::Forbid);
    assert_eq!(charge.job.environment["GREETING"], "hello world");
    assert_eq!(charge.job.timezone, None);

    assert_eq!(
        parsed.entries[1].job.cluster_policy,
        ClusterPolicy::PreferLeader
    );
    assert_eq!(parsed.entries[2].job.schedule, "@daily");
    assert_eq!(
        parsed.entries[2].job.cluster_policy,
        ClusterPolicy::EveryNode
    );

    let mail = &parsed.entries[3].job;
    assert_eq!(mail.timezone.as_deref(), Some("Europe/Berlin"));
    assert_eq!(mail.command, "mail -s report ops");
    assert_eq!(
        mail.stdin.as_deref(),
        Some("Dear ops,\nthe report is attached.\n"),
        "the trailing `%` is the final newline; cronie adds one only when it is missing"
    );
    assert!(
        !mail.environment.contains_key("CRON_TZ"),
        "CRON_TZ is not passed to commands"
    );

    let heartbeat = &parsed.entries[4].job;
    assert_eq!(heartbeat.schedule, "*/10 * * * * *");
    assert_eq!(heartbeat.command, "date +%s >> /tmp/heartbeat");

    let reboot = &parsed.entries[5].job;
    assert!(reboot.is_reboot());
    assert!(
        reboot.name.starts_with("warm-cache-sh-"),
        "derived name: {}",
        reboot.name
    );
    assert_eq!(
        reboot.cluster_policy,
        ClusterPolicy::Leader,
        "the default policy"
    );
}

#[test]
fn derived_names_survive_reordering_and_comments() {
    let a = parse("0 1 * * * ./a.sh\n5 1 * * * ./b.sh\n", "x");
    let b = parse("# moved\n5 1 * * * ./b.sh\n\n0 1 * * * ./a.sh\n", "x");
    let mut na: Vec<_> = a.entries.iter().map(|e| e.job.name.clone()).collect();
    let mut nb: Vec<_> = b.entries.iter().map(|e| e.job.name.clone()).collect();
    na.sort();
    nb.sort();
    assert_eq!(na, nb);
}

#[test]
fn each_bad_line_is_an_error_naming_file_and_line_and_the_rest_still_load() {
    let text = "\
0 * * * * ./ok-1.sh
61 * * * * ./bad-minute.sh
# cronstable: name=x colour=blue
0 * * * * ./bad-annotation.sh
CRON_TZ=Mars/Olympus
* * * *
# cronstable: name=dup
0 1 * * * ./one.sh
# cronstable: name=dup
0 2 * * * ./two.sh
# cronstable: name=dangling

@bogus ./x.sh
0 3 * * * ./ok-2.sh
";
    let parsed = parse(text, "cron.d/app");
    let shown: Vec<String> = parsed.errors.iter().map(ToString::to_string).collect();
    let lines: Vec<usize> = parsed.errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [2, 3, 4, 5, 6, 10, 11, 13], "{shown:#?}");
    assert!(shown[0].starts_with("cron.d/app:2: "), "{shown:#?}");
    assert!(
        shown[1].contains("colour"),
        "names the unknown key: {shown:#?}"
    );
    assert!(shown[3].contains("Mars/Olympus"), "{shown:#?}");
    assert!(
        shown[5].contains("line 8"),
        "a duplicate names the first line: {shown:#?}"
    );
    assert!(shown[6].contains("not directly followed"), "{shown:#?}");
    let names: Vec<&str> = parsed
        .entries
        .iter()
        .map(|e| e.job.command.as_str())
        .collect();
    assert_eq!(names, ["./ok-1.sh", "./one.sh", "./ok-2.sh"]);
}

proptest! {
    #[test]
    fn parsing_never_panics(text in "\\PC{0,200}") {
        let _ = parse(&text, "fuzz");
    }

    #[test]
    fn valid_lines_load_whatever_garbage_surrounds_them(junk in "[^\\n#%=@0-9*]{1,40}") {
        let text = format!("{junk}\n0 4 * * * ./keep.sh\n{junk}\n");
        let parsed = parse(&text, "fuzz");
        prop_assert!(parsed.entries.iter().any(|e| e.job.command == "./keep.sh"));
    }
}

#[test]
fn a_starting_deadline_annotation_is_a_positive_duration() {
    let parsed = parse(
        "# cronstable: name=a startingDeadline=2m\n* * * * * x\n\
         # cronstable: name=b startingDeadline=0\n* * * * * x\n",
        "t",
    );
    let a = &parsed.entries[0].job;
    assert_eq!(a.name, "a");
    assert_eq!(a.starting_deadline, Some(Duration::from_secs(120)));
    assert_eq!(parsed.entries.len(), 1, "b's deadline of 0 is refused");
    assert!(
        parsed
            .errors
            .iter()
            .any(|e| e.message.contains("startingDeadline=0") && e.message.contains("more than 0")),
        "{:?}",
        parsed.errors
    );
}

#[test]
fn expectation_annotations_load_or_leave_the_job_out_with_the_key_named() {
    use cronstable_core::expect::Expectation;
    let parsed = parse(
        "# cronstable: name=a expect.completeWithin=15m expect.maxDuration=10m\n* * * * * x\n\
         # cronstable: name=b expect.maxDuration=0\n* * * * * x\n\
         # cronstable: name=c expect.completeWithin=1m\n@reboot x\n",
        "t",
    );
    assert_eq!(parsed.entries.len(), 1, "{:?}", parsed.errors);
    assert_eq!(
        parsed.entries[0].job.expect,
        Some(Expectation {
            complete_within: Some(Duration::from_secs(900)),
            max_duration: Some(Duration::from_secs(600)),
        })
    );
    let said: Vec<&str> = parsed.errors.iter().map(|e| e.message.as_str()).collect();
    assert!(
        said.iter()
            .any(|m| m.contains("expect.maxDuration: must be more than 0")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|m| m.contains("expect.completeWithin: an @reboot job")),
        "{said:?}"
    );
}
