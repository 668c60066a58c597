//! The bearer token the shim and `cronstable-gate` send with every coordinator call, for a
//! coordinator whose API is guarded by `api.authToken`.
//!
//! The token is given as the value of `CRONSTABLE_API_TOKEN` or, better for rotation, as a file
//! (`--api-token-file`). A file is read again when its last reading is older than
//! [`REREAD_EVERY`], so a renewed token reaches the shim without a restart. A file that cannot
//! be read fails the call locally with `UNAUTHENTICATED` naming the file, the same answer the
//! coordinator gives a call without the token.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// How long a token file's reading is used before the file is read again.
pub const REREAD_EVERY: Duration = Duration::from_secs(5);

/// Where the token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiToken {
    /// The token itself (`CRONSTABLE_API_TOKEN`).
    Value(String),
    /// A file holding it; surrounding whitespace (a trailing newline) is not part of it.
    File(PathBuf),
}

/// Adds `authorization: Bearer <token>` to every call; passes calls through untouched when no
/// token is configured.
#[derive(Debug, Clone, Default)]
pub struct Bearer(Option<Arc<Source>>);

#[derive(Debug)]
struct Source {
    from: ApiToken,
    /// The header value and when it was made (file tokens only).
    read: Mutex<Option<(Instant, AsciiMetadataValue)>>,
}

impl Bearer {
    /// Sends `token` (none: nothing is added).
    pub fn new(token: Option<ApiToken>) -> Self {
        Self(token.map(|from| {
            Arc::new(Source {
                from,
                read: Mutex::new(None),
            })
        }))
    }
}

impl Source {
    fn header(&self) -> Result<AsciiMetadataValue, Status> {
        let mut read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, value)) = read.as_ref()
            && (matches!(self.from, ApiToken::Value(_)) || at.elapsed() < REREAD_EVERY)
        {
            return Ok(value.clone());
        }
        let token = match &self.from {
            ApiToken::Value(v) => v.trim().to_owned(),
            ApiToken::File(path) => std::fs::read_to_string(path)
                .map_err(|e| {
                    Status::unauthenticated(format!(
                        "--api-token-file {}: cannot be read: {e}",
                        path.display()
                    ))
                })?
                .trim()
                .to_owned(),
        };
        let value = format!("Bearer {token}").parse().map_err(|_| {
            Status::unauthenticated(
                "the API token holds characters a gRPC header cannot carry (it must be visible \
                 ASCII)",
            )
        })?;
        *read = Some((Instant::now(), AsciiMetadataValue::clone(&value)));
        Ok(value)
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(source) = &self.0 {
            let value = source.header()?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}

/// The token the binaries were given: `--api-token-file` first, else `CRONSTABLE_API_TOKEN`.
pub fn from_args(file: Option<PathBuf>, value: Option<String>) -> Option<ApiToken> {
    match (file, value) {
        (Some(path), _) => Some(ApiToken::File(path)),
        (None, Some(v)) if !v.trim().is_empty() => Some(ApiToken::Value(v)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(bearer: &mut Bearer) -> Result<Option<String>, Status> {
        let r = bearer.call(Request::new(()))?;
        Ok(r.metadata()
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_owned()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_token_is_read_again_after_its_reread_interval() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "first\n").unwrap();
        let mut b = Bearer::new(Some(ApiToken::File(path.clone())));
        assert_eq!(sent(&mut b).unwrap().as_deref(), Some("Bearer first"));
        std::fs::write(&path, "second\n").unwrap();
        assert_eq!(sent(&mut b).unwrap().as_deref(), Some("Bearer first"));
        tokio::time::advance(REREAD_EVERY).await;
        assert_eq!(sent(&mut b).unwrap().as_deref(), Some("Bearer second"));
        std::fs::remove_file(&path).unwrap();
        tokio::time::advance(REREAD_EVERY).await;
        let e = sent(&mut b).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert!(e.message().contains("--api-token-file"), "{}", e.message());
    }

    #[test]
    fn no_token_adds_nothing_and_a_value_is_sent_as_given() {
        assert_eq!(sent(&mut Bearer::default()).unwrap(), None);
        let mut b = Bearer::new(from_args(None, Some("s3cret".into())));
        assert_eq!(sent(&mut b).unwrap().as_deref(), Some("Bearer s3cret"));
        assert_eq!(from_args(None, Some(" ".into())), None);
        assert!(
            Bearer::new(Some(ApiToken::Value("a\nb".into())))
                .call(Request::new(()))
                .is_err()
        );
    }
}
