//! `GET /overview`: counts by outcome, the hourly chart, the queue, and what needs
//! attention (core's `overview` use case decides all of it).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::usecases::{OVERVIEW_READ_CAP, Outcome, OutcomeCounts, Overview};

use crate::DashboardState;
use crate::error::{OrPage, PageResult};
use crate::layout::{badge, maybe_time, page};
use crate::session::{Signed, Viewer};

/// `GET /overview`.
pub(crate) async fn show(State(state): State<DashboardState>, Signed(viewer): Signed) -> PageResult<Response> {
    let overview = state.core.overview(viewer.principal()).await.or_page(&viewer)?;
    Ok(render(&viewer, &overview).into_response())
}

/// The page for `overview`.
pub(crate) fn render(viewer: &Viewer, overview: &Overview) -> Markup {
    let own = viewer.scope_word() == "send";
    let body = html! {
        @if own {
            p.notice { "You signed in with a send key: these are the messages this key sent." }
        }
        @if !overview.complete {
            p.notice #partial {
                "More than " (OVERVIEW_READ_CAP) " messages in the last 7 days: the counts below are lower bounds (at least)."
            }
        }
        h2 { "Last 24 hours" }
        (counts("day", &overview.last_day, overview.complete))
        h2 { "Last 7 days" }
        (counts("week", &overview.last_week, overview.complete))
        h2 { "Messages per hour" }
        section { (crate::chart::hourly(&overview.hours)) }
        h2 { "Queue" }
        section #queue {
            p {
                span.n #queue-total { (overview.queue.total) } " messages waiting for a delivery attempt, "
                span #queue-due { (overview.queue.due) } " of them due now."
            }
            p.muted { "The queue of the whole server, all workspaces together." }
        }
        @if let Some(hooks) = &overview.failing_webhooks {
            h2 { "Failing webhook endpoints" }
            section #failing-webhooks {
                @if hooks.is_empty() {
                    p.none { "None: every endpoint's last deliveries went through." }
                } @else {
                    ul {
                        @for hook in hooks {
                            li {
                                a href={ "/webhooks/" (hook.id) } { (hook.url.as_str()) } " "
                                @if let Some(reason) = &hook.disabled_reason {
                                    (badge("disabled", "bad")) " " (reason)
                                } @else {
                                    (badge("failing", "bad")) " since " (maybe_time(hook.failing_since))
                                }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(domains) = &overview.unverified_domains {
            h2 { "Domains not verified" }
            section #unverified-domains {
                @if domains.is_empty() {
                    p.none { "None." }
                } @else {
                    ul {
                        @for domain in domains {
                            li {
                                a href={ "/domains/" (domain.id) } { (domain.name.to_string()) } " "
                                (badge(&format!("{:?}", domain.status), "wait"))
                            }
                        }
                    }
                }
            }
        }
    };
    page(Some(viewer), "Overview", body)
}

/// The outcome counts of one window.
fn counts(window: &str, counts: &OutcomeCounts, complete: bool) -> Markup {
    html! {
        div.counts id={ "counts-" (window) } {
            @for outcome in Outcome::ALL {
                div.count data-outcome=(outcome.as_str()) {
                    span.n { @if !complete { "≥ " } (counts.get(outcome)) }
                    span.w title=(label(outcome)) { span class={ "swatch o-" (outcome.as_str()) } {} (outcome.as_str()) }
                }
            }
        }
    }
}

fn label(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Delivered => "delivered",
        Outcome::Bounced => "bounced",
        Outcome::Complained => "complained",
        Outcome::Deferred => "deferred",
        Outcome::Failed => "failed",
        Outcome::Other => "queued, sent, scheduled, suppressed or canceled",
    }
}
