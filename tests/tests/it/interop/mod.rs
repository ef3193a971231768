//! Interop: every message shape the server sends verifies with receivers' own
//! DKIM verifiers, not only with mail-auth, the library that signs it. The corpus
//! ([`corpus::shapes`]) goes through the real binary (the API, a template, a batch, a
//! scheduled send, SMTP submission) to a relay ([`SmtpSink`]); the raw bytes the relay got
//! are checked by the scripts in `tests/interop/` (and, for comparison, by mail-auth): dkimpy (both signatures) and Perl's
//! Mail::DKIM (RSA), each fetching the keys from the test DNS server where the test
//! published what the API told it to; and the MIME rules a receiver relies on (CRLF only, no
//! NUL, lines of at most 998 octets, 8-bit data transfer-encoded, no defects for Python's
//! `email` parser, a text alternative to every HTML part), with `d=` the From domain. The
//! SPF and DMARC values the API gives are checked with checkdmarc, offline (its resolver asks
//! only the test DNS server).
//!
//! SpamAssassin (local rules, `tests/interop/spam_score.pl`) scores every shape too, and a
//! test fails when what Tidings adds to a shape scores over [`MAX_ADDED_SCORE`]
//! (docs/deliverability.md has the method and the scores).
//!
//! Each test prints a table of shapes × checks and fails naming every failing pair with the
//! verifier's reason. `TIDINGS_INTEROP_DIR=<dir>` keeps the received messages there
//! (`NN.eml`, NN the shape's row) for a closer look. A missing verifier skips the test
//! saying what to install (fails it under `./test`: [`tidings_e2e::tool_available`]).

mod corpus;
pub(crate) mod verifiers;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::dkim;
use crate::common::{assert_ok, create_key, start_with_dns, verified_domain};
use chrono::Utc;
use corpus::{DOMAIN, Shape, Via};
use lettre::address::Envelope;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use serde_json::{Value, json};
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_e2e::{Options, TestServer, fresh_key};
use tidings_transport_smtp::testing::{SinkConfig, SmtpSink};
use verifiers::{MESSAGE_CHECKS, SpamScore, Verdict, Verdicts};

/// How long the corpus may take to be delivered.
const WAIT: Duration = Duration::from_secs(60);
/// Most SpamAssassin points (local rules) what Tidings adds to a shape may score.
const MAX_ADDED_SCORE: f64 = 1.0;
/// The tracking host of the SpamAssassin run: a name under the sending domain, as an operator
/// sets `TIDINGS_PUBLIC_URL` (the default, the listener's IP address, is itself scored).
const TRACKING_URL: &str = "https://links.interop.example";
/// Statuses a message does not leave.
const FINAL: [&str; 5] = ["Delivered", "Bounced", "Failed", "Suppressed", "Canceled"];

/// A server relaying to its sink, with SMTP submission and the verified domain [`DOMAIN`].
struct Setup {
    // Dropped in this order: the server goes before the sink and DNS server it uses.
    server: TestServer,
    dns: TestDnsServer,
    sink: SmtpSink,
    /// A key that may send the whole corpus at once.
    key: String,
    domain_id: String,
}

/// The server, started with `env` on top of relay delivery and submission.
async fn setup(env: &[(&str, &str)]) -> Setup {
    // Lines of any length reach the checks instead of being refused by the sink.
    let config = SinkConfig { max_message_bytes: 64 * 1024 * 1024, max_line_bytes: 1 << 20, ..SinkConfig::default() };
    let sink = SmtpSink::start_with(config).await.expect("the SMTP sink starts");
    let relay = format!("smtp://{}", sink.addr());
    let mut settings =
        vec![("TIDINGS_DELIVERY".to_owned(), "relay".to_owned()), ("TIDINGS_SMTP_RELAY".to_owned(), relay)];
    settings.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let options = Options { bootstrap_key: Some(fresh_key()), env: settings, submission: true, ..Options::default() };
    let (server, dns) = start_with_dns(options).await;
    let domain_id = verified_domain(&server, &dns, server.key(), DOMAIN).await;
    let (_, key) = create_key(&server, server.key(), json!({"name": "interop", "rateLimitPerSec": 10000})).await;
    Setup { server, dns, sink, key, domain_id }
}

/// The recipient of shape `row` (1-based): each shape has its own.
fn recipient(row: usize) -> String {
    format!("shape-{row:02}@inbox.example")
}

/// `body` with `to` set; a shape that has a `to` list of its own gets `to` first in it.
fn addressed(body: &Value, to: &str) -> Value {
    let mut body = body.clone();
    body["to"] = match body.get("to").and_then(Value::as_array) {
        Some(list) => std::iter::once(json!(to)).chain(list.iter().cloned()).collect(),
        None => json!(to),
    };
    body
}

impl Setup {
    async fn send(&self, body: Value) -> String {
        let (status, reply) = self.server.post("/v1/messages", &self.key, body.clone()).await;
        assert_ok(status, &reply, 201, &format!("send {body}"));
        reply["data"]["id"].as_str().expect("the message's id").to_owned()
    }

    /// Creates the corpus template (version 1 current, version 2 not); its id and version 2's.
    async fn template(&self) -> (String, String) {
        let (v1, v2) = corpus::template();
        let (status, body) = self.server.post("/v1/templates", &self.key, v1).await;
        assert_ok(status, &body, 201, "create the template");
        let id = body["data"]["id"].as_str().expect("the template's id").to_owned();
        let mut v2 = v2;
        v2["makeCurrent"] = json!(false);
        let (status, body) = self.server.post(&format!("/v1/templates/{id}/versions"), &self.key, v2).await;
        assert_ok(status, &body, 201, "add version 2");
        (id, body["data"]["id"].as_str().expect("the version's id").to_owned())
    }

    /// Submits `rest` (header lines after From/To, then the body) for `to` over STARTTLS
    /// with the key as the password; the message's id, found through the API.
    async fn submit(&self, row: usize, to: &str, rest: &str) -> String {
        let date = Utc::now().to_rfc2822();
        let raw = format!(
            "From: Billing <billing@{DOMAIN}>\r\nTo: {to}\r\nDate: {date}\r\nMessage-ID: <row-{row}@{DOMAIN}>\r\n{rest}"
        );
        let envelope = Envelope::new(Some(format!("billing@{DOMAIN}").parse().unwrap()), vec![to.parse().unwrap()])
            .expect("an envelope");
        let pem = std::fs::read(self.server.cert_path()).expect("the server's certificate");
        let tls = TlsParameters::builder("localhost".to_owned())
            .add_root_certificate(Certificate::from_pem(&pem).expect("a PEM certificate"))
            .build_rustls()
            .expect("TLS parameters");
        let addr = self.server.submission_addr();
        let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(addr.ip().to_string())
            .port(addr.port())
            .tls(Tls::Required(tls))
            .timeout(Some(WAIT))
            .credentials(Credentials::new("tidings".to_owned(), self.key.clone()))
            .authentication(vec![Mechanism::Plain])
            .build();
        transport.send_raw(&envelope, raw.as_bytes()).await.unwrap_or_else(|e| panic!("submit row {row}: {e}"));
        let (status, body) = self.server.get(&format!("/v1/messages?to={to}"), &self.key).await;
        assert_ok(status, &body, 200, "list the submitted message");
        let listed = body["data"].as_array().expect("messages");
        assert_eq!(listed.len(), 1, "one message for {to}: {body}");
        listed[0]["id"].as_str().expect("an id").to_owned()
    }

    /// Sends every shape, waits for each to be delivered and writes what the relay got to
    /// `dir` as `NN.eml`; the file of each shape, in order (`None`: not delivered, with why).
    async fn deliver_corpus(&self, shapes: &[Shape], dir: &std::path::Path) -> Vec<Result<String, String>> {
        let ids = self.send_corpus(shapes).await;
        let deadline = Instant::now() + WAIT;
        let mut files = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let delivered = self.delivered(id, deadline).await;
            if !delivered.ok {
                files.push(Err(delivered.reason));
                continue;
            }
            let to = recipient(i + 1);
            let received: Vec<_> = self.sink.messages().into_iter().filter(|m| m.recipients.contains(&to)).collect();
            assert_eq!(received.len(), 1, "the relay got one message for {to}");
            let path = dir.join(format!("{:02}.eml", i + 1));
            std::fs::write(&path, &received[0].data).expect("write the received message");
            files.push(Ok(path.display().to_string()));
        }
        files
    }

    /// Sends every shape; the message id of each, in order.
    async fn send_corpus(&self, shapes: &[Shape]) -> Vec<String> {
        let (template_id, version_2) = self.template().await;
        let mut ids = vec![String::new(); shapes.len()];
        let mut batch = Vec::new();
        for (i, shape) in shapes.iter().enumerate() {
            let to = recipient(i + 1);
            ids[i] = match &shape.via {
                Via::Api(body) => self.send(addressed(body, &to)).await,
                Via::Template { pinned, body } => {
                    let mut body = addressed(body, &to);
                    body["from"] = json!(format!("billing@{DOMAIN}"));
                    match pinned {
                        true => body["templateVersionId"] = json!(version_2),
                        false => body["templateId"] = json!(template_id),
                    }
                    self.send(body).await
                }
                Via::Scheduled(body) => {
                    let mut body = addressed(body, &to);
                    let at = Utc::now() + chrono::Duration::seconds(2);
                    body["scheduledAt"] = json!(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
                    self.send(body).await
                }
                Via::Submission(rest) => self.submit(i + 1, &to, rest).await,
                Via::Batch(body) => {
                    batch.push((i, addressed(body, &to)));
                    continue;
                }
            };
        }
        if !batch.is_empty() {
            let items: Value = batch.iter().map(|(_, body)| body.clone()).collect();
            let (status, reply) = self.server.post("/v1/messages/batch", &self.key, items).await;
            assert_ok(status, &reply, 201, "the batch");
            for ((i, _), result) in batch.iter().zip(reply["data"].as_array().expect("batch results")) {
                ids[*i] =
                    result["message"]["id"].as_str().unwrap_or_else(|| panic!("a queued item: {result}")).to_owned();
            }
        }
        ids
    }

    /// Waits until message `id` reaches a final status: `delivered` passes when that is
    /// Delivered, and fails with the status and the last event otherwise.
    async fn delivered(&self, id: &str, deadline: Instant) -> Verdict {
        loop {
            let (status, body) = self.server.get(&format!("/v1/messages/{id}"), &self.key).await;
            assert_ok(status, &body, 200, &format!("GET message {id}"));
            let now = body["data"]["status"].as_str().expect("a status").to_owned();
            if now == "Delivered" {
                return Verdict { ok: true, reason: now };
            }
            if FINAL.contains(&now.as_str()) || Instant::now() >= deadline {
                let (_, events) = self.server.get(&format!("/v1/messages/{id}/events?limit=200"), &self.key).await;
                let last = events["data"].as_array().and_then(|e| e.last().cloned()).unwrap_or_default();
                return Verdict { ok: false, reason: format!("{now} (last event: {last})") };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// mail-auth's verdicts on `raw` (the library that signs, for comparison): one per
/// algorithm, as `mail-auth <algorithm>`, its keys asked of `dns`.
async fn mail_auth_verdicts(raw: &[u8], dns: std::net::SocketAddr) -> Vec<(String, Verdict)> {
    use mail_auth::{AuthenticatedMessage, DkimResult, Parameters};
    let verifier = dkim::verifier_asking(dns);
    let Some(message) = AuthenticatedMessage::parse(raw) else {
        let failed = || Verdict { ok: false, reason: "mail-auth cannot parse the message".to_owned() };
        return vec![("mail-auth rsa-sha256".to_owned(), failed()), ("mail-auth ed25519-sha256".to_owned(), failed())];
    };
    let outputs = verifier.verify_dkim(Parameters::new(&message)).await;
    ["rsa-sha256", "ed25519-sha256"]
        .into_iter()
        .map(|algorithm| {
            let of_kind: Vec<_> =
                outputs.iter().filter(|o| o.signature().is_some_and(|s| s.a.name() == algorithm)).collect();
            let verdict = match of_kind.as_slice() {
                [one] => Verdict { ok: one.result() == &DkimResult::Pass, reason: format!("{:?}", one.result()) },
                other => Verdict { ok: false, reason: format!("{} {algorithm} signatures", other.len()) },
            };
            (format!("mail-auth {algorithm}"), verdict)
        })
        .collect()
}

/// Where the received messages are written: `TIDINGS_INTEROP_DIR`, or a temporary directory.
fn message_dir() -> (PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("TIDINGS_INTEROP_DIR") {
        Some(dir) => {
            std::fs::create_dir_all(&dir).expect("create TIDINGS_INTEROP_DIR");
            (PathBuf::from(dir), None)
        }
        None => {
            let temp = tempfile::tempdir().expect("a temporary directory");
            (temp.path().to_owned(), Some(temp))
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_shape_of_message_verifies_with_dkimpy_and_mail_dkim_and_is_clean_mime() {
    if !verifiers::installed("every_shape_of_message_verifies_with_dkimpy_and_mail_dkim_and_is_clean_mime") {
        return;
    }
    let s = setup(&[]).await;
    let shapes = corpus::shapes();
    let names: Vec<String> =
        shapes.iter().enumerate().map(|(i, shape)| format!("{:02} {}", i + 1, shape.name)).collect();

    let ids = s.send_corpus(&shapes).await;

    let deadline = Instant::now() + WAIT;
    let (dir, _temp) = message_dir();
    let mut verdicts = Verdicts::new();
    let mut files = Vec::new();
    let mut name_of_file = std::collections::HashMap::new();
    for (i, id) in ids.iter().enumerate() {
        let delivered = s.delivered(id, deadline).await;
        let ok = delivered.ok;
        verdicts.entry(names[i].clone()).or_default().insert("delivered".to_owned(), delivered);
        if !ok {
            continue;
        }
        let to = recipient(i + 1);
        let received: Vec<_> = s.sink.messages().into_iter().filter(|m| m.recipients.contains(&to)).collect();
        assert_eq!(received.len(), 1, "the relay got one message for {to} ({})", names[i]);
        let path = dir.join(format!("{:02}.eml", i + 1));
        std::fs::write(&path, &received[0].data).expect("write the received message");
        for (check, verdict) in mail_auth_verdicts(&received[0].data, s.dns.addr()).await {
            verdicts.entry(names[i].clone()).or_default().insert(check, verdict);
        }
        name_of_file.insert(path.display().to_string(), names[i].clone());
        files.push(path.display().to_string());
    }
    let name_of = |file: &str| name_of_file.get(file).cloned().unwrap_or_else(|| file.to_owned());
    if !files.is_empty() {
        let with_dns = [vec!["--dns".to_owned(), s.dns.addr().to_string()], files.clone()].concat();
        verifiers::run("python3", "verify_dkim.py", &with_dns, &name_of, &mut verdicts);
        verifiers::run("perl", "verify_dkim.pl", &with_dns, &name_of, &mut verdicts);
        verifiers::run("python3", "check_mime.py", &files, &name_of, &mut verdicts);
    }

    let (table, failures) = verifiers::table("shape", &names, &MESSAGE_CHECKS, &verdicts);
    println!("{table}");
    assert!(shapes.len() >= 30, "the corpus has {} shapes", shapes.len());
    assert!(failures.is_empty(), "{} of the shape × check pairs fail:\n{table}", failures.len());
}

/// The SPF and DMARC values of `domain_id` as GET /v1/domains/{id} gives them.
async fn spf_and_dmarc(s: &Setup) -> (String, String) {
    let (status, body) = s.server.get(&format!("/v1/domains/{}", s.domain_id), s.server.key()).await;
    assert_ok(status, &body, 200, "GET the domain");
    let value = |kind: &str| {
        body["data"]["dnsRecords"]
            .as_array()
            .expect("dnsRecords")
            .iter()
            .find(|r| r["purpose"].as_str().is_some_and(|p| p.starts_with(kind)))
            .and_then(|r| r["value"].as_str())
            .unwrap_or_else(|| panic!("no {kind} record: {body}"))
            .to_owned()
    };
    (value("SPF"), value("DMARC"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_spf_and_dmarc_records_the_api_gives_pass_checkdmarc() {
    if !verifiers::installed("the_spf_and_dmarc_records_the_api_gives_pass_checkdmarc") {
        return;
    }
    // The default SPF mechanism, and an include: that checkdmarc follows into the test DNS.
    let default = setup(&[]).await;
    let include = setup(&[("TIDINGS_SPF_INCLUDE", "include:_spf.relay.example")]).await;
    include.dns.add(TestRecord::txt("_spf.relay.example", "v=spf1 ip4:192.0.2.0/24 -all")).await;
    let checks =
        ["checkdmarc SPF value", "checkdmarc SPF published", "checkdmarc DMARC value", "checkdmarc DMARC published"];

    let mut verdicts = Verdicts::new();
    let mut items = Vec::new();
    for (label, s) in [("default SPF mechanism", &default), ("SPF include: mechanism", &include)] {
        let (spf, dmarc) = spf_and_dmarc(s).await;
        let item = format!("{label} ({spf} | {dmarc})");
        let args = ["--dns", &s.dns.addr().to_string(), "--domain", DOMAIN, "--spf", &spf, "--dmarc", &dmarc]
            .map(str::to_owned);
        verifiers::run("python3", "check_dns_records.py", &args, &|_| item.clone(), &mut verdicts);
        items.push(item);
    }

    let (table, failures) = verifiers::table("SPF and DMARC records", &items, &checks, &verdicts);
    println!("{table}");
    for (item, checks) in &verdicts {
        for (check, verdict) in checks {
            println!("{item} × {check}: {}", verdict.reason);
        }
    }
    assert!(failures.is_empty(), "{} of the record × check pairs fail:\n{table}", failures.len());
}

/// Rules a shape's own content earns whoever sends it (prefixes of rule names), which are not
/// counted against Tidings: `MPART_ALT_DIFF` and `MIME_HTML_MOSTLY` when the sender wrote both
/// the text and the HTML (and made them say different things), `HTML_IMAGE_ONLY_*` when the
/// sender's HTML has an image of its own. Every other rule that scores on an untracked shape
/// is Tidings' doing: the corpus is otherwise plain transactional text.
fn content_rules(shape: &Shape) -> Vec<&'static str> {
    let body = match &shape.via {
        Via::Api(body) | Via::Batch(body) | Via::Scheduled(body) | Via::Template { body, .. } => Some(body),
        Via::Submission(_) => None,
    };
    let field = |name: &str| body.and_then(|b| b.get(name)).and_then(Value::as_str).filter(|v| !v.is_empty());
    // A template's current version has HTML; a send that overrides its text wrote both.
    let html = field("html").or(matches!(shape.via, Via::Template { .. }).then_some(""));
    let mut rules = Vec::new();
    if field("text").is_some() && html.is_some() {
        rules.extend(["MPART_ALT_DIFF", "MIME_HTML_MOSTLY"]);
    }
    if html.is_some_and(|h| h.to_ascii_lowercase().contains("<img")) {
        rules.push("HTML_IMAGE_ONLY_");
    }
    rules
}

/// What Tidings adds to a shape that scored `score`: for a tracked shape, the difference from
/// its untracked twin (`baseline`, the same content through Tidings without tracking); for
/// any other, the positive points of every rule its content does not explain
/// ([`content_rules`]).
fn added_by_tidings(shape: &Shape, score: &SpamScore, baseline: Option<&SpamScore>) -> f64 {
    if let Some(baseline) = baseline {
        return score.score - baseline.score;
    }
    let content = content_rules(shape);
    score
        .rules
        .iter()
        .filter(|(rule, points)| **points > 0.0 && !content.iter().any(|c| rule.starts_with(c)))
        .map(|(_, points)| points)
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn spamassassin_scores_what_tidings_adds_to_every_shape_at_most_one_point() {
    let test = "spamassassin_scores_what_tidings_adds_to_every_shape_at_most_one_point";
    if !verifiers::spamassassin_installed(test) {
        return;
    }
    let s = setup(&[("TIDINGS_PUBLIC_URL", TRACKING_URL)]).await;
    let shapes = corpus::shapes();
    // Each tracked shape once more without tracking, after the corpus (rows n+1...).
    let twins: Vec<(usize, Shape)> =
        shapes.iter().enumerate().filter_map(|(i, shape)| corpus::untracked(shape).map(|t| (i, t))).collect();
    let all: Vec<Shape> = shapes.iter().cloned().chain(twins.iter().map(|(_, t)| t.clone())).collect();
    let (dir, _temp) = message_dir();

    let files = s.deliver_corpus(&all, &dir).await;

    let delivered: Vec<String> = files.iter().filter_map(|f| f.as_ref().ok().cloned()).collect();
    let scores = verifiers::spam_scores(&delivered);
    let score_of = |row: usize| files[row].as_ref().ok().and_then(|f| scores.get(f));
    let mut table = format!(
        "{:<52} | {:>6} | {:>6} | {:>6} | rules (SpamAssassin {}, local rules)\n",
        "shape", "score", "twin", "added", "4"
    );
    let mut failures = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        let name = format!("{:02} {}", i + 1, shape.name);
        let Some(score) = score_of(i) else {
            failures.push(format!("{name}: not scored ({:?})", files[i]));
            continue;
        };
        let twin = twins.iter().position(|(of, _)| *of == i).map(|at| shapes.len() + at);
        let baseline = twin.and_then(score_of);
        if twin.is_some() && baseline.is_none() {
            failures.push(format!("{name}: its untracked twin was not scored"));
            continue;
        }
        let added = added_by_tidings(shape, score, baseline);
        let twin_score = baseline.map_or("-".to_owned(), |b| format!("{:.2}", b.score));
        table.push_str(&format!(
            "{name:<52} | {:>6.2} | {twin_score:>6} | {added:>6.2} | {}\n",
            score.score,
            score.scoring_rules()
        ));
        if added > MAX_ADDED_SCORE {
            failures.push(format!(
                "{name}: Tidings adds {added:.2} points (over {MAX_ADDED_SCORE}): {}",
                score.scoring_rules()
            ));
        }
    }
    println!("{table}");
    assert!(failures.is_empty(), "{} shapes fail:\n{}\n{table}", failures.len(), failures.join("\n"));
}
