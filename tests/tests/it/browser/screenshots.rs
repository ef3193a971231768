//! The main pages at a desktop and a phone width: each renders (200, `main#content` with an
//! `<h1>`, a CSRF field in every form that posts) and fits the width without scrolling
//! sideways; with `TIDINGS_SCREENSHOTS=<dir>`
//! (relative to the workspace root) each is saved as `<dir>/<page>-<width>.png`: the
//! viewport, as the browser drew it. The committed ones in docs/screenshots/ were made with
//! `TIDINGS_SCREENSHOTS=docs/screenshots` and then `pngquant --quality=80-100 --strip`
//! (a third of the size, no visible change).

use std::path::{Path, PathBuf};

use serde_json::json;
use tidings_e2e::browser::{Browser, available};

use super::dashboard::{FROM, Setup, sign_in};
use crate::common::{assert_ok, block_on, create_key};

/// The widths, with a height that suits each.
const SIZES: [(u32, u32); 2] = [(1280, 800), (390, 844)];

/// A workspace with something on every page: messages (one with HTML), a second domain
/// still pending, a template, a webhook endpoint, a send key, a suppression.
async fn populate(setup: &Setup) -> (String, String) {
    let key = &setup.key;
    let html = "<h1 style=\"font-family: sans-serif\">Welcome to Acme</h1>\
                <p style=\"font-family: sans-serif\">Your account is ready. Confirm your address to start.</p>\
                <p><a href=\"https://acme.example/confirm\">Confirm my address</a></p>";
    let welcome = setup
        .send(
            key,
            json!({"from": format!("Acme <{FROM}>"), "to": "ada@example.com", "subject": "Welcome to Acme",
                   "html": html, "text": "Your account is ready.", "tags": [{"name": "flow", "value": "welcome"}]}),
        )
        .await;
    for (to, subject) in [
        ("grace@example.com", "Your receipt #1042"),
        ("alan@example.com", "Reset your password"),
        ("edsger@example.com", "Your login link"),
    ] {
        setup.send_plain(key, to, subject).await;
    }
    let (status, body) = setup.server.post("/v1/suppressions", key, json!({"email": "bounced@example.com"})).await;
    assert_ok(status, &body, 201, "a suppression");
    setup.wait_for_status(&welcome, "Delivered").await;

    let (status, body) = setup.server.post("/v1/domains", key, json!({"domain": "news.example"})).await;
    assert_ok(status, &body, 201, "a second domain");
    let template = json!({"name": "receipt", "subject": "Receipt {{order}}",
                          "html": "<p>Thanks, {{name}}: order {{order}}.</p>", "text": "Thanks, {{name}}."});
    let (status, body) = setup.server.post("/v1/templates", key, template).await;
    assert_ok(status, &body, 201, "a template");
    let hook =
        json!({"url": "https://hooks.acme.example/tidings", "eventTypes": ["Delivered", "Bounced", "Complained"]});
    let (status, body) = setup.server.post("/v1/webhooks", key, hook).await;
    assert_ok(status, &body, 201, "a webhook endpoint");
    create_key(&setup.server, key, json!({"name": "checkout-service", "scope": "send"})).await;
    (welcome, setup.domain_id.clone())
}

/// Renders every main page at both widths, each with its heading, the width of the
/// viewport and a CSRF field in every form that posts; saves screenshots when asked.
#[test]
fn main_pages_render_at_1280_and_390_px() {
    if !available("main_pages_render_at_1280_and_390_px") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        let (message, domain) = populate(&setup).await;
        // Relative to the workspace root (tests run in tests/).
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
        let dir = std::env::var_os("TIDINGS_SCREENSHOTS").map(|dir| root.join(dir));
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir).expect("the screenshot directory");
        }
        let pages = [
            ("overview", "/overview".to_owned()),
            ("messages", "/messages".to_owned()),
            ("message", format!("/messages/{message}")),
            ("domains", "/domains".to_owned()),
            ("domain", format!("/domains/{domain}")),
            ("templates", "/templates".to_owned()),
            ("webhooks", "/webhooks".to_owned()),
            ("keys", "/keys".to_owned()),
        ];

        let browser = Browser::start(SIZES[0].0, SIZES[0].1).await;
        let mut too_wide = Vec::new();
        for (width, height) in SIZES {
            browser.set_viewport(width, height).await;
            browser.client().delete_all_cookies().await.expect("sign out");
            browser.goto(&setup.url("/")).await;
            check(&browser, "sign-in", width, &dir, &mut too_wide).await;
            sign_in(&browser, &setup, &setup.key).await;
            for (name, path) in &pages {
                browser.goto(&setup.url(path)).await;
                assert_eq!(browser.response_status().await, 200, "{path}:\n{}", browser.page_text().await);
                if *name == "message" {
                    browser.enter_frame("iframe#preview").await;
                    browser.wait_for("h1").await;
                    browser.leave_frame().await;
                }
                check(&browser, name, width, &dir, &mut too_wide).await;
            }
        }
        assert!(too_wide.is_empty(), "pages wider than the viewport (scroll sideways): {too_wide:?}");
        browser.close().await;
    });
}

/// The page has its `<h1>` in `main#content`; notes it in `too_wide` if it is wider than the
/// viewport; saves its screenshot into `dir`.
async fn check(browser: &Browser, name: &str, width: u32, dir: &Option<PathBuf>, too_wide: &mut Vec<String>) {
    let heading = browser.find("main#content h1").await.text().await.unwrap();
    assert!(!heading.trim().is_empty(), "{name}: the h1 names the page");
    let script = "return [...document.querySelectorAll('form[method=post]:not(#sign-in)')]
        .filter(f => !f.querySelector('input[type=hidden][name=csrf]')).map(f => f.getAttribute('action'));";
    let unguarded = browser.execute(script, vec![]).await;
    assert_eq!(unguarded, serde_json::json!([]), "{name}: forms that post without a csrf field");
    let scroll = browser.execute("return document.documentElement.scrollWidth;", vec![]).await;
    if scroll.as_u64().is_some_and(|w| w > u64::from(width)) {
        too_wide.push(format!("{name} at {width}: {scroll} px"));
    }
    if let Some(dir) = dir {
        // Past the caret and any hover state: the page as it loads.
        browser
            .execute("if (document.activeElement) document.activeElement.blur(); window.scrollTo(0, 0);", vec![])
            .await;
        let png = browser.screenshot().await;
        let path = dir.join(format!("{name}-{width}.png"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}
