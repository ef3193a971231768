//! The operator's side of the dashboard (`/operator/…`, served only with an operator token):
//! its cookie, and the extractors that admit a request to the operator's pages and forms.
//!
//! The operator session is core's [`OperatorSessions`]: a signed, self-expiring cookie
//! (`v1.<expiry>.<HMAC>`), kept apart from workspace sessions on every side. Its cookie is
//! `__Secure-tidings_operator=…; Path=/operator; Max-Age=28800; HttpOnly; Secure;
//! SameSite=Strict`: browsers send it to the operator's pages only, and those pages read
//! nothing else, so a workspace session (any API key, of any tenant) opens none of them and
//! the operator cookie opens no workspace page. (`__Host-` would require `Path=/`; a cookie
//! planted by a sibling host could only be one the server signed, which needs the token.)

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::SET_COOKIE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tidings_core::delivery::SiteControl;
use tidings_core::usecases::{MetricsToken, OPERATOR_SESSION_LIFETIME, OperatorSession, OperatorSessions};
use tidings_http::Owner;
use tokio::sync::OnceCell;

use crate::DashboardState;
use crate::error::PageError;
use crate::form::{FORM_BODY_LIMIT, Fields, cross_site, read_fields};
use crate::session::{client_ip, see_other};

/// Name of the operator's cookie (module docs).
pub const OPERATOR_COOKIE: &str = "__Secure-tidings_operator";

/// Where the operator's pages are; the cookie's path.
pub(crate) const OPERATOR_PATH: &str = "/operator";

/// The operator's side of a dashboard configured with a token.
#[derive(Clone)]
pub(crate) struct OperatorDesk {
    token: MetricsToken,
    /// The signing key is the store's: read (or made) on the first operator request.
    sessions: Arc<OnceCell<OperatorSessions>>,
    /// The delivery sites; `None` when the server does not deliver by site.
    pub(crate) sites: Option<SiteControl>,
}

impl OperatorDesk {
    /// The desk for `token`, over `sites`.
    pub(crate) fn new(token: MetricsToken, sites: Option<SiteControl>) -> Self {
        Self { token, sessions: Arc::default(), sites }
    }

    /// The sessions' signer, reading its key from the store the first time.
    pub(crate) async fn sessions(&self, state: &DashboardState) -> Result<&OperatorSessions, PageError> {
        self.sessions
            .get_or_try_init(|| OperatorSessions::shared(&state.core, self.token.clone()))
            .await
            .map_err(|e| PageError::from(tidings_core::Error::from(e)))
    }

    /// The operator session the request's cookie names, if live.
    pub(crate) async fn session(
        &self,
        state: &DashboardState,
        headers: &HeaderMap,
    ) -> Result<Option<OperatorSession>, PageError> {
        let Some(cookie) = operator_cookie(headers) else { return Ok(None) };
        let now = state.core.clock().now();
        Ok(self.sessions(state).await?.resume(cookie, now))
    }
}

/// The operator desk of `state`; without a token the operator's routes are not in the router,
/// so this is only a guard for a handler reached some other way.
pub(crate) fn desk(state: &DashboardState) -> Result<&OperatorDesk, PageError> {
    state.operator.as_ref().ok_or_else(|| PageError::status(StatusCode::NOT_FOUND, "Not found", "No such page."))
}

/// The `Set-Cookie` value that hands a browser the operator `session`.
pub(crate) fn operator_cookie_header(session: &OperatorSession) -> Result<HeaderValue, PageError> {
    let cookie = format!(
        "{OPERATOR_COOKIE}={}; Path={OPERATOR_PATH}; Max-Age={}; HttpOnly; Secure; SameSite=Strict",
        session.cookie_value(),
        OPERATOR_SESSION_LIFETIME.num_seconds()
    );
    HeaderValue::from_str(&cookie)
        .map_err(|_| PageError::from(tidings_core::Error::Internal("operator cookie is not a header".into())))
}

/// The `Set-Cookie` value that makes a browser forget the operator session.
pub(crate) const CLEARED_OPERATOR_COOKIE: &str =
    "__Secure-tidings_operator=; Path=/operator; Max-Age=0; HttpOnly; Secure; SameSite=Strict";

/// The operator cookie the request carries, if any (the first one).
pub(crate) fn operator_cookie(headers: &HeaderMap) -> Option<&str> {
    crate::session::cookie_named(headers, OPERATOR_COOKIE)
}

/// 303 to the operator's sign-in, clearing a dead cookie the request carried.
pub(crate) fn to_operator_sign_in(headers: &HeaderMap) -> Response {
    let mut response = see_other(OPERATOR_PATH);
    if operator_cookie(headers).is_some() {
        response.headers_mut().insert(SET_COOKIE, HeaderValue::from_static(CLEARED_OPERATOR_COOKIE));
    }
    response
}

/// Extractor of the operator's pages: the desk and a live operator session, or 303 to the
/// operator's sign-in.
pub(crate) struct OperatorSignedIn {
    pub(crate) desk: OperatorDesk,
    pub(crate) session: OperatorSession,
}

impl FromRequestParts<DashboardState> for OperatorSignedIn {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &DashboardState) -> Result<Self, Self::Rejection> {
        let desk = desk(state).map_err(IntoResponse::into_response)?.clone();
        match desk.session(state, &parts.headers).await {
            Ok(Some(session)) => Ok(Self { desk, session }),
            Ok(None) => Err(to_operator_sign_in(&parts.headers)),
            Err(e) => Err(e.into_response()),
        }
    }
}

/// The desk and the request of a form posted to the operator's pages, refused when the
/// operator's pages are off or the form comes from another site.
fn operator_form(req: Request, state: &DashboardState) -> Result<(OperatorDesk, Parts, axum::body::Body), PageError> {
    let (parts, body) = req.into_parts();
    let desk = desk(state)?.clone();
    if let Some(why) = cross_site(&parts.headers, parts.uri.authority().map(|a| a.as_str())) {
        return Err(PageError::forbidden_form(why).operator());
    }
    Ok((desk, parts, body))
}

/// A form the operator posted from this site, with a live operator session and its CSRF
/// token (checked before the handler runs, as [`crate::form::Posted`] does for workspaces).
pub(crate) struct OperatorPosted {
    pub(crate) desk: OperatorDesk,
    pub(crate) session: OperatorSession,
    pub(crate) fields: Fields,
}

impl FromRequest<DashboardState> for OperatorPosted {
    type Rejection = Response;

    async fn from_request(req: Request, state: &DashboardState) -> Result<Self, Self::Rejection> {
        let (desk, parts, body) = operator_form(req, state).map_err(IntoResponse::into_response)?;
        let session = match desk.session(state, &parts.headers).await {
            Ok(Some(session)) => session,
            Ok(None) => {
                let ended = PageError::status(
                    StatusCode::FORBIDDEN,
                    "Signed out",
                    "Your operator session has ended, so nothing was changed. Sign in again.",
                )
                .operator();
                let mut response = ended.into_response();
                if operator_cookie(&parts.headers).is_some() {
                    response.headers_mut().insert(SET_COOKIE, HeaderValue::from_static(CLEARED_OPERATOR_COOKIE));
                }
                return Err(response);
            }
            Err(e) => return Err(e.into_response()),
        };
        let client = client_ip(&parts);
        let fields = read_fields(&state.budget, Owner::client(client), &parts, body, FORM_BODY_LIMIT)
            .await
            .map_err(|e| e.operator_nav(session.csrf_token()).into_response())?;
        if !fields.get("csrf").is_some_and(|token| session.csrf_matches(token)) {
            let refused = PageError::forbidden_form("The form's security token is missing or out of date.");
            return Err(refused.operator_nav(session.csrf_token()).into_response());
        }
        Ok(Self { desk, session, fields })
    }
}

/// `POST /operator/sign-in`: the presented token and the client, from a form posted on this
/// site (no session yet, so no CSRF token; a cross-site post is refused like the workspace
/// sign-in's).
pub(crate) struct OperatorSignInForm {
    pub(crate) desk: OperatorDesk,
    pub(crate) client: IpAddr,
    pub(crate) token: String,
}

impl FromRequest<DashboardState> for OperatorSignInForm {
    type Rejection = Response;

    async fn from_request(req: Request, state: &DashboardState) -> Result<Self, Self::Rejection> {
        let (desk, parts, body) = operator_form(req, state).map_err(IntoResponse::into_response)?;
        let client = client_ip(&parts);
        let fields = read_fields(&state.budget, Owner::client(client), &parts, body, FORM_BODY_LIMIT)
            .await
            .map_err(|e| e.operator().into_response())?;
        Ok(Self { desk, client, token: fields.text("token").unwrap_or_default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header::COOKIE;

    #[test]
    fn only_the_operator_cookie_is_read_and_it_is_cleared_on_its_own_path() {
        let mut headers = HeaderMap::new();
        headers
            .append(COOKIE, HeaderValue::from_static("__Host-tidings_session=abc; __Secure-tidings_operator=v1.9.x"));
        assert_eq!(operator_cookie(&headers), Some("v1.9.x"));
        let mut workspace_only = HeaderMap::new();
        workspace_only.append(COOKIE, HeaderValue::from_static("__Host-tidings_session=abc"));
        assert_eq!(operator_cookie(&workspace_only), None);
        assert!(CLEARED_OPERATOR_COOKIE.starts_with(&format!("{OPERATOR_COOKIE}=;")));
        assert!(CLEARED_OPERATOR_COOKIE.contains(&format!("Path={OPERATOR_PATH};")));
    }
}
