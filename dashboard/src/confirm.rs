//! The confirmation step of destructive actions (cancel a message, remove a suppression or a
//! sender, revoke a key, delete a domain, template or endpoint), which holds without
//! JavaScript.
//!
//! The form that destroys something carries `data-confirm="question"`. With the script, the
//! browser asks the question (`window.confirm`) and, on yes, adds `confirm=yes` to the form
//! before it posts: one step, as before. Without the script the form posts without it, and
//! the handler answers, once it has checked that the caller may act on the thing (so a
//! refusal stays the API's 403 or 404), with [`Ask::page`]: the question and a form that
//! posts again with `confirm=yes`, or a link back. Nothing is changed until a post carries
//! `confirm=yes` (with the session's CSRF token, like every post).

use axum::response::{IntoResponse, Response};
use maud::html;

use crate::form::Fields;
use crate::layout::{csrf_field, page};
use crate::session::Viewer;

/// The name and value of the field that says "yes, I am sure".
pub(crate) const FIELD: (&str, &str) = ("confirm", "yes");

/// Whether the posted form carries the confirmation.
pub(crate) fn confirmed(fields: &Fields) -> bool {
    fields.get(FIELD.0) == Some(FIELD.1)
}

/// What to ask before a destructive action.
pub(crate) struct Ask<'a> {
    /// Where the form posts (the action itself).
    pub(crate) action: &'a str,
    /// The question, naming the thing and what happens to it.
    pub(crate) question: String,
    /// The label of the button that does it ("Revoke the key").
    pub(crate) yes: &'a str,
    /// Where "No, go back" leads.
    pub(crate) back: &'a str,
}

impl Ask<'_> {
    /// The confirmation page (200): the question, the button that posts again with
    /// `confirm=yes`, and the way back.
    pub(crate) fn page(&self, viewer: &Viewer) -> Response {
        let body = html! {
            section #confirm {
                p #confirm-question { (self.question) }
                form.danger #confirm-form method="post" action=(self.action) {
                    (csrf_field(viewer))
                    input type="hidden" name=(FIELD.0) value=(FIELD.1);
                    div.actions {
                        button type="submit" { (self.yes) }
                        a.back href=(self.back) { "No, go back" }
                    }
                }
            }
        };
        page(Some(viewer), "Are you sure?", body).into_response()
    }
}
