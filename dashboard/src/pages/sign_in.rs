//! `/`, `POST /sign-in`, `POST /sign-out`: an API key exchanged for a server-side session
//! (core's `sessions().sign_in`), failed attempts counted in the API's per-client throttle.

use axum::extract::{Request, State};
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::usecases::{AuthOutcome, AuthRefusal, SignedIn};

use crate::DashboardState;
use crate::error::{PageError, PageResult};
use crate::form::{SignInForm, cross_site};
use crate::layout::{error_box, page};
use crate::session::{cleared_cookie, see_other, session_cookie, session_token, to_sign_in, viewer};

/// `GET /`: the sign-in page, or the overview for someone signed in already.
pub(crate) async fn home(State(state): State<DashboardState>, req: Request) -> PageResult {
    if viewer(&state, req.headers()).await?.is_some() {
        return Ok(see_other("/overview"));
    }
    let mut response = sign_in_page(StatusCode::OK, None).into_response();
    if session_token(req.headers()).is_some() {
        // A cookie naming no live session: forget it.
        response.headers_mut().insert(SET_COOKIE, HeaderValue::from_static(cleared_cookie()));
    }
    Ok(response)
}

/// `POST /sign-in` (`key`): 303 to the overview with the session cookie; 401 with the form
/// again for a key that is not valid; 429 once the client failed too often.
pub(crate) async fn sign_in(State(state): State<DashboardState>, form: SignInForm) -> PageResult {
    match state.core.sessions().sign_in(&*state.limits, form.client, &form.key).await? {
        AuthOutcome::Admitted(SignedIn { token, .. }) => {
            let mut response = see_other("/overview");
            let cookie = HeaderValue::from_str(&session_cookie(token.expose()))
                .map_err(|_| PageError::from(tidings_core::Error::Internal("session token is not a header".into())))?;
            response.headers_mut().insert(SET_COOKIE, cookie);
            Ok(response)
        }
        AuthOutcome::Refused(AuthRefusal::Missing | AuthRefusal::Invalid) => {
            let why = "That is not a valid API key. Keys start with tid_; a revoked key no longer signs in.";
            Ok(sign_in_page(StatusCode::UNAUTHORIZED, Some(why.to_owned())).into_response())
        }
        AuthOutcome::Refused(AuthRefusal::Blocked(wait)) => {
            let why = format!("Too many failed attempts from your address. Try again in {} s.", wait.seconds);
            let mut response = sign_in_page(StatusCode::TOO_MANY_REQUESTS, Some(why)).into_response();
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, HeaderValue::from(wait.seconds));
            Ok(response)
        }
    }
}

/// `POST /sign-out`: ends the session (with the right CSRF token) and clears the cookie. A
/// request whose session is already gone just has its cookie cleared.
pub(crate) async fn sign_out(State(state): State<DashboardState>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    if let Some(why) = cross_site(&parts.headers, parts.uri.authority().map(|a| a.as_str())) {
        return PageError::forbidden_form(why).into_response();
    }
    match viewer(&state, &parts.headers).await {
        Ok(Some(_)) => {}
        Ok(None) => return to_sign_in(true),
        Err(e) => return e.into_response(),
    }
    // A live session: the same checks as every other form.
    let req = Request::from_parts(parts, body);
    let posted =
        match <crate::form::Posted as axum::extract::FromRequest<DashboardState>>::from_request(req, &state).await {
            Ok(posted) => posted,
            Err(refused) => return refused,
        };
    if let Err(e) = state.core.sessions().sign_out(posted.viewer.token()).await {
        return PageError::from(e).with_viewer(&posted.viewer).into_response();
    }
    to_sign_in(true)
}

/// The sign-in page, with an error when a try failed.
fn sign_in_page(status: StatusCode, error: Option<String>) -> (StatusCode, Markup) {
    let body = html! {
        div.sign-in {
            @if let Some(error) = error { (error_box(&[error])) }
            section {
                p { "Sign in with an API key of your workspace. A send key sees the messages it sent and the send form; a full key sees everything." }
                form #sign-in method="post" action="/sign-in" {
                    label for="key" { "API key" }
                    input #key type="password" name="key" autocomplete="off" spellcheck="false" required
                        placeholder="tid_…" autofocus;
                    div.actions { button type="submit" { "Sign in" } }
                }
                p.muted { "The server printed the first key (bootstrap key: tid_…) when it started for the first time." }
            }
        }
    };
    (status, page(None, "Sign in", body))
}
