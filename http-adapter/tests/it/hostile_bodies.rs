//! Hostile request bodies: random bytes and random JSON, built
//! from the field names the API knows and the values that break parsers (line breaks,
//! control characters, huge numbers, deep nesting, wrong types), sent to every operation
//! that takes a body, with real ids in the path so the handlers get past their 404s.
//!
//! For every request: no 5xx, the answer is the error envelope (docs/api.md#errors) (`statusCode` equal to
//! the status, `success` matching it, an error code on failure), and a refused request
//! changed nothing (the workspace's resources read the same before and after). The list of
//! operations is the router's own, so operations added later are covered without edits.
//! `TIDINGS_PROPTEST_CASES` sets the number of cases (64 in CI).

use crate::support::TestApi;
use axum::body::Body;
use axum::http::Request;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};
use tidings_core::usecases::AuthThrottleConfig;
use tidings_http::HttpConfig;

/// Field names of request bodies, and a few that are not.
const FIELDS: [&str; 34] = [
    "to",
    "from",
    "subject",
    "html",
    "text",
    "templateId",
    "templateVersionId",
    "variables",
    "tracking",
    "opens",
    "clicks",
    "name",
    "scope",
    "sendingDomainId",
    "rateLimitPerSec",
    "domain",
    "username",
    "displayName",
    "email",
    "url",
    "eventTypes",
    "enabled",
    "makeCurrent",
    "currentVersionId",
    "versionId",
    "openTracking",
    "clickTracking",
    "replyTo",
    "headers",
    "tags",
    "metadata",
    "attachments",
    "scheduledAt",
    "__proto__",
];

/// Strings that have broken parsers elsewhere.
fn nasty_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("ann@example.com".to_owned()),
        Just("Ann <ann@example.com>\r\nBcc: all@example.com".to_owned()),
        Just("x\u{0}y".to_owned()),
        Just("\u{202e}evil\u{feff}".to_owned()),
        Just("{{#each a}}{{#each ../a}}{{/each}}{{/each}}".to_owned()),
        Just("https://127.0.0.1/hook".to_owned()),
        Just("01ARZ3NDEKTSV4RRFFQ69G5FAV".to_owned()),
        Just("9999-12-31T23:59:59Z".to_owned()),
        Just("a".repeat(5_000)),
        "\\PC{0,40}",
        "[a-z@.<> \r\n\t\"\\\\]{0,30}",
    ]
}

/// JSON values of every type, nested a few levels, with keys the API knows.
fn nasty_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(json!(1e308)),
        Just(json!(u64::MAX)),
        Just(json!(-1)),
        Just(json!(0)),
        nasty_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(&FIELDS[..]), inner), 0..8)
                .prop_map(|entries| Value::Object(entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

/// A request body: mostly an object of known fields, sometimes any JSON, sometimes bytes.
fn nasty_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => prop::collection::vec((prop::sample::select(&FIELDS[..]), nasty_json()), 0..10).prop_map(|entries| {
            let object: Map<String, Value> = entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            Value::Object(object).to_string().into_bytes()
        }),
        2 => nasty_json().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..200),
        1 => Just(b"{\"to\": \"a@b.c\", ".to_vec()),
        1 => Just(format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes()),
    ]
}

/// Real ids of one of each resource, to put in paths.
struct Ids {
    domain: String,
    template: String,
    version: String,
    webhook: String,
    key: String,
}

async fn seed(api: &TestApi) -> Ids {
    let domain = api.post("/v1/domains", json!({"domain": "hostile.example"})).await.data()["id"].clone();
    let template = api.post("/v1/templates", json!({"name": "t", "subject": "Hi {{name}}", "text": "x"})).await;
    let webhook = api.post("/v1/webhooks", json!({"url": "https://hooks.example.com/h", "eventTypes": ["Sent"]})).await;
    let key = api.post("/v1/keys", json!({"name": "other"})).await;
    api.post("/v1/suppressions", json!({"email": "ann@example.com"})).await.data();
    let text = |v: &Value| v.as_str().expect("an id").to_owned();
    Ids {
        domain: text(&domain),
        template: text(&template.data()["id"]),
        version: text(&template.data()["currentVersionId"]),
        webhook: text(&webhook.data()["id"]),
        key: text(&key.data()["id"]),
    }
}

/// `path` with its parameters filled with the seeded ids (an unknown one where none fits).
fn fill(path: &str, ids: &Ids) -> String {
    let mut out = Vec::new();
    let mut resource = "";
    for segment in path.split('/') {
        let value = match segment {
            "{id}" => match resource {
                "domains" => ids.domain.as_str(),
                "templates" => ids.template.as_str(),
                "webhooks" => ids.webhook.as_str(),
                "keys" => ids.key.as_str(),
                _ => "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            },
            "{versionId}" => ids.version.as_str(),
            "{email}" => "ann@example.com",
            "{username}" => "hello",
            "{token}" => "not-a-token",
            s if s.starts_with('{') => "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            s => {
                resource = s;
                s
            }
        };
        out.push(value.to_owned());
    }
    out.join("/")
}

/// What a refused request must leave as it was: every list of the workspace, without the
/// keys' `lastUsedAt` (authenticating the request moves it, whatever the request was).
async fn fingerprint(api: &TestApi) -> Vec<Value> {
    let mut lists = Vec::new();
    for path in ["/v1/messages", "/v1/domains", "/v1/templates", "/v1/suppressions", "/v1/webhooks", "/v1/keys"] {
        let mut list = api.get(&format!("{path}?limit=200")).await.data().clone();
        for item in list.as_array_mut().into_iter().flatten() {
            if let Some(item) = item.as_object_mut() {
                item.remove("lastUsedAt");
            }
        }
        lists.push(list);
    }
    lists
}

#[test]
fn hostile_bodies_get_an_envelope_never_a_5xx_and_refused_ones_change_nothing() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let throttle = AuthThrottleConfig { max_failures: 1_000_000, ..Default::default() };
    let api = runtime.block_on(TestApi::with_config(HttpConfig { auth_throttle: throttle, ..Default::default() }));
    let ids = runtime.block_on(seed(&api));
    let operations: Vec<(String, String)> = tidings_http::served_routes()
        .into_iter()
        .filter(|(method, _)| ["POST", "PATCH", "PUT"].contains(&method.as_str()))
        .map(|(method, path)| (method.as_str().to_owned(), fill(&path, &ids)))
        .collect();
    assert!(operations.len() >= 15, "the router's operations with a body: {operations:?}");

    let cases = std::env::var("TIDINGS_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    // Each case tries every operation once with its own body.
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let strategy = prop::collection::vec(nasty_body(), operations.len());
    runner
        .run(&strategy, |bodies| {
            runtime.block_on(async {
                for ((method, uri), body) in operations.iter().zip(bodies) {
                    let before = fingerprint(&api).await;
                    let request = Request::builder()
                        .method(method.as_str())
                        .uri(uri)
                        .header("authorization", format!("Bearer {}", api.key))
                        .header("content-type", "application/json")
                        .header("idempotency-key", "hostile")
                        .body(Body::from(body.clone()))
                        .unwrap();
                    let raw = api.send_raw(request).await;
                    let shown = String::from_utf8_lossy(&body);
                    let shown: String = shown.chars().take(300).collect();
                    prop_assert!(raw.status.as_u16() < 500, "{method} {uri} answered {} to {shown}", raw.status);
                    let envelope: Value = serde_json::from_slice(&raw.bytes)
                        .map_err(|e| TestCaseError::fail(format!("{method} {uri}: not JSON ({e}) for {shown}")))?;
                    prop_assert_eq!(&envelope["statusCode"], &json!(raw.status.as_u16()), "{}", envelope);
                    prop_assert_eq!(&envelope["success"], &json!(raw.status.is_success()), "{}", envelope);
                    if !raw.status.is_success() {
                        prop_assert!(
                            envelope["error"]["code"].as_str().is_some_and(|c| !c.is_empty()),
                            "{method} {uri}: no error code in {envelope}"
                        );
                        prop_assert!(envelope["data"].is_null(), "{}", envelope);
                        prop_assert_eq!(
                            fingerprint(&api).await,
                            before,
                            "{} {} was refused ({}) but changed something; body {}",
                            method,
                            uri,
                            raw.status,
                            shown
                        );
                    }
                }
                Ok(())
            })
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
