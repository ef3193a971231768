//! Mail received, read in the browser (issue #35 item 6): a domain's receive-mail switch
//! turned on from its page, its Inbound MX published and verified, then a hostile message
//! handed to the server's SMTP listener. Its list row and page show the sender's markup as
//! text, its HTML shows in the sandboxed frame without running or loading anything, and its
//! HTML attachment is a download, never a document of the dashboard's origin.

use std::time::Duration;

use lettre::address::Envelope;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use reqwest::Method;
use tidings_e2e::browser::available;

use super::dashboard::{COOKIE, DOMAIN, Setup, browser, session_cookie, sign_in};
use crate::common::receiver::Receiver;
use crate::common::{assert_ok, block_on, publish};

/// What the hostile message asks the browser to fetch from the loopback listener.
const PATHS: [&str; 4] = ["/script", "/onerror", "/x.png", "/prefetch"];
/// How long after a document has loaded a request it made may still be on its way (a request
/// that must not come cannot be awaited).
const GRACE: Duration = Duration::from_millis(500);
const SCRIPT: &str = "<script>alert(1)</script>";

#[test]
fn received_mail_shows_its_markup_as_text_its_html_sandboxed_and_its_files_as_downloads() {
    if !available("received_mail_shows_its_markup_as_text_its_html_sandboxed_and_its_files_as_downloads") {
        return;
    }
    block_on(async {
        let setup = Setup::start_with(&[
            ("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:0"),
            ("TIDINGS_INBOUND_MX_HOST", "mx.tidings.test"),
        ])
        .await;
        let line = setup.server.wait_for_log(&["inbound SMTP listening on "]).expect("the listener's address");
        let smtp: std::net::SocketAddr = line.rsplit(' ').next().unwrap().trim().parse().expect("an address");
        let listener = Receiver::start().await;

        // Receiving switched on from the domain's page; its MX then published and verified.
        let browser = browser().await;
        sign_in(&browser, &setup, &setup.key).await;
        browser.goto(&setup.url(&format!("/domains/{}", setup.domain_id))).await;
        browser.find("#inbound-state[data-inbound=false]").await;
        browser.click("input#inbound-on").await;
        browser.click_to_navigate("form#inbound button[type=submit]").await;
        browser.find("#inbound-state[data-inbound=true][data-receiving=false]").await;
        let mx = browser.find("table#records tr[data-kind=Inbound]").await.text().await.unwrap();
        assert!(mx.contains("mx.tidings.test"), "the Inbound MX record is listed: {mx}");
        let (status, domain) = setup.server.get(&format!("/v1/domains/{}", setup.domain_id), &setup.key).await;
        assert_ok(status, &domain, 200, "the domain");
        publish(&setup.dns, &domain["data"], &["Inbound"]).await;
        browser.click_to_navigate("form.verify button[type=submit]").await;
        browser.find("#inbound-state[data-receiving=true]").await;

        let at = |path: &str| listener.url(path);
        let raw = format!(
            "From: \"{SCRIPT}\" <mallory@sender.example>\r\nTo: support@{DOMAIN}\r\nSubject: {SCRIPT} Invoice\r\n\
             Message-ID: <hostile-1@sender.example>\r\nX-Evil: {SCRIPT}\r\nMIME-Version: 1.0\r\n\
             Content-Type: multipart/mixed; boundary=\"mix\"\r\n\r\n--mix\r\n\
             Content-Type: multipart/alternative; boundary=\"alt\"\r\n\r\n--alt\r\n\
             Content-Type: text/plain\r\n\r\nHello, reader.\r\n--alt\r\nContent-Type: text/html\r\n\r\n\
             <html><head><link rel=\"prefetch\" href=\"{prefetch}\"></head><body><p id=\"hello\">Hello, reader.</p>\
             <script>parent.document.title = \"pwned\"; top.document.title = \"pwned\"; fetch(\"{script}\");</script>\
             <img src=\"x\" onerror=\"fetch('{onerror}')\"><img src=\"{image}\" alt=\"remote\"></body></html>\r\n\
             --alt--\r\n--mix\r\nContent-Type: text/html; name=\"{SCRIPT}.html\"\r\n\
             Content-Disposition: attachment; filename=\"{SCRIPT}.html\"\r\n\r\n{SCRIPT}<p>attached</p>\r\n--mix--\r\n",
            prefetch = at("/prefetch"),
            script = at("/script"),
            onerror = at("/onerror"),
            image = at("/x.png"),
        );
        let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(smtp.ip().to_string())
            .port(smtp.port())
            .timeout(Some(Duration::from_secs(30)))
            .build();
        let envelope = Envelope::new(
            Some("mallory@sender.example".parse().unwrap()),
            vec![format!("support@{DOMAIN}").parse().unwrap()],
        )
        .unwrap();
        transport.send_raw(&envelope, raw.as_bytes()).await.expect("the listener takes it (250)");

        // The list: the sender's markup is text, and nothing of it runs.
        browser.click_to_navigate("nav#nav a[href=\"/inbound\"]").await;
        let row = browser.find("table#inbound tr[data-id]").await.text().await.unwrap();
        assert!(row.contains(SCRIPT) && row.contains("Invoice"), "the subject and name as text: {row}");
        assert_eq!(browser.find_all("script").await.len(), 1, "only the dashboard's own script");

        browser.click_to_navigate("table#inbound tr[data-id] td[data-label=Subject] a").await;
        assert!(browser.path().await.starts_with("/inbound/"), "the message's page");
        let id = browser.path().await.trim_start_matches("/inbound/").to_owned();
        let subject = browser.find("#subject").await.text().await.unwrap();
        assert_eq!(subject, format!("{SCRIPT} Invoice"));
        assert_eq!(browser.find_all("script").await.len(), 1, "only the dashboard's own script");
        browser.find("table#auth tr[data-check=dkim]").await;
        let sandbox = browser.find("iframe#preview").await.attr("sandbox").await.unwrap();
        assert_eq!(sandbox.as_deref(), Some(""), "a sandbox that allows nothing");
        browser.enter_frame("iframe#preview").await;
        assert_eq!(browser.wait_for("#hello").await.text().await.unwrap(), "Hello, reader.", "the HTML is shown");
        browser.leave_frame().await;
        tokio::time::sleep(GRACE).await;
        let hit: Vec<&str> = PATHS.iter().copied().filter(|p| !listener.hits(p).is_empty()).collect();
        assert!(hit.is_empty(), "the page made the listener get {hit:?}");
        let now = browser.client().title().await.unwrap();
        assert_eq!(now, format!("{SCRIPT} Invoice · Tidings"), "the title is the message page's, as text");

        // The HTML attachment: its link, and a download whatever type it declared.
        let link = browser.find("table#attachments tr[data-index=\"0\"] a.download").await;
        assert_eq!(link.text().await.unwrap(), format!("{SCRIPT}.html"));
        let href = link.attr("href").await.unwrap().expect("a link");
        assert_eq!(href, format!("/inbound/{id}/attachments/0"));
        let cookie = session_cookie(&browser).await.expect("signed in");
        let file = setup
            .server
            .request(Method::GET, &href)
            .header("cookie", format!("{COOKIE}={}", cookie.value()))
            .send()
            .await
            .unwrap();
        assert_eq!(file.status(), 200);
        assert_eq!(file.headers()["content-type"], "application/octet-stream");
        assert_eq!(file.headers()["x-content-type-options"], "nosniff");
        let disposition = file.headers()["content-disposition"].to_str().unwrap().to_owned();
        assert!(disposition.starts_with("attachment; filename=\"_script_alert_1___script_.html\""), "{disposition}");
        assert!(file.text().await.unwrap().contains("<p>attached</p>"), "its bytes as sent");

        // The raw message, as text in the browser: shown, not rendered.
        browser.goto(&setup.url(&format!("/inbound/{id}/raw"))).await;
        let text = browser.page_text().await;
        assert!(text.contains("X-Evil: <script>alert(1)</script>"), "the raw message as text: {text}");
        assert!(browser.client().title().await.unwrap() != "pwned");
        tokio::time::sleep(GRACE).await;
        assert!(listener.hits("/script").is_empty() && listener.hits("/x.png").is_empty());
        browser.close().await;
    });
}
