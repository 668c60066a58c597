//! `cronstable verify` as an operator runs it: a jobs file and host run logs in, a JSON report,
//! an exit code and an SVG timeline out (issue 7).

use std::process::Command;

use cronstable_tests::binary;

const T0: i64 = 1_800_000_000_000;

fn verify(dir: &std::path::Path, log: &str) -> (Option<i32>, serde_json::Value) {
    let jobs = dir.join("jobs.json");
    std::fs::write(
        &jobs,
        format!(
            r#"{{"jobs": [{{"name": "j1", "start": {T0}, "count": 3, "intervalMs": 60000,
                "epsilonMs": 10000, "durationMs": 1000, "policy": "Leader",
                "ack": {{"state": "acked", "at": {}}}}}]}}"#,
            T0 - 30_000
        ),
    )
    .unwrap();
    let runs = dir.join("n1.jsonl");
    std::fs::write(&runs, log).unwrap();
    let out = Command::new(binary("cronstable"))
        .args(["verify", "--jobs"])
        .arg(&jobs)
        .arg("--runs")
        .arg(&runs)
        .args(["--read-time", &(T0 + 600_000).to_string(), "--svg"])
        .arg(dir.join("timeline.svg"))
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), report)
}

fn line(ev: &str, node: &str, id: &str, t: i64) -> String {
    format!(r#"{{"ev":"{ev}","job":"j1","node":"{node}","runId":"{id}","t":{t}}}"#) + "\n"
}

#[test]
fn a_clean_history_passes_and_a_double_run_fails_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let clean: String = (0..3)
        .map(|k| {
            let t = T0 + k * 60_000 + 200;
            line("start", "n1", &format!("r{k}"), t)
                + &line("end", "n1", &format!("r{k}"), t + 1000)
        })
        .collect();
    let (code, report) = verify(dir.path(), &clean);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["valid"], true);
    assert_eq!(report["summary"]["met"], 3);
    let svg = std::fs::read_to_string(dir.path().join("timeline.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");

    // A second node runs the second firing too: a Leader at-most-once violation.
    let doubled = clean
        + &line("start", "n2", "x", T0 + 60_000 + 900)
        + &line("end", "n2", "x", T0 + 61_900)
        + "garbage line\n";
    let (code, report) = verify(dir.path(), &doubled);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["verdicts"]["atMostOnce"], false);
    assert_eq!(report["summary"]["doubleRuns"], 1);
    assert_eq!(
        report["errors"].as_array().unwrap().len(),
        1,
        "the bad line is reported"
    );
}

#[test]
fn an_unreadable_jobs_file_is_a_usage_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs.json");
    std::fs::write(&jobs, "{\"jobz\": []}").unwrap();
    let out = Command::new(binary("cronstable"))
        .args(["verify", "--jobs"])
        .arg(&jobs)
        .args(["--runs", "/dev/null"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("jobs.json: not a jobs file"), "{err}");
}
