//! One received message: `GET /inbound/{id}` (who it is from and for, the SPF, DKIM and
//! DMARC results, the reply without its quote, the text, the HTML in the sandboxed frame,
//! the attachments and every header), `GET /inbound/{id}/html` (the frame's document),
//! `GET /inbound/{id}/raw` and `GET /inbound/{id}/attachments/{n}` (downloads).
//!
//! A received message is the sender's from its first byte to its last, so it is shown as
//! sent mail is and more carefully still: its HTML only through
//! [`crate::preview::framed_document`] (no script, no origin, nothing loaded until asked);
//! its raw bytes and attachments only as downloads (`Content-Disposition: attachment`,
//! `application/octet-stream` whatever type the sender declared, `nosniff`, and a policy
//! that sandboxes them should a browser render them anyway), never as a document of the
//! dashboard's origin.

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_SECURITY_POLICY, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::ids::InboundMessageId;
use tidings_core::model::{AttachmentMeta, AuthCheck, InboundMessage, InboundRoute};

use super::{auth_kind, mailbox, subject};
use crate::error::{OrPage, PageResult};
use crate::held_body::{self, busy, owner};
use crate::layout::{badge, page, time};
use crate::pages::{PageId, PagePath, query_pairs, query_value};
use crate::session::{Signed, Viewer};
use crate::{DOWNLOAD_CSP, DashboardState};

/// `GET /inbound/{id}` (`?images=1` loads remote images in the frame).
pub(crate) async fn show(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<InboundMessageId>,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let who = viewer.principal();
    let message = state.core.inbound().get(who, id).await.or_page(&viewer)?;
    let images = query_value(&query_pairs(raw.as_deref()), "images").as_deref() == Some("1");
    // The route that took it may have been deleted since: the page says so.
    let route = match message.route_id {
        Some(route_id) => state.core.inbound_routes().get(who, route_id).await.ok(),
        None => None,
    };
    Ok(render(&viewer, &message, route.as_ref(), images).into_response())
}

/// The message page.
fn render(viewer: &Viewer, m: &InboundMessage, route: Option<&InboundRoute>, images: bool) -> Markup {
    let id = m.id.to_string();
    let p = &m.parsed;
    let body = html! {
        section {
            dl.fields #inbound-fields {
                dt { "From" } dd.mono #inbound-from { @match &p.from { Some(from) => (mailbox(from)), None => span.none { "—" } } }
                @if !p.to.is_empty() { dt { "To" } dd.mono #inbound-to { (mailboxes(&p.to)) } }
                @if !p.cc.is_empty() { dt { "Cc" } dd.mono #inbound-cc { (mailboxes(&p.cc)) } }
                dt { "Delivered to" } dd.mono #inbound-recipients {
                    (m.envelope.recipients.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
                    " " span.muted { "(the envelope's recipients of this workspace, Bcc included)" }
                }
                dt { "Subject" } dd #subject { (subject(m)) }
                dt { "Received" } dd { (time(m.received_at)) }
                @if let Some(message_id) = &p.message_id { dt { "Message-ID" } dd.mono #inbound-message-id { "<" (message_id) ">" } }
                @if let Some(answered) = m.in_reply_to_message_id {
                    dt { "In reply to" } dd { a #in-reply-to href={ "/messages/" (answered) } { "the message " span.mono { (answered) } } " sent from here" }
                } @else if !p.in_reply_to.is_empty() {
                    dt { "In reply to" } dd.mono { @for named in &p.in_reply_to { "<" (named) "> " } }
                }
                dt { "Envelope sender" } dd.mono { @match &m.envelope.mail_from { Some(from) => (from), None => "<> (none: a bounce or a notification)" } }
                dt { "Sending server" } dd.mono { (m.envelope.client_ip) " " span.muted { "(EHLO " (m.envelope.helo) ")" } }
                dt { "Route" } dd #inbound-route {
                    @match (m.route_id, route) {
                        (None, _) => "none matched: kept, and announced to every endpoint subscribed to InboundReceived",
                        (Some(_), Some(r)) => { a href="/inbound/routes" { span.mono { (r.matcher.to_string()) } } ", " (r.action.as_str()) }
                        (Some(_), None) => "a route since deleted",
                    }
                }
                dt { "Size" } dd { (kilobytes(m.size)) }
            }
            div.actions {
                a #raw-text href={ "/inbound/" (id) "/raw" } { "Open the raw message as text" }
                " "
                a #raw-download href={ "/inbound/" (id) "/raw?download=1" } download={ (id) ".eml" } { "Download the .eml" }
            }
        }
        h2 { "Authentication" }
        p.muted { "As checked when it arrived: SPF of the envelope sender, the DKIM signature reported, DMARC of the From domain." }
        div.scroll {
            table #auth {
                thead { tr { th { "Check" } th { "Result" } th { "Domain" } th { "Selector" } th { "Policy" } } }
                tbody {
                    (auth_row("spf", "SPF", &m.auth.spf))
                    (auth_row("dkim", "DKIM", &m.auth.dkim))
                    (auth_row("dmarc", "DMARC", &m.auth.dmarc))
                }
            }
        }
        @if let Some(reply) = &p.stripped_text_reply {
            h2 { "Reply" }
            p.muted { "The text without the quoted message and the signature." }
            pre #inbound-reply { (reply) }
        }
        h2 { "Text" }
        @match &p.text {
            Some(text) => {
                @if p.html.is_some() { p.muted { "Its text part, or the text of its HTML when it has none." } }
                pre #text-body { (text) }
            }
            None => p.none #text-body { "This message has no text." },
        }
        h2 { "HTML" }
        @if p.html.is_some() {
            (crate::preview::frame(&format!("/inbound/{id}"), images))
        } @else {
            p.none { "This message has no HTML part." }
        }
        h2 { "Attachments" }
        @if p.attachments.is_empty() {
            p.none #attachments { "None." }
        } @else {
            div.scroll {
                table #attachments {
                    thead { tr { th { "File" } th { "Type" } th { "Size" } th { "Shown" } } }
                    tbody {
                        @for a in &p.attachments {
                            tr data-index=(a.index) {
                                td { a.download href={ "/inbound/" (id) "/attachments/" (a.index) } download=(download_name(a)) { (display_name(a)) } }
                                td.mono { (a.content_type) }
                                td { (kilobytes(a.size as u64)) }
                                td { @if a.inline { "in the body" @if let Some(cid) = &a.content_id { " as " span.mono { "cid:" (cid) } } } @else { "as a file" } }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Headers" }
        details #all-headers {
            summary { "Every header, as written (" (p.headers.len()) ")" }
            @if p.truncated.headers { p.muted { "Some headers are left out: the message had more than is kept." } }
            div.scroll {
                table #headers {
                    @for h in &p.headers { tr { th.mono { (h.name) } td.mono { (h.value) } } }
                }
            }
        }
    };
    page(Some(viewer), subject(m), body)
}

/// One row of the authentication table.
fn auth_row(check: &str, label: &str, c: &AuthCheck) -> Markup {
    let dash = || html! { span.none { "—" } };
    html! {
        tr data-check=(check) data-result=(c.result.as_str()) {
            th { (label) }
            td { (badge(c.result.as_str(), auth_kind(c.result))) }
            td.mono { @match &c.domain { Some(d) => (d), None => (dash()) } }
            td.mono { @match &c.selector { Some(s) => (s), None => (dash()) } }
            td.mono { @match &c.policy { Some(p) => (p), None => (dash()) } }
        }
    }
}

/// Mailboxes as a header lists them.
fn mailboxes(list: &[tidings_core::model::InboundMailbox]) -> String {
    list.iter().map(mailbox).collect::<Vec<_>>().join(", ")
}

/// A size in kilobytes (or bytes, under one).
fn kilobytes(bytes: u64) -> String {
    if bytes < 1024 { format!("{bytes} bytes") } else { format!("{} KB", bytes.div_ceil(1024)) }
}

/// An attachment's name on the page.
fn display_name(a: &AttachmentMeta) -> String {
    match a.filename.as_deref().filter(|n| !n.trim().is_empty()) {
        Some(name) => name.to_owned(),
        None => format!("attachment {} (no name)", a.index + 1),
    }
}

/// The name a download is saved under: the sender's, or one of ours.
fn download_name(a: &AttachmentMeta) -> String {
    match a.filename.as_deref().filter(|n| !n.trim().is_empty()) {
        Some(name) => name.to_owned(),
        None => format!("attachment-{}", a.index + 1),
    }
}

/// `attachment; filename="…"` for `name`: an ASCII stand-in where every character but
/// letters, digits, `.`, `-` and `_` is `_` (no quote, no path), and the name itself
/// percent-encoded in `filename*` (RFC 6266) for the browsers that read it.
fn disposition(name: &str) -> HeaderValue {
    let plain: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' }).collect();
    let encoded = percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC);
    // Only visible ASCII is left in the value, so it is always a valid header.
    HeaderValue::from_str(&format!("attachment; filename=\"{plain}\"; filename*=UTF-8''{encoded}"))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"))
}

/// The headers of a download of `content_type`, saved as a file (with `name`) or, without
/// one, shown as it is (text only).
fn download_headers(headers: &mut HeaderMap, content_type: &'static str, name: Option<&str>) {
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(name) = name {
        headers.insert(CONTENT_DISPOSITION, disposition(name));
    }
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(DOWNLOAD_CSP));
}

/// `GET /inbound/{id}/html`: the message's HTML as the frame's document
/// ([`crate::preview::framed_document`]; `?images=1` lets remote images load).
pub(crate) async fn html(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<InboundMessageId>,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let message = state.core.inbound().get(viewer.principal(), id).await.or_page(&viewer)?;
    let images = query_value(&query_pairs(raw.as_deref()), "images").as_deref() == Some("1");
    crate::preview::framed_document(&state, &viewer, message.parsed.html.as_deref().unwrap_or_default(), images)
}

/// `GET /inbound/{id}/raw`: the message as received, byte for byte, as `text/plain` to read
/// in the browser, or with `?download=1` as `message/rfc822` saved as `{id}.eml`. It counts
/// in the workspace's share of the memory budget until it is sent.
pub(crate) async fn raw(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<InboundMessageId>,
    RawQuery(query): RawQuery,
) -> PageResult<Response> {
    let who = viewer.principal();
    let message = state.core.inbound().get(who, id).await.or_page(&viewer)?;
    let claim = state.budget.hold(owner(&viewer), message.size as usize).map_err(|_| busy(&viewer))?;
    let raw = state.core.inbound().raw(who, id).await.or_page(&viewer)?;
    let mut response = held_body::bytes(Bytes::from(raw), claim).into_response();
    if query_value(&query_pairs(query.as_deref()), "download").as_deref() == Some("1") {
        download_headers(response.headers_mut(), "message/rfc822", Some(&format!("{}.eml", message.id)));
    } else {
        // Text, never rendered: the raw message is the sender's bytes, HTML parts included.
        download_headers(response.headers_mut(), "text/plain; charset=utf-8", None);
    }
    Ok(response)
}

/// `GET /inbound/{id}/attachments/{n}`: the `n`th attachment's decoded contents, saved
/// under its file name. It counts in the workspace's share of the memory budget (the raw
/// message it is cut from and the decoded copy) until it is sent.
pub(crate) async fn attachment(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PagePath((id, n)): PagePath<(String, String)>,
) -> PageResult<Response> {
    let who = viewer.principal();
    let id = InboundMessageId::parse_or_none(&id);
    let message = state.core.inbound().get(who, id).await.or_page(&viewer)?;
    let claim = state.budget.hold(owner(&viewer), 2 * message.size as usize).map_err(|_| busy(&viewer))?;
    // A number that is no index names no attachment, like one out of range.
    let index = n.parse::<usize>().unwrap_or(usize::MAX);
    let (meta, bytes) = state.core.inbound().attachment(who, id, index).await.or_page(&viewer)?;
    let mut response = held_body::bytes(Bytes::from(bytes), claim).into_response();
    download_headers(response.headers_mut(), "application/octet-stream", Some(&download_name(&meta)));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_download_name_cannot_break_out_of_its_header() {
        let value = disposition("a\"b\r\nSet-Cookie: x=1;/../é.txt");
        let text = value.to_str().unwrap();
        assert!(text.starts_with("attachment; filename=\"a_b__Set-Cookie__x_1__..__.txt\";"), "{text}");
        assert!(!text.contains('\r') && !text.contains('\n') && text.matches('"').count() == 2, "{text}");
        assert!(text.contains("filename*=UTF-8''a%22b%0D%0ASet%2DCookie"), "{text}");
        assert!(text.ends_with("%C3%A9%2Etxt"), "{text}");
        assert_eq!(
            disposition("report.pdf").to_str().unwrap(),
            "attachment; filename=\"report.pdf\"; filename*=UTF-8''report%2Epdf"
        );
    }
}
