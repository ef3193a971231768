//! The overview's chart, drawn on the server as SVG: one stacked bar per hour, one segment
//! per outcome (classes `o-<outcome>`, coloured by the stylesheet: no inline style). Each
//! segment has a `<title>` with its hour, outcome and count, and a table beside the chart
//! carries the same numbers for screen readers and for reading without a mouse.

use maud::{Markup, html};
use tidings_core::usecases::{HourCounts, Outcome};

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
