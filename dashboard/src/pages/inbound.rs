//! `/inbound`: the mail received for the workspace's inbound domains (contract §13), newest
//! first, filtered by `to` and `from` like `GET /v1/inbound/messages`; one message's page
//! ([`message`]) and the routes that say where incoming mail goes ([`routes`]).
//!
//! Everything shown here was written by whoever sent the mail: names, subjects, header
//! values and file names are text in the page (maud escapes them), and the HTML is shown
//! only in the sandboxed frame sent mail is shown in (`crate::preview`).

pub(crate) mod message;
pub(crate) mod routes;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::email::EmailAddress;
use tidings_core::model::{AuthCheck, AuthOutcome, InboundMailbox, InboundMessage};
use tidings_core::ports::InboundQuery;
use tidings_core::usecases::Listed;

use crate::DashboardState;
use crate::error::PageResult;
use crate::layout::{FormErrors, badge, clipped, clipped_link, error_box, field_error, page, time, with_query};
use crate::pages::{list_params, listed_unless_invalid, query_pairs, query_value};
use crate::session::{Signed, Viewer};

/// `GET /inbound?to&from&cursor`: the parameter names are the API's.
pub(crate) async fn list(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let pairs = query_pairs(raw.as_deref());
    let shown = Shown {
        to: query_value(&pairs, "to").unwrap_or_default(),
        from: query_value(&pairs, "from").unwrap_or_default(),
    };
    let mut errors = FormErrors::default();
    let to = match shown.to.as_str() {
        "" => None,
        text => match EmailAddress::parse(text) {
            Ok(address) => Some(address),
            Err(e) => {
                errors.0.push((Some("to".into()), format!("is not an email address: {e}")));
                None
            }
        },
    };
    let query = InboundQuery { to, from: (!shown.from.is_empty()).then(|| shown.from.clone()) };
    let listed = listed_unless_invalid(
        &mut errors,
        &viewer,
        state.core.inbound().list(viewer.principal(), query, list_params(&pairs)),
    )
    .await?;
    let status = if errors.is_empty() { StatusCode::OK } else { StatusCode::UNPROCESSABLE_ENTITY };
    Ok((status, render_list(&viewer, &shown, listed.as_ref(), &errors)).into_response())
}

/// The filters as typed, to show them again.
struct Shown {
    to: String,
    from: String,
}

impl Shown {
    /// The query of a link that keeps these filters.
    fn query(&self) -> [(&'static str, String); 2] {
        [("to", self.to.clone()), ("from", self.from.clone())]
    }

    /// What was searched, for the empty state: `to a@x.example, from b@y.example`.
    fn described(&self) -> String {
        let parts: Vec<String> = [("to", &self.to), ("from", &self.from)]
            .into_iter()
            .filter(|(_, value)| !value.is_empty())
            .map(|(label, value)| format!("{label} {value}"))
            .collect();
        parts.join(", ")
    }
}

/// A mailbox as the message wrote it: `Name <address>`, or the address alone.
pub(crate) fn mailbox(m: &InboundMailbox) -> String {
    match &m.name {
        Some(name) => format!("{name} <{}>", m.address),
        None => m.address.clone(),
    }
}

/// The subject, or what stands for a missing one.
pub(crate) fn subject(m: &InboundMessage) -> &str {
    m.parsed.subject.as_deref().filter(|s| !s.trim().is_empty()).unwrap_or("(no subject)")
}

/// The colour of an authentication result: a pass is good news, a failure (or a published
/// record that is broken) bad, a DNS hiccup a maybe; nothing to check says nothing (grey).
pub(crate) fn auth_kind(outcome: AuthOutcome) -> &'static str {
    match outcome {
        AuthOutcome::Pass => "ok",
        AuthOutcome::Fail | AuthOutcome::SoftFail | AuthOutcome::PermError => "bad",
        AuthOutcome::TempError => "wait",
        AuthOutcome::Neutral | AuthOutcome::Absent => "neutral",
    }
}

/// `SPF pass` as a badge, with the result in `data-result` for tests and styles.
pub(crate) fn auth_badge(check: &str, c: &AuthCheck) -> Markup {
    html! {
        span.auth data-check=(check) data-result=(c.result.as_str()) {
            (badge(&format!("{} {}", check.to_uppercase(), c.result.as_str()), auth_kind(c.result)))
        }
    }
}

/// What the list and the empty state say about receiving mail.
const HOW_TO_RECEIVE: &str = "To receive mail, switch on \u{201c}Receive mail\u{201d} on a domain's page, publish \
     the Inbound MX record it then lists, and verify the domain. Mail to any address of the domain is then kept here \
     and announced to every webhook endpoint subscribed to InboundReceived; routes send an address's mail to one \
     endpoint, keep it without an event, or refuse it.";

fn render_list(viewer: &Viewer, shown: &Shown, listed: Option<&Listed<InboundMessage>>, errors: &FormErrors) -> Markup {
    let query = shown.query();
    let body = html! {
        div.actions { a #routes-link href="/inbound/routes" { "Routes" } }
        form #filters.filters method="get" action="/inbound" role="search" {
            div {
                label for="to" { "To (a whole address)" }
                input #to type="text" name="to" value=(shown.to) inputmode="email" autocomplete="off"
                    placeholder="support@in.example.com"
                    aria-invalid=[errors.invalid("to")] aria-describedby=[errors.described_by("to", "to")];
                (field_error(errors, "to", "to"))
            }
            div {
                label for="from" { "From (a whole address)" }
                input #from type="text" name="from" value=(shown.from) inputmode="email" autocomplete="off"
                    aria-invalid=[errors.invalid("from")] aria-describedby=[errors.described_by("from", "from")];
                (field_error(errors, "from", "from"))
            }
            div { button type="submit" { "Search" } }
        }
        @if !errors.is_empty() { (error_box(&errors.lines())) }
        @if let Some(listed) = listed {
            div.scroll {
                table.fixed #inbound {
                    thead { tr {
                        th.w-date { "Received" } th.hide-narrow { "From" } th { "To" } th { "Subject" }
                        th.w-auth { "SPF, DKIM, DMARC" } th.w-num { "Files" }
                    } }
                    tbody {
                        @for m in &listed.items {
                            @let files = m.parsed.attachments.iter().filter(|a| !a.inline).count();
                            tr data-id=(m.id) {
                                td data-label="Received" { (time(m.received_at)) }
                                td.mono.hide-narrow.clip-cell data-label="From" {
                                    @match &m.parsed.from {
                                        Some(from) => (clipped(&mailbox(from))),
                                        None => span.none { "—" },
                                    }
                                }
                                td.mono.clip-cell data-label="To" { (clipped(&recipients(m))) }
                                td.clip-cell data-label="Subject" { (clipped_link(&format!("/inbound/{}", m.id), subject(m))) }
                                td.auth-cell data-label="SPF, DKIM, DMARC" {
                                    (auth_badge("spf", &m.auth.spf)) " " (auth_badge("dkim", &m.auth.dkim)) " " (auth_badge("dmarc", &m.auth.dmarc))
                                }
                                td.attachments data-label="Files" { (files) }
                            }
                        }
                    }
                }
            }
            @if listed.items.is_empty() {
                @let searched = shown.described();
                @if searched.is_empty() {
                    div #inbound-empty {
                        p.none { "No mail received yet." }
                        p { (HOW_TO_RECEIVE) }
                        p { a href="/domains" { "Your domains" } " · " a href="/inbound/routes" { "Routes" } }
                    }
                } @else {
                    p.none { "No received mail matches " (searched) "." }
                }
            }
            @if let Some(cursor) = listed.next_cursor.as_deref() {
                p.paging { a.next href=(with_query("/inbound", &query, Some(cursor))) rel="next" { "Older →" } }
            }
        }
    };
    page(Some(viewer), "Inbound", body)
}

/// Who a message was for: the envelope's recipients of this workspace (Bcc included),
/// which is what the mail was delivered to, whatever its `To` says.
fn recipients(m: &InboundMessage) -> String {
    m.envelope.recipients.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}
