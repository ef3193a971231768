//! Who is looking: the client's address (as the API sees it), the session cookie, and the
//! [`Signed`] extractor that resumes core's session from it.
//!
//! The cookie is `__Host-tidings_session=<token>; Path=/; HttpOnly; Secure; SameSite=Strict`,
//! without `Max-Age`: the session ends on the server (idle or absolute expiry, sign-out,
//! revocation of its key), never because a browser kept a cookie. The `__Host-` prefix makes
//! browsers keep it only as set by this very host over HTTPS, with `Path=/` and no `Domain`,
//! so a sibling subdomain (or a plain-HTTP page on the same name) cannot plant or overwrite a
//! session cookie for the dashboard (session fixation). The token is opaque here; core
//! decides whether it names a live session.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::header::{COOKIE, LOCATION, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tidings_core::model::KeyScope;
use tidings_core::usecases::{ActiveSession, Principal};
use tidings_http::ClientIp;

use crate::DashboardState;
use crate::error::PageError;

/// Name of the session cookie; the `__Host-` prefix binds it to this host (module docs).
pub const SESSION_COOKIE: &str = "__Host-tidings_session";

/// The `Set-Cookie` value that hands a browser `token`.
pub fn session_cookie(token: &str) -> String {
    format!("{SESSION_COOKIE}={token}; Path=/; HttpOnly; Secure; SameSite=Strict")
}

/// The `Set-Cookie` value that makes a browser forget the session.
pub(crate) fn cleared_cookie() -> &'static str {
    "__Host-tidings_session=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0"
}

/// The session token the request carries, if any (the first `__Host-tidings_session`
/// cookie; a cookie of the old name, without the prefix, is not read: anyone on a sibling
/// domain could have set it).
pub(crate) fn session_token(headers: &HeaderMap) -> Option<&str> {
    cookie_named(headers, SESSION_COOKIE)
}

/// The value of the first cookie named `wanted` the request carries, if it is not empty.
pub(crate) fn cookie_named<'a>(headers: &'a HeaderMap, wanted: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == wanted)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

/// Middleware: attributes the request to its client exactly as the API router does (the TCP
/// peer, or what a trusted proxy forwarded), for the sign-in throttle inside and the access
/// log outside.
pub(crate) async fn resolve_client(State(state): State<DashboardState>, mut req: Request, next: Next) -> Response {
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip());
    let client = peer.map(|peer| ClientIp(state.config.trusted_proxies.client_ip(peer, req.headers())));
    if let Some(client) = client {
        req.extensions_mut().insert(client);
    }
    let mut response = next.run(req).await;
    if let Some(client) = client {
        response.extensions_mut().insert(client);
    }
    response
}

/// The request's client; without connection info all clients share the unspecified
/// address, as in the API.
pub(crate) fn client_ip(parts: &Parts) -> IpAddr {
    parts.extensions.get::<ClientIp>().map_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED), |ClientIp(ip)| *ip)
}

/// A signed-in person: the session core resumed, and the token that names it.
pub(crate) struct Viewer {
    session: ActiveSession,
    token: String,
}

impl Viewer {
    /// The key the session acts as.
    pub(crate) fn principal(&self) -> &Principal {
        &self.session.principal
    }

    /// The session's CSRF token, for the hidden field of every form.
    pub(crate) fn csrf(&self) -> &str {
        self.session.csrf_token()
    }

    /// Whether `presented` is the session's CSRF token (constant time).
    pub(crate) fn csrf_matches(&self, presented: &str) -> bool {
        self.session.csrf_matches(presented)
    }

    /// The session token (to end the session).
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// `full` or `send`.
    pub(crate) fn scope_word(&self) -> &'static str {
        match self.principal().scope {
            KeyScope::Full => "full",
            KeyScope::Send => "send",
        }
    }
}

/// The session of the request, if it names a live one.
pub(crate) async fn viewer(state: &DashboardState, headers: &HeaderMap) -> Result<Option<Viewer>, PageError> {
    let Some(token) = session_token(headers) else { return Ok(None) };
    let session = state.core.sessions().resume(token).await.map_err(PageError::from)?;
    Ok(session.map(|session| Viewer { session, token: token.to_owned() }))
}

/// Extractor of pages that need a signed-in person: without a live session, the request is
/// answered 303 to the sign-in page (and a stale cookie is cleared).
pub(crate) struct Signed(pub(crate) Viewer);

impl FromRequestParts<DashboardState> for Signed {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &DashboardState) -> Result<Self, Self::Rejection> {
        match viewer(state, &parts.headers).await {
            Ok(Some(viewer)) => Ok(Self(viewer)),
            Ok(None) => Err(to_sign_in(session_token(&parts.headers).is_some())),
            Err(e) => Err(e.into_response()),
        }
    }
}

/// 303 to `/`, clearing the cookie when the request carried a dead one.
pub(crate) fn to_sign_in(clear: bool) -> Response {
    let mut response = see_other("/");
    if clear {
        response.headers_mut().insert(SET_COOKIE, HeaderValue::from_static(cleared_cookie()));
    }
    response
}

/// 303 See Other to `location` (post/redirect/get).
pub(crate) fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(LOCATION, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_session_cookie_is_read_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(
            COOKIE,
            HeaderValue::from_static("theme=dark; tidings_session=old; __Host-tidings_session=abc ; x=1"),
        );
        headers.append(COOKIE, HeaderValue::from_static("__Host-tidings_session=def"));
        assert_eq!(session_token(&headers), Some("abc"));
        let mut unprefixed = HeaderMap::new();
        unprefixed.append(COOKIE, HeaderValue::from_static("tidings_session=abc"));
        assert_eq!(session_token(&unprefixed), None, "a cookie without the prefix is not the session");
        let mut empty = HeaderMap::new();
        empty.append(COOKIE, HeaderValue::from_static("__Host-tidings_session=; other=2"));
        assert_eq!(session_token(&empty), None);
        assert_eq!(session_token(&HeaderMap::new()), None);
    }

    #[test]
    fn the_cookie_has_exactly_the_documented_flags() {
        let cookie = session_cookie("t0k");
        assert_eq!(cookie, "__Host-tidings_session=t0k; Path=/; HttpOnly; Secure; SameSite=Strict");
        // What browsers require of a `__Host-` cookie: Secure, Path=/, no Domain.
        for cookie in [cookie.as_str(), cleared_cookie()] {
            assert!(cookie.starts_with("__Host-") && cookie.contains("; Secure") && cookie.contains("; Path=/;"));
            assert!(!cookie.to_ascii_lowercase().contains("domain="), "{cookie}");
        }
        assert!(cleared_cookie().ends_with("Max-Age=0"));
    }
}
