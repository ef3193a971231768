//! The operator's pages (contract §12, "Visible and operable"; docs/api.md, "Delivery
//! sites"): `GET /operator` (sign in with the operator token), `GET /operator/sites` (every
//! delivery site with its limits, connections, queue, rate, state and last reply) and the
//! forms that suspend and resume a site. Served only with an operator token
//! (`crate::operator`); a workspace session sees none of it, since a site's volumes and
//! replies are every tenant's.
//!
//! The rules (how long a suspension may be, what a reason may hold) are core's
//! ([`SiteControl::suspend_for`](tidings_core::delivery::SiteControl::suspend_for)), shared
//! with the operator API. Replies come from remote servers: maud escapes them like every
//! other value.

use axum::extract::{Request, State};
use axum::http::header::{RETRY_AFTER, SET_COOKIE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::Error;
use tidings_core::delivery::{SiteControl, SiteView};
use tidings_core::error::FieldError;
use tidings_core::shaping::SiteKey;
use tidings_core::usecases::{AuthOutcome, AuthRefusal, OperatorSession};

use crate::DashboardState;
use crate::error::{PageError, PageResult};
use crate::form::cross_site;
use crate::layout::{FormErrors, error_box, field_error, operator_page, time};
use crate::operator::{
    CLEARED_OPERATOR_COOKIE, OperatorPosted, OperatorSignInForm, OperatorSignedIn, desk, operator_cookie_header,
    to_operator_sign_in,
};
use crate::session::see_other;

/// Where the sites are listed.
const SITES: &str = "/operator/sites";

/// Durations offered for a suspension; any other (`30s` to `7d`) may be typed.
const DURATIONS: [&str; 8] = ["15m", "1h", "2h", "6h", "12h", "1d", "3d", "7d"];

/// `GET /operator`: the sign-in form, or the sites for an operator signed in already.
pub(crate) async fn home(State(state): State<DashboardState>, req: Request) -> PageResult {
    let desk = desk(&state)?;
    if desk.session(&state, req.headers()).await?.is_some() {
        return Ok(see_other(SITES));
    }
    let mut response = sign_in_page(StatusCode::OK, None).into_response();
    if crate::operator::operator_cookie(req.headers()).is_some() {
        response.headers_mut().insert(SET_COOKIE, HeaderValue::from_static(CLEARED_OPERATOR_COOKIE));
    }
    Ok(response)
}

/// `POST /operator/sign-in` (`token`): 303 to the sites with the operator cookie; 401 with
/// the form again for a wrong token; 429 once the client failed too often (failures count
/// with the API's and the workspace sign-in's).
pub(crate) async fn sign_in(State(state): State<DashboardState>, form: OperatorSignInForm) -> PageResult {
    let sessions = form.desk.sessions(&state).await?;
    match sessions.sign_in(&state.core, &*state.limits, form.client, &form.token).await? {
        AuthOutcome::Admitted(session) => {
            let mut response = see_other(SITES);
            response.headers_mut().insert(SET_COOKIE, operator_cookie_header(&session)?);
            Ok(response)
        }
        AuthOutcome::Refused(AuthRefusal::Missing | AuthRefusal::Invalid) => {
            let why = "That is not the operator token (TIDINGS_OPERATOR_TOKEN). An API key does not open these pages.";
            Ok(sign_in_page(StatusCode::UNAUTHORIZED, Some(why.to_owned())).into_response())
        }
        AuthOutcome::Refused(AuthRefusal::Blocked(wait)) => {
            let why = format!("Too many failed attempts from your address. Try again in {} s.", wait.seconds);
            let mut response = sign_in_page(StatusCode::TOO_MANY_REQUESTS, Some(why)).into_response();
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(wait.seconds));
            Ok(response)
        }
    }
}

/// `POST /operator/sign-out`: clears the operator cookie (with the session's CSRF token). The
/// session itself ends at its expiry or when the token changes (`crate::operator`).
pub(crate) async fn sign_out(State(state): State<DashboardState>, req: Request) -> Response {
    if let Some(why) = cross_site(req.headers(), req.uri().authority().map(|a| a.as_str())) {
        return PageError::forbidden_form(why).operator().into_response();
    }
    let signed_in = match desk(&state) {
        Ok(desk) => desk.session(&state, req.headers()).await,
        Err(e) => return e.into_response(),
    };
    match signed_in {
        Ok(Some(_)) => {}
        Ok(None) => return to_operator_sign_in(req.headers()),
        Err(e) => return e.into_response(),
    }
    // A live session: the same checks as every other operator form.
    if let Err(refused) =
        <OperatorPosted as axum::extract::FromRequest<DashboardState>>::from_request(req, &state).await
    {
        return refused;
    }
    let mut response = see_other(crate::operator::OPERATOR_PATH);
    response.headers_mut().insert(SET_COOKIE, HeaderValue::from_static(CLEARED_OPERATOR_COOKIE));
    response
}

/// `GET /operator/sites`.
pub(crate) async fn sites(State(state): State<DashboardState>, signed: OperatorSignedIn) -> PageResult {
    let OperatorSignedIn { desk, session } = signed;
    let shown = list(&state, desk.sites.as_ref(), &session).await?;
    Ok(render(&session, shown.as_deref(), &Typed::default(), &FormErrors::default()).into_response())
}

/// `POST /operator/sites/suspend` (`site`, `duration`, `reason`): 303 back to the sites, or
/// the page again naming the mistake (422).
pub(crate) async fn suspend(State(state): State<DashboardState>, posted: OperatorPosted) -> PageResult {
    let OperatorPosted { desk, session, fields } = posted;
    let typed = Typed {
        site: fields.text("site").unwrap_or_default(),
        duration: fields.text("duration").unwrap_or_default(),
        reason: fields.text("reason").unwrap_or_default(),
    };
    let sites = serving(desk.sites.as_ref(), &session)?;
    let now = state.core.clock().now();
    let done = match site_key(&typed.site) {
        Ok(site) => sites.suspend_for(&site, fields.get("duration"), fields.get("reason"), now).await.map(|_| ()),
        Err(e) => Err(e),
    };
    finish(&state, sites, &session, done, &typed).await
}

/// `POST /operator/sites/resume` (`site`): ends the site's suspension and throttle now.
pub(crate) async fn resume(State(state): State<DashboardState>, posted: OperatorPosted) -> PageResult {
    let OperatorPosted { desk, session, fields } = posted;
    let typed = Typed { site: fields.text("site").unwrap_or_default(), ..Typed::default() };
    let sites = serving(desk.sites.as_ref(), &session)?;
    let now = state.core.clock().now();
    let done = match site_key(&typed.site) {
        Ok(site) => sites.resume(&site, now).await.map_err(Error::from),
        Err(e) => Err(e),
    };
    finish(&state, sites, &session, done, &typed).await
}

/// After a change: 303 to the sites when it was made; the sites again with the form's
/// mistakes when it was refused; the error page otherwise.
async fn finish(
    state: &DashboardState,
    sites: &SiteControl,
    session: &OperatorSession,
    done: Result<(), Error>,
    typed: &Typed,
) -> PageResult {
    match done {
        Ok(()) => Ok(see_other(SITES)),
        Err(Error::Validation { fields }) => {
            let shown = list(state, Some(sites), session).await?;
            let errors = FormErrors::from_fields(&fields);
            let page = render(session, shown.as_deref(), typed, &errors);
            Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
        }
        Err(e) => Err(PageError::from(e).operator_nav(session.csrf_token())),
    }
}

/// The sites, or 409 when the server does not deliver by site.
fn serving<'a>(sites: Option<&'a SiteControl>, session: &OperatorSession) -> Result<&'a SiteControl, PageError> {
    sites.ok_or_else(|| {
        let e = Error::Conflict("this server does not deliver by site (TIDINGS_DELIVERY is not mx)".into());
        PageError::from(e).operator_nav(session.csrf_token())
    })
}

/// The site a form names, or a validation error naming `site`.
fn site_key(text: &str) -> Result<SiteKey, Error> {
    SiteKey::parse(text).ok_or_else(|| {
        let message = "not a site: a shaping suffix such as .google.com, or MX host names joined by commas";
        Error::Validation { fields: vec![FieldError::new("site", message)] }
    })
}

/// Every site with something to show; `None` when the server does not deliver by site.
async fn list(
    state: &DashboardState,
    sites: Option<&SiteControl>,
    session: &OperatorSession,
) -> PageResult<Option<Vec<SiteView>>> {
    let Some(sites) = sites else { return Ok(None) };
    let now = state.core.clock().now();
    let views =
        sites.list(now).await.map_err(|e| PageError::from(Error::from(e)).operator_nav(session.csrf_token()))?;
    Ok(Some(views))
}

/// The suspend form as typed, to show again with its mistakes.
#[derive(Debug, Default)]
struct Typed {
    site: String,
    duration: String,
    reason: String,
}

fn render(session: &OperatorSession, shown: Option<&[SiteView]>, typed: &Typed, errors: &FormErrors) -> Markup {
    let csrf = session.csrf_token();
    let body = html! {
        p.muted {
            "Delivery by site is the server's, for every workspace. Leases, suspensions and throttles are every \
             node's; waiting, in flight, the last minute and the last reply are this node's. This session ends "
            (time(session.expires_at())) "."
        }
        @if !errors.is_empty() { (error_box(&errors.lines())) }
        @match shown {
            None => {
                p #no-shaping.notice role="status" {
                    "This server does not deliver by site (TIDINGS_DELIVERY is not mx): there are no sites to show \
                     or suspend."
                }
            }
            Some([]) => {
                p #no-sites { "No site has anything to show: no mail waiting or in flight, no suspension, no reply yet." }
            }
            Some(views) => {
                div.scroll {
                    table #sites {
                        thead { tr {
                            th { "Site" } th { "Limits" } th { "Leases" } th { "Waiting" } th { "In flight" }
                            th { "Last minute" } th { "State" } th { "Last reply" } th { span.visually-hidden { "Actions" } }
                        } }
                        tbody {
                            @for view in views { (site_row(csrf, view)) }
                        }
                    }
                }
            }
        }
        @if shown.is_some() {
            h2 { "Suspend a site" }
            section {
                p.muted { "A site that is not listed may be suspended too: type its key as the operator API lists it." }
                form #suspend-site method="post" action="/operator/sites/suspend" {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="site" { "Site" }
                    input #site type="text" name="site" required placeholder=".google.com" autocomplete="off"
                        spellcheck="false" value=(typed.site)
                        aria-invalid=[errors.invalid("site")] aria-describedby=[errors.described_by("site", "site")];
                    (field_error(errors, "site", "site"))
                    label for="duration" { "For (30s to 7d)" }
                    input #duration type="text" name="duration" required list="durations" autocomplete="off"
                        value=(if typed.duration.is_empty() { "1h" } else { typed.duration.as_str() })
                        aria-invalid=[errors.invalid("duration")]
                        aria-describedby=[errors.described_by("duration", "duration")];
                    datalist #durations { @for d in DURATIONS { option value=(d) {} } }
                    (field_error(errors, "duration", "duration"))
                    label for="reason" { "Why (up to 500 characters)" }
                    input #reason type="text" name="reason" maxlength="500" autocomplete="off" value=(typed.reason)
                        placeholder="suspended by the operator"
                        aria-invalid=[errors.invalid("reason")] aria-describedby=[errors.described_by("reason", "reason")];
                    (field_error(errors, "reason", "reason"))
                    div.actions { button type="submit" { "Suspend" } }
                }
            }
        }
    };
    operator_page(Some(csrf), "Delivery sites", body)
}

/// One site's row: what it is, what it holds, its state, and the forms that act on it.
fn site_row(csrf: &str, view: &SiteView) -> Markup {
    let site = view.site.to_string();
    let limits = &view.limits;
    html! {
        tr data-site=(site) {
            td.mono data-label="Site" { (site) }
            td data-label="Limits" {
                (limits.connection_limit) " connections, " (limits.max_deliveries_per_connection) " per connection, "
                (limits.max_message_rate.to_string()) ", TLS " (limits.tls.to_string())
            }
            td data-label="Leases" { (view.leases) }
            td data-label="Waiting" { (view.seen.waiting) }
            td data-label="In flight" { (view.seen.in_flight) }
            td data-label="Last minute" { (view.seen.admitted_last_minute) " delivered" }
            td.state data-label="State" { (state(view)) }
            td data-label="Last reply" {
                @match view.last_reply() {
                    Some(reply) => { span.reply.mono { (reply.reply) } " " (time(reply.at)) }
                    None => span.none { "—" },
                }
            }
            td.act {
                form.suspend method="post" action="/operator/sites/suspend" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="site" value=(site);
                    select name="duration" aria-label={ "Suspend " (site) " for" } {
                        @for d in DURATIONS { option value=(d) selected[d == "1h"] { (d) } }
                    }
                    input type="text" name="reason" maxlength="500" placeholder="why" autocomplete="off"
                        aria-label={ "Why " (site) " is suspended" };
                    button type="submit" { "Suspend" }
                }
                @if view.suspended.is_some() || view.throttled.is_some() {
                    form.resume method="post" action="/operator/sites/resume" {
                        input type="hidden" name="csrf" value=(csrf);
                        input type="hidden" name="site" value=(site);
                        button type="submit" { "Resume" }
                    }
                }
            }
        }
    }
}

/// Open, suspended until … (why), throttled to … until … (why): both may hold.
fn state(view: &SiteView) -> Markup {
    html! {
        @if view.suspended.is_none() && view.throttled.is_none() {
            span class="badge ok" { "open" }
        }
        @if let Some((until, why)) = &view.suspended {
            p.suspended { span class="badge bad" { "suspended" } " until " (time(*until)) ": " span.why { (why) } }
        }
        @if let Some((rate, until, why)) = &view.throttled {
            p.throttled {
                span class="badge wait" { "throttled" } " to " (rate.to_string()) " until " (time(*until)) ": "
                span.why { (why) }
            }
        }
    }
}

/// The operator's sign-in page, with an error when a try failed.
fn sign_in_page(status: StatusCode, error: Option<String>) -> (StatusCode, Markup) {
    let body = html! {
        div.sign-in {
            @if let Some(error) = error { (error_box(&[error])) }
            section {
                p { "The delivery sites are the server's, for every workspace. Sign in with the operator token the server was started with (TIDINGS_OPERATOR_TOKEN)." }
                form #operator-sign-in method="post" action="/operator/sign-in" {
                    label for="token" { "Operator token" }
                    input #token type="password" name="token" autocomplete="off" spellcheck="false" required autofocus;
                    div.actions { button type="submit" { "Sign in" } }
                }
            }
        }
    };
    (status, operator_page(None, "Operator sign-in", body))
}
