//! Sending a test email from the form, the message page, and what a send key sees.

use serde_json::json;

use tidings_e2e::browser::available;

use super::dashboard::{DOMAIN, FROM, Setup, browser, id_in_url, sign_in, submit};
use crate::common::{block_on, create_key, verified_domain};

/// On a fresh server (no domain: the sandbox sending domain), the send form with no `from`
/// sends: the answer is the new message's page, which shows it `Delivered` (outbox) with a
/// `Delivered` step in its timeline, the HTML in a sandboxed preview, the text, the headers
/// and the `.eml` link; the list shows it; the API agrees, and the signed copy is in the
/// outbox. A second send from a verified domain's address shows its `from`.
#[test]
fn send_a_test_email_from_the_form_and_see_it_delivered() {
    if !available("send_a_test_email_from_the_form_and_see_it_delivered") {
        return;
    }
    block_on(async {
        let setup = Setup::fresh().await;
        let browser = browser().await;
        sign_in(&browser, &setup, &setup.key).await;

        browser.click_to_navigate("nav#nav a[href=\"/messages\"]").await;
        browser.goto(&setup.url("/messages/new")).await;
        browser.fill("form#send-test #to", "reader@example.com").await;
        browser.fill("form#send-test #subject", "Hello from the dashboard").await;
        browser.fill("form#send-test #text", "The text part.").await;
        browser.set_value("form#send-test #html", "<h2 id=\"greeting\">The HTML part</h2><p>Rendered.</p>").await;
        browser.fill("form#send-test #from", "").await;
        submit(&browser, "form#send-test").await;
        let id = id_in_url(&browser, "messages").await;

        let status = browser.reload_until("#status[data-status=Delivered]").await;
        assert!(!status.text().await.unwrap().trim().is_empty(), "the status is shown in words");
        browser.find("ol#timeline > li[data-event=Delivered]").await;
        let text = browser.find("#text-body").await.text().await.unwrap();
        assert!(text.contains("The text part."), "the text part is shown: {text}");
        let headers = browser.find("table#headers").await.text().await.unwrap();
        assert!(headers.contains("Hello from the dashboard"), "the Subject header is shown: {headers}");
        let eml = browser.find("a#eml").await.attr("href").await.unwrap().unwrap_or_default();
        assert!(eml.ends_with(&format!("/messages/{id}/eml")), "the .eml link: {eml}");
        assert!(browser.page_text().await.contains("reader@example.com"), "the recipient is shown");

        let preview = browser.find("iframe#preview").await;
        let sandbox = preview.attr("sandbox").await.unwrap().expect("the preview is sandboxed");
        assert!(!sandbox.contains("allow-scripts") && !sandbox.contains("allow-same-origin"), "sandbox={sandbox:?}");
        browser.enter_frame("iframe#preview").await;
        let heading = browser.wait_for("#greeting").await.text().await.unwrap();
        assert_eq!(heading, "The HTML part", "the preview shows the HTML");
        browser.leave_frame().await;

        let message = setup.wait_for_status(&id, "Delivered").await;
        assert_eq!(message["subject"], "Hello from the dashboard", "{message}");
        let from = message["fromAddress"].as_str().unwrap_or_default();
        assert!(from.ends_with("@sandbox.tidings.invalid"), "sent from the sandbox: {message}");
        let outbox: Vec<_> = std::fs::read_dir(setup.server.data_dir().path().join("outbox"))
            .expect("the outbox")
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "eml"))
            .collect();
        assert_eq!(outbox.len(), 1, "one .eml in the outbox");

        browser.goto(&setup.url("/messages")).await;
        browser.find(&format!("table#messages tr[data-id=\"{id}\"]")).await;

        verified_domain(&setup.server, &setup.dns, &setup.key, DOMAIN).await;
        browser.goto(&setup.url("/messages/new")).await;
        browser.fill("form#send-test #to", "reader@example.com").await;
        browser.fill("form#send-test #subject", "From our own domain").await;
        browser.fill("form#send-test #text", "Hello.").await;
        browser.fill("form#send-test #from", FROM).await;
        submit(&browser, "form#send-test").await;
        let id = id_in_url(&browser, "messages").await;
        browser.reload_until("#status[data-status=Delivered]").await;
        assert_eq!(setup.wait_for_status(&id, "Delivered").await["fromAddress"], FROM);
        browser.close().await;
    });
}

/// Signed in with a send key, the list shows the messages that key sent and not one another
/// key sent; that other message's page shows nothing of it; the key pages are refused.
#[test]
fn a_send_key_sees_only_its_own_messages() {
    if !available("a_send_key_sees_only_its_own_messages") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        let (_, send_key) = create_key(&setup.server, &setup.key, json!({"name": "app", "scope": "send"})).await;
        let theirs = setup.send_plain(&setup.key, "other@example.com", "Sent by the full key").await;
        let mine = setup.send_plain(&send_key, "mine@example.com", "Sent by the send key").await;
        setup.wait_for_status(&theirs, "Delivered").await;
        setup.wait_for_status(&mine, "Delivered").await;

        let browser = browser().await;
        sign_in(&browser, &setup, &send_key).await;
        browser.goto(&setup.url("/messages")).await;
        browser.find(&format!("table#messages tr[data-id=\"{mine}\"]")).await;
        let rows = browser.find_all("table#messages tr[data-id]").await;
        assert_eq!(rows.len(), 1, "one message listed:\n{}", browser.page_text().await);
        assert!(browser.try_find(&format!("tr[data-id=\"{theirs}\"]")).await.is_none(), "not the other key's");
        assert!(!browser.page_text().await.contains("Sent by the full key"), "nothing of it on the list");

        browser.goto(&setup.url(&format!("/messages/{theirs}"))).await;
        let status = browser.response_status().await;
        assert!(status == 404 || status == 403, "the other key's message: {status}");
        assert!(!browser.page_text().await.contains("Sent by the full key"), "nothing of it on its page");
        browser.goto(&setup.url(&format!("/messages/{theirs}/html"))).await;
        assert!(matches!(browser.response_status().await, 403 | 404), "nor its HTML");

        browser.goto(&setup.url(&format!("/messages/{mine}"))).await;
        browser.find("#status[data-status=Delivered]").await;

        browser.goto(&setup.url("/keys")).await;
        assert_eq!(browser.response_status().await, 403, "a send key may not manage keys");
        assert!(browser.try_find("form#create-key").await.is_none(), "no key form for a send key");
        browser.close().await;
    });
}
