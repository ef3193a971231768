//! Bounce and complaint reports against the real binary
//! (docs/api.md#bounce-and-complaint-reports): a message is delivered through a relay (an SMTP sink on
//! loopback), then a report shaped like those Gmail, Outlook, Yahoo or Postfix send (the
//! fixtures of core's tests) is sent over SMTP to the server's inbound listener, and what it
//! changed is read through the API and a webhook receiver.
//!
//! Every test runs on one runtime ([`block_on`]): the sink, the DNS server and the receiver
//! are tasks that a test's own runtime would take down when that test ends.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::receiver::Receiver;
use crate::common::{assert_error, assert_ok, block_on, server_with_dns, verified_domain};
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::SmtpSink;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// How long a test waits for something it polls for.
const WAIT: Duration = Duration::from_secs(15);
/// The return-path domain, the only one the listener accepts.
const BOUNCE_DOMAIN: &str = "bounces.example";

/// A server delivering through a sink, with the inbound listener on a free port, a verified
/// domain `shop.example`, and private webhook targets allowed.
struct Setup {
    server: TestServer,
    _dns: TestDnsServer,
    _sink: SmtpSink,
    inbound: SocketAddr,
}

async fn setup() -> Setup {
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let relay = format!("smtp://{}", sink.addr());
    let (server, dns) = server_with_dns(&[
        ("TIDINGS_DELIVERY", "relay"),
        ("TIDINGS_SMTP_RELAY", &relay),
        ("TIDINGS_RETURN_PATH_DOMAIN", BOUNCE_DOMAIN),
        ("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:0"),
        ("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true"),
    ])
    .await;
    let key = server.key().to_owned();
    verified_domain(&server, &dns, &key, "shop.example").await;
    let line = server.wait_for_log(&["inbound SMTP listening on "]).expect("the listener's address is logged");
    let addr = line.rsplit(' ').next().unwrap().trim().parse().expect("an address");
    Setup { server, _dns: dns, _sink: sink, inbound: addr }
}

/// Sends a message to `to` and waits until it is Delivered; returns it.
async fn delivered(server: &TestServer, to: &str) -> Value {
    let body = json!({"from": "orders@shop.example", "to": to, "subject": "Your order", "text": "Shipped."});
    let (status, body) = server.post("/v1/messages", server.key(), body).await;
    assert_ok(status, &body, 201, "send");
    let id = body["data"]["id"].as_str().unwrap().to_owned();
    wait_status(server, &id, "Delivered").await
}

/// Polls the message until its status is `status`.
async fn wait_status(server: &TestServer, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
        if body["data"]["status"] == status {
            return body["data"].clone();
        }
        assert!(Instant::now() < deadline, "message {id} never became {status}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A report fixture from core's tests about `message` (sent to `recipient`).
fn fixture(name: &str, message: &Value, recipient: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../core/tests/fixtures/reports").join(name);
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let Ok(text) = String::from_utf8(raw.clone()) else { return raw };
    let id = message["id"].as_str().unwrap().to_ascii_lowercase();
    text.replace("{{MESSAGE_ID}}", message["providerMessageId"].as_str().unwrap())
        .replace("{{RETURN_PATH}}", &format!("bounces+{id}@{BOUNCE_DOMAIN}"))
        .replace("{{RECIPIENT}}", recipient)
        .into_bytes()
}

/// A minimal SMTP client: one transaction from the null sender, every reply code in order
/// (greeting, EHLO, MAIL, RCPT, DATA, end of data, QUIT); stops after a refused RCPT.
async fn smtp_send(addr: SocketAddr, rcpt: &str, data: &[u8]) -> Vec<u16> {
    let stream = TcpStream::connect(addr).await.expect("connect to the inbound listener");
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut codes = Vec::new();
    async fn reply(lines: &mut tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>) -> u16 {
        loop {
            let line = lines.next_line().await.expect("read a reply").expect("the server closed the connection");
            if line.as_bytes().get(3) != Some(&b'-') {
                return line[..3].parse().expect("a reply code");
            }
        }
    }
    codes.push(reply(&mut lines).await);
    for command in ["EHLO reporter.example".to_owned(), "MAIL FROM:<>".to_owned(), format!("RCPT TO:<{rcpt}>")] {
        write.write_all(format!("{command}\r\n").as_bytes()).await.unwrap();
        codes.push(reply(&mut lines).await);
    }
    if codes.last() != Some(&250) {
        return codes;
    }
    write.write_all(b"DATA\r\n").await.unwrap();
    codes.push(reply(&mut lines).await);
    let mut stuffed = Vec::with_capacity(data.len() + 64);
    for line in data.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.first() == Some(&b'.') {
            stuffed.push(b'.');
        }
        stuffed.extend_from_slice(line);
        stuffed.extend_from_slice(b"\r\n");
    }
    stuffed.extend_from_slice(b".\r\n");
    write.write_all(&stuffed).await.unwrap();
    codes.push(reply(&mut lines).await);
    write.write_all(b"QUIT\r\n").await.unwrap();
    codes.push(reply(&mut lines).await);
    codes
}

#[test]
fn a_hard_bounce_report_bounces_suppresses_and_fires_the_webhook() {
    block_on(async {
        let s = setup().await;
        let receiver = Receiver::start().await;
        let hook = json!({"url": receiver.url("/bounces"), "eventTypes": ["Bounced", "Complained"]});
        let (status, body) = s.server.post("/v1/webhooks", s.server.key(), hook).await;
        assert_ok(status, &body, 201, "webhook");

        let message = delivered(&s.server, "gone@example.com").await;
        let codes = smtp_send(
            s.inbound,
            &format!("bounces+{}@{BOUNCE_DOMAIN}", message["id"].as_str().unwrap()),
            &fixture("gmail_5_1_1.eml", &message, "gone@example.com"),
        )
        .await;
        assert_eq!(codes, [220, 250, 250, 250, 354, 250, 221], "the report is accepted");

        let id = message["id"].as_str().unwrap();
        wait_status(&s.server, id, "Bounced").await;
        let (_, events) = s.server.get(&format!("/v1/messages/{id}/events"), s.server.key()).await;
        let event = events["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "Bounced")
            .expect("a Bounced event")
            .clone();
        assert_eq!(event["details"]["smtpCode"], 550, "{event}");
        assert_eq!(event["details"]["enhancedCode"], "5.1.1", "{event}");
        assert_eq!(event["details"]["bounceType"], "Hard", "{event}");

        let (status, body) = s.server.get("/v1/suppressions/gone@example.com", s.server.key()).await;
        assert_ok(status, &body, 200, "the address is suppressed");
        assert_eq!(body["data"]["reason"], "HardBounce", "{body}");
        assert_eq!(body["data"]["messageId"], id, "{body}");

        let hit = receiver.wait_for("/bounces", 1, WAIT).await.remove(0);
        assert_eq!(hit.json()["type"], "Bounced");
        assert_eq!(hit.json()["data"]["messageId"], id);

        let body = json!({"from": "orders@shop.example", "to": "gone@example.com", "subject": "Again", "text": "x"});
        let (status, body) = s.server.post("/v1/messages", s.server.key(), body).await;
        assert_error(status, &body, 422, "recipient_suppressed", "the next send to the bounced address");

        // The same report again changes nothing and is still accepted.
        let codes = smtp_send(
            s.inbound,
            &format!("bounces+{id}@{BOUNCE_DOMAIN}"),
            &fixture("gmail_5_1_1.eml", &message, "gone@example.com"),
        )
        .await;
        assert_eq!(codes.last(), Some(&221));
        assert_eq!(codes[5], 250, "a duplicate is accepted");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (_, events) = s.server.get(&format!("/v1/messages/{id}/events"), s.server.key()).await;
        assert_eq!(events["data"].as_array().unwrap().iter().filter(|e| e["type"] == "Bounced").count(), 1);
    });
}

#[test]
fn a_complaint_report_marks_the_message_complained_and_suppresses() {
    block_on(async {
        let s = setup().await;
        let message = delivered(&s.server, "angry@example.com").await;
        let id = message["id"].as_str().unwrap();
        // Sent to the abuse desk's own address at our domain: matched by the Message-ID inside.
        let codes = smtp_send(
            s.inbound,
            &format!("fbl@{BOUNCE_DOMAIN}"),
            &fixture("yahoo_arf_abuse.eml", &message, "angry@example.com"),
        )
        .await;
        assert_eq!(codes, [220, 250, 250, 250, 354, 250, 221]);
        wait_status(&s.server, id, "Complained").await;
        let (status, body) = s.server.get("/v1/suppressions/angry@example.com", s.server.key()).await;
        assert_ok(status, &body, 200, "suppressed");
        assert_eq!(body["data"]["reason"], "Complaint", "{body}");
    });
}

#[test]
fn unmatched_malformed_and_misaddressed_reports_change_nothing() {
    block_on(async {
        let s = setup().await;
        let message = delivered(&s.server, "fine@example.com").await;
        let id = message["id"].as_str().unwrap();

        // About a message that does not exist: accepted, nothing happens.
        let mut stranger = message.clone();
        stranger["id"] = json!("01JZZZZZZZZZZZZZZZZZZZZZZZ");
        stranger["providerMessageId"] = json!("01JZZZZZZZZZZZZZZZZZZZZZZZ@shop.example");
        let codes = smtp_send(
            s.inbound,
            &format!("bounces+01jzzzzzzzzzzzzzzzzzzzzzzz@{BOUNCE_DOMAIN}"),
            &fixture("gmail_5_1_1.eml", &stranger, "fine@example.com"),
        )
        .await;
        assert_eq!(codes[5], 250, "an unmatched report is accepted: {codes:?}");
        // Malformed ones likewise, and the listener goes on serving. (A truncated report
        // still says what arrived of it, so it goes to the unknown message.)
        for (name, about) in
            [("garbage.bin", &message), ("missing_boundary.eml", &message), ("truncated_multipart.eml", &stranger)]
        {
            let rcpt = format!("bounces+{}@{BOUNCE_DOMAIN}", about["id"].as_str().unwrap().to_ascii_lowercase());
            let codes = smtp_send(s.inbound, &rcpt, &fixture(name, about, "fine@example.com")).await;
            assert_eq!(codes, [220, 250, 250, 250, 354, 250, 221], "{name}");
        }
        // Mail for any other domain is refused: the listener is not a relay.
        let codes = smtp_send(s.inbound, "someone@elsewhere.example", b"Subject: hi\r\n\r\nhello\r\n").await;
        assert_eq!(codes.last(), Some(&550), "{codes:?}");

        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = wait_status(&s.server, id, "Delivered").await;
        assert_eq!(now["status"], "Delivered");
        let (status, body) = s.server.get("/v1/suppressions/fine@example.com", s.server.key()).await;
        assert_error(status, &body, 404, "not_found", "no suppression from unmatched or malformed reports");
        let log = s.server.stderr_lines().join("\n");
        assert!(log.contains("report: unmatched"), "unmatched reports are counted in the log");
    });
}
