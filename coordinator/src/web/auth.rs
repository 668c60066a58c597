//! `web.authToken`: the bearer token that guards the HTTP API.
//!
//! A request carries the token as `Authorization: Bearer <token>` (scripts, Prometheus'
//! `authorization` scrape setting) or as the `cronstable_token` cookie (the dashboard: a
//! browser cannot add a header to a page load, so the login form stores the cookie with
//! `SameSite=Strict`, which also keeps other sites from posting a manual start with it).
//!
//! The token itself, and how a presented one is compared, are in [`crate::token`].

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};

use super::ApiError;
pub use crate::token::{AuthToken, AuthTokens};

/// The cookie the dashboard's login form sets.
const COOKIE: &str = "cronstable_token";

/// The token a request presents, from its `Authorization` header or its cookie.
fn presented(headers: &HeaderMap) -> Option<String> {
    if let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        return crate::token::bearer(value).map(str::to_owned);
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| percent_decode(value))
}

/// Undoes the login form's `encodeURIComponent`; a malformed escape is kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Middleware: passes the request on when no token is configured or the right one is
/// presented; otherwise a 401 (JSON for API clients, the login form for a browser's page load).
pub(super) async fn require_token(
    State(tokens): State<AuthTokens>,
    request: Request,
    next: Next,
) -> Response {
    // Cloned out of the channel: a borrow must not be held across the awaits below.
    let token = tokens.borrow().clone();
    let Some(token) = token else {
        return next.run(request).await;
    };
    let offered = presented(request.headers());
    if offered.as_deref().is_some_and(|t| token.matches(t)) {
        return next.run(request).await;
    }
    let wants_page = request.uri().path() == "/"
        && request
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"));
    if wants_page {
        return (StatusCode::UNAUTHORIZED, Html(LOGIN_PAGE)).into_response();
    }
    let message = if offered.is_some() {
        "the presented token is not web.authToken"
    } else {
        "this endpoint needs web.authToken: send 'Authorization: Bearer <token>'"
    };
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"cronstable\""),
    );
    response
}

/// A self-contained login form: stores the token as the cookie and reloads. It is served only
/// when no accepted token came with the request, so a `cronstable_token` cookie already set
/// means the last one typed was wrong, and the form says so. The empty `data:` icon keeps the
/// browser from requesting `/favicon.ico` (a 404 in its console).
const LOGIN_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cronstable: sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<style>body{font:15px system-ui,sans-serif;margin:4rem auto;max-width:24rem;padding:0 1rem;color:#1d232a}
input,button{font:inherit;padding:.4rem;width:100%;box-sizing:border-box;margin-top:.5rem}
button{background:#3b78c2;color:#fff;border:1px solid #3b78c2;border-radius:4px;cursor:pointer}
#e{color:#d23c3c}</style>
</head><body><h1>cronstable</h1><p>This dashboard is protected by <code>web.authToken</code>.</p>
<p id="e" hidden>That token was not accepted.</p>
<form id="f"><input id="t" type="password" placeholder="token" autocomplete="current-password" autofocus>
<button>Sign in</button></form>
<script>if(/(^|; )cronstable_token=/.test(document.cookie))document.getElementById('e').hidden=false;
document.getElementById('f').addEventListener('submit',function(e){e.preventDefault();
document.cookie='cronstable_token='+encodeURIComponent(document.getElementById('t').value)+'; path=/; SameSite=Strict';
location.reload();});</script></body></html>"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_bearer_header_or_the_cookie() {
        let mut h = HeaderMap::new();
        assert_eq!(presented(&h), None);
        h.insert(header::COOKIE, "a=b; cronstable_token=tok".parse().unwrap());
        assert_eq!(presented(&h).as_deref(), Some("tok"));
        h.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(presented(&h).as_deref(), Some("abc"));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(presented(&h), None, "another scheme is not a bearer token");
    }

    #[test]
    fn the_cookie_is_percent_decoded() {
        assert_eq!(percent_decode("a%20b%3Bc"), "a b;c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
