//! Pages instead of the API's envelope for what no route serves, when a person asks: the
//! dashboard merges into the API's router, whose fallbacks answer an unknown path (404) or
//! a wrong method (405) in JSON (`tidings_http::Unrouted` marks those answers). A browser
//! that followed a stale link, or typed a path, gets a page that says so and leads back.
//!
//! A page replaces the envelope when the path is under one of the dashboard's sections
//! (`/messages/…`, `/keys/…`, …) or when the request asks for HTML (`Accept: text/html`,
//! as every browser navigation does), but never under the API's `/v1/` and `/t/`
//! (tracking), whose clients keep the envelope whatever they accept; and never for any
//! other 404, such as the API's "no such message", which are not marked.

use axum::extract::Request;
use axum::http::header::{ACCEPT, ALLOW, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use maud::html;
use tidings_http::Unrouted;

use crate::layout::page;

/// The first path segments the dashboard serves pages under.
const SECTIONS: [&str; 13] = [
    "overview",
    "messages",
    "inbound",
    "domains",
    "templates",
    "suppressions",
    "webhooks",
    "keys",
    "assets",
    "sign-in",
    "sign-out",
    "favicon.ico",
    "operator",
];

/// Middleware for the router that merges the API's and the dashboard's: answers an
/// unrouted request with a page when a person is asking (see the module docs); any other
/// answer passes through unchanged.
pub async fn pages_for_browsers(req: Request, next: Next) -> Response {
    let wants_page = wants_page(req.uri().path(), req.headers().get(ACCEPT));
    // Kept only for a page: API requests, the many, pay nothing here.
    let path = if wants_page { req.uri().path().to_owned() } else { String::new() };
    let response = next.run(req).await;
    if !wants_page {
        return response;
    }
    // A method router added after the API set its fallback answers 405 with no body.
    let bare_405 =
        response.status() == StatusCode::METHOD_NOT_ALLOWED && !response.headers().contains_key(CONTENT_TYPE);
    let unrouted = match response.extensions().get::<Unrouted>() {
        Some(which) => *which,
        None if bare_405 => Unrouted::WrongMethod,
        None => return response,
    };
    let kept: Vec<_> = [ALLOW, tidings_http::REQUEST_ID]
        .into_iter()
        .filter_map(|name| response.headers().get(&name).cloned().map(|value| (name, value)))
        .collect();
    let (status, title, line) = match unrouted {
        Unrouted::UnknownPath => (StatusCode::NOT_FOUND, "Page not found", "There is no page at this address."),
        Unrouted::WrongMethod => (
            StatusCode::METHOD_NOT_ALLOWED,
            "Not here",
            "This address is for a form's answer, not to be opened directly.",
        ),
    };
    let body = html! {
        div #error.error role="alert" {
            p { (line) }
            p.mono { (path) }
        }
        p { a href="/" { "Go to the dashboard" } }
    };
    let mut page = (status, page(None, title, body)).into_response();
    page.headers_mut().extend(kept);
    crate::headers::page_headers(page.headers_mut(), false);
    page
}

/// Whether an unrouted request for `path` that accepts `accept` is answered with a page.
fn wants_page(path: &str, accept: Option<&HeaderValue>) -> bool {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    if first == "v1" || first == "t" {
        return false;
    }
    if SECTIONS.contains(&first) {
        return true;
    }
    accept.and_then(|a| a.to_str().ok()).is_some_and(|a| {
        a.split(',').any(|part| part.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("text/html")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_for_dashboard_sections_and_browsers_never_for_the_api() {
        let html = HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8");
        let json = HeaderValue::from_static("application/json");
        assert!(wants_page("/messages/x/y", None));
        assert!(wants_page("/keys/nothing", Some(&json)));
        assert!(wants_page("/nothing-here", Some(&html)));
        assert!(!wants_page("/nothing-here", Some(&json)));
        assert!(!wants_page("/nothing-here", None));
        assert!(!wants_page("/v1/nothing", Some(&html)));
        assert!(!wants_page("/t/nothing", Some(&html)));
        assert!(!wants_page("/nothing", Some(&HeaderValue::from_static("text/htmlx"))));
    }
}
