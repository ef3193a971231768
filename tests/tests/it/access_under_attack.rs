//! Access under attack, against the real binary:
//!
//! - [`every_route_answers_every_kind_of_key_as_documented`]: every route the router
//!   serves (read from [`tidings_http::served_routes`], so a route added later is covered or
//!   the test fails asking to classify it) × seven kinds of key, with two workspaces holding
//!   one of everything: the status and code of docs/api.md#errors and #authentication, and no
//!   answer carrying anything of the other workspace (nor, to a send key, another key's
//!   messages).
//! - [`keys_and_webhook_secrets_stay_out_of_logs_responses_and_the_store`]: plaintext keys
//!   appear in no log line (debug level) and no later response; the store holds only their
//!   hashes. Webhook secrets are stored sealed (the server opens them to sign): neither their
//!   text nor their bytes are in the store either.
//! - [`a_burst_of_bad_keys_is_throttled_to_exactly_the_allowance`]: 10,000 bad keys, 32 in
//!   flight, from one address: exactly 20 401s, then only 429 with `Retry-After`; another
//!   address is not affected.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use crate::common::raw_store;
use crate::common::{assert_error, assert_ok, create_key, ids, two_workspaces_with, verified_domain};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures::StreamExt as _;
use reqwest::Method;
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options, TestServer, fresh_key, into_parts};

/// The kinds of caller every route is tried with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// No `Authorization` and no `X-Api-Key`.
    NoKey,
    /// Something that is not a key at all.
    Malformed,
    /// A key of the workspace that was revoked.
    Revoked,
    /// The full key of the other workspace, on this workspace's ids.
    OtherWorkspace,
    /// A `send` key.
    Send,
    /// A `send` key restricted to the workspace's domain.
    ScopedSend,
    /// A `full` key.
    Full,
}

/// In the order they are tried: every refusal first, and the full key last, because it
/// deletes what the others probe.
const KINDS: [Kind; 7] =
    [Kind::NoKey, Kind::Malformed, Kind::Revoked, Kind::OtherWorkspace, Kind::Send, Kind::ScopedSend, Kind::Full];

/// How a route is guarded (docs/api.md#authentication).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    /// Answers without a key, and the same whatever key is sent.
    Public,
    /// Any valid key, a `send` key too (sending; listing shows a send key its own mail).
    SendAllowed,
    /// Any valid key on a message of its workspace; a `send` key only on the messages it
    /// sent itself, 404 on any other.
    OwnMessage,
    /// `full` keys only: 403 `insufficient_scope` for `send` keys.
    Management,
}

/// The guard of a route the router serves; `None` for a route this test does not know,
/// which fails the test: a new route must be classified here before it ships.
fn classify(method: &Method, path: &str) -> Option<Guard> {
    let guard = match (method.as_str(), path) {
        ("GET", "/healthz" | "/readyz" | "/metrics" | "/v1/openapi.json" | "/t/o/{token}" | "/t/c/{token}") => {
            Guard::Public
        }
        ("GET" | "POST", "/v1/messages") | ("POST", "/v1/messages/batch") => Guard::SendAllowed,
        ("GET", "/v1/messages/{id}" | "/v1/messages/{id}/events")
        | ("POST", "/v1/messages/{id}/cancel")
        | ("PATCH", "/v1/messages/{id}") => Guard::OwnMessage,
        // docs/api.md#authentication: a send key may do nothing else, so every route of these
        // resources is management. A new resource family is not assumed to be.
        (_, p)
            if [
                "/v1/keys",
                "/v1/domains",
                "/v1/templates",
                "/v1/suppressions",
                "/v1/webhooks",
                "/v1/reputation",
                "/v1/inbound",
            ]
            .iter()
            .any(|family| p == *family || p.starts_with(&format!("{family}/"))) =>
        {
            Guard::Management
        }
        _ => return None,
    };
    Some(guard)
}

/// One workspace with one of everything, and every string that identifies any of it.
struct Workspace {
    tag: &'static str,
    full: String,
    send: String,
    scoped: String,
    revoked: String,
    /// A key only there to be read and revoked by the matrix.
    victim_key: String,
    domain: String,
    sender: String,
    template: String,
    webhook: String,
    delivery: String,
    suppressed: String,
    /// An inbound route, and a message received for the domain (with an attachment).
    inbound_route: String,
    inbound_message: String,
    /// The message each sending kind sent (`Full`, `Send`, `ScopedSend`).
    messages: BTreeMap<Kind, String>,
    /// Ids, names, addresses, keys and secrets: none may reach another workspace's caller.
    markers: Vec<String>,
}

impl Workspace {
    /// Fills the workspace whose full key is `full` (its id is `id`); every name carries `tag`.
    async fn populate(server: &TestServer, dns: &TestDnsServer, tag: &'static str, id: String, full: String) -> Self {
        let domain_name = format!("{tag}-mail.example");
        let domain = verified_domain(server, dns, &full, &domain_name).await;
        let sender = format!("{tag}-billing");
        let (status, body) =
            server.post(&format!("/v1/domains/{domain}/senders"), &full, json!({"username": sender})).await;
        assert_ok(status, &body, 201, &format!("{tag} adds a sender"));
        let template_name = format!("{tag}-template");
        let (status, body) =
            server.post("/v1/templates", &full, json!({"name": template_name, "subject": "s", "text": "t"})).await;
        assert_ok(status, &body, 201, &format!("{tag} creates a template"));
        let template = body["data"]["id"].as_str().unwrap().to_owned();
        let template_version = body["data"]["currentVersionId"].as_str().unwrap().to_owned();
        let hook_url = format!("https://hooks.example.com/{tag}-hook");
        let (status, body) =
            server.post("/v1/webhooks", &full, json!({"url": hook_url, "eventTypes": ["Queued"]})).await;
        assert_ok(status, &body, 201, &format!("{tag} creates a webhook"));
        let webhook = body["data"]["id"].as_str().unwrap().to_owned();
        let secret = body["data"]["secret"].as_str().unwrap().to_owned();
        let suppressed = format!("{tag}-suppressed@example.com");
        let (status, body) = server.post("/v1/suppressions", &full, json!({"email": suppressed})).await;
        assert_ok(status, &body, 201, &format!("{tag} suppresses an address"));
        let (inbound_route, inbound_message) = receive_mail(server, dns, &full, &domain, &domain_name).await;

        let (send_id, send) = create_key(server, &full, json!({"name": format!("{tag}-send"), "scope": "send"})).await;
        let scoped_request = json!({"name": format!("{tag}-scoped"), "scope": "send", "sendingDomainId": domain});
        let (scoped_id, scoped) = create_key(server, &full, scoped_request).await;
        let (revoked_id, revoked) = create_key(server, &full, json!({"name": format!("{tag}-revoked")})).await;
        let (status, body) = server.delete(&format!("/v1/keys/{revoked_id}"), &full).await;
        assert_ok(status, &body, 200, &format!("{tag} revokes a key"));
        let (victim_key, victim) = create_key(server, &full, json!({"name": format!("{tag}-victim")})).await;

        let recipient = format!("{tag}-rcpt@example.com");
        let subject = format!("{tag}-subject");
        let mut messages = BTreeMap::new();
        for (kind, key) in [(Kind::Full, &full), (Kind::Send, &send), (Kind::ScopedSend, &scoped)] {
            let send = json!({"to": recipient, "subject": subject, "text": "t"});
            let (status, body) = server.post("/v1/messages", key, send).await;
            assert_ok(status, &body, 201, &format!("{tag} sends with its {kind:?} key"));
            messages.insert(kind, body["data"]["id"].as_str().unwrap().to_owned());
        }
        let (_, body) = server.get(&format!("/v1/webhooks/{webhook}/deliveries"), &full).await;
        let delivery = ids(&body).first().cloned().expect("the sends queued deliveries for the Queued event");

        let (_, keys) = server.get("/v1/keys", &full).await;
        let mut markers = vec![id, domain.clone(), domain_name, sender.clone(), template.clone(), template_version];
        markers.extend([template_name, webhook.clone(), hook_url, secret, delivery.clone(), suppressed.clone()]);
        markers.extend([recipient, subject, send.clone(), scoped.clone(), revoked.clone(), full.clone(), victim]);
        markers.extend([send_id, scoped_id, revoked_id, victim_key.clone()]);
        markers.extend([inbound_route.clone(), inbound_message.clone()]);
        markers.extend(messages.values().cloned());
        // Every key's id and prefix, the first one's (made by the CLI) too.
        for key in keys["data"].as_array().unwrap() {
            markers.extend([key["id"].as_str().unwrap().to_owned(), key["prefix"].as_str().unwrap().to_owned()]);
        }
        Self {
            tag,
            full,
            send,
            scoped,
            revoked,
            victim_key,
            domain,
            sender,
            template,
            webhook,
            delivery,
            suppressed,
            inbound_route,
            inbound_message,
            messages,
            markers,
        }
    }

    /// The key `kind` presents to this workspace (`other` is the other workspace).
    fn key<'a>(&'a self, kind: Kind, other: &'a Workspace) -> Option<&'a str> {
        match kind {
            Kind::NoKey => None,
            Kind::Malformed => Some("not-a-key"),
            Kind::Revoked => Some(&self.revoked),
            Kind::OtherWorkspace => Some(&other.full),
            Kind::Send => Some(&self.send),
            Kind::ScopedSend => Some(&self.scoped),
            Kind::Full => Some(&self.full),
        }
    }

    /// `path` with its parameters filled from this workspace; `message` is the message id for
    /// `/v1/messages/{id}…`. Panics on a parameter this test does not know.
    fn fill(&self, path: &str, message: &str) -> String {
        let family = path.split('/').nth(2).unwrap_or("");
        let id = match (family, path.split('/').nth(3).unwrap_or("")) {
            ("inbound", "routes") => self.inbound_route.as_str(),
            ("inbound", _) => self.inbound_message.as_str(),
            (family, _) => match family {
                "keys" => self.victim_key.as_str(),
                "domains" => &self.domain,
                "templates" => &self.template,
                "webhooks" => &self.webhook,
                "messages" => message,
                _ => "",
            },
        };
        let mut filled = String::new();
        for segment in path.split('/').skip(1) {
            let value = match segment {
                "{id}" if !id.is_empty() => id,
                "{deliveryId}" => &self.delivery,
                "{username}" => &self.sender,
                "{email}" => &self.suppressed,
                "{index}" => "0",
                // Public: any token answers without a key; this one names nothing.
                "{token}" => "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                s if s.starts_with('{') => {
                    panic!("{path}: the parameter {s} is unknown to this test; say in `fill` which id it takes")
                }
                s => s,
            };
            filled.push('/');
            filled.push_str(value);
        }
        filled
    }
}

/// Makes `domain` (named `name`, verified) receive mail with a `store` route for all of it,
/// and hands the listener one message with an attachment; returns the route's and the
/// message's ids.
async fn receive_mail(
    server: &TestServer,
    dns: &TestDnsServer,
    full: &str,
    domain: &str,
    name: &str,
) -> (String, String) {
    let (status, body) = server.patch(&format!("/v1/domains/{domain}"), full, json!({"inbound": true})).await;
    assert_ok(status, &body, 200, "switch inbound on");
    crate::common::publish(dns, &body["data"], &["Inbound"]).await;
    let (status, body) = server.post(&format!("/v1/domains/{domain}/verify"), full, json!({})).await;
    assert_ok(status, &body, 200, "verify the inbound MX");
    assert_eq!(body["data"]["inboundStatus"], "Verified", "{body}");
    let (status, body) =
        server.post("/v1/inbound/routes", full, json!({"match": format!("*@{name}"), "action": "store"})).await;
    assert_ok(status, &body, 201, "an inbound route");
    let route = body["data"]["id"].as_str().unwrap().to_owned();
    let line = server.wait_for_log(&["inbound SMTP listening on "]).expect("the listener's address is logged");
    let listener = line.rsplit(' ').next().unwrap().trim().parse().expect("an address");
    let to = format!("support@{name}");
    let mail = crate::inbound::ATTACHED.replace("support@in.shop.example", &to);
    let sent = crate::inbound::smtp(listener, "ann@sender.example", &[&to], mail.as_bytes()).await;
    assert_eq!(sent.end_of_data, Some(250), "{sent:?}");
    let (status, body) = server.get("/v1/inbound/messages", full).await;
    assert_ok(status, &body, 200, "list inbound mail");
    (route, body["data"][0]["id"].as_str().expect("the received message").to_owned())
}

/// Clients on loopback addresses of their own for the requests that fail authentication,
/// a fresh address before the failed-auth throttle (20 a minute) would kick in: the matrix
/// is about what each request answers, not about the throttle.
struct FailingClients {
    clients: Vec<reqwest::Client>,
    failures: usize,
}

impl FailingClients {
    const PER_ADDRESS: usize = 15;

    fn next(&mut self, server: &TestServer) -> reqwest::Client {
        let index = self.failures / Self::PER_ADDRESS;
        self.failures += 1;
        if self.clients.len() <= index {
            let n = u8::try_from(index).expect("fewer than 256 addresses");
            self.clients.push(server.client_from(IpAddr::V4(Ipv4Addr::new(127, 9, 0, n.saturating_add(1)))));
        }
        self.clients[index].clone()
    }
}

/// What the matrix did, for the summary it prints (SECURITY.md quotes it).
#[derive(Default)]
struct Tally {
    requests: usize,
    by_status: BTreeMap<u16, usize>,
    leak_checks: usize,
    /// The messages the matrix sent, by workspace tag and kind of key.
    sent: BTreeMap<(&'static str, Kind), Vec<String>>,
}

/// Sends one request of the matrix; its status and body (parsed when JSON).
async fn send(
    client: &reqwest::Client,
    server: &TestServer,
    method: &Method,
    path: &str,
    key: Option<&str>,
) -> (u16, String, Value) {
    let mut request = client.request(method.clone(), server.url(path));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if [Method::POST, Method::PATCH].contains(method) {
        // A neutral recipient: the answer names nothing of either workspace.
        let send = json!({"to": "matrix@example.com", "subject": "matrix", "text": "t"});
        let body = match path {
            "/v1/messages" => send,
            "/v1/messages/batch" => json!([send]),
            _ => json!({}),
        };
        request = request.json(&body);
    }
    let response = request.send().await.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, text, json)
}

/// A request that got past authentication and authorisation: a success, or a refusal of
/// what it asked (a conflict, a validation error), never 401/403/404/429 or a 5xx.
#[track_caller]
fn assert_allowed(status: u16, body: &Value, what: &str) {
    let refused_for_content = matches!(status, 409 | 422) && body["success"] == false;
    assert!(
        (200..300).contains(&status) || refused_for_content,
        "{what}: expected to be allowed, got {status}: {body}"
    );
}

/// Runs every route with every kind of key against `owner`'s ids.
async fn run_matrix(
    server: &TestServer,
    owner: &Workspace,
    other: &Workspace,
    kinds: &[Kind],
    failing: &mut FailingClients,
    tally: &mut Tally,
) {
    let local = server.client_from(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let mut routes = tidings_http::served_routes();
    // Deletions last, the deepest first (a sender before its domain): the full key's pass
    // must find everything still there.
    routes.sort_by_key(|(method, path)| (*method == Method::DELETE, std::cmp::Reverse(path.matches('/').count())));
    for (method, route) in &routes {
        let guard = classify(method, route).unwrap_or_else(|| {
            panic!("{method} {route} is served but not classified: add it to `classify` in {}", file!())
        });
        let mut public_answer: Option<u16> = None;
        for &kind in kinds {
            let key = owner.key(kind, other);
            let own_message = owner.messages.get(&kind).or(owner.messages.get(&Kind::Full)).unwrap();
            let path = owner.fill(route, own_message);
            let what = format!("{method} {path} ({route}) to {} with {kind:?}", owner.tag);
            let fails_auth = guard != Guard::Public && matches!(kind, Kind::NoKey | Kind::Malformed | Kind::Revoked);
            let client = if fails_auth { failing.next(server) } else { local.clone() };
            let (status, text, body) = send(&client, server, method, &path, key).await;
            tally.requests += 1;
            *tally.by_status.entry(status).or_default() += 1;
            assert!(status < 500, "{what}: {status} {text}");
            let has_ids = route.contains('{');
            match (guard, kind) {
                (Guard::Public, _) => {
                    let first = *public_answer.get_or_insert(status);
                    assert_eq!(status, first, "{what}: a public route answers the same whatever the key");
                    assert!(![401, 403, 429].contains(&status), "{what}: public, yet {status} {text}");
                }
                (_, Kind::NoKey) => assert_error(status, &body, 401, "missing_api_key", &what),
                (_, Kind::Malformed | Kind::Revoked) => assert_error(status, &body, 401, "invalid_api_key", &what),
                (_, Kind::OtherWorkspace) if has_ids => assert_error(status, &body, 404, "not_found", &what),
                (Guard::Management, Kind::Send | Kind::ScopedSend) => {
                    assert_error(status, &body, 403, "insufficient_scope", &what)
                }
                _ => assert_allowed(status, &body, &what),
            }
            // Whose answer it is decides what it must not contain.
            let mut forbidden: Vec<&String> = match kind {
                Kind::NoKey | Kind::Malformed => owner.markers.iter().chain(&other.markers).collect(),
                Kind::OtherWorkspace => owner.markers.iter().collect(),
                _ => other.markers.iter().collect(),
            };
            if matches!(kind, Kind::Send | Kind::ScopedSend) {
                forbidden.extend(owner.messages.iter().filter(|(k, _)| **k != kind).map(|(_, id)| id));
            }
            for marker in forbidden {
                assert!(
                    !text.contains(marker.as_str()),
                    "{what}: the answer contains {marker}, not the caller's: {text}"
                );
            }
            tally.leak_checks += 1;
            if *method == Method::POST && *route == "/v1/messages" && status == 201 {
                let id = body["data"]["id"].as_str().expect("a sent message's id").to_owned();
                tally.sent.entry((owner.tag, kind)).or_default().push(id);
            }
            if *method == Method::POST && *route == "/v1/messages/batch" && (200..300).contains(&status) {
                for item in body["data"].as_array().expect("one result per item") {
                    if let Some(id) = item["message"]["id"].as_str() {
                        tally.sent.entry((owner.tag, kind)).or_default().push(id.to_owned());
                    }
                }
            }

            // A send key on a message another key of its workspace sent: not found.
            if guard == Guard::OwnMessage && matches!(kind, Kind::Send | Kind::ScopedSend) {
                let path = owner.fill(route, &owner.messages[&Kind::Full]);
                let (status, text, body) = send(&local, server, method, &path, key).await;
                tally.requests += 1;
                *tally.by_status.entry(status).or_default() += 1;
                assert_error(status, &body, 404, "not_found", &format!("{method} {path} with {kind:?}: another key's"));
                assert!(!text.contains(&owner.messages[&Kind::Full]), "{text}");
            }
        }
    }
}

#[tokio::test]
async fn every_route_answers_every_kind_of_key_as_documented() {
    let inbound = [("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:0"), ("TIDINGS_INBOUND_MX_HOST", "mx.tidings.test")];
    let (server, dns, (alpha_id, alpha_key), (beta_id, beta_key)) = two_workspaces_with(&inbound).await;
    let alpha = Workspace::populate(&server, &dns, "alpha", alpha_id, alpha_key).await;
    let beta = Workspace::populate(&server, &dns, "beta", beta_id, beta_key).await;

    let mut failing = FailingClients { clients: Vec::new(), failures: 0 };
    let mut tally = Tally::default();
    let refusals = &KINDS[..KINDS.len() - 1];
    // Both directions before either full key deletes anything.
    run_matrix(&server, &alpha, &beta, refusals, &mut failing, &mut tally).await;
    run_matrix(&server, &beta, &alpha, refusals, &mut failing, &mut tally).await;
    run_matrix(&server, &alpha, &beta, &[Kind::Full], &mut failing, &mut tally).await;
    run_matrix(&server, &beta, &alpha, &[Kind::Full], &mut failing, &mut tally).await;

    // Lists show a send key its own messages only, and the other workspace nothing.
    for (owner, other) in [(&alpha, &beta), (&beta, &alpha)] {
        for kind in [Kind::Send, Kind::ScopedSend] {
            let (status, body) = server.get("/v1/messages", owner.key(kind, other).unwrap()).await;
            assert_ok(status, &body, 200, &format!("{} lists with {kind:?}", owner.tag));
            let mut listed = ids(&body);
            listed.sort_unstable();
            let mut sent = tally.sent.get(&(owner.tag, kind)).cloned().unwrap_or_default();
            assert!(!sent.is_empty(), "the matrix sent with {kind:?}");
            sent.push(owner.messages[&kind].clone());
            sent.sort_unstable();
            assert_eq!(listed, sent, "{} {kind:?} lists exactly what it sent: {body}", owner.tag);
        }
    }
    let routes = tidings_http::served_routes().len();
    println!(
        "access matrix: {routes} routes x {} key kinds x 2 workspaces: {} requests, statuses {:?}, {} answers checked for leaks",
        KINDS.len(),
        tally.requests,
        tally.by_status,
        tally.leak_checks
    );
}

/// Every plaintext key and webhook secret the test made, for the searches.
struct Secrets {
    keys: Vec<String>,
    webhook_secrets: Vec<String>,
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    raw_store::contains(haystack, needle.as_bytes())
}

#[tokio::test]
async fn keys_and_webhook_secrets_stay_out_of_logs_responses_and_the_store() {
    let bootstrap = fresh_key();
    let env = vec![("TIDINGS_LOG".to_owned(), "debug".to_owned())];
    let server =
        TestServer::start_with(Options { bootstrap_key: Some(bootstrap.clone()), env, ..Options::default() }).await;
    let mut secrets = Secrets { keys: vec![bootstrap.clone()], webhook_secrets: Vec::new() };

    // Keys made, used (in both headers), failed with, revoked and used again.
    let (full_id, full) = create_key(&server, &bootstrap, json!({"name": "full"})).await;
    let (send_id, send) = create_key(&server, &bootstrap, json!({"name": "send", "scope": "send"})).await;
    let (revoked_id, revoked) = create_key(&server, &bootstrap, json!({"name": "revoked"})).await;
    secrets.keys.extend([full.clone(), send.clone(), revoked.clone()]);
    assert_eq!(server.get("/v1/keys", &full).await.0, 200);
    assert_eq!(server.get("/v1/messages", &send).await.0, 200);
    assert_eq!(server.get("/v1/keys", &send).await.0, 403);
    let response = server.request(Method::GET, "/v1/keys").header("x-api-key", &full).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.delete(&format!("/v1/keys/{revoked_id}"), &full).await.0, 200);
    assert_eq!(server.get("/v1/keys", &revoked).await.0, 401);
    // A near miss: the full key with its last character changed.
    let mut near = full.clone();
    near.pop();
    near.push(if full.ends_with('A') { 'B' } else { 'A' });
    assert_eq!(server.get("/v1/keys", &near).await.0, 401);

    // A webhook, its secret rotated, a test delivery.
    let hook = json!({"url": "https://hooks.example.com/secret-test", "eventTypes": ["Delivered"]});
    let (status, body) = server.post("/v1/webhooks", &full, hook).await;
    assert_ok(status, &body, 201, "create a webhook");
    let webhook = body["data"]["id"].as_str().unwrap().to_owned();
    secrets.webhook_secrets.push(body["data"]["secret"].as_str().unwrap().to_owned());
    let (status, body) = server.post(&format!("/v1/webhooks/{webhook}/rotate-secret"), &full, json!({})).await;
    assert_ok(status, &body, 200, "rotate its secret");
    secrets.webhook_secrets.push(body["data"]["secret"].as_str().unwrap().to_owned());
    let (status, body) = server.post(&format!("/v1/webhooks/{webhook}/test"), &full, json!({})).await;
    assert_ok(status, &body, 201, "queue a test delivery");

    // After creation, no answer shows a key or a secret again.
    let mut later = Vec::new();
    for path in [
        "/v1/keys".to_owned(),
        format!("/v1/keys/{full_id}"),
        format!("/v1/keys/{send_id}"),
        "/v1/webhooks".to_owned(),
        format!("/v1/webhooks/{webhook}"),
        format!("/v1/webhooks/{webhook}/deliveries"),
    ] {
        let response = server.call(Method::GET, &path, &full, None).await;
        assert_eq!(response.status(), 200, "GET {path}");
        later.push((path, response.text().await.unwrap()));
    }
    let (status, body) = server.patch(&format!("/v1/webhooks/{webhook}"), &full, json!({"enabled": true})).await;
    assert_ok(status, &body, 200, "update the webhook");
    later.push(("PATCH webhook".to_owned(), body.to_string()));
    for (path, text) in &later {
        for secret in secrets.keys.iter().chain(&secrets.webhook_secrets) {
            assert!(!text.contains(secret.as_str()), "GET {path} shows a key or secret: {text}");
            assert!(!text.contains(&secret[secret.len() - 24..]), "GET {path} shows part of a key or secret: {text}");
        }
    }

    // The server's whole output at debug level: no key, no secret, not even their random
    // part. Debug lines are there to search (the check is not of an empty log).
    let stderr = server.stderr_lines();
    let stdout = server.stdout_lines();
    assert!(stderr.iter().filter(|l| l.contains("DEBUG")).count() > 10, "debug logging is on: {stderr:#?}");
    for line in stderr.iter().chain(&stdout) {
        for secret in secrets.keys.iter().chain(&secrets.webhook_secrets) {
            assert!(!line.contains(&secret[secret.len() - 24..]), "a log line shows a key or secret: {line}");
        }
    }

    // The store: every byte of it (sled) or every row of every table (PostgreSQL), read
    // after a clean stop. Key prefixes are stored (they are shown in lists): finding them
    // shows the search reads where keys live; the keys' random part is never there.
    let data_dir = server.data_dir().clone();
    let (status, data_dir_again) = server.stop().await;
    assert!(status.success(), "the server stops cleanly: {status}");
    drop(data_dir_again);
    let (store, what) = raw_store::raw_store(&data_dir).await;
    for key in &secrets.keys {
        assert!(contains(&store, &key[..12]), "{what} holds the prefix {} (else the search is blind)", &key[..12]);
        assert!(!contains(&store, &key[12..]), "{what} holds the plaintext of a key (…{})", &key[12..]);
    }
    // Webhook secrets are sealed (the server opens them to sign): neither their text nor
    // their bytes are there.
    for secret in &secrets.webhook_secrets {
        let encoded = &secret["whsec_".len()..];
        assert!(!contains(&store, encoded), "{what} holds a webhook secret in the clear");
        let bytes = BASE64.decode(encoded).expect("a webhook secret is base64");
        assert!(!raw_store::contains(&store, &bytes), "{what} holds a webhook secret's bytes");
    }
    assert!(contains(&store, "tdsealv1"), "{what} holds sealed values");
    println!(
        "secrets: {} keys and {} webhook secrets absent from {} log lines, {} later responses; \
         {} bytes of {what} hold no plaintext key",
        secrets.keys.len(),
        secrets.webhook_secrets.len(),
        stderr.len() + stdout.len(),
        later.len(),
        store.len()
    );
}

#[tokio::test]
async fn a_burst_of_bad_keys_is_throttled_to_exactly_the_allowance() {
    const BURST: usize = 10_000;
    const IN_FLIGHT: usize = 32;
    let server = TestServer::start().await;
    let answers: Vec<(u16, Option<String>, Value)> = futures::stream::iter(0..BURST)
        .map(|_| async {
            let response = server.call(Method::GET, "/v1/keys", &fresh_key(), None).await;
            let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
            let (status, body) = into_parts(response).await;
            (status, retry_after, body)
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;

    let mut by_status = BTreeMap::<u16, usize>::new();
    for (status, retry_after, body) in &answers {
        *by_status.entry(*status).or_default() += 1;
        match status {
            401 => assert_error(*status, body, 401, "invalid_api_key", "a bad key within the allowance"),
            429 => {
                assert_error(*status, body, 429, "too_many_auth_failures", "a bad key past the allowance");
                let seconds: u64 = retry_after.as_deref().expect("Retry-After on 429").parse().expect("whole seconds");
                assert!((1..=60).contains(&seconds), "Retry-After within the minute: {seconds}");
            }
            other => panic!("a bad key answered {other}: {body}"),
        }
    }
    assert_eq!(by_status.get(&401), Some(&20), "exactly the allowance of 401s: {by_status:?}");
    assert_eq!(by_status.get(&429), Some(&(BURST - 20)), "{by_status:?}");

    // Still serving: the probes answer, and the address stays blocked whatever its key.
    let (status, _) = into_parts(server.request(Method::GET, "/healthz").send().await.unwrap()).await;
    assert_eq!(status, 200, "the server answers after the burst");
    let (status, body) = server.get("/v1/keys", server.key()).await;
    assert_error(status, &body, 429, "too_many_auth_failures", "the throttled address with a valid key");
    // Another client address is not throttled, and its valid key works.
    let other = server.client_from(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
    let response = other.get(server.url("/v1/keys")).bearer_auth(server.key()).send().await.unwrap();
    let (status, body) = into_parts(response).await;
    assert_ok(status, &body, 200, "a valid key from 127.0.0.2");
    let response = other.get(server.url("/v1/keys")).bearer_auth(fresh_key()).send().await.unwrap();
    let (status, body) = into_parts(response).await;
    assert_error(status, &body, 401, "invalid_api_key", "127.0.0.2 has an allowance of its own");
    println!(
        "brute force: {BURST} bad keys, {IN_FLIGHT} in flight, from 127.0.0.1: {by_status:?}; 127.0.0.2 unaffected"
    );
}
