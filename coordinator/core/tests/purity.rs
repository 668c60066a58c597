//! Keeps `cronstable-core` pure: no I/O dependencies in its tree, and no I/O or clock calls in
//! its source.
//!
//! Why the rule exists: every decision cronstable makes (who leads, who owns a job, run or
//! skip) lives in this crate so it can be tested as plain functions, exhaustively and with
//! properties, with time passed in as an argument (design/anchors.md, habits 1 and 2). One
//! socket, file read or clock read inside it would make those tests depend on the machine and
//! the moment they run, and would let the shim (which links this crate) grow network code.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates that do networking, async I/O or talk to a coordination service. None may appear in
/// the core's normal (non-dev) dependency tree, on any target.
const FORBIDDEN_CRATES: &[&str] = &[
    "tokio",
    "tonic",
    "prost",
    "rustls",
    "hyper",
    "axum",
    "mio",
    "socket2",
    "reqwest",
    "etcd-client",
    "kube",
];

/// Paths that reach the filesystem, the network, other processes, the process environment or
/// the clock. Matched in the crate's own source, outside `//` comments.
const FORBIDDEN_PATHS: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "SystemTime::now",
    "Utc::now",
    "Instant::now",
    "std::env::var",
];

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_dependency_tree_has_no_io_crates() {
    // coordinator/core -> the workspace root, two levels up.
    let workspace = manifest_dir()
        .ancestors()
        .nth(2)
        .expect("the workspace root");
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "cronstable-core",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        // Every target, so a dependency gated on some other platform is seen too.
        .args(["--target", "all"])
        .current_dir(workspace)
        .output()
        .expect("cargo tree runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "cargo tree failed:\n{stderr}");
    let tree = String::from_utf8(output.stdout).expect("cargo tree prints UTF-8");
    assert!(
        tree.lines().any(|l| l.starts_with("cronstable-core ")),
        "cargo tree did not list cronstable-core itself; is the command right?\n{tree}"
    );

    let found: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| FORBIDDEN_CRATES.contains(name))
        .collect();
    assert!(
        found.is_empty(),
        "cronstable-core depends (directly or not) on {found:?}. The core must stay free of \
         I/O crates: it holds every cluster decision so they can be tested as pure functions, \
         and the executor shim links it. Put I/O in the coordinator or a backend crate and pass \
         its results into the core as plain data."
    );
}

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code part of a line: everything before a `//` comment. (A `//` inside a string literal
/// also cuts the line, which can only hide a match inside that literal, never invent one.)
fn code_part(line: &str) -> &str {
    line.split_once("//").map_or(line, |(code, _)| code)
}

/// Forbidden uses on one line, including grouped imports such as `use std::{fs, net}`.
fn violations_in(line: &str) -> Vec<String> {
    let code = code_part(line);
    let mut found: Vec<String> = FORBIDDEN_PATHS
        .iter()
        .filter(|p| code.contains(*p))
        .map(|p| p.to_string())
        .collect();
    if let Some(start) = code.find("std::{") {
        let group = &code[start + "std::{".len()..];
        for module in ["fs", "net", "process", "env"] {
            let named = group
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| word == module);
            if named {
                found.push(format!("std::{{{module}}}"));
            }
        }
    }
    found
}

#[test]
fn the_grouped_import_check_works() {
    // The scanner itself must catch what it claims to, or the next test proves nothing.
    assert_eq!(
        violations_in("use std::{collections::BTreeMap, fs};"),
        ["std::{fs}"]
    );
    assert_eq!(
        violations_in("let t = std::time::SystemTime::now();"),
        ["SystemTime::now"]
    );
    assert!(violations_in("// a comment about std::fs").is_empty());
    assert!(violations_in("use std::{fmt, str::FromStr};").is_empty());
}

#[test]
fn the_source_does_no_io_and_reads_no_clock() {
    let src = manifest_dir().join("src");
    let mut files = Vec::new();
    rust_sources(&src, &mut files);
    assert!(
        files.len() >= 5,
        "found only {} source files under {}",
        files.len(),
        src.display()
    );

    let mut hits = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (i, line) in text.lines().enumerate() {
            for what in violations_in(line) {
                let rel = file.strip_prefix(manifest_dir()).unwrap_or(file);
                hits.push(format!(
                    "  {}:{}: {what}: {}",
                    rel.display(),
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "cronstable-core must not touch the filesystem, network, processes, environment or \
         clock. Decisions here are pure so they can be tested exhaustively and replayed; time \
         is an argument (e.g. scheduled_at_unix_ms), and I/O belongs to the coordinator, the \
         backends or the shim. Found:\n{}",
        hits.join("\n")
    );
}
