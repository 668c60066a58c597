//! Every config fixture under `testdata/config/`, checked against the expectations written in
//! its own comments:
//!
//! - `# expect-error: <key path> @<line> ~<text>`: an error at that key and line whose message
//!   contains the text;
//! - `# expect-warning: <text>`: a warning containing the text.
//!
//! The fixture must produce exactly the listed errors and warnings, no more.

use std::fs;
use std::path::{Path, PathBuf};

use cronstable_coordinator::config::{self, ConfigErrors, Loaded};

struct ExpectedError {
    path: String,
    line: usize,
    text: String,
}

fn expectations(text: &str) -> (Vec<ExpectedError>, Vec<String>) {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("# expect-error: ") {
            let (path, rest) = rest.split_once(" @").expect("`path @line ~text`");
            let (line, text) = rest.split_once(" ~").expect("`@line ~text`");
            errors.push(ExpectedError {
                path: path.to_owned(),
                line: line.parse().expect("line number"),
                text: text.to_owned(),
            });
        } else if let Some(rest) = line.strip_prefix("# expect-warning: ") {
            warnings.push(rest.to_owned());
        }
    }
    (errors, warnings)
}

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/config")
        .join(dir);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

fn check_warnings(name: &str, warnings: &[String], expected: &[String]) {
    for want in expected {
        assert!(
            warnings.iter().any(|w| w.contains(want.as_str())),
            "{name}: no warning containing {want:?} in {warnings:#?}"
        );
    }
    assert_eq!(
        warnings.len(),
        expected.len(),
        "{name}: warnings {warnings:#?}"
    );
}

#[test]
fn valid_fixtures_load_with_exactly_their_expected_warnings() {
    for path in fixtures("valid") {
        let name = path.display().to_string();
        let text = fs::read_to_string(&path).unwrap();
        let (errors, warnings) = expectations(&text);
        assert!(
            errors.is_empty(),
            "{name}: a valid fixture expects no errors"
        );
        let loaded: Loaded = config::load(&path).unwrap_or_else(|e| panic!("{name}:\n{e}"));
        check_warnings(&name, &loaded.warnings, &warnings);
        let (ok, report) = config::validate_report(&path);
        assert!(ok, "{report}");
        assert!(
            report.ends_with(&format!(
                "{name}: valid: 0 errors, {} warning{}\n",
                warnings.len(),
                if warnings.len() == 1 { "" } else { "s" }
            )),
            "{report}"
        );
    }
}

#[test]
fn invalid_fixtures_fail_with_exactly_their_expected_errors() {
    for path in fixtures("invalid") {
        let name = path.display().to_string();
        let text = fs::read_to_string(&path).unwrap();
        let (expected, warnings) = expectations(&text);
        assert!(
            !expected.is_empty(),
            "{name}: an invalid fixture must expect an error"
        );
        let ConfigErrors(errors) = config::load(&path).expect_err(&name);
        for want in &expected {
            assert!(
                errors.iter().any(|e| e.path == want.path
                    && e.line == Some(want.line)
                    && e.file == name
                    && e.message.contains(want.text.as_str())),
                "{name}: no error at {} line {} containing {:?} in:\n{}",
                want.path,
                want.line,
                want.text,
                ConfigErrors(errors.clone())
            );
        }
        assert_eq!(
            errors.len(),
            expected.len(),
            "{name}:\n{}",
            ConfigErrors(errors.clone())
        );
        let (ok, report) = config::validate_report(&path);
        assert!(!ok);
        // The report lists errors first, then warnings, then the summary.
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines.len(), errors.len() + warnings.len() + 1, "{report}");
        assert!(
            lines[..errors.len()]
                .iter()
                .all(|l| l.starts_with("error: ")),
            "{report}"
        );
        assert!(
            lines[errors.len()..lines.len() - 1]
                .iter()
                .all(|l| l.starts_with("warning: "))
        );
        for want in &warnings {
            assert!(
                report.contains(want.as_str()),
                "{name}: warning {want:?} in\n{report}"
            );
        }
        assert!(lines.last().unwrap().contains(": invalid: "), "{report}");
    }
}
