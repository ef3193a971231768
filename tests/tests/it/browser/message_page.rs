//! The message page as a person debugging a send uses it (issue #31 item 5): the source as it
//! went out, byte for byte against the copy the outbox transport wrote; the headers as sent;
//! the webhook deliveries the message caused, each leading to its payload and what the
//! receiver answered; and a message in
//! flight watched without reloading.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use tidings_e2e::browser::available;

use super::dashboard::{COOKIE, FROM, Setup, browser, session_cookie, sign_in};
use crate::common::receiver::Receiver;
use crate::common::{assert_ok, block_on};

/// `eml` without its `DKIM-Signature` fields (each with its folded lines): what the signer
/// added to the built message.
fn without_signatures(eml: &[u8]) -> Vec<u8> {
    let text = String::from_utf8(eml.to_vec()).expect("the .eml is ASCII");
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let mut kept = Vec::new();
    let mut skipping = false;
    for line in head.split("\r\n") {
        if line.starts_with([' ', '\t']) {
            if !skipping {
                kept.push(line);
            }
            continue;
        }
        skipping = line.to_ascii_lowercase().starts_with("dkim-signature:");
        if !skipping {
            kept.push(line);
        }
    }
    format!("{}\r\n\r\n{body}", kept.join("\r\n")).into_bytes()
}

#[test]
fn the_message_page_shows_the_source_as_sent_its_webhook_deliveries_and_watches_it_in_flight() {
    if !available("the_message_page_shows_the_source_as_sent_its_webhook_deliveries_and_watches_it_in_flight") {
        return;
    }
    block_on(async {
        let setup = Setup::start_with(&[("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true")]).await;
        let receiver = Receiver::start().await;
        let (status, hook) = setup
            .server
            .post(
                "/v1/webhooks",
                &setup.key,
                json!({"url": receiver.url("/hooks"), "eventTypes": ["Scheduled", "Queued", "Sent", "Delivered"]}),
            )
            .await;
        assert_ok(status, &hook, 201, "create a webhook endpoint");
        let endpoint = hook["data"]["id"].as_str().unwrap().to_owned();

        // Sent in a few seconds: the page is open while it waits.
        let at = (chrono::Utc::now() + chrono::Duration::seconds(6)).to_rfc3339();
        let id = setup
            .send(
                &setup.key,
                json!({
                    "from": FROM, "to": "Reader <reader@example.com>", "cc": "copy@example.com",
                    "subject": "Your receipt, débit 12 €", "scheduledAt": at,
                    "html": "<p>Thanks for your order.</p>", "text": "Thanks for your order.",
                    "headers": {"X-Entity-Ref-ID": "order-81"},
                    "attachments": [{"filename": "receipt.txt", "contentType": "text/plain", "content": "UmVjZWlwdCAjODEK"}],
                }),
            )
            .await;

        let browser = browser().await;
        sign_in(&browser, &setup, &setup.key).await;
        browser.goto(&setup.url(&format!("/messages/{id}"))).await;
        browser.find("#status[data-status=Scheduled]").await;
        let live = browser.find("#live").await;
        assert!(live.is_displayed().await.unwrap(), "the page says it is watching the message");
        // Without a reload: the script shows the new status and offers the timeline.
        browser.wait_for("#status[data-status=Delivered]").await;
        let reload = browser.wait_for("a#live-reload").await.text().await.unwrap();
        assert!(reload.contains("reload"), "a link to reload: {reload}");
        browser.click_to_navigate("a#live-reload").await;
        browser.find("ol#timeline > li[data-event=Delivered]").await;
        assert!(browser.try_find("#live").await.is_none(), "a delivered message is not watched");

        // The headers as they went out, and the source.
        let headers = browser.find("table#headers").await.text().await.unwrap();
        for wanted in ["MIME-Version", "Content-Type", "Date", "X-Entity-Ref-ID", "order-81", "copy@example.com"] {
            assert!(headers.contains(wanted), "{wanted} is among the headers as sent: {headers}");
        }
        browser.click("details#source-details summary").await;
        let inline = browser.find("pre#source").await.text().await.unwrap();
        assert!(inline.contains("Content-Disposition: attachment"), "the whole source is inline: {inline}");

        let cookie = session_cookie(&browser).await.expect("signed in");
        let source = setup
            .server
            .request(Method::GET, &format!("/messages/{id}/source"))
            .header("cookie", format!("{COOKIE}={}", cookie.value()))
            .send()
            .await
            .unwrap();
        assert_eq!(source.status(), 200);
        assert_eq!(source.headers()["content-type"], "text/plain; charset=utf-8");
        let source = source.bytes().await.unwrap().to_vec();
        let message = setup.wait_for_status(&id, "Delivered").await;
        let provider_id = message["providerMessageId"].as_str().unwrap();
        let eml = std::fs::read_dir(setup.server.data_dir().path().join("outbox"))
            .expect("the outbox")
            .flatten()
            .map(|e| std::fs::read(e.path()).unwrap())
            .find(|bytes| String::from_utf8_lossy(bytes).contains(provider_id))
            .expect("the message's .eml");
        assert_eq!(
            String::from_utf8_lossy(&source),
            String::from_utf8_lossy(&without_signatures(&eml)),
            "the source is the signed copy that went out, less its DKIM-Signature headers"
        );

        // Every event's delivery to the endpoint, each leading to its payload.
        receiver.wait_for("/hooks", 3, Duration::from_secs(30)).await;
        browser.reload_until("table#webhook-deliveries tr[data-delivery]").await;
        let rows = browser.find_all("table#webhook-deliveries tr[data-delivery]").await;
        let mut events = Vec::new();
        for row in &rows {
            events.push(
                row.find(tidings_e2e::browser::fantoccini::Locator::Css("td")).await.unwrap().text().await.unwrap(),
            );
        }
        for wanted in ["Scheduled", "Sent", "Delivered"] {
            assert!(events.iter().any(|e| e == wanted), "a delivery of the {wanted} event: {events:?}");
        }
        let link = format!("table#webhook-deliveries a[href^=\"/webhooks/{endpoint}/deliveries/\"]");
        browser.click_to_navigate(&link).await;
        let page = browser.page_text().await;
        assert!(page.contains(&id), "the delivery page shows the payload about the message:\n{page}");
        let said = browser.find("pre#delivery-response-body").await.text().await.unwrap();
        assert_eq!(said, "ok", "what the receiver answered, a 2xx too");
        browser.close().await;
    });
}
