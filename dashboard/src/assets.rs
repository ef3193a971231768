//! The dashboard's one script and one stylesheet, compiled into the binary (no CDN, no
//! build step) and served from `/assets/`, the only place the page policy lets scripts and
//! styles come from. Both are optional: every page works without them. Beside them the
//! icon: an SVG the pages link to, and `/favicon.ico` (one 32 px PNG in an ICO) for the
//! browsers and tools that ask for that path whatever the page says.

use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};

/// Path of the script.
pub const JS_PATH: &str = "/assets/dashboard.js";
/// Path of the stylesheet.
pub const CSS_PATH: &str = "/assets/dashboard.css";

/// The script: copy buttons, the "load images" toggle, confirmation of deletions.
pub const JS: &str = include_str!("../assets/dashboard.js");
/// The stylesheet.
pub const CSS: &str = include_str!("../assets/dashboard.css");

/// Path of the icon the pages link to.
pub const FAVICON_SVG_PATH: &str = "/assets/favicon.svg";
/// Path browsers ask for an icon by default.
pub const FAVICON_ICO_PATH: &str = "/favicon.ico";

/// The icon, as SVG (172 bytes).
pub const FAVICON_SVG: &str = include_str!("../assets/favicon.svg");
/// The icon, as ICO holding one 32 × 32 PNG (169 bytes).
pub const FAVICON_ICO: &[u8] = include_bytes!("../assets/favicon.ico");

/// `GET /assets/favicon.svg`.
pub(crate) async fn favicon_svg() -> Response {
    asset(FAVICON_SVG, "image/svg+xml")
}

/// `GET /favicon.ico`.
pub(crate) async fn favicon_ico() -> Response {
    asset(FAVICON_ICO, "image/x-icon")
}

/// Whether `path` is one of the compiled-in files, which may be cached
/// ([`crate::headers`] marks every other answer `no-store`).
pub(crate) fn is_asset(path: &str) -> bool {
    path.starts_with("/assets/") || path == FAVICON_ICO_PATH
}

/// `GET /assets/dashboard.js`.
pub(crate) async fn script() -> Response {
    asset(JS, "text/javascript; charset=utf-8")
}

/// `GET /assets/dashboard.css`.
pub(crate) async fn stylesheet() -> Response {
    asset(CSS, "text/css; charset=utf-8")
}

fn asset(body: impl IntoResponse, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // An hour: they change only with the binary.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    response
}
