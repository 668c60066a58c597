//! The dashboard: one HTML page, a stylesheet and a script, compiled into the binary.
//!
//! No build step and no CDN: the assets are plain files under `web/assets/`, embedded with
//! `include_str!`, and the page talks only to this coordinator's own JSON endpoints, polling
//! them every two seconds for live refresh.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use super::ApiError;

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The assets by name, with their content types.
const ASSETS: [(&str, &str, &str); 2] = [
    ("app.js", "text/javascript; charset=utf-8", APP_JS),
    ("app.css", "text/css; charset=utf-8", APP_CSS),
];

/// Total bytes of the page and its assets: what a first visit downloads.
pub const PAGE_WEIGHT: usize = INDEX.len() + APP_JS.len() + APP_CSS.len();

/// `GET /`.
pub(super) async fn index() -> Response {
    (
        [
            (header::CACHE_CONTROL, "no-cache"),
            // Everything comes from this origin; nothing inline but the page itself.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'",
            ),
        ],
        Html(INDEX),
    )
        .into_response()
}

/// `GET /assets/{file}`.
pub(super) async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *body,
        )
            .into_response(),
        None => {
            ApiError::new(StatusCode::NOT_FOUND, format!("no such asset: {file}")).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_light_and_self_contained() {
        const { assert!(PAGE_WEIGHT < 150 * 1024, "the page weighs over 150 KiB") };
        for text in [INDEX, APP_JS, APP_CSS] {
            // No external requests: nothing that names another origin. (The SVG namespace is
            // an identifier, never fetched.)
            let text = text.replace("http://www.w3.org/2000/svg", "");
            assert!(!text.contains("http://"), "an absolute http:// URL");
            assert!(!text.contains("https://"), "an absolute https:// URL");
            assert!(!text.contains("//cdn"), "a CDN reference");
        }
        assert!(INDEX.contains("/assets/app.js"));
        assert!(INDEX.contains("/assets/app.css"));
    }
}
