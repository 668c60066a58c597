//! Every fuzz target's committed seeds and saved crashes, replayed through the target's own
//! check on the stable toolchain: the regression value of fuzzing, in every test run.
//!
//! Inputs come from three folders under `tests/fuzz/`: `seeds/TARGET/` (committed, never empty),
//! `regressions/TARGET/` (committed: crashes found once and fixed) and `artifacts/TARGET/`
//! (where `cargo fuzz` leaves a crash it has just found; not committed, replayed when present so
//! that a local `cargo test` reproduces it without nightly).
#![allow(missing_docs)]

use std::collections::BTreeSet;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use cronstable_fuzz_checks::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The files directly in `dir`, sorted; none when the folder does not exist.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs every input of one target through its check; returns how many ran and each input that
/// failed with the panic's message.
fn replay(root: &Path, name: &str, check: fn(&[u8])) -> (usize, Vec<String>) {
    let mut ran = 0;
    let mut failures = Vec::new();
    for folder in ["seeds", "regressions", "artifacts"] {
        for file in inputs(&root.join(folder).join(name)) {
            let data = std::fs::read(&file).expect("a readable input");
            ran += 1;
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| check(&data))) {
                let why = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic".into());
                failures.push(format!("{}: {why}", file.display()));
            }
        }
    }
    (ran, failures)
}

fn replay_target(name: &str) {
    let (_, check) = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no check named {name}"));
    let seeds = inputs(&fuzz_dir().join("seeds").join(name)).len();
    assert!(
        seeds > 0,
        "tests/fuzz/seeds/{name}/ holds no seed to replay"
    );
    let (ran, failures) = replay(&fuzz_dir(), name, *check);
    assert!(ran >= seeds);
    assert!(
        failures.is_empty(),
        "{} of {ran} inputs of fuzz target {name} fail its check:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_fuzz_target_has_a_check_replayed_here() {
    let on_disk: BTreeSet<String> = inputs(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let checked: BTreeSet<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(
        on_disk, checked,
        "tests/fuzz/fuzz_targets/ and cronstable_fuzz_checks::TARGETS must name the same targets"
    );
}

#[test]
fn a_failing_input_is_reported_by_its_file() {
    // The replay must be able to fail: a check that panics on one byte is caught and the input
    // named, whichever folder it sits in.
    fn panics_on_x(data: &[u8]) {
        assert!(!data.contains(&b'x'), "found an x");
    }
    let root = tempfile::tempdir().unwrap();
    for (folder, file, body) in [
        ("seeds", "good", "abc"),
        ("regressions", "fixed", "axc"),
        ("artifacts", "crash-1", "xyz"),
    ] {
        let dir = root.path().join(folder).join("t");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(file), body).unwrap();
    }
    let (ran, failures) = replay(root.path(), "t", panics_on_x);
    assert_eq!(ran, 3);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures[0].contains("regressions/t/fixed") && failures[0].contains("found an x"));
    assert!(failures[1].contains("artifacts/t/crash-1"));
}

#[test]
fn crontab_seeds() {
    replay_target("crontab");
}

#[test]
fn jobfile_seeds() {
    replay_target("jobfile");
}

#[test]
fn config_seeds() {
    replay_target("config");
}

#[test]
fn peer_body_seeds() {
    replay_target("peer_body");
}

#[test]
fn node_stats_seeds() {
    replay_target("node_stats");
}

#[test]
fn grpc_requests_seeds() {
    replay_target("grpc_requests");
}
