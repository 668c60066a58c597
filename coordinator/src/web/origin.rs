//! Changes only from this API's own origin: the guard that keeps a web page on another site
//! from starting a job through the operator's browser, with or without `web.authToken`.
//!
//! A browser lets any page send a `POST` to any address it can reach (a form, or a `fetch`
//! that needs no preflight), and the operator's browser can reach the coordinator. A token
//! stops that only when one is set, and only for the cookie (`SameSite=Strict`). So every
//! request that would change something (any method but `GET`, `HEAD`, `OPTIONS`) is refused
//! with 403 when a browser says it comes from elsewhere:
//!
//! - `Sec-Fetch-Site` (Fetch Metadata, sent by every current browser) other than
//!   `same-origin` or `none` (a typed URL, a bookmark);
//! - `Origin` (sent with every cross-origin request and every `POST`) that is `null` or names
//!   another scheme, host or port than the request's `Host`;
//! - without `web.authToken`, an `Origin` whose host is a name rather than an address or
//!   `localhost`: DNS rebinding points an attacker's name at this address after its page has
//!   loaded, and the browser then calls it same-origin. With a token the name is harmless (the
//!   page has no token to send).
//!
//! A request with neither header is not a browser's (curl, scripts, the clients): it passes
//! here and meets the token check alone. Reads stay open to everyone the token lets in.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::auth::AuthTokens;

/// Why a request that would change something is refused, or `None` to let it through.
/// `guarded` is whether `web.authToken` is set.
pub(super) fn refusal(method: &Method, headers: &HeaderMap, guarded: bool) -> Option<String> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    let text = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("(not text)").trim().to_owned())
    };
    if let Some(site) = text("sec-fetch-site")
        && !(site.eq_ignore_ascii_case("same-origin") || site.eq_ignore_ascii_case("none"))
    {
        return Some(format!(
            "a browser request from another site (Sec-Fetch-Site: {site}) cannot change \
             anything here; use the dashboard served by this coordinator, or a script"
        ));
    }
    let origin = text(header::ORIGIN.as_str())?;
    let Some(from) = Authority::of_origin(&origin) else {
        return Some(format!(
            "a browser request with Origin {origin:?} cannot change anything here; use the \
             dashboard served by this coordinator, or a script"
        ));
    };
    let host = text(header::HOST.as_str()).unwrap_or_default();
    // A Host without a port names the origin scheme's default one.
    let default = if origin.to_ascii_lowercase().starts_with("https://") {
        443
    } else {
        80
    };
    if Authority::of_host(&host, default).as_ref() != Some(&from) {
        return Some(format!(
            "the request's Origin {origin} is not this API's address ({host}): a page on \
             another site cannot change anything here"
        ));
    }
    if !guarded && !from.is_address() {
        return Some(format!(
            "without web.authToken a change through a browser must use an IP address or \
             localhost, not the name {:?} (a name can be pointed at this address by another \
             site); set web.authToken to use a name",
            from.host
        ));
    }
    None
}

/// Middleware: [`refusal`] as a 403 with its reason.
pub(super) async fn same_origin_changes(
    State(tokens): State<AuthTokens>,
    request: Request,
    next: Next,
) -> Response {
    let guarded = tokens.borrow().is_some();
    match refusal(request.method(), request.headers(), guarded) {
        Some(why) => ApiError::new(StatusCode::FORBIDDEN, why).into_response(),
        None => next.run(request).await,
    }
}

/// A host and port, lower-cased, as an origin or a `Host` header names them. The scheme is
/// not compared: behind a TLS-terminating proxy the page is `https://` and the request that
/// reaches this plain-HTTP listener carries the same `Host`.
#[derive(Debug, PartialEq, Eq)]
struct Authority {
    host: String,
    port: u16,
}

impl Authority {
    /// `scheme://host[:port]`, the whole of a serialized origin.
    fn of_origin(origin: &str) -> Option<Self> {
        let (scheme, rest) = origin.split_once("://")?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return None,
        };
        Self::of_host(rest, if https { 443 } else { 80 })
    }

    /// A `Host` header's `host[:port]`; `default` when it names no port.
    fn of_host(host: &str, default: u16) -> Option<Self> {
        if host.is_empty() || host.contains(['/', '?', '#', '@']) {
            return None;
        }
        let (name, port) = match host.rsplit_once(':') {
            // `[::1]:8080`, `example:8080`; a bare IPv6 literal is always bracketed here.
            Some((name, port)) if !port.contains(']') => (name, port.parse().ok()?),
            _ => (host, default),
        };
        Some(Self {
            host: name.trim_end_matches('.').to_ascii_lowercase(),
            port,
        })
    }

    /// An IP literal or `localhost`: a name no other site can point here.
    fn is_address(&self) -> bool {
        let bare = self.host.trim_start_matches('[').trim_end_matches(']');
        bare.parse::<IpAddr>().is_ok() || bare == "localhost" || bare.ends_with(".localhost")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    /// One row: the headers, whether a token is set, and whether a POST passes.
    type Row = (&'static [(&'static str, &'static str)], bool, bool);

    #[test]
    fn only_the_apis_own_origin_may_change_anything() {
        let rows: &[Row] = &[
            // Scripts and clients send neither header.
            (&[("host", "10.0.0.5:8080")], false, true),
            (&[("host", "cron.internal:8080")], false, true),
            // The dashboard, by address or localhost.
            (
                &[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://127.0.0.1:8080"),
                    ("sec-fetch-site", "same-origin"),
                ],
                false,
                true,
            ),
            (
                &[("host", "[::1]:8080"), ("origin", "http://[::1]:8080")],
                false,
                true,
            ),
            (
                &[
                    ("host", "localhost:8080"),
                    ("origin", "http://LOCALHOST:8080"),
                ],
                false,
                true,
            ),
            (
                &[("host", "10.0.0.5"), ("origin", "http://10.0.0.5:80")],
                false,
                true,
            ),
            (
                &[("host", "10.0.0.5"), ("origin", "http://10.0.0.5:8080")],
                true,
                false,
            ),
            (
                &[("host", "10.0.0.5:8080"), ("sec-fetch-site", "none")],
                false,
                true,
            ),
            // By a name: only with a token (DNS rebinding).
            (
                &[
                    ("host", "cron.internal:8080"),
                    ("origin", "http://cron.internal:8080"),
                ],
                false,
                false,
            ),
            (
                &[
                    ("host", "cron.internal:8080"),
                    ("origin", "http://cron.internal:8080"),
                ],
                true,
                true,
            ),
            // Another site, with or without a token.
            (
                &[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "https://evil.example"),
                ],
                true,
                false,
            ),
            (
                &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")],
                true,
                false,
            ),
            (
                &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")],
                false,
                false,
            ),
            (
                &[("host", "127.0.0.1:8080"), ("origin", "null")],
                false,
                false,
            ),
            // Another port is another origin.
            (
                &[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://127.0.0.1:9090"),
                ],
                false,
                false,
            ),
            // A TLS-terminating proxy: the page is https, the Host the same.
            (
                &[
                    ("host", "cron.example.com"),
                    ("origin", "https://cron.example.com"),
                ],
                true,
                true,
            ),
            (&[("origin", "http://127.0.0.1:8080")], false, false),
            (
                &[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "ftp://127.0.0.1:8080"),
                ],
                false,
                false,
            ),
        ];
        for (pairs, guarded, passes) in rows {
            let why = refusal(&Method::POST, &headers(pairs), *guarded);
            assert_eq!(
                why.is_none(),
                *passes,
                "{pairs:?} guarded={guarded}: {why:?}"
            );
        }
    }

    #[test]
    fn reads_are_never_refused_here() {
        let h = headers(&[
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ]);
        for m in [Method::GET, Method::HEAD, Method::OPTIONS] {
            assert_eq!(refusal(&m, &h, false), None, "{m}");
        }
        for m in [Method::PUT, Method::DELETE, Method::PATCH] {
            assert!(refusal(&m, &h, true).is_some(), "{m}");
        }
    }
}
