//! The repository's structural rules, read from the source text itself.
//!
//! The compiler accepts a module that imports one that imports it back, and a requirement ID
//! that names nothing; a reader pays for each. These checks make them fail
//! in the fast tier, with messages that name files and lines. They read Rust source as text:
//! [`code_only`] blanks comments and literals, so what remains is code, and the rest are small
//! scanners over it. They are not a Rust parser; they are exact for the code in this
//! repository, and their own tests pin the constructs they must see through.

pub mod functions;
pub mod imports;
pub mod requirements;
pub mod scan;

use std::path::{Path, PathBuf};

/// The workspace root (this crate lives at `tests/house`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Every `.rs` file under `dir`, sorted, as paths relative to `dir`.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && let Ok(rel) = path.strip_prefix(dir)
            {
                out.push(rel.to_path_buf());
            }
        }
    }
    out.sort();
    out
}
