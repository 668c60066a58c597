//! The monitoring that ships in `deploy/monitoring/`: the alerting rules pass `promtool check
//! rules` and their unit tests (`tests/monitoring/alerts_test.yaml`, `promtool test rules`),
//! the scrape config passes `promtool check config`, and every expression in the rules and in
//! the Grafana dashboard names only series the coordinator registers, so a renamed metric
//! cannot leave a dashboard or an alert silently empty.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn promtool(args: &[&str], dir: &Path) {
    let promtool = Path::new("/usr/bin/promtool");
    assert!(
        promtool.exists(),
        "promtool is missing: install Debian's prometheus package (tests/run.sh does as root)"
    );
    let out = Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_alerting_rules_and_scrape_config_pass_promtool_and_the_rule_tests() {
    let monitoring = repo().join("deploy/monitoring");
    promtool(&["check", "rules", "alerts.yaml"], &monitoring);
    promtool(&["check", "config", "prometheus.yaml"], &monitoring);
    promtool(
        &["test", "rules", "alerts_test.yaml"],
        &repo().join("tests/monitoring"),
    );
}

/// Every metric family name the coordinator registers, from its source: the string literals
/// that name a `cronstable_` or `process_` series in the metrics module.
fn registered() -> BTreeSet<String> {
    let source =
        std::fs::read_to_string(repo().join("coordinator/src/observe/metrics.rs")).unwrap();
    source
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            (s.starts_with("cronstable_") || s.starts_with("process_"))
                && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

/// The series names an expression reads.
fn names_in(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.starts_with("cronstable_") || w.starts_with("process_"))
        .map(str::to_owned)
        .collect()
}

fn unknown(exprs: &[String], known: &BTreeSet<String>) -> Vec<String> {
    let exported = |name: &str| {
        known.contains(name)
            || ["_bucket", "_count", "_sum"]
                .iter()
                .any(|s| name.strip_suffix(s).is_some_and(|h| known.contains(h)))
    };
    exprs
        .iter()
        .flat_map(|e| {
            let names = names_in(e);
            assert!(!names.is_empty(), "{e:?} reads no cronstable series");
            names
        })
        .filter(|n| !exported(n))
        .collect()
}

#[test]
fn every_dashboard_and_alert_expression_names_a_series_the_coordinator_exports() {
    let known = registered();
    assert!(
        known.contains("cronstable_job_runs_total") && known.contains("process_start_time_seconds"),
        "the source scan found {known:?}"
    );
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("deploy/monitoring/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let panel_exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_owned))
        .collect();
    assert!(panel_exprs.len() >= 10, "{panel_exprs:?}");
    assert_eq!(unknown(&panel_exprs, &known), Vec::<String>::new());

    let rules: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo().join("deploy/monitoring/alerts.yaml")).unwrap(),
    )
    .unwrap();
    let rule_exprs: Vec<String> = rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["expr"].as_str().map(str::to_owned))
        .collect();
    assert!(rule_exprs.len() >= 10, "{rule_exprs:?}");
    assert_eq!(unknown(&rule_exprs, &known), Vec::<String>::new());
    // The check can fail: a name the coordinator does not export is caught.
    assert_eq!(
        unknown(&["rate(cronstable_job_runz_total[5m])".into()], &known),
        ["cronstable_job_runz_total"]
    );
}
