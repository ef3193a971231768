//! The reputation guard's banner on the overview (contract §12): each scope over a warning
//! threshold or paused, why, since when, and a button that resumes a paused one.

use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};
use tidings_core::ids::DomainId;
use tidings_core::usecases::ScopeFigures;

use crate::DashboardState;
use crate::error::{OrPage, PageResult};
use crate::form::Posted;
use crate::layout::{action_button, badge, maybe_time};
use crate::pages::PageId;
use crate::session::{Viewer, see_other};

/// The banner when a scope is warned or paused; else one line saying where the workspace
/// stands (its rates as the guard counts them).
pub(super) fn banner(viewer: &Viewer, standings: &[ScopeFigures]) -> Markup {
    let flagged: Vec<&ScopeFigures> = standings.iter().filter(|s| s.state != "good").collect();
    let workspace = standings.iter().find(|s| s.domain_id.is_none());
    html! {
        @if flagged.is_empty() {
            @if let Some(w) = workspace {
                p #reputation-good .muted {
                    "Sending reputation: good. "
                    @if w.volume > 0 {
                        "Hard bounces " (percent(w.bounce_percent())) " and complaints "
                        (percent(w.complaint_percent())) " of " (w.volume) " recipients delivered or bounced in the guard's window"
                        @if !w.judged { " (too few yet to judge)" }
                        "."
                    } @else {
                        "No mail delivered or bounced in the guard's window yet."
                    }
                }
            }
        } @else {
            section #reputation .banner {
                h2 { "Sending reputation" }
                ul {
                    @for s in &flagged {
                        li.(s.state) {
                            @let whose = s.domain.as_deref().map_or("This workspace".to_owned(), |d| format!("Domain {d}"));
                            @if s.state == "paused" {
                                (badge("paused", "bad")) " " strong { (whose) " cannot send." } " "
                            } @else {
                                (badge("warning", "warn")) " " strong { (whose) " is close to being paused." } " "
                            }
                            (s.reason.clone().unwrap_or_default()) ", since " (maybe_time(s.since)) ". "
                            @if s.state == "paused" {
                                "New sends are refused and queued mail is held (not bounced). Clean the list, then resume: "
                                (action_button(viewer, &resume_action(s.domain_id), "action resume", "Resume sending"))
                            } @else {
                                "Mailbox providers act on these rates: remove addresses that bounce or complain before sending more."
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A rate as the banner shows it.
fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "–".to_owned(), |r| format!("{r:.2} %"))
}

/// Where the resume button of a scope posts.
fn resume_action(domain: Option<DomainId>) -> String {
    match domain {
        Some(id) => format!("/domains/{id}/resume"),
        None => "/reputation/resume".to_owned(),
    }
}

/// `POST /domains/{id}/resume`: resumes the domain; 303 back to the overview.
pub(crate) async fn resume_domain(
    State(state): State<DashboardState>,
    PageId(id): PageId<DomainId>,
    posted: Posted,
) -> PageResult<Response> {
    state.core.reputation().resume_domain(posted.viewer.principal(), id).await.or_page(&posted.viewer)?;
    Ok(see_other("/overview"))
}

/// `POST /reputation/resume`: resumes the workspace; 303 back to the overview.
pub(crate) async fn resume_workspace(State(state): State<DashboardState>, posted: Posted) -> PageResult<Response> {
    state.core.reputation().resume_workspace(posted.viewer.principal()).await.or_page(&posted.viewer)?;
    Ok(see_other("/overview"))
}
