//! `/keys`: the workspace's API keys (scope, domain, rate limit, last use), the create form
//! (the plaintext is shown once, in `#new-key`, on the page answering the create), a field
//! on each key to change its rate limit, and revocation. Revoking the key a session signed in with ends that session at once.

use std::collections::HashMap;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::Error;
use tidings_core::ids::ApiKeyId;
use tidings_core::model::{ApiKey, KeyScope};
use tidings_core::usecases::{CreateApiKeyRequest, ListParams, Listed, UpdateApiKeyRequest};

use crate::DashboardState;
use crate::error::{OrPage, PageResult};
use crate::form::Posted;
use crate::layout::{FormErrors, csrf_field, error_box, field_error, maybe_time, next_link, page, time};
use crate::pages::{PageId, list_params, query_pairs};
use crate::session::{Signed, Viewer, see_other};

/// What the keys page shows.
struct KeysView {
    keys: Listed<ApiKey>,
    /// Domain id to name, for the keys restricted to one and the create form.
    domains: Vec<(String, String)>,
}

async fn load(state: &DashboardState, viewer: &Viewer, params: ListParams) -> PageResult<KeysView> {
    let who = viewer.principal();
    let keys = state.core.keys().list(who, params).await.or_page(viewer)?;
    let domains =
        state.core.domains().list(who, ListParams { limit: Some(200), cursor: None }).await.or_page(viewer)?;
    let domains = domains.items.iter().map(|d| (d.id.to_string(), d.name.to_string())).collect();
    Ok(KeysView { keys, domains })
}

/// `GET /keys`.
pub(crate) async fn list(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let pairs = query_pairs(raw.as_deref());
    let view = load(&state, &viewer, list_params(&pairs)).await?;
    Ok(render(&viewer, &view, None, &Typed::default(), &FormErrors::default()).into_response())
}

/// The create form as typed, to show again with its mistakes.
#[derive(Debug, Default)]
struct Typed {
    name: String,
    scope: String,
    domain_id: String,
    rate: String,
}

fn render(
    viewer: &Viewer,
    view: &KeysView,
    new_key: Option<(&ApiKey, &str)>,
    typed: &Typed,
    errors: &FormErrors,
) -> Markup {
    let names: HashMap<&str, &str> = view.domains.iter().map(|(id, name)| (id.as_str(), name.as_str())).collect();
    let body = html! {
        @if let Some((key, plaintext)) = new_key {
            div.notice role="status" {
                p { strong { "Key " (key.name) " created." } " Copy it now: it is not shown again." }
                code.secret #new-key { (plaintext) }
                button.copy type="button" data-copy=(plaintext) hidden { "Copy" }
            }
        }
        div.scroll {
            table #keys {
                thead { tr {
                    th { "Name" } th { "Prefix" } th { "Scope" } th.hide-narrow { "Domain" } th { "Rate limit" }
                    th.hide-narrow { "Created" } th { "Last used" } th { span.visually-hidden { "Action" } }
                } }
                tbody {
                    @for k in &view.keys.items {
                        tr data-id=(k.id) {
                            td data-label="Name" { (k.name) }
                            td.mono data-label="Prefix" { (k.prefix) "…" }
                            td data-label="Scope" { (scope_word(k.scope)) }
                            td.hide-narrow data-label="Domain" {
                                @match k.sending_domain_id {
                                    Some(d) => { (names.get(d.to_string().as_str()).copied().unwrap_or("(deleted domain)")) },
                                    None => span.none { "any" },
                                }
                            }
                            // An action, so on every screen (a stacked row on a phone).
                            td data-label="Rate limit" {
                                form.rate method="post" action={ "/keys/" (k.id) "/rate" } {
                                    (csrf_field(viewer))
                                    input type="number" name="rate_limit_per_sec" min="1" max="10000" required
                                        value=(k.rate_limit.per_sec())
                                        aria-label={ "Rate limit of " (k.name) ", sends per second" };
                                    "/s "
                                    button type="submit" { "Set" }
                                }
                            }
                            td.hide-narrow data-label="Created" { (time(k.created_at)) }
                            td data-label="Last used" { (maybe_time(k.last_used_at)) }
                            td.act {
                                form.revoke method="post" action={ "/keys/" (k.id) "/revoke" }
                                    data-confirm={ "Revoke " (k.name) "? It stops working at once, and sessions signed in with it end." } {
                                    (csrf_field(viewer))
                                    button type="submit" { "Revoke" }
                                }
                            }
                        }
                    }
                }
            }
        }
        (next_link("/keys", &[], view.keys.next_cursor.as_deref()))
        h2 { "New key" }
        section {
            @if !errors.is_empty() { (error_box(&errors.lines())) }
            form #create-key method="post" action="/keys" {
                (csrf_field(viewer))
                label for="name" { "Name" }
                input #name type="text" name="name" placeholder="web app" autocomplete="off" value=(typed.name)
                    aria-invalid=[errors.invalid("name")] aria-describedby=[errors.described_by("name", "name")];
                (field_error(errors, "name", "name"))
                label for="scope" { "Scope" }
                select #scope name="scope" aria-invalid=[errors.invalid("scope")] aria-describedby=[errors.described_by("scope", "scope")] {
                    option value="full" selected[typed.scope == "full"] { "full: everything" }
                    option value="send" selected[typed.scope == "send"] { "send: send, and read what it sent" }
                }
                (field_error(errors, "scope", "scope"))
                label for="domain_id" { "Sending domain" }
                select #domain_id name="domain_id" aria-invalid=[errors.invalid("sendingDomainId")]
                    aria-describedby=[errors.described_by("sendingDomainId", "domain_id")] {
                    option value="" { "Any domain" }
                    @for (id, name) in &view.domains { option value=(id) selected[typed.domain_id == *id] { (name) } }
                }
                (field_error(errors, "sendingDomainId", "domain_id"))
                label for="rate_limit_per_sec" { "Rate limit (sends per second, 1–10,000)" }
                input #rate_limit_per_sec type="number" name="rate_limit_per_sec" min="1" max="10000"
                    value=(if typed.rate.is_empty() { "10" } else { typed.rate.as_str() })
                    aria-invalid=[errors.invalid("rateLimitPerSec")]
                    aria-describedby=[errors.described_by("rateLimitPerSec", "rate_limit_per_sec")];
                (field_error(errors, "rateLimitPerSec", "rate_limit_per_sec"))
                div.actions { button type="submit" { "Create key" } }
            }
        }
    };
    page(Some(viewer), "API keys", body)
}

fn scope_word(scope: KeyScope) -> &'static str {
    match scope {
        KeyScope::Full => "full",
        KeyScope::Send => "send",
    }
}

/// `POST /keys` (`name`, `scope`, `domain_id`, `rate_limit_per_sec`): the keys page with the
/// plaintext of the new key, once.
pub(crate) async fn create(State(state): State<DashboardState>, posted: Posted) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let typed = Typed {
        name: fields.get("name").unwrap_or_default().to_owned(),
        scope: fields.get("scope").unwrap_or_default().to_owned(),
        domain_id: fields.get("domain_id").unwrap_or_default().to_owned(),
        rate: fields.get("rate_limit_per_sec").unwrap_or_default().trim().to_owned(),
    };
    let created = match rate_field(fields.text("rate_limit_per_sec")) {
        Ok(rate_limit_per_sec) => {
            let req = CreateApiKeyRequest {
                name: fields.text("name"),
                scope: fields.text("scope"),
                sending_domain_id: fields.text("domain_id"),
                rate_limit_per_sec,
            };
            state.core.keys().create(viewer.principal(), req).await
        }
        Err(e) => Err(e),
    };
    let view = load(&state, &viewer, ListParams::default()).await?;
    match created {
        Ok(created) => {
            let page = render(
                &viewer,
                &view,
                Some((&created.key, created.plaintext.expose())),
                &Typed::default(),
                &FormErrors::default(),
            );
            Ok((StatusCode::OK, page).into_response())
        }
        // The form again with what was typed and each mistake under its field.
        Err(Error::Validation { fields: wrong }) => {
            let page = render(&viewer, &view, None, &typed, &FormErrors::from_fields(&wrong));
            Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
        }
        Err(e) => Err(e).or_page(&viewer),
    }
}

/// `POST /keys/{id}/rate` (`rate_limit_per_sec`): sets the key's send rate; 303 to the list.
pub(crate) async fn set_rate(
    State(state): State<DashboardState>,
    PageId(id): PageId<ApiKeyId>,
    posted: Posted,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let rate_limit_per_sec = rate_field(fields.text("rate_limit_per_sec")).or_page(&viewer)?;
    let req = UpdateApiKeyRequest { rate_limit_per_sec };
    state.core.keys().update(viewer.principal(), id, req).await.or_page(&viewer)?;
    Ok(see_other("/keys"))
}

/// The rate field as typed: absent, or a whole number (its range is the use case's rule).
fn rate_field(text: Option<String>) -> tidings_core::Result<Option<i64>> {
    match text.as_deref().map(str::parse::<i64>) {
        None => Ok(None),
        Some(Ok(n)) => Ok(Some(n)),
        Some(Err(_)) => {
            Err(tidings_core::Error::field("rateLimitPerSec", "must be a whole number between 1 and 10000"))
        }
    }
}

/// `POST /keys/{id}/revoke` (`confirm=yes`; without it, the confirmation page): 303 to the
/// list (to the sign-in page, through it, when the key was the session's own).
pub(crate) async fn revoke(
    State(state): State<DashboardState>,
    PageId(id): PageId<ApiKeyId>,
    posted: Posted,
) -> PageResult<Response> {
    if !crate::confirm::confirmed(&posted.fields) {
        let key = state.core.keys().get(posted.viewer.principal(), id).await.or_page(&posted.viewer)?;
        let action = format!("/keys/{}/revoke", key.id);
        let question =
            format!("Revoke the key {}? It stops working at once, and sessions signed in with it end.", key.name);
        let ask = crate::confirm::Ask { action: &action, question, yes: "Revoke the key", back: "/keys" };
        return Ok(ask.page(&posted.viewer));
    }
    state.core.keys().revoke(posted.viewer.principal(), id).await.or_page(&posted.viewer)?;
    Ok(see_other("/keys"))
}
