//! The overview's charts, drawn on the server as SVG: one stacked bar per period, one
//! segment per outcome (classes `o-<outcome>`, coloured by the stylesheet: no inline style).
//! Each segment has a `<title>` with its period, outcome and count; the legend and the cards
//! above the chart carry the numbers in text. [`activity`] draws the workspace's counters
//! (each segment a link to the messages list of its status and period), [`hourly`] a `send`
//! key's own messages.

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use tidings_core::activity::ActivityCounts;
use tidings_core::usecases::{HourCounts, Outcome, OverviewRange, Period};

use crate::pages::overview::messages_link;

/// Width of the drawing, in user units (it scales to the page).
pub(crate) const WIDTH: f64 = 720.0;
/// Height of the drawing.
pub(crate) const HEIGHT: f64 = 220.0;
const LEFT: f64 = 40.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 24.0;

/// The chart of `hours` (oldest first).
pub(crate) fn hourly(hours: &[HourCounts]) -> Markup {
    let max = hours.iter().map(|h| h.counts.total()).max().unwrap_or(0).max(1);
    let plot_height = HEIGHT - TOP - BOTTOM;
    let slot = (WIDTH - LEFT - RIGHT) / hours.len().max(1) as f64;
    let bar = slot * 0.7;
    let scale = plot_height / max as f64;
    let base = HEIGHT - BOTTOM;
    html! {
        svg.chart #hourly-chart xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
            role="img" aria-labelledby="chart-title" {
            title #chart-title { "Messages per hour over the last " (hours.len()) " hours, by outcome" }
            line.axis x1=(LEFT) y1=(base) x2=(WIDTH - RIGHT) y2=(base) {}
            line.axis x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(base) {}
            text x=(LEFT - 6.0) y=(base) text-anchor="end" { "0" }
            text x=(LEFT - 6.0) y=(TOP + 8.0) text-anchor="end" { (max) }
            @for (i, hour) in hours.iter().enumerate() {
                @let x = LEFT + slot * i as f64 + (slot - bar) / 2.0;
                g data-hour=(hour.start.to_rfc3339()) {
                    @for (outcome, y, height) in segments(hour, base, scale) {
                        rect class={ "o-" (outcome.as_str()) } data-outcome=(outcome.as_str())
                            data-count=(hour.counts.get(outcome))
                            x=(fmt(x)) y=(fmt(y)) width=(fmt(bar)) height=(fmt(height)) {
                            title { (hour.start.format("%H:00")) " UTC: " (hour.counts.get(outcome)) " " (outcome.as_str()) }
                        }
                    }
                }
                @if i % 3 == 0 {
                    text x=(fmt(x + bar / 2.0)) y=(HEIGHT - 8.0) text-anchor="middle" { (hour.start.format("%H")) }
                }
            }
        }
        ul.legend {
            @for outcome in Outcome::ALL {
                li { span class={ "swatch o-" (outcome.as_str()) } {} (outcome.as_str()) }
            }
        }
    }
}

/// One kind of segment of a bar of [`activity`].
struct Segment {
    /// The outcome class (`o-<class>`), which gives the colour.
    class: &'static str,
    /// The word in titles and the legend.
    word: &'static str,
    /// The status its link filters the messages list on.
    status: &'static str,
    /// Its count in a period.
    count: fn(&ActivityCounts) -> u64,
}

/// What a bar of [`activity`] stacks, bottom up.
const SEGMENTS: [Segment; 5] = [
    Segment { class: "delivered", word: "delivered", status: "Delivered", count: |c| c.delivered },
    Segment { class: "bounced", word: "bounced", status: "Bounced", count: |c| c.bounced() },
    Segment { class: "complained", word: "complained", status: "Complained", count: |c| c.complained },
    Segment { class: "failed", word: "failed", status: "Failed", count: |c| c.failed },
    Segment { class: "other", word: "suppressed", status: "Suppressed", count: |c| c.suppressed },
];

/// The non-empty segments of one period's bar, bottom up: kind, count, top edge, height.
fn stacked(counts: &ActivityCounts, base: f64, scale: f64) -> Vec<(&'static Segment, u64, f64, f64)> {
    let mut top = base;
    let mut out = Vec::new();
    for segment in &SEGMENTS {
        let n = (segment.count)(counts);
        if n == 0 {
            continue;
        }
        let height = n as f64 * scale;
        top -= height;
        out.push((segment, n, top, height));
    }
    out
}

/// The chart of the workspace's `periods` (oldest first) over `range`.
pub(crate) fn activity(periods: &[Period], range: OverviewRange) -> Markup {
    let total = |c: &ActivityCounts| SEGMENTS.iter().map(|s| (s.count)(c)).sum::<u64>();
    let max = periods.iter().map(|p| total(&p.counts)).max().unwrap_or(0).max(1);
    let plot_height = HEIGHT - TOP - BOTTOM;
    let slot = (WIDTH - LEFT - RIGHT) / periods.len().max(1) as f64;
    let bar = slot * 0.7;
    let scale = plot_height / max as f64;
    let base = HEIGHT - BOTTOM;
    let hourly = range == OverviewRange::Day;
    let label =
        |at: DateTime<Utc>| if hourly { at.format("%H:00").to_string() } else { at.format("%b %d").to_string() };
    let every = if hourly {
        3
    } else if periods.len() > 10 {
        5
    } else {
        1
    };
    html! {
        svg.chart #activity-chart xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
            role="img" aria-labelledby="activity-chart-title" {
            title #activity-chart-title {
                "Recipients " @if hourly { "per hour" } @else { "per day" } " over the last " (range.words()) ", by outcome"
            }
            line.axis x1=(LEFT) y1=(base) x2=(WIDTH - RIGHT) y2=(base) {}
            line.axis x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(base) {}
            text x=(LEFT - 6.0) y=(base) text-anchor="end" { "0" }
            text x=(LEFT - 6.0) y=(TOP + 8.0) text-anchor="end" { (max) }
            @for (i, period) in periods.iter().enumerate() {
                @let x = LEFT + slot * i as f64 + (slot - bar) / 2.0;
                g data-period=(period.start.to_rfc3339()) {
                    @for (segment, n, y, height) in stacked(&period.counts, base, scale) {
                        a href=(messages_link(Some(segment.status), period.start, period.end)) {
                            rect class={ "o-" (segment.class) } data-outcome=(segment.word) data-count=(n)
                                x=(fmt(x)) y=(fmt(y)) width=(fmt(bar)) height=(fmt(height)) {
                                title { (label(period.start)) " UTC: " (n) " " (segment.word) }
                            }
                        }
                    }
                }
                @if i % every == 0 {
                    text x=(fmt(x + bar / 2.0)) y=(HEIGHT - 8.0) text-anchor="middle" {
                        @if hourly { (period.start.format("%H")) } @else { (period.start.format("%d")) }
                    }
                }
            }
        }
        ul.legend {
            @for segment in &SEGMENTS {
                li { span class={ "swatch o-" (segment.class) } {} (segment.word) }
            }
        }
    }
}

/// The stacked segments of one hour, bottom up: outcome, top edge, height; empty outcomes
/// are left out.
fn segments(hour: &HourCounts, base: f64, scale: f64) -> Vec<(Outcome, f64, f64)> {
    let mut top = base;
    let mut out = Vec::new();
    for outcome in Outcome::ALL {
        let n = hour.counts.get(outcome);
        if n == 0 {
            continue;
        }
        let height = n as f64 * scale;
        top -= height;
        out.push((outcome, top, height));
    }
    out
}

/// One decimal is plenty for a drawing 720 units wide.
fn fmt(v: f64) -> String {
    format!("{v:.1}")
}
