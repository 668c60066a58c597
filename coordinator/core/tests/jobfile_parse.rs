//! The YAML job file: fixtures under `testdata/jobfile/`, plus small inline cases.

use std::path::Path;
use std::time::Duration;

use cronstable_core::jobfile::{self, ParsedJobFile};
use cronstable_core::{ClusterPolicy, ConcurrencyPolicy};

fn fixture(name: &str) -> ParsedJobFile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/jobfile")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    jobfile::parse(&text, name)
}

fn inline(text: &str) -> ParsedJobFile {
    jobfile::parse(text, "jobs.yaml")
}

/// (line, path) of every error, for compact assertions.
fn error_sites(parsed: &ParsedJobFile) -> Vec<(Option<usize>, String)> {
    parsed
        .errors
        .iter()
        .map(|e| (e.line, e.path.clone()))
        .collect()
}

fn names(parsed: &ParsedJobFile) -> Vec<&str> {
    parsed.jobs().map(|j| j.name.as_str()).collect()
}

#[test]
fn the_seed_example_loads() {
    let parsed = fixture("seed.yaml");
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let got: Vec<_> = parsed
        .entries
        .iter()
        .map(|e| {
            (
                e.line,
                e.job.name.as_str(),
                e.job.schedule.as_str(),
                e.job.cluster_policy,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (3, "charge-cards", "0 * * * *", ClusterPolicy::Leader),
            (
                8,
                "refresh-cache",
                "*/5 * * * *",
                ClusterPolicy::PreferLeader
            ),
            (13, "rotate-local-logs", "@daily", ClusterPolicy::EveryNode),
        ]
    );
}

#[test]
fn every_key_maps_onto_the_job_spec() {
    let parsed = fixture("full.yaml");
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let jobs: Vec<_> = parsed.jobs().collect();
    let charge = jobs[0];
    assert_eq!(charge.command, "./charge.sh");
    assert_eq!(charge.timezone.as_deref(), Some("Europe/Berlin"));
    assert_eq!(
        charge.environment.get("FOO").map(String::as_str),
        Some("bar")
    );
    assert_eq!(
        charge.environment.get("RETRIES_LEFT").map(String::as_str),
        Some("3")
    );
    assert_eq!(charge.stdin.as_deref(), Some("text"));
    assert_eq!(charge.timeout, Some(Duration::from_secs(600)));
    assert_eq!(charge.retry.retries, 3);
    assert_eq!(charge.retry.backoff, Duration::from_secs(10));
    assert_eq!(charge.retry.max_backoff, Duration::from_secs(300));
    assert_eq!(charge.concurrency_policy, ConcurrencyPolicy::Forbid);

    let every_second = jobs[1];
    assert_eq!(
        every_second.timeout,
        Some(Duration::from_secs(90)),
        "bare number = seconds"
    );
    assert_eq!(every_second.retry.retries, 0);
    assert_eq!(every_second.retry.max_backoff, Duration::ZERO, "0 = no cap");
    assert_eq!(
        every_second.cluster_policy,
        ClusterPolicy::Leader,
        "the default"
    );
    assert_eq!(
        every_second.concurrency_policy,
        ConcurrencyPolicy::Allow,
        "the default"
    );
    assert_eq!(every_second.timezone, None);

    assert!(jobs[2].is_reboot());
    assert_eq!(jobs[2].concurrency_policy, ConcurrencyPolicy::Replace);
}

#[test]
fn bad_jobs_are_reported_and_the_good_ones_still_load() {
    let parsed = fixture("mixed.yaml");
    assert_eq!(names(&parsed), ["good-1", "good-2", "good-3"]);
    assert_eq!(
        error_sites(&parsed),
        [
            (Some(8), "jobs[1].schedule".to_owned()),
            (Some(12), "jobs[2].shedule".to_owned()),
            (Some(16), "jobs[4].name".to_owned()),
            (Some(19), "jobs[5].name".to_owned()),
            (Some(20), "jobs[5].command".to_owned()),
            (Some(22), "jobs[5].timezone".to_owned()),
            (Some(26), "jobs[6].retries".to_owned()),
        ]
    );
    let text: Vec<String> = parsed.errors.iter().map(ToString::to_string).collect();
    assert!(
        text[0].starts_with("mixed.yaml:8: jobs[1].schedule: "),
        "{}",
        text[0]
    );
    assert!(text[1].contains("unknown field `shedule`"), "{}", text[1]);
    assert!(text[2].contains("duplicate job name \"good-1\" (first defined at line 3)"));
    assert!(text[5].contains("Mars/Olympus"));
    assert_eq!(
        parsed.entries[2].job.timeout,
        Some(Duration::from_secs(5400))
    );
}

#[test]
fn documents_without_a_jobs_list_give_one_error_and_no_jobs() {
    for (name, needle, line) in [
        ("empty.yaml", "the document is empty", None),
        (
            "no-jobs-key.yaml",
            "there is no `jobs:` key, only `job`",
            Some(1),
        ),
        (
            "not-a-map.yaml",
            "expected a mapping with a `jobs:` list",
            Some(1),
        ),
        ("syntax-error.yaml", "no jobs were loaded", Some(7)),
    ] {
        let parsed = fixture(name);
        assert!(parsed.entries.is_empty(), "{name}");
        assert_eq!(parsed.errors.len(), 1, "{name}: {:?}", parsed.errors);
        assert!(
            parsed.errors[0].message.contains(needle),
            "{name}: {}",
            parsed.errors[0]
        );
        assert_eq!(parsed.errors[0].line, line, "{name}");
    }
    for text in ["jobs: []\n", "jobs:\n"] {
        assert_eq!(inline(text), ParsedJobFile::default(), "{text:?}");
    }
    assert_eq!(fixture("empty-list.yaml"), ParsedJobFile::default());
}

#[test]
fn an_unknown_top_level_key_is_an_error_but_the_jobs_load() {
    let parsed = inline("version: 2\njobs:\n  - {name: a, command: x, schedule: \"@daily\"}\n");
    assert_eq!(names(&parsed), ["a"]);
    assert_eq!(error_sites(&parsed), [(Some(1), "version".to_owned())]);
}

#[test]
fn field_rules() {
    let job = |extra: &str| {
        inline(&format!(
            "jobs:\n  - name: j\n    command: x\n    schedule: \"@daily\"\n{extra}"
        ))
    };
    let only_error = |extra: &str| {
        let parsed = job(extra);
        assert!(parsed.entries.is_empty(), "{extra}");
        assert_eq!(parsed.errors.len(), 1, "{extra}: {:?}", parsed.errors);
        parsed.errors[0].clone()
    };
    let e = only_error("    timeout: 0\n");
    assert_eq!((e.line, e.path.as_str()), (Some(5), "jobs[0].timeout"));
    let e = only_error("    timeout: soon\n");
    assert!(e.message.contains("invalid duration"), "{e}");
    let e = only_error("    retryBackoff: 1m\n    retryBackoffMax: 10s\n");
    assert_eq!(e.path, "jobs[0].retryBackoffMax");
    let e = only_error("    environment: {\"BAD-NAME\": x}\n");
    assert_eq!(e.path, "jobs[0].environment");
    let e = only_error("    clusterPolicy: leader\n");
    assert!(
        e.message.contains("PreferLeader"),
        "lists the spellings: {e}"
    );
    let e = only_error("    concurrencyPolicy: Sometimes\n");
    assert_eq!(e.path, "jobs[0].concurrencyPolicy");
    let e = only_error("    timezone: Nowhere/Special\n");
    assert_eq!(e.path, "jobs[0].timezone");
    assert!(job("    timezone: America/New_York\n").errors.is_empty());

    let missing = inline("jobs:\n  - name: j\n    schedule: \"@daily\"\n");
    assert!(
        missing.errors[0].message.contains("command"),
        "{:?}",
        missing.errors
    );
    assert_eq!(missing.errors[0].path, "jobs[0]");
}

#[test]
fn names_follow_the_documented_pattern() {
    let with_name = |name: &str| {
        inline(&format!(
            "jobs:\n  - name: \"{name}\"\n    command: x\n    schedule: \"@daily\"\n"
        ))
    };
    for good in ["a", "A.b_c-d", "0day", &"x".repeat(128)] {
        assert!(with_name(good).errors.is_empty(), "{good}");
    }
    for bad in ["", "-a", ".a", "_a", "a b", "a/b", "ä", &"x".repeat(129)] {
        let parsed = with_name(bad);
        assert_eq!(parsed.errors.len(), 1, "{bad}");
        assert_eq!(parsed.errors[0].path, "jobs[0].name", "{bad}");
    }
}

#[test]
fn anchors_and_merge_keys_work_across_jobs() {
    let parsed = inline(
        "jobs:\n  - &base {name: a, command: x, schedule: \"@daily\", retries: 2}\n  - <<: *base\n    name: b\n",
    );
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let retries: Vec<u32> = parsed.jobs().map(|j| j.retry.retries).collect();
    assert_eq!((names(&parsed), retries), (vec!["a", "b"], vec![2, 2]));
}

#[test]
fn flow_style_jobs_are_isolated_too() {
    let parsed = inline(
        "jobs: [{name: a, command: x, schedule: \"@daily\"}, {name: b, command: x, schedule: nope}, {name: c, command: x, schedule: \"@hourly\"}]\n",
    );
    assert_eq!(names(&parsed), ["a", "c"]);
    assert_eq!(
        error_sites(&parsed),
        [(Some(1), "jobs[1].schedule".to_owned())]
    );
}

#[test]
fn a_starting_deadline_is_a_positive_duration_and_defaults_to_ninety_seconds() {
    let parsed = inline(
        "jobs:\n  - {name: a, command: x, schedule: \"* * * * *\", startingDeadline: 5m}\n  \
         - {name: b, command: x, schedule: \"* * * * *\"}\n  \
         - {name: c, command: x, schedule: \"* * * * *\", startingDeadline: 0}\n",
    );
    assert_eq!(names(&parsed), ["a", "b"]);
    let jobs: Vec<_> = parsed.jobs().collect();
    assert_eq!(jobs[0].starting_deadline, Some(Duration::from_secs(300)));
    assert_eq!(jobs[0].starting_deadline(), Duration::from_secs(300));
    assert_eq!(jobs[1].starting_deadline, None);
    assert_eq!(jobs[1].starting_deadline(), Duration::from_secs(90));
    let sites = error_sites(&parsed);
    assert_eq!(sites.len(), 1, "{sites:?}");
    assert!(sites[0].1.contains("startingDeadline"), "{sites:?}");
}

/// The catch-up keys load into one policy; a bad value or combination is an error naming the
/// file, the line and the key, and only that job is left out.
#[test]
fn catch_up_keys_load_or_fail_on_their_own_line_and_key() {
    use cronstable_core::catch_up::{CatchUp, CatchUpPolicy};
    let parsed = inline(
        "jobs:\n\
         \x20 - name: a\n\
         \x20   command: x\n\
         \x20   schedule: \"* * * * * *\"\n\
         \x20   startingDeadline: 5s\n\
         \x20   catchUp: all\n\
         \x20   catchUpWindow: 10s\n\
         \x20 - name: b\n\
         \x20   command: x\n\
         \x20   schedule: \"* * * * *\"\n\
         \x20   catchUp: sometimes\n\
         \x20 - name: c\n\
         \x20   command: x\n\
         \x20   schedule: \"* * * * *\"\n\
         \x20   catchUp: latest\n\
         \x20   catchUpWindow: 1m\n\
         \x20 - name: d\n\
         \x20   command: x\n\
         \x20   schedule: \"* * * * *\"\n\
         \x20   catchUpLimit: 3\n\
         \x20 - {name: e, command: x, schedule: \"* * * * *\"}\n",
    );
    assert_eq!(names(&parsed), ["a", "e"]);
    let jobs: Vec<_> = parsed.jobs().collect();
    assert_eq!(
        jobs[0].catch_up,
        Some(CatchUpPolicy {
            mode: CatchUp::All,
            window: Duration::from_secs(10),
            limit: 10,
        })
    );
    assert_eq!(jobs[1].catch_up, None);
    let sites = error_sites(&parsed);
    assert_eq!(
        sites,
        [
            (Some(11), "jobs[1].catchUp".to_owned()),
            (Some(16), "jobs[2].catchUpWindow".to_owned()),
            (Some(20), "jobs[3].catchUpLimit".to_owned()),
        ]
    );
    let text: Vec<String> = parsed.errors.iter().map(|e| e.to_string()).collect();
    assert!(
        text[0].contains("jobs.yaml:11") && text[0].contains("sometimes"),
        "{text:?}"
    );
    assert!(text[1].contains("startingDeadline 1m30s"), "{text:?}");
}

/// `expect:` loads into the job; an empty block or a bad setting is an error on its own line
/// and key, and only that job is left out.
#[test]
fn expect_loads_or_fails_on_its_own_line_and_key() {
    use cronstable_core::expect::Expectation;
    let parsed = inline(
        "jobs:\n\
         \x20 - name: a\n\
         \x20   command: x\n\
         \x20   schedule: \"* * * * *\"\n\
         \x20   expect:\n\
         \x20     completeWithin: 15m\n\
         \x20     maxDuration: 10m\n\
         \x20 - name: b\n\
         \x20   command: x\n\
         \x20   schedule: \"* * * * *\"\n\
         \x20   expect:\n\
         \x20     maxDuration: 0s\n\
         \x20 - name: c\n\
         \x20   command: x\n\
         \x20   schedule: \"* * * * *\"\n\
         \x20   expect: {}\n\
         \x20 - name: d\n\
         \x20   command: x\n\
         \x20   schedule: \"* * * * *\"\n\
         \x20   expect: {completeWithin: 5m, within: 1m}\n\
         \x20 - {name: e, command: x, schedule: \"@reboot\", expect: {maxDuration: 1h}}\n",
    );
    assert_eq!(names(&parsed), ["a", "e"]);
    let jobs: Vec<_> = parsed.jobs().collect();
    assert_eq!(
        jobs[0].expect,
        Some(Expectation {
            complete_within: Some(Duration::from_secs(900)),
            max_duration: Some(Duration::from_secs(600)),
        })
    );
    assert_eq!(
        jobs[1].expect.and_then(|e| e.max_duration),
        Some(Duration::from_secs(3600))
    );
    let sites = error_sites(&parsed);
    assert_eq!(sites.len(), 3, "{sites:?}");
    assert_eq!(
        sites[0],
        (Some(12), "jobs[1].expect.maxDuration".to_owned())
    );
    assert_eq!(sites[1], (Some(16), "jobs[2].expect".to_owned()));
    assert!(sites[2].1.starts_with("jobs[3]"), "{sites:?}");
    let text: Vec<String> = parsed.errors.iter().map(|e| e.to_string()).collect();
    assert!(text[2].contains("within"), "{text:?}");
}
