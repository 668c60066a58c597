//! The bearer tokens that guard the two APIs: `web.authToken` (HTTP) and `api.authToken`
//! (gRPC). Both come from the same secret sources (`value`, `fromFile`, `fromEnvVar`), are
//! resolved again on every reload, and live on a `watch` channel whose one writer is the
//! reload supervisor, so a rotated token applies to the next request.
//!
//! A token is kept only as its SHA-256 digest, and a presented token is compared digest to
//! digest in constant time, so neither the token's bytes nor its length leak through response
//! timing.

use std::sync::Arc;

use sha2::{Digest, Sha256};

/// The latest token of one API (none: that API is open).
pub type AuthTokens = tokio::sync::watch::Receiver<Option<Arc<AuthToken>>>;

/// The writers of both APIs' tokens; the reload supervisor holds them.
#[derive(Debug)]
pub struct TokenWriters {
    /// `web.authToken`.
    pub web: tokio::sync::watch::Sender<Option<Arc<AuthToken>>>,
    /// `api.authToken`.
    pub api: tokio::sync::watch::Sender<Option<Arc<AuthToken>>>,
}

#[cfg(test)]
impl TokenWriters {
    /// Writers holding no token (both APIs open), for tests.
    pub fn open() -> Self {
        Self {
            web: tokio::sync::watch::channel(None).0,
            api: tokio::sync::watch::channel(None).0,
        }
    }
}

/// A resolved token, kept only as its digest.
///
/// Equality compares digests: it tells a reload whether the token changed, and never sees a
/// request's token (that is [`AuthToken::matches`], in constant time).
#[derive(Clone, PartialEq, Eq)]
pub struct AuthToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthToken(..)")
    }
}

impl AuthToken {
    /// Guards an API with `token`.
    pub fn new(token: &str) -> Self {
        Self {
            digest: Sha256::digest(token.as_bytes()).into(),
        }
    }

    /// Whether `presented` is the token, compared in constant time.
    pub fn matches(&self, presented: &str) -> bool {
        let other: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let diff = self
            .digest
            .iter()
            .zip(other.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(diff) == 0
    }
}

/// The token of an `Authorization` value, `Bearer <token>` (the scheme in any case); `None`
/// for another scheme or a value without one.
pub fn bearer(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_configured_token() {
        let t = AuthToken::new("s3cret");
        assert!(t.matches("s3cret"));
        assert!(!t.matches("s3cre"));
        assert!(!t.matches("s3cret "));
        assert!(!t.matches(""));
    }

    #[test]
    fn reads_a_bearer_value_only() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("abc"), None);
    }
}
