//! `/v1/domains`: add, list, get, tracking settings, verify, delete, and the domain's senders
//! (spec §4, contract §4 and §8).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tidings_core::model::{DnsRecord, Domain, DomainStatus, RecordKind, RecordStatus, Sender};
use tidings_core::usecases::{AddDomainRequest, AddSenderRequest, SANDBOX_RECORD_NOTE, UpdateDomainTrackingRequest};

use super::table::RouteTable;
use crate::auth::Authed;
use crate::json::ApiJson;
use crate::path::ApiPath;
use crate::query::ListQuery;
use crate::{ApiResult, ApiState, envelope};

/// A domain as every response shows it: statuses, the records to publish and tracking.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainResponse {
    id: String,
    domain: String,
    overall_status: &'static str,
    spf_status: &'static str,
    dkim_status: &'static str,
    dkim2_status: &'static str,
    dmarc_status: &'static str,
    dns_records: Vec<DnsRecordResponse>,
    verified_at: Option<DateTime<Utc>>,
    open_tracking: bool,
    click_tracking: bool,
    created_at: DateTime<Utc>,
    /// Whether this is the workspace's sandbox sending domain (issue #18).
    sandbox: bool,
}

impl From<Domain> for DomainResponse {
    fn from(d: Domain) -> Self {
        let status_of = |kind| record_status(d.record_status(kind));
        let note = d.is_sandbox().then_some(SANDBOX_RECORD_NOTE);
        Self {
            id: d.id.to_string(),
            domain: d.name.to_string(),
            overall_status: domain_status(d.status),
            spf_status: status_of(RecordKind::Spf),
            dkim_status: status_of(RecordKind::Dkim),
            dkim2_status: status_of(RecordKind::Dkim2),
            dmarc_status: status_of(RecordKind::Dmarc),
            verified_at: d.verified_at,
            open_tracking: d.open_tracking,
            click_tracking: d.click_tracking,
            created_at: d.created_at,
            sandbox: d.is_sandbox(),
            dns_records: d.records.into_iter().map(|r| DnsRecordResponse::new(r, note)).collect(),
        }
    }
}

/// One DNS record to publish, with its last check.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DnsRecordResponse {
    purpose: String,
    #[serde(rename = "type")]
    record_type: String,
    name: String,
    value: String,
    ttl: u32,
    status: &'static str,
    last_checked_at: Option<DateTime<Utc>>,
    error: Option<String>,
    warning: Option<String>,
    /// Set on the sandbox domain's records, which are shown but not to be published.
    note: Option<&'static str>,
}

impl DnsRecordResponse {
    fn new(r: DnsRecord, note: Option<&'static str>) -> Self {
        Self {
            purpose: r.purpose(),
            status: record_status(r.status),
            record_type: r.record_type,
            name: r.name,
            value: r.value,
            ttl: r.ttl,
            last_checked_at: r.last_checked_at,
            error: r.error,
            warning: r.warning,
            note,
        }
    }
}

/// A registered sender.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SenderResponse {
    username: String,
    display_name: Option<String>,
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

// The wire names are spelled out here rather than taken from the model's serde derive, so
// that a rename inside core cannot silently change the API.
fn domain_status(s: DomainStatus) -> &'static str {
    match s {
        DomainStatus::Pending => "Pending",
        DomainStatus::Verified => "Verified",
        DomainStatus::PartiallyVerified => "PartiallyVerified",
        DomainStatus::Failed => "Failed",
    }
}

fn record_status(s: RecordStatus) -> &'static str {
    match s {
        RecordStatus::Pending => "Pending",
        RecordStatus::Verified => "Verified",
        RecordStatus::Failed => "Failed",
    }
}

/// `POST /v1/domains`: the domain in status `Pending` with the four records to publish.
pub async fn create_domain(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiJson(req): ApiJson<AddDomainRequest>,
) -> ApiResult<Response> {
    let domain = state.core.add_domain(&who, req).await?;
    Ok(envelope::success(StatusCode::CREATED, "domain added", DomainResponse::from(domain)))
}

/// `GET /v1/domains`: newest first.
pub async fn list_domains(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ListQuery(params): ListQuery,
) -> ApiResult<Response> {
    let listed = state.core.list_domains(&who, params).await?;
    Ok(envelope::list(listed, DomainResponse::from))
}

/// `GET /v1/domains/{id}`.
pub async fn get_domain(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let domain = state.core.get_domain(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "OK", DomainResponse::from(domain)))
}

/// `PATCH /v1/domains/{id}`: `openTracking`, `clickTracking`.
pub async fn update_domain(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<UpdateDomainTrackingRequest>,
) -> ApiResult<Response> {
    let domain = state.core.update_domain_tracking(&who, &id, req).await?;
    Ok(envelope::success(StatusCode::OK, "domain updated", DomainResponse::from(domain)))
}

/// `POST /v1/domains/{id}/verify`: checks the records in DNS now. Records that are not
/// found are an outcome (`Failed`), not an error: 200.
pub async fn verify_domain(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let domain = state.core.verify_domain(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "domain checked", DomainResponse::from(domain)))
}

/// `DELETE /v1/domains/{id}`: the domain, its keys and its senders.
pub async fn delete_domain(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    state.core.delete_domain(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "domain deleted", ()))
}

/// `POST /v1/domains/{id}/senders`: only on a Verified domain.
pub async fn create_sender(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<AddSenderRequest>,
) -> ApiResult<Response> {
    let sender = state.core.add_sender(&who, &id, req).await?;
    Ok(envelope::success(StatusCode::CREATED, "sender registered", SenderResponse::from(sender)))
}

/// `GET /v1/domains/{id}/senders`: newest first.
pub async fn list_senders(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
    ListQuery(params): ListQuery,
) -> ApiResult<Response> {
    let listed = state.core.list_senders(&who, &id, params).await?;
    Ok(envelope::list(listed, SenderResponse::from))
}

/// `DELETE /v1/domains/{id}/senders/{username}`.
pub async fn delete_sender(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath((id, username)): ApiPath<(String, String)>,
) -> ApiResult<Response> {
    state.core.delete_sender(&who, &id, &username).await?;
    Ok(envelope::success(StatusCode::OK, "sender removed", ()))
}

/// The domain and sender routes.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .get("/v1/domains", list_domains)
        .post("/v1/domains", create_domain)
        .get("/v1/domains/{id}", get_domain)
        .patch("/v1/domains/{id}", update_domain)
        .delete("/v1/domains/{id}", delete_domain)
        .post("/v1/domains/{id}/verify", verify_domain)
        .get("/v1/domains/{id}/senders", list_senders)
        .post("/v1/domains/{id}/senders", create_sender)
        .delete("/v1/domains/{id}/senders/{username}", delete_sender)
}
