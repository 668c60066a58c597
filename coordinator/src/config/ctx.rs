//! The validation context every config rule writes to (errors and advisories, each positioned
//! at its key's file and line), and the small checks several sections share.

use std::path::PathBuf;

use cronstable_core::yaml::{KeyLines, YamlError};

use super::ConfigError;
use super::address::HostPort;
use super::secret::{RawSecret, SecretSource};

/// Collects errors and warnings, positioning each with the document's [`KeyLines`].
pub(super) struct Ctx<'a> {
    source: &'a str,
    lines: KeyLines,
    pub(super) errors: Vec<ConfigError>,
    pub(super) warnings: Vec<String>,
}

impl<'a> Ctx<'a> {
    /// A context for the document `text`, read from `source`.
    pub(super) fn new(source: &'a str, text: &str) -> Self {
        Self {
            source,
            lines: KeyLines::new(text),
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Records a ConfigError at `path`.
    pub(super) fn error(&mut self, path: &str, message: impl Into<String>) {
        let e = YamlError::at(self.source, &self.lines, path, message);
        self.errors.push(e.into());
    }

    /// Records a ConfigError about `path`, positioned at `anchor` (or its nearest written
    /// parent): for a required key whose whole section is missing, the line that asked for it.
    pub(super) fn error_near(&mut self, path: &str, anchor: &str, message: impl Into<String>) {
        let mut e: ConfigError = YamlError::at(self.source, &self.lines, anchor, message).into();
        e.path = path.to_owned();
        self.errors.push(e);
    }

    /// Records an advisory at `path`.
    pub(super) fn warn(&mut self, path: &str, message: impl Into<String>) {
        let w = YamlError::at(self.source, &self.lines, path, message);
        self.warnings.push(w.to_string());
    }

    /// True when the file writes the key at `path`, even with an empty (null) value.
    pub(super) fn written(&self, path: &str) -> bool {
        self.lines.get(path).is_some()
    }

    /// The line of the key at `path`, when the file writes it.
    pub(super) fn line(&self, path: &str) -> Option<usize> {
        self.lines.line(path)
    }
}

/// A `host:port` value at `path`, or an error there.
pub(super) fn host_port(ctx: &mut Ctx<'_>, path: &str, text: &str) -> Option<HostPort> {
    text.parse()
        .map_err(|e: super::address::AddressError| ctx.error(path, e.to_string()))
        .ok()
}

/// A secret mapping at `path`. A key written with no value (`password:`) is configured but
/// empty, which fails closed like `value: ""`.
pub(super) fn secret(
    ctx: &mut Ctx<'_>,
    path: &str,
    raw: Option<&RawSecret>,
) -> Option<SecretSource> {
    match raw {
        Some(raw) => match SecretSource::from_raw(raw) {
            Ok(source) => Some(source),
            Err((key, why)) => {
                let at = key.map_or_else(|| path.to_owned(), |k| format!("{path}.{k}"));
                ctx.error(&at, why);
                None
            }
        },
        None if ctx.written(path) => {
            ctx.error(
                path,
                "is empty: set exactly one of value, fromFile or fromEnvVar (a configured-but-empty \
                 secret fails closed)",
            );
            None
        }
        None => None,
    }
}

/// A blank path is an error (rule 2): it is what a template renders for an unset variable.
pub(super) fn nonblank_path(
    ctx: &mut Ctx<'_>,
    path: &str,
    value: Option<&String>,
    why: &str,
) -> Option<PathBuf> {
    match value {
        Some(v) if !v.trim().is_empty() => Some(PathBuf::from(v)),
        Some(_) => {
            ctx.error(
                path,
                format!("is blank (an unset template variable?): {why}"),
            );
            None
        }
        None if ctx.written(path) => {
            ctx.error(
                path,
                format!("is blank (an unset template variable?): {why}"),
            );
            None
        }
        None => None,
    }
}
