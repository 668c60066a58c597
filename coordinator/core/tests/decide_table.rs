//! Data-driven tests of `decide`: every row of `testdata/decide/*.txt` (format in that
//! folder's README.md) is parsed strictly and checked, and the files together must show every
//! distinct outcome `decide` can produce for each policy and firing kind, so a new branch in
//! the table cannot go unpinned.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cronstable_core::{
    ClusterPolicy, Decision, FiringKind, Gate, ManagerView, Reason, Verdict, decide,
};

/// One parsed row, with where it came from for error messages.
struct Row {
    at: String,
    policy: ClusterPolicy,
    kind: FiringKind,
    gate: Gate,
    want: Decision,
}

fn table_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/decide");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no tables in {}", dir.display());
    files
}

fn yes_no(at: &str, key: &str, value: &str) -> bool {
    match value {
        "yes" => true,
        "no" => false,
        _ => panic!("{at}: {key}={value}: expected yes or no"),
    }
}

fn parse_reason(at: &str, code: &str) -> Reason {
    Reason::ALL
        .into_iter()
        .find(|r| r.code() == code)
        .unwrap_or_else(|| panic!("{at}: unknown reason {code:?}"))
}

fn parse_row(at: String, line: &str) -> Row {
    let (inputs, output) = line
        .split_once(" ---- ")
        .unwrap_or_else(|| panic!("{at}: no ` ---- ` separator"));

    let mut keys: BTreeMap<&str, &str> = BTreeMap::new();
    for token in inputs.split_whitespace() {
        let (k, v) = token
            .split_once('=')
            .unwrap_or_else(|| panic!("{at}: {token:?} is not k=v"));
        assert!(keys.insert(k, v).is_none(), "{at}: {k} given twice");
    }
    let mut take = |k: &str| {
        keys.remove(k)
            .unwrap_or_else(|| panic!("{at}: missing {k}="))
    };

    let policy: ClusterPolicy = take("policy")
        .parse()
        .unwrap_or_else(|e| panic!("{at}: {e}"));
    let kind = match take("kind") {
        "scheduled" => FiringKind::Scheduled,
        "reboot" => FiringKind::Reboot,
        "manual" => FiringKind::Manual,
        "retry" => FiringKind::Retry { attempt: 2 },
        other => panic!("{at}: unknown kind {other:?}"),
    };
    let gate = match take("gate") {
        "off" => Gate::ElectionOff,
        "none" => Gate::NoManager,
        "retrying" => Gate::ManagerRetrying,
        "starting" => Gate::Starting,
        "manager" => {
            let mut flag = |k: &str| yes_no(&at, k, take(k));
            Gate::Manager(ManagerView {
                conflict: flag("conflict"),
                quorate: flag("quorate"),
                converging: flag("converging"),
                spread: flag("spread"),
                leader_owner: flag("leader_owner"),
                availability_owner: flag("availability_owner"),
                // Optional, default no: only @reboot rows need it (RBT-06).
                reboot_ran: keys
                    .remove("reboot_ran")
                    .is_some_and(|v| yes_no(&at, "reboot_ran", v)),
                reboot_ran_unknown: keys
                    .remove("reboot_ran_unknown")
                    .is_some_and(|v| yes_no(&at, "reboot_ran_unknown", v)),
                // Optional, default no: only the lease backends' PreferLeader rows need it.
                owner_unconfirmed: keys
                    .remove("owner_unconfirmed")
                    .is_some_and(|v| yes_no(&at, "owner_unconfirmed", v)),
            })
        }
        other => panic!("{at}: unknown gate {other:?}"),
    };
    let kind = match (kind, keys.remove("attempt")) {
        (FiringKind::Retry { .. }, Some(n)) => FiringKind::Retry {
            attempt: n
                .parse()
                .unwrap_or_else(|e| panic!("{at}: attempt={n}: {e}")),
        },
        (_, Some(_)) => panic!("{at}: attempt= only goes with kind=retry"),
        (kind, None) => kind,
    };
    assert!(
        keys.is_empty(),
        "{at}: unexpected keys {:?}",
        keys.keys().collect::<Vec<_>>()
    );

    let want = match output.split_whitespace().collect::<Vec<_>>()[..] {
        ["run", r] => Decision::run(parse_reason(&at, r)),
        ["skip", r] => Decision::skip(parse_reason(&at, r)),
        ["defer", r] => Decision::defer(parse_reason(&at, r)),
        _ => panic!("{at}: expected `run|skip|defer <reason>` after ----, got {output:?}"),
    };
    Row {
        at,
        policy,
        kind,
        gate,
        want,
    }
}

fn all_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for path in table_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if !line.is_empty() && !line.starts_with('#') {
                rows.push(parse_row(format!("{name}:{}", i + 1), line));
            }
        }
    }
    rows
}

fn show(d: Decision) -> String {
    format!("{} {}", d.verdict.as_str(), d.reason.code())
}

#[test]
fn every_row_holds() {
    let rows = all_rows();
    assert!(
        rows.len() >= 60,
        "only {} rows; are the tables truncated?",
        rows.len()
    );
    let failures: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let got = decide(r.policy, r.kind, r.gate);
            (got != r.want).then(|| format!("{}: want {}, got {}", r.at, show(r.want), show(got)))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} rows disagree with decide:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_tables_show_every_outcome_decide_can_produce() {
    // For each (policy, kind), the set of decisions reachable over all gates must appear in
    // some row. A new branch in decide then fails here until a row documents it.
    let shown: BTreeSet<(ClusterPolicy, &str, String)> = all_rows()
        .into_iter()
        .map(|r| (r.policy, common::kind_name(r.kind), show(r.want)))
        .collect();
    let mut missing = Vec::new();
    for (policy, kind, gate) in common::all_inputs() {
        let d = decide(policy, kind, gate);
        let key = (policy, common::kind_name(kind), show(d));
        if !shown.contains(&key) {
            missing.push(format!("{policy} {} -> {} (e.g. {gate:?})", key.1, key.2));
        }
    }
    missing.sort();
    missing.dedup_by(|a, b| a.split(" (e.g.").next() == b.split(" (e.g.").next());
    assert!(
        missing.is_empty(),
        "outcomes no table row shows:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_tables_cover_every_policy_kind_and_gate_type() {
    let mut combos = BTreeSet::new();
    for r in all_rows() {
        let gate = match r.gate {
            Gate::ElectionOff => "off",
            Gate::NoManager => "none",
            Gate::ManagerRetrying => "retrying",
            Gate::Starting => "starting",
            Gate::Manager(_) => "manager",
        };
        combos.insert((r.policy, common::kind_name(r.kind), gate));
    }
    // Manual runs are never gated, so one gate type each would do; the rest need every type.
    for policy in ClusterPolicy::ALL {
        for kind in ["scheduled", "reboot", "retry"] {
            for gate in ["off", "none", "retrying", "starting", "manager"] {
                assert!(
                    combos.contains(&(policy, kind, gate)),
                    "no row for policy={policy} kind={kind} gate={gate}"
                );
            }
        }
        assert!(
            combos
                .iter()
                .any(|(p, k, _)| *p == policy && *k == "manual"),
            "{policy} manual"
        );
    }
    // Sanity: the verdicts used are real.
    let verdicts: BTreeSet<&str> = all_rows().iter().map(|r| r.want.verdict.as_str()).collect();
    for v in [Verdict::Run, Verdict::Skip, Verdict::Defer] {
        assert!(
            verdicts.contains(v.as_str()),
            "no row expects {}",
            v.as_str()
        );
    }
}
