//! The crontab parser against golden fixtures (`testdata/crontab/NAME.crontab` and what it
//! loads, `NAME.expected`), plus the line-level rules (`%`, environment lines, derived names)
//! checked through [`parse`].

use std::fmt::Write as _;
use std::path::Path;

use cronstable_core::crontab::{ParsedCrontab, parse};
use cronstable_core::duration::format_duration;

/// A readable rendering of everything a parse produced, for the `.expected` files.
fn render(parsed: &ParsedCrontab) -> String {
    let mut out = String::new();
    for e in &parsed.entries {
        let j = &e.job;
        let timeout = j.timeout.map_or("none".to_owned(), format_duration);
        let env: Vec<String> = j
            .environment
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        writeln!(out, "line {}: {}", e.line, j.name).unwrap();
        let zone = j.timezone.as_deref().unwrap_or("UTC");
        writeln!(out, "  schedule {:?} in {zone}", j.schedule).unwrap();
        writeln!(out, "  command {:?}", j.command).unwrap();
        if let Some(stdin) = &j.stdin {
            writeln!(out, "  stdin {stdin:?}").unwrap();
        }
        writeln!(
            out,
            "  policy {} concurrency {} timeout {timeout} retries {} backoff {}..{}",
            j.cluster_policy,
            j.concurrency_policy.as_str(),
            j.retry.retries,
            format_duration(j.retry.backoff),
            format_duration(j.retry.max_backoff),
        )
        .unwrap();
        let env = if env.is_empty() {
            "(none)".to_owned()
        } else {
            env.join(" ")
        };
        writeln!(out, "  env {env}").unwrap();
    }
    for e in &parsed.errors {
        writeln!(out, "error {e}").unwrap();
    }
    out
}

#[test]
fn fixtures_load_exactly_what_their_expected_files_say() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/crontab");
    let mut checked = 0;
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "crontab") {
            continue;
        }
        let Ok(expected) = std::fs::read_to_string(path.with_extension("expected")) else {
            continue;
        };
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let got = render(&parse(&std::fs::read_to_string(&path).unwrap(), &name));
        if got != expected {
            failures.push(format!("{name}\n--- expected\n{expected}--- got\n{got}"));
        }
        checked += 1;
    }
    assert!(checked >= 2, "only {checked} fixtures with .expected files");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The only job of a one-line crontab, or its error.
fn one(line: &str) -> Result<cronstable_core::JobSpec, String> {
    let mut parsed = parse(line, "t");
    match (parsed.entries.pop(), parsed.errors.pop()) {
        (Some(e), None) => Ok(e.job),
        (None, Some(e)) => Err(e.message),
        other => panic!("{line:?}: {other:?}"),
    }
}

#[test]
fn percent_splits_the_command_and_its_input_as_cronie_does() {
    let split = |cmd: &str| {
        let job = one(&format!("* * * * * {cmd}")).unwrap();
        (job.command, job.stdin)
    };
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        split("mail -s hi root%a%b"),
        ("mail -s hi root".into(), some("a\nb\n"))
    );
    assert_eq!(
        split("cat%ends in newline%"),
        ("cat".into(), some("ends in newline\n"))
    );
    assert_eq!(split(r"date +\%s"), ("date +%s".into(), None));
    assert_eq!(
        split(r"echo \\%x"),
        (r"echo \\".into(), some("x\n")),
        "`\\\\` escapes nothing"
    );
    assert_eq!(split(r"printf 'a\tb'"), (r"printf 'a\tb'".into(), None));
    assert_eq!(
        split(r"cat%50\% off%\n%tail\"),
        ("cat".into(), some("50% off\n\\n\ntail\\\n")),
        "in the input only `\\%` loses its backslash"
    );
    assert_eq!(
        split("cmd%"),
        ("cmd".into(), None),
        "no input left, none written"
    );
    assert!(
        one("* * * * * %input only")
            .unwrap_err()
            .contains("command is empty")
    );
}

#[test]
fn environment_lines_trim_unquote_and_apply_to_the_lines_below() {
    let parsed = parse(
        "A = 'x y'\nB=\"#\"  \nC=it's\nD=\n0 * * * * ./one\nA=changed\n0 * * * * ./two\n",
        "t",
    );
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let env = |i: usize| parsed.entries[i].job.environment.clone();
    assert_eq!(env(0)["A"], "x y");
    assert_eq!(env(0)["B"], "#");
    assert_eq!(env(0)["C"], "it's", "a quote inside a value is literal");
    assert_eq!(env(0)["D"], "");
    assert_eq!((env(0).len(), env(1)["A"].as_str()), (4, "changed"));
    for (line, says) in [
        ("1X=y", "`1X`"),
        ("A='x", "never closed"),
        ("A='x' y", "after the closing"),
    ] {
        assert!(one(line).unwrap_err().contains(says), "{line}");
    }
}

#[test]
fn line_endings_and_blanks_do_not_change_what_loads() {
    let unix = parse("A=1\n# c\n0 * * * * ./x --y\n", "t");
    let dos = parse("A=1\r\n# c\r\n0  *\t* * *   ./x --y\r\n", "t");
    assert!(unix.errors.is_empty() && dos.errors.is_empty());
    assert_eq!(unix.entries, dos.entries, "same job, same derived name");
}

#[test]
fn derived_names_are_slugs_of_the_command_plus_a_hash_of_the_line() {
    let name = |line: &str| one(line).unwrap().name;
    let a = name("0 * * * * /usr/local/bin/backup.sh --all");
    assert!(
        a.starts_with("backup-sh-") && a.len() == "backup-sh-".len() + 8,
        "{a}"
    );
    assert_eq!(
        a,
        name("0  *  * * * /usr/local/bin/backup.sh --all"),
        "field spacing"
    );
    assert_ne!(
        a,
        name("5 * * * * /usr/local/bin/backup.sh --all"),
        "another schedule"
    );
    assert_ne!(
        a,
        name("0 * * * * /usr/local/bin/backup.sh --some"),
        "another command"
    );
    let long = name("@daily __Very_Long.Program-Name_With_Many_Parts.py");
    assert!(long.starts_with("very-long-program-name-w-"), "{long}");
    assert!(name("@daily ../../..").starts_with("job-"));
    assert!(name("@daily FOO=1 ./x").starts_with("foo-1-"));
}

#[test]
fn reordering_lines_and_editing_comments_keeps_every_derived_name() {
    let names = |text: &str| {
        let mut n: Vec<String> = parse(text, "x")
            .entries
            .into_iter()
            .map(|e| e.job.name)
            .collect();
        n.sort();
        n
    };
    let a = names("0 1 * * * ./a.sh\n5 1 * * * ./b.sh\n@reboot ./c.sh\n");
    let b = names("# moved\n@reboot ./c.sh\n5 1 * * * ./b.sh\n\n# note\n0 1 * * * ./a.sh\n");
    assert_eq!(a, b);
}

#[test]
fn a_nul_character_is_an_error_on_its_line_and_nothing_else_is_lost() {
    let parsed = parse(
        "0 * * * * ./a\nA=x\0y\n0 * * * * ./b\0\n5 * * * * ./c\n",
        "t",
    );
    let lines: Vec<usize> = parsed.errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [2, 3]);
    assert!(parsed.errors[0].message.contains("NUL"));
    let commands: Vec<&str> = parsed
        .entries
        .iter()
        .map(|e| e.job.command.as_str())
        .collect();
    assert_eq!(commands, ["./a", "./c"]);
}
