//! A `full` key's part of the overview: the range switch, the cards (delivered, bounce rate,
//! complaint rate, opens, clicks), the table per sending domain and the chart.
//!
//! A rate's level shows three ways, never by colour alone: the card's colour, a word with a
//! symbol in a badge ("✓ OK", "▲ Warning", "✖ Bad", "– No data") and the threshold in words.
//! The colours are the badges' (`ok`, `wait`, `bad`), which the browser tests hold to WCAG AA.

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use tidings_core::activity::rates::{BOUNCE_THRESHOLDS, COMPLAINT_THRESHOLDS, Level, Rate, Thresholds};
use tidings_core::usecases::{Activity, OverviewRange};

use super::messages_link;
use crate::layout::badge;

/// The section: what happened over `range`, read at `at`.
pub(super) fn section(activity: &Activity, range: OverviewRange, at: DateTime<Utc>) -> Markup {
    let (start, end) = match (activity.periods.first(), activity.periods.last()) {
        (Some(first), Some(last)) => (first.start, last.end),
        _ => (at, at),
    };
    let totals = &activity.totals;
    html! {
        nav #range aria-label="Range" {
            span.muted { "Show the last " }
            @for r in OverviewRange::ALL {
                @if r == range {
                    a.current href={ "/overview?range=" (r.as_str()) } aria-current="page" { (r.words()) }
                } @else {
                    a href={ "/overview?range=" (r.as_str()) } { (r.words()) }
                }
            }
        }
        h2 { "Last " (range.words()) }
        p.muted #range-note {
            "Per recipient, from " (start.format("%Y-%m-%d %H:%M")) " UTC until now, counted when each event happened; a link lists the messages created in the period."
        }
        div.cards #cards {
            (count_card("delivered", "Delivered", totals.delivered, Some("Delivered"), start, end,
                html! { "of " (totals.accepted) " accepted" }))
            (rate_card("bounce", "Bounce rate", Rate::bounce(totals), &BOUNCE_THRESHOLDS, Some("Bounced"), start, end,
                html! { (totals.hard_bounced) " hard bounces (" (totals.soft_bounced) " soft) of " (totals.delivered + totals.bounced()) " delivered or bounced" }))
            (rate_card("complaint", "Complaint rate", Rate::complaint(totals), &COMPLAINT_THRESHOLDS, Some("Complained"), start, end,
                html! { (totals.complained) " complaints of " (totals.delivered) " delivered" }))
            (engagement_card("opens", "Opens", totals.opened, Rate::open(totals), "open", start, end))
            (engagement_card("clicks", "Clicks", totals.clicked, Rate::click(totals), "click", start, end))
        }
        p.muted { "Opens and clicks count each recipient's first, and only mail sent with open or click tracking; mail clients that load images ahead of the reader count as opens." }
        h3 { "By sending domain" }
        (domains(activity))
        h3 { @if range == OverviewRange::Day { "By hour" } @else { "By day (UTC)" } }
        section { (crate::chart::activity(&activity.periods, range)) }
    }
}

/// A card with a count.
fn count_card(
    id: &str,
    title: &str,
    n: u64,
    status: Option<&str>,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    detail: Markup,
) -> Markup {
    html! {
        a.card.stat id={ "card-" (id) } href=(messages_link(status, start, end)) {
            span.w { (title) }
            span.n { (n) }
            span.detail { (detail) }
        }
    }
}

/// A card with a rate and its level against `thresholds`.
#[allow(clippy::too_many_arguments)]
fn rate_card(
    id: &str,
    title: &str,
    rate: Rate,
    thresholds: &Thresholds,
    status: Option<&str>,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    detail: Markup,
) -> Markup {
    let level = thresholds.level(rate);
    html! {
        a.card.stat class={ "level-" (level_class(level)) } id={ "card-" (id) } data-level=(level_class(level))
            href=(messages_link(status, start, end)) {
            span.w { (title) " " (level_badge(level)) }
            span.n { (percent(rate)) }
            span.detail { (detail) }
            span.threshold { (thresholds.source) "." }
        }
    }
}

/// A card with first opens or clicks and their rate over tracked deliveries.
fn engagement_card(
    id: &str,
    title: &str,
    n: u64,
    rate: Rate,
    what: &str,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Markup {
    html! {
        a.card.stat id={ "card-" (id) } href=(messages_link(None, start, end)) {
            span.w { (title) }
            span.n { (n) }
            span.detail {
                @match rate.percent() {
                    Some(_) => { (percent(rate)) " of " (rate.whole) " delivered with " (what) " tracking" }
                    None => { "no delivery with " (what) " tracking" }
                }
            }
        }
    }
}

/// The table per sending domain.
fn domains(activity: &Activity) -> Markup {
    html! {
        @if activity.domains.is_empty() {
            p.none #domains-none { "Nothing sent in this range." }
        } @else {
            div.scroll {
                table #domains {
                    thead { tr {
                        th { "Domain" } th { "Accepted" } th { "Delivered" } th { "Bounce rate" }
                        th { "Complaint rate" } th { "Opens" } th { "Clicks" }
                    } }
                    tbody {
                        @for d in &activity.domains {
                            tr data-domain=(d.domain.to_string()) {
                                td data-label="Domain" {
                                    @match &d.name {
                                        Some(name) => { a href={ "/domains/" (d.domain) } { (name.to_string()) } }
                                        None => { span.none { "deleted domain" } }
                                    }
                                }
                                td data-label="Accepted" { (d.counts.accepted) }
                                td data-label="Delivered" { (d.counts.delivered) }
                                td data-label="Bounce rate" { (rate_cell(Rate::bounce(&d.counts), &BOUNCE_THRESHOLDS)) }
                                td data-label="Complaint rate" { (rate_cell(Rate::complaint(&d.counts), &COMPLAINT_THRESHOLDS)) }
                                td data-label="Opens" { (engagement_cell(Rate::open(&d.counts))) }
                                td data-label="Clicks" { (engagement_cell(Rate::click(&d.counts))) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn rate_cell(rate: Rate, thresholds: &Thresholds) -> Markup {
    let level = thresholds.level(rate);
    html! { span.rate data-level=(level_class(level)) { (percent(rate)) } " " (level_badge(level)) }
}

fn engagement_cell(rate: Rate) -> Markup {
    html! { (rate.part) @if rate.percent().is_some() { " (" (percent(rate)) ")" } }
}

/// A rate as people read it: two decimals under 1 %, one above; a dash for none.
fn percent(rate: Rate) -> String {
    match rate.percent() {
        None => "–".to_owned(),
        Some(p) if p > 0.0 && p < 1.0 => format!("{p:.2} %"),
        Some(p) => format!("{p:.1} %"),
    }
}

/// The level's class and `data-level` value.
fn level_class(level: Level) -> &'static str {
    match level {
        Level::NoData => "none",
        Level::Ok => "ok",
        Level::Warn => "warn",
        Level::Bad => "bad",
    }
}

/// The level as a badge: a symbol and a word, so that colour is never the only cue.
fn level_badge(level: Level) -> Markup {
    match level {
        Level::NoData => badge("– No data", "level-none"),
        Level::Ok => badge("✓ OK", "ok"),
        Level::Warn => badge("▲ Warning", "wait"),
        Level::Bad => badge("✖ Bad", "bad"),
    }
}
