//! The dashboard's one script and one stylesheet, compiled into the binary (no CDN, no
//! build step) and served from `/assets/`, the only place the page policy lets scripts and
//! styles come from. Both are optional: every page works without them.

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

/// `GET /assets/dashboard.js`.
pub(crate) async fn script() -> Response {
    asset(JS, "text/javascript; charset=utf-8")
}

/// `GET /assets/dashboard.css`.
pub(crate) async fn stylesheet() -> Response {
    asset(CSS, "text/css; charset=utf-8")
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // An hour: both change only with the binary.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    response
}
