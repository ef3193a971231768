//! `GET /messages` (the list, filtered and paged like `GET /v1/messages`) and the test send
//! (`GET /messages/new`, `POST /messages`, under the key's send rate like the API).

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::NaiveDate;
use maud::{Markup, html};
use tidings_core::Error;
use tidings_core::ids::MessageId;
use tidings_core::model::{Message, MessageStatus, RecipientKind};
use tidings_core::usecases::{Admission, Listed, MessageFilters, SendRequest};

use crate::DashboardState;
use crate::error::{OrPage, PageError, PageResult};
use crate::form::Posted;
use crate::layout::{
    FormErrors, badge, clipped, clipped_link, csrf_field, error_box, field_error, page, status_kind, time, with_query,
};
use crate::pages::{list_params, listed_unless_invalid, query_pairs, query_value};
use crate::session::{Signed, Viewer, see_other};

/// `GET /messages?q&status&to&tag&metadata=key:value&createdAfter&createdBefore&cursor&endingBefore`:
/// the parameter names are the API's, so a link from the overview or a bookmark reads the same
/// in both.
pub(crate) async fn list(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let pairs = query_pairs(raw.as_deref());
    let shown = Shown {
        q: query_value(&pairs, "q").unwrap_or_default(),
        status: query_value(&pairs, "status").unwrap_or_default(),
        to: query_value(&pairs, "to").unwrap_or_default(),
        tag: query_value(&pairs, "tag").unwrap_or_default(),
        metadata: query_value(&pairs, "metadata").unwrap_or_default(),
        created_after: query_value(&pairs, "createdAfter").unwrap_or_default(),
        created_before: query_value(&pairs, "createdBefore").unwrap_or_default(),
    };
    let given = |text: &String| (!text.is_empty()).then(|| text.clone());
    let mut filters = MessageFilters {
        status: given(&shown.status),
        to: given(&shown.to),
        q: given(&shown.q),
        created_after: given(&shown.created_after),
        created_before: given(&shown.created_before),
        ending_before: query_value(&pairs, "endingBefore"),
        ..MessageFilters::default()
    };
    if !shown.tag.is_empty() {
        filters.tags.push(shown.tag.clone());
    }
    let mut errors = FormErrors::default();
    if !shown.metadata.is_empty() {
        match shown.metadata.split_once(':') {
            Some((key, value)) => filters.metadata.push((key.trim().to_owned(), value.trim().to_owned())),
            None => errors.0.push((Some("metadata".into()), "write the filter as key:value".into())),
        }
    }
    let listed = listed_unless_invalid(
        &mut errors,
        &viewer,
        state.core.messages().list(viewer.principal(), list_params(&pairs), &filters),
    )
    .await?;
    let status = if errors.is_empty() { StatusCode::OK } else { StatusCode::UNPROCESSABLE_ENTITY };
    Ok((status, render_list(&viewer, &shown, listed.as_ref(), &errors)).into_response())
}

/// The filters as typed, to show them again.
struct Shown {
    q: String,
    status: String,
    to: String,
    tag: String,
    metadata: String,
    created_after: String,
    created_before: String,
}

impl Shown {
    /// The query of a link that keeps these filters.
    fn query(&self) -> [(&'static str, String); 7] {
        [
            ("q", self.q.clone()),
            ("status", self.status.clone()),
            ("to", self.to.clone()),
            ("tag", self.tag.clone()),
            ("metadata", self.metadata.clone()),
            ("createdAfter", self.created_after.clone()),
            ("createdBefore", self.created_before.clone()),
        ]
    }

    /// What was searched, for the empty state: `"invoice", status Bounced, created before
    /// 2026-05-01`.
    fn described(&self) -> String {
        let mut parts = Vec::new();
        if !self.q.is_empty() {
            parts.push(format!("\u{201c}{}\u{201d}", self.q));
        }
        for (label, value) in [
            ("status", &self.status),
            ("to", &self.to),
            ("tag", &self.tag),
            ("metadata", &self.metadata),
            ("created from", &self.created_after),
            ("created before", &self.created_before),
        ] {
            if !value.is_empty() {
                parts.push(format!("{label} {value}"));
            }
        }
        parts.join(", ")
    }
}

/// The input type of a creation bound: a date picker for a date (or nothing yet); a text field
/// for a time, as the overview's hourly bars link with, which a date picker would show empty
/// and drop at the next search.
fn date_or_time(value: &str) -> &'static str {
    if value.is_empty() || NaiveDate::parse_from_str(value, "%Y-%m-%d").is_ok() { "date" } else { "text" }
}

/// A text input of the filter form, with its error under it.
fn filter_input(errors: &FormErrors, field: &str, label: &str, kind: &str, value: &str, hint: Option<&str>) -> Markup {
    html! {
        div {
            label for=(field) { (label) }
            input id=(field) type=(kind) name=(field) value=(value) placeholder=[hint]
                aria-invalid=[errors.invalid(field)] aria-describedby=[errors.described_by(field, field)];
            (field_error(errors, field, field))
        }
    }
}

fn render_list(viewer: &Viewer, shown: &Shown, listed: Option<&Listed<Message>>, errors: &FormErrors) -> Markup {
    let query = shown.query();
    let body = html! {
        div.actions { a href="/messages/new" { "Send a test email" } }
        form #filters.filters method="get" action="/messages" role="search" {
            div.search {
                label for="q" { "Search recipient or subject" }
                input #q type="search" name="q" value=(shown.q) minlength="3" maxlength="200"
                    placeholder="part of an address, a name or a subject"
                    aria-invalid=[errors.invalid("q")] aria-describedby=[errors.described_by("q", "q")];
                (field_error(errors, "q", "q"))
            }
            div {
                label for="status" { "Status" }
                select #status name="status" aria-invalid=[errors.invalid("status")]
                    aria-describedby=[errors.described_by("status", "status")] {
                    option value="" { "Any" }
                    @for s in MessageStatus::ALL {
                        option value=(s.as_str()) selected[shown.status == s.as_str()] { (s.as_str()) }
                    }
                }
                (field_error(errors, "status", "status"))
            }
            (filter_input(errors, "tag", "Tag", "text", &shown.tag, Some("name or name:value")))
            (filter_input(errors, "createdAfter", "Created from", date_or_time(&shown.created_after), &shown.created_after, None))
            (filter_input(errors, "createdBefore", "Created before", date_or_time(&shown.created_before), &shown.created_before, None))
            @if !shown.to.is_empty() {
                (filter_input(errors, "to", "Recipient (whole address)", "text", &shown.to, None))
            }
            @if !shown.metadata.is_empty() || errors.invalid("metadata").is_some() {
                (filter_input(errors, "metadata", "Metadata", "text", &shown.metadata, Some("key:value")))
            }
            div { button type="submit" { "Search" } }
        }
        @if !errors.is_empty() { (error_box(&errors.lines())) }
        @if let Some(listed) = listed {
            div.scroll {
                table.fixed #messages {
                    thead { tr { th.w-date { "Created" } th { "To" } th.hide-narrow { "From" } th { "Subject" } th.w-status { "Status" } } }
                    tbody {
                        @for m in &listed.items {
                            tr data-id=(m.id) {
                                td data-label="Created" { (time(m.created_at)) }
                                td.mono.clip-cell data-label="To" {
                                    (clipped(&m.to_field()))
                                    @let others = m.recipient_list().len().saturating_sub(m.mailboxes_of(RecipientKind::To).len().max(1));
                                    @if others > 0 { " " span.muted.more-recipients title="recipients in cc and bcc" { "+" (others) } }
                                }
                                td.mono.hide-narrow.clip-cell data-label="From" { (clipped(&m.from.address.to_string())) }
                                td.clip-cell data-label="Subject" {
                                    (clipped_link(&format!("/messages/{}", m.id), if m.subject.is_empty() { "(no subject)" } else { &m.subject }))
                                }
                                td data-label="Status" { (badge(m.status.as_str(), status_kind(m.status.as_str()))) }
                            }
                        }
                    }
                }
            }
            @if listed.items.is_empty() {
                @let searched = shown.described();
                p.none {
                    @if searched.is_empty() { "No messages yet." } @else { "No messages match " (searched) "." }
                }
            }
            (paging_links(&query, listed))
        }
    };
    page(Some(viewer), "Messages", body)
}

/// "Newer" and "Older" links (`a.prev`, `a.next`) keeping the filters, each shown when there is
/// such a page.
fn paging_links(query: &[(&str, String)], listed: &Listed<Message>) -> Markup {
    let newer = listed.prev_cursor.as_deref().map(|id| {
        let mut query = query.to_vec();
        query.push(("endingBefore", id.to_owned()));
        with_query("/messages", &query, None)
    });
    let older = listed.next_cursor.as_deref().map(|cursor| with_query("/messages", query, Some(cursor)));
    html! {
        @if newer.is_some() || older.is_some() {
            p.paging {
                @if let Some(href) = newer { a.prev href=(href) rel="prev" { "← Newer" } }
                @if let Some(href) = older { a.next href=(href) rel="next" { "Older →" } }
            }
        }
    }
}

/// `GET /messages/new`: the test-send form.
pub(crate) async fn new_form(Signed(viewer): Signed) -> Response {
    send_page(&viewer, &SendRequest::default(), &FormErrors::default()).into_response()
}

/// `POST /messages` (`to`, `subject`, `text`, `html`, `from`): sends as the signed-in key,
/// under its rate limit; 303 to the new message, or the form again with what was wrong.
pub(crate) async fn send(State(state): State<DashboardState>, posted: Posted) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let req = SendRequest {
        to: fields.text("to").map(|t| address_list(&t)),
        cc: fields.text("cc").map(|t| address_list(&t)),
        bcc: fields.text("bcc").map(|t| address_list(&t)),
        from: fields.text("from"),
        subject: fields.text("subject"),
        text: fields.body("text"),
        html: fields.body("html"),
        ..SendRequest::default()
    };
    match send_test(&state, &viewer, req.clone()).await? {
        Ok(id) => Ok(see_other(&format!("/messages/{id}"))),
        Err((status, errors)) => Ok((status, send_page(&viewer, &req, &errors)).into_response()),
    }
}

/// Sends `req` as `viewer`, under the key's send rate: the new message's id, or the status
/// and mistakes to show on the form again (a refusal of another kind is a page of its own).
pub(crate) async fn send_test(
    state: &DashboardState,
    viewer: &Viewer,
    req: SendRequest,
) -> PageResult<Result<MessageId, (StatusCode, FormErrors)>> {
    match state.core.messages().send_rate_limited(&*state.limits, viewer.principal(), req, None).await {
        Ok(Admission::Allowed(sent)) => Ok(Ok(sent.outcome.message.id)),
        Ok(Admission::Limited { retry_after }) => {
            let line = format!("This key's send rate is used up; try again in {} s.", retry_after.seconds);
            Ok(Err((StatusCode::TOO_MANY_REQUESTS, FormErrors::whole(line))))
        }
        Err(Error::Validation { fields } | Error::AllRecipientsSuppressed { fields }) => {
            Ok(Err((StatusCode::UNPROCESSABLE_ENTITY, FormErrors::from_fields(&list_fields(fields)))))
        }
        Err(e @ (Error::DomainNotVerified(_) | Error::DomainNotAllowed { .. })) => {
            let status = PageError::from(e.clone()).status_code();
            Ok(Err((status, FormErrors(vec![(Some("from".to_owned()), e.to_string())]))))
        }
        Err(e @ Error::RecipientSuppressed(_)) => {
            let status = PageError::from(e.clone()).status_code();
            Ok(Err((status, FormErrors(vec![(Some("to".to_owned()), e.to_string())]))))
        }
        Err(e @ (Error::TemplateRender(_) | Error::TemplateSyntax(_))) => {
            Ok(Err((StatusCode::UNPROCESSABLE_ENTITY, FormErrors(vec![(Some("variables".to_owned()), e.to_string())]))))
        }
        Err(e) => Err(e).or_page(viewer),
    }
}

/// A form field of addresses separated by commas (a comma inside a quoted display name or
/// angle brackets is not a separator): one address as a string, several as an array, as
/// the API takes them.
pub(crate) fn address_list(text: &str) -> serde_json::Value {
    let mut items = Vec::new();
    let (mut current, mut quoted, mut bracketed) = (String::new(), false, false);
    for c in text.chars() {
        match c {
            '"' => quoted = !quoted,
            '<' if !quoted => bracketed = true,
            '>' if !quoted => bracketed = false,
            ',' | ';' | '\n' if !quoted && !bracketed => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    items.push(current);
    let items: Vec<serde_json::Value> =
        items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()).map(serde_json::Value::from).collect();
    match <[serde_json::Value; 1]>::try_from(items) {
        Ok([one]) => one,
        Err(many) => serde_json::Value::Array(many),
    }
}

/// `fields` with an entry of a recipient list (`cc[2]`) named as its list (`cc`): the form
/// has one field per list.
fn list_fields(fields: Vec<tidings_core::FieldError>) -> Vec<tidings_core::FieldError> {
    fields
        .into_iter()
        .map(|mut f| {
            if let Some((list, _)) = f.field.split_once('[')
                && matches!(list, "to" | "cc" | "bcc")
            {
                f.message = format!("{}: {}", f.field, f.message);
                f.field = list.to_owned();
            }
            f
        })
        .collect()
}

/// An address list as the form shows it again.
fn list_text(value: Option<&serde_json::Value>) -> String {
    match value {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(serde_json::Value::Array(items)) => {
            items.iter().filter_map(serde_json::Value::as_str).collect::<Vec<_>>().join(", ")
        }
        _ => String::new(),
    }
}

/// The send form, filled with `req` and showing `errors`.
fn send_page(viewer: &Viewer, req: &SendRequest, errors: &FormErrors) -> Markup {
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    let body = html! {
        @if !errors.is_empty() { (error_box(&errors.lines())) }
        section {
            form #send-test method="post" action="/messages" {
                (csrf_field(viewer))
                label for="to" { "To " span.muted { "(one address, or several separated by commas; up to 50 recipients in all)" } }
                input #to type="text" name="to" inputmode="email" autocomplete="off" required value=(list_text(req.to.as_ref()))
                    aria-invalid=[errors.invalid("to")] aria-describedby=[errors.described_by("to", "to")];
                (field_error(errors, "to", "to"))
                label for="cc" { "Cc " span.muted { "(optional)" } }
                input #cc type="text" name="cc" inputmode="email" autocomplete="off" value=(list_text(req.cc.as_ref()))
                    aria-invalid=[errors.invalid("cc")] aria-describedby=[errors.described_by("cc", "cc")];
                (field_error(errors, "cc", "cc"))
                label for="bcc" { "Bcc " span.muted { "(optional: in no header)" } }
                input #bcc type="text" name="bcc" inputmode="email" autocomplete="off" value=(list_text(req.bcc.as_ref()))
                    aria-invalid=[errors.invalid("bcc")] aria-describedby=[errors.described_by("bcc", "bcc")];
                (field_error(errors, "bcc", "bcc"))
                label for="from" { "From " span.muted { "(optional: an address on a verified domain; empty uses the default sender)" } }
                input #from type="text" name="from" autocomplete="off" value=(value(&req.from))
                    aria-invalid=[errors.invalid("from")] aria-describedby=[errors.described_by("from", "from")];
                (field_error(errors, "from", "from"))
                label for="subject" { "Subject" }
                input #subject type="text" name="subject" required value=(value(&req.subject))
                    aria-invalid=[errors.invalid("subject")] aria-describedby=[errors.described_by("subject", "subject")];
                (field_error(errors, "subject", "subject"))
                label for="text" { "Text" }
                textarea #text name="text" aria-invalid=[errors.invalid("text")] aria-describedby=[errors.described_by("text", "text")] { (value(&req.text)) }
                (field_error(errors, "text", "text"))
                label for="html" { "HTML " span.muted { "(optional)" } }
                textarea #html name="html" aria-invalid=[errors.invalid("html")] aria-describedby=[errors.described_by("html", "html")] { (value(&req.html)) }
                (field_error(errors, "html", "html"))
                div.actions { button type="submit" { "Send" } }
            }
        }
    };
    page(Some(viewer), "Send a test email", body)
}
