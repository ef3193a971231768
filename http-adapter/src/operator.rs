//! The operator's API (contract §12, "Visible and operable"; docs/api.md#operator-api):
//! `GET /v1/operator/sites` lists the direct-delivery sites with their limits and state,
//! `POST /v1/operator/sites/{site}/suspend` (`{"duration": "1h", "reason": "…"}`) and
//! `POST /v1/operator/sites/{site}/resume` act on one. Served only when the operator set a
//! token ([`HttpConfig::operator_token`](crate::HttpConfig)), to a client presenting it as
//! `Authorization: Bearer`; a missing or wrong token is a failed authentication (401, and
//! throttled per client address like a bad API key). Sites are the server's, not a
//! workspace's, so no API key reaches them.
//!
//! Not in the OpenAPI document: it is the operator's, not the API's users' (as `/metrics`
//! is not a `/v1` route), and off unless configured.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tidings_core::Error;
use tidings_core::delivery::{SiteControl, SiteView};
use tidings_core::error::FieldError;
use tidings_core::shaping::SiteKey;
use tidings_core::usecases::{AuthOutcome, AuthRefusal};

use crate::envelope::Success;
use crate::json::ApiJson;
use crate::{ApiError, ApiState};

/// The routes under `/v1/operator`.
pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/sites", get(list_sites))
        .route("/sites/{site}/suspend", post(suspend_site))
        .route("/sites/{site}/resume", post(resume_site))
}

/// The sites (`None` when the server does not deliver by site), if the token presented is
/// the operator's; else the answer to give.
async fn admitted(state: &ApiState, parts: &Parts) -> Result<Option<SiteControl>, ApiError> {
    let Some(token) = &state.config.operator_token else { return Err(ApiError::UnknownRoute) };
    let client = crate::auth::client_ip(parts);
    let presented = crate::auth::bearer(&parts.headers);
    match state.core.authenticate_metrics_scraper(&*state.limits, client, token, presented).await? {
        AuthOutcome::Admitted(()) => Ok(state.config.sites.clone()),
        AuthOutcome::Refused(AuthRefusal::Blocked(wait)) => Err(ApiError::TooManyAuthFailures(wait)),
        AuthOutcome::Refused(AuthRefusal::Missing | AuthRefusal::Invalid) => Err(ApiError::OperatorTokenRequired),
    }
}

/// A site's limits.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LimitsBody {
    connection_limit: u32,
    max_deliveries_per_connection: u32,
    max_message_rate: String,
    enable_tls: String,
}

/// A throttle.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ThrottleBody {
    max_message_rate: String,
    until: DateTime<Utc>,
    reason: String,
}

/// The last reply.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplyBody {
    reply: String,
    at: DateTime<Utc>,
}

/// One site.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SiteBody {
    site: String,
    limits: LimitsBody,
    /// Connection leases held, every node together.
    leases: u32,
    /// Mail waiting for the site (this node's count).
    waiting: u64,
    /// Deliveries under way on this node.
    in_flight: u32,
    /// Deliveries this node started in the last minute.
    admitted_last_minute: u64,
    suspended_until: Option<DateTime<Utc>>,
    suspend_reason: Option<String>,
    throttle: Option<ThrottleBody>,
    last_reply: Option<ReplyBody>,
}

impl From<SiteView> for SiteBody {
    fn from(view: SiteView) -> Self {
        let (suspended_until, suspend_reason) = view.suspended.map_or((None, None), |(u, r)| (Some(u), Some(r)));
        Self {
            site: view.site.to_string(),
            limits: LimitsBody {
                connection_limit: view.limits.connection_limit,
                max_deliveries_per_connection: view.limits.max_deliveries_per_connection,
                max_message_rate: view.limits.max_message_rate.to_string(),
                enable_tls: view.limits.tls.to_string(),
            },
            leases: view.leases,
            waiting: view.seen.waiting,
            in_flight: view.seen.in_flight,
            admitted_last_minute: view.seen.admitted_last_minute,
            suspended_until,
            suspend_reason,
            throttle: view.throttled.map(|(rate, until, reason)| ThrottleBody {
                max_message_rate: rate.to_string(),
                until,
                reason,
            }),
            last_reply: view.seen.last_reply.map(|r| ReplyBody { reply: r.reply, at: r.at }),
        }
    }
}

#[derive(Debug, Serialize)]
struct SiteList {
    sites: Vec<SiteBody>,
    /// Whether this server delivers by site (`mx` mode).
    shaping: bool,
}

async fn list_sites(State(state): State<ApiState>, parts: Parts) -> Response {
    let sites = match admitted(&state, &parts).await {
        Ok(sites) => sites,
        Err(e) => return e.into_response(),
    };
    let Some(sites) = sites else {
        return Success::<200, _>::new(
            "this server does not deliver by site",
            SiteList { sites: Vec::new(), shaping: false },
        )
        .into_response();
    };
    match sites.list(state.core.clock().now()).await {
        Ok(views) => {
            let list = SiteList { sites: views.into_iter().map(SiteBody::from).collect(), shaping: true };
            Success::<200, _>::new("the delivery sites", list).into_response()
        }
        Err(e) => ApiError::from(Error::from(e)).into_response(),
    }
}

/// `POST …/suspend`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SuspendBody {
    /// How long, as `30s`, `10m`, `2h`, `1d` (at most 7 days).
    duration: Option<String>,
    /// Why, for whoever looks at the site later.
    reason: Option<String>,
}

/// One site's state after a change.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SiteAnswer {
    site: String,
    suspended_until: Option<DateTime<Utc>>,
}

/// The sites and the one named `site`, for a suspend or resume by the operator: 409 when the
/// server does not deliver by site.
async fn acting_on(state: &ApiState, parts: &Parts, site: &str) -> Result<(SiteControl, SiteKey), ApiError> {
    let sites = admitted(state, parts).await?;
    let site = site_key(site)?;
    let sites = sites.ok_or(ApiError::Core(Error::Conflict(
        "this server does not deliver by site (TIDINGS_DELIVERY is not mx)".into(),
    )))?;
    Ok((sites, site))
}

fn site_key(text: &str) -> Result<SiteKey, ApiError> {
    SiteKey::parse(text).ok_or_else(|| {
        let message = "not a site: a shaping suffix such as `.google.com`, or MX host names joined by commas";
        ApiError::Core(Error::Validation { fields: vec![FieldError::new("site", message)] })
    })
}

async fn suspend_site(
    State(state): State<ApiState>,
    Path(site): Path<String>,
    parts: Parts,
    ApiJson(body): ApiJson<SuspendBody>,
) -> Response {
    let result = async {
        let (sites, site) = acting_on(&state, &parts, &site).await?;
        // The rules (1 s to 7 days, a reason of at most 500 characters) are core's, shared
        // with the dashboard's operator pages.
        let now = state.core.clock().now();
        let until = sites
            .suspend_for(&site, body.duration.as_deref(), body.reason.as_deref(), now)
            .await
            .map_err(ApiError::from)?;
        Ok::<_, ApiError>(Success::<200, _>::new(
            "site suspended",
            SiteAnswer { site: site.to_string(), suspended_until: Some(until) },
        ))
    }
    .await;
    match result {
        Ok(answer) => answer.into_response(),
        Err(e) => e.into_response(),
    }
}

async fn resume_site(State(state): State<ApiState>, Path(site): Path<String>, parts: Parts) -> Response {
    let result = async {
        let (sites, site) = acting_on(&state, &parts, &site).await?;
        let now = state.core.clock().now();
        sites.resume(&site, now).await.map_err(|e| ApiError::from(Error::from(e)))?;
        Ok::<_, ApiError>(Success::<200, _>::new(
            "site resumed",
            SiteAnswer { site: site.to_string(), suspended_until: None },
        ))
    }
    .await;
    match result {
        Ok(answer) => answer.into_response(),
        Err(e) => e.into_response(),
    }
}
