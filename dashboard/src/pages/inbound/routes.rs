//! `/inbound/routes`: where the workspace's incoming mail goes (contract §13). The list, the
//! create form (a match, an action, and for a `webhook` route one of the endpoints subscribed
//! to `InboundReceived`) and deletion, each through `Tidings::inbound_routes`, which decides
//! what a route may be.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::Error;
use tidings_core::ids::InboundRouteId;
use tidings_core::model::{InboundRoute, RouteAction, WebhookEndpoint, WebhookEventType};
use tidings_core::usecases::{ListParams, RouteRequest};

use crate::DashboardState;
use crate::confirm::{Ask, confirmed};
use crate::error::{OrPage, PageResult};
use crate::form::Posted;
use crate::layout::{FormErrors, clipped, csrf_field, danger_button, error_box, field_error, page, time};
use crate::pages::PageId;
use crate::session::{Signed, Viewer, see_other};

/// The actions a route may have, with what each does, in the order the form offers them.
const ACTIONS: [(&str, &str); 3] = [
    ("webhook", "webhook: keep it and send InboundReceived to one endpoint"),
    ("store", "store: keep it, no event"),
    ("reject", "reject: refuse it (550) while it is being sent"),
];

/// `GET /inbound/routes`.
pub(crate) async fn list(State(state): State<DashboardState>, Signed(viewer): Signed) -> PageResult<Response> {
    let routes = state.core.inbound_routes().list(viewer.principal()).await.or_page(&viewer)?;
    let endpoints = inbound_endpoints(&state, &viewer).await?;
    Ok(render(&viewer, &routes, &endpoints, &Typed::default()).into_response())
}

/// The workspace's endpoints subscribed to `InboundReceived`: those a `webhook` route may name.
async fn inbound_endpoints(state: &DashboardState, viewer: &Viewer) -> PageResult<Vec<WebhookEndpoint>> {
    let params = ListParams { limit: Some(200), cursor: None };
    let listed = state.core.webhooks().list(viewer.principal(), params).await.or_page(viewer)?;
    Ok(listed.items.into_iter().filter(|e| e.event_types.contains(&WebhookEventType::InboundReceived)).collect())
}

/// The create form as typed, and what was wrong with it.
#[derive(Debug, Default)]
struct Typed {
    matcher: String,
    action: String,
    webhook_id: String,
    errors: FormErrors,
}

fn render(viewer: &Viewer, routes: &[InboundRoute], endpoints: &[WebhookEndpoint], typed: &Typed) -> Markup {
    let errors = &typed.errors;
    let endpoint_url = |id| endpoints.iter().find(|e| e.id == id).map(|e| e.url.as_str().to_owned());
    let body = html! {
        p.muted {
            "The most specific route of a recipient decides: an address before *@ its domain. Mail no route matches is kept "
            "and announced to every endpoint subscribed to InboundReceived. "
            a href="/inbound" { "Received mail" }
        }
        div.scroll {
            table.fixed #routes {
                thead { tr { th { "Match" } th.w-status { "Action" } th.hide-narrow { "Endpoint" } th.hide-narrow.w-date { "Created" } th.w-act { span.visually-hidden { "Action" } } } }
                tbody {
                    @for r in routes {
                        tr data-id=(r.id) data-action=(r.action.as_str()) {
                            td.mono.clip-cell data-label="Match" { (clipped(&r.matcher.to_string())) }
                            td data-label="Action" { (r.action.as_str()) }
                            td.mono.hide-narrow.clip-cell data-label="Endpoint" {
                                @match r.action {
                                    RouteAction::Webhook { webhook_id } => {
                                        @let url = endpoint_url(webhook_id).unwrap_or_else(|| webhook_id.to_string());
                                        a.clip href={ "/webhooks/" (webhook_id) } title=(url) { (url) }
                                    }
                                    RouteAction::Store | RouteAction::Reject => span.none { "—" },
                                }
                            }
                            td.hide-narrow data-label="Created" { (time(r.created_at)) }
                            td.act { (danger_button(viewer, &format!("/inbound/routes/{}/delete", r.id), "action", "Delete",
                                &format!("Delete the route for {}? Its mail then goes where no route sends it.", r.matcher))) }
                        }
                    }
                }
            }
        }
        @if routes.is_empty() { p.none { "No routes: all mail received is kept and announced to every endpoint subscribed to InboundReceived." } }
        h2 { "New route" }
        @if !errors.is_empty() { (error_box(&errors.lines())) }
        section {
            form #create-route method="post" action="/inbound/routes" {
                (csrf_field(viewer))
                label for="match" { "Match " span.muted { "(an address, or *@ a domain, of one of this workspace's domains)" } }
                input #match type="text" name="match" required autocomplete="off" placeholder="support@in.example.com" value=(typed.matcher)
                    aria-invalid=[errors.invalid("match")] aria-describedby=[errors.described_by("match", "match")];
                (field_error(errors, "match", "match"))
                label for="action" { "Action" }
                select #action name="action" aria-invalid=[errors.invalid("action")] aria-describedby=[errors.described_by("action", "action")] {
                    @for (value, label) in ACTIONS {
                        option value=(value) selected[typed.action == value] { (label) }
                    }
                }
                (field_error(errors, "action", "action"))
                label for="webhook_id" { "Endpoint " span.muted { "(webhook routes: one subscribed to InboundReceived)" } }
                select #webhook_id name="webhook_id" aria-invalid=[errors.invalid("webhookId")] aria-describedby=[errors.described_by("webhookId", "webhook_id")] {
                    option value="" { "—" }
                    @for e in endpoints {
                        option value=(e.id) selected[typed.webhook_id == e.id.to_string()] {
                            (e.url.as_str()) @if !e.enabled { " (disabled)" }
                        }
                    }
                }
                (field_error(errors, "webhookId", "webhook_id"))
                @if endpoints.is_empty() {
                    p.muted #no-inbound-endpoints {
                        "No endpoint subscribes to InboundReceived yet: "
                        a href="/webhooks" { "subscribe one" } " to send a route's mail to it."
                    }
                }
                div.actions { button type="submit" { "Add route" } }
            }
        }
    };
    page(Some(viewer), "Inbound routes", body)
}

/// `POST /inbound/routes` (`match`, `action`, `webhook_id`; the endpoint is sent only for
/// a `webhook` route, as the form offers it for every action): 303 to the list, or the page
/// again with what was wrong.
pub(crate) async fn create(State(state): State<DashboardState>, posted: Posted) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let action = fields.text("action");
    let webhook_id = if action.as_deref() == Some("webhook") { fields.text("webhook_id") } else { None };
    let req = RouteRequest { matcher: fields.text("match"), action, webhook_id };
    let (status, errors) = match state.core.inbound_routes().create(viewer.principal(), req).await {
        Ok(_) => return Ok(see_other("/inbound/routes")),
        Err(Error::Validation { fields: wrong }) => (StatusCode::UNPROCESSABLE_ENTITY, FormErrors::from_fields(&wrong)),
        Err(e @ Error::Conflict(_)) => (StatusCode::CONFLICT, FormErrors(vec![(Some("match".into()), e.to_string())])),
        Err(e) => return Err(e).or_page(&viewer),
    };
    let typed = Typed {
        matcher: fields.get("match").unwrap_or_default().trim().to_owned(),
        action: fields.get("action").unwrap_or_default().to_owned(),
        webhook_id: fields.get("webhook_id").unwrap_or_default().to_owned(),
        errors,
    };
    let routes = state.core.inbound_routes().list(viewer.principal()).await.or_page(&viewer)?;
    let endpoints = inbound_endpoints(&state, &viewer).await?;
    Ok((status, render(&viewer, &routes, &endpoints, &typed)).into_response())
}

/// `POST /inbound/routes/{id}/delete` (`confirm=yes`; without it, the confirmation page):
/// 303 to the list.
pub(crate) async fn delete(
    State(state): State<DashboardState>,
    PageId(id): PageId<InboundRouteId>,
    posted: Posted,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    if !confirmed(&fields) {
        let route = state.core.inbound_routes().get(viewer.principal(), id).await.or_page(&viewer)?;
        let action = format!("/inbound/routes/{}/delete", route.id);
        let question = format!("Delete the route for {}? Its mail then goes where no route sends it.", route.matcher);
        return Ok(Ask { action: &action, question, yes: "Delete the route", back: "/inbound/routes" }.page(&viewer));
    }
    state.core.inbound_routes().delete(viewer.principal(), id).await.or_page(&viewer)?;
    Ok(see_other("/inbound/routes"))
}
