//! Helpers shared by the test modules: a server wired to a DNS server on loopback, verified
//! domains, and the envelope assertions every check goes through; in submodules, what a few
//! modules share: scratch PostgreSQL databases, DKIM verification, waiting for mail, a raw
//! look at the store's bytes, and a webhook receiver.

pub mod database;
pub mod dkim;
pub mod mail;
pub mod raw_store;
pub mod receiver;
pub mod reports;
pub mod sdk;

use std::future::Future;
use std::sync::OnceLock;

use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{DataDir, Options, TestServer, fresh_key};
use tokio::runtime::Runtime;

/// Runs `future` on the one runtime every test of the binary shares: a test module whose tests
/// share a server (its sink and DNS server are tasks) must not let a test's own runtime take
/// them down when that test ends.
pub fn block_on<F: Future>(future: F) -> F::Output {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a Tokio runtime")
        })
        .block_on(future)
}

/// A server that delivers through `sink` as its SMTP relay (`TIDINGS_DELIVERY=relay`), with
/// `env` added, and the DNS server its domain checks ask.
pub async fn server_relaying_to(
    sink: &tidings_transport_smtp::testing::SmtpSink,
    env: &[(&str, &str)],
) -> (TestServer, TestDnsServer) {
    let relay = format!("smtp://{}", sink.addr());
    let mut all = vec![("TIDINGS_DELIVERY", "relay"), ("TIDINGS_SMTP_RELAY", relay.as_str())];
    all.extend_from_slice(env);
    server_with_dns(&all).await
}

/// A server on a fresh store whose domain checks ask a DNS server on loopback, with `env`
/// added to its settings.
pub async fn server_with_dns(env: &[(&str, &str)]) -> (TestServer, TestDnsServer) {
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    start_with_dns(Options { bootstrap_key: Some(fresh_key()), env, ..Options::default() }).await
}

/// A server started with `options` plus a DNS server on loopback for its domain checks.
pub async fn start_with_dns(mut options: Options) -> (TestServer, TestDnsServer) {
    let dns = TestDnsServer::start([]).await.expect("DNS server starts");
    options.env.push(("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()));
    (TestServer::start_with(options).await, dns)
}

/// A server on a data dir where the operator made two workspaces, `alpha` and `beta`, before
/// the first start: the store is not fresh, so the server makes no default workspace, and
/// `alpha`'s key serves as `server.key()`. Returns each workspace's id and full key.
pub async fn two_workspaces() -> (TestServer, TestDnsServer, (String, String), (String, String)) {
    two_workspaces_with(&[]).await
}

/// [`two_workspaces`] with the settings `env` besides.
pub async fn two_workspaces_with(
    env: &[(&str, &str)],
) -> (TestServer, TestDnsServer, (String, String), (String, String)) {
    let data_dir = DataDir::new();
    let alpha = data_dir.create_workspace("alpha");
    let beta = data_dir.create_workspace("beta");
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let options = Options { data_dir: Some(data_dir), bootstrap_key: Some(alpha.1.clone()), env, ..Options::default() };
    let (server, dns) = start_with_dns(options).await;
    (server, dns, alpha, beta)
}

/// Publishes the records of `domain` (a domain response's `data`) whose purpose starts with
/// one of `kinds`: `"SPF"`, `"DKIM ("` (RSA only), `"DKIM2"`, `"DKIM"` (both), `"DMARC"`,
/// `"Return-Path"` (its MX and SPF).
pub async fn publish(dns: &TestDnsServer, domain: &Value, kinds: &[&str]) {
    for record in domain["dnsRecords"].as_array().expect("dnsRecords") {
        let purpose = record["purpose"].as_str().expect("purpose");
        if !kinds.iter().any(|k| purpose.starts_with(k)) {
            continue;
        }
        let (name, value) = (record["name"].as_str().unwrap(), record["value"].as_str().unwrap());
        match record["type"].as_str() {
            Some("MX") => {
                let preference = record["priority"].as_u64().and_then(|p| u16::try_from(p).ok()).expect("priority");
                dns.set_mx(name, &[(preference, value)]).await;
            }
            _ => dns.set_txt(name, &[value]).await,
        }
    }
}

/// Adds `name` with `key`, publishes all its records, verifies it; returns its id.
pub async fn verified_domain(server: &TestServer, dns: &TestDnsServer, key: &str, name: &str) -> String {
    let (status, body) = server.post("/v1/domains", key, json!({"domain": name})).await;
    assert_ok(status, &body, 201, &format!("add {name}"));
    let id = body["data"]["id"].as_str().unwrap().to_owned();
    publish(dns, &body["data"], &["SPF", "DKIM", "DMARC"]).await;
    let (status, body) = server.post(&format!("/v1/domains/{id}/verify"), key, json!({})).await;
    assert_ok(status, &body, 200, &format!("verify {name}"));
    assert_eq!(body["data"]["overallStatus"], "Verified", "verify {name}: {body}");
    id
}

/// Creates a key with `body` (as `key`); returns its id and plaintext.
pub async fn create_key(server: &TestServer, key: &str, body: Value) -> (String, String) {
    let (status, created) = server.post("/v1/keys", key, body.clone()).await;
    assert_ok(status, &created, 201, &format!("create key {body}"));
    let id = created["data"]["id"].as_str().expect("id").to_owned();
    let plaintext = created["data"]["plaintextKey"].as_str().expect("plaintextKey").to_owned();
    (id, plaintext)
}

/// A success envelope with `status`: `success`, `statusCode`, `message`, no `error`.
#[track_caller]
pub fn assert_ok(status: u16, body: &Value, expected: u16, what: &str) {
    assert_eq!(status, expected, "{what}: status; body {body}");
    assert_eq!(body["success"], true, "{what}: success; body {body}");
    assert_eq!(body["statusCode"], expected, "{what}: statusCode; body {body}");
    assert!(body["message"].is_string(), "{what}: message; body {body}");
    assert!(body.get("error").is_none(), "{what}: no error key on success; body {body}");
}

/// A failure envelope with `status` and `error.code` = `code`: `success` false, `data` null,
/// a human message.
#[track_caller]
pub fn assert_error(status: u16, body: &Value, expected: u16, code: &str, what: &str) {
    assert_eq!(status, expected, "{what}: status; body {body}");
    assert_eq!(body["success"], false, "{what}: success; body {body}");
    assert_eq!(body["statusCode"], expected, "{what}: statusCode; body {body}");
    assert_eq!(body["error"]["code"], code, "{what}: error.code; body {body}");
    assert!(body["data"].is_null(), "{what}: data is null on failure; body {body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: error.message; body {body}");
    assert!(body["message"].is_string(), "{what}: message; body {body}");
    // Fields at fault, and the addresses of a send whose every recipient is suppressed
    // (contract §10), are the only details.
    if code != "validation_error" && code != "recipient_suppressed" {
        assert!(body["error"].get("details").is_none(), "{what}: details only where fields are at fault; body {body}");
    }
}

/// A 422 `validation_error` whose `details` name `fields` (each at least once, nothing else).
#[track_caller]
pub fn assert_invalid(status: u16, body: &Value, fields: &[&str], what: &str) {
    assert_error(status, body, 422, "validation_error", what);
    let details = body["error"]["details"].as_array().unwrap_or_else(|| panic!("{what}: details; body {body}"));
    let mut named: Vec<&str> = details.iter().map(|d| d["field"].as_str().expect("details[].field")).collect();
    assert!(
        details.iter().all(|d| d["message"].as_str().is_some_and(|m| !m.is_empty())),
        "{what}: every detail has a message; body {body}"
    );
    named.sort_unstable();
    named.dedup();
    let mut wanted = fields.to_vec();
    wanted.sort_unstable();
    assert_eq!(named, wanted, "{what}: fields named in details; body {body}");
}

/// The ids of a list response's `data`, in order.
pub fn ids(body: &Value) -> Vec<String> {
    field_of_items(body, "id")
}

/// `field` of every item of a list response's `data`, in order.
pub fn field_of_items(body: &Value, field: &str) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("data is an array: {body}"))
        .iter()
        .map(|item| item[field].as_str().unwrap_or_else(|| panic!("items have a string `{field}`: {body}")).to_owned())
        .collect()
}

/// Walks a list from its first page with `limit`, checking `pagination` on every page;
/// returns every item's id in order.
pub async fn walk_pages(server: &TestServer, key: &str, path: &str, limit: usize) -> Vec<String> {
    walk_pages_by(server, key, path, limit, "id").await
}

/// [`walk_pages`] for lists whose items are named by another `field`.
pub async fn walk_pages_by(server: &TestServer, key: &str, path: &str, limit: usize, field: &str) -> Vec<String> {
    let sep = if path.contains('?') { '&' } else { '?' };
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let url = match &cursor {
            None => format!("{path}{sep}limit={limit}"),
            Some(c) => format!("{path}{sep}limit={limit}&cursor={c}"),
        };
        let (status, body) = server.get(&url, key).await;
        assert_ok(status, &body, 200, &format!("GET {url}"));
        let page = field_of_items(&body, field);
        let pagination = &body["pagination"];
        assert_eq!(pagination["limit"], limit, "GET {url}: pagination.limit; {body}");
        assert!(page.len() <= limit, "GET {url}: at most limit items; {body}");
        all.extend(page.iter().cloned());
        if pagination["hasMore"] == true {
            assert_eq!(page.len(), limit, "GET {url}: a page with more after it is full; {body}");
            let next = pagination["nextCursor"].as_str().unwrap_or_else(|| panic!("GET {url}: nextCursor; {body}"));
            cursor = Some(next.to_owned());
        } else {
            assert_eq!(pagination["hasMore"], false, "GET {url}: hasMore is a boolean; {body}");
            assert!(pagination["nextCursor"].is_null(), "GET {url}: no nextCursor on the last page; {body}");
            return all;
        }
    }
    panic!("GET {path}: more than 100 pages");
}

/// A dashboard session of `key` on `server`: the value of the `Cookie` header that carries it.
pub async fn dashboard_session(server: &TestServer, key: &str) -> String {
    let signed = server
        .request(reqwest::Method::POST, "/sign-in")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "same-origin")
        .body(format!("key={key}"))
        .send()
        .await
        .expect("sign in");
    assert_eq!(signed.status(), 303, "signing in to the dashboard");
    let cookie = signed.headers().get("set-cookie").and_then(|v| v.to_str().ok()).expect("a session cookie");
    cookie.split(';').next().unwrap_or_default().to_owned()
}

/// The dashboard page at `path` as `session` ([`dashboard_session`]) sees it: status and HTML.
pub async fn dashboard_page(server: &TestServer, session: &str, path: &str) -> (u16, String) {
    let page = server.request(reqwest::Method::GET, path).header("cookie", session).send().await.expect("a page");
    (page.status().as_u16(), page.text().await.expect("the page's text"))
}
