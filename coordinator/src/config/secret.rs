//! Secret sources: `web.authToken` and `cluster.etcd.password` (inventory §12).
//!
//! In YAML a secret is a mapping with exactly one of three keys:
//!
//! ```yaml
//! web:
//!   authToken:
//!     fromEnvVar: CRONSTABLE_TOKEN     # or: fromFile: /run/secrets/token, or: value: s3cret
//! ```
//!
//! Loading the config checks the shape: exactly one key, and nothing configured-but-empty
//! (`value: ""`, a blank `fromFile`, a blank or malformed `fromEnvVar` name). Reading the file
//! or the variable is [`SecretSource::resolve`]'s job, called by the binary at startup: this
//! library reads no environment, and the caller injects both lookups (tests pass closures).
//! Whatever the source, an empty secret fails closed: it is an error, never "no auth".

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A secret source: `{value | fromFile | fromEnvVar: ...}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub(crate) struct RawSecret {
    pub(crate) value: Option<String>,
    pub(crate) from_file: Option<String>,
    pub(crate) from_env_var: Option<String>,
}

/// Where a secret comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// The secret itself, written in the config (`value:`).
    Value(String),
    /// A file holding the secret (`fromFile:`); trailing line breaks are dropped.
    FromFile(PathBuf),
    /// An environment variable holding the secret (`fromEnvVar:`).
    FromEnvVar(String),
}

/// A secret that could not be resolved. Never contains the secret.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The source resolved to nothing (or only whitespace).
    #[error("{0} is empty; refusing to run with an empty secret")]
    Empty(String),
    /// The environment variable is not set.
    #[error("environment variable {0} is not set")]
    EnvUnset(String),
    /// The file could not be read.
    #[error("cannot read secret file {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

impl SecretSource {
    /// Resolves the secret, using `env` for variables and `read_file` for files. An empty
    /// result (after dropping trailing line breaks) is [`SecretError::Empty`].
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        read_file: &dyn Fn(&Path) -> io::Result<String>,
    ) -> Result<String, SecretError> {
        let secret = match self {
            Self::Value(v) => v.clone(),
            Self::FromEnvVar(name) => {
                env(name).ok_or_else(|| SecretError::EnvUnset(name.clone()))?
            }
            Self::FromFile(path) => {
                let text = read_file(path).map_err(|source| SecretError::File {
                    path: path.clone(),
                    source,
                })?;
                // `echo token > file` leaves a newline that is not part of the token.
                text.trim_end_matches(['\r', '\n']).to_owned()
            }
        };
        if secret.trim().is_empty() {
            return Err(SecretError::Empty(self.to_string()));
        }
        Ok(secret)
    }

    /// Checks a secret mapping's shape (see the module docs). The error names the offending
    /// sub-key (`value`, `fromFile`, `fromEnvVar`), or `None` for the mapping as a whole.
    pub(crate) fn from_raw(raw: &RawSecret) -> Result<Self, (Option<&'static str>, String)> {
        let set = [
            raw.value.is_some(),
            raw.from_file.is_some(),
            raw.from_env_var.is_some(),
        ];
        match set.iter().filter(|s| **s).count() {
            0 => {
                return Err((
                    None,
                    "set exactly one of value, fromFile or fromEnvVar".to_owned(),
                ));
            }
            1 => {}
            _ => {
                let why = "more than one of value, fromFile and fromEnvVar is set; set exactly one";
                return Err((None, why.to_owned()));
            }
        }
        if let Some(value) = &raw.value {
            if value.trim().is_empty() {
                let why = "is empty: a configured-but-empty secret fails closed";
                return Err((Some("value"), why.to_owned()));
            }
            return Ok(Self::Value(value.clone()));
        }
        if let Some(path) = &raw.from_file {
            if path.trim().is_empty() {
                let why = "is blank: name the file that holds the secret";
                return Err((Some("fromFile"), why.to_owned()));
            }
            return Ok(Self::FromFile(PathBuf::from(path)));
        }
        let name = raw.from_env_var.as_deref().unwrap_or_default();
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            let why = format!("{name:?} is not a variable name (letters, digits and _)");
            return Err((Some("fromEnvVar"), why));
        }
        Ok(Self::FromEnvVar(name.to_owned()))
    }
}

/// Describes the source without the secret: `a literal value`, `file /run/x`, `environment
/// variable X`.
impl fmt::Display for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Value(_) => f.write_str("the literal value"),
            Self::FromFile(path) => write!(f, "file {}", path.display()),
            Self::FromEnvVar(name) => write!(f, "environment variable {name}"),
        }
    }
}

/// Redacts [`SecretSource::Value`], so a logged config never shows the secret.
impl fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Value(_) => f.write_str("Value(<redacted>)"),
            Self::FromFile(path) => f.debug_tuple("FromFile").field(path).finish(),
            Self::FromEnvVar(name) => f.debug_tuple("FromEnvVar").field(name).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(value: Option<&str>, file: Option<&str>, env: Option<&str>) -> RawSecret {
        RawSecret {
            value: value.map(Into::into),
            from_file: file.map(Into::into),
            from_env_var: env.map(Into::into),
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn no_file(_: &Path) -> io::Result<String> {
        Err(io::Error::new(io::ErrorKind::NotFound, "missing"))
    }

    #[test]
    fn shape_is_exactly_one_nonempty_source() {
        let check = |r: RawSecret| SecretSource::from_raw(&r);
        assert_eq!(
            check(raw(Some("t"), None, None)),
            Ok(SecretSource::Value("t".into()))
        );
        assert_eq!(
            check(raw(None, Some("/f"), None)),
            Ok(SecretSource::FromFile("/f".into()))
        );
        assert_eq!(
            check(raw(None, None, Some("ETCD_PASSWORD"))),
            Ok(SecretSource::FromEnvVar("ETCD_PASSWORD".into()))
        );
        let key = |r: RawSecret| check(r).unwrap_err();
        assert!(key(raw(None, None, None)).1.contains("exactly one"));
        assert!(
            key(raw(Some("a"), None, Some("B")))
                .1
                .contains("more than one")
        );
        assert_eq!(key(raw(Some(""), None, None)).0, Some("value"));
        assert!(key(raw(Some(" "), None, None)).1.contains("fails closed"));
        assert_eq!(key(raw(None, Some(" "), None)).0, Some("fromFile"));
        assert_eq!(key(raw(None, None, Some("1X"))).0, Some("fromEnvVar"));
        assert_eq!(key(raw(None, None, Some(""))).0, Some("fromEnvVar"));
    }

    #[test]
    fn resolve_uses_the_injected_lookups_and_fails_closed_on_empty() {
        let env = |name: &str| (name == "TOKEN").then(|| "from-env".to_owned());
        let file = |p: &Path| match p.to_str() {
            Some("/tok") => Ok("from-file\n".to_owned()),
            Some("/empty") => Ok("\n".to_owned()),
            _ => no_file(p),
        };
        let r = |s: SecretSource| s.resolve(&env, &file);
        assert_eq!(r(SecretSource::Value("v".into())).unwrap(), "v");
        assert_eq!(
            r(SecretSource::FromEnvVar("TOKEN".into())).unwrap(),
            "from-env"
        );
        assert_eq!(
            r(SecretSource::FromFile("/tok".into())).unwrap(),
            "from-file"
        );
        assert!(matches!(
            r(SecretSource::FromFile("/empty".into())),
            Err(SecretError::Empty(_))
        ));
        assert!(matches!(
            r(SecretSource::FromFile("/nope".into())),
            Err(SecretError::File { .. })
        ));
        assert!(matches!(
            r(SecretSource::FromEnvVar("NOPE".into())),
            Err(SecretError::EnvUnset(_))
        ));
        let empty_env = |_: &str| Some(String::new());
        let e = SecretSource::FromEnvVar("E".into())
            .resolve(&empty_env, &no_file)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "environment variable E is empty; refusing to run with an empty secret"
        );
        assert!(
            SecretSource::Value("x".into())
                .resolve(&no_env, &no_file)
                .is_ok()
        );
    }

    #[test]
    fn debug_and_display_never_show_the_value() {
        let s = SecretSource::Value("hunter2".into());
        assert!(!format!("{s:?} {s}").contains("hunter2"));
    }
}
