//! Crontab parser properties: it never panics, every valid line loads whatever surrounds it,
//! and every invalid line is exactly one error on its own line.

use std::collections::{BTreeMap, HashSet};

use cronstable_core::ClusterPolicy;
use cronstable_core::crontab::parse;
use proptest::prelude::*;

/// One line (or an annotation and its job line) of a generated crontab.
#[derive(Debug, Clone)]
enum Piece {
    /// A valid job; `Some(policy)` puts a `name=` annotation with that policy above it.
    Job(&'static str, Option<ClusterPolicy>),
    /// A line that can only be an error: it starts with `!`, which no schedule, comment or
    /// valid variable name does.
    Garbage(String),
    Comment(String),
    Blank,
    Env(u8, String),
}

fn piece() -> impl Strategy<Value = Piece> {
    let schedule = proptest::sample::select(
        &[
            "* * * * *",
            "*/5 1-3 * * mon-fri",
            "0 0 13 * 5",
            "@daily",
            "@reboot",
            "30 2 29 2 *",
        ][..],
    );
    let policy = proptest::option::of(proptest::sample::select(&ClusterPolicy::ALL[..]));
    prop_oneof![
        3 => (schedule, policy).prop_map(|(s, p)| Piece::Job(s, p)),
        2 => "![ -~]{0,30}".prop_map(Piece::Garbage),
        1 => "# [a-z =%*]{0,20}".prop_map(Piece::Comment),
        1 => Just(Piece::Blank),
        1 => (0u8..3, "[a-z0-9 ]{0,8}").prop_map(|(k, v)| Piece::Env(k, v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn valid_lines_load_and_each_invalid_line_is_one_error(pieces in proptest::collection::vec(piece(), 0..30)) {
        let mut text = String::new();
        let mut line = 0;
        let mut env = BTreeMap::new();
        // What should load: (line, command, name if annotated, policy, environment).
        let mut jobs = Vec::new();
        let mut garbage = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            line += 1;
            match p {
                Piece::Job(schedule, annotation) => {
                    if let Some(policy) = annotation {
                        text.push_str(&format!("# cronstable: name=job-{i} clusterPolicy={policy}\n"));
                        line += 1;
                    }
                    text.push_str(&format!("{schedule} ./job-{i}.sh --flag\n"));
                    let name = annotation.map(|_| format!("job-{i}"));
                    let policy = annotation.unwrap_or_default();
                    jobs.push((line, format!("./job-{i}.sh --flag"), name, policy, env.clone()));
                }
                Piece::Garbage(g) => {
                    text.push_str(g);
                    text.push('\n');
                    garbage.push(line);
                }
                Piece::Comment(c) => text.push_str(&format!("{c}\n")),
                Piece::Blank => text.push('\n'),
                Piece::Env(k, v) => {
                    text.push_str(&format!("VAR_{k} = {v}\n"));
                    env.insert(format!("VAR_{k}"), v.trim().to_owned());
                }
            }
        }
        let parsed = parse(&text, "fuzz");
        prop_assert_eq!(parsed.entries.len(), jobs.len(), "{:?}\n{}", parsed.errors, text);
        for (entry, (line, command, name, policy, env)) in parsed.entries.iter().zip(&jobs) {
            prop_assert_eq!(entry.line, *line);
            prop_assert_eq!(&entry.job.command, command);
            prop_assert_eq!(entry.job.cluster_policy, *policy);
            prop_assert_eq!(&entry.job.environment, env);
            if let Some(name) = name {
                prop_assert_eq!(&entry.job.name, name);
            }
        }
        let lines: Vec<usize> = parsed.errors.iter().map(|e| e.line).collect();
        prop_assert_eq!(lines, garbage);
        for e in &parsed.errors {
            let shown = e.to_string();
            let prefix = format!("fuzz:{}: ", e.line);
            prop_assert!(shown.starts_with(&prefix));
        }
    }

    #[test]
    fn never_panics_and_keeps_its_promises_on_crontab_like_noise(
        fragments in proptest::collection::vec(proptest::sample::select(&[
            "#", " cronstable:", " name=a", " name=b", " seconds=true", " timeout=5", "=", "%",
            "\\", "*", "*/5", "@daily", "@reboot", "0", "5", " ", "\t", "'", "\"", "CRON_TZ=",
            "Europe/Berlin", "TZ=UTC", "A", "\n", "\n", "\r\n", "é", "./x",
        ][..]), 0..80),
    ) {
        let text: String = fragments.concat();
        let parsed = parse(&text, "noise");
        let line_count = text.lines().count();
        let mut names = HashSet::new();
        let mut last = 0;
        for e in &parsed.entries {
            prop_assert!(e.line > last && e.line <= line_count);
            last = e.line;
            prop_assert!(names.insert(e.job.name.clone()), "duplicate name {}", e.job.name);
            prop_assert!(!e.job.command.trim().is_empty());
        }
        for e in &parsed.errors {
            prop_assert!(e.line >= 1 && e.line <= line_count && !e.message.is_empty());
        }
    }

    #[test]
    fn never_panics_on_arbitrary_text(text in "\\PC{0,300}") {
        let _ = parse(&text, "any");
    }
}
