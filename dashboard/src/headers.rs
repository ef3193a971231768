//! The headers every dashboard response carries, and the request time limit.
//!
//! Pages get [`PAGE_CSP`]: scripts, styles, images and frames from this origin only, no
//! inline script or style (the pages have none), no plugins, no `<base>`, forms posting only
//! here, and no framing of the dashboard by anyone (clickjacking). The message-HTML
//! document sets its own, stricter policy ([`MESSAGE_HTML_CSP`]) before this layer runs,
//! which keeps it, and so do downloads of received mail ([`DOWNLOAD_CSP`]).

use axum::extract::Request;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The policy of every page.
pub const PAGE_CSP: &str =
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'";

/// The policy of a message's HTML shown in the preview iframe: nothing loads, nothing runs,
/// the document has no origin (`sandbox`), inline styles of the mail apply, images only
/// from `data:` URLs. Only the dashboard itself may frame it.
pub const MESSAGE_HTML_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'self'; sandbox";

/// [`MESSAGE_HTML_CSP`] once the person asked to load remote images.
pub const MESSAGE_HTML_IMAGES_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data: https: http:; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'self'; sandbox";

/// The policy of a download (a received message's raw bytes, its attachments): should a
/// browser render one despite its `Content-Disposition`, it has no origin, runs nothing,
/// loads nothing and is framed by nobody.
pub const DOWNLOAD_CSP: &str = "default-src 'none'; sandbox; frame-ancestors 'none'";

/// Middleware: the security headers on every response (a policy already set is kept), and
/// `Cache-Control: no-store` on everything but the compiled-in assets.
pub(crate) async fn security_headers(req: Request, next: Next) -> Response {
    let asset = crate::assets::is_asset(req.uri().path());
    let mut response = next.run(req).await;
    page_headers(response.headers_mut(), asset);
    response
}

/// Sets the headers of [`security_headers`] on `headers`; `asset`: a compiled-in file, which
/// may be cached.
pub(crate) fn page_headers(headers: &mut HeaderMap, asset: bool) {
    // `X-Frame-Options` for browsers without `frame-ancestors`, saying what the policy says.
    let framable = match headers.get(CONTENT_SECURITY_POLICY) {
        None => {
            headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(PAGE_CSP));
            false
        }
        Some(policy) => !policy.to_str().is_ok_and(|p| p.contains("frame-ancestors 'none'")),
    };
    let frame_options = if framable { "SAMEORIGIN" } else { "DENY" };
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static(frame_options));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    if !asset {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

/// Answers 503 with a page when a request takes longer than `limit`.
pub(crate) async fn time_limited(limit: std::time::Duration, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => crate::error::PageError::status(
            StatusCode::SERVICE_UNAVAILABLE,
            "Try again",
            "The server took too long to answer. Try again in a moment.",
        )
        .into_response(),
    }
}
