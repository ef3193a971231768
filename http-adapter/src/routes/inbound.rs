//! Inbound mail (docs/api.md#inbound-mail, contract §13): the routes that say where a
//! workspace's incoming mail goes, and the messages received, with their raw bytes and
//! attachments. Every operation needs a `full` key.

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tidings_core::ids::{InboundMessageId, InboundRouteId};
use tidings_core::model::{self, InboundMessage, InboundRoute, RouteAction};
use tidings_core::ports::InboundQuery;
use tidings_core::usecases::RouteRequest;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{ContentBuilder, RefOr, ResponseBuilder};
use utoipa::{IntoParams, ToResponse, ToSchema};
use utoipa_axum::routes;

use super::table::RouteTable;
use super::wire::Ulid;
use crate::auth::Authed;
use crate::envelope::{Null, Page, Success};
use crate::json::ApiJson;
use crate::openapi::failures::InsufficientScope;
use crate::path::{ApiPath, IdPath};
use crate::query::{self, ListQuery};
use crate::{ApiError, ApiResult, ApiState};

/// body of POST /v1/inbound/routes
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateRouteRequest {
    /// an address (`support@in.example.com`) or `*@` a domain (`*@in.example.com`) of the workspace
    #[serde(rename = "match")]
    #[schema(required, value_type = String, example = "support@in.example.com")]
    matcher: Option<String>,
    /// `webhook` (the event goes to `webhookId` only), `store` (kept, no event) or `reject` (refused at RCPT TO)
    #[schema(required, value_type = String, example = "webhook")]
    action: Option<String>,
    /// the endpoint of a `webhook` route; it must subscribe to `InboundReceived`
    #[schema(value_type = Option<String>)]
    webhook_id: Option<String>,
}

/// body of PATCH /v1/inbound/routes/{id}; an absent field is kept
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateRouteRequest {
    /// a new match
    #[serde(rename = "match")]
    #[schema(value_type = Option<String>)]
    matcher: Option<String>,
    /// a new action
    #[schema(value_type = Option<String>)]
    action: Option<String>,
    /// a new endpoint (webhook routes)
    #[schema(value_type = Option<String>)]
    webhook_id: Option<String>,
}

/// a route: which recipients of an inbound domain it takes, and what it does with their mail
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = InboundRoute)]
pub struct RouteResponse {
    id: Ulid,
    /// an address, or `*@domain`
    #[serde(rename = "match")]
    matcher: String,
    /// `webhook`, `store` or `reject`
    action: String,
    /// the endpoint of a `webhook` route; null otherwise
    #[schema(required, value_type = Option<Ulid>)]
    webhook_id: Option<Ulid>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<InboundRoute> for RouteResponse {
    fn from(r: InboundRoute) -> Self {
        let webhook_id = match r.action {
            RouteAction::Webhook { webhook_id } => Some(Ulid::of(webhook_id)),
            RouteAction::Store | RouteAction::Reject => None,
        };
        Self {
            id: Ulid::of(r.id),
            matcher: r.matcher.to_string(),
            action: r.action.as_str().to_owned(),
            webhook_id,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// a mailbox as the message wrote it
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = InboundMailbox)]
pub struct MailboxResponse {
    /// the display name; null when absent
    #[schema(required)]
    name: Option<String>,
    /// the address as written
    address: String,
}

impl From<model::InboundMailbox> for MailboxResponse {
    fn from(m: model::InboundMailbox) -> Self {
        Self { name: m.name, address: m.address }
    }
}

/// one header, decoded, in the order written
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = InboundHeader)]
pub struct HeaderResponse {
    name: String,
    value: String,
}

/// an attachment's metadata; its contents are at `url`
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = InboundAttachment)]
pub struct AttachmentResponse {
    /// its number in `/v1/inbound/messages/{id}/attachments/{index}`
    index: usize,
    #[schema(required)]
    filename: Option<String>,
    /// `type/subtype`, lower-case
    content_type: String,
    /// bytes, decoded
    size: usize,
    /// what a `cid:` URL in the HTML names
    #[schema(required)]
    content_id: Option<String>,
    /// shown in the body rather than offered as a file
    inline: bool,
    /// where to fetch it (with a key)
    url: String,
}

/// one authentication check (RFC 8601 result names)
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = AuthCheck)]
pub struct AuthCheckResponse {
    /// `pass`, `fail`, `softfail`, `neutral`, `none`, `temperror` or `permerror`
    #[schema(example = "pass")]
    result: String,
    /// SPF: the domain checked; DKIM: the signature's `d=`; DMARC: the From domain
    #[schema(required)]
    domain: Option<String>,
    /// DKIM: the signature's selector
    #[schema(required)]
    selector: Option<String>,
    /// DMARC: the published policy
    #[schema(required)]
    policy: Option<String>,
}

impl From<model::AuthCheck> for AuthCheckResponse {
    fn from(c: model::AuthCheck) -> Self {
        Self { result: c.result.as_str().to_owned(), domain: c.domain, selector: c.selector, policy: c.policy }
    }
}

/// a message received for one of the workspace's inbound domains
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = InboundMessage)]
pub struct InboundMessageResponse {
    id: Ulid,
    received_at: DateTime<Utc>,
    /// the first mailbox of `From`
    #[schema(required)]
    from: Option<MailboxResponse>,
    to: Vec<MailboxResponse>,
    cc: Vec<MailboxResponse>,
    /// the envelope's recipients of this workspace (Bcc included)
    recipients: Vec<String>,
    /// the envelope sender; null for `<>`
    #[schema(required)]
    mail_from: Option<String>,
    #[schema(required)]
    subject: Option<String>,
    /// the text body, or the text of the HTML one
    #[schema(required)]
    text: Option<String>,
    #[schema(required)]
    html: Option<String>,
    /// the text without the quoted reply and signature
    #[schema(required)]
    stripped_text_reply: Option<String>,
    headers: Vec<HeaderResponse>,
    attachments: Vec<AttachmentResponse>,
    /// `Message-ID`, without angle brackets
    #[schema(required)]
    message_id: Option<String>,
    /// the message Tidings sent that this one answers
    #[schema(required, value_type = Option<Ulid>)]
    in_reply_to_message_id: Option<Ulid>,
    spf: AuthCheckResponse,
    dkim: AuthCheckResponse,
    dmarc: AuthCheckResponse,
    /// the route that took it; null when none matched
    #[schema(required, value_type = Option<Ulid>)]
    route_id: Option<Ulid>,
    /// bytes of the raw message
    size: u64,
    /// where to fetch the raw message (with a key)
    raw_url: String,
}

impl From<InboundMessage> for InboundMessageResponse {
    fn from(m: InboundMessage) -> Self {
        let base = format!("/v1/inbound/messages/{}", m.id);
        let p = m.parsed;
        Self {
            id: Ulid::of(m.id),
            received_at: m.received_at,
            from: p.from.map(MailboxResponse::from),
            to: p.to.into_iter().map(MailboxResponse::from).collect(),
            cc: p.cc.into_iter().map(MailboxResponse::from).collect(),
            recipients: m.envelope.recipients.iter().map(ToString::to_string).collect(),
            mail_from: m.envelope.mail_from,
            subject: p.subject,
            text: p.text,
            html: p.html,
            stripped_text_reply: p.stripped_text_reply,
            headers: p.headers.into_iter().map(|h| HeaderResponse { name: h.name, value: h.value }).collect(),
            attachments: p
                .attachments
                .into_iter()
                .map(|a| AttachmentResponse {
                    url: format!("{base}/attachments/{}", a.index),
                    index: a.index,
                    filename: a.filename,
                    content_type: a.content_type,
                    size: a.size,
                    content_id: a.content_id,
                    inline: a.inline,
                })
                .collect(),
            message_id: p.message_id,
            in_reply_to_message_id: m.in_reply_to_message_id.map(Ulid::of),
            spf: m.auth.spf.into(),
            dkim: m.auth.dkim.into(),
            dmarc: m.auth.dmarc.into(),
            route_id: m.route_id.map(Ulid::of),
            size: m.size,
            raw_url: format!("{base}/raw"),
        }
    }
}

type RouteCreated = Success<201, RouteResponse>;
type RouteOk = Success<200, RouteResponse>;
type RoutePage = Page<RouteResponse>;
type Deleted = Success<200, Null>;
type InboundPage = Page<InboundMessageResponse>;
type InboundOk = Success<200, InboundMessageResponse>;

/// `POST /v1/inbound/routes`.
#[utoipa::path(
    post,
    path = "/v1/inbound/routes",
    tag = "inbound",
    summary = "Create an inbound route",
    description = "The most specific route of a recipient decides: an address before `*@domain`. Mail no route \
                   matches is stored, and `InboundReceived` goes to every endpoint subscribed to it.",
    request_body = CreateRouteRequest,
    responses(
        (status = 201, description = "the route", body = inline(RouteCreated)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn create_inbound_route(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiJson(req): ApiJson<CreateRouteRequest>,
) -> ApiResult<RouteCreated> {
    let req = RouteRequest { matcher: req.matcher, action: req.action, webhook_id: req.webhook_id };
    let route = state.core.inbound_routes().create(&who, req).await?;
    Ok(Success::new("inbound route created", route.into()))
}

/// `GET /v1/inbound/routes`: oldest first.
#[utoipa::path(
    get,
    path = "/v1/inbound/routes",
    tag = "inbound",
    summary = "List the inbound routes, oldest first",
    params(ListQuery),
    responses(
        (status = 200, description = "a page", body = inline(RoutePage)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn list_inbound_routes(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ListQuery(params): ListQuery,
) -> ApiResult<RoutePage> {
    let listed = state.core.inbound_routes().page(&who, params).await?;
    Ok(Page::new(listed, RouteResponse::from))
}

/// `GET /v1/inbound/routes/{id}`.
#[utoipa::path(
    get,
    path = "/v1/inbound/routes/{id}",
    tag = "inbound",
    summary = "Retrieve an inbound route",
    responses(
        (status = 200, description = "the route", body = inline(RouteOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn get_inbound_route(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<InboundRouteId>,
) -> ApiResult<RouteOk> {
    let route = state.core.inbound_routes().get(&who, id).await?;
    Ok(Success::new("OK", route.into()))
}

/// `PATCH /v1/inbound/routes/{id}`.
#[utoipa::path(
    patch,
    path = "/v1/inbound/routes/{id}",
    tag = "inbound",
    summary = "Change an inbound route's match, action or endpoint",
    request_body = UpdateRouteRequest,
    responses(
        (status = 200, description = "the route", body = inline(RouteOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn update_inbound_route(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<InboundRouteId>,
    ApiJson(req): ApiJson<UpdateRouteRequest>,
) -> ApiResult<RouteOk> {
    let req = RouteRequest { matcher: req.matcher, action: req.action, webhook_id: req.webhook_id };
    let route = state.core.inbound_routes().update(&who, id, req).await?;
    Ok(Success::new("inbound route updated", route.into()))
}

/// `DELETE /v1/inbound/routes/{id}`.
#[utoipa::path(
    delete,
    path = "/v1/inbound/routes/{id}",
    tag = "inbound",
    summary = "Delete an inbound route",
    responses(
        (status = 200, description = "deleted", body = inline(Deleted)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn delete_inbound_route(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<InboundRouteId>,
) -> ApiResult<Deleted> {
    state.core.inbound_routes().delete(&who, id).await?;
    Ok(Success::new("inbound route deleted", Null))
}

/// The filters of `GET /v1/inbound/messages`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct InboundFilterQuery {
    /// only messages delivered to this address (an envelope recipient, Bcc included; any case)
    to: Option<String>,
    /// only messages whose From address is this one (any case)
    from: Option<String>,
}

/// `GET /v1/inbound/messages`: newest first.
#[utoipa::path(
    get,
    path = "/v1/inbound/messages",
    tag = "inbound",
    summary = "List received messages, newest first",
    params(ListQuery, InboundFilterQuery),
    responses(
        (status = 200, description = "a page", body = inline(InboundPage),
            links(("get_inbound_message" = (
                operation_id = "get_inbound_message",
                parameters(("id" = "$response.body#/data/0/id"))
            )))),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn list_inbound_messages(
    State(state): State<ApiState>,
    Authed(who): Authed,
    axum::extract::RawQuery(raw): axum::extract::RawQuery,
) -> ApiResult<InboundPage> {
    let q = query::params(raw.as_deref());
    let params = query::list_params(&q)?;
    let to = match q.get("to") {
        Some(text) => Some(
            tidings_core::email::EmailAddress::parse(text)
                .map_err(|e| tidings_core::Error::field("to", format!("is not an email address: {e}")))?,
        ),
        None => None,
    };
    let query = InboundQuery { to, from: q.get("from").cloned() };
    let listed = state.core.inbound().list(&who, query, params).await?;
    Ok(Page::new(listed, InboundMessageResponse::from))
}

/// `GET /v1/inbound/messages/{id}`.
#[utoipa::path(
    get,
    path = "/v1/inbound/messages/{id}",
    tag = "inbound",
    summary = "Retrieve a received message, parsed",
    responses(
        (status = 200, description = "the message", body = inline(InboundOk),
            links(
                ("get_inbound_raw" = (operation_id = "get_inbound_raw", parameters(("id" = "$request.path.id")))),
                ("get_inbound_attachment" = (
                    operation_id = "get_inbound_attachment",
                    parameters(("id" = "$request.path.id"), ("index" = "$response.body#/data/attachments/0/index"))
                )),
            )),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn get_inbound_message(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<InboundMessageId>,
) -> ApiResult<InboundOk> {
    let message = state.core.inbound().get(&who, id).await?;
    Ok(Success::new("OK", message.into()))
}

/// The 200 of `…/raw`: the message as received.
struct RawMessage;

impl<'r> ToResponse<'r> for RawMessage {
    fn response() -> (&'r str, RefOr<utoipa::openapi::Response>) {
        let bytes = ObjectBuilder::new().schema_type(Type::String).content_media_type("message/rfc822");
        let response = ResponseBuilder::new()
            .description("the message as received, byte for byte")
            .content("message/rfc822", ContentBuilder::new().schema(Some(bytes)).build());
        ("RawMessage", response.build().into())
    }
}

/// The 200 of `…/attachments/{index}`: the decoded contents.
struct AttachmentBytes;

impl<'r> ToResponse<'r> for AttachmentBytes {
    fn response() -> (&'r str, RefOr<utoipa::openapi::Response>) {
        let bytes = ObjectBuilder::new().schema_type(Type::String);
        let response = ResponseBuilder::new()
            .description(
                "the attachment's decoded contents, as the content type it was sent with (its file name in \
                          Content-Disposition)",
            )
            .content("*/*", ContentBuilder::new().schema(Some(bytes)).build());
        ("AttachmentBytes", response.build().into())
    }
}

/// `GET /v1/inbound/messages/{id}/raw`.
#[utoipa::path(
    get,
    path = "/v1/inbound/messages/{id}/raw",
    tag = "inbound",
    summary = "A received message's raw bytes",
    responses(
        (status = 200, response = inline(RawMessage)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn get_inbound_raw(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<InboundMessageId>,
) -> ApiResult<Response> {
    let raw = state.core.inbound().raw(&who, id).await?;
    let headers = [(header::CONTENT_TYPE, HeaderValue::from_static("message/rfc822"))];
    Ok((StatusCode::OK, headers, raw).into_response())
}

/// `GET /v1/inbound/messages/{id}/attachments/{index}`.
#[utoipa::path(
    get,
    path = "/v1/inbound/messages/{id}/attachments/{index}",
    tag = "inbound",
    summary = "One attachment of a received message",
    params(
        ("id" = String, Path, description = "the message's id"),
        ("index" = u32, Path, description = "the attachment's `index`"),
    ),
    responses(
        (status = 200, response = inline(AttachmentBytes)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn get_inbound_attachment(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath((id, index)): ApiPath<(String, String)>,
) -> ApiResult<Response> {
    let id = InboundMessageId::parse_or_none(&id);
    // An index that is no number names no attachment, like one out of range.
    let index = index.parse::<usize>().unwrap_or(usize::MAX);
    let (meta, bytes) = state.core.inbound().attachment(&who, id, index).await?;
    let content_type = HeaderValue::from_str(&meta.content_type)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    // Downloaded, never rendered by a browser on the API's origin (an HTML attachment is
    // the sender's, not ours).
    let name: String = meta
        .filename
        .as_deref()
        .unwrap_or("attachment")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .collect();
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
        .map_err(|_| ApiError::from(tidings_core::Error::NotFound("attachment")))?;
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_DISPOSITION, disposition),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox; default-src 'none'")),
    ];
    Ok((StatusCode::OK, headers, bytes).into_response())
}

/// The routes of this module.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .routes(routes!(create_inbound_route, list_inbound_routes))
        .routes(routes!(get_inbound_route, update_inbound_route, delete_inbound_route))
        .routes(routes!(list_inbound_messages))
        .routes(routes!(get_inbound_message))
        .routes(routes!(get_inbound_raw))
        .routes(routes!(get_inbound_attachment))
}
