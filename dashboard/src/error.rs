//! The one place where failures become pages: each of core's errors gets the status the API
//! gives it and a page saying what went wrong in words a person can act on. A 5xx says
//! nothing of its cause, which is logged once.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;
use tidings_core::Error;

use crate::layout::{error_box, page};
use crate::session::Viewer;

/// A failed request, rendered as a page (with the navigation when someone is signed in).
#[derive(Debug)]
pub(crate) struct PageError {
    status: StatusCode,
    title: &'static str,
    lines: Vec<String>,
    /// The signed-in person's navigation and CSRF token; rendered without when absent.
    nav: Option<NavOwner>,
    /// `Retry-After`, in seconds, for a 503 that passes in a moment.
    retry_after: Option<u32>,
}

/// Whose navigation the error page draws.
#[derive(Debug)]
enum NavOwner {
    /// A workspace session's: its scope and CSRF token.
    Workspace { scope: &'static str, csrf: String },
    /// The operator's pages, with the operator session's CSRF token when signed in.
    Operator { csrf: Option<String> },
}

impl PageError {
    /// A page with this status, title and explanation.
    pub(crate) fn status(status: StatusCode, title: &'static str, line: impl Into<String>) -> Self {
        Self { status, title, lines: vec![line.into()], nav: None, retry_after: None }
    }

    /// The same page with `Retry-After: seconds`.
    pub(crate) fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// 403: the form's CSRF token is missing or wrong, or the POST came from another site.
    pub(crate) fn forbidden_form(why: &str) -> Self {
        Self::status(
            StatusCode::FORBIDDEN,
            "Request refused",
            format!("{why} Nothing was changed. Go back, reload the page and try again."),
        )
    }

    /// The same page with `viewer`'s navigation.
    pub(crate) fn with_viewer(mut self, viewer: &Viewer) -> Self {
        self.nav = Some(NavOwner::Workspace { scope: viewer.scope_word(), csrf: viewer.csrf().to_owned() });
        self
    }

    /// The same page in the operator's frame, for someone not signed in as the operator.
    pub(crate) fn operator(mut self) -> Self {
        self.nav = Some(NavOwner::Operator { csrf: None });
        self
    }

    /// The same page in the operator's frame, with the sign-out of the operator session whose
    /// CSRF token is `csrf`.
    pub(crate) fn operator_nav(mut self, csrf: &str) -> Self {
        self.nav = Some(NavOwner::Operator { csrf: Some(csrf.to_owned()) });
        self
    }

    /// Its status.
    pub(crate) fn status_code(&self) -> StatusCode {
        self.status
    }
}

impl From<Error> for PageError {
    fn from(e: Error) -> Self {
        let (status, title, lines) = match &e {
            Error::Validation { fields } => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "Please correct the form",
                fields.iter().map(|f| format!("{}: {}", f.field, f.message)).collect(),
            ),
            Error::DomainNotVerified(_) | Error::RecipientSuppressed(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "Not sent", vec![e.to_string()])
            }
            Error::AllRecipientsSuppressed { fields } => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "Not sent",
                fields.iter().map(|f| format!("{}: {}", f.field, f.message)).collect(),
            ),
            Error::TemplateRender(_) | Error::TemplateSyntax(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "Template error", vec![e.to_string()])
            }
            Error::InvalidIdempotencyKey(_) => (StatusCode::BAD_REQUEST, "Bad request", vec![e.to_string()]),
            Error::InvalidApiKey => {
                (StatusCode::UNAUTHORIZED, "Signed out", vec!["This API key is not valid any more.".to_owned()])
            }
            Error::InsufficientScope => (
                StatusCode::FORBIDDEN,
                "Not allowed",
                vec![
                    "The API key you signed in with has the send scope: it may send and read the messages it sent, \
                     nothing else. Sign in with a full key to use this page."
                        .to_owned(),
                ],
            ),
            Error::DomainNotAllowed { .. } => (StatusCode::FORBIDDEN, "Not allowed", vec![e.to_string()]),
            Error::SendingPaused(_) => (StatusCode::FORBIDDEN, "Sending paused", vec![e.to_string()]),
            Error::NotFound(what) => (StatusCode::NOT_FOUND, "Not found", vec![format!("No such {what} here.")]),
            Error::Conflict(_) | Error::IdempotencyKeyReused(_) => {
                (StatusCode::CONFLICT, "Could not do that now", vec![e.to_string()])
            }
            Error::Unavailable(_) => {
                tracing::error!(error = %e, "dashboard request failed");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Try again",
                    vec!["The service is temporarily unavailable. Try again in a moment.".to_owned()],
                )
            }
            Error::Internal(_) => {
                tracing::error!(error = %e, "dashboard request failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Something went wrong",
                    vec!["An internal error happened; it was logged.".to_owned()],
                )
            }
        };
        Self { status, title, lines, nav: None, retry_after: None }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (back, back_label) = match &self.nav {
            Some(NavOwner::Operator { .. }) => ("/operator/sites", "Back to the delivery sites"),
            _ => ("/overview", "Back to the overview"),
        };
        let body = html! {
            (error_box(&self.lines))
            p { a href=(back) { (back_label) } }
        };
        let markup = match &self.nav {
            Some(NavOwner::Workspace { scope, csrf }) => crate::layout::page_with_nav(scope, csrf, self.title, body),
            Some(NavOwner::Operator { csrf }) => crate::layout::operator_page(csrf.as_deref(), self.title, body),
            None => page(None, self.title, body),
        };
        let mut response = (self.status, markup).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

/// `Result<T, core::Error>` to `Result<T, PageError>` with the viewer's navigation.
pub(crate) trait OrPage<T> {
    /// Maps the error to its page for `viewer`.
    fn or_page(self, viewer: &Viewer) -> Result<T, PageError>;
}

impl<T> OrPage<T> for Result<T, Error> {
    fn or_page(self, viewer: &Viewer) -> Result<T, PageError> {
        self.map_err(|e| PageError::from(e).with_viewer(viewer))
    }
}

/// What page handlers return.
pub(crate) type PageResult<T = Response> = Result<T, PageError>;
