//! Looking at a hostile message: its scripts do not run, its remote images and its open
//! pixel are not loaded.

use std::time::Duration;

use mail_parser::MessageParser;
use serde_json::json;

use tidings_e2e::browser::available;

use super::dashboard::{FROM, Setup, browser, sign_in};
use crate::common::receiver::Receiver;
use crate::common::{assert_ok, block_on};

/// What the hostile message asks the browser to fetch from the loopback listener.
const PATHS: [&str; 8] =
    ["/script", "/onerror", "/x.png", "/bg.png", "/style.css", "/refresh", "/prefetch", "/preload.png"];
/// How long after a document has loaded (its images, stylesheets and scripts fetched or
/// refused) a request it made may still be on its way to the listener. A request that must
/// not come cannot be awaited: the test gives it this long.
const GRACE: Duration = Duration::from_millis(500);

/// A message whose HTML has scripts (one changing the dashboard's title, one fetching from a
/// listener on loopback), a remote image, a CSS background, a stylesheet, a prefetch and an
/// image preload link and a meta refresh to that listener, sent from a domain with open tracking on (the delivered mail carries the
/// pixel): its page shows the HTML yet the listener gets no request, the title is untouched
/// and no `Opened` event is recorded; the HTML document opened on its own does not run the
/// script either. Asking for images (`?images=1`) does load the image, which shows the
/// listener would have seen a load, and still not the prefetch or the preload.
#[test]
fn a_message_with_a_script_a_remote_image_and_a_pixel_runs_and_loads_nothing() {
    if !available("a_message_with_a_script_a_remote_image_and_a_pixel_runs_and_loads_nothing") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        let listener = Receiver::start().await;
        let (status, body) = setup
            .server
            .patch(&format!("/v1/domains/{}", setup.domain_id), &setup.key, json!({"openTracking": true}))
            .await;
        assert_ok(status, &body, 200, "open tracking on");

        let at = |path: &str| listener.url(path);
        let html = format!(
            r#"<html><head><meta http-equiv="refresh" content="0;url={refresh}">
            <link rel="stylesheet" href="{css}"><link rel="prefetch" href="{prefetch}">
            <link rel="preload" as="image" href="{preload}"></head><body>
            <p id="hello">Hello, reader.</p>
            <script>parent.document.title = "pwned"; top.document.title = "pwned"; document.title = "pwned";
            fetch("{script}"); new Image().src = "{script}";</script>
            <img src="x" onerror="fetch('{onerror}')">
            <img src="{image}" alt="remote">
            <div style="background-image: url('{bg}'); height: 10px"></div>
            </body></html>"#,
            refresh = at("/refresh"),
            css = at("/style.css"),
            script = at("/script"),
            onerror = at("/onerror"),
            image = at("/x.png"),
            bg = at("/bg.png"),
            prefetch = at("/prefetch"),
            preload = at("/preload.png"),
        );
        let id = setup
            .send(&setup.key, json!({"from": FROM, "to": "reader@example.com", "subject": "Hostile", "html": html}))
            .await;
        let message = setup.wait_for_status(&id, "Delivered").await;
        assert_eq!(message["tracking"]["opens"], true, "the message is open-tracked: {message}");
        let outbox = setup.server.data_dir().path().join("outbox");
        let eml = std::fs::read_dir(&outbox).expect("the outbox").flatten().next().expect("the .eml").path();
        let eml = std::fs::read(eml).expect("the .eml");
        let parsed = MessageParser::default().parse(&eml).expect("MIME");
        let delivered = parsed.body_html(0).expect("an HTML part");
        assert!(delivered.contains("/t/o/"), "the delivered mail has the open pixel: {delivered}");

        let browser = browser().await;
        sign_in(&browser, &setup, &setup.key).await;
        let title = browser.client().title().await.unwrap();
        browser.goto(&setup.url(&format!("/messages/{id}"))).await;
        let title_on_page = browser.client().title().await.unwrap();
        let sandbox = browser.find("iframe#preview").await.attr("sandbox").await.unwrap();
        let sandbox = sandbox.expect("the preview iframe is sandboxed");
        assert!(!sandbox.contains("allow-scripts") && !sandbox.contains("allow-same-origin"), "sandbox={sandbox:?}");
        browser.enter_frame("iframe#preview").await;
        assert_eq!(browser.wait_for("#hello").await.text().await.unwrap(), "Hello, reader.", "the HTML is shown");
        browser.leave_frame().await;
        tokio::time::sleep(GRACE).await;
        assert_no_requests(&listener, "the message page");
        let now = browser.client().title().await.unwrap();
        assert!(
            now == title_on_page && !now.contains("pwned"),
            "the title is the dashboard's: {now:?} (was {title:?})"
        );

        browser.goto(&setup.url(&format!("/messages/{id}/html"))).await;
        browser.find("#hello").await;
        tokio::time::sleep(GRACE).await;
        assert_no_requests(&listener, "the HTML document on its own");
        let now = browser.client().title().await.unwrap();
        assert!(!now.contains("pwned"), "no script ran in the HTML document: {now:?}");
        assert!(!setup.event_types(&id).await.iter().any(|t| t == "Opened"), "no open recorded");

        // Images on request: the listener sees the image, and still no script or pixel.
        browser.goto(&setup.url(&format!("/messages/{id}/html?images=1"))).await;
        listener.wait_for("/x.png", 1, Duration::from_secs(10)).await;
        tokio::time::sleep(GRACE).await;
        // Only images: a prefetch, or a preload that would pass as an image, is not made.
        for path in ["/script", "/onerror", "/refresh", "/prefetch", "/preload.png"] {
            assert!(listener.hits(path).is_empty(), "with images on, {path} still got nothing");
        }
        assert!(!setup.event_types(&id).await.iter().any(|t| t == "Opened"), "loading images records no open");
        browser.close().await;
    });
}

#[track_caller]
fn assert_no_requests(listener: &Receiver, when: &str) {
    let hit: Vec<(&str, usize)> = PATHS.iter().map(|p| (*p, listener.hits(p).len())).filter(|(_, n)| *n > 0).collect();
    assert!(hit.is_empty(), "{when}: the listener got requests: {hit:?}");
}
