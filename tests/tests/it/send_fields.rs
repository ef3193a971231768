//! The optional send fields against the real binary: a message with `replyTo`,
//! custom `headers`, `tags`, `metadata`, an attachment and an inline image goes through a
//! relay to an [`SmtpSink`], and the MIME the sink received is parsed back; the tags and
//! metadata come back on the message, in webhook payloads (a real receiver on loopback) and
//! as list filters. Every kind of bad input is a 422 naming its field, and a CR/LF header
//! injection never reaches the sink. A send larger than the general body limit (attachments)
//! is accepted and delivered byte for byte. An HTML-only send arrives with a text part
//! generated from its HTML (none with `"text": ""`), and text with bare CR or LF arrives
//! CRLF, an ASCII file base64.
//!
//! Every test runs on one runtime ([`block_on`]): the sink, the DNS server and the receiver
//! are tasks that a test's own runtime would take down when that test ends.

use std::time::{Duration, Instant};

use crate::common::receiver::Receiver;
use crate::common::{assert_invalid, assert_ok, block_on, server_relaying_to, verified_domain};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use mail_parser::{MessageParser, MimeHeaders, PartType};
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::{ReceivedMessage, SinkConfig, SmtpSink};

const WAIT: Duration = Duration::from_secs(30);
const DOMAIN: &str = "fields.example";

/// A server relaying to its own sink (which takes messages up to 64 MiB), with private
/// webhook targets allowed and the verified domain [`DOMAIN`].
struct Setup {
    // Dropped in this order: the server goes before the sink and DNS server it uses.
    server: TestServer,
    _dns: TestDnsServer,
    sink: SmtpSink,
}

async fn setup() -> Setup {
    let sink = SmtpSink::start_with(SinkConfig { max_message_bytes: 64 * 1024 * 1024, ..SinkConfig::default() })
        .await
        .expect("the SMTP sink starts");
    let (server, dns) = server_relaying_to(&sink, &[("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true")]).await;
    verified_domain(&server, &dns, server.key(), DOMAIN).await;
    Setup { server, _dns: dns, sink }
}

/// `extra` on top of a valid send to `to`.
fn mail(to: &str, extra: Value) -> Value {
    let mut body = json!({
        "to": to,
        "from": format!("billing@{DOMAIN}"),
        "subject": "Your invoice",
        "text": "Your invoice is attached.",
        "html": "<p><img src=\"cid:logo\" alt=\"Acme\"> Your invoice is attached.</p>",
    });
    for (k, v) in extra.as_object().expect("an object") {
        body[k] = v.clone();
    }
    body
}

async fn send(server: &TestServer, body: Value) -> Value {
    let (status, reply) = server.post("/v1/messages", server.key(), body).await;
    assert_ok(status, &reply, 201, "send");
    reply["data"].clone()
}

/// Polls the message until it is `Delivered`.
async fn wait_delivered(server: &TestServer, id: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
        assert_ok(status, &body, 200, "GET the message");
        match body["data"]["status"].as_str() {
            Some("Delivered") => return body["data"].clone(),
            Some(s @ ("Bounced" | "Failed" | "Suppressed")) => panic!("message {id} ended {s}: {body}"),
            _ if Instant::now() >= deadline => panic!("message {id} not delivered after {WAIT:?}: {body}"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// What the sink accepted for `address`.
fn received_by(sink: &SmtpSink, address: &str) -> Vec<ReceivedMessage> {
    sink.messages().into_iter().filter(|m| m.recipients.iter().any(|r| r.eq_ignore_ascii_case(address))).collect()
}

/// The MIME tree, one line per part indented by depth: content type, and for parts with a
/// disposition the disposition, `<content id>` and file name.
fn mime_tree(raw: &[u8]) -> Vec<String> {
    fn walk(parsed: &mail_parser::Message<'_>, id: u32, depth: usize, out: &mut Vec<String>) {
        let part = &parsed.parts[id as usize];
        let ctype = part
            .content_type()
            .map_or("text/plain".to_owned(), |c| format!("{}/{}", c.ctype(), c.subtype().unwrap_or("")));
        let mut line = format!("{}{ctype}", "  ".repeat(depth));
        if let Some(disposition) = part.content_disposition() {
            line.push_str(&format!(" {}", disposition.ctype()));
            if let Some(cid) = part.content_id() {
                line.push_str(&format!(" <{cid}>"));
            }
            if let Some(name) = part.attachment_name() {
                line.push_str(&format!(" {name}"));
            }
        }
        out.push(line);
        if let PartType::Multipart(children) = &part.body {
            for child in children {
                walk(parsed, *child, depth + 1, out);
            }
        }
    }
    let parsed = MessageParser::default().parse(raw).expect("the received message parses");
    let mut out = Vec::new();
    walk(&parsed, 0, 0, &mut out);
    out
}

/// The decoded bytes of the part named `name`.
fn part_bytes(raw: &[u8], name: &str) -> Vec<u8> {
    let parsed = MessageParser::default().parse(raw).expect("parses");
    let part = parsed.parts.iter().find(|p| p.attachment_name() == Some(name)).unwrap_or_else(|| panic!("no {name}"));
    part.contents().to_vec()
}

/// The ids a list answers.
async fn listed(server: &TestServer, query: &str) -> Vec<String> {
    let (status, body) = server.get(&format!("/v1/messages?{query}"), server.key()).await;
    assert_ok(status, &body, 200, query);
    body["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn every_field_reaches_the_recipient_the_api_and_the_webhooks() {
    block_on(async {
        let s = setup().await;
        let hooks = Receiver::start().await;
        let (status, body) = s
            .server
            .post(
                "/v1/webhooks",
                s.server.key(),
                json!({"url": hooks.url("/hook"), "eventTypes": ["Queued", "Delivered"]}),
            )
            .await;
        assert_ok(status, &body, 201, "create the webhook endpoint");
        let pdf: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 256) as u8).collect();
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR fake".to_vec();

        let sent = send(
            &s.server,
            mail(
                "ann@example.net",
                json!({
                    "replyTo": ["help@fields.example", "accounts@fields.example"],
                    "headers": {
                        "X-Campaign": "spring-2026",
                        "List-Unsubscribe": "<https://fields.example/u/ann>",
                        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
                    },
                    "tags": [{"name": "plan", "value": "pro"}, {"name": "invoice", "value": ""}],
                    "metadata": {"orderId": "A-17", "customer": "Ann Müller"},
                    "attachments": [
                        {"filename": "invoice-A-17.pdf", "contentType": "application/pdf", "content": STANDARD.encode(&pdf)},
                        {"filename": "logo.png", "contentType": "image/png", "content": STANDARD.encode(&png), "contentId": "logo"},
                    ],
                }),
            ),
        )
        .await;
        let id = sent["id"].as_str().unwrap().to_owned();
        let plain = send(&s.server, mail("bob@example.net", json!({"html": null}))).await;
        wait_delivered(&s.server, &id).await;

        // The MIME the recipient's server got.
        let received = received_by(&s.sink, "ann@example.net");
        assert_eq!(received.len(), 1, "one message for ann");
        let raw = &received[0].data;
        let parsed = MessageParser::default().parse(raw).expect("parses");
        let reply_to: Vec<&str> = parsed.reply_to().expect("Reply-To").iter().filter_map(|a| a.address()).collect();
        assert_eq!(reply_to, ["help@fields.example", "accounts@fields.example"]);
        assert_eq!(parsed.header_raw("X-Campaign").map(str::trim), Some("spring-2026"));
        assert_eq!(parsed.header_raw("List-Unsubscribe").map(str::trim), Some("<https://fields.example/u/ann>"));
        assert_eq!(parsed.header_raw("List-Unsubscribe-Post").map(str::trim), Some("List-Unsubscribe=One-Click"));
        assert_eq!(
            mime_tree(raw),
            [
                "multipart/mixed",
                "  multipart/alternative",
                "    text/plain",
                "    multipart/related",
                "      text/html",
                "      image/png inline <logo> logo.png",
                "  application/pdf attachment invoice-A-17.pdf",
            ]
        );
        assert_eq!(part_bytes(raw, "invoice-A-17.pdf"), pdf, "the attachment arrives byte for byte");
        assert_eq!(part_bytes(raw, "logo.png"), png, "the inline image arrives byte for byte");
        assert!(parsed.body_html(0).is_some_and(|h| h.contains("cid:logo")));

        // The API.
        let (_, got) = s.server.get(&format!("/v1/messages/{id}"), s.server.key()).await;
        let m = &got["data"];
        assert_eq!(m["replyTo"], json!(["help@fields.example", "accounts@fields.example"]));
        assert_eq!(m["tags"], json!([{"name": "plan", "value": "pro"}, {"name": "invoice", "value": ""}]));
        assert_eq!(m["metadata"], json!({"orderId": "A-17", "customer": "Ann Müller"}));
        assert_eq!(
            m["attachments"][0],
            json!({"filename": "invoice-A-17.pdf", "contentType": "application/pdf", "contentId": null, "size": 20_000})
        );
        assert!(m["attachments"][0].get("content").is_none(), "the content is not returned");

        // The webhooks: Queued and Delivered both carry them.
        let hits = hooks.wait_for("/hook", 2, WAIT).await;
        let ours: Vec<Value> = hits.iter().map(|h| h.json()).filter(|p| p["data"]["messageId"] == json!(id)).collect();
        let types: Vec<&str> = ours.iter().map(|p| p["type"].as_str().unwrap()).collect();
        assert!(types.contains(&"Queued"), "{types:?}");
        for payload in &ours {
            assert_eq!(payload["data"]["tags"], m["tags"], "{payload}");
            assert_eq!(payload["data"]["metadata"], m["metadata"], "{payload}");
        }
        let delivered = hooks.wait_for("/hook", 4, WAIT).await;
        let delivered: Vec<Value> = delivered
            .iter()
            .map(|h| h.json())
            .filter(|p| p["data"]["messageId"] == json!(id) && p["type"] == "Delivered")
            .collect();
        assert_eq!(delivered.len(), 1, "one Delivered event for the message");
        assert_eq!(delivered[0]["data"]["metadata"]["orderId"], "A-17");

        // The list filters.
        let plain_id = plain["id"].as_str().unwrap().to_owned();
        assert_eq!(listed(&s.server, "tag=plan:pro").await, [id.as_str()]);
        assert_eq!(listed(&s.server, "tag=invoice").await, [id.as_str()]);
        assert_eq!(listed(&s.server, "tag=plan:free").await, Vec::<String>::new());
        assert_eq!(listed(&s.server, "metadata%5BorderId%5D=A-17").await, [id.as_str()]);
        assert_eq!(listed(&s.server, "metadata%5Bcustomer%5D=Ann%20M%C3%BCller&tag=plan").await, [id.as_str()]);
        assert_eq!(listed(&s.server, "limit=10").await, [plain_id, id.clone()]);
    });
}

#[test]
fn bad_fields_are_422_and_a_header_injection_never_reaches_the_sink() {
    block_on(async {
        let s = setup().await;
        let victim = "victim@example.net";
        let file = |filename: &str, content_type: &str, content: &str| json!([{"filename": filename, "contentType": content_type, "content": content}]);
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (json!({"replyTo": "not an address"}), vec!["replyTo"]),
            (json!({"replyTo": ["ok@fields.example", "a\r\nb@x.y"]}), vec!["replyTo[1]"]),
            (json!({"headers": {"X-Evil": format!("1\r\nBcc: {victim}")}}), vec!["headers.X-Evil"]),
            (json!({"headers": {"X-Evil\r\nBcc": "x"}}), vec!["headers.X-Evil\r\nBcc"]),
            (json!({"headers": {"Bcc": victim}}), vec!["headers.Bcc"]),
            (json!({"headers": {"DKIM-Signature": "v=1"}}), vec!["headers.DKIM-Signature"]),
            (json!({"headers": {"X-A": "v".repeat(999)}}), vec!["headers.X-A"]),
            (json!({"tags": [{"name": "bad name", "value": "x"}]}), vec!["tags[0].name"]),
            (json!({"tags": [{"name": "ok", "value": "é"}]}), vec!["tags[0].value"]),
            (json!({"metadata": {"big": "x".repeat(10 * 1024 + 1)}}), vec!["metadata"]),
            (json!({"metadata": {"n": 5}}), vec!["metadata.n"]),
            (
                json!({"attachments": file("setup.exe", "application/octet-stream", "")}),
                vec!["attachments[0].filename"],
            ),
            (json!({"attachments": file("run.sh.txt", "application/x-sh", "")}), vec!["attachments[0].contentType"]),
            (json!({"attachments": file("a/b.pdf", "application/pdf", "")}), vec!["attachments[0].filename"]),
            (json!({"attachments": file("a.pdf", "pdf", "")}), vec!["attachments[0].contentType"]),
            (json!({"attachments": file("a.pdf", "application/pdf", "not base64")}), vec!["attachments[0].content"]),
            // One parameter, a charset, and true of the content when it is UTF-8 or ASCII.
            (json!({"attachments": file("a.txt", "text/plain; name=a.txt", "")}), vec!["attachments[0].contentType"]),
            (json!({"attachments": file("a.txt", "text/plain; charset=", "")}), vec!["attachments[0].contentType"]),
            (
                json!({"attachments": file("a.txt", "text/plain; charset=utf-8; format=flowed", "")}),
                vec!["attachments[0].contentType"],
            ),
            (
                json!({"attachments": file("a.txt", "text/plain; charset=utf-8", &STANDARD.encode(b"M\xfcller"))}),
                vec!["attachments[0].content"],
            ),
            (
                json!({"attachments": file("a.sh", "application/x-sh; charset=utf-8", "")}),
                vec!["attachments[0].contentType"],
            ),
        ];
        for (extra, fields) in cases {
            let (status, reply) = s.server.post("/v1/messages", s.server.key(), mail(victim, extra.clone())).await;
            assert_invalid(status, &reply, &fields, &format!("{extra}"));
        }
        let (status, reply) = s.server.get("/v1/messages?tag=bad%20name", s.server.key()).await;
        assert_invalid(status, &reply, &["tag"], "a bad tag filter");

        // Nothing was queued for the victim: a later message goes through alone.
        let later = send(&s.server, mail("later@example.net", json!({}))).await;
        wait_delivered(&s.server, later["id"].as_str().unwrap()).await;
        assert_eq!(received_by(&s.sink, victim).len(), 0, "nothing reached the sink for the refused sends");
        assert!(s.sink.messages().iter().all(|m| !m.text().contains("X-Evil")), "no injected header anywhere");
        assert_eq!(listed(&s.server, "limit=50").await.len(), 1, "only the later message was stored");
    });
}

#[test]
fn a_send_over_the_general_body_limit_with_a_large_attachment_is_delivered_intact() {
    block_on(async {
        let s = setup().await;
        // 12 MiB of file: 16 MiB of base64, over the 10 MiB general limit, under the send's.
        let big: Vec<u8> = (0..12 * 1024 * 1024u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        let body = mail(
            "large@example.net",
            json!({"attachments": [{"filename": "data.bin", "contentType": "application/octet-stream", "content": STANDARD.encode(&big)}]}),
        );

        let sent = send(&s.server, body).await;
        wait_delivered(&s.server, sent["id"].as_str().unwrap()).await;

        let received = received_by(&s.sink, "large@example.net");
        assert_eq!(received.len(), 1);
        assert!(part_bytes(&received[0].data, "data.bin") == big, "the 12 MiB file arrives byte for byte");
        let (status, reply) =
            s.server.post("/v1/keys", s.server.key(), json!({"name": "x".repeat(11 * 1024 * 1024)})).await;
        assert_eq!(
            (status, reply["error"]["code"].as_str()),
            (413, Some("payload_too_large")),
            "other routes keep 10 MiB"
        );
    });
}

#[test]
fn an_html_only_send_arrives_with_a_generated_text_part_unless_its_text_is_empty() {
    block_on(async {
        let s = setup().await;
        let html = "<h1>Hi Ann</h1><p>See <a href=\"https://fields.example/o/1?a=1&amp;b=2\">your order</a>.</p>";

        let generated = send(&s.server, mail("gen@example.net", json!({"text": null, "html": html}))).await;
        let opted_out = send(&s.server, mail("out@example.net", json!({"text": "", "html": html}))).await;
        for sent in [&generated, &opted_out] {
            wait_delivered(&s.server, sent["id"].as_str().unwrap()).await;
        }

        let raw = &received_by(&s.sink, "gen@example.net")[0].data;
        assert_eq!(mime_tree(raw), ["multipart/alternative", "  text/plain", "  text/html"]);
        let parsed = MessageParser::default().parse(raw).expect("parses");
        assert_eq!(
            parsed.body_text(0).as_deref(),
            Some("Hi Ann\r\n\r\nSee your order (https://fields.example/o/1?a=1&b=2).")
        );
        assert_eq!(parsed.body_html(0).as_deref(), Some(html));
        let raw = &received_by(&s.sink, "out@example.net")[0].data;
        assert_eq!(mime_tree(raw), ["text/html"], "an empty text opts out");
    });
}

#[test]
fn bodies_with_any_line_ends_and_ascii_files_arrive_as_crlf_text_and_base64_files() {
    block_on(async {
        let s = setup().await;
        let csv = b"a,b\n1,2\n";
        let body = json!({
            "text": "crlf line\r\nlf line\nlone cr\rend",
            "html": null,
            "attachments": [{"filename": "a.csv", "contentType": "text/csv", "content": STANDARD.encode(csv)}],
        });

        let sent = send(&s.server, mail("lines@example.net", body)).await;
        wait_delivered(&s.server, sent["id"].as_str().unwrap()).await;

        let raw = &received_by(&s.sink, "lines@example.net")[0].data;
        for (i, &byte) in raw.iter().enumerate() {
            match byte {
                b'\r' => assert_eq!(raw.get(i + 1), Some(&b'\n'), "bare CR at {i}"),
                b'\n' => assert!(i > 0 && raw[i - 1] == b'\r', "bare LF at {i}"),
                _ => {}
            }
        }
        let parsed = MessageParser::default().parse(raw).expect("parses");
        assert_eq!(parsed.body_text(0).as_deref(), Some("crlf line\r\nlf line\r\nlone cr\r\nend"));
        let file = parsed.attachments().next().expect("the file");
        assert_eq!(file.content_transfer_encoding(), Some("base64"));
        assert_eq!(file.contents(), csv);
    });
}
