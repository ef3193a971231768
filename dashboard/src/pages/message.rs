//! One message: `GET /messages/{id}` (fields, timeline, preview, text, headers, `.eml`
//! link, cancel and reschedule), `GET /messages/{id}/html` (the document the preview iframe
//! shows), `GET /messages/{id}/eml` and the two POSTs.
//!
//! The HTML a message carries is hostile until proven otherwise: it is served only as its
//! own document, framed by the message page in `<iframe sandbox>` (no script, no origin, no
//! forms, no popups) and with a policy ([`crate::MESSAGE_HTML_CSP`]) that repeats the
//! sandbox and lets nothing load but `data:` images, remote images only once the person
//! asks (`?images=1`). It is the HTML as the message was accepted, less the elements that
//! connect out by themselves (`<link>`, `<meta http-equiv>`, `<noscript>`: `crate::preview`):
//! open and click tracking are added only when a message is built for the wire, so the open
//! pixel is never in it.

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::email::Mailbox;
use tidings_core::ids::MessageId;
use tidings_core::model::{
    BounceType, CertificateCheck, ConnectionTls, EventDetails, Message, MessageEvent, MessageStatus, RecipientKind,
    Suppression, WebhookDelivery,
};
use tidings_core::usecases::{ListParams, MESSAGE_DELIVERIES_SHOWN, MessageChange, MessageSource, Named};

use crate::DashboardState;
use crate::confirm::{Ask, confirmed};
use crate::error::{OrPage, PageError, PageResult};
use crate::form::Posted;
use crate::held_body::{self, busy, owner};
use crate::layout::{badge, csrf_field, danger_button, page, status_kind, time, with_query};
use crate::pages::{PageId, query_pairs, query_value};
use crate::session::{Signed, Viewer, see_other};

/// Most timeline events the page shows.
const TIMELINE_LIMIT: i64 = 200;

/// `GET /messages/{id}` (`?images=1` loads remote images in the preview).
pub(crate) async fn show(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<MessageId>,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let who = viewer.principal();
    let message = state.core.messages().get(who, id).await.or_page(&viewer)?;
    let params = ListParams { limit: Some(TIMELINE_LIMIT), cursor: None };
    let events = state.core.messages().events(who, id, params).await.or_page(&viewer)?;
    let images = query_value(&query_pairs(raw.as_deref()), "images").as_deref() == Some("1");
    let eml = match state.config.outbox.as_ref().and_then(|outbox| outbox.path_for(&message)) {
        Some(path) => tokio::fs::try_exists(path).await.unwrap_or(false),
        None => false,
    };
    let source = source_of(&state, &viewer, &message).await?;
    let suppressions = caused_suppressions(&state, &viewer, &message).await;
    // A `send` key reads no webhooks: the section is left out for it.
    let deliveries = state.core.webhooks().message_deliveries(who, id).await.ok();
    let view = View {
        message: &message,
        events: &events.items,
        more_events: events.has_more,
        images,
        eml,
        source: &source,
        suppressions: &suppressions,
        deliveries: deliveries.as_deref(),
    };
    Ok(render(&viewer, &view).into_response())
}

/// Largest source shown inline on the page; a larger one is a link to `/source`.
const INLINE_SOURCE_BYTES: usize = 256 * 1024;

/// What the page says about the source.
pub(crate) enum SourceView {
    /// Built: the header block as it went out (unfolded, in order), the whole source when it
    /// is small enough to show inline, its size, and whose copy it is.
    Shown { headers: Vec<(String, String)>, raw: Option<String>, bytes: usize, copy_of: Option<String> },
    /// Not built, and why (in words).
    Missing(&'static str),
}

/// Bytes a rebuild of `message` may hold at once: its content, the MIME encoding of it
/// (base64 grows attachments by a third) and the headers.
fn rebuild_estimate(message: &Message) -> usize {
    let bodies = message.html.as_ref().map_or(0, String::len) + message.text.as_ref().map_or(0, String::len);
    let files: usize = message.extras.attachments.iter().map(|a| a.encoded_len()).sum();
    2 * bodies + 2 * files + 16 * 1024
}

/// The source of `message` for the page, built under the workspace's share of the memory
/// budget (a page of a large message is a rebuild of it).
async fn source_of(state: &DashboardState, viewer: &Viewer, message: &Message) -> PageResult<SourceView> {
    let Ok(_claim) = state.budget.hold(owner(viewer), rebuild_estimate(message)) else {
        return Ok(SourceView::Missing(
            "The source is not shown now: too many large pages of this workspace are being built. Reload in a moment.",
        ));
    };
    let built = state.core.messages().source(viewer.principal(), message.id).await.or_page(viewer)?;
    Ok(match built {
        MessageSource::Built { raw, copy_of } => SourceView::Shown {
            headers: header_block(&raw),
            bytes: raw.len(),
            raw: (raw.len() <= INLINE_SOURCE_BYTES).then(|| String::from_utf8_lossy(&raw).into_owned()),
            copy_of: copy_of.map(|a| a.to_string()),
        },
        MessageSource::ContentRemoved => {
            SourceView::Missing("Its content was removed by retention: the source cannot be rebuilt.")
        }
        MessageSource::DomainDeleted => {
            SourceView::Missing("Its sending domain was deleted: the source cannot be rebuilt.")
        }
        MessageSource::Unbuildable(_) => {
            SourceView::Missing("This message cannot be built (it could not be sent either: see the timeline).")
        }
    })
}

/// The header fields of a message (up to the blank line), each unfolded, in order.
fn header_block(raw: &[u8]) -> Vec<(String, String)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(raw.len());
    let text = String::from_utf8_lossy(&raw[..end]);
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in text.split("\r\n") {
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = fields.last_mut() {
                value.push(' ');
                value.push_str(line.trim_start());
            }
        } else if let Some((name, value)) = line.split_once(':') {
            fields.push((name.to_owned(), value.trim_start().to_owned()));
        }
    }
    fields
}

/// The suppressions this message caused: its hard-bounced and complained recipients whose
/// entry names it. Only a key that may read suppressions sees them.
async fn caused_suppressions(state: &DashboardState, viewer: &Viewer, message: &Message) -> Vec<Suppression> {
    let mut found = Vec::new();
    for r in message.recipient_list().iter() {
        let caused = matches!(r.status, MessageStatus::Complained)
            || (r.status == MessageStatus::Bounced && r.bounce_type == Some(BounceType::Hard));
        if !caused {
            continue;
        }
        if let Ok(entry) = state.core.suppressions().get(viewer.principal(), Named::Parsed(r.email.clone())).await
            && entry.message_id == Some(message.id)
        {
            found.push(entry);
        }
    }
    found
}

/// What the message page shows.
pub(crate) struct View<'a> {
    /// The message.
    pub(crate) message: &'a Message,
    /// Its timeline, oldest first.
    pub(crate) events: &'a [MessageEvent],
    /// Whether the timeline goes on past what is shown.
    pub(crate) more_events: bool,
    /// Whether the preview loads remote images.
    pub(crate) images: bool,
    /// Whether its `.eml` is in the outbox.
    pub(crate) eml: bool,
    /// Its source as built for sending.
    pub(crate) source: &'a SourceView,
    /// The suppressions it caused.
    pub(crate) suppressions: &'a [Suppression],
    /// The webhook deliveries its events caused, newest first (`None`: the key may not see them).
    pub(crate) deliveries: Option<&'a [WebhookDelivery]>,
}

/// The message page.
pub(crate) fn render(viewer: &Viewer, view: &View<'_>) -> Markup {
    let m = view.message;
    let status = m.status.as_str();
    let id = m.id.to_string();
    let body = html! {
        section {
            dl.fields {
                dt { "Status" } dd {
                    span #status data-status=(status) { (badge(status, status_kind(status))) }
                    @if in_flight(m.status) {
                        // While it is in flight the script watches for new events.
                        " " span #live data-watch={ "/messages/" (id) "/progress" } data-last-event=(m.last_event_id) hidden { "Watching for changes…" }
                    }
                }
                dt { "Id" } dd.mono { (id) " " (copy_button(&id, "Copy the message id")) }
                @if let Some(pmid) = &m.provider_message_id {
                    dt { "Message-ID" } dd.mono { "<" (pmid) "> " (copy_button(&format!("<{pmid}>"), "Copy the Message-ID")) }
                }
                dt { "To" } dd.mono { (m.to_field()) " " (copy_button(&m.to_field(), "Copy the recipients")) }
                @let cc = m.mailboxes_of(RecipientKind::Cc);
                @if !cc.is_empty() { dt { "Cc" } dd.mono { (joined(&cc)) } }
                @let bcc = m.mailboxes_of(RecipientKind::Bcc);
                @if !bcc.is_empty() { dt { "Bcc" } dd.mono { (joined(&bcc)) } }
                dt { "From" } dd.mono { (m.from.to_string()) }
                dt { "Subject" } dd #subject { (m.subject) }
                dt { "Created" } dd { (time(m.created_at)) }
                @if let Some(at) = m.scheduled_at { dt { "Scheduled for" } dd { (time(at)) } }
                dt { "Attempts" } dd { (m.attempts) }
                @if let Some(bounce) = m.bounce_type { dt { "Bounce" } dd { (format!("{bounce:?}")) } }
                @if let Some(version) = m.template_version_id { dt { "Template version" } dd.mono { (version) } }
                dt { "Tracking" } dd { "opens " (on_off(m.tracking.opens)) ", clicks " (on_off(m.tracking.clicks)) }
                @if !m.extras.tags.is_empty() {
                    dt { "Tags" }
                    dd #tags { @for tag in &m.extras.tags { code { (tag.name()) @if !tag.value().is_empty() { ":" (tag.value()) } } " " } }
                }
                @if !m.extras.metadata.is_empty() {
                    dt { "Metadata" }
                    dd { table #metadata { @for (key, value) in m.extras.metadata.iter() { tr { th.mono { (key) } td.mono { (value) } } } } }
                }
                @if !m.extras.attachments.is_empty() {
                    dt { "Attachments" }
                    dd { ul { @for a in &m.extras.attachments {
                        li { (a.filename()) " " span.muted { (a.content_type()) ", " (a.size()) " bytes"
                            @if let Some(cid) = a.content_id() { ", inline as cid:" (cid) } } }
                    } } }
                }
            }
            div.actions {
                @if view.eml {
                    a #eml href={ "/messages/" (id) "/eml" } download={ (id) ".eml" } { "Download the signed .eml" }
                }
            }
        }
        @if m.has_recipient_list() {
            h2 { "Recipients" }
            div.scroll {
                table #recipients {
                    thead { tr { th { "Recipient" } th { "Type" } th { "Status" } th { "Attempts" } th { "Updated" } } }
                    tbody {
                        @for r in m.recipient_list().iter() {
                            tr data-recipient=(r.email) {
                                td.mono { (r.mailbox().to_string()) }
                                td { (r.kind.as_str()) }
                                td { (badge(r.status.as_str(), status_kind(r.status.as_str()))) }
                                td { (r.attempts) }
                                td { (time(r.updated_at)) }
                            }
                        }
                    }
                }
            }
        }
        @if !view.suppressions.is_empty() {
            h2 { "Suppressions it caused" }
            ul #caused-suppressions {
                @for entry in view.suppressions {
                    li {
                        a href=(with_query("/suppressions", &[("email", entry.email.to_string())], None)) { (entry.email.to_string()) }
                        " " (format!("{:?}", entry.reason)) ", " (time(entry.created_at))
                    }
                }
            }
        }
        @if m.status.is_cancelable() {
            h2 { "Cancel or reschedule" }
            section #schedule {
                p { "Not attempted yet: it can still be canceled, or sent at another time." }
                (danger_button(viewer, &format!("/messages/{id}/cancel"), "action cancel", "Cancel this message",
                    "Cancel this message? It will not be sent."))
                form #reschedule method="post" action={ "/messages/" (id) "/reschedule" } {
                    (csrf_field(viewer))
                    label for="send_at" { "Send at (UTC; empty: now)" }
                    input #send_at type="datetime-local" name="send_at" step="1";
                    div.actions { button type="submit" { "Reschedule" } }
                }
            }
        }
        h2 { "Timeline" }
        ol #timeline {
            @for event in view.events {
                li data-event=(event.event_type.as_str()) {
                    (time(event.occurred_at)) " " strong { (event.event_type.as_str()) }
                    @if let Some(recipient) = &event.recipient { " " span.mono.recipient { (recipient.to_string()) } }
                    (details(&event.details))
                }
            }
        }
        @if view.events.is_empty() { p.none { "No events (the timeline may have been purged by retention)." } }
        @if let Some(deliveries) = view.deliveries {
            h2 { "Webhook deliveries" }
            @if deliveries.is_empty() {
                p.none #webhook-deliveries { "None: no endpoint was subscribed to its events." }
            } @else {
                div.scroll {
                    table #webhook-deliveries {
                        thead { tr { th { "Event" } th { "Status" } th { "Attempts" } th { "Response" } th { "Queued" } } }
                        tbody {
                            @for d in deliveries {
                                tr data-delivery=(d.id) {
                                    td data-label="Event" {
                                        a href={ "/webhooks/" (d.endpoint_id) "/deliveries/" (d.id) } { (d.event_type.as_str()) }
                                    }
                                    td data-label="Status" { (badge(&d.status.to_string(), status_kind(&d.status.to_string()))) }
                                    td data-label="Attempts" { (d.attempts) }
                                    td data-label="Response" { @if let Some(code) = d.response_code { (code) } @else { "—" } }
                                    td data-label="Queued" { (time(d.created_at)) }
                                }
                            }
                        }
                    }
                }
                @if deliveries.len() >= MESSAGE_DELIVERIES_SHOWN { p.muted { "Only the newest " (MESSAGE_DELIVERIES_SHOWN) " are shown." } }
            }
        }
        @if view.more_events { p.muted { "Only the first " (TIMELINE_LIMIT) " events are shown." } }
        h2 { "HTML" }
        @if m.html.is_some() {
            (crate::preview::frame(&format!("/messages/{id}"), view.images))
        } @else {
            p.none { "This message has no HTML part." }
        }
        h2 { "Text" }
        @match text_part(m) {
            TextPart::Sent(text) => pre #text-body { (text) },
            TextPart::Generated(text) => {
                p.muted #text-generated { "Generated from the HTML when it was sent, as the recipient got it:" }
                pre #text-body { (text) }
            }
            TextPart::None(why) => p.none #text-body { (why) },
        }
        h2 { "Headers" }
        @match view.source {
            SourceView::Shown { headers, raw, bytes, copy_of } => {
                p.muted {
                    "As they went out, less the DKIM-Signature headers each attempt adds and the Return-Path the receiver writes."
                    @if let Some(copy_of) = copy_of { " Each recipient's copy has its own tracking links: this is " (copy_of) "'s." }
                }
                div.scroll {
                    table #headers {
                        @for (name, value) in headers { tr { th.mono { (name) } td.mono { (value) } } }
                    }
                }
                h2 { "Source" }
                @match raw {
                    Some(raw) => {
                        details #source-details {
                            summary { "The whole message (" (kilobytes(*bytes)) ")" }
                            div.actions {
                                button.copy type="button" data-copy-from="#source" hidden aria-label="Copy the source" { "Copy" }
                                " " a href={ "/messages/" (id) "/source" } { "Open as text" }
                            }
                            pre #source { (raw) }
                        }
                    }
                    None => p #source-link {
                        (kilobytes(*bytes)) ", too large to show here: "
                        a href={ "/messages/" (id) "/source" } { "open the source as text" }
                    },
                }
            }
            SourceView::Missing(why) => p.none #headers { (why) },
        }
    };
    // The subject names the page (the tab, the history), as in a mail program.
    let title = if m.subject.is_empty() { "(no subject)" } else { m.subject.as_str() };
    page(Some(viewer), title, body)
}

/// The text part as it went out (docs/api.md#sending): the send's own; generated from the
/// HTML when the send gave none, the same function the MIME builder uses; or none, and why.
enum TextPart<'m> {
    Sent(&'m str),
    Generated(String),
    None(&'static str),
}

fn text_part(m: &Message) -> TextPart<'_> {
    match (&m.text, &m.html) {
        (Some(text), Some(_)) if text.is_empty() => TextPart::None("No text part: the send asked for the HTML alone."),
        (Some(text), _) => TextPart::Sent(text),
        (None, Some(html)) => match tidings_core::outbound::html_text::text_from_html(html) {
            Some(text) => TextPart::Generated(text),
            None => TextPart::None("No text part: the HTML shows no text."),
        },
        (None, None) => {
            TextPart::None("This message has no text part (its content may have been removed by retention).")
        }
    }
}

/// Whether the page watches the message for changes: it waits for an attempt or is in one.
/// (A delivered message can still be opened or complained about, but not soon enough to
/// keep a page polling for it.)
fn in_flight(status: MessageStatus) -> bool {
    matches!(status, MessageStatus::Queued | MessageStatus::Scheduled | MessageStatus::Sent | MessageStatus::Deferred)
}

/// A button that copies `text` (shown by the script; without it there is nothing to click).
fn copy_button(text: &str, label: &str) -> Markup {
    html! { button.copy type="button" data-copy=(text) hidden aria-label=(label) { "Copy" } }
}

/// A size in kilobytes (or bytes, under one).
fn kilobytes(bytes: usize) -> String {
    if bytes < 1024 { format!("{bytes} bytes") } else { format!("{} KB", bytes.div_ceil(1024)) }
}

/// Mailboxes as a header lists them.
fn joined(mailboxes: &[Mailbox]) -> String {
    mailboxes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// What an event's details hold, in words.
fn details(d: &EventDetails) -> Markup {
    html! {
        @if d.smtp_code.is_some() || d.enhanced_code.is_some() || d.response.is_some() {
            " " span.mono {
                @if let Some(code) = d.smtp_code { (code) " " }
                @if let Some(code) = &d.enhanced_code { (code) " " }
                @if let Some(response) = &d.response { (response) }
            }
        }
        @if let Some(attempt) = d.attempt { " · attempt " (attempt) }
        @if let Some(next) = d.next_attempt_at { " · next attempt " (time(next)) }
        @if let Some(bounce) = d.bounce_type { " · " (format!("{bounce:?}")) " bounce" }
        @if let Some(at) = d.scheduled_at { " · send at " (time(at)) }
        @if let Some(url) = &d.url { " · " span.mono { (url) } }
        @if let Some(agent) = &d.user_agent { " · " span.muted { (agent) } }
        @if let Some(tls) = &d.tls { " · " span.tls { (connection_tls(tls)) } }
    }
}

/// How the connection that delivered the message was secured, in words: the TLS version
/// when it is known (`TLSv1.3, certificate verified`), else `TLS`.
fn connection_tls(tls: &ConnectionTls) -> String {
    let (certificate, version) = match tls {
        ConnectionTls::Plaintext => return "no TLS (plaintext)".to_owned(),
        ConnectionTls::Tls { certificate, version } => (certificate, version),
    };
    let protocol = version.map_or("TLS", |v| v.as_str());
    match certificate {
        CertificateCheck::Verified => format!("{protocol}, certificate verified"),
        CertificateCheck::NotVerified => format!("{protocol}, certificate not verified"),
        CertificateCheck::Invalid(reason) => format!("{protocol}, certificate invalid: {reason}"),
    }
}

/// `GET /messages/{id}/html`: the message's HTML as a document of its own, sandboxed and
/// under [`MESSAGE_HTML_CSP`](crate::MESSAGE_HTML_CSP) (or
/// [`MESSAGE_HTML_IMAGES_CSP`](crate::MESSAGE_HTML_IMAGES_CSP) with `?images=1`): the
/// frame's document ([`crate::preview::framed_document`]).
pub(crate) async fn html(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<MessageId>,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let message = state.core.messages().get(viewer.principal(), id).await.or_page(&viewer)?;
    let images = query_value(&query_pairs(raw.as_deref()), "images").as_deref() == Some("1");
    crate::preview::framed_document(&state, &viewer, message.html.as_deref().unwrap_or_default(), images)
}

/// `GET /messages/{id}/eml`: the signed message as the outbox transport wrote it. The file
/// is named from the stored message, never from the request. It is streamed from the file a
/// chunk at a time, each stream holding [`held_body::FILE_STREAM_BYTES`] of the workspace's
/// share of the budget (it used to be read whole, per request).
pub(crate) async fn eml(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<MessageId>,
) -> PageResult<Response> {
    let message = state.core.messages().get(viewer.principal(), id).await.or_page(&viewer)?;
    let not_there = || {
        PageError::status(StatusCode::NOT_FOUND, "Not found", "This message has no .eml file in the outbox.")
            .with_viewer(&viewer)
    };
    let path = state.config.outbox.as_ref().and_then(|o| o.path_for(&message)).ok_or_else(not_there)?;
    let claim = state.budget.hold(owner(&viewer), held_body::FILE_STREAM_BYTES).map_err(|_| busy(&viewer))?;
    let file = tokio::fs::File::open(&path).await.map_err(|_| not_there())?;
    let mut response = held_body::file(file, claim).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("message/rfc822"));
    let disposition = format!("attachment; filename=\"{}.eml\"", message.id);
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// `GET /messages/{id}/source`: the message as it was built for sending ([`MessageSource`]),
/// as text. The rebuild and the answer count in the workspace's share of the memory budget
/// until it is sent.
pub(crate) async fn source(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<MessageId>,
) -> PageResult<Response> {
    let message = state.core.messages().get(viewer.principal(), id).await.or_page(&viewer)?;
    let claim = state.budget.hold(owner(&viewer), rebuild_estimate(&message)).map_err(|_| busy(&viewer))?;
    drop(message);
    let raw = match state.core.messages().source(viewer.principal(), id).await.or_page(&viewer)? {
        MessageSource::Built { raw, .. } => raw,
        _ => {
            let why = "This message's source cannot be rebuilt: its page says why.";
            return Err(PageError::status(StatusCode::NOT_FOUND, "Not found", why).with_viewer(&viewer));
        }
    };
    let mut response = held_body::bytes(Bytes::from(raw), claim).into_response();
    // Text, never rendered: the source is the sender's bytes, HTML parts included.
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    Ok(response)
}

/// `GET /messages/{id}/progress`: `{"status", "lastEventId"}`, which the message page's
/// script polls while the message is in flight to say when something happened.
pub(crate) async fn progress(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<MessageId>,
) -> PageResult<Response> {
    let message = state.core.messages().get(viewer.principal(), id).await.or_page(&viewer)?;
    let body = serde_json::json!({
        "status": message.status.as_str(),
        "kind": status_kind(message.status.as_str()),
        "lastEventId": message.last_event_id.to_string(),
        "settled": !in_flight(message.status),
    });
    let mut response = body.to_string().into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(axum::http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `POST /messages/{id}/cancel` (`confirm=yes`; without it, the confirmation page).
pub(crate) async fn cancel(
    State(state): State<DashboardState>,
    PageId(id): PageId<MessageId>,
    posted: Posted,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    if !confirmed(&fields) {
        let message = state.core.messages().get(viewer.principal(), id).await.or_page(&viewer)?;
        let (action, back) = (format!("/messages/{}/cancel", message.id), format!("/messages/{}", message.id));
        let question = format!("Cancel the message “{}”? It will not be sent.", message.subject);
        return Ok(Ask { action: &action, question, yes: "Cancel the message", back: &back }.page(&viewer));
    }
    let message = state.core.messages().cancel(viewer.principal(), id).await.or_page(&viewer)?;
    Ok(see_other(&format!("/messages/{}", message.id)))
}

/// `POST /messages/{id}/reschedule` (`send_at`: a time in UTC, RFC 3339 or as a
/// `datetime-local` field sends it; empty: now).
pub(crate) async fn reschedule(
    State(state): State<DashboardState>,
    PageId(id): PageId<MessageId>,
    posted: Posted,
) -> PageResult<Response> {
    let at = posted.fields.text("send_at").map(|text| as_rfc3339_utc(&text));
    let change = MessageChange { scheduled_at: Some(at) };
    let message =
        state.core.messages().reschedule(posted.viewer.principal(), id, change).await.or_page(&posted.viewer)?;
    Ok(see_other(&format!("/messages/{}", message.id)))
}

/// A `datetime-local` value (`2026-01-31T09:00` or with seconds), which has no zone, read as
/// UTC; anything else is passed on as typed, for core to judge.
fn as_rfc3339_utc(text: &str) -> String {
    let local = |fmt| chrono::NaiveDateTime::parse_from_str(text, fmt).ok();
    match local("%Y-%m-%dT%H:%M:%S").or_else(|| local("%Y-%m-%dT%H:%M")) {
        Some(at) => at.and_utc().to_rfc3339(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::as_rfc3339_utc;

    #[test]
    fn datetime_local_values_are_read_as_utc() {
        assert_eq!(as_rfc3339_utc("2026-01-31T09:00"), "2026-01-31T09:00:00+00:00");
        assert_eq!(as_rfc3339_utc("2026-01-31T09:00:05"), "2026-01-31T09:00:05+00:00");
        assert_eq!(as_rfc3339_utc("2026-01-31T09:00:00+02:00"), "2026-01-31T09:00:00+02:00");
        assert_eq!(as_rfc3339_utc("tomorrow"), "tomorrow");
    }
}
