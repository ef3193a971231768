//! `/domains`: the list and the add form; a domain's page with the DNS records to publish
//! (copy buttons, per-record status and the reason a check failed), verify now, senders,
//! DKIM key rotation (each DKIM record shows its selector and its pair's state), tracking
//! switches, the switch to receive mail (inbound, contract §13) and deletion.

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::ids::DomainId;
use tidings_core::model::{DkimKeyState, DnsRecord, Domain, DomainStatus, RecordStatus, Sender, SenderUsername};
use tidings_core::usecases::SANDBOX_RECORD_NOTE;
use tidings_core::usecases::{AddDomainRequest, AddSenderRequest, ListParams, Listed, UpdateDomainTrackingRequest};

use crate::DashboardState;
use crate::confirm::{Ask, confirmed};
use crate::error::{OrPage, PageResult};
use crate::form::Posted;
use crate::layout::{
    FormErrors, action_button, badge, clipped, clipped_link, csrf_field, danger_button, error_box, field_error,
    maybe_time, next_link, page, segment, status_kind, time,
};
use crate::pages::{PageId, PagePath, list_params, query_pairs};
use crate::session::{Signed, Viewer, see_other};

/// The API's word for a domain status.
pub(crate) fn domain_status(status: DomainStatus) -> &'static str {
    match status {
        DomainStatus::Pending => "Pending",
        DomainStatus::Verified => "Verified",
        DomainStatus::PartiallyVerified => "PartiallyVerified",
        DomainStatus::Failed => "Failed",
    }
}

fn record_status(status: RecordStatus) -> &'static str {
    match status {
        RecordStatus::Pending => "Pending",
        RecordStatus::Verified => "Verified",
        RecordStatus::Failed => "Failed",
    }
}

/// The API's word for a DKIM pair's state.
fn key_state(state: DkimKeyState) -> &'static str {
    match state {
        DkimKeyState::Active => "Active",
        DkimKeyState::Pending => "Pending",
        DkimKeyState::Retiring => "Retiring",
        DkimKeyState::Retired => "Retired",
    }
}

/// What a DKIM record's state asks of its owner.
fn key_state_hint(state: DkimKeyState) -> &'static str {
    match state {
        DkimKeyState::Active => "signs your mail",
        DkimKeyState::Pending => "publish it: the new key signs once both new records verify",
        DkimKeyState::Retiring => "keep it published: mail signed with it may still be checked",
        DkimKeyState::Retired => "safe to remove from DNS",
    }
}

/// The key-state line of a DKIM record's row; nothing for other records.
fn key_state_line(d: &Domain, r: &DnsRecord) -> Markup {
    let Some((selector, state)) = d.dkim_record_state(r) else { return html! {} };
    let word = key_state(state);
    let kind = match state {
        DkimKeyState::Active => "ok",
        DkimKeyState::Retired => "bad",
        DkimKeyState::Pending | DkimKeyState::Retiring => "wait",
    };
    html! {
        p.key-state data-key-state=(word) {
            (badge(word, kind)) " " span.muted { "selector " span.mono { (selector) } ": " (key_state_hint(state)) }
            @if let Some(at) = d.dkim_retire_at(&selector) { " " span.muted { "until " (time(at)) } }
        }
    }
}

/// `GET /domains`.
pub(crate) async fn list(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let pairs = query_pairs(raw.as_deref());
    let listed = state.core.domains().list(viewer.principal(), list_params(&pairs)).await.or_page(&viewer)?;
    Ok(render_list(&viewer, &listed, None).into_response())
}

fn render_list(viewer: &Viewer, listed: &Listed<Domain>, refused: Option<(&str, &FormErrors)>) -> Markup {
    let no_errors = FormErrors::default();
    let (typed, errors) = refused.unwrap_or(("", &no_errors));
    let body = html! {
        @if !errors.is_empty() { (crate::layout::error_box(&errors.lines())) }
        section {
            form #add-domain method="post" action="/domains" {
                (csrf_field(viewer))
                label for="name" { "Add a domain" }
                input #name type="text" name="name" placeholder="mail.example.com" required autocomplete="off" value=(typed)
                    aria-invalid=[errors.invalid("domain")] aria-describedby=[errors.described_by("domain", "name")];
                (field_error(errors, "domain", "name"))
                div.actions { button type="submit" { "Add" } }
            }
        }
        div.scroll {
            table.fixed #domains {
                thead { tr { th { "Domain" } th.w-status { "Status" } th.hide-narrow.w-date { "Added" } th.hide-narrow.w-date { "Verified" } } }
                tbody {
                    @for d in &listed.items {
                        tr data-id=(d.id) {
                            td data-label="Domain" {
                                (clipped_link(&format!("/domains/{}", d.id), &d.name.to_string()))
                                @if d.is_sandbox() { span.muted.sandbox { "sandbox: outbox only" } }
                            }
                            td data-label="Status" { (badge(domain_status(d.status), status_kind(domain_status(d.status)))) }
                            td.hide-narrow data-label="Added" { (time(d.created_at)) }
                            td.hide-narrow data-label="Verified" { (maybe_time(d.verified_at)) }
                        }
                    }
                }
            }
        }
        @if listed.items.is_empty() { p.none { "No domains yet. Add the domain you send from, then publish its DNS records." } }
        (next_link("/domains", &[], listed.next_cursor.as_deref()))
    };
    page(Some(viewer), "Domains", body)
}

/// `POST /domains` (`name`): 303 to the new domain's page.
pub(crate) async fn add(State(state): State<DashboardState>, posted: Posted) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let req = AddDomainRequest { domain: fields.text("name") };
    match state.core.domains().add(viewer.principal(), req).await {
        Ok(domain) => Ok(see_other(&format!("/domains/{}", domain.id))),
        Err(tidings_core::Error::Validation { fields: wrong }) => {
            let listed = state.core.domains().list(viewer.principal(), ListParams::default()).await.or_page(&viewer)?;
            let errors = FormErrors::from_fields(&wrong);
            let typed = fields.get("name").unwrap_or("").trim();
            let page = render_list(&viewer, &listed, Some((typed, &errors)));
            Ok((axum::http::StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
        }
        Err(e) => Err(e).or_page(&viewer),
    }
}

/// `GET /domains/{id}`.
pub(crate) async fn show(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<DomainId>,
) -> PageResult<Response> {
    let who = viewer.principal();
    let domain = state.core.domains().get(who, id).await.or_page(&viewer)?;
    let senders =
        state.core.senders().list(who, id, ListParams { limit: Some(200), cursor: None }).await.or_page(&viewer)?;
    Ok(render(&viewer, &domain, &senders, &Typed::default(), receives_mail(&state)).into_response())
}

/// The page's forms as typed and what was wrong with them, to show again: the add-sender
/// form, and the receive-mail switch.
#[derive(Debug, Default)]
pub(crate) struct Typed {
    username: String,
    display_name: String,
    errors: FormErrors,
    inbound_errors: FormErrors,
}

/// What the page says about the sandbox sending domain instead of the verify and delete
/// buttons it does not have.
const SANDBOX_NOTE: &str = "This is the sandbox sending domain: it lets this workspace send at once while the \
     server writes mail to its outbox (TIDINGS_DELIVERY=outbox) and nothing leaves the machine. With relay or mx \
     delivery it cannot send: add and verify your own domain.";

/// A domain's page.
///
/// `receives_anywhere`: whether this server takes inbound mail at all
/// (`TIDINGS_INBOUND_MX_HOST` is set), else the switch is not offered.
pub(crate) fn render(
    viewer: &Viewer,
    d: &Domain,
    senders: &Listed<Sender>,
    typed: &Typed,
    receives_anywhere: bool,
) -> Markup {
    let errors = &typed.errors;
    let id = d.id.to_string();
    let status = domain_status(d.status);
    let body = html! {
        section {
            dl.fields {
                dt { "Domain" } dd.mono #domain-name { (d.name.to_string()) }
                dt { "Status" } dd { span #domain-status data-status=(status) { (badge(status, status_kind(status))) } }
                dt { "Verified" } dd { (maybe_time(d.verified_at)) }
                dt { "Last checked" } dd { (maybe_time(d.last_checked_at)) }
            }
            @if d.is_sandbox() {
                p #sandbox-note { (SANDBOX_NOTE) }
            } @else {
                div.actions {
                    (action_button(viewer, &format!("/domains/{id}/verify"), "action verify", "Verify now"))
                    @if d.dkim_rotation.pending.is_none() {
                        (action_button(viewer, &format!("/domains/{id}/rotate-dkim"), "action rotate", "Rotate DKIM keys"))
                    }
                }
            }
        }
        h2 { "DNS records to publish" }
        @if d.is_sandbox() {
            p.muted { (SANDBOX_RECORD_NOTE) }
        } @else {
            p.muted { "Publish each record at your DNS provider, then verify. SPF, DKIM and DKIM2 are required; DMARC is recommended." }
            @if d.inbound {
                p.muted #inbound-record-note { "The Inbound MX record is optional for sending: it is what lets this domain receive mail (below)." }
            }
            @if d.return_path_status().is_some() {
                p.muted { "The Return-Path records are optional: once both verify, bounces of this domain's mail come back through its own subdomain and SPF passes aligned with your From address." }
            }
        }
        div.scroll {
            table.fixed #records {
                thead { tr { th.w-num { "Record" } th.w-name { "Name" } th { "Value" } th.w-date { "Status" } } }
                tbody {
                    @for r in &d.records {
                        tr data-kind=(r.kind.label()) {
                            td data-label="Record" {
                                (r.purpose()) " " span.muted.nowrap { "TTL " (r.ttl) }
                                @if let Some(priority) = r.priority { " " span.muted.nowrap { "priority " (priority) } }
                                (key_state_line(d, r))
                            }
                            td data-label="Name" {
                                span.record-name.mono { (r.name) } " "
                                button.copy type="button" data-copy=(r.name) hidden aria-label={ "Copy the name of the " (r.kind.label()) " record" } { "Copy" }
                            }
                            td data-label="Value" {
                                div.record-value.mono { (r.value) }
                                button.copy type="button" data-copy=(r.value) hidden aria-label={ "Copy the value of the " (r.kind.label()) " record" } { "Copy" }
                            }
                            td data-label="Status" {
                                span.record-status data-status=(record_status(r.status)) {
                                    (badge(record_status(r.status), status_kind(record_status(r.status))))
                                }
                                @if let Some(error) = &r.error { p.record-error { (error) } }
                                @if let Some(warning) = &r.warning { p.record-warning.muted { (warning) } }
                                p.muted { "checked " (maybe_time(r.last_checked_at)) }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Tracking" }
        section {
            form #tracking method="post" action={ "/domains/" (id) "/tracking" } {
                (csrf_field(viewer))
                label.check for="open" { input #open type="checkbox" name="open" value="on" checked[d.open_tracking]; "Open tracking (a pixel in the HTML)" }
                label.check for="click" { input #click type="checkbox" name="click" value="on" checked[d.click_tracking]; "Click tracking (links go through a redirect)" }
                div.actions { button type="submit" { "Save tracking" } }
            }
        }
        h2 #receiving { "Receiving mail" }
        section {
            (inbound_switch(viewer, d, &typed.inbound_errors, receives_anywhere))
        }
        h2 { "Senders" }
        section {
            @if senders.items.is_empty() {
                p.none { "No senders registered. Any local part of a verified domain may send; a sender adds a display name." }
            } @else {
                div.scroll { table.fixed #senders {
                    thead { tr { th { "Address" } th { "Display name" } th.w-act { span.visually-hidden { "Action" } } } }
                    tbody {
                        @for s in &senders.items {
                            tr data-username=(s.username.as_str()) {
                                td.mono.clip-cell data-label="Address" { (clipped(&s.address.to_string())) }
                                td.clip-cell data-label="Display name" { @if let Some(name) = &s.display_name { (clipped(name.as_str())) } @else { span.none { "—" } } }
                                td.act { (danger_button(viewer, &format!("/domains/{id}/senders/{}/delete", segment(s.username.as_str())), "action", "Remove",
                                    &format!("Remove the sender {}?", s.address))) }
                            }
                        }
                    }
                } }
            }
            @if !errors.is_empty() { (error_box(&errors.lines())) }
            form #add-sender method="post" action={ "/domains/" (id) "/senders" } {
                (csrf_field(viewer))
                label for="username" { "Username (the part before @)" }
                input #username type="text" name="username" required autocomplete="off" value=(typed.username)
                    aria-invalid=[errors.invalid("username")] aria-describedby=[errors.described_by("username", "username")];
                (field_error(errors, "username", "username"))
                label for="display_name" { "Display name (optional)" }
                input #display_name type="text" name="display_name" autocomplete="off" value=(typed.display_name)
                    aria-invalid=[errors.invalid("displayName")] aria-describedby=[errors.described_by("displayName", "display_name")];
                (field_error(errors, "displayName", "display_name"))
                div.actions { button type="submit" { "Add sender" } }
            }
        }
        @if !d.is_sandbox() {
        h2 { "Delete" }
        section {
            form.danger #delete-domain method="post" action={ "/domains/" (id) "/delete" }
                data-confirm={ "Delete " (d.name.to_string()) "? Queued messages from it will fail." } {
                (csrf_field(viewer))
                p { "Deleting the domain removes its keys and senders; messages from it still queued fail." }
                button type="submit" { "Delete this domain" }
            }
        }
        }
    };
    page(Some(viewer), &d.name.to_string(), body)
}

/// `POST /domains/{id}/verify`: checks the records now; 303 back to the domain.
pub(crate) async fn verify(
    State(state): State<DashboardState>,
    PageId(id): PageId<DomainId>,
    posted: Posted,
) -> PageResult<Response> {
    let domain = state.core.domains().verify(posted.viewer.principal(), id).await.or_page(&posted.viewer)?;
    Ok(see_other(&format!("/domains/{}", domain.id)))
}

/// `POST /domains/{id}/rotate-dkim`: starts a DKIM key rotation; 303 back to the domain,
/// whose page then lists the new records to publish.
pub(crate) async fn rotate_dkim(
    State(state): State<DashboardState>,
    PageId(id): PageId<DomainId>,
    posted: Posted,
) -> PageResult<Response> {
    let domain = state.core.domains().rotate_dkim(posted.viewer.principal(), id).await.or_page(&posted.viewer)?;
    Ok(see_other(&format!("/domains/{}", domain.id)))
}

/// `POST /domains/{id}/tracking` (`open`, `click` checkboxes).
pub(crate) async fn tracking(
    State(state): State<DashboardState>,
    PageId(id): PageId<DomainId>,
    posted: Posted,
) -> PageResult<Response> {
    let req = UpdateDomainTrackingRequest {
        open_tracking: Some(posted.fields.checked("open")),
        click_tracking: Some(posted.fields.checked("click")),
        inbound: None,
    };
    let domain =
        state.core.domains().update_tracking(posted.viewer.principal(), id, req).await.or_page(&posted.viewer)?;
    Ok(see_other(&format!("/domains/{}", domain.id)))
}

/// Whether this server takes inbound mail: its operator named the host the domains' `MX`
/// records point at (`TIDINGS_INBOUND_MX_HOST`).
fn receives_mail(state: &DashboardState) -> bool {
    state.core.config().records.return_path_host.is_some()
}

/// The receive-mail switch of a domain's page, what it means and what it is waiting for.
fn inbound_switch(viewer: &Viewer, d: &Domain, errors: &FormErrors, receives_anywhere: bool) -> Markup {
    let id = d.id.to_string();
    html! {
        @if !errors.is_empty() { (error_box(&errors.lines())) }
        @if d.is_sandbox() {
            p.muted #inbound-note { "The sandbox sending domain receives no mail." }
        } @else if !receives_anywhere && !d.inbound {
            p.muted #inbound-note { "This server receives no mail: its operator has not set TIDINGS_INBOUND_MX_HOST." }
        } @else {
            p #inbound-state data-inbound=(d.inbound) data-receiving=(d.receives_mail()) {
                @if d.receives_mail() {
                    (badge("receiving", "ok")) " Mail to any address of " span.mono { (d.name.to_string()) } " is kept under "
                    a href="/inbound" { "Inbound" } "; " a href="/inbound/routes" { "routes" } " decide where it goes."
                } @else if d.inbound {
                    (badge("waiting", "wait")) " Mail is taken once the Inbound MX record above and the domain are verified."
                } @else {
                    (badge("off", "neutral")) " Mail to this domain is not received here."
                }
            }
            form #inbound method="post" action={ "/domains/" (id) "/inbound" } {
                (csrf_field(viewer))
                label.check for="inbound-on" {
                    input #inbound-on type="checkbox" name="inbound" value="on" checked[d.inbound]
                        aria-invalid=[errors.invalid("inbound")] aria-describedby=[errors.described_by("inbound", "inbound-on")];
                    "Receive mail (inbound): the records then ask for an MX record pointing at this server"
                }
                (field_error(errors, "inbound", "inbound-on"))
                div.actions { button type="submit" { "Save" } }
            }
        }
    }
}

/// `POST /domains/{id}/inbound` (`inbound` checkbox): switches receiving mail on or off
/// through the same update as the API's `PATCH /v1/domains/{id}` with `inbound`; 303 back,
/// or the page with the mistake (a server that receives no mail, the sandbox domain).
pub(crate) async fn inbound(
    State(state): State<DashboardState>,
    PageId(id): PageId<DomainId>,
    posted: Posted,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let req = UpdateDomainTrackingRequest { inbound: Some(fields.checked("inbound")), ..Default::default() };
    match state.core.domains().update_tracking(viewer.principal(), id, req).await {
        Ok(domain) => Ok(see_other(&format!("/domains/{}#receiving", domain.id))),
        Err(tidings_core::Error::Validation { fields: wrong }) => {
            let who = viewer.principal();
            let domain = state.core.domains().get(who, id).await.or_page(&viewer)?;
            let senders = state
                .core
                .senders()
                .list(who, id, ListParams { limit: Some(200), cursor: None })
                .await
                .or_page(&viewer)?;
            let typed = Typed { inbound_errors: FormErrors::from_fields(&wrong), ..Typed::default() };
            let page = render(&viewer, &domain, &senders, &typed, receives_mail(&state));
            Ok((axum::http::StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
        }
        Err(e) => Err(e).or_page(&viewer),
    }
}

/// `POST /domains/{id}/delete` (`confirm=yes`; without it, the confirmation page): 303 to
/// the list.
pub(crate) async fn delete(
    State(state): State<DashboardState>,
    PageId(id): PageId<DomainId>,
    posted: Posted,
) -> PageResult<Response> {
    if !confirmed(&posted.fields) {
        let domain = state.core.domains().get(posted.viewer.principal(), id).await.or_page(&posted.viewer)?;
        let (action, back) = (format!("/domains/{}/delete", domain.id), format!("/domains/{}", domain.id));
        let question =
            format!("Delete {}? Its keys and senders go with it; queued messages from it fail.", domain.name);
        return Ok(Ask { action: &action, question, yes: "Delete the domain", back: &back }.page(&posted.viewer));
    }
    state.core.domains().delete(posted.viewer.principal(), id).await.or_page(&posted.viewer)?;
    Ok(see_other("/domains"))
}

/// `POST /domains/{id}/senders` (`username`, `display_name`).
pub(crate) async fn add_sender(
    State(state): State<DashboardState>,
    PageId(id): PageId<DomainId>,
    posted: Posted,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let req = AddSenderRequest { username: fields.text("username"), display_name: fields.text("display_name") };
    match state.core.senders().add(viewer.principal(), id, req).await {
        Ok(_) => Ok(see_other(&format!("/domains/{id}"))),
        // The page again with what was typed and each mistake under its field.
        Err(tidings_core::Error::Validation { fields: wrong }) => {
            let who = viewer.principal();
            let domain = state.core.domains().get(who, id).await.or_page(&viewer)?;
            let first_page = ListParams { limit: Some(200), cursor: None };
            let senders = state.core.senders().list(who, id, first_page).await.or_page(&viewer)?;
            let typed = Typed {
                username: fields.get("username").unwrap_or_default().to_owned(),
                display_name: fields.get("display_name").unwrap_or_default().to_owned(),
                errors: FormErrors::from_fields(&wrong),
                inbound_errors: FormErrors::default(),
            };
            let page = render(&viewer, &domain, &senders, &typed, receives_mail(&state));
            Ok((axum::http::StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
        }
        Err(e) => Err(e).or_page(&viewer),
    }
}

/// `POST /domains/{id}/senders/{username}/delete` (`confirm=yes`; without it, the
/// confirmation page).
pub(crate) async fn delete_sender(
    State(state): State<DashboardState>,
    PagePath((id, username)): PagePath<(String, String)>,
    posted: Posted,
) -> PageResult<Response> {
    if !confirmed(&posted.fields) {
        let domain = state.core.domains().get(posted.viewer.principal(), DomainId::parse_or_none(&id)).await;
        let domain = domain.or_page(&posted.viewer)?;
        let action = format!("/domains/{}/senders/{}/delete", domain.id, segment(&username));
        let back = format!("/domains/{}", domain.id);
        let question = format!("Remove the sender {username}@{}?", domain.name);
        return Ok(Ask { action: &action, question, yes: "Remove the sender", back: &back }.page(&posted.viewer));
    }
    let (id, username) = (DomainId::parse_or_none(&id), SenderUsername::parse(&username).into());
    state.core.senders().delete(posted.viewer.principal(), id, username).await.or_page(&posted.viewer)?;
    Ok(see_other(&format!("/domains/{id}")))
}
