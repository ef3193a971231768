//! Domains and their records; API keys created and revoked.

use serde_json::Value;
use tidings_e2e::browser::{Browser, available};

use super::dashboard::{DESKTOP, Setup, browser, choose, id_in_url, on_sign_in_page, sign_in, submit};
use crate::common::{block_on, publish};

/// A domain added in the dashboard shows the records the API gives for it, each with its
/// name, value, status and a copy button carrying the value; once they are published,
/// "verify now" shows them verified.
#[test]
fn add_a_domain_and_read_its_records() {
    if !available("add_a_domain_and_read_its_records") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        let browser = browser().await;
        sign_in(&browser, &setup, &setup.key).await;

        browser.click_to_navigate("nav#nav a[href=\"/domains\"]").await;
        let form = "form[action=\"/domains\"]";
        browser.fill(&format!("{form} input[name=name]"), "news.example").await;
        submit(&browser, form).await;
        let id = id_in_url(&browser, "domains").await;
        let (status, body) = setup.server.get(&format!("/v1/domains/{id}"), &setup.key).await;
        assert_eq!(status, 200, "the API knows the domain the page is about: {body}");
        let domain = body["data"].clone();
        assert_eq!(domain["domain"], "news.example", "{domain}");

        let records = browser.find_all("table#records tr[data-kind]").await;
        assert_eq!(records.len(), 4, "four records:\n{}", browser.page_text().await);
        for record in domain["dnsRecords"].as_array().expect("dnsRecords") {
            let kind = record["purpose"].as_str().unwrap().split(' ').next().unwrap().to_owned();
            let row = format!("table#records tr[data-kind=\"{kind}\"]");
            let cell = async |class: &str| browser.find(&format!("{row} {class}")).await.text().await.unwrap();
            assert_eq!(cell(".record-name").await.trim(), record["name"].as_str().unwrap(), "{kind} name");
            let value = cell(".record-value").await;
            assert_eq!(squeeze(&value), squeeze(record["value"].as_str().unwrap()), "{kind} value");
            assert!(cell(".record-status").await.contains("Pending"), "{kind} is pending before any check");
            let mut copies = Vec::new();
            for button in browser.find_all(&format!("{row} button.copy[data-copy]")).await {
                copies.push(button.attr("data-copy").await.unwrap().unwrap_or_default());
            }
            let value = record["value"].as_str().unwrap().to_owned();
            assert!(copies.contains(&value), "{kind}: a copy button copies the value: {copies:?}");
        }

        publish(&setup.dns, &domain, &["SPF", "DKIM", "DMARC"]).await;
        submit(&browser, &format!("form[action=\"/domains/{id}/verify\"]")).await;
        browser.goto(&setup.url(&format!("/domains/{id}"))).await;
        for kind in ["SPF", "DKIM", "DKIM2", "DMARC"] {
            let status = browser.find(&format!("table#records tr[data-kind=\"{kind}\"] .record-status")).await;
            let status = status.text().await.unwrap();
            assert!(status.contains("Verified"), "{kind} after verify now: {status}");
        }
        let (_, body) = setup.server.get(&format!("/v1/domains/{id}"), &setup.key).await;
        assert_eq!(body["data"]["overallStatus"], "Verified", "{body}");
        browser.close().await;
    });
}

/// Long values wrap on the page; the text compared is the value without whitespace.
fn squeeze(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// A key created on the keys page is shown once in plaintext and works; another browser
/// signs in with it; revoking it on the keys page ends that browser's session at its next
/// page load, and the API refuses the key.
#[test]
fn create_a_key_then_revoke_it_and_its_session_ends() {
    if !available("create_a_key_then_revoke_it_and_its_session_ends") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        let admin = browser().await;
        sign_in(&admin, &setup, &setup.key).await;

        admin.click_to_navigate("nav#nav a[href=\"/keys\"]").await;
        admin.fill("form#create-key input[name=name]", "second").await;
        choose(&admin, "form#create-key", "scope", "full").await;
        submit(&admin, "form#create-key").await;
        let plaintext = admin.find("#new-key").await.text().await.unwrap().trim().to_owned();
        assert!(plaintext.starts_with("tid_") && plaintext.len() > 20, "#new-key holds the plaintext: {plaintext:?}");
        let (status, body) = setup.server.get("/v1/domains", &plaintext).await;
        assert_eq!(status, 200, "the new key works on the API: {body}");
        let key_id = key_id_named(&setup, "second").await;

        admin.goto(&setup.url("/keys")).await;
        assert!(admin.try_find("#new-key").await.is_none(), "the plaintext is shown once");
        assert!(!admin.client().source().await.unwrap().contains(&plaintext), "and never again");
        admin.find(&format!("table#keys tr[data-id=\"{key_id}\"]")).await;

        // Its rate, changed in its row, holds on the API from the next request.
        let rate = format!("table#keys tr[data-id=\"{key_id}\"] form.rate");
        admin.fill(&format!("{rate} input[name=rate_limit_per_sec]"), "300").await;
        submit(&admin, &rate).await;
        assert_eq!(admin.path().await, "/keys", "back on the keys page");
        let (status, body) = setup.server.get(&format!("/v1/keys/{key_id}"), &setup.key).await;
        assert_eq!((status, &body["data"]["rateLimitPerSec"]), (200, &serde_json::json!(300)), "{body}");

        let other = Browser::start(DESKTOP.0, DESKTOP.1).await;
        sign_in(&other, &setup, &plaintext).await;

        // The form asks first (dashboard.js, `data-confirm`).
        admin.click_and_confirm(&format!("table#keys tr[data-id=\"{key_id}\"] form.revoke button")).await;
        let (status, _) = setup.server.get("/v1/domains", &plaintext).await;
        assert_eq!(status, 401, "the revoked key is refused by the API");

        other.goto(&setup.url("/overview")).await;
        assert!(on_sign_in_page(&other).await, "the revoked key's session ended:\n{}", other.page_text().await);
        other.goto(&setup.url("/")).await;
        assert!(on_sign_in_page(&other).await, "and stays ended");

        admin.goto(&setup.url("/keys")).await;
        assert!(!on_sign_in_page(&admin).await, "the revoking session goes on");
        other.close().await;
        admin.close().await;
    });
}

/// The id of the live key named `name`, from the API.
async fn key_id_named(setup: &Setup, name: &str) -> String {
    let (_, body) = setup.server.get("/v1/keys", &setup.key).await;
    let keys = body["data"].as_array().expect("keys");
    let key = keys.iter().find(|k| k["name"] == name).unwrap_or_else(|| panic!("no key named {name}: {body}"));
    key["id"].as_str().map(str::to_owned).unwrap_or_else(|| panic!("{}", Value::clone(key)))
}
