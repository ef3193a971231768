//! `GET /overview?range=24h|7d|30d`: for a `full` key, the workspace's activity over the
//! range (cards with the rates coloured against the thresholds mailbox providers act on, a
//! table per sending domain, a chart by hour or day, every figure a link to the messages
//! list filtered to it); for a `send` key, its own messages by outcome. Then the queue and
//! what needs attention. Core's `overview` use case decides all of it.

mod activity;
mod own;
pub(crate) mod reputation;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use tidings_core::model::KeyScope;
use tidings_core::usecases::{Overview, OverviewRange, ScopeFigures};

use crate::DashboardState;
use crate::error::{OrPage, PageResult};
use crate::layout::{badge, maybe_time, page};
use crate::pages::{query_pairs, query_value};
use crate::session::{Signed, Viewer};

/// `GET /overview`. A missing or unknown `range` shows the default (7 days).
pub(crate) async fn show(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let pairs = query_pairs(raw.as_deref());
    let range = query_value(&pairs, "range").and_then(|r| OverviewRange::parse(&r)).unwrap_or_default();
    let overview = state.core.overview(viewer.principal(), range).await.or_page(&viewer)?;
    // Where sending stands is a full key's business, as the rates are.
    let standings = match viewer.principal().scope {
        KeyScope::Full => state.core.reputation().status(viewer.principal()).await.or_page(&viewer)?,
        KeyScope::Send => Vec::new(),
    };
    Ok(render(&viewer, &overview, &standings).into_response())
}

/// The address of the messages list filtered to `status` (all statuses if `None`) and to
/// messages created from `start` until `end`: the parameters of the list's date filter,
/// RFC 3339 in UTC to the second.
pub(crate) fn messages_link(status: Option<&str>, start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    let format = "%Y-%m-%dT%H:%M:%SZ";
    let dates = format!("createdAfter={}&createdBefore={}", start.format(format), end.format(format));
    match status {
        Some(status) => format!("/messages?status={status}&{dates}"),
        None => format!("/messages?{dates}"),
    }
}

/// The page for `overview`.
pub(crate) fn render(viewer: &Viewer, overview: &Overview, standings: &[ScopeFigures]) -> Markup {
    let body = html! {
        (reputation::banner(viewer, standings))
        @if let Some(activity) = &overview.activity {
            (activity::section(activity, overview.range, overview.at))
        }
        @if let Some(own) = &overview.own {
            (own::section(own))
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_name_the_status_and_the_period_in_rfc_3339_utc() {
        let start = DateTime::parse_from_rfc3339("2026-12-05T00:00:00Z").unwrap().with_timezone(&Utc);
        let end = DateTime::parse_from_rfc3339("2026-12-06T00:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(
            messages_link(Some("Bounced"), start, end),
            "/messages?status=Bounced&createdAfter=2026-12-05T00:00:00Z&createdBefore=2026-12-06T00:00:00Z"
        );
        assert_eq!(
            messages_link(None, start, end),
            "/messages?createdAfter=2026-12-05T00:00:00Z&createdBefore=2026-12-06T00:00:00Z"
        );
    }
}
