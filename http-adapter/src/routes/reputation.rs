//! The reputation guard (docs/api.md#reputation, contract §12): where the workspace and its
//! domains stand, and the resumes that lift a pause.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tidings_core::ids::DomainId;
use tidings_core::usecases::ScopeFigures;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::table::RouteTable;
use super::wire::Ulid;
use crate::auth::Authed;
use crate::envelope::Success;
use crate::openapi::failures::InsufficientScope;
use crate::path::IdPath;
use crate::{ApiResult, ApiState};

/// where one scope stands: the whole workspace (its domains not themselves warned or paused),
/// or one sending domain
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScopeStanding {
    /// `workspace` or `domain`
    #[schema(example = "domain")]
    scope: String,
    /// the domain's id, for a domain
    #[schema(value_type = Option<Ulid>)]
    domain_id: Option<DomainId>,
    /// the domain's name, for a domain
    domain: Option<String>,
    /// `good`, `warning` or `paused`
    #[schema(example = "good")]
    state: String,
    /// recipients delivered or bounced in the window (since the last resume, if later)
    volume: u64,
    /// hard bounces among them
    hard_bounced: u64,
    /// recipients delivered
    delivered: u64,
    /// complaints among them
    complained: u64,
    /// hard bounces over `volume`, in percent; null with no volume
    bounce_rate: Option<f64>,
    /// complaints over `delivered`, in percent; null with nothing delivered
    complaint_rate: Option<f64>,
    /// whether `volume` reaches the minimum the guard judges (`TIDINGS_REPUTATION_MIN_VOLUME`)
    judged: bool,
    /// what warned or paused it, in words
    reason: Option<String>,
    /// since when it is warned or paused
    since: Option<DateTime<Utc>>,
    /// the call that resumes it, when paused
    resume: Option<String>,
}

impl From<ScopeFigures> for ScopeStanding {
    fn from(f: ScopeFigures) -> Self {
        Self {
            bounce_rate: f.bounce_percent(),
            complaint_rate: f.complaint_percent(),
            scope: f.scope.to_owned(),
            domain_id: f.domain_id,
            domain: f.domain,
            state: f.state.to_owned(),
            volume: f.volume,
            hard_bounced: f.hard_bounced,
            delivered: f.delivered,
            complained: f.complained,
            judged: f.judged,
            reason: f.reason,
            since: f.since,
            resume: f.resume,
        }
    }
}

type StandingsOk = Success<200, Vec<ScopeStanding>>;

fn standings(figures: Vec<ScopeFigures>) -> Vec<ScopeStanding> {
    figures.into_iter().map(ScopeStanding::from).collect()
}

/// `GET /v1/reputation`: the workspace's and each domain's rates and standing, judged now.
#[utoipa::path(
    get,
    path = "/v1/reputation",
    tag = "reputation",
    summary = "Bounce and complaint rates, and whether sending is paused",
    description = "The workspace first, then each domain with mail in the window (`TIDINGS_REPUTATION_WINDOW`, \
                   default 7 days), judged now against the warning and pause thresholds.",
    responses(
        (status = 200, description = "where each scope stands", body = inline(StandingsOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn get_reputation(State(state): State<ApiState>, Authed(who): Authed) -> ApiResult<StandingsOk> {
    let figures = state.core.reputation().status(&who).await?;
    Ok(Success::new("reputation", standings(figures)))
}

/// `POST /v1/reputation/resume`: lifts the workspace's pause.
#[utoipa::path(
    post,
    path = "/v1/reputation/resume",
    tag = "reputation",
    summary = "Resume sending from the workspace",
    description = "Lifts the workspace's pause (or warning); its rates then count mail from now on. A domain's \
                   own pause stays: resume it with `POST /v1/domains/{id}/resume`.",
    responses(
        (status = 200, description = "where each scope stands after the resume", body = inline(StandingsOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn resume_workspace(State(state): State<ApiState>, Authed(who): Authed) -> ApiResult<StandingsOk> {
    let figures = state.core.reputation().resume_workspace(&who).await?;
    Ok(Success::new("sending resumed", standings(figures)))
}

/// `POST /v1/domains/{id}/resume`: lifts the domain's pause.
#[utoipa::path(
    post,
    path = "/v1/domains/{id}/resume",
    tag = "reputation",
    summary = "Resume sending from a domain",
    description = "Lifts the domain's pause (or warning); its rates then count mail from now on, and its held \
                   mail leaves within a minute. 200 also when it was not paused.",
    responses(
        (status = 200, description = "where each scope stands after the resume", body = inline(StandingsOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn resume_domain(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<DomainId>,
) -> ApiResult<StandingsOk> {
    let figures = state.core.reputation().resume_domain(&who, id).await?;
    Ok(Success::new("sending resumed", standings(figures)))
}

/// The routes of this module.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .routes(routes!(get_reputation))
        .routes(routes!(resume_workspace))
        .routes(routes!(resume_domain))
}
