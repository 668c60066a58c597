//! YAML deserialization that names the key path, the file and the line of every error.
//!
//! Config keys are public interface, so a typo must be reported where the operator can find it:
//!
//! ```text
//! cronstable.yaml:12:5: cluster.electLeder: unknown field `electLeder`, expected one of ...
//! ```
//!
//! Three pieces work together:
//!
//! - [serde-saphyr] parses and deserializes. Its errors carry a [`serde_saphyr::Location`]
//!   (1-based line and column of the offending node), which becomes [`YamlError::line`] and
//!   [`YamlError::column`].
//! - [`serde_path_to_error`] wraps the deserializer and records the key path of the value being
//!   deserialized when the error happened (`cluster.peers[1].host`). For an unknown key the path
//!   ends in that key, because the path is recorded as soon as the key is read.
//! - [`KeyLines`] walks the parser's event stream once and maps every key path to the position
//!   of its key. Semantic validation that runs after deserialization (say `cluster.etcd.ttl` is
//!   below 3) uses it to point at a line, and it fills in a position serde-saphyr did not report.
//!
//! Target types should use `#[serde(deny_unknown_fields)]`: an unknown key is then an error with
//! a path and a line instead of being silently ignored.
//!
//! # Hostile input
//!
//! Nothing here panics on any input (a proptest feeds random text). Inputs over
//! [`MAX_INPUT_BYTES`] are refused before parsing, and serde-saphyr's budgets are tightened
//! ([`options`]): alias replay (billion laughs), node and event counts, nesting depth and total
//! scalar bytes are all capped far above any real config and far below what would hurt.
//!
//! # Empty documents
//!
//! An empty document (nothing, or only comments) deserializes as YAML null: a struct whose
//! fields all have defaults (`#[serde(default)]`) gets its defaults, an `Option` gets `None`, and
//! a struct with a required field gets an error. Each caller decides which it wants.
//!
//! [serde-saphyr]: https://docs.rs/serde-saphyr

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, DeserializeSeed};
use serde_saphyr::granit_parser::{Event, Parser};
use serde_saphyr::{DefaultMessageFormatter, MessageFormatter};

/// Inputs larger than this are refused without parsing. Config and job files are kilobytes;
/// 4 MiB leaves room for generated job files with thousands of entries.
pub const MAX_INPUT_BYTES: usize = 4 * 1024 * 1024;

/// Upper bound on the key paths [`KeyLines`] records, so a huge document cannot make the index
/// itself the memory problem.
const MAX_INDEXED_PATHS: usize = 200_000;

/// A YAML document that could not be deserialized, or a value in it that failed validation.
///
/// Display: `source:line:column: path: message`, leaving out the parts that are unknown
/// (`source: message` for an unreadable file, `source:3: path: message` without a column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    /// The file name (or other label) the text came from, as the caller passed it.
    pub source: String,
    /// 1-based line of the offending node, when known.
    pub line: Option<usize>,
    /// 1-based column of the offending node, when known.
    pub column: Option<usize>,
    /// Key path of the offending value (`cluster.peers[1].host`); empty for the document root.
    pub path: String,
    /// What is wrong, without the location (that is in the other fields).
    pub message: String,
}

impl YamlError {
    /// An error at `path`, positioned with `lines` (the key's own position, else the nearest
    /// enclosing key's; no position if neither is in the document).
    pub fn at(
        source: &str,
        lines: &KeyLines,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let path = path.into();
        let pos = lines.nearest(&path);
        Self {
            source: source.to_owned(),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            path,
            message: message.into(),
        }
    }
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

// Written by hand rather than with thiserror: thiserror treats a field named `source` as the
// error's cause, and here it is the file name.
impl std::error::Error for YamlError {}

/// The serde-saphyr options every parse in cronstable uses: no rendered snippets (the error is
/// reformatted here), duplicate keys rejected (serde-saphyr's default), and budgets tightened.
pub fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_events = 500_000;
    budget.max_nodes = 100_000;
    budget.max_aliases = 10_000;
    budget.max_anchors = 10_000;
    budget.max_depth = 64;
    budget.max_documents = 1;
    budget.max_total_scalar_bytes = MAX_INPUT_BYTES;
    budget.max_recorded_anchor_bytes = MAX_INPUT_BYTES;
    budget.max_recorded_anchor_events = 100_000;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    // A billion-laughs document expands a few anchors into millions of events; a real config
    // replays at most a few thousand (a shared `<<: *defaults` per job).
    options.alias_limits.max_total_replayed_events = 100_000;
    options.alias_limits.max_replay_stack_depth = 16;
    options.with_snippet = false;
    options
}

/// Deserializes `text` (read from `source`) into a `T`.
///
/// Errors name `source`, the line and column serde-saphyr reported, and the key path.
pub fn parse<T: DeserializeOwned>(text: &str, source: &str) -> Result<T, YamlError> {
    parse_seed(text, source, PhantomData::<T>)
}

/// Like [`parse`], for a [`DeserializeSeed`]: for callers that deserialize part of a document
/// differently (the job file loads each job separately so one bad job does not sink the rest).
pub fn parse_seed<'de, S: DeserializeSeed<'de>>(
    text: &'de str,
    source: &str,
    seed: S,
) -> Result<S::Value, YamlError> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(YamlError {
            source: source.to_owned(),
            line: None,
            column: None,
            path: String::new(),
            message: format!(
                "the document is {} bytes; the limit is {MAX_INPUT_BYTES}",
                text.len()
            ),
        });
    }
    let mut path = String::new();
    let result = serde_saphyr::with_deserializer_from_str_with_options(text, options(), |de| {
        let mut track = serde_path_to_error::Track::new();
        let value = seed.deserialize(serde_path_to_error::Deserializer::new(de, &mut track));
        if value.is_err() {
            path = clean_path(&track.path().to_string());
        }
        value
    });
    result.map_err(|err| {
        let (mut line, mut column) = match err.location() {
            Some(loc) if loc.line() > 0 => (to_usize(loc.line()), to_usize(loc.column())),
            _ => (None, None),
        };
        if line.is_none() {
            // serde-saphyr knows where nearly every error is; if not, the key is the next best
            // (for the root, the document's first node).
            if let Some(pos) = KeyLines::new(text).nearest(&path) {
                line = Some(pos.line);
                column = Some(pos.column);
            }
        }
        YamlError {
            source: source.to_owned(),
            line,
            column,
            path,
            message: message_of(&err),
        }
    })
}

fn to_usize(n: u64) -> Option<usize> {
    usize::try_from(n).ok().filter(|n| *n > 0)
}

/// serde_path_to_error writes `.` for the root and `?` for a segment it could not name (a
/// duplicate key, a non-string key); neither helps a reader.
fn clean_path(path: &str) -> String {
    let mut path = path.trim_start_matches('.').to_owned();
    while let Some(stripped) = path.strip_suffix(".?").or_else(|| path.strip_suffix('?')) {
        path = stripped.to_owned();
    }
    path
}

/// The error's message without serde-saphyr's ` at line L, column C` suffix, control characters
/// escaped (the message may quote document text, and it ends up in logs and terminals).
fn message_of(err: &serde_saphyr::Error) -> String {
    let mut inner = err;
    while let serde_saphyr::Error::AliasError { error, .. }
    | serde_saphyr::Error::WithSnippet { error, .. } = inner
    {
        inner = error;
    }
    let raw = DefaultMessageFormatter.format_message(inner);
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// A 1-based line and column in a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

/// Where every key path of a document is written: `cluster.etcd.ttl` maps to the position of the
/// `ttl` key, `cluster.peers[1]` to the start of the second item.
///
/// Built from the parser's event stream, so it sees the document as written: keys brought in by
/// a merge (`<<: *defaults`) are not indexed (lookups fall back to the enclosing key), and only
/// the first document of a stream is read. A syntax error ends the walk; what came before it
/// stays indexed.
#[derive(Debug, Clone, Default)]
pub struct KeyLines {
    positions: HashMap<String, Position>,
}

enum Frame {
    /// A mapping at `path`. `key` is `None` while a key is expected, `Some(Some(k))` while the
    /// value of key `k` is expected, and `Some(None)` for the value of a key that has no name
    /// (a non-scalar or alias key).
    Map {
        path: String,
        key: Option<Option<String>>,
    },
    /// A sequence at `path`; `next` is the index of the next item.
    Seq { path: String, next: usize },
    /// A collection that has no path (a complex key, or the value under one); counts open
    /// collections so the matching end is found.
    Skip { depth: usize },
}

impl KeyLines {
    /// Indexes `text`. Never fails: unparsable parts are simply not indexed.
    pub fn new(text: &str) -> Self {
        let mut lines = Self::default();
        if text.len() > MAX_INPUT_BYTES {
            return lines;
        }
        let mut stack: Vec<Frame> = Vec::new();
        let mut seen_document = false;
        for item in Parser::new_from_str(text) {
            let Ok((event, span)) = item else { break };
            let pos = Position {
                line: span.start.line(),
                column: span.start.col() + 1,
            };
            match event {
                Event::DocumentStart(..) if seen_document => break,
                Event::DocumentStart(..) => seen_document = true,
                Event::DocumentEnd => break,
                Event::Scalar(value, ..) => lines.node(&mut stack, pos, Some(&value), None),
                Event::Alias(_) => lines.node(&mut stack, pos, None, None),
                Event::MappingStart(..) => lines.node(&mut stack, pos, None, Some(true)),
                Event::SequenceStart(..) => lines.node(&mut stack, pos, None, Some(false)),
                Event::SequenceEnd | Event::MappingEnd => {
                    if let Some(Frame::Skip { depth }) = stack.last_mut() {
                        *depth = depth.saturating_sub(1);
                        if *depth > 0 {
                            continue;
                        }
                    }
                    stack.pop();
                }
                _ => {}
            }
        }
        lines
    }

    /// Handles one node event: a scalar (`scalar` is its text), an alias, or the start of a
    /// collection (`collection` is `Some(true)` for a mapping, `Some(false)` for a sequence).
    fn node(
        &mut self,
        stack: &mut Vec<Frame>,
        pos: Position,
        scalar: Option<&str>,
        collection: Option<bool>,
    ) {
        let path = match stack.last_mut() {
            None => {
                self.record(String::new(), pos);
                Some(String::new())
            }
            Some(Frame::Skip { depth }) => {
                if collection.is_some() {
                    *depth += 1;
                }
                return;
            }
            Some(Frame::Map { path, key }) => match key.take() {
                None => {
                    // This node is a key.
                    match scalar {
                        Some(k) => {
                            let full = join(path, k);
                            *key = Some(Some(k.to_owned()));
                            self.record(full, pos);
                        }
                        None => *key = Some(None),
                    }
                    if collection.is_some() {
                        stack.push(Frame::Skip { depth: 1 });
                    }
                    return;
                }
                Some(Some(k)) => Some(join(path, &k)),
                Some(None) => None,
            },
            Some(Frame::Seq { path, next }) => {
                let full = format!("{path}[{next}]");
                *next += 1;
                self.record(full.clone(), pos);
                Some(full)
            }
        };
        match (collection, path) {
            (None, _) => {}
            (Some(true), Some(path)) => stack.push(Frame::Map { path, key: None }),
            (Some(false), Some(path)) => stack.push(Frame::Seq { path, next: 0 }),
            (Some(_), None) => stack.push(Frame::Skip { depth: 1 }),
        }
    }

    fn record(&mut self, path: String, pos: Position) {
        if self.positions.len() < MAX_INDEXED_PATHS {
            // The first occurrence wins; a duplicate key is an error reported elsewhere.
            self.positions.entry(path).or_insert(pos);
        }
    }

    /// The position of the key at `path` (or of the sequence item, for a path ending in
    /// `[i]`; or of the root node, for the empty path), if the document writes it.
    pub fn get(&self, path: &str) -> Option<Position> {
        self.positions.get(path).copied()
    }

    /// The line of the key at `path`, if the document writes it.
    pub fn line(&self, path: &str) -> Option<usize> {
        self.get(path).map(|p| p.line)
    }

    /// The position of `path`, or of its nearest enclosing key that the document writes: an
    /// error about a key that is missing points at the section it is missing from.
    pub fn nearest(&self, path: &str) -> Option<Position> {
        let mut path = path;
        loop {
            if let Some(pos) = self.get(path) {
                return Some(pos);
            }
            path = parent(path)?;
        }
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// `a.b[2]` → `a.b` → `a` → `None`.
fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = if path.ends_with(']') {
        path.rfind('[')
    } else {
        path.rfind('.')
    };
    Some(cut.map_or("", |i| &path[..i]))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq, Default)]
    #[serde(deny_unknown_fields, rename_all = "camelCase", default)]
    struct Doc {
        cluster: Option<Cluster>,
    }

    #[derive(Debug, Deserialize, PartialEq, Default)]
    #[serde(deny_unknown_fields, rename_all = "camelCase", default)]
    struct Cluster {
        elect_leader: bool,
        peers: Vec<Peer>,
        ttl: u32,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Peer {
        host: String,
    }

    fn err(text: &str) -> YamlError {
        parse::<Doc>(text, "c.yaml").expect_err(text)
    }

    #[test]
    fn unknown_key_names_path_file_line_and_column() {
        let e = err("cluster:\n  peers: []\n  electLeder: true\n");
        assert_eq!((e.line, e.column), (Some(3), Some(3)));
        assert_eq!(e.path, "cluster.electLeder");
        let text = e.to_string();
        assert!(
            text.starts_with("c.yaml:3:3: cluster.electLeder: unknown field `electLeder`"),
            "{text}"
        );
        assert!(
            text.contains("electLeader"),
            "lists the expected keys: {text}"
        );
    }

    #[test]
    fn mistyped_values_in_sequences_name_the_index() {
        let e = err("cluster:\n  peers:\n    - host: a:1\n    - host: [1]\n");
        assert_eq!(e.path, "cluster.peers[1].host");
        assert_eq!(e.line, Some(4));
        let e = err("cluster:\n  ttl: many\n");
        assert_eq!((e.path.as_str(), e.line), ("cluster.ttl", Some(2)));
    }

    #[test]
    fn duplicate_keys_are_errors_without_a_placeholder_segment() {
        let e = err("cluster:\n  ttl: 3\n  ttl: 4\n");
        assert_eq!((e.path.as_str(), e.line), ("cluster", Some(3)));
        assert!(e.message.contains("duplicate"), "{e}");
    }

    #[test]
    fn empty_documents_are_null() {
        assert_eq!(parse::<Doc>("", "c.yaml"), Ok(Doc::default()));
        assert_eq!(parse::<Doc>("# nothing\n", "c.yaml"), Ok(Doc::default()));
        assert!(parse::<Peer>("", "c.yaml").is_err());
    }

    #[test]
    fn billion_laughs_hits_a_budget() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let e = parse::<HashMap<String, serde::de::IgnoredAny>>(&text, "lol.yaml").unwrap_err();
        assert!(e.to_string().starts_with("lol.yaml:"), "{e}");
    }

    #[test]
    fn key_lines_index_keys_and_items() {
        let text = "\
api:
  listen: 127.0.0.1:7400
cluster:
  peers:
    - host: b:1
    - {host: c:1}
  etcd:
    ttl: 2
? [complex, key]
: {ignored: 1}
after: 1
";
        let lines = KeyLines::new(text);
        assert_eq!(lines.line("api.listen"), Some(2));
        assert_eq!(lines.line("cluster.peers[0]"), Some(5));
        assert_eq!(lines.line("cluster.peers[0].host"), Some(5));
        assert_eq!(
            lines.get("cluster.peers[1].host"),
            Some(Position { line: 6, column: 8 })
        );
        assert_eq!(
            lines.get("cluster.etcd.ttl"),
            Some(Position { line: 8, column: 5 })
        );
        assert_eq!(lines.line("ignored"), None);
        assert_eq!(lines.line("after"), Some(11));
        assert_eq!(
            lines.nearest("cluster.etcd.password.value").map(|p| p.line),
            Some(7)
        );
        // Nothing written on the way up: the root node.
        let root = Some(Position { line: 1, column: 1 });
        assert_eq!(lines.nearest("nowhere.at.all"), root);
        assert_eq!(KeyLines::new("# empty\n").nearest("a.b"), None);
    }

    #[test]
    fn display_leaves_out_unknown_parts() {
        let mut e = YamlError {
            source: "f".into(),
            line: None,
            column: None,
            path: String::new(),
            message: "m".into(),
        };
        assert_eq!(e.to_string(), "f: m");
        e.line = Some(3);
        e.path = "a.b".into();
        assert_eq!(e.to_string(), "f:3: a.b: m");
    }
}
