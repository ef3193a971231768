//! `/webhooks`: the list and the create form (the secret is shown once, on the page that
//! answers the create); an endpoint's page with its deliveries log (response codes and
//! errors, retry where a delivery failed), enable or disable, a test event, secret rotation
//! (the new secret shown once), editing its URL, events and format, and deletion; a delivery's page
//! with the payload sent, the receiver's answer and the message it is about.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::Error;
use tidings_core::ids::{DeliveryId, WebhookId};
use tidings_core::model::{
    DeliveryStatus, EventType, WebhookDelivery, WebhookEndpoint, WebhookEventType, WebhookFormat,
};
use tidings_core::usecases::{CreateWebhookRequest, Listed, UpdateWebhookRequest};

use crate::DashboardState;
use crate::confirm::{Ask, confirmed};
use crate::error::{OrPage, PageResult};
use crate::form::{Fields, Posted};
use crate::layout::{
    FormErrors, action_button, badge, clipped, clipped_link, csrf_field, error_box, field_error, maybe_time, next_link,
    page, status_kind, time,
};
use crate::pages::{PageId, PagePath, list_params, query_pairs};
use crate::session::{Signed, Viewer, see_other};

/// `GET /webhooks`.
pub(crate) async fn list(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let pairs = query_pairs(raw.as_deref());
    let listed = state.core.webhooks().list(viewer.principal(), list_params(&pairs)).await.or_page(&viewer)?;
    Ok(render_list(&viewer, &listed, None).into_response())
}

/// An endpoint form as typed, refused, with what was wrong.
struct Refused {
    url: String,
    event_types: Vec<String>,
    format: String,
    errors: FormErrors,
}

impl Refused {
    /// The form's fields and core's validation errors; another error is a page of its own.
    fn from(fields: &Fields, e: Error, viewer: &Viewer) -> PageResult<(StatusCode, Self)> {
        match e {
            Error::Validation { fields: wrong } => Ok((
                StatusCode::UNPROCESSABLE_ENTITY,
                Self {
                    url: fields.get("url").unwrap_or("").trim().to_owned(),
                    event_types: fields.all("event_types"),
                    format: fields.get("format").unwrap_or("").to_owned(),
                    errors: FormErrors::from_fields(&wrong),
                },
            )),
            other => Err(other).or_page(viewer),
        }
    }
}

/// The URL field, the event checkboxes and the format of an endpoint form, with `url`, the
/// events `checked` and `format` chosen, the wrong ones marked.
fn endpoint_fields(url: &str, checked: impl Fn(EventType) -> bool, format: &str, errors: &FormErrors) -> Markup {
    html! {
        label for="url" { "URL (https)" }
        input #url type="url" name="url" required placeholder="https://hooks.example.com/tidings" autocomplete="off" value=(url)
            aria-invalid=[errors.invalid("url")] aria-describedby=[errors.described_by("url", "url")];
        (field_error(errors, "url", "url"))
        fieldset #event-types aria-describedby=[errors.described_by("eventTypes", "event-types")] {
            legend { "Events" }
            @for t in EventType::ALL {
                label.check for={ "event-" (t.as_str()) } {
                    input id={ "event-" (t.as_str()) } type="checkbox" name="event_types" value=(t.as_str()) checked[checked(t)];
                    (t.as_str())
                }
            }
        }
        (field_error(errors, "eventTypes", "event-types"))
        label for="format" { "Format" }
        select #format name="format" aria-invalid=[errors.invalid("format")] aria-describedby=[errors.described_by("format", "format")] {
            @for f in WebhookFormat::ALL {
                option value=(f.as_str()) selected[f.as_str() == format] { (format_label(f)) }
            }
        }
        (field_error(errors, "format", "format"))
        p.muted { "Resend and Postmark formats send the events those services have; the others are not sent to this endpoint." }
    }
}

/// How the format select names a format.
fn format_label(format: WebhookFormat) -> &'static str {
    match format {
        WebhookFormat::Tidings => "tidings: Tidings events, Standard Webhooks signature",
        WebhookFormat::Resend => "resend: Resend's events, svix signature",
        WebhookFormat::Postmark => "postmark: Postmark's RecordType payloads",
    }
}

/// The header that carries a delivery's id to an endpoint in `format`.
fn id_header(format: WebhookFormat) -> &'static str {
    match format {
        WebhookFormat::Resend => "svix-id",
        WebhookFormat::Tidings | WebhookFormat::Postmark => "webhook-id",
    }
}

fn state_badge(w: &WebhookEndpoint) -> Markup {
    if !w.enabled {
        badge("disabled", "bad")
    } else if w.failing_since.is_some() {
        badge("failing", "wait")
    } else {
        badge("enabled", "ok")
    }
}

fn event_names(w: &WebhookEndpoint) -> String {
    w.event_types.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
}

fn render_list(viewer: &Viewer, listed: &Listed<WebhookEndpoint>, refused: Option<&Refused>) -> Markup {
    let body = html! {
        div.scroll {
            table.fixed #webhooks {
                thead { tr { th { "URL" } th.hide-narrow { "Events" } th.w-status { "State" } } }
                tbody {
                    @for w in &listed.items {
                        tr data-id=(w.id) {
                            td.mono.clip-cell data-label="URL" { (clipped_link(&format!("/webhooks/{}", w.id), w.url.as_str())) }
                            td.hide-narrow.clip-cell data-label="Events" { (clipped(&event_names(w))) }
                            td data-label="State" { (state_badge(w)) }
                        }
                    }
                }
            }
        }
        @if listed.items.is_empty() { p.none { "No webhook endpoints yet." } }
        (next_link("/webhooks", &[], listed.next_cursor.as_deref()))
        h2 { "New endpoint" }
        @if let Some(refused) = refused { (error_box(&refused.errors.lines())) }
        section {
            form #create-webhook method="post" action="/webhooks" {
                (csrf_field(viewer))
                @match refused {
                    Some(r) => (endpoint_fields(&r.url, |t| r.event_types.iter().any(|e| e == t.as_str()), &r.format, &r.errors)),
                    None => (endpoint_fields("", |t| matches!(t, EventType::Delivered | EventType::Bounced | EventType::Complained), WebhookFormat::Tidings.as_str(), &FormErrors::default())),
                }
                div.actions { button type="submit" { "Create" } }
            }
        }
    };
    page(Some(viewer), "Webhooks", body)
}

/// The box that shows a signing secret once.
fn secret_box(title: &str, secret: &str) -> Markup {
    html! {
        div.notice #new-secret-box role="status" {
            p { strong { (title) } " Copy it now: it is not shown again." }
            code.secret #new-secret { (secret) }
            button.copy type="button" data-copy=(secret) hidden { "Copy" }
        }
    }
}

/// `POST /webhooks` (`url`, `event_types`, `format`): the new endpoint's page with its secret, once.
pub(crate) async fn create(State(state): State<DashboardState>, posted: Posted) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let req = CreateWebhookRequest {
        url: fields.text("url"),
        event_types: Some(fields.all("event_types")),
        enabled: Some(true),
        format: fields.text("format"),
    };
    let endpoint = match state.core.webhooks().create(viewer.principal(), req).await {
        Ok(endpoint) => endpoint,
        Err(e) => {
            let (status, refused) = Refused::from(&fields, e, &viewer)?;
            let listed = state.core.webhooks().list(viewer.principal(), Default::default()).await.or_page(&viewer)?;
            return Ok((status, render_list(&viewer, &listed, Some(&refused))).into_response());
        }
    };
    let deliveries = Listed { items: Vec::new(), limit: 50, has_more: false, next_cursor: None, prev_cursor: None };
    let shown = secret_box("The endpoint's signing secret.", endpoint.secret.expose());
    Ok((StatusCode::OK, render(&viewer, &endpoint, &deliveries, Some(shown), None)).into_response())
}

/// `GET /webhooks/{id}?cursor`.
pub(crate) async fn show(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<WebhookId>,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let pairs = query_pairs(raw.as_deref());
    let who = viewer.principal();
    let endpoint = state.core.webhooks().get(who, id).await.or_page(&viewer)?;
    let deliveries = state.core.webhooks().deliveries(who, id, list_params(&pairs)).await.or_page(&viewer)?;
    Ok(render(&viewer, &endpoint, &deliveries, None, None).into_response())
}

fn render(
    viewer: &Viewer,
    w: &WebhookEndpoint,
    deliveries: &Listed<WebhookDelivery>,
    secret: Option<Markup>,
    refused: Option<&Refused>,
) -> Markup {
    let id = w.id.to_string();
    let body = html! {
        @if let Some(secret) = secret { (secret) }
        section {
            dl.fields {
                dt { "URL" } dd.mono #webhook-url { (w.url.as_str()) }
                dt { "State" } dd #webhook-state data-enabled=(w.enabled) { (state_badge(w)) }
                @if let Some(reason) = &w.disabled_reason { dt { "Disabled because" } dd { (reason) } }
                @if w.failing_since.is_some() { dt { "Failing since" } dd { (maybe_time(w.failing_since)) } }
                dt { "Events" } dd { (event_names(w)) }
                dt { "Format" } dd #webhook-format { (w.format.as_str()) }
                dt { "Created" } dd { (time(w.created_at)) }
            }
            div.actions {
                @if w.enabled {
                    (action_button(viewer, &format!("/webhooks/{id}/disable"), "action disable", "Disable"))
                } @else {
                    (action_button(viewer, &format!("/webhooks/{id}/enable"), "action enable", "Enable"))
                }
                (action_button(viewer, &format!("/webhooks/{id}/test"), "action test", "Send a test event"))
                form.action.danger #rotate method="post" action={ "/webhooks/" (id) "/rotate" }
                    data-confirm="Rotate the secret? The old one keeps signing for 24 hours." {
                    (csrf_field(viewer))
                    button type="submit" { "Rotate the secret" }
                }
            }
        }
        h2 { "Deliveries" }
        div.scroll {
            table.fixed #deliveries {
                thead { tr {
                    th.w-date { "Created" } th { "Event" } th.w-status { "Status" } th.w-num { "Attempts" } th.w-num { "Response" }
                    th.hide-narrow { "Error" } th.hide-narrow.w-date { "Next attempt" } th.w-act { span.visually-hidden { "Action" } }
                } }
                tbody {
                    @for d in &deliveries.items {
                        tr data-id=(d.id) data-status=(d.status.to_string()) {
                            td data-label="Created" { a href={ "/webhooks/" (id) "/deliveries/" (d.id) } { (time(d.created_at)) } }
                            td.clip-cell data-label="Event" { (clipped(event_word(d.event_type))) }
                            td data-label="Status" { (badge(&d.status.to_string(), status_kind(&d.status.to_string()))) }
                            td data-label="Attempts" { (d.attempts) }
                            td.response-code data-label="Response" { @if let Some(code) = d.response_code { (code) } @else { span.none { "—" } } }
                            td.hide-narrow.last-error.clip-cell data-label="Error" { @if let Some(e) = &d.last_error { span.mono.clip title=(e) { (e) } } }
                            td.hide-narrow data-label="Next attempt" { (maybe_time(d.next_attempt_at)) }
                            td.act {
                                @if retryable(d.status) {
                                    (action_button(viewer, &format!("/webhooks/{id}/deliveries/{}/retry", d.id), "action retry", "Retry"))
                                }
                            }
                        }
                    }
                }
            }
        }
        @if deliveries.items.is_empty() { p.none { "No deliveries yet." } }
        (next_link(&format!("/webhooks/{id}"), &[], deliveries.next_cursor.as_deref()))
        h2 #edit { "Edit" }
        @if let Some(refused) = refused { (error_box(&refused.errors.lines())) }
        section {
            form #edit-webhook method="post" action={ "/webhooks/" (id) "/edit" } {
                (csrf_field(viewer))
                @match refused {
                    Some(r) => (endpoint_fields(&r.url, |t| r.event_types.iter().any(|e| e == t.as_str()), &r.format, &r.errors)),
                    None => (endpoint_fields(w.url.as_str(), |t| w.event_types.iter().any(|e| e.as_str() == t.as_str()), w.format.as_str(), &FormErrors::default())),
                }
                div.actions { button type="submit" { "Save" } }
            }
        }
        h2 { "Delete" }
        section {
            form.danger #delete-webhook method="post" action={ "/webhooks/" (id) "/delete" }
                data-confirm={ "Delete the endpoint " (w.url.as_str()) "? Its delivery log goes with it." } {
                (csrf_field(viewer))
                p { "Deleting the endpoint stops its deliveries and removes its log." }
                button type="submit" { "Delete this endpoint" }
            }
        }
    };
    page(Some(viewer), "Webhook endpoint", body)
}

fn event_word(t: WebhookEventType) -> &'static str {
    t.as_str()
}

/// Whether a delivery is offered a retry: one that has failed (given up, or failing and
/// waiting for its next attempt). One delivered, or not attempted yet, has nothing to retry.
fn retryable(status: DeliveryStatus) -> bool {
    matches!(status, DeliveryStatus::Failed | DeliveryStatus::Retrying)
}

/// `GET /webhooks/{id}/deliveries/{delivery_id}`: one delivery, with the payload and the
/// receiver's last answer.
pub(crate) async fn delivery(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PagePath((id, delivery_id)): PagePath<(String, String)>,
) -> PageResult<Response> {
    let (id, delivery_id) = (WebhookId::parse_or_none(&id), DeliveryId::parse_or_none(&delivery_id));
    let who = viewer.principal();
    let endpoint = state.core.webhooks().get(who, id).await.or_page(&viewer)?;
    let d = state.core.webhooks().delivery(who, id, delivery_id).await.or_page(&viewer)?;
    let payload = serde_json::from_str::<serde_json::Value>(&d.payload)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| d.payload.clone());
    let status = d.status.to_string();
    let body = html! {
        section {
            dl.fields {
                dt { "Endpoint" } dd.mono { a href={ "/webhooks/" (endpoint.id) } { (endpoint.url.as_str()) } }
                dt { "Delivery id" } dd.mono { (d.id) " " span.muted { "(the " (id_header(endpoint.format)) " header)" } }
                dt { "Event" } dd { (event_word(d.event_type)) }
                dt { "Status" } dd #delivery-status data-status=(status) { (badge(&status, status_kind(&status))) }
                dt { "Attempts" } dd { (d.attempts) }
                dt { "Response" } dd #delivery-response { @if let Some(code) = d.response_code { "HTTP " (code) } @else { span.none { "none yet" } } }
                @if let Some(e) = &d.last_error {
                    dt { "Last error" } dd { pre #delivery-error { (e) } }
                }
                @if let Some(body) = &d.response_body {
                    dt { "Response body" } dd { pre #delivery-response-body { (body) } }
                }
                dt { "Next attempt" } dd { (maybe_time(d.next_attempt_at)) }
                dt { "Created" } dd { (time(d.created_at)) }
                @if let Some(m) = d.message_id {
                    dt { "Message" } dd.mono { a #delivery-message href={ "/messages/" (m) } { (m) } }
                }
            }
            @if retryable(d.status) {
                div.actions {
                    (action_button(&viewer, &format!("/webhooks/{}/deliveries/{}/retry", endpoint.id, d.id), "action retry", "Retry"))
                }
            }
        }
        h2 { "Payload" }
        p.muted { "The JSON body as signed and sent; every retry sends the same bytes." }
        pre #delivery-payload { (payload) }
        button.copy type="button" data-copy=(d.payload) hidden { "Copy the payload" }
    };
    Ok(page(Some(&viewer), "Webhook delivery", body).into_response())
}

/// `POST /webhooks/{id}/edit` (`url`, `event_types`, `format`): 303 back, or the page with the form
/// again and what was wrong.
pub(crate) async fn edit(
    State(state): State<DashboardState>,
    PageId(id): PageId<WebhookId>,
    posted: Posted,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let req = UpdateWebhookRequest {
        url: fields.text("url"),
        event_types: Some(fields.all("event_types")),
        enabled: None,
        format: fields.text("format"),
    };
    match state.core.webhooks().update(viewer.principal(), id, req).await {
        Ok(endpoint) => Ok(see_other(&format!("/webhooks/{}", endpoint.id))),
        Err(e) => {
            let (status, refused) = Refused::from(&fields, e, &viewer)?;
            let who = viewer.principal();
            let endpoint = state.core.webhooks().get(who, id).await.or_page(&viewer)?;
            let deliveries = state.core.webhooks().deliveries(who, id, Default::default()).await.or_page(&viewer)?;
            Ok((status, render(&viewer, &endpoint, &deliveries, None, Some(&refused))).into_response())
        }
    }
}

/// `POST /webhooks/{id}/delete` (`confirm=yes`; without it, the confirmation page): 303 to
/// the list.
pub(crate) async fn delete(
    State(state): State<DashboardState>,
    PageId(id): PageId<WebhookId>,
    posted: Posted,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    if !confirmed(&fields) {
        let endpoint = state.core.webhooks().get(viewer.principal(), id).await.or_page(&viewer)?;
        let (action, back) = (format!("/webhooks/{}/delete", endpoint.id), format!("/webhooks/{}", endpoint.id));
        let question = format!("Delete the endpoint {}? Its delivery log goes with it.", endpoint.url.as_str());
        return Ok(Ask { action: &action, question, yes: "Delete the endpoint", back: &back }.page(&viewer));
    }
    state.core.webhooks().delete(viewer.principal(), id).await.or_page(&viewer)?;
    Ok(see_other("/webhooks"))
}

/// Sets `enabled` through the update use case; 303 back.
async fn set_enabled(state: DashboardState, id: WebhookId, posted: Posted, enabled: bool) -> PageResult<Response> {
    let req = UpdateWebhookRequest { enabled: Some(enabled), ..UpdateWebhookRequest::default() };
    let endpoint = state.core.webhooks().update(posted.viewer.principal(), id, req).await.or_page(&posted.viewer)?;
    Ok(see_other(&format!("/webhooks/{}", endpoint.id)))
}

/// `POST /webhooks/{id}/enable`.
pub(crate) async fn enable(
    State(state): State<DashboardState>,
    PageId(id): PageId<WebhookId>,
    posted: Posted,
) -> PageResult<Response> {
    set_enabled(state, id, posted, true).await
}

/// `POST /webhooks/{id}/disable`.
pub(crate) async fn disable(
    State(state): State<DashboardState>,
    PageId(id): PageId<WebhookId>,
    posted: Posted,
) -> PageResult<Response> {
    set_enabled(state, id, posted, false).await
}

/// `POST /webhooks/{id}/rotate`: the endpoint's page with the new secret, once.
pub(crate) async fn rotate(
    State(state): State<DashboardState>,
    PageId(id): PageId<WebhookId>,
    posted: Posted,
) -> PageResult<Response> {
    let Posted { viewer, .. } = posted;
    let who = viewer.principal();
    let endpoint = state.core.webhooks().rotate_secret(who, id).await.or_page(&viewer)?;
    let deliveries = state.core.webhooks().deliveries(who, id, Default::default()).await.or_page(&viewer)?;
    let shown = secret_box(
        "The new signing secret. The old one keeps signing beside it for 24 hours.",
        endpoint.secret.expose(),
    );
    Ok(render(&viewer, &endpoint, &deliveries, Some(shown), None).into_response())
}

/// `POST /webhooks/{id}/test`: queues a `Test` event; 303 back.
pub(crate) async fn test(
    State(state): State<DashboardState>,
    PageId(id): PageId<WebhookId>,
    posted: Posted,
) -> PageResult<Response> {
    let delivery = state.core.webhooks().test(posted.viewer.principal(), id).await.or_page(&posted.viewer)?;
    Ok(see_other(&format!("/webhooks/{}", delivery.endpoint_id)))
}

/// `POST /webhooks/{id}/deliveries/{delivery_id}/retry`: 303 back.
pub(crate) async fn retry(
    State(state): State<DashboardState>,
    PagePath((id, delivery_id)): PagePath<(String, String)>,
    posted: Posted,
) -> PageResult<Response> {
    let delivery = state
        .core
        .webhooks()
        .retry_delivery(
            posted.viewer.principal(),
            WebhookId::parse_or_none(&id),
            DeliveryId::parse_or_none(&delivery_id),
        )
        .await
        .or_page(&posted.viewer)?;
    Ok(see_other(&format!("/webhooks/{}", delivery.endpoint_id)))
}
