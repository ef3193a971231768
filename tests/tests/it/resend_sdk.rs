//! The official Resend SDKs, unchanged and pinned (Node: `resend` from npm in
//! `tests/sdk/resend-node`; Python: `resend==2.51.0` from PyPI, pinned in `./test`), against
//! the real binary's `/resend` over HTTPS with certificate verification
//! (`NODE_EXTRA_CA_CERTS` / `REQUESTS_CA_BUNDLE` name the server's certificate):
//! a send to several recipients with attachments (one fetched by `path` from a file server
//! on loopback) that arrives at an SMTP sink signed twice for the domain (checked by
//! dkimpy), an idempotent retry, batches, get (until `delivered`), list, update and cancel,
//! domains (create, list, get, verify, remove), API keys (create, list, remove), and the
//! errors an SDK user handles (bad key, validation, not found, a suppressed recipient, a
//! removed key, a sending key managing domains). Without the private-target setting, a
//! `path` on loopback is refused and never connected to. `tests/sdk/*/drive.*` print what the SDK
//! returned as JSON; the tests assert on it.
//!
//! Without Node (or the Python SDK) a test prints `skipped: …` (fails under
//! `TIDINGS_TEST_REQUIRE_ALL=1`, as `./test` runs it); `./test` runs `npm ci` and installs the
//! Python SDK, and the Node test runs `npm ci` when the SDK is not installed yet.

use std::path::Path;
use std::process::Command;

use mail_parser::MessageParser;
use serde_json::Value;
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::{ReceivedMessage, SmtpSink};

use crate::common::sdk::{attachments, node_sdk_ready, printed};
use crate::common::{block_on, server_relaying_to, server_with_dns, verified_domain};

const DOMAIN: &str = "shop.example";

/// The suppressed address the drivers send to.
const SUPPRESSED: &str = "gone@x.example";
/// What the file server serves, fetched for an attachment given by `path`.
const FETCHED: &[u8] = b"fetched by path\n";

/// A server relaying to an SMTP sink, with a verified domain, a suppressed address, and
/// private targets allowed (so that an attachment's `path` may name the file server on
/// loopback, as a webhook may).
struct Setup {
    // Dropped in this order: the server goes before the sink and DNS server it uses.
    server: TestServer,
    dns: TestDnsServer,
    sink: SmtpSink,
    files: FileServer,
}

impl Setup {
    async fn start() -> Self {
        let sink = SmtpSink::start().await.expect("the SMTP sink starts");
        let (server, dns) = server_relaying_to(&sink, &[("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true")]).await;
        let key = server.key().to_owned();
        verified_domain(&server, &dns, &key, DOMAIN).await;
        let (status, body) = server.post("/v1/suppressions", &key, serde_json::json!({"email": SUPPRESSED})).await;
        assert_eq!(status, 201, "suppress: {body}");
        Self { server, dns, sink, files: FileServer::start(FETCHED).await }
    }

    /// `program script` in `tests/sdk`, with the key, the addresses and the base URL.
    fn driver(&self, program: &str, script: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .arg(script)
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk"))
            .env("RESEND_BASE_URL", self.server.url("/resend"))
            .env("TIDINGS_KEY", self.server.key())
            .env("FROM", format!("Shop <hello@{DOMAIN}>"))
            .env("TO", "ann@x.example,bob@y.example")
            .env("CC", "carol@z.example")
            .env("BCC", "dan@w.example")
            .env("REPLY_TO", format!("support@{DOMAIN}"))
            .env("FILE_URL", self.files.url("/files/remote.txt"))
            .env("SUPPRESSED", SUPPRESSED)
            .env("NEW_DOMAIN", format!("news.{DOMAIN}"));
        command
    }

    /// The copies of the message with this Message-ID that reached the sink, once there are
    /// four (one per recipient), each checked to be signed twice by the domain.
    async fn delivered_copies(&self, provider_id: &str) -> Vec<ReceivedMessage> {
        crate::common::sdk::delivered_copies(&self.sink, &self.dns, provider_id).await
    }
}

/// A plain-HTTP file server on loopback answering every request with 200 and one body;
/// counts the connections it accepted.
struct FileServer {
    addr: std::net::SocketAddr,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl FileServer {
    async fn start(body: &'static [u8]) -> Self {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("the file server binds");
        let addr = listener.local_addr().expect("its address");
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = accepted.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                    let _ = stream.write_all(body).await;
                });
            }
        });
        Self { addr, accepted, task }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[test]
fn the_resend_node_sdk_sends_reads_and_fails_as_its_users_expect() {
    let test = "the_resend_node_sdk_sends_reads_and_fails_as_its_users_expect";
    if !node_sdk_ready(test, "resend-node", &["resend"]) {
        return;
    }
    block_on(async {
        let s = Setup::start().await;
        let output = s
            .driver("node", "resend-node/drive.mjs")
            .env("NODE_EXTRA_CA_CERTS", s.server.cert_path())
            .output()
            .await
            .expect("node runs");
        let out = printed(&output, "drive.mjs");
        assert_eq!(out["baseUrl"], s.server.url("/resend"), "the SDK took RESEND_BASE_URL");

        // The send, and its retry with the same Idempotency-Key: one message.
        assert_eq!(out["send"]["error"], Value::Null, "{}", out["send"]);
        let id = out["send"]["data"]["id"].as_str().expect("an id").to_owned();
        assert_eq!(out["retry"]["data"]["id"], id.as_str(), "{}", out["retry"]);
        assert_eq!(out["retry"]["headers"]["idempotent-replayed"], "true");
        assert_eq!(out["reused"]["error"]["name"], "invalid_idempotent_request", "{}", out["reused"]);
        assert_eq!(out["reused"]["error"]["statusCode"], 409);

        // Get: Resend's email object, delivered.
        let got = &out["get"]["data"];
        assert_eq!(got["object"], "email", "{}", out["get"]);
        assert_eq!(got["id"], id.as_str());
        assert_eq!(got["last_event"], "delivered", "{got}");
        assert_eq!(got["to"], serde_json::json!(["ann@x.example", "bob@y.example"]));
        assert_eq!(got["cc"], serde_json::json!(["carol@z.example"]));
        assert_eq!(got["subject"], "Hello from the Resend SDK");
        assert_eq!(got["tags"], serde_json::json!([{"name": "source", "value": "resend_node"}]));

        // What arrived: one copy per recipient, signed twice by the domain, with both files.
        let copies = s.delivered_copies(got["message_id"].as_str().expect("the Message-ID")).await;
        let parsed = MessageParser::default().parse(&copies[0].data).expect("the copy parses");
        assert_eq!(
            attachments(&copies[0].data),
            [
                ("hello.txt".to_owned(), b"attached bytes\n".to_vec()),
                ("b64.txt".to_owned(), b"base64 bytes\n".to_vec()),
                ("remote.txt".to_owned(), FETCHED.to_vec()),
            ]
        );
        assert_eq!(parsed.header_raw("X-Campaign").map(str::trim), Some("sdk"));
        assert!(parsed.header("Bcc").is_none(), "no Bcc header");

        // Batches: strict gives every id; permissive the valid ones and the other's error.
        assert_eq!(out["batch"]["data"]["data"].as_array().map(Vec::len), Some(2), "{}", out["batch"]);
        assert_eq!(out["permissive"]["data"]["data"].as_array().map(Vec::len), Some(1), "{}", out["permissive"]);
        assert_eq!(out["permissive"]["data"]["errors"][0]["index"], 1);

        // List: newest first, paged with `after`.
        let listed = &out["list"]["data"];
        assert_eq!(listed["object"], "list", "{}", out["list"]);
        assert_eq!(listed["has_more"], true);
        let mut ids: Vec<&str> = listed["data"].as_array().unwrap().iter().filter_map(|e| e["id"].as_str()).collect();
        ids.extend(out["listAfter"]["data"]["data"].as_array().unwrap().iter().filter_map(|e| e["id"].as_str()));
        assert_eq!(ids.len(), 4, "the send and three batch items: {ids:?}");
        assert!(ids.contains(&id.as_str()));

        // A scheduled send moved, then canceled.
        let scheduled = out["scheduled"]["data"]["id"].as_str().expect("scheduled id");
        assert_eq!(out["update"]["data"], serde_json::json!({"object": "email", "id": scheduled}), "{}", out["update"]);
        assert_eq!(out["cancel"]["data"], serde_json::json!({"object": "email", "id": scheduled}), "{}", out["cancel"]);
        assert_eq!(out["canceled"]["data"]["last_event"], "canceled");

        assert_domains_and_keys(&out, "data");
        assert_eq!(out["sendByNewKey"]["error"], Value::Null, "the new key sends: {}", out["sendByNewKey"]);

        // The errors an SDK user handles, in Resend's names.
        for (case, status, name) in [
            ("badKey", 403, "invalid_api_key"),
            ("invalid", 422, "validation_error"),
            ("notFound", 404, "not_found"),
            ("suppressed", 422, "validation_error"),
            ("domainGone", 404, "not_found"),
            ("sendByRemovedKey", 403, "invalid_api_key"),
            ("domainsBySender", 401, "restricted_api_key"),
        ] {
            let error = &out[case]["error"];
            assert_eq!(
                (error["statusCode"].as_u64(), error["name"].as_str()),
                (Some(status), Some(name)),
                "{case}: {}",
                out[case]
            );
            assert_eq!(out[case]["data"], Value::Null);
        }
        assert!(out["suppressed"]["error"]["message"].as_str().unwrap().contains(SUPPRESSED), "{}", out["suppressed"]);
    });
}

/// Domains created, listed, read, verified (the check runs: no records are published for
/// this one, so they fail) and removed; a key created, listed and removed. `data` is where
/// the driver put each answer's body (`data` for both SDKs).
fn assert_domains_and_keys(out: &Value, data: &str) {
    let created = &out["domainCreate"][data];
    let id = created["id"].as_str().unwrap_or_else(|| panic!("a domain: {}", out["domainCreate"]));
    assert_eq!(
        (created["name"].as_str(), created["status"].as_str()),
        (Some(&*format!("news.{DOMAIN}")), Some("not_started"))
    );
    let records = created["records"].as_array().expect("records");
    assert!(records.iter().any(|r| r["record"] == "DKIM" && r["type"] == "TXT" && r["value"].is_string()), "{created}");
    let listed = out["domainList"][data]["data"].as_array().unwrap_or_else(|| panic!("{}", out["domainList"]));
    assert!(listed.iter().any(|d| d["id"] == id), "{listed:?}");
    assert_eq!(out["domainGet"][data]["object"], "domain", "{}", out["domainGet"]);
    assert_eq!(out["domainVerify"][data]["id"], id, "{}", out["domainVerify"]);
    assert_eq!(out["domainVerified"][data]["status"], "failed", "{}", out["domainVerified"]);
    assert_eq!(out["domainRemove"][data]["deleted"], true, "{}", out["domainRemove"]);

    let key = &out["keyCreate"][data];
    let key_id = key["id"].as_str().unwrap_or_else(|| panic!("a key: {}", out["keyCreate"]));
    assert!(key["token"].as_str().is_some_and(|t| t.starts_with("tid_")), "{key}");
    let keys = out["keyList"][data]["data"].as_array().unwrap_or_else(|| panic!("{}", out["keyList"]));
    assert!(keys.iter().any(|k| k["id"] == key_id && k["name"] == "sdk sender"), "{keys:?}");
    assert_eq!(out["keyRemove"][data]["deleted"], true, "{}", out["keyRemove"]);
}

#[test]
fn the_resend_python_sdk_sends_reads_and_raises_as_its_users_expect() {
    let test = "the_resend_python_sdk_sends_reads_and_raises_as_its_users_expect";
    let mut probe = Command::new("python3");
    probe.args(["-c", "import resend, sys; sys.exit(resend.__version__ != '2.51.0')"]);
    if !tidings_e2e::tool_available(test, &mut probe, "pip install resend==2.51.0") {
        return;
    }
    block_on(async {
        let s = Setup::start().await;
        let output = s
            .driver("python3", "resend-python/drive.py")
            .env("REQUESTS_CA_BUNDLE", s.server.cert_path())
            .output()
            .await
            .expect("python3 runs");
        let out = printed(&output, "drive.py");

        let id = out["send"]["data"]["id"].as_str().unwrap_or_else(|| panic!("a send: {}", out["send"])).to_owned();
        assert_eq!(out["retry"]["data"]["id"], id.as_str(), "the same Idempotency-Key, the same email");
        let got = &out["get"]["data"];
        assert_eq!((got["object"].as_str(), got["last_event"].as_str()), (Some("email"), Some("delivered")), "{got}");
        assert_eq!(got["cc"], serde_json::json!(["carol@z.example"]));
        let copies = s.delivered_copies(got["message_id"].as_str().expect("the Message-ID")).await;
        assert_eq!(
            attachments(&copies[0].data),
            [("list.txt".to_owned(), b"list of bytes\n".to_vec()), ("remote.txt".to_owned(), FETCHED.to_vec())]
        );
        assert_eq!(out["batch"]["data"]["data"].as_array().map(Vec::len), Some(2), "{}", out["batch"]);
        let listed = out["list"]["data"]["data"].as_array().unwrap_or_else(|| panic!("a list: {}", out["list"]));
        assert_eq!(listed.len(), 4, "the send and three batch items");

        assert_eq!(out["permissive"]["data"]["errors"][0]["index"], 1, "{}", out["permissive"]);
        assert_domains_and_keys(&out, "data");
        assert!(out["sendByNewKey"]["data"]["id"].is_string(), "the new key sends: {}", out["sendByNewKey"]);

        // The exceptions a Python user catches.
        for (case, code, class) in [
            ("badKey", 403, "InvalidApiKeyError"),
            ("invalid", 422, "ValidationError"),
            ("notFound", 404, "ResendError"),
            ("suppressed", 422, "ValidationError"),
            ("domainGone", 404, "ResendError"),
            ("sendByRemovedKey", 403, "InvalidApiKeyError"),
            ("domainsBySender", 401, "ResendError"),
        ] {
            let error = &out[case]["error"];
            assert_eq!(
                (error["code"].as_u64(), error["class"].as_str()),
                (Some(code), Some(class)),
                "{case}: {}",
                out[case]
            );
        }
    });
}

#[test]
fn an_attachment_path_on_a_private_address_is_refused_unless_private_targets_are_allowed() {
    block_on(async {
        let (server, dns) = server_with_dns(&[]).await;
        let key = server.key().to_owned();
        verified_domain(&server, &dns, &key, DOMAIN).await;
        let files = FileServer::start(FETCHED).await;
        for url in [files.url("/a.txt").replacen("http://", "https://", 1), files.url("/a.txt")] {
            let body = serde_json::json!({"from": format!("hi@{DOMAIN}"), "to": "ann@x.example", "subject": "s",
                "text": "t", "attachments": [{"filename": "a.txt", "path": url}]});
            let (status, answer) = server.post("/resend/emails", &key, body).await;
            assert_eq!((status, answer["name"].as_str()), (422, Some("validation_error")), "{url}: {answer}");
            let message = answer["message"].as_str().unwrap();
            assert!(message.starts_with("`attachments[0].path`: cannot be fetched"), "{message}");
            assert!(message.contains("is not public") || message.contains("https"), "{message}");
        }
        assert_eq!(files.accepted(), 0, "the guard refused before connecting");
        let (_, listed) = server.get("/resend/emails", &key).await;
        assert_eq!(listed["data"], serde_json::json!([]), "nothing was sent");
    });
}
