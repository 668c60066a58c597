//! The module graph of one crate, from its `crate::` paths, and its import circles.
//!
//! A module is a file (`a/b.rs`, or `a/mod.rs` for `a`). An edge A → B exists when A's code
//! (test items aside) names a path under `crate::` whose longest module prefix is B. The crate
//! root is left out (it declares every module and re-exports a few helpers), and so are edges
//! between a module and its own ancestors or descendants: a folder's `mod.rs` and its files are
//! one seam. A circle is a strongly connected set of two or more modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::scan::{code_only, line_of, without_tests};

/// A module path: `["gossip", "manager"]` for `gossip/manager.rs`.
pub type ModPath = Vec<String>;

/// One use of another module: where, and the path as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// The file that names the path, relative to the crate's source directory.
    pub file: String,
    /// Its 1-based line.
    pub line: usize,
    /// The path named, `crate::a::b::Item`.
    pub path: String,
}

/// A crate's modules and the first use behind each edge.
#[derive(Debug, Default)]
pub struct Graph {
    /// Every module, with its file relative to the source directory.
    pub modules: BTreeMap<ModPath, String>,
    /// Edges, each with the first use that makes it.
    pub edges: BTreeMap<ModPath, BTreeMap<ModPath, Use>>,
}

/// The module a file declares, or `None` for the crate root and `bin/` targets.
pub fn module_of(rel: &Path) -> Option<ModPath> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.is_empty() || parts == ["lib"] || parts == ["main"] {
        return None;
    }
    Some(parts)
}

/// Every path under `crate::` in `code`, with its byte offset: a `use` tree is expanded
/// (`crate::{a::B, c}` gives `a::B` and `c`), as are plain paths in expressions and types.
pub fn crate_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::").map(|p| from + p) {
        from = at + "crate::".len();
        let before = at.checked_sub(1).map(|i| b[i]);
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$') {
            continue;
        }
        let mut paths = Vec::new();
        tree(b, from, &mut Vec::new(), &mut paths);
        out.extend(paths.into_iter().map(|p| (at, p)));
    }
    out
}

/// Parses one use tree at `i` under `prefix` into `out`; returns where it ends.
fn tree(b: &[u8], mut i: usize, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    i = skip_ws(i);
    if b.get(i) == Some(&b'{') {
        i += 1;
        loop {
            i = skip_ws(i);
            match b.get(i) {
                None => return i,
                Some(b'}') => return i + 1,
                Some(b',') => i += 1,
                Some(_) => {
                    let before = i;
                    let mut inner = prefix.clone();
                    i = tree(b, i, &mut inner, out);
                    if i == before {
                        i += 1;
                    }
                }
            }
        }
    }
    let start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    if i == start {
        if !prefix.is_empty() {
            out.push(prefix.clone());
        }
        return i;
    }
    prefix.push(String::from_utf8_lossy(&b[start..i]).into_owned());
    if b[i..].starts_with(b"::") {
        return tree(b, i + 2, prefix, out);
    }
    out.push(prefix.clone());
    i
}

/// The module graph of the crate whose source directory is `src`.
pub fn graph(src: &Path) -> Graph {
    let mut g = Graph::default();
    let files = crate::rust_files(src);
    for rel in &files {
        if let Some(m) = module_of(rel) {
            g.modules.insert(m, rel.to_string_lossy().into_owned());
        }
    }
    for rel in &files {
        let Some(from) = module_of(rel) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(src.join(rel)) else {
            continue;
        };
        let code = without_tests(&code_only(&text));
        let edges = g.edges.entry(from.clone()).or_default();
        for (at, path) in crate_paths(&code) {
            let Some(to) = (1..=path.len())
                .rev()
                .map(|k| path[..k].to_vec())
                .find(|p| g.modules.contains_key(p))
            else {
                continue;
            };
            if from.starts_with(&to) || to.starts_with(&from) {
                continue;
            }
            edges.entry(to).or_insert_with(|| Use {
                file: rel.to_string_lossy().into_owned(),
                line: line_of(&text, at),
                path: format!("crate::{}", path.join("::")),
            });
        }
    }
    g
}

/// The graph's circles: strongly connected sets of two or more modules, each sorted, in order.
pub fn circles(g: &Graph) -> Vec<Vec<ModPath>> {
    struct Tarjan<'g> {
        g: &'g Graph,
        index: BTreeMap<ModPath, usize>,
        low: BTreeMap<ModPath, usize>,
        stack: Vec<ModPath>,
        on_stack: BTreeSet<ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: &ModPath) {
            let n = self.index.len();
            self.index.insert(v.clone(), n);
            self.low.insert(v.clone(), n);
            self.stack.push(v.clone());
            self.on_stack.insert(v.clone());
            let targets: Vec<ModPath> = self
                .g
                .edges
                .get(v)
                .map(|e| e.keys().cloned().collect())
                .unwrap_or_default();
            for w in targets {
                if !self.index.contains_key(&w) {
                    self.visit(&w);
                    let lw = self.low[&w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(&w) {
                    let iw = self.index[&w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut set = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(&w);
                    let done = &w == v;
                    set.push(w);
                    if done {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.found.push(set);
                }
            }
        }
    }
    let mut t = Tarjan {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for m in g.modules.keys() {
        if !t.index.contains_key(m) {
            t.visit(m);
        }
    }
    t.found.sort();
    t.found
}

/// A circle as a reader needs it: every edge inside it, with the file and line that makes it.
pub fn describe(g: &Graph, circle: &[ModPath]) -> String {
    let mut s = format!(
        "import circle among {}:\n",
        circle
            .iter()
            .map(|m| g.modules[m].as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    for from in circle {
        for (to, u) in g.edges.get(from).into_iter().flatten() {
            if circle.contains(to) {
                s.push_str(&format!(
                    "  {} -> {}  ({}:{} names {})\n",
                    g.modules[from], g.modules[to], u.file, u.line, u.path
                ));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(code: &str) -> Vec<String> {
        crate_paths(code)
            .into_iter()
            .map(|(_, p)| p.join("::"))
            .collect()
    }

    #[test]
    fn use_trees_and_inline_paths() {
        assert_eq!(
            names(
                "use crate::{a::B, c::{d, e::F}, g};\nlet x = crate::h::i(); pub(crate) fn j() {}"
            ),
            ["a::B", "c::d", "c::e::F", "g", "h::i"]
        );
        assert_eq!(names("use crate::a::{self, B};"), ["a::self", "a::B"]);
        assert!(names("$crate::x; mycrate::y").is_empty());
    }

    #[test]
    fn module_paths() {
        assert_eq!(module_of(Path::new("a/mod.rs")), Some(vec!["a".into()]));
        assert_eq!(
            module_of(Path::new("a/b.rs")),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(module_of(Path::new("lib.rs")), None);
        assert_eq!(module_of(Path::new("bin/x.rs")), None);
    }
}
