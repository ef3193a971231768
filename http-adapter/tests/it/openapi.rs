//! The OpenAPI document at `/v1/openapi.json` against the router: it documents exactly the
//! routes served, every documented operation is really routed, the document is sound, and
//! real responses of every operation validate against its schemas.

use std::collections::BTreeSet;

use crate::support::{RawReply, Reply, TestApi};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tidings_core::ids::{DomainId, MessageId};
use tidings_core::model::DomainStatus;
use tidings_core::tracking::TrackedUrl;
use tidings_core::usecases::AuthThrottleConfig;
use tidings_http::HttpConfig;

const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
/// A well-formed id that names nothing.
const UNKNOWN_ID: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
/// The operations that need no key: the document, tracking and the probes. Any other
/// operation documented with `security: []` is a mistake.
const PUBLIC: [&str; 6] = ["/v1/openapi.json", "/t/o/{token}", "/t/c/{token}", "/healthz", "/readyz", "/metrics"];

/// Whether the operation is documented without authentication (`security: []`).
fn is_public(doc: &Value, method: &str, path: &str) -> bool {
    doc["paths"][path][method.to_lowercase()]["security"] == json!([])
}

/// The document as the router serves it, asserting how it is served.
async fn fetch_document(api: &TestApi) -> Value {
    let r = api.call("GET", "/v1/openapi.json", None, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.headers["content-type"], "application/json");
    r.body
}

/// `(METHOD, path)` of every operation in the document.
fn documented_operations(doc: &Value) -> BTreeSet<(String, String)> {
    let paths = doc["paths"].as_object().expect("paths");
    let mut operations = BTreeSet::new();
    for (path, item) in paths {
        for method in METHODS {
            if item.get(method).is_some() {
                operations.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    operations
}

/// Follows a local `$ref` (`#/a/b`) to what it names, as often as needed.
fn resolve<'a>(doc: &'a Value, mut value: &'a Value) -> &'a Value {
    while let Some(reference) = value.get("$ref").and_then(Value::as_str) {
        let pointer = reference.strip_prefix('#').unwrap_or_else(|| panic!("not a local $ref: {reference}"));
        value = doc.pointer(pointer).unwrap_or_else(|| panic!("$ref {reference} names nothing"));
    }
    value
}

/// `path` with each `{name}` segment replaced by the next of `args`.
fn fill(path: &str, args: &[&str]) -> String {
    let mut args = args.iter();
    let segments: Vec<&str> = path
        .split('/')
        .map(|segment| {
            if segment.starts_with('{') {
                *args.next().unwrap_or_else(|| panic!("too few arguments for {path}"))
            } else {
                segment
            }
        })
        .collect();
    segments.join("/")
}

/// `path` with a plausible value in each `{name}` segment.
fn fill_with_placeholders(path: &str) -> String {
    let args: Vec<&str> = path
        .split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| match name {
            "email" => "ann@example.com",
            "username" => "billing",
            _ => UNKNOWN_ID,
        })
        .collect();
    fill(path, &args)
}

#[tokio::test]
async fn the_document_is_served_without_credentials_and_not_in_the_envelope() {
    let api = TestApi::new().await;
    let doc = fetch_document(&api).await;
    let version = doc["openapi"].as_str().expect("openapi");
    assert!(version.starts_with("3.1."), "{version}");
    assert!(doc.get("success").is_none() && doc.get("data").is_none(), "the document is not wrapped");
    assert_eq!(doc["paths"]["/v1/openapi.json"]["get"]["security"], json!([]));
}

#[tokio::test]
async fn the_router_serves_exactly_the_documented_operations() {
    let api = TestApi::new().await;
    let documented = documented_operations(&fetch_document(&api).await);
    let served: BTreeSet<(String, String)> =
        tidings_http::served_routes().into_iter().map(|(m, p)| (m.as_str().to_owned(), p.to_owned())).collect();
    assert_eq!(served.len(), tidings_http::served_routes().len(), "a route is recorded twice");
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty() && unserved.is_empty(),
        "served but not documented: {undocumented:?}\ndocumented but not served: {unserved:?}"
    );
}

#[tokio::test]
async fn every_documented_operation_is_routed_and_asks_for_credentials_unless_public() {
    // Every probe fails authentication; let them all through the failed-auth throttle.
    let throttle = AuthThrottleConfig { max_failures: 1000, ..Default::default() };
    let config = HttpConfig { auth_throttle: throttle, serve_metrics: true, ..Default::default() };
    let api = TestApi::with_config(config).await;
    let doc = fetch_document(&api).await;
    let operations = documented_operations(&doc);
    for (method, path) in &operations {
        let uri = fill_with_placeholders(path);
        if is_public(&doc, method, path) {
            // No key asked for: the answer is one the operation documents, never a 401 (a
            // made-up tracking token is simply not found). Not all of them are JSON.
            let req = Request::builder().method(method.as_str()).uri(&uri).body(Body::empty()).unwrap();
            let r = api.send_raw(req).await;
            let documented = &doc["paths"][path][method.to_lowercase()]["responses"];
            assert_ne!(r.status, StatusCode::UNAUTHORIZED, "{method} {uri}");
            assert!(documented.get(r.status.as_str()).is_some(), "{method} {uri}: undocumented {}", r.status);
        } else {
            let r = api.call(method, &uri, None, None).await;
            assert_eq!((r.status, r.error_code()), (StatusCode::UNAUTHORIZED, "missing_api_key"), "{method} {uri}");
        }
    }
    // And a method a path does not document is not routed to some handler by accident.
    for path in operations.iter().map(|(_, p)| p).collect::<BTreeSet<_>>() {
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            if operations.contains(&(method.to_owned(), path.clone())) {
                continue;
            }
            let uri = fill_with_placeholders(path);
            let r = api.call(method, &uri, None, None).await;
            let answer = (r.status, r.error_code());
            assert_eq!(answer, (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"), "{method} {uri}");
        }
    }
}

#[tokio::test]
async fn the_document_is_structurally_sound() {
    let api = TestApi::new().await;
    let doc = fetch_document(&api).await;

    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(refs.len() > 50, "the document shares its schemas by $ref");
    for reference in refs {
        resolve(&doc, &json!({ "$ref": reference }));
    }

    let schemes: BTreeSet<&str> = doc["components"]["securitySchemes"]
        .as_object()
        .expect("security schemes")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(schemes, BTreeSet::from(["apiKeyHeader", "bearerAuth"]));
    assert_eq!(doc["security"], json!([{ "bearerAuth": [] }, { "apiKeyHeader": [] }]));
    assert_eq!(doc["components"]["securitySchemes"]["apiKeyHeader"]["name"], "X-Api-Key");

    let mut operation_ids = BTreeSet::new();
    for (method, path) in documented_operations(&doc) {
        let op = &doc["paths"][&path][method.to_lowercase()];
        let name = format!("{method} {path}");
        let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{name}: no operationId"));
        assert!(operation_ids.insert(id.to_owned()), "{name}: operationId {id} is used twice");

        let responses = op["responses"].as_object().unwrap_or_else(|| panic!("{name}: no responses"));
        assert!(responses.keys().any(|s| s.starts_with(['2', '3'])), "{name}: no success response");
        for (status, response) in responses {
            let response = resolve(&doc, response);
            assert!(response["description"].is_string(), "{name} {status}: no description");
            if status.starts_with('3') {
                assert!(response.get("content").is_none(), "{name} {status}: a redirect has no body");
                assert_eq!(response["headers"]["Location"]["required"], true, "{name} {status}: Location");
                continue;
            }
            let content = response["content"].as_object().unwrap_or_else(|| panic!("{name} {status}: no content"));
            assert_eq!(content.len(), 1, "{name} {status}: one media type");
            let (media_type, body) = content.iter().next().unwrap();
            assert!(body["schema"].is_object(), "{name} {status}: no schema for {media_type}");
            if status.starts_with('4') || status.starts_with('5') {
                assert_eq!(media_type, "application/json", "{name} {status}: failures are in the envelope");
            }
        }

        let mut in_path = BTreeSet::new();
        for parameter in op["parameters"].as_array().into_iter().flatten() {
            let parameter = resolve(&doc, parameter);
            if parameter["in"] == "path" {
                assert_eq!(parameter["required"], true, "{name}: path parameters are required");
                in_path.insert(parameter["name"].as_str().expect("parameter name").to_owned());
            }
        }
        let segments: BTreeSet<String> =
            path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).map(str::to_owned).collect();
        assert_eq!(in_path, segments, "{name}: path parameters");

        if PUBLIC.contains(&path.as_str()) {
            assert_eq!(op["security"], json!([]), "{name}: the document, tracking and the probes need no key");
        } else {
            assert!(op.get("security").is_none(), "{name}: the global security applies");
            assert!(responses.contains_key("401") && responses.contains_key("429"), "{name}: 401 and 429");
        }
    }
}

#[tokio::test]
async fn links_lead_from_creations_to_every_operation_on_a_resource() {
    let api = TestApi::new().await;
    let doc = fetch_document(&api).await;
    let mut by_id = std::collections::BTreeMap::new();
    for (method, path) in documented_operations(&doc) {
        let id = doc["paths"][&path][method.to_lowercase()]["operationId"].as_str().unwrap().to_owned();
        by_id.insert(id, path);
    }

    let mut linked = BTreeSet::new();
    for (method, path) in documented_operations(&doc) {
        let op = &doc["paths"][&path][method.to_lowercase()];
        for (status, response) in op["responses"].as_object().unwrap() {
            for (name, link) in response["links"].as_object().into_iter().flatten() {
                let what = format!("{method} {path} {status} link {name}");
                assert!(status.starts_with('2'), "{what}: only an answer with data links");
                let target = link["operationId"].as_str().unwrap_or_else(|| panic!("{what}: no operationId"));
                let target_path = by_id.get(target).unwrap_or_else(|| panic!("{what}: no operation {target}"));
                let wanted: BTreeSet<&str> =
                    target_path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).collect();
                let given: BTreeSet<&str> =
                    link["parameters"].as_object().unwrap().keys().map(String::as_str).collect();
                assert_eq!(given, wanted, "{what}: the link gives exactly the path parameters of {target_path}");
                for value in link["parameters"].as_object().unwrap().values() {
                    let value = value.as_str().unwrap();
                    assert!(
                        value.starts_with("$response.body#/data/") || value.starts_with("$request.path."),
                        "{what}: {value}"
                    );
                }
                linked.insert(target_path.clone());
            }
        }
    }
    // Every resource a client can create is reachable from its creation; a tracking token
    // comes in a sent message, not in an answer.
    let unlinked: Vec<&String> = by_id
        .values()
        .filter(|path| path.contains('{') && !path.starts_with("/t/") && !linked.contains(*path))
        .collect();
    assert!(unlinked.is_empty(), "no link leads to {unlinked:?}");
}

fn collect_refs(value: &Value, refs: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                refs.push(reference.clone());
            }
            map.values().for_each(|v| collect_refs(v, refs));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, refs)),
        _ => {}
    }
}

/// Requests whose responses are validated against the document, remembering which
/// operations answered with a success.
struct Checked {
    doc: Value,
    succeeded: BTreeSet<(String, String)>,
}

impl Checked {
    async fn new(api: &TestApi) -> Self {
        Self { doc: fetch_document(api).await, succeeded: BTreeSet::new() }
    }

    /// Calls `method target` (`{name}` segments filled from `args`, with an optional query)
    /// with `key` and a JSON `body`, and checks the reply.
    async fn call(
        &mut self,
        api: &TestApi,
        key: Option<&str>,
        method: &str,
        target: &str,
        args: &[&str],
        body: Option<Value>,
    ) -> Reply {
        self.call_with(api, key, method, target, args, body, &[]).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn call_with(
        &mut self,
        api: &TestApi,
        key: Option<&str>,
        method: &str,
        target: &str,
        args: &[&str],
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let (path, query) = target.split_once('?').map_or((target, ""), |(p, q)| (p, q));
        let mut uri = fill(path, args);
        if !query.is_empty() {
            uri = format!("{uri}?{query}");
        }
        let mut req = Request::builder().method(method).uri(&uri);
        if let Some(key) = key {
            req = req.header("authorization", format!("Bearer {key}"));
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = match body {
            Some(body) => req.header("content-type", "application/json").body(Body::from(body.to_string())),
            None => req.body(Body::empty()),
        };
        let reply = api.send(req.expect("request")).await;
        self.check(method, path, &reply);
        reply
    }

    /// Calls `GET target` without a key and checks a reply that may not be JSON.
    async fn call_raw(&mut self, api: &TestApi, target: &str, args: &[&str]) -> RawReply {
        let req = Request::get(fill(target, args)).body(Body::empty()).expect("request");
        let reply = api.send_raw(req).await;
        self.check_raw("GET", target, &reply);
        reply
    }

    /// Calls `GET target` with `key` and checks a reply that may not be JSON.
    async fn call_raw_keyed(&mut self, api: &TestApi, key: &str, target: &str, args: &[&str]) -> RawReply {
        let req = Request::get(fill(target, args)).header("authorization", format!("Bearer {key}"));
        let reply = api.send_raw(req.body(Body::empty()).expect("request")).await;
        self.check_raw("GET", target, &reply);
        reply
    }

    /// [`Self::check`] for any media type: the content type is the documented one and a
    /// response documented without content has no body; JSON goes through `check`.
    fn check_raw(&mut self, method: &str, path: &str, reply: &RawReply) {
        let name = format!("{method} {path} -> {}", reply.status.as_u16());
        let response = self.response(method, path, reply.status).unwrap_or_else(|| panic!("{name}: not documented"));
        let content_type = reply.headers.get("content-type").map(|v| v.to_str().expect("ASCII"));
        match response["content"].as_object().and_then(|c| c.keys().next()) {
            Some(media) if media == "application/json" => {
                let body = serde_json::from_slice(&reply.bytes).expect("JSON");
                let json = Reply { status: reply.status, headers: reply.headers.clone(), body };
                return self.check(method, path, &json);
            }
            // Served as what it is (an inbound attachment's own type).
            Some(media) if media == "*/*" => assert!(!reply.bytes.is_empty(), "{name}: empty body"),
            Some(media) => {
                assert_eq!(content_type, Some(media.as_str()), "{name}");
                assert!(!reply.bytes.is_empty(), "{name}: empty {media}");
            }
            None => assert!(reply.bytes.is_empty(), "{name}: undocumented body {:?}", reply.bytes),
        }
        self.check_headers(method, path, &response, reply);
    }

    /// The documented response of `method path` with `status`, if there is one.
    fn response(&self, method: &str, path: &str, status: StatusCode) -> Option<Value> {
        let op = self.doc["paths"][path].get(method.to_lowercase())?;
        Some(resolve(&self.doc, op["responses"].get(status.as_str())?).clone())
    }

    /// Asserts that the document describes `reply` to `method path`: the status, the body
    /// against its schema (formats included) and the required headers.
    fn check(&mut self, method: &str, path: &str, reply: &Reply) {
        let name = format!("{method} {path} -> {}", reply.status.as_u16());
        let response = self
            .response(method, path, reply.status)
            .unwrap_or_else(|| panic!("{name}: not documented; body {}", reply.body));
        assert_eq!(reply.headers["content-type"], "application/json", "{name}");

        // The schema at the root, beside the components its $refs name.
        let mut schema = response["content"]["application/json"]["schema"].clone();
        schema["components"] = self.doc["components"].clone();
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&schema)
            .unwrap_or_else(|e| panic!("{name}: the schema does not compile: {e}"));
        let errors: Vec<String> =
            validator.iter_errors(&reply.body).map(|e| format!("at {}: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{name}: {}\nbody: {:#}", errors.join("\n"), reply.body);
        let raw = RawReply { status: reply.status, headers: reply.headers.clone(), bytes: Vec::new() };
        self.check_headers(method, path, &response, &raw);
    }

    /// The headers `response` documents against `reply`'s, remembering a success.
    fn check_headers(&mut self, method: &str, path: &str, response: &Value, reply: &RawReply) {
        let name = format!("{method} {path} -> {}", reply.status.as_u16());
        for (header, spec) in response["headers"].as_object().into_iter().flatten() {
            let spec = resolve(&self.doc, spec);
            match reply.headers.get(header.as_str()) {
                Some(value) => {
                    let text = value.to_str().expect("ASCII header");
                    let value = text.parse::<i64>().map_or_else(|_| json!(text), Value::from);
                    let validator = jsonschema::draft202012::new(&spec["schema"]).expect("header schema");
                    assert!(validator.is_valid(&value), "{name}: header {header}: {text}");
                }
                None => assert_ne!(spec["required"], true, "{name}: required header {header} is missing"),
            }
        }
        if reply.status.is_success() || reply.status.is_redirection() {
            self.succeeded.insert((method.to_owned(), path.to_owned()));
        }
    }
}

fn id_of(reply: &Reply) -> String {
    reply.data()["id"].as_str().unwrap_or_else(|| panic!("no id: {}", reply.body)).to_owned()
}

fn expect(reply: &Reply, status: u16) {
    assert_eq!(reply.status.as_u16(), status, "{}", reply.body);
}

/// The test DNS answers nothing: the domain is marked Verified in the store.
async fn mark_verified(api: &TestApi, domain_id: &str) {
    let who = api.core.authenticate(&api.key).await.unwrap();
    let mut domain = api.core.domains().get(&who, DomainId::parse_or_none(domain_id)).await.unwrap();
    domain.status = DomainStatus::Verified;
    domain.verified_at = Some(domain.created_at);
    api.core.store().update_domain(&domain).await.unwrap();
}

/// A message with one attachment received for the workspace, stored as the listener stores
/// one (the test API has no listener); returns its id.
async fn store_inbound(api: &TestApi) -> String {
    use tidings_core::ids::InboundMessageId;
    use tidings_core::model::{AuthResults, InboundEnvelope, InboundMessage};
    use tidings_core::ports::InboundQuota;
    let raw = b"From: Ann <ann@example.net>\r\nTo: support@example.com\r\nSubject: Hello\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nHi\r\n--b\r\n\
Content-Type: text/csv; name=a.csv\r\nContent-Disposition: attachment; filename=a.csv\r\n\r\na,b\r\n--b--\r\n";
    let who = api.core.authenticate(&api.key).await.unwrap();
    let now = chrono::Utc::now();
    let message = InboundMessage {
        id: InboundMessageId::new_at(now, &tidings_core::ports::SystemRandom),
        workspace_id: who.workspace_id,
        received_at: now,
        envelope: InboundEnvelope {
            mail_from: Some("ann@example.net".to_owned()),
            recipients: vec![tidings_core::email::EmailAddress::parse("support@example.com").unwrap()],
            client_ip: std::net::Ipv4Addr::LOCALHOST.into(),
            helo: "mail.example.net".to_owned(),
        },
        parsed: tidings_core::inbound::parse(raw).unwrap(),
        auth: AuthResults::unchecked(),
        in_reply_to_message_id: None,
        route_id: None,
        size: raw.len() as u64,
    };
    let quota = InboundQuota { max_messages: 10, max_bytes: 1 << 20 };
    assert!(api.core.store().insert_inbound(&message, raw, &[], &quota).await.unwrap());
    message.id.to_string()
}

#[tokio::test]
async fn real_responses_of_every_operation_match_the_documented_schemas() {
    let api = TestApi::new().await;
    let mut c = Checked::new(&api).await;
    let full = Some(api.key.as_str());
    let a = &api;

    // Keys, and the failures every operation shares.
    let send_key = c.call(a, full, "POST", "/v1/keys", &[], Some(json!({"name": "web", "scope": "send"}))).await;
    expect(&send_key, 201);
    let send_key_id = id_of(&send_key);
    let send_key = send_key.data()["plaintextKey"].as_str().unwrap().to_owned();
    expect(&c.call(a, full, "GET", "/v1/keys?limit=1", &[], None).await, 200);
    expect(&c.call(a, full, "GET", "/v1/keys/{id}", &[&send_key_id], None).await, 200);
    let rate = Some(json!({"rateLimitPerSec": 50}));
    expect(&c.call(a, full, "PATCH", "/v1/keys/{id}", &[&send_key_id], rate).await, 200);
    let too_fast = Some(json!({"rateLimitPerSec": 10001}));
    expect(&c.call(a, full, "PATCH", "/v1/keys/{id}", &[&send_key_id], too_fast).await, 422);
    expect(&c.call(a, None, "GET", "/v1/keys", &[], None).await, 401);
    expect(&c.call(a, Some("tid_nope"), "GET", "/v1/keys", &[], None).await, 401);
    expect(&c.call(a, Some(&send_key), "GET", "/v1/keys", &[], None).await, 403);
    expect(&c.call(a, full, "GET", "/v1/keys/{id}", &[UNKNOWN_ID], None).await, 404);
    expect(&c.call(a, full, "GET", "/v1/keys?limit=0", &[], None).await, 422);
    expect(&c.call(a, full, "POST", "/v1/keys", &[], Some(json!({"scope": "admin"}))).await, 422);
    let not_json =
        Request::post("/v1/keys").header("authorization", format!("Bearer {}", api.key)).body(Body::from("{"));
    let r = api.send(not_json.unwrap()).await;
    c.check("POST", "/v1/keys", &r);
    expect(&r, 400);
    let small = TestApi::with_config(HttpConfig { max_body_bytes: 64, ..Default::default() }).await;
    let big = json!({ "name": "x".repeat(100) });
    expect(&c.call(&small, Some(&small.key), "POST", "/v1/keys", &[], Some(big)).await, 413);

    // Domains and senders.
    let domain = c.call(a, full, "POST", "/v1/domains", &[], Some(json!({"domain": "example.com"}))).await;
    expect(&domain, 201);
    let domain_id = id_of(&domain);
    let d = [domain_id.as_str()];
    expect(&c.call(a, full, "POST", "/v1/domains", &[], Some(json!({"domain": "example.com"}))).await, 409);
    expect(&c.call(a, full, "GET", "/v1/domains", &[], None).await, 200);
    expect(&c.call(a, full, "POST", "/v1/domains/{id}/verify", &d, None).await, 200);
    expect(&c.call(a, full, "GET", "/v1/domains/{id}", &d, None).await, 200);
    expect(&c.call(a, full, "PATCH", "/v1/domains/{id}", &d, Some(json!({"openTracking": true}))).await, 200);
    let sender = json!({"username": "billing", "displayName": "Billing"});
    expect(&c.call(a, full, "POST", "/v1/domains/{id}/senders", &d, Some(sender.clone())).await, 422);
    mark_verified(&api, &domain_id).await;
    expect(&c.call(a, full, "POST", "/v1/domains/{id}/senders", &d, Some(sender)).await, 201);
    expect(&c.call(a, full, "GET", "/v1/domains/{id}/senders", &d, None).await, 200);
    // The reputation guard: where each scope stands, and the resumes (200 when not paused).
    expect(&c.call(a, full, "GET", "/v1/reputation", &[], None).await, 200);
    expect(&c.call(a, full, "POST", "/v1/domains/{id}/resume", &d, None).await, 200);
    expect(&c.call(a, full, "POST", "/v1/reputation/resume", &[], None).await, 200);
    let rotated = c.call(a, full, "POST", "/v1/domains/{id}/rotate-dkim", &d, None).await;
    expect(&rotated, 200);
    let states: Vec<&Value> = rotated.data()["dnsRecords"].as_array().unwrap().iter().map(|r| &r["state"]).collect();
    assert!(states.contains(&&json!("Pending")) && states.contains(&&json!(null)), "{states:?}");
    expect(&c.call(a, full, "POST", "/v1/domains/{id}/rotate-dkim", &d, None).await, 409);
    let scoped = json!({"sendingDomainId": domain_id, "rateLimitPerSec": 1});
    let scoped = c.call(a, full, "POST", "/v1/keys", &[], Some(scoped)).await;
    expect(&scoped, 201);
    let scoped = scoped.data()["plaintextKey"].as_str().unwrap().to_owned();

    // Templates.
    let template = json!({"name": "welcome", "subject": "Hi {{name}}", "html": "<p>{{name}}</p>"});
    let template = c.call(a, full, "POST", "/v1/templates", &[], Some(template)).await;
    expect(&template, 201);
    let template_id = id_of(&template);
    let t = [template_id.as_str()];
    let broken = json!({"name": "broken", "subject": "Hi", "html": "{{#if x}}open"});
    expect(&c.call(a, full, "POST", "/v1/templates", &[], Some(broken)).await, 422);
    expect(&c.call(a, full, "GET", "/v1/templates", &[], None).await, 200);
    expect(&c.call(a, full, "GET", "/v1/templates/{id}", &t, None).await, 200);
    expect(&c.call(a, full, "PATCH", "/v1/templates/{id}", &t, Some(json!({"name": "welcome 2"}))).await, 200);
    let version = json!({"subject": "Hello {{name}}", "text": "Hello", "makeCurrent": false});
    expect(&c.call(a, full, "POST", "/v1/templates/{id}/versions", &t, Some(version)).await, 201);
    let variables = json!({"variables": {"name": "Ann"}});
    expect(&c.call(a, full, "POST", "/v1/templates/{id}/render", &t, Some(variables)).await, 200);
    expect(&c.call(a, full, "POST", "/v1/templates/{id}/render", &t, Some(json!({}))).await, 422);

    // Messages: a send, its replay, the send failures and the reads.
    let send = json!({"to": "ann@example.net", "from": "billing@example.com", "templateId": template_id,
        "variables": {"name": "Ann"}});
    let once = [("idempotency-key", "order-1")];
    let sent = c.call_with(a, full, "POST", "/v1/messages", &[], Some(send.clone()), &once).await;
    expect(&sent, 201);
    let message_id = id_of(&sent);
    let replay = c.call_with(a, full, "POST", "/v1/messages", &[], Some(send.clone()), &once).await;
    assert_eq!(replay.headers["idempotent-replayed"], "true");
    let other = json!({"to": "bob@example.net", "subject": "s", "text": "t"});
    expect(&c.call_with(a, full, "POST", "/v1/messages", &[], Some(other.clone()), &once).await, 409);
    expect(
        &c.call_with(a, full, "POST", "/v1/messages", &[], Some(other.clone()), &[("idempotency-key", "")]).await,
        400,
    );
    let elsewhere = json!({"to": "bob@example.net", "from": "a@example.org", "subject": "s", "text": "t"});
    expect(&c.call(a, Some(&scoped), "POST", "/v1/messages", &[], Some(elsewhere)).await, 403);
    expect(&c.call(a, Some(&scoped), "POST", "/v1/messages", &[], Some(other.clone())).await, 201);
    expect(&c.call(a, Some(&scoped), "POST", "/v1/messages", &[], Some(other.clone())).await, 429);
    expect(&c.call(a, full, "POST", "/v1/messages", &[], Some(json!({"to": ["a@b.c"]}))).await, 422);
    let rich = json!({"to": "ann@example.net", "from": "billing@example.com", "subject": "s",
        "html": "<img src=\"cid:logo\">", "replyTo": ["help@example.com"], "headers": {"X-Campaign": "spring"},
        "tags": [{"name": "plan", "value": "pro"}], "metadata": {"orderId": "A-17"},
        "attachments": [{"filename": "logo.png", "contentType": "image/png", "content": "iVBORw0KGgo=", "contentId": "logo"},
            {"filename": "a.pdf", "contentType": "application/pdf", "content": "JVBERg=="}]});
    expect(&c.call(a, full, "POST", "/v1/messages", &[], Some(rich)).await, 201);
    let injected = json!({"to": "ann@example.net", "subject": "s", "text": "t", "headers": {"X-A": "1\r\nBcc: x@y.z"}});
    expect(&c.call(a, full, "POST", "/v1/messages", &[], Some(injected)).await, 422);
    expect(&c.call(a, full, "GET", "/v1/messages?tag=plan:pro&metadata%5BorderId%5D=A-17", &[], None).await, 200);
    expect(&c.call(a, full, "GET", "/v1/messages?tag=bad%20name", &[], None).await, 422);
    let m = [message_id.as_str()];
    expect(&c.call(a, full, "GET", "/v1/messages?status=Queued&limit=1", &[], None).await, 200);
    expect(&c.call(a, full, "GET", "/v1/messages?status=Lost", &[], None).await, 422);
    expect(&c.call(a, full, "GET", "/v1/messages/{id}", &m, None).await, 200);
    expect(&c.call(a, Some(&send_key), "GET", "/v1/messages/{id}", &m, None).await, 404);
    expect(&c.call(a, full, "GET", "/v1/messages/{id}/events", &m, None).await, 200);

    // Scheduling: a scheduled send, its reschedule and cancel, and their conflicts.
    let in_an_hour = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let later = json!({"to": "cy@example.net", "subject": "s", "text": "t", "scheduledAt": in_an_hour});
    let scheduled = c.call(a, full, "POST", "/v1/messages", &[], Some(later)).await;
    expect(&scheduled, 201);
    assert_eq!(scheduled.data()["status"], "Scheduled");
    assert_eq!(scheduled.data()["scheduledAt"].as_str().map(str::is_empty), Some(false));
    let sm = id_of(&scheduled);
    let sm = [sm.as_str()];
    let in_two = (chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
    expect(&c.call(a, full, "PATCH", "/v1/messages/{id}", &sm, Some(json!({"scheduledAt": in_two}))).await, 200);
    expect(&c.call(a, full, "PATCH", "/v1/messages/{id}", &sm, Some(json!({}))).await, 422);
    expect(&c.call(a, Some(&send_key), "POST", "/v1/messages/{id}/cancel", &sm, None).await, 404);
    expect(&c.call(a, full, "POST", "/v1/messages/{id}/cancel", &sm, None).await, 200);
    expect(&c.call(a, full, "POST", "/v1/messages/{id}/cancel", &sm, None).await, 409);
    expect(&c.call(a, full, "PATCH", "/v1/messages/{id}", &sm, Some(json!({"scheduledAt": null}))).await, 409);
    let canceled = c.call(a, full, "GET", "/v1/messages/{id}/events", &sm, None).await;
    let types: Vec<&str> = canceled.data().as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["Scheduled", "Scheduled", "Canceled"]);

    // Batches: strict, its replay, permissive with a refused item, and the failures.
    let batch = json!([{"to": "d1@example.net", "subject": "s", "text": "t"}, {"to": "d2@example.net", "subject": "s", "text": "t"}]);
    let key = [("idempotency-key", "batch-1")];
    let queued = c.call_with(a, full, "POST", "/v1/messages/batch", &[], Some(batch.clone()), &key).await;
    expect(&queued, 201);
    assert_eq!(queued.data().as_array().map(Vec::len), Some(2));
    let replayed = c.call_with(a, full, "POST", "/v1/messages/batch", &[], Some(batch.clone()), &key).await;
    expect(&replayed, 201);
    assert_eq!(replayed.headers["idempotent-replayed"], "true");
    assert_eq!(replayed.data(), queued.data(), "the same results");
    let mut reordered = batch.clone();
    reordered.as_array_mut().unwrap().reverse();
    expect(&c.call_with(a, full, "POST", "/v1/messages/batch", &[], Some(reordered), &key).await, 409);
    let mixed = json!([{"to": "d3@example.net", "subject": "s", "text": "t"}, {"subject": "s", "text": "t"}]);
    let permissive = [("x-batch-validation", "permissive")];
    let partial = c.call_with(a, full, "POST", "/v1/messages/batch", &[], Some(mixed.clone()), &permissive).await;
    expect(&partial, 200);
    assert_eq!(partial.data()[1]["error"]["code"], "validation_error");
    assert_eq!(partial.data()[0]["message"]["to"], "d3@example.net");
    let strict = c.call(a, full, "POST", "/v1/messages/batch", &[], Some(mixed)).await;
    expect(&strict, 422);
    assert_eq!(strict.body["error"]["details"][0]["field"], "[1].to");
    expect(&c.call(a, Some(&scoped), "POST", "/v1/messages/batch", &[], Some(batch.clone())).await, 422);
    expect(&c.call(a, full, "POST", "/v1/messages/batch", &[], Some(json!({"to": "x@example.net"}))).await, 400);
    let bad_mode = [("x-batch-validation", "lenient")];
    expect(&c.call_with(a, full, "POST", "/v1/messages/batch", &[], Some(batch), &bad_mode).await, 422);

    // Tracking: public, and outside the envelope when it succeeds.
    let workspace = api.core.authenticate(&api.key).await.unwrap().workspace_id;
    let key = crate::support::tracking_config().key;
    let message = MessageId::parse(&message_id).unwrap();
    let open = key.sign_open(workspace, message, None);
    let click = key.sign_click(workspace, message, None, &TrackedUrl::parse("https://shop.example.com/a?b=c").unwrap());
    assert_eq!(c.call_raw(a, "/t/o/{token}", &[&open]).await.status, StatusCode::OK);
    let redirect = c.call_raw(a, "/t/c/{token}", &[&click]).await;
    assert_eq!(redirect.status, StatusCode::FOUND);
    assert_eq!(redirect.headers["location"], "https://shop.example.com/a?b=c");
    expect(&c.call(a, None, "GET", "/t/c/{token}", &[&open], None).await, 404);
    expect(&c.call(a, None, "GET", "/t/o/{token}", &[&click], None).await, 404);

    // Suppressions.
    let gone = json!({"email": "gone@example.net"});
    expect(&c.call(a, full, "POST", "/v1/suppressions", &[], Some(gone.clone())).await, 201);
    expect(&c.call(a, full, "POST", "/v1/suppressions", &[], Some(gone)).await, 200);
    let suppressed = json!({"to": "gone@example.net", "subject": "s", "text": "t"});
    expect(&c.call(a, full, "POST", "/v1/messages", &[], Some(suppressed)).await, 422);
    expect(&c.call(a, full, "GET", "/v1/suppressions?reason=Manual", &[], None).await, 200);
    expect(&c.call(a, full, "GET", "/v1/suppressions/{email}", &["gone@example.net"], None).await, 200);
    expect(&c.call(a, full, "DELETE", "/v1/suppressions/{email}", &["gone@example.net"], None).await, 200);
    expect(&c.call(a, full, "DELETE", "/v1/suppressions/{email}", &["gone@example.net"], None).await, 404);

    // Webhooks.
    let hook = json!({"url": "https://hooks.example.com/tidings", "eventTypes": ["Delivered", "Bounced"]});
    let hook = c.call(a, full, "POST", "/v1/webhooks", &[], Some(hook)).await;
    expect(&hook, 201);
    let hook_id = id_of(&hook);
    let w = [hook_id.as_str()];
    let plain_http = json!({"url": "http://hooks.example.com/", "eventTypes": ["Delivered"]});
    expect(&c.call(a, full, "POST", "/v1/webhooks", &[], Some(plain_http)).await, 422);
    expect(&c.call(a, full, "GET", "/v1/webhooks", &[], None).await, 200);
    expect(&c.call(a, full, "GET", "/v1/webhooks/{id}", &w, None).await, 200);
    expect(&c.call(a, full, "PATCH", "/v1/webhooks/{id}", &w, Some(json!({"enabled": false}))).await, 200);
    let delivery = c.call(a, full, "POST", "/v1/webhooks/{id}/test", &w, None).await;
    expect(&delivery, 201);
    let delivery_id = id_of(&delivery);
    expect(&c.call(a, full, "POST", "/v1/webhooks/{id}/rotate-secret", &w, None).await, 200);
    expect(&c.call(a, full, "GET", "/v1/webhooks/{id}/deliveries", &w, None).await, 200);
    let retry = "/v1/webhooks/{id}/deliveries/{deliveryId}/retry";
    expect(&c.call(a, full, "POST", retry, &[&hook_id, &delivery_id], None).await, 200);
    // Inbound mail: routes, and a received message (stored as the listener would).
    let inbound = json!({"url": "https://hooks.example.com/in", "eventTypes": ["InboundReceived"]});
    let inbound = c.call(a, full, "POST", "/v1/webhooks", &[], Some(inbound)).await;
    expect(&inbound, 201);
    let route = json!({"match": "support@example.com", "action": "webhook", "webhookId": id_of(&inbound)});
    let route = c.call(a, full, "POST", "/v1/inbound/routes", &[], Some(route)).await;
    expect(&route, 201);
    let r = [id_of(&route)];
    let r = [r[0].as_str()];
    expect(
        &c.call(a, full, "POST", "/v1/inbound/routes", &[], Some(json!({"match": "nope", "action": "store"}))).await,
        422,
    );
    expect(&c.call(a, full, "GET", "/v1/inbound/routes", &[], None).await, 200);
    expect(&c.call(a, full, "GET", "/v1/inbound/routes/{id}", &r, None).await, 200);
    expect(&c.call(a, full, "PATCH", "/v1/inbound/routes/{id}", &r, Some(json!({"action": "store"}))).await, 200);
    expect(&c.call(a, full, "DELETE", "/v1/inbound/routes/{id}", &r, None).await, 200);
    let received = store_inbound(&api).await;
    let m = [received.as_str()];
    expect(&c.call(a, full, "GET", "/v1/inbound/messages?to=support@example.com", &[], None).await, 200);
    expect(&c.call(a, full, "GET", "/v1/inbound/messages/{id}", &m, None).await, 200);
    expect(&c.call(a, full, "GET", "/v1/inbound/messages/{id}", &[UNKNOWN_ID], None).await, 404);
    let key = api.key.clone();
    assert_eq!(c.call_raw_keyed(a, &key, "/v1/inbound/messages/{id}/raw", &m).await.status, StatusCode::OK);
    let attachment = "/v1/inbound/messages/{id}/attachments/{index}";
    assert_eq!(c.call_raw_keyed(a, &key, attachment, &[m[0], "0"]).await.status, StatusCode::OK);
    expect(&c.call(a, full, "GET", attachment, &[m[0], "7"], None).await, 404);
    expect(&c.call(a, full, "DELETE", "/v1/webhooks/{id}", &w, None).await, 200);

    // Deletes, and the document itself.
    let s = [domain_id.as_str(), "billing"];
    expect(&c.call(a, full, "DELETE", "/v1/domains/{id}/senders/{username}", &s, None).await, 200);
    expect(&c.call(a, full, "DELETE", "/v1/templates/{id}", &t, None).await, 200);
    expect(&c.call(a, full, "DELETE", "/v1/domains/{id}", &d, None).await, 200);
    expect(&c.call(a, full, "DELETE", "/v1/keys/{id}", &[&send_key_id], None).await, 200);
    expect(&c.call(a, None, "GET", "/v1/openapi.json", &[], None).await, 200);

    // The probes, and readiness without a store.
    expect(&c.call(a, None, "GET", "/healthz", &[], None).await, 200);
    expect(&c.call(a, None, "GET", "/readyz", &[], None).await, 200);
    let down = crate::support::TestApi::without_store();
    expect(&c.call(&down, None, "GET", "/readyz", &[], None).await, 503);
    assert_eq!(c.call_raw(a, "/metrics", &[]).await.status, StatusCode::OK);

    let never: Vec<_> = documented_operations(&c.doc).difference(&c.succeeded).cloned().collect();
    assert!(never.is_empty(), "operations never checked with a success: {never:?}");
}

#[tokio::test]
async fn the_sandbox_domains_responses_match_the_documented_schemas() {
    let api = TestApi::with_sandbox().await;
    let mut c = Checked::new(&api).await;
    let full = Some(api.key.as_str());
    let a = &api;

    let plain = json!({"to": "ann@example.net", "subject": "s", "text": "t"});
    let sent = c.call(a, full, "POST", "/v1/messages", &[], Some(plain)).await;
    expect(&sent, 201);
    assert_eq!(sent.data()["fromAddress"], "noreply@sandbox.tidings.invalid");
    let listed = c.call(a, full, "GET", "/v1/domains", &[], None).await;
    expect(&listed, 200);
    let sandbox = &listed.data()[0];
    assert_eq!((sandbox["sandbox"].as_bool(), sandbox["dnsRecords"][1]["note"].is_string()), (Some(true), true));
    let id = sandbox["id"].as_str().unwrap().to_owned();
    let d = [id.as_str()];
    expect(&c.call(a, full, "GET", "/v1/domains/{id}", &d, None).await, 200);
    expect(&c.call(a, full, "POST", "/v1/domains/{id}/verify", &d, None).await, 200);
    expect(&c.call(a, full, "PATCH", "/v1/domains/{id}", &d, Some(json!({"clickTracking": true}))).await, 200);
    expect(&c.call(a, full, "POST", "/v1/domains/{id}/rotate-dkim", &d, None).await, 422);
    let refused = c.call(a, full, "DELETE", "/v1/domains/{id}", &d, None).await;
    expect(&refused, 422);
    assert_eq!(refused.body["error"]["details"][0]["field"], "id");
    let reserved = json!({"domain": "sandbox.tidings.invalid"});
    expect(&c.call(a, full, "POST", "/v1/domains", &[], Some(reserved)).await, 422);
    let customer = c.call(a, full, "POST", "/v1/domains", &[], Some(json!({"domain": "example.com"}))).await;
    expect(&customer, 201);
    assert_eq!(customer.data()["sandbox"], false);
}

/// The committed document (`docs/openapi.json`), so that a change to the API's shape shows in
/// the diff that makes it. `TIDINGS_UPDATE_OPENAPI=1` writes it again.
#[tokio::test]
async fn the_committed_document_is_the_one_served() {
    let api = TestApi::new().await;
    let served = fetch_document(&api).await;
    let mut text = serde_json::to_string_pretty(&served).expect("a document");
    text.push('\n');
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
    if std::env::var_os("TIDINGS_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &text).expect("write docs/openapi.json");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "docs/openapi.json is not the document the router serves: run \
         `TIDINGS_UPDATE_OPENAPI=1 cargo test -p tidings-http --test it the_committed_document` and commit it"
    );
}
