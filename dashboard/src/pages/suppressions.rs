//! `/suppressions`: the list (filtered by address or by reason), add, remove.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::Error;
use tidings_core::email::EmailAddress;
use tidings_core::model::{Suppression, SuppressionSource};
use tidings_core::usecases::AddSuppressionRequest;

use crate::DashboardState;
use crate::confirm::{Ask, confirmed};
use crate::error::{OrPage, PageError, PageResult};
use crate::form::Posted;
use crate::layout::{
    FormErrors, clipped, clipped_link, csrf_field, danger_button, error_box, field_error, next_link, page, segment,
    time,
};
use crate::pages::{PagePath, list_params, query_pairs, query_value};
use crate::session::{Signed, Viewer, see_other};

/// `GET /suppressions?email&reason&cursor`: one address's entry, or the list.
pub(crate) async fn list(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let pairs = query_pairs(raw.as_deref());
    let email = query_value(&pairs, "email");
    let reason = query_value(&pairs, "reason");
    let who = viewer.principal();
    let mut errors = Vec::new();
    let (items, next) = match &email {
        Some(email) => match state.core.suppressions().get(who, EmailAddress::parse(email).into()).await {
            Ok(entry) => (vec![entry], None),
            Err(Error::NotFound(_)) => (Vec::new(), None),
            Err(Error::Validation { fields }) => {
                errors.extend(fields.iter().map(|f| format!("{}: {}", f.field, f.message)));
                (Vec::new(), None)
            }
            Err(e) => return Err(PageError::from(e).with_viewer(&viewer)),
        },
        None => match state.core.suppressions().list(who, list_params(&pairs), reason.clone()).await {
            Ok(listed) => (listed.items, listed.next_cursor),
            Err(Error::Validation { fields }) => {
                errors.extend(fields.iter().map(|f| format!("{}: {}", f.field, f.message)));
                (Vec::new(), None)
            }
            Err(e) => return Err(PageError::from(e).with_viewer(&viewer)),
        },
    };
    let status = if errors.is_empty() { StatusCode::OK } else { StatusCode::UNPROCESSABLE_ENTITY };
    let shown = (email.unwrap_or_default(), reason.unwrap_or_default());
    Ok((status, render(&viewer, &shown, &items, next.as_deref(), &errors, None)).into_response())
}

fn source_word(source: SuppressionSource) -> &'static str {
    match source {
        SuppressionSource::Api => "api",
        SuppressionSource::Bounce => "bounce",
        SuppressionSource::Complaint => "complaint",
    }
}

fn render(
    viewer: &Viewer,
    (email, reason): &(String, String),
    items: &[Suppression],
    next: Option<&str>,
    errors: &[String],
    refused: Option<(&str, &FormErrors)>,
) -> Markup {
    let (typed, add_errors) = refused.unwrap_or(("", &NO_ERRORS));
    let body = html! {
        @if !add_errors.is_empty() { (error_box(&add_errors.lines())) }
        section {
            form #add-suppression method="post" action="/suppressions" {
                (csrf_field(viewer))
                label for="add-email" { "Suppress an address (nothing is sent to it any more)" }
                input #add-email type="text" name="email" inputmode="email" required autocomplete="off" value=(typed)
                    aria-invalid=[add_errors.invalid("email")] aria-describedby=[add_errors.described_by("email", "add-email")];
                (field_error(add_errors, "email", "add-email"))
                div.actions { button type="submit" { "Add" } }
            }
        }
        form #filters.filters method="get" action="/suppressions" {
            div { label for="email" { "Address" } input #email type="text" name="email" value=(email) inputmode="email"; }
            div {
                label for="reason" { "Reason" }
                select #reason name="reason" {
                    option value="" { "Any" }
                    @for r in ["Manual", "HardBounce", "Complaint"] { option value=(r) selected[reason == r] { (r) } }
                }
            }
            div { button type="submit" { "Filter" } }
        }
        @if !errors.is_empty() { (error_box(errors)) }
        div.scroll {
            table.fixed #suppressions {
                thead { tr {
                    th { "Address" } th.w-num { "Reason" } th.hide-narrow.w-num { "Source" } th.hide-narrow { "Message" }
                    th.hide-narrow.w-date { "Added" } th.w-act { span.visually-hidden { "Action" } }
                } }
                tbody {
                    @for s in items {
                        tr data-email=(s.email.to_string()) {
                            td.mono.clip-cell data-label="Address" { (clipped(&s.email.to_string())) }
                            td data-label="Reason" { (s.reason.as_str()) }
                            td.hide-narrow data-label="Source" { (source_word(s.source)) }
                            td.hide-narrow.mono.clip-cell data-label="Message" { @if let Some(m) = s.message_id { (clipped_link(&format!("/messages/{m}"), &m.to_string())) } }
                            td.hide-narrow data-label="Added" { (time(s.created_at)) }
                            td.act { (danger_button(viewer, &format!("/suppressions/{}/delete", segment(&s.email.to_string())), "action", "Remove",
                                &format!("Remove {} from the suppression list? Mail to it will be sent again.", s.email))) }
                        }
                    }
                }
            }
        }
        @if items.is_empty() && errors.is_empty() { p.none { "No suppressed addresses match." } }
        (next_link("/suppressions", &[("reason", reason.clone())], next))
    };
    page(Some(viewer), "Suppressions", body)
}

/// `POST /suppressions` (`email`).
pub(crate) async fn add(State(state): State<DashboardState>, posted: Posted) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let req = AddSuppressionRequest { email: fields.text("email") };
    match state.core.suppressions().add(viewer.principal(), req).await {
        Ok(_) => Ok(see_other("/suppressions")),
        Err(Error::Validation { fields: wrong }) => {
            let listed = state.core.suppressions().list(viewer.principal(), Default::default(), None).await;
            let listed = listed.or_page(&viewer)?;
            let errors = FormErrors::from_fields(&wrong);
            let typed = fields.get("email").unwrap_or("").trim();
            let shown = (String::new(), String::new());
            let page =
                render(&viewer, &shown, &listed.items, listed.next_cursor.as_deref(), &[], Some((typed, &errors)));
            Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
        }
        Err(e) => Err(e).or_page(&viewer),
    }
}

/// No mistakes: the add form as first shown.
static NO_ERRORS: FormErrors = FormErrors(Vec::new());

/// `POST /suppressions/{email}/delete` (`confirm=yes`; without it, the confirmation page).
pub(crate) async fn remove(
    State(state): State<DashboardState>,
    PagePath(email): PagePath<String>,
    posted: Posted,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    if !confirmed(&fields) {
        let entry = state
            .core
            .suppressions()
            .get(viewer.principal(), EmailAddress::parse(&email).into())
            .await
            .or_page(&viewer)?;
        let action = format!("/suppressions/{}/delete", segment(&entry.email.to_string()));
        let question = format!("Remove {} from the suppression list? Mail to it will be sent again.", entry.email);
        return Ok(Ask { action: &action, question, yes: "Remove it", back: "/suppressions" }.page(&viewer));
    }
    state.core.suppressions().delete(viewer.principal(), EmailAddress::parse(&email).into()).await.or_page(&viewer)?;
    Ok(see_other("/suppressions"))
}
