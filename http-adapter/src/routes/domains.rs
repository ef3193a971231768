//! `/v1/domains`: add, list, get, tracking settings, verify, DKIM key rotation, delete, and the
//! domain's senders
//! (docs/api.md#domains and #tracking).

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tidings_core::ids::DomainId;
use tidings_core::model::{DnsRecord, Domain, RecordKind, Sender, SenderUsername};
use tidings_core::usecases::{self, SANDBOX_RECORD_NOTE};
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::table::RouteTable;
use super::wire::{DkimKeyState, DomainStatus, RecordStatus, Ulid};
use crate::auth::Authed;
use crate::envelope::{Null, Page, Success};
use crate::json::ApiJson;
use crate::openapi::failures::{
    Conflict, InsufficientScope, NotFound, RotationConflict, SenderUnprocessable, ValidationError,
};
use crate::path::{ApiPath, IdPath};
use crate::query::ListQuery;
use crate::{ApiResult, ApiState};

/// body of POST /v1/domains
#[derive(Deserialize, ToSchema)]
pub struct AddDomainRequest {
    /// the domain name, e.g. `example.com`: letters, digits and hyphens in labels of at most 63
    /// characters, at least two labels, the last not all digits (`xn--` form for international names)
    // The pattern admits every name `DomainName::parse` accepts (it leaves the lengths of labels to
    // the server), so that what it refuses is refused by the server too.
    #[schema(
        required,
        value_type = String,
        max_length = 254,
        pattern = r"^([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?\.)+([A-Za-z]|[A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z-][A-Za-z0-9-]*[A-Za-z0-9])\.?$"
    )]
    domain: Option<String>,
}

impl From<AddDomainRequest> for usecases::AddDomainRequest {
    fn from(r: AddDomainRequest) -> Self {
        Self { domain: r.domain }
    }
}

/// body of PATCH /v1/domains/{id}; an absent field is kept
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = UpdateDomainRequest)]
pub struct UpdateDomainRequest {
    /// track opens of messages from this domain
    open_tracking: Option<bool>,
    /// track clicks of messages from this domain
    click_tracking: Option<bool>,
    /// receive mail for this domain (docs/api.md#inbound-mail): its records then include the MX to publish
    inbound: Option<bool>,
}

impl From<UpdateDomainRequest> for usecases::UpdateDomainTrackingRequest {
    fn from(r: UpdateDomainRequest) -> Self {
        Self { open_tracking: r.open_tracking, click_tracking: r.click_tracking, inbound: r.inbound }
    }
}

/// body of POST /v1/domains/{id}/senders
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddSenderRequest {
    /// the local part, e.g. `billing`
    #[schema(required, value_type = String)]
    username: Option<String>,
    /// friendly name used when a send's `from` has none; empty means none
    display_name: Option<String>,
}

impl From<AddSenderRequest> for usecases::AddSenderRequest {
    fn from(r: AddSenderRequest) -> Self {
        Self { username: r.username, display_name: r.display_name }
    }
}

/// a sending domain with the records to publish
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = Domain)]
pub struct DomainResponse {
    id: Ulid,
    /// the domain name
    domain: String,
    overall_status: DomainStatus,
    spf_status: RecordStatus,
    dkim_status: RecordStatus,
    dkim2_status: RecordStatus,
    dmarc_status: RecordStatus,
    /// the return-path subdomain's records (`bounces.<domain>`) together: Verified when both are, and mail from
    /// the domain then goes with an envelope sender there; null when the server asks for none (no
    /// TIDINGS_INBOUND_MX_HOST)
    #[schema(required)]
    return_path_status: Option<RecordStatus>,
    dns_records: Vec<DnsRecordResponse>,
    #[schema(required)]
    verified_at: Option<DateTime<Utc>>,
    open_tracking: bool,
    click_tracking: bool,
    /// whether the domain receives mail (its MX record is then among `dnsRecords`)
    inbound: bool,
    /// the inbound MX record's status; null while inbound is off. Mail is taken once it and the domain are
    /// Verified
    #[schema(required)]
    inbound_status: Option<RecordStatus>,
    created_at: DateTime<Utc>,
    /// whether this is the workspace's sandbox sending domain (`sandbox.tidings.invalid`): usable only
    /// while the server writes mail to its outbox, never verified or deleted
    sandbox: bool,
}

impl From<Domain> for DomainResponse {
    fn from(d: Domain) -> Self {
        let status_of = |kind| d.record_status(kind).into();
        let note = d.is_sandbox().then_some(SANDBOX_RECORD_NOTE);
        Self {
            id: Ulid::of(d.id),
            domain: d.name.to_string(),
            overall_status: d.status.into(),
            spf_status: status_of(RecordKind::Spf),
            dkim_status: status_of(RecordKind::Dkim),
            dkim2_status: status_of(RecordKind::Dkim2),
            dmarc_status: status_of(RecordKind::Dmarc),
            return_path_status: d.return_path_status().map(Into::into),
            verified_at: d.verified_at,
            open_tracking: d.open_tracking,
            click_tracking: d.click_tracking,
            inbound: d.inbound,
            inbound_status: d.inbound.then(|| status_of(RecordKind::InboundMx)),
            created_at: d.created_at,
            sandbox: d.is_sandbox(),
            dns_records: d.records.iter().map(|r| DnsRecordResponse::new(&d, r.clone(), note)).collect(),
        }
    }
}

/// a DNS record to publish, with its last check
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = DnsRecord)]
struct DnsRecordResponse {
    /// e.g. `DKIM (TXT)`
    purpose: String,
    /// DNS record type: TXT, or MX for the return path's
    #[serde(rename = "type")]
    record_type: String,
    /// fully qualified name, without a trailing dot
    name: String,
    /// value to publish
    value: String,
    ttl: u32,
    status: RecordStatus,
    #[schema(required)]
    last_checked_at: Option<DateTime<Utc>>,
    /// why the last check failed
    #[schema(required)]
    error: Option<String>,
    /// what is wrong with the value Tidings asks for, whatever the check says; on the SPF record when the
    /// server delivers by relay or MX and its operator has not set TIDINGS_SPF_INCLUDE, so the value
    /// authorises only loopback (127.0.0.1)
    #[schema(required)]
    warning: Option<String>,
    /// set on the sandbox domain's records, which are shown but not to be published; null otherwise
    #[schema(required, value_type = Option<String>)]
    note: Option<&'static str>,
    /// the preference of an MX record; null for TXT records
    #[schema(required)]
    priority: Option<u16>,
    /// the DKIM selector of a DKIM or DKIM2 record (the first label of its name); null for other records
    #[schema(required)]
    selector: Option<String>,
    /// the state of a DKIM or DKIM2 record's key pair (docs/api.md#dkim-key-rotation); null for other records
    #[schema(required)]
    state: Option<DkimKeyState>,
    /// when a `Retiring` record's private key is deleted and the record becomes safe to remove; null otherwise
    #[schema(required)]
    retires_at: Option<DateTime<Utc>>,
}

impl DnsRecordResponse {
    fn new(d: &Domain, r: DnsRecord, note: Option<&'static str>) -> Self {
        let dkim = d.dkim_record_state(&r);
        let retires_at = dkim.as_ref().and_then(|(selector, _)| d.dkim_retire_at(selector));
        let (selector, state) = dkim.map(|(selector, state)| (selector, state.into())).unzip();
        Self {
            selector,
            state,
            retires_at,
            purpose: r.purpose(),
            status: r.status.into(),
            record_type: r.record_type,
            name: r.name,
            value: r.value,
            ttl: r.ttl,
            last_checked_at: r.last_checked_at,
            error: r.error,
            warning: r.warning,
            note,
            priority: r.priority,
        }
    }
}

/// a registered sender of a domain
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = Sender)]
pub struct SenderResponse {
    /// local part
    username: String,
    /// friendly name
    #[schema(required)]
    display_name: Option<String>,
    /// username@domain
    address: String,
    created_at: DateTime<Utc>,
}

impl From<Sender> for SenderResponse {
    fn from(s: Sender) -> Self {
        Self {
            username: s.username.to_string(),
            display_name: s.display_name.map(String::from),
            address: s.address.to_string(),
            created_at: s.created_at,
        }
    }
}

type DomainCreated = Success<201, DomainResponse>;
type DomainOk = Success<200, DomainResponse>;
type DomainPage = Page<DomainResponse>;
type SenderCreated = Success<201, SenderResponse>;
type SenderPage = Page<SenderResponse>;
type Deleted = Success<200, Null>;

/// `POST /v1/domains`: the domain in status `Pending` with the four records to publish.
#[utoipa::path(
    post,
    path = "/v1/domains",
    tag = "domains",
    summary = "Add a domain: Pending, with the records to publish",
    request_body = AddDomainRequest,
    responses(
        (status = 201, description = "the domain", body = inline(DomainCreated)),
        (status = 403, response = InsufficientScope),
        (status = 409, response = Conflict),
    )
)]
pub async fn create_domain(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiJson(req): ApiJson<AddDomainRequest>,
) -> ApiResult<DomainCreated> {
    let domain = state.core.domains().add(&who, req.into()).await?;
    Ok(Success::new("domain added", domain.into()))
}

/// `GET /v1/domains`: newest first.
#[utoipa::path(
    get,
    path = "/v1/domains",
    tag = "domains",
    summary = "List sending domains, newest first",
    params(ListQuery),
    responses(
        (status = 200, description = "a page", body = inline(DomainPage)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn list_domains(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ListQuery(params): ListQuery,
) -> ApiResult<DomainPage> {
    let listed = state.core.domains().list(&who, params).await?;
    Ok(Page::new(listed, DomainResponse::from))
}

/// `GET /v1/domains/{id}`.
#[utoipa::path(
    get,
    path = "/v1/domains/{id}",
    tag = "domains",
    summary = "Retrieve a domain with per-record status",
    responses(
        (status = 200, description = "the domain", body = inline(DomainOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn get_domain(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<DomainId>,
) -> ApiResult<DomainOk> {
    let domain = state.core.domains().get(&who, id).await?;
    Ok(Success::new("OK", domain.into()))
}

/// `PATCH /v1/domains/{id}`: `openTracking`, `clickTracking`.
#[utoipa::path(
    patch,
    path = "/v1/domains/{id}",
    tag = "domains",
    summary = "Switch open and click tracking",
    request_body = UpdateDomainRequest,
    responses(
        (status = 200, description = "the domain", body = inline(DomainOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn update_domain(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<DomainId>,
    ApiJson(req): ApiJson<UpdateDomainRequest>,
) -> ApiResult<DomainOk> {
    let domain = state.core.domains().update_tracking(&who, id, req.into()).await?;
    Ok(Success::new("domain updated", domain.into()))
}

/// `POST /v1/domains/{id}/verify`: checks the records in DNS now. Records that are not
/// found are an outcome (`Failed`), not an error: 200.
#[utoipa::path(
    post,
    path = "/v1/domains/{id}/verify",
    tag = "domains",
    summary = "Check the DNS records now",
    description = "Records that are not found are an outcome (`Failed`), not an error. The sandbox sending domain \
                   (`sandbox: true`) is returned unchanged: it is never looked up in DNS.",
    responses(
        (status = 200, description = "the domain with the outcome of the check", body = inline(DomainOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn verify_domain(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<DomainId>,
) -> ApiResult<DomainOk> {
    let domain = state.core.domains().verify(&who, id).await?;
    Ok(Success::new("domain checked", domain.into()))
}

/// `POST /v1/domains/{id}/rotate-dkim`: new DKIM keys, `Pending` until their records verify.
#[utoipa::path(
    post,
    path = "/v1/domains/{id}/rotate-dkim",
    tag = "domains",
    summary = "Rotate the DKIM keys: new keys under new selectors, Pending until their records verify",
    description = "Makes new RSA-2048 and Ed25519 keys under new selectors and lists their `DKIM` and `DKIM2` records \
                   (`state: Pending`) beside the active ones. Mail keeps being signed with the active keys until both \
                   new records verify (on a re-check or `verify`), then with the new ones; the replaced records stay \
                   `Retiring` for TIDINGS_DKIM_RETIRE_AFTER (default 7 days), then `Retired` (private keys deleted, \
                   safe to remove). One rotation at a time: 409 `conflict` while one is pending. The sandbox domain \
                   never rotates: 422 `validation_error`.",
    responses(
        (status = 200, description = "the domain with the new records", body = inline(DomainOk)),
        (status = 403, response = InsufficientScope),
        (status = 404, response = NotFound),
        (status = 409, response = RotationConflict),
        (status = 422, response = ValidationError),
    )
)]
pub async fn rotate_domain_dkim(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<DomainId>,
) -> ApiResult<DomainOk> {
    let domain = state.core.domains().rotate_dkim(&who, id).await?;
    Ok(Success::new("DKIM key rotation started", domain.into()))
}

/// `DELETE /v1/domains/{id}`: the domain, its keys and its senders.
#[utoipa::path(
    delete,
    path = "/v1/domains/{id}",
    tag = "domains",
    summary = "Delete a domain and its senders",
    description = "The sandbox sending domain (`sandbox: true`) cannot be deleted: 422 `validation_error`.",
    responses(
        (status = 200, description = "deleted", body = inline(Deleted)),
        (status = 403, response = InsufficientScope),
        (status = 422, response = ValidationError),
    )
)]
pub async fn delete_domain(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<DomainId>,
) -> ApiResult<Deleted> {
    state.core.domains().delete(&who, id).await?;
    Ok(Success::new("domain deleted", Null))
}

/// `POST /v1/domains/{id}/senders`: only on a Verified domain.
#[utoipa::path(
    post,
    path = "/v1/domains/{id}/senders",
    tag = "domains",
    summary = "Register a sender on a Verified domain",
    request_body = AddSenderRequest,
    responses(
        (status = 201, description = "the sender", body = inline(SenderCreated)),
        (status = 403, response = InsufficientScope),
        (status = 409, response = Conflict),
        (status = 422, response = SenderUnprocessable),
    )
)]
pub async fn create_sender(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<DomainId>,
    ApiJson(req): ApiJson<AddSenderRequest>,
) -> ApiResult<SenderCreated> {
    let sender = state.core.senders().add(&who, id, req.into()).await?;
    Ok(Success::new("sender registered", sender.into()))
}

/// `GET /v1/domains/{id}/senders`: newest first.
#[utoipa::path(
    get,
    path = "/v1/domains/{id}/senders",
    tag = "domains",
    summary = "List the domain's senders, newest first",
    params(ListQuery),
    responses(
        (status = 200, description = "a page", body = inline(SenderPage)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn list_senders(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<DomainId>,
    ListQuery(params): ListQuery,
) -> ApiResult<SenderPage> {
    let listed = state.core.senders().list(&who, id, params).await?;
    Ok(Page::new(listed, SenderResponse::from))
}

/// `DELETE /v1/domains/{id}/senders/{username}`.
#[utoipa::path(
    delete,
    path = "/v1/domains/{id}/senders/{username}",
    tag = "domains",
    summary = "Remove a sender",
    responses(
        (status = 200, description = "removed", body = inline(Deleted)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn delete_sender(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath((id, username)): ApiPath<(String, String)>,
) -> ApiResult<Deleted> {
    let username = SenderUsername::parse(&username).into();
    state.core.senders().delete(&who, DomainId::parse_or_none(&id), username).await?;
    Ok(Success::new("sender removed", Null))
}

/// The domain and sender routes.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .routes(routes!(list_domains, create_domain))
        .routes(routes!(get_domain, update_domain, delete_domain))
        .routes(routes!(verify_domain))
        .routes(routes!(rotate_domain_dkim))
        .routes(routes!(list_senders, create_sender))
        .routes(routes!(delete_sender))
}
