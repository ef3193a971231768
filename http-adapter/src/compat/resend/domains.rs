//! `/resend/domains`: Resend's domain shapes over the same use cases as `/v1/domains`.
//!
//! Resend's domain has `name`, `status` (`not_started`, `pending`, `verified`,
//! `partially_verified`, `failed`, …), a `region` and `records` of
//! `{record, name, type, value, ttl, status, priority}`; Tidings' statuses and records map
//! onto those words. What Resend's create takes and Tidings does not do (a custom return
//! path, a tracking subdomain, enforced TLS, receiving) is refused naming the field.
//!
//! A DKIM key rotation (`POST /v1/domains/{id}/rotate-dkim`; Resend has none) shows here as
//! more `DKIM` records: the pending pair's (`not_started` until they verify) and the retiring
//! pair's, every one of which must be published. Retired records, safe to remove, are left
//! out: Resend's records have no word for "remove this", and a client listing them would
//! publish them again.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::SecondsFormat;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tidings_core::Error;
use tidings_core::ids::DomainId;
use tidings_core::model::{DkimKeyState, DnsRecord, Domain, DomainStatus, RecordKind, RecordStatus};
use tidings_core::usecases::{AddDomainRequest, UpdateDomainTrackingRequest};

use super::auth::{Caller, Resend, ResendBody};
use super::error::{ResendError, renamed};
use crate::ApiState;
use crate::json::ApiJson;
use crate::path::IdPath;

/// Resend's regions; Tidings is one server, so any of them is accepted and none changes
/// anything. A domain answers [`REGION`], Resend's default.
const REGIONS: [&str; 4] = ["us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1"];
/// The `region` every domain answers.
const REGION: &str = "us-east-1";

/// Body of `POST /resend/domains` (resend-node's `parseDomainToApiOptions`).
#[derive(Deserialize)]
pub(super) struct CreateDomainRequest {
    name: Option<String>,
    region: Option<String>,
    open_tracking: Option<bool>,
    click_tracking: Option<bool>,
    custom_return_path: Option<Value>,
    tracking_subdomain: Option<Value>,
    tls: Option<String>,
    capabilities: Option<Capabilities>,
}

/// `capabilities: {sending, receiving}`, each `enabled` or `disabled`.
#[derive(Deserialize)]
struct Capabilities {
    sending: Option<String>,
    receiving: Option<String>,
}

impl CreateDomainRequest {
    /// Core's request and the tracking settings to apply, or a 422 naming every field Tidings
    /// cannot honour.
    fn into_parts(self) -> Result<(AddDomainRequest, UpdateDomainTrackingRequest), Error> {
        let mut faults = Vec::new();
        if let Some(region) = self.region.as_deref()
            && !REGIONS.contains(&region)
        {
            faults.push(field("region", format!("must be one of {}", REGIONS.join(", "))));
        }
        if self.custom_return_path.as_ref().is_some_and(|v| !v.is_null()) {
            faults.push(field("custom_return_path", "is not supported by Tidings: leave it out"));
        }
        if self.tracking_subdomain.as_ref().is_some_and(|v| !v.is_null()) {
            faults.push(field("tracking_subdomain", "is not supported by Tidings: leave it out"));
        }
        match self.tls.as_deref() {
            None | Some("opportunistic") => {}
            Some(_) => faults.push(field("tls", "only `opportunistic` is supported by Tidings")),
        }
        if let Some(c) = &self.capabilities {
            if c.sending.as_deref().is_some_and(|s| s != "enabled") {
                faults.push(field("capabilities.sending", "only `enabled` is supported by Tidings"));
            }
            if c.receiving.as_deref().is_some_and(|s| s != "disabled") {
                faults.push(field("capabilities.receiving", "is not supported by Tidings: leave it `disabled`"));
            }
        }
        if !faults.is_empty() {
            return Err(Error::Validation { fields: faults });
        }
        let tracking = UpdateDomainTrackingRequest {
            open_tracking: self.open_tracking,
            click_tracking: self.click_tracking,
            inbound: None,
        };
        Ok((AddDomainRequest { domain: self.name }, tracking))
    }
}

fn field(name: &str, message: impl Into<String>) -> tidings_core::FieldError {
    tidings_core::FieldError::new(name, message)
}

/// A domain's status in Resend's words: a domain never checked is `not_started`.
fn domain_status(status: DomainStatus) -> &'static str {
    match status {
        DomainStatus::Pending => "not_started",
        DomainStatus::Verified => "verified",
        DomainStatus::PartiallyVerified => "partially_verified",
        DomainStatus::Failed => "failed",
    }
}

/// A record's status in Resend's words.
fn record_status(status: RecordStatus) -> &'static str {
    match status {
        RecordStatus::Pending => "not_started",
        RecordStatus::Verified => "verified",
        RecordStatus::Failed => "failed",
    }
}

/// What a record is for, as Resend's `record` names it (both DKIM keys are `DKIM`; Resend
/// calls its return-path subdomain's `MX` and `TXT` both `SPF`).
fn record_name(kind: RecordKind) -> &'static str {
    match kind {
        RecordKind::Spf | RecordKind::ReturnPathMx | RecordKind::ReturnPathSpf => "SPF",
        RecordKind::Dkim | RecordKind::Dkim2 => "DKIM",
        RecordKind::Dmarc => "DMARC",
        // Resend names its receiving MX record so.
        RecordKind::InboundMx => "Inbound",
    }
}

/// One record as Resend writes it. `ttl` is a string in Resend's shape (`"Auto"` there; the
/// seconds here). `name` is fully qualified. `priority` only for an MX record (the return
/// path's).
#[derive(Serialize)]
struct RecordResponse {
    record: &'static str,
    name: String,
    #[serde(rename = "type")]
    record_type: String,
    value: String,
    ttl: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<u16>,
}

impl From<DnsRecord> for RecordResponse {
    fn from(r: DnsRecord) -> Self {
        Self {
            record: record_name(r.kind),
            priority: r.priority,
            status: record_status(r.status),
            ttl: r.ttl.to_string(),
            record_type: r.record_type,
            name: r.name,
            value: r.value,
        }
    }
}

/// Resend's domain object: with `object` and `records` from get, with `records` from create,
/// without either in a list.
#[derive(Serialize)]
struct DomainResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<&'static str>,
    id: String,
    name: String,
    status: &'static str,
    created_at: String,
    region: &'static str,
    capabilities: Value,
    open_tracking: bool,
    click_tracking: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    records: Option<Vec<RecordResponse>>,
}

impl DomainResponse {
    fn listed(d: Domain) -> Self {
        Self {
            object: None,
            id: d.id.to_string(),
            name: d.name.to_string(),
            status: domain_status(d.status),
            created_at: d.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            region: REGION,
            capabilities: json!({ "sending": "enabled", "receiving": "disabled" }),
            open_tracking: d.open_tracking,
            click_tracking: d.click_tracking,
            records: None,
        }
    }

    fn with_records(d: Domain) -> Self {
        let records = published_records(&d).cloned().map(RecordResponse::from).collect();
        Self { records: Some(records), ..Self::listed(d) }
    }
}

/// The records to keep published: all but those of retired DKIM pairs (see the module docs).
fn published_records(d: &Domain) -> impl Iterator<Item = &DnsRecord> {
    d.records.iter().filter(|r| d.dkim_record_state(r).is_none_or(|(_, state)| state != DkimKeyState::Retired))
}

type Result<T, E = ResendError> = std::result::Result<T, E>;

/// `POST /resend/domains`: 201 with the records to publish. Open and click tracking, when
/// given, are set right after the domain is added (as `PATCH /v1/domains/{id}` does).
pub(super) async fn create_domain(
    State(state): State<ApiState>,
    Resend(who): Caller,
    ResendBody(ApiJson(req)): ResendBody<ApiJson<CreateDomainRequest>>,
) -> Result<Response> {
    let (add, tracking) = req.into_parts()?;
    let mut domain = state.core.domains().add(&who.0, add).await.map_err(|e| renamed(e, "domain", "name"))?;
    if tracking.open_tracking.is_some() || tracking.click_tracking.is_some() {
        domain = state.core.domains().update_tracking(&who.0, domain.id, tracking).await?;
    }
    Ok((StatusCode::CREATED, Json(DomainResponse::with_records(domain))).into_response())
}

/// `GET /resend/domains?limit&after`: newest first.
pub(super) async fn list_domains(
    State(state): State<ApiState>,
    Resend(who): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Response> {
    let params = super::paging::forward_page(raw.as_deref())?;
    let listed = state.core.domains().list(&who.0, params).await?;
    let data = listed.items.into_iter().map(DomainResponse::listed).collect::<Vec<_>>();
    Ok(Json(json!({ "object": "list", "has_more": listed.has_more, "data": data })).into_response())
}

/// `GET /resend/domains/{id}`.
pub(super) async fn get_domain(
    State(state): State<ApiState>,
    Resend(who): Caller,
    Resend(IdPath(id)): Resend<IdPath<DomainId>>,
) -> Result<Response> {
    let domain = state.core.domains().get(&who.0, id).await?;
    let body = DomainResponse { object: Some("domain"), ..DomainResponse::with_records(domain) };
    Ok(Json(body).into_response())
}

/// `POST /resend/domains/{id}/verify`: checks the records now (Resend starts a check and
/// answers at once; Tidings' check is done when this answers, so a `get` shows its result).
pub(super) async fn verify_domain(
    State(state): State<ApiState>,
    Resend(who): Caller,
    Resend(IdPath(id)): Resend<IdPath<DomainId>>,
) -> Result<Response> {
    let domain = state.core.domains().verify(&who.0, id).await?;
    Ok(Json(json!({ "object": "domain", "id": domain.id.to_string() })).into_response())
}

/// `DELETE /resend/domains/{id}`.
pub(super) async fn remove_domain(
    State(state): State<ApiState>,
    Resend(who): Caller,
    Resend(IdPath(id)): Resend<IdPath<DomainId>>,
) -> Result<Response> {
    state.core.domains().delete(&who.0, id).await?;
    Ok(Json(json!({ "object": "domain", "id": id.to_string(), "deleted": true })).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(body: Value) -> std::result::Result<(AddDomainRequest, UpdateDomainTrackingRequest), Error> {
        serde_json::from_value::<CreateDomainRequest>(body).unwrap().into_parts()
    }

    #[test]
    fn resends_create_fields_map_or_are_refused_by_name() {
        let (add, tracking) = parts(json!({ "name": "a.example", "region": "eu-west-1", "open_tracking": true,
            "tls": "opportunistic", "capabilities": { "sending": "enabled", "receiving": "disabled" } }))
        .unwrap();
        assert_eq!(add.domain.as_deref(), Some("a.example"));
        assert_eq!((tracking.open_tracking, tracking.click_tracking), (Some(true), None));
        let refused = parts(json!({ "name": "a.example", "region": "mars-1", "custom_return_path": "bounce",
            "tls": "enforced", "tracking_subdomain": "t", "capabilities": { "receiving": "enabled" } }));
        let Err(Error::Validation { fields }) = refused else { panic!("refused: {refused:?}") };
        let named: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(named, ["region", "custom_return_path", "tracking_subdomain", "tls", "capabilities.receiving"]);
    }

    #[test]
    fn statuses_read_as_resends() {
        assert_eq!(domain_status(DomainStatus::Pending), "not_started");
        assert_eq!(domain_status(DomainStatus::PartiallyVerified), "partially_verified");
        assert_eq!(record_status(RecordStatus::Failed), "failed");
        assert_eq!(record_name(RecordKind::Dkim2), "DKIM");
    }

    #[test]
    fn a_rotation_lists_every_pair_to_keep_published_and_leaves_retired_ones_out() {
        let mut domain = tidings_testing::fixtures::domain(
            tidings_core::ids::WorkspaceId(tidings_testing::fixtures::ulid()),
            "rotate.example.com",
        );
        let template = domain.records[1].clone();
        let record = |selector: &str, kind| DnsRecord {
            kind,
            name: format!("{selector}._domainkey.rotate.example.com"),
            ..template.clone()
        };
        let mut pending = domain.dkim.clone();
        (pending.rsa_selector, pending.ed25519_selector) = ("tdpr".into(), "tdpe".into());
        domain.dkim_rotation.pending = Some(pending);
        domain.dkim_rotation.retired.push(tidings_core::model::RetiredDkimKeys {
            rsa_selector: "tdor".into(),
            rsa_public: "AAAA".into(),
            ed25519_selector: "tdoe".into(),
            ed25519_public: "AAAA".into(),
            retired_at: domain.created_at,
            drop_at: domain.created_at,
        });
        for (selector, kind) in [("tdpr", RecordKind::Dkim), ("tdpe", RecordKind::Dkim2)] {
            domain.records.push(record(selector, kind));
        }
        for (selector, kind) in [("tdor", RecordKind::Dkim), ("tdoe", RecordKind::Dkim2)] {
            domain.records.push(record(selector, kind));
        }
        let names: Vec<String> =
            DomainResponse::with_records(domain).records.unwrap().into_iter().map(|r| r.name).collect();
        assert_eq!(names.iter().filter(|n| n.contains("._domainkey.")).count(), 4, "{names:?}");
        assert!(names.iter().any(|n| n.starts_with("tdpr.")) && names.iter().any(|n| n.starts_with("tdpe.")));
        assert!(!names.iter().any(|n| n.starts_with("tdo")), "retired records are left out: {names:?}");
    }
}
