//! Requirement IDs (`GSP-40`, `LSE-FS-04`, …): where the repository cites them, and their
//! definitions in `docs/requirements.md`.

use std::collections::BTreeMap;
use std::path::Path;

/// The ID families, longest first where one is a prefix of another (`LSE-FS` before `LSE`).
pub const PREFIXES: [&str; 16] = [
    "LSE-FS", "CFG", "CLI", "DST", "EX", "GSP", "LSE", "MAP", "MN", "NTF", "OVR", "POL", "RBT",
    "ROT", "RTY", "SZ",
];

/// The requirement IDs in `text`, each with its byte offset: a family, a dash and two or three
/// digits, standing alone (`XGSP-40`, `GSP-4000` and `SHA-256` are none).
pub fn ids_in(text: &str) -> Vec<(usize, String)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let standalone = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-');
        if standalone && b[i].is_ascii_uppercase() {
            for p in PREFIXES {
                let rest = &b[i..];
                if rest.starts_with(p.as_bytes()) && rest.get(p.len()) == Some(&b'-') {
                    let digits = rest[p.len() + 1..]
                        .iter()
                        .take_while(|c| c.is_ascii_digit())
                        .count();
                    if (2..=3).contains(&digits) {
                        let end = i + p.len() + 1 + digits;
                        out.push((i, text[i..end].to_owned()));
                        i = end;
                    }
                    break;
                }
            }
        }
        i += 1;
    }
    out
}

/// The places that may cite an ID: the crates, tests, clients, deploy files and the top-level
/// docs (this page itself aside).
const ROOTS: [&str; 9] = [
    "coordinator",
    "executor-shim",
    "proto",
    "tests",
    "clients",
    "deploy",
    "README.md",
    "ARCHITECTURE.md",
    "BENCHMARKS.md",
];
const SKIP_DIRS: [&str; 5] = ["target", "node_modules", "dist", "__pycache__", "corpus"];
const EXTENSIONS: [&str; 12] = [
    "rs", "md", "py", "ts", "js", "yaml", "yml", "sh", "toml", "proto", "html", "json",
];

/// Every ID cited under `root`, with each file and line that cites it.
pub fn cited(root: &Path) -> BTreeMap<String, Vec<(String, usize)>> {
    let mut out: BTreeMap<String, Vec<(String, usize)>> = BTreeMap::new();
    let mut files = Vec::new();
    for top in ROOTS {
        let p = root.join(top);
        if p.is_file() {
            files.push(p);
            continue;
        }
        let mut stack = vec![p];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                if path.is_dir() {
                    if !name.starts_with('.') && !SKIP_DIRS.contains(&name.as_str()) {
                        stack.push(path);
                    }
                } else if path
                    .extension()
                    .is_some_and(|x| EXTENSIONS.iter().any(|e| x == *e))
                {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        for (at, id) in ids_in(&text) {
            out.entry(id)
                .or_default()
                .push((rel.clone(), crate::scan::line_of(&text, at)));
        }
    }
    out
}

/// The rows of `docs/requirements.md`: each defined ID with the files its last column lists.
pub fn defined(page: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for line in page.lines() {
        let cells: Vec<&str> = line.split(" | ").collect();
        let Some(first) = cells.first().and_then(|c| c.strip_prefix("| ")) else {
            continue;
        };
        let ids = ids_in(first);
        if ids.len() != 1 || ids[0].1 != first {
            continue;
        }
        let files = cells
            .last()
            .map(|c| c.split('`').skip(1).step_by(2).map(str::to_owned).collect())
            .unwrap_or_default();
        out.insert(first.to_owned(), files);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stand_alone() {
        let ids: Vec<String> =
            ids_in("GSP-40, LSE-FS-04 (RBT-21a) XGSP-41 GSP-4000 SHA-256 CONF-01")
                .into_iter()
                .map(|(_, id)| id)
                .collect();
        assert_eq!(ids, ["GSP-40", "LSE-FS-04", "RBT-21"]);
    }

    #[test]
    fn rows_and_their_files() {
        let page = "| ID | requires | cited by tests in |\n|---|---|---|\n| GSP-40 | lowest name | `a.rs`, `b/c.rs` |\n| RBT-21 | record | not cited by a test |\n";
        let d = defined(page);
        assert_eq!(d["GSP-40"], ["a.rs", "b/c.rs"]);
        assert!(d["RBT-21"].is_empty());
        assert_eq!(d.len(), 2);
    }
}
