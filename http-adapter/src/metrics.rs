//! Prometheus metrics: [`Metrics`] counts what core reports through its
//! [`EventObserver`] port and what this adapter serves, and renders it all in the text
//! exposition format (version 0.0.4) for `GET /metrics`.
//!
//! Hand-written rather than taken from `prometheus-client` or `metrics`: the set of metrics
//! is fixed and small, the format is a few lines per family, and the crates bring a registry
//! abstraction, a derive macro or a global recorder (and `prometheus-client` speaks
//! OpenMetrics, whose `_total`/`# EOF` conventions differ from the 0.0.4 text format asked
//! for). Counters are per process: on several nodes each exports its own and Prometheus sums
//! them (`sum by (type) (rate(tidings_message_events_total[5m]))`).
//!
//! Label values are bounded: event types and outcomes are enums, HTTP routes are the router's
//! templates (`/v1/messages/{id}`, never the raw path; unknown paths are `unmatched`) and
//! methods outside the API's are `other`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use tidings_core::model::{BounceType, EventType, Message, MessageEvent};
use tidings_core::ports::{EventObserver, PendingMessages, WebhookAttemptResult, delivery_latency};

/// Buckets of the delivery latency (accepted → Delivered), in seconds: from a fast local
/// relay to a day of retries.
const LATENCY_BUCKETS: [f64; 15] =
    [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 21600.0, 86400.0];
/// Buckets of the HTTP request duration, in seconds.
const HTTP_BUCKETS: [f64; 11] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];
/// How long a queue-depth count is reused: scrapes every second must not each count.
pub const QUEUE_COUNT_TTL: Duration = Duration::from_secs(5);
/// The `Content-Type` of `GET /metrics`.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A counter family: one value per label-value tuple.
#[derive(Debug, Default)]
struct Counters(Mutex<BTreeMap<Vec<String>, u64>>);

impl Counters {
    fn add(&self, labels: Vec<String>) {
        *lock(&self.0).entry(labels).or_default() += 1;
    }

    /// Makes the series exist at 0, so a rate over it starts from the first scrape.
    fn touch(&self, labels: Vec<String>) {
        lock(&self.0).entry(labels).or_default();
    }
}

/// One histogram's buckets (non-cumulative), sum and count.
#[derive(Debug, Clone)]
struct Buckets {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// A histogram family with fixed `bounds`.
#[derive(Debug)]
struct Histograms {
    bounds: &'static [f64],
    series: Mutex<BTreeMap<Vec<String>, Buckets>>,
}

impl Histograms {
    fn new(bounds: &'static [f64]) -> Self {
        Self { bounds, series: Mutex::default() }
    }

    fn observe(&self, labels: Vec<String>, value: f64) {
        let mut series = lock(&self.series);
        let buckets =
            series.entry(labels).or_insert_with(|| Buckets { counts: vec![0; self.bounds.len()], sum: 0.0, count: 0 });
        if let Some(i) = self.bounds.iter().position(|bound| value <= *bound) {
            buckets.counts[i] += 1;
        }
        buckets.sum += value;
        buckets.count += 1;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update is one map write: a panic elsewhere cannot leave it half done.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// This process's metrics. Give it to core ([`tidings_core::usecases::Tidings::with_observer`])
/// and to the router ([`crate::ApiState::with_metrics`]).
#[derive(Debug)]
pub struct Metrics {
    accepted: Counters,
    message_events: Counters,
    bounces: Counters,
    delivery_latency: Histograms,
    webhook_attempts: Counters,
    http_requests: Counters,
    http_duration: Histograms,
    queue: tokio::sync::Mutex<Option<(Instant, PendingMessages)>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every counter at zero; every event type and bounce type already has its series.
    pub fn new() -> Self {
        let metrics = Self {
            accepted: Counters::default(),
            message_events: Counters::default(),
            bounces: Counters::default(),
            delivery_latency: Histograms::new(&LATENCY_BUCKETS),
            webhook_attempts: Counters::default(),
            http_requests: Counters::default(),
            http_duration: Histograms::new(&HTTP_BUCKETS),
            queue: tokio::sync::Mutex::new(None),
        };
        metrics.accepted.touch(vec![]);
        for event_type in EventType::ALL {
            metrics.message_events.touch(vec![event_type.as_str().to_owned()]);
        }
        for bounce in [BounceType::Hard, BounceType::Soft] {
            metrics.bounces.touch(vec![bounce_label(bounce).to_owned()]);
        }
        metrics
    }

    /// Counts one HTTP request answered with `status` after `elapsed`.
    pub fn observe_request(&self, method: &Method, route: &str, status: u16, elapsed: Duration) {
        let method = method_label(method).to_owned();
        self.http_requests.add(vec![method.clone(), route.to_owned(), status.to_string()]);
        self.http_duration.observe(vec![method, route.to_owned()], elapsed.as_secs_f64());
    }

    /// The queue depth, counted by `count` unless a count younger than [`QUEUE_COUNT_TTL`]
    /// is at hand. Concurrent scrapes wait for one count. `None` if counting failed.
    pub async fn queue_depth<F, E>(&self, count: F) -> Option<PendingMessages>
    where
        F: Future<Output = Result<PendingMessages, E>>,
        E: std::fmt::Display,
    {
        let mut cached = self.queue.lock().await;
        if let Some((at, pending)) = *cached
            && at.elapsed() < QUEUE_COUNT_TTL
        {
            return Some(pending);
        }
        match count.await {
            Ok(pending) => {
                *cached = Some((Instant::now(), pending));
                Some(pending)
            }
            Err(e) => {
                tracing::warn!("metrics: cannot count the queue: {e}");
                None
            }
        }
    }

    /// Everything, in the Prometheus text format, with the queue depth if known.
    pub fn render(&self, queue: Option<PendingMessages>) -> String {
        let mut out = String::with_capacity(4096);
        counter(
            &mut out,
            "tidings_messages_accepted_total",
            "Sends accepted (stored) by this process; idempotent replays are not counted.",
            &[],
            &self.accepted,
        );
        counter(
            &mut out,
            "tidings_message_events_total",
            "Message timeline events recorded by this process, by event type (Queued, Sent, Delivered, Deferred, \
             Bounced, Complained, Failed, Suppressed, Opened, Clicked, ...).",
            &["type"],
            &self.message_events,
        );
        counter(
            &mut out,
            "tidings_messages_bounced_total",
            "Bounced events recorded by this process, by bounce type (hard, soft).",
            &["type"],
            &self.bounces,
        );
        histogram(
            &mut out,
            "tidings_delivery_latency_seconds",
            "Time from acceptance to the Delivered event, for messages delivered by this process.",
            &[],
            &self.delivery_latency,
        );
        counter(
            &mut out,
            "tidings_webhook_attempts_total",
            "Webhook delivery attempts made by this process, by outcome (delivered, retrying, failed) and the \
             endpoint's response class (2xx, 3xx, 4xx, 5xx, none).",
            &["outcome", "response"],
            &self.webhook_attempts,
        );
        if let Some(queue) = queue {
            gauge(
                &mut out,
                "tidings_queue_depth",
                "Messages waiting for a delivery attempt (Queued, Scheduled, Deferred, and Sent in flight), in the \
                 whole store.",
                queue.total,
            );
            gauge(
                &mut out,
                "tidings_queue_due",
                "Of tidings_queue_depth, the messages due now (or claimed by a worker).",
                queue.due,
            );
        }
        counter(
            &mut out,
            "tidings_http_requests_total",
            "HTTP requests answered by this process, by method, route template and status code.",
            &["method", "route", "status"],
            &self.http_requests,
        );
        histogram(
            &mut out,
            "tidings_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template.",
            &["method", "route"],
            &self.http_duration,
        );
        out
    }
}

impl EventObserver for Metrics {
    fn message_accepted(&self, _message: &Message) {
        self.accepted.add(vec![]);
    }

    fn message_event(&self, message: &Message, event: &MessageEvent) {
        self.message_events.add(vec![event.event_type.as_str().to_owned()]);
        if event.event_type == EventType::Bounced {
            let bounce = event.details.bounce_type.or(message.bounce_type).unwrap_or(BounceType::Hard);
            self.bounces.add(vec![bounce_label(bounce).to_owned()]);
        }
        if let Some(latency) = delivery_latency(message, event) {
            self.delivery_latency.observe(vec![], latency.as_secs_f64());
        }
    }

    fn webhook_attempt(&self, result: WebhookAttemptResult, response_code: Option<u16>) {
        let class = match response_code {
            Some(code @ 100..=599) => format!("{}xx", code / 100),
            _ => "none".to_owned(),
        };
        self.webhook_attempts.add(vec![result.as_str().to_owned(), class]);
    }
}

/// Middleware: counts every request by method, matched route template and status.
pub async fn track_requests(State(metrics): State<std::sync::Arc<Metrics>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let route = req.extensions().get::<MatchedPath>().map_or("unmatched", |p| p.as_str()).to_owned();
    let response = next.run(req).await;
    metrics.observe_request(&method, &route, response.status().as_u16(), started.elapsed());
    response
}

fn bounce_label(bounce: BounceType) -> &'static str {
    match bounce {
        BounceType::Hard => "hard",
        BounceType::Soft => "soft",
    }
}

fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// `{a="x",b="y"}` (with `extra` appended), or nothing without labels.
fn labels(names: &[&str], values: &[String], extra: Option<(&str, &str)>) -> String {
    let mut pairs: Vec<String> =
        names.iter().zip(values).map(|(name, value)| format!("{name}=\"{}\"", escape(value))).collect();
    if let Some((name, value)) = extra {
        pairs.push(format!("{name}=\"{}\"", escape(value)));
    }
    if pairs.is_empty() { String::new() } else { format!("{{{}}}", pairs.join(",")) }
}

/// Most sites exported: the busiest first would need sorting; the sites with something to
/// show are few in practice, and this bounds the series a scrape can carry.
const MAX_SITE_SERIES: usize = 1_000;

/// The per-site gauges (contract §12, "Visible and operable") of the sites that have
/// something to show now (leases, mail waiting or in flight, a delivery in the last minute,
/// a suspension or throttle), appended to a scrape. Waiting, in flight and the last minute's
/// deliveries are this node's; leases, suspensions and throttles are every node's.
pub fn render_sites(out: &mut String, views: &[tidings_core::delivery::SiteView], now: chrono::DateTime<chrono::Utc>) {
    let active: Vec<&tidings_core::delivery::SiteView> = views
        .iter()
        .filter(|v| {
            v.leases > 0
                || v.seen.waiting > 0
                || v.seen.in_flight > 0
                || v.seen.admitted_last_minute > 0
                || v.suspended.is_some()
                || v.throttled.is_some()
        })
        .take(MAX_SITE_SERIES)
        .collect();
    type Value = fn(&tidings_core::delivery::SiteView, chrono::DateTime<chrono::Utc>) -> f64;
    let families: [(&str, &str, Value); 6] = [
        ("tidings_site_waiting", "Messages this node put back to wait for their site's limits.", |v, _| {
            v.seen.waiting as f64
        }),
        ("tidings_site_in_flight", "Deliveries to the site under way on this node.", |v, _| {
            f64::from(v.seen.in_flight)
        }),
        (
            "tidings_site_connection_leases",
            "Connection leases the site holds, every node together (deliveries in flight and connections kept idle).",
            |v, _| f64::from(v.leases),
        ),
        (
            "tidings_site_admitted_last_minute",
            "Deliveries this node started to the site in the last minute.",
            |v, _| v.seen.admitted_last_minute as f64,
        ),
        ("tidings_site_suspended_seconds", "Seconds until the site's suspension ends (0: not suspended).", |v, now| {
            v.suspended.as_ref().map_or(0.0, |(until, _)| (*until - now).num_milliseconds().max(0) as f64 / 1000.0)
        }),
        (
            "tidings_site_throttled_per_second",
            "The lowered rate of a throttled site, in messages per second (0: not throttled).",
            |v, _| v.throttled.as_ref().map_or(0.0, |(rate, _, _)| rate.per_second()),
        ),
    ];
    for (name, help, value) in families {
        header(out, name, help, "gauge");
        for view in &active {
            let _ = writeln!(out, "{name}{} {}", labels(&["site"], &[view.site.to_string()], None), value(view, now));
        }
    }
}

/// Most reputation scopes exported: those warned or paused first, then the busiest.
const MAX_REPUTATION_SERIES: usize = 1_000;

/// The reputation guard's gauges (contract §12), as this node last judged each scope (every
/// node judges from the same store, so on PostgreSQL they agree). Always: how many scopes
/// stand where (`tidings_reputation_scopes{scope, state}`) and the worst rates among the
/// scopes judged. With `detailed` (the operator set a metrics token), also each scope's
/// rates, volume and state labelled by workspace and domain name; an open `/metrics` never
/// names a customer.
pub fn render_reputation(out: &mut String, figures: &[tidings_core::usecases::ScopeFigures], detailed: bool) {
    use tidings_core::usecases::ScopeFigures;
    header(
        out,
        "tidings_reputation_scopes",
        "Workspaces and domains by reputation state (good, warning, paused).",
        "gauge",
    );
    for scope in ["workspace", "domain"] {
        for state in ["good", "warning", "paused"] {
            let n = figures.iter().filter(|f| f.scope == scope && f.state == state).count();
            let _ = writeln!(
                out,
                "tidings_reputation_scopes{} {n}",
                labels(&["scope", "state"], &[scope.to_owned(), state.to_owned()], None)
            );
        }
    }
    let judged = || figures.iter().filter(|f| f.judged);
    let worst = |rate: fn(&ScopeFigures) -> Option<f64>| judged().filter_map(rate).fold(0.0_f64, f64::max) / 100.0;
    header(
        out,
        "tidings_reputation_worst_bounce_rate",
        "The highest hard-bounce rate among the scopes judged, 0 to 1.",
        "gauge",
    );
    let _ = writeln!(out, "tidings_reputation_worst_bounce_rate {}", worst(ScopeFigures::bounce_percent));
    header(
        out,
        "tidings_reputation_worst_complaint_rate",
        "The highest complaint rate among the scopes judged, 0 to 1.",
        "gauge",
    );
    let _ = writeln!(out, "tidings_reputation_worst_complaint_rate {}", worst(ScopeFigures::complaint_percent));
    if !detailed {
        return;
    }
    let mut shown: Vec<&ScopeFigures> = figures.iter().filter(|f| f.volume > 0 || f.state != "good").collect();
    shown.sort_by_key(|f| (f.state == "good", std::cmp::Reverse(f.volume)));
    shown.truncate(MAX_REPUTATION_SERIES);
    type Value = fn(&ScopeFigures) -> f64;
    let families: [(&str, &str, Value); 5] = [
        (
            "tidings_reputation_bounce_rate",
            "Hard bounces over recipients delivered or bounced in the window, 0 to 1.",
            |f| f.bounce_percent().unwrap_or(0.0) / 100.0,
        ),
        ("tidings_reputation_complaint_rate", "Complaints over recipients delivered in the window, 0 to 1.", |f| {
            f.complaint_percent().unwrap_or(0.0) / 100.0
        }),
        (
            "tidings_reputation_volume",
            "Recipients delivered or bounced in the window (since the last resume, if later).",
            |f| f.volume as f64,
        ),
        ("tidings_reputation_warning", "1 while the scope is over a warning threshold.", |f| {
            f64::from(u8::from(f.state == "warning"))
        }),
        ("tidings_reputation_paused", "1 while sending from the scope is paused.", |f| {
            f64::from(u8::from(f.state == "paused"))
        }),
    ];
    for (name, help, value) in families {
        header(out, name, help, "gauge");
        for f in &shown {
            let domain = f.domain.clone().unwrap_or_default();
            let names = ["workspace", "scope", "domain"];
            let values = [f.workspace_id.to_string(), f.scope.to_owned(), domain];
            let _ = writeln!(out, "{name}{} {}", labels(&names, &values, None), value(f));
        }
    }
}

/// Label values escape backslash, double quote and line feed.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn counter(out: &mut String, name: &str, help: &str, names: &[&str], family: &Counters) {
    header(out, name, help, "counter");
    for (values, n) in lock(&family.0).iter() {
        let _ = writeln!(out, "{name}{} {n}", labels(names, values, None));
    }
}

fn gauge(out: &mut String, name: &str, help: &str, value: u64) {
    header(out, name, help, "gauge");
    let _ = writeln!(out, "{name} {value}");
}

fn histogram(out: &mut String, name: &str, help: &str, names: &[&str], family: &Histograms) {
    header(out, name, help, "histogram");
    let series = lock(&family.series).clone();
    let empty = (names.is_empty() && series.is_empty())
        .then(|| (vec![], Buckets { counts: vec![0; family.bounds.len()], sum: 0.0, count: 0 }));
    for (values, buckets) in series.iter().map(|(v, b)| (v.clone(), b.clone())).chain(empty) {
        let mut cumulative = 0;
        for (bound, n) in family.bounds.iter().zip(&buckets.counts) {
            cumulative += n;
            let _ =
                writeln!(out, "{name}_bucket{} {cumulative}", labels(names, &values, Some(("le", &bound.to_string()))));
        }
        let _ = writeln!(out, "{name}_bucket{} {}", labels(names, &values, Some(("le", "+Inf"))), buckets.count);
        let _ = writeln!(out, "{name}_sum{} {}", labels(names, &values, None), buckets.sum);
        let _ = writeln!(out, "{name}_count{} {}", labels(names, &values, None), buckets.count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_end_with_inf_sum_and_count() {
        let metrics = Metrics::new();
        metrics.delivery_latency.observe(vec![], 0.2);
        metrics.delivery_latency.observe(vec![], 7.0);
        let text = metrics.render(None);
        assert!(text.contains("tidings_delivery_latency_seconds_bucket{le=\"0.1\"} 0\n"), "{text}");
        assert!(text.contains("tidings_delivery_latency_seconds_bucket{le=\"0.25\"} 1\n"), "{text}");
        assert!(text.contains("tidings_delivery_latency_seconds_bucket{le=\"10\"} 2\n"), "{text}");
        assert!(text.contains("tidings_delivery_latency_seconds_bucket{le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("tidings_delivery_latency_seconds_sum 7.2\n"), "{text}");
        assert!(text.contains("tidings_delivery_latency_seconds_count 2\n"), "{text}");
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(labels(&["route"], &["a\"b\\c\nd".to_owned()], None), "{route=\"a\\\"b\\\\c\\nd\"}");
    }

    #[test]
    fn an_empty_histogram_without_labels_is_still_exported() {
        let text = Metrics::new().render(None);
        assert!(text.contains("tidings_delivery_latency_seconds_count 0\n"), "{text}");
        assert!(text.contains("tidings_message_events_total{type=\"Delivered\"} 0\n"), "{text}");
        assert!(text.contains("tidings_messages_bounced_total{type=\"hard\"} 0\n"), "{text}");
    }

    #[test]
    fn reputation_gauges_name_customers_only_behind_the_token() {
        use tidings_core::ids::{DomainId, WorkspaceId};
        use tidings_core::usecases::ScopeFigures;
        let ws = WorkspaceId(ulid::Ulid(7));
        let paused = ScopeFigures {
            workspace_id: ws,
            scope: "domain",
            domain_id: Some(DomainId(ulid::Ulid(9))),
            domain: Some("shop.example".into()),
            state: "paused",
            volume: 20,
            hard_bounced: 3,
            delivered: 17,
            complained: 0,
            judged: true,
            reason: None,
            since: None,
            resume: None,
        };
        let good = ScopeFigures {
            scope: "workspace",
            domain_id: None,
            domain: None,
            state: "good",
            volume: 0,
            hard_bounced: 0,
            delivered: 0,
            judged: false,
            ..paused.clone()
        };
        let figures = [paused, good];
        let mut open = String::new();
        render_reputation(&mut open, &figures, false);
        assert!(open.contains("tidings_reputation_scopes{scope=\"domain\",state=\"paused\"} 1\n"), "{open}");
        assert!(open.contains("tidings_reputation_scopes{scope=\"workspace\",state=\"good\"} 1\n"), "{open}");
        assert!(open.contains("tidings_reputation_worst_bounce_rate 0.15\n"), "{open}");
        assert!(
            !open.contains("shop.example") && !open.contains(&ws.to_string()),
            "no customer on an open export: {open}"
        );
        let mut detailed = String::new();
        render_reputation(&mut detailed, &figures, true);
        let line =
            format!("tidings_reputation_paused{{workspace=\"{ws}\",scope=\"domain\",domain=\"shop.example\"}} 1\n");
        assert!(detailed.contains(&line), "{detailed}");
        assert!(detailed.contains("tidings_reputation_bounce_rate{"), "{detailed}");
    }
}
