//! `GET /metrics`: public, valid Prometheus text format line by line, counters that move with
//! what the API does (sends, events, requests by route template), the queue depth; and
//! `/readyz` once the server drains.

use std::collections::BTreeMap;

use crate::support::TestApi;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;
use tidings_core::ids::DomainId;
use tidings_core::model::DomainStatus;

/// The scrape's text, checked to be 200 with the exposition format's content type.
async fn scrape(api: &TestApi) -> String {
    let reply = api.send_raw(Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    String::from_utf8(reply.bytes).expect("UTF-8")
}

/// A metric or label name.
fn is_name(text: &str, colons: bool) -> bool {
    let mut chars = text.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colons && c == ':'));
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colons && c == ':'))
}

/// Parses `{a="x",b="y"}` (escapes `\\`, `\"`, `\n`) into pairs; `None` if malformed.
fn parse_labels(text: &str) -> Option<Vec<(String, String)>> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut pairs = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let (name, after) = rest.split_once("=\"")?;
        if !is_name(name, false) {
            return None;
        }
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => match chars.next()?.1 {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    _ => return None,
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        pairs.push((name.to_owned(), value));
        rest = &after[end + 1..];
        rest = match rest.strip_prefix(',') {
            Some(more) => more,
            None if rest.is_empty() => rest,
            None => return None,
        };
    }
    Some(pairs)
}

/// Every sample of a scrape, keyed `name{labels as written}`, after checking every line:
/// `# HELP`/`# TYPE` comments, samples whose family was typed before, valid names, labels
/// and values.
fn parse(text: &str) -> BTreeMap<String, f64> {
    let mut typed: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = BTreeMap::new();
    assert!(text.ends_with('\n'), "the last line ends with a line feed");
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut parts = comment.splitn(3, ' ');
            let (keyword, name, rest) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            assert!(is_name(name, true), "bad metric name in {line:?}");
            match keyword {
                Some("HELP") => assert!(!rest.is_empty(), "empty help in {line:?}"),
                Some("TYPE") => {
                    assert!(["counter", "gauge", "histogram", "summary", "untyped"].contains(&rest), "{line:?}");
                    assert!(typed.insert(name.to_owned(), rest.to_owned()).is_none(), "typed twice: {line:?}");
                }
                _ => panic!("unknown comment {line:?}"),
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value in {line:?}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line:?}"));
        let (name, labels) = match series.find('{') {
            Some(i) => (&series[..i], &series[i..]),
            None => (series, ""),
        };
        assert!(is_name(name, true), "bad metric name in {line:?}");
        if !labels.is_empty() {
            assert!(parse_labels(labels).is_some(), "bad labels in {line:?}");
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix).filter(|base| typed.get(*base).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(typed.contains_key(family), "sample before its # TYPE: {line:?}");
        assert!(samples.insert(series.to_owned(), value).is_none(), "duplicate series {series}");
    }
    samples
}

fn sample(samples: &BTreeMap<String, f64>, series: &str) -> f64 {
    *samples.get(series).unwrap_or_else(|| panic!("no {series} in {samples:#?}"))
}

/// Adds `example.com`, marks it Verified, and sends one message from it.
async fn send_one(api: &TestApi) -> String {
    let domain = api.post("/v1/domains", json!({"domain": "example.com"})).await;
    assert_eq!(domain.status, StatusCode::CREATED, "{}", domain.body);
    let who = api.core.authenticate(&api.key).await.unwrap();
    let mut domain =
        api.core.domains().get(&who, DomainId::parse_or_none(domain.data()["id"].as_str().unwrap())).await.unwrap();
    domain.status = DomainStatus::Verified;
    domain.verified_at = Some(domain.created_at);
    api.core.store().update_domain(&domain).await.unwrap();
    let sent = api.post("/v1/messages", json!({"to": "user@example.net", "subject": "Hi", "text": "Hello"})).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    sent.data()["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn metrics_are_public_and_every_line_is_valid_exposition_format() {
    let api = TestApi::new().await;

    let samples = parse(&scrape(&api).await);

    assert_eq!(sample(&samples, "tidings_messages_accepted_total"), 0.0);
    assert_eq!(sample(&samples, "tidings_message_events_total{type=\"Delivered\"}"), 0.0);
    assert_eq!(sample(&samples, "tidings_messages_bounced_total{type=\"hard\"}"), 0.0);
    assert_eq!(sample(&samples, "tidings_delivery_latency_seconds_count"), 0.0);
    assert_eq!(sample(&samples, "tidings_queue_depth"), 0.0);
}

#[tokio::test]
async fn a_send_moves_the_counters_and_the_queue_depth() {
    let api = TestApi::new().await;
    let id = send_one(&api).await;
    let r = api.get(&format!("/v1/messages/{id}")).await;
    assert_eq!(r.status, StatusCode::OK);

    let samples = parse(&scrape(&api).await);

    assert_eq!(sample(&samples, "tidings_messages_accepted_total"), 1.0);
    assert_eq!(sample(&samples, "tidings_message_events_total{type=\"Queued\"}"), 1.0);
    assert_eq!(sample(&samples, "tidings_message_events_total{type=\"Delivered\"}"), 0.0);
    assert_eq!(sample(&samples, "tidings_queue_depth"), 1.0, "nobody delivers here");
    assert_eq!(sample(&samples, "tidings_queue_due"), 1.0);
    let posted = "tidings_http_requests_total{method=\"POST\",route=\"/v1/messages\",status=\"201\"}";
    assert_eq!(sample(&samples, posted), 1.0);
    let read = "tidings_http_requests_total{method=\"GET\",route=\"/v1/messages/{id}\",status=\"200\"}";
    assert_eq!(sample(&samples, read), 1.0, "counted by route template");
    let timed = "tidings_http_request_duration_seconds_count{method=\"POST\",route=\"/v1/messages\"}";
    assert_eq!(sample(&samples, timed), 1.0);
}

#[tokio::test]
async fn unknown_paths_are_counted_as_unmatched_never_by_their_raw_path() {
    let api = TestApi::new().await;
    let r = api.get("/v1/nothing/here-01234").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = api.get("/v1/messages/01ARZ3NDEKTSV4RRFFQ69G5FAV").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    let text = scrape(&api).await;
    let samples = parse(&text);

    assert!(!text.contains("here-01234") && !text.contains("01ARZ3NDEKTSV4RRFFQ69G5FAV"), "{text}");
    assert_eq!(sample(&samples, "tidings_http_requests_total{method=\"GET\",route=\"unmatched\",status=\"404\"}"), 1.0);
    let by_template = "tidings_http_requests_total{method=\"GET\",route=\"/v1/messages/{id}\",status=\"404\"}";
    assert_eq!(sample(&samples, by_template), 1.0);
}

#[tokio::test]
async fn readyz_answers_503_unavailable_once_draining_while_other_requests_are_served() {
    let api = TestApi::new().await;
    assert_eq!(api.call("GET", "/readyz", None, None).await.status, StatusCode::OK);

    api.drain.start();

    let r = api.call("GET", "/readyz", None, None).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert_eq!(r.error_code(), "unavailable");
    assert_eq!(api.call("GET", "/healthz", None, None).await.status, StatusCode::OK, "still alive");
    assert_eq!(api.get("/v1/keys").await.status, StatusCode::OK, "in-flight work is still served");
}
