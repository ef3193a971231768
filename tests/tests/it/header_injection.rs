//! Header injection and part break-out: CR and LF in `to`,
//! `from`, display names and `subject` are refused with 422 and nothing is queued; and text
//! that looks like headers or MIME boundaries, arriving through template variables or the
//! send's own fields, reaches the SMTP sink as content of its part, never as a header or a
//! part of its own.

use std::time::Duration;

use crate::common::mail::{send_ok, wait_for_status};
use crate::common::{assert_error, assert_invalid, assert_ok, server_relaying_to, verified_domain};
use mail_parser::{MessageParser, MimeHeaders};
use serde_json::json;
use tidings_transport_smtp::testing::SmtpSink;

const DOMAIN: &str = "inject.example";
const WAIT: Duration = Duration::from_secs(15);

/// Line breaks of every kind a parser might split on.
const BREAKS: [&str; 5] = ["\r\n", "\n", "\r", "\r\n\t", "%0d%0a"];

#[tokio::test]
async fn line_breaks_in_addresses_names_and_subjects_are_refused_and_queue_nothing() {
    let sink = SmtpSink::start().await.expect("the sink starts");
    let (server, dns) = server_relaying_to(&sink, &[]).await;
    verified_domain(&server, &dns, server.key(), DOMAIN).await;
    let from = format!("hello@{DOMAIN}");

    let mut refused = 0;
    for brk in BREAKS {
        let injected = format!("Bcc: victim@example.org{brk}X-Injected: yes");
        // (field at fault, body, whether it is still text rather than a line break)
        let attempts = [
            (
                "to",
                json!({"to": format!("a@inbox.example{brk}Bcc: victim@example.org"), "from": from, "subject": "s", "text": "t"}),
                false,
            ),
            (
                "from",
                json!({"to": "a@inbox.example", "from": format!("{from}{brk}{injected}"), "subject": "s", "text": "t"}),
                false,
            ),
            (
                // Percent-encoded, this is text, but text holding another address, which a
                // display name may not (SECURITY.md, "Header injection: addresses as
                // display names"): refused either way.
                "from",
                json!({"to": "a@inbox.example", "from": format!("Ann{brk}{injected} <{from}>"), "subject": "s", "text": "t"}),
                false,
            ),
            (
                "subject",
                json!({"to": "a@inbox.example", "from": from, "subject": format!("Hi{brk}{injected}"), "text": "t"}),
                true,
            ),
        ];
        for (field, body, text_if_encoded) in attempts {
            let (status, reply) = server.post("/v1/messages", server.key(), body.clone()).await;
            if brk == "%0d%0a" && text_if_encoded {
                // Percent-encoding is no line break in JSON: in a subject it is harmless text
                // (in an address it is no address: refused below).
                assert_ok(status, &reply, 201, "percent-encoded text");
                continue;
            }
            assert_invalid(status, &reply, &[field], &format!("{body}"));
            refused += 1;
        }
        // A registered sender's display name cannot carry one either.
        let (status, reply) = server
            .post(
                &format!("/v1/domains/{}/senders", domain_id(&server).await),
                server.key(),
                json!({"username": "billing", "displayName": format!("Billing{brk}{injected}")}),
            )
            .await;
        if brk != "%0d%0a" {
            assert_error(status, &reply, 422, "validation_error", "a display name with a line break");
        }
    }
    assert!(refused >= 16, "{refused}");
    let (status, list) = server.get("/v1/messages?limit=200", server.key()).await;
    assert_ok(status, &list, 200, "list");
    let queued = list["data"].as_array().unwrap().len();
    assert_eq!(queued, 1, "only the percent-encoded subject was queued: {list}");
}

/// The id of the server's only domain.
async fn domain_id(server: &tidings_e2e::TestServer) -> String {
    let (_, body) = server.get("/v1/domains", server.key()).await;
    body["data"][0]["id"].as_str().expect("a domain").to_owned()
}

#[tokio::test]
async fn header_and_boundary_lookalikes_in_content_stay_inside_their_part() {
    let sink = SmtpSink::start().await.expect("the sink starts");
    let (server, dns) = server_relaying_to(&sink, &[]).await;
    verified_domain(&server, &dns, server.key(), DOMAIN).await;
    let evil = "x\r\n\r\n--boundary\r\nContent-Type: text/html\r\nX-Injected: yes\r\n\r\n<script>alert(1)</script>\r\n.\r\nMAIL FROM:<x@y>\r\n";
    let (status, template) = server
        .post(
            "/v1/templates",
            server.key(),
            json!({"name": "t", "subject": "Order {{n}}", "text": "Hello {{{name}}}", "html": "<p>Hello {{name}}</p>"}),
        )
        .await;
    assert_ok(status, &template, 201, "template");
    let template_id = template["data"]["id"].as_str().unwrap();
    let to = "reader@inbox.example";
    let id = send_ok(
        &server,
        server.key(),
        json!({"to": to, "from": format!("Shop <hello@{DOMAIN}>"), "templateId": template_id,
               "variables": {"n": "7 X-Injected: yes", "name": evil}}),
    )
    .await;
    wait_for_status(&server, server.key(), &id, "Delivered", WAIT).await;

    let received = sink.messages();
    assert_eq!(received.len(), 1, "one message, one SMTP transaction: {received:#?}");
    assert_eq!(received[0].recipients, [to], "no recipient smuggled in");
    let raw = &received[0].data;
    let parsed = MessageParser::default().parse(raw).expect("the message parses");
    assert!(parsed.header("X-Injected").is_none(), "no injected header: {}", String::from_utf8_lossy(raw));
    assert_eq!(parsed.subject(), Some("Order 7 X-Injected: yes"));
    assert_eq!(parsed.text_body_count(), 1);
    assert_eq!(parsed.html_body_count(), 1);
    assert_eq!(parsed.attachment_count(), 0, "no part of its own");
    let text = parsed.body_text(0).expect("a text part");
    assert!(text.contains("--boundary") && text.contains("MAIL FROM:<x@y>"), "kept as text: {text:?}");
    let html = parsed.body_html(0).expect("an html part");
    assert!(html.contains("&lt;script&gt;"), "escaped in html: {html:?}");
    assert!(!html.contains("<script>"), "{html:?}");
    assert_eq!(parsed.parts.len(), 3, "multipart/alternative with exactly two parts");
    assert!(parsed.parts.iter().all(|p| p.content_type().is_some()));
}
