//! Table-driven schedule cases from `testdata/schedule/*.txt`, in the style of raft-rs's
//! datadriven tests.
//!
//! A case is a command line, a `----` line and the expected output, ending at a blank line.
//! Lines starting with `#` between cases are comments. Commands:
//!
//! - `parse expr=".." [tz=Zone]`: `ok seconds=<bool> reboot=<bool>` or `error: <message>`.
//! - `next expr=".." [tz=Zone] from=<RFC 3339> n=<count>`: the next `n` instants, iterating
//!   `next_after` from `from`.
//! - `prev expr=".." [tz=Zone] at=<RFC 3339> n=<count>`: `latest_at_or_before(at)`, then
//!   repeatedly `latest_at_or_before(t - 1s)`: the same instants, newest first.
//!
//! Instants print as UTC, then the wall clock in the zone with its offset and weekday. A search
//! that finds nothing prints `none`.

use std::fmt::Write as _;
use std::path::Path;

use chrono::{DateTime, TimeDelta, Utc};
use chrono_tz::Tz;
use cronstable_core::schedule::Schedule;

struct Case {
    file: String,
    line: usize,
    command: String,
    expected: String,
}

fn cases(path: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(path).unwrap();
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_end();
        if line.is_empty() || line.starts_with('#') {
            i += 1;
            continue;
        }
        let start = i + 1;
        assert_eq!(
            lines.get(i + 1).map(|l| l.trim_end()),
            Some("----"),
            "{file}:{start}: a command must be followed by `----`"
        );
        i += 2;
        let mut expected = String::new();
        while i < lines.len() && !lines[i].trim().is_empty() {
            expected.push_str(lines[i].trim_end());
            expected.push('\n');
            i += 1;
        }
        out.push(Case {
            file: file.clone(),
            line: start,
            command: line.to_owned(),
            expected,
        });
    }
    out
}

/// `name key=value key="quoted value"` into the name and the pairs.
fn split_command(command: &str) -> (String, Vec<(String, String)>) {
    let mut chars = command.chars().peekable();
    let mut words: Vec<String> = Vec::new();
    while chars.peek().is_some() {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut word = String::new();
        let mut quoted = false;
        while let Some(&c) = chars.peek() {
            if c == '"' {
                quoted = !quoted;
            } else if c.is_whitespace() && !quoted {
                break;
            } else {
                word.push(c);
            }
            chars.next();
        }
        if !word.is_empty() {
            words.push(word);
        }
    }
    let name = words.remove(0);
    let args = words
        .into_iter()
        .map(|w| {
            let (k, v) = w.split_once('=').expect("arguments are key=value");
            (k.to_owned(), v.to_owned())
        })
        .collect();
    (name, args)
}

fn render(t: Option<DateTime<Utc>>, tz: Tz) -> String {
    match t {
        None => "none\n".to_owned(),
        Some(t) => format!(
            "{}  {}\n",
            t.format("%Y-%m-%dT%H:%M:%SZ"),
            t.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S %:z %a")
        ),
    }
}

fn run(case: &Case) -> String {
    let (name, args) = split_command(&case.command);
    let arg = |key: &str| args.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    let instant = |key: &str| -> DateTime<Utc> {
        let text = arg(key).unwrap_or_else(|| panic!("missing {key}="));
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    };
    let expr = arg("expr").expect("missing expr=");
    let tz_name = arg("tz");
    let tz: Tz = tz_name.unwrap_or("UTC").parse().unwrap_or(Tz::UTC);
    let parsed = Schedule::parse(expr, tz_name);
    let count = || arg("n").map_or(1, |n| n.parse::<usize>().unwrap());
    let mut out = String::new();
    match (name.as_str(), parsed) {
        ("parse", Ok(s)) => writeln!(
            out,
            "ok seconds={} reboot={}",
            s.has_seconds(),
            s.is_reboot()
        )
        .unwrap(),
        (_, Err(e)) => writeln!(out, "error: {e}").unwrap(),
        ("next", Ok(s)) => {
            let mut t = instant("from");
            for _ in 0..count() {
                let next = s.next_after(t);
                out.push_str(&render(next, tz));
                let Some(next) = next else { break };
                t = next;
            }
        }
        ("prev", Ok(s)) => {
            let mut t = instant("at");
            for _ in 0..count() {
                let prev = s.latest_at_or_before(t);
                out.push_str(&render(prev, tz));
                let Some(prev) = prev else { break };
                t = prev - TimeDelta::seconds(1);
            }
        }
        (other, Ok(_)) => panic!("{}:{}: unknown command {other}", case.file, case.line),
    }
    out
}

#[test]
fn schedule_cases_from_testdata() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/schedule");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no case files in {}", dir.display());
    let mut failures = Vec::new();
    let mut total = 0;
    for file in &files {
        for case in cases(file) {
            total += 1;
            let got = run(&case);
            if got != case.expected {
                failures.push(format!(
                    "{}:{}: {}\n--- expected\n{}--- got\n{}",
                    case.file, case.line, case.command, case.expected, got
                ));
            }
        }
    }
    assert!(total >= 40, "only {total} cases found");
    assert!(
        failures.is_empty(),
        "{} of {total} cases failed:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}
