//! A `send` key's part of the overview: its own messages by outcome (core's `own_messages`),
//! for 24 hours and 7 days, and per hour.

use maud::{Markup, html};
use tidings_core::usecases::{OVERVIEW_READ_CAP, Outcome, OutcomeCounts, OwnMessages};

/// The section for a `send` key.
pub(super) fn section(own: &OwnMessages) -> Markup {
    html! {
        p.notice { "You signed in with a send key: these are the messages this key sent. Rates are the workspace's and need a full key." }
        @if !own.complete {
            p.notice #partial {
                "More than " (OVERVIEW_READ_CAP) " messages in the last 7 days: the counts below are lower bounds (at least)."
            }
        }
        h2 { "Last 24 hours" }
        (counts("day", &own.last_day, own.complete))
        h2 { "Last 7 days" }
        (counts("week", &own.last_week, own.complete))
        h2 { "Messages per hour" }
        section { (crate::chart::hourly(&own.hours)) }
    }
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
