//! Form posts: the [`Posted`] extractor every state-changing route takes, which refuses the
//! request before any handler runs unless it comes from this site, from a live session,
//! with the session's CSRF token in its `csrf` field; and [`SignInForm`], the one POST made
//! without a session.
//!
//! Bodies are read up to a bound ([`FORM_BODY_LIMIT`], or [`TEMPLATE_BODY_LIMIT`] for the
//! template forms) and parsed as `application/x-www-form-urlencoded` by hand, so a body too
//! large, not UTF-8 or missing fields is a page naming the problem, never a framework
//! rejection or a 500. They count in the API's memory budget ([`tidings_http::MemoryBudget`]),
//! for the session's workspace, or for the client address when signing in, until the
//! [`Fields`] parsed from them are dropped: a client cannot hold more than its share with
//! half-sent forms, and a slow one loses its place to others (503).

use std::net::IpAddr;

use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::header::{HOST, ORIGIN, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use tidings_http::{BodyError, Claim, MemoryBudget, Owner};

use crate::DashboardState;
use crate::error::PageError;
use crate::session::{Viewer, cleared_cookie, session_token, viewer};

/// Largest form body: 64 KiB.
pub const FORM_BODY_LIMIT: usize = 64 * 1024;
/// Largest body of the template forms (three template bodies, or preview variables): 1 MiB.
pub const TEMPLATE_BODY_LIMIT: usize = 1024 * 1024;

/// The fields of a posted form, in order, with the budget they hold until dropped.
#[derive(Debug, Default)]
pub(crate) struct Fields {
    pairs: Vec<(String, String)>,
    /// Given back to the budget with the fields.
    _held: Option<Claim>,
}

impl Fields {
    /// The first value of `name`, as sent.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The first value of `name`, trimmed; `None` when absent or blank (an empty form field
    /// means "not given").
    pub(crate) fn text(&self, name: &str) -> Option<String> {
        self.get(name).map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned)
    }

    /// The first value of `name` as sent, `None` when absent or empty (bodies keep their
    /// whitespace).
    pub(crate) fn body(&self, name: &str) -> Option<String> {
        self.get(name).filter(|v| !v.is_empty()).map(str::to_owned)
    }

    /// Every value of `name` (checkbox groups).
    pub(crate) fn all(&self, name: &str) -> Vec<String> {
        self.pairs.iter().filter(|(n, _)| n == name).map(|(_, v)| v.clone()).collect()
    }

    /// Whether a checkbox named `name` was checked (sent at all).
    pub(crate) fn checked(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
}

/// A form posted by a signed-in person with the right CSRF token; body up to `LIMIT` bytes.
pub(crate) struct Posted<const LIMIT: usize = FORM_BODY_LIMIT> {
    /// Who posted it.
    pub(crate) viewer: Viewer,
    /// The fields (the `csrf` one included).
    pub(crate) fields: Fields,
}

impl<const LIMIT: usize> FromRequest<DashboardState> for Posted<LIMIT> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &DashboardState) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        if let Some(why) = cross_site(&parts.headers, parts.uri.authority().map(|a| a.as_str())) {
            return Err(PageError::forbidden_form(why).into_response());
        }
        let viewer = match viewer(state, &parts.headers).await {
            Ok(Some(viewer)) => viewer,
            Ok(None) => return Err(session_ended(session_token(&parts.headers).is_some())),
            Err(e) => return Err(e.into_response()),
        };
        let owner = Owner::Workspace(viewer.principal().workspace_id);
        let fields = read_fields(&state.budget, owner, &parts, body, LIMIT)
            .await
            .map_err(|e| e.with_viewer(&viewer).into_response())?;
        if !fields.get("csrf").is_some_and(|token| viewer.csrf_matches(token)) {
            let refused = PageError::forbidden_form("The form's security token is missing or out of date.");
            return Err(refused.with_viewer(&viewer).into_response());
        }
        Ok(Self { viewer, fields })
    }
}

/// `POST /sign-in`: the presented key and the client, from a form posted on this site.
pub(crate) struct SignInForm {
    /// The client address, as the API would count it.
    pub(crate) client: IpAddr,
    /// The `key` field, trimmed (empty when absent).
    pub(crate) key: String,
}

impl FromRequest<DashboardState> for SignInForm {
    type Rejection = Response;

    async fn from_request(req: Request, state: &DashboardState) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        // Signing in needs no token (there is no session yet), but a form on another site
        // must not sign a browser in with the other site's key (login CSRF).
        if let Some(why) = cross_site(&parts.headers, parts.uri.authority().map(|a| a.as_str())) {
            return Err(PageError::forbidden_form(why).into_response());
        }
        let client = crate::session::client_ip(&parts);
        let fields = read_fields(&state.budget, Owner::client(client), &parts, body, FORM_BODY_LIMIT)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self { client, key: fields.text("key").unwrap_or_default() })
    }
}

/// 403 for a POST without a live session, clearing a dead cookie.
fn session_ended(clear: bool) -> Response {
    let refused = PageError::status(
        StatusCode::FORBIDDEN,
        "Signed out",
        "Your session has ended, so nothing was changed. Sign in again.",
    );
    let mut response = refused.into_response();
    if clear {
        response.headers_mut().insert(SET_COOKIE, HeaderValue::from_static(cleared_cookie()));
    }
    response
}

/// Why a POST is refused as coming from another site, if it is: `Sec-Fetch-Site` when the
/// browser sends it (every current one does), else an `Origin` that is not this host.
/// Requests without either (scripts, old browsers) pass: the CSRF token still guards them.
pub(crate) fn cross_site(headers: &HeaderMap, authority: Option<&str>) -> Option<&'static str> {
    const WHY: &str = "This form was sent from another site.";
    if let Some(site) = headers.get("sec-fetch-site") {
        return match site.as_bytes() {
            b"same-origin" | b"none" => None,
            _ => Some(WHY),
        };
    }
    let origin = headers.get(ORIGIN)?.to_str().unwrap_or("null");
    let host = headers.get(HOST).and_then(|h| h.to_str().ok()).or(authority)?;
    let origin_host = origin.strip_prefix("https://").or_else(|| origin.strip_prefix("http://"));
    match origin_host {
        Some(origin_host) if origin_host.eq_ignore_ascii_case(host) => None,
        _ => Some(WHY),
    }
}

/// Reads and parses a form body of at most `limit` bytes, counted in `budget` for `owner`.
pub(crate) async fn read_fields(
    budget: &MemoryBudget,
    owner: Owner,
    parts: &Parts,
    body: Body,
    limit: usize,
) -> Result<Fields, PageError> {
    let (bytes, claim) = tidings_http::receive(budget, owner, &parts.headers, &parts.extensions, body, limit)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge { .. } => PageError::status(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Too large",
                format!("The form is larger than {} KiB; nothing was changed.", limit / 1024),
            ),
            BodyError::Busy(_) | BodyError::TooSlow => PageError::status(
                StatusCode::SERVICE_UNAVAILABLE,
                "Busy",
                "The server is busy with other requests; nothing was changed. Try again in a moment.",
            )
            .retry_after(1),
            BodyError::Read(_) => {
                PageError::status(StatusCode::BAD_REQUEST, "Bad request", "The form could not be read.")
            }
        })?;
    if std::str::from_utf8(&bytes).is_err() {
        return Err(PageError::status(StatusCode::BAD_REQUEST, "Bad request", "The form is not UTF-8 text."));
    }
    // The parsed fields are about as large as the body: the claim goes with them.
    Ok(Fields { pairs: form_urlencoded::parse(&bytes).into_owned().collect(), _held: Some(claim) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, HeaderValue::from_static(value));
        }
        h
    }

    #[test]
    fn only_same_origin_posts_pass() {
        assert_eq!(cross_site(&headers(&[("sec-fetch-site", "same-origin")]), None), None);
        assert!(cross_site(&headers(&[("sec-fetch-site", "cross-site")]), None).is_some());
        assert!(cross_site(&headers(&[("sec-fetch-site", "same-site")]), None).is_some());
        let ok = headers(&[("origin", "https://mail.acme.test:8443"), ("host", "mail.acme.test:8443")]);
        assert_eq!(cross_site(&ok, None), None);
        assert_eq!(cross_site(&headers(&[("origin", "https://h:1")]), Some("h:1")), None, "HTTP/2 authority");
        let evil = headers(&[("origin", "https://evil.test"), ("host", "mail.acme.test:8443")]);
        assert!(cross_site(&evil, None).is_some());
        assert!(cross_site(&headers(&[("origin", "null"), ("host", "h")]), None).is_some());
        assert_eq!(cross_site(&HeaderMap::new(), None), None, "no browser headers: the token decides");
    }

    fn budget() -> MemoryBudget {
        MemoryBudget::new(1024 * 1024, 64 * 1024, std::time::Duration::from_secs(30))
    }

    async fn read(headers: HeaderMap, body: Body, limit: usize) -> Result<Fields, PageError> {
        let mut request = axum::http::Request::new(());
        *request.headers_mut() = headers;
        let (parts, ()) = request.into_parts();
        read_fields(&budget(), Owner::Client([127, 0, 0, 1].into()), &parts, body, limit).await
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_refused_without_reading_them_all() {
        let big = Body::from(vec![b'a'; 2048]);
        let err = read(HeaderMap::new(), big, 1024).await.unwrap_err();
        assert_eq!(err.status_code(), StatusCode::PAYLOAD_TOO_LARGE);
        let declared = headers(&[("content-length", "999999")]);
        let err = read(declared, Body::empty(), 1024).await.unwrap_err();
        assert_eq!(err.status_code(), StatusCode::PAYLOAD_TOO_LARGE);
        let fields = read(HeaderMap::new(), Body::from("a=1&b=%3Cx%3E&a=2&c="), 1024).await.unwrap();
        assert_eq!((fields.get("a"), fields.get("b"), fields.text("c")), (Some("1"), Some("<x>"), None));
        assert_eq!(fields.all("a"), ["1", "2"]);
        let err = read(HeaderMap::new(), Body::from(vec![0xff, 0xfe]), 1024).await.unwrap_err();
        assert_eq!(err.status_code(), StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn a_form_counts_in_the_budget_until_its_fields_are_dropped_and_a_full_share_is_503() {
        let budget = budget();
        let owner = Owner::Client([127, 0, 0, 9].into());
        let (parts, ()) = axum::http::Request::new(()).into_parts();
        let fields = read_fields(&budget, owner, &parts, Body::from(vec![b'a'; 4096]), 64 * 1024).await.unwrap();
        assert_eq!(budget.used(), 4096);
        drop(fields);
        assert_eq!(budget.used(), 0);
        let _rest = budget.hold(owner, budget.share()).unwrap();
        let err = read_fields(&budget, owner, &parts, Body::from("a=1"), 64 * 1024).await.unwrap_err();
        assert_eq!(err.status_code(), StatusCode::SERVICE_UNAVAILABLE);
        let response = err.into_response();
        assert_eq!(response.headers().get(axum::http::header::RETRY_AFTER).unwrap(), "1");
    }
}
