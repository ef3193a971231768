//! The dashboard with awkward data, as issue #31 found it wanting: one very long address,
//! subject, URL, name or error on every list, at 1280 and 390 CSS pixels wide. No page
//! scrolls sideways, no table hides part of itself in its scroll box, every button and link
//! is on the screen (Revoke, Remove, Retry, a record's value and status), a list row stays
//! one line at 1280 px, and every text meets WCAG AA contrast computed from the styles the
//! browser rendered. Beside them: a webhook delivery's page, and what asks before it
//! destroys something.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tidings_e2e::browser::{Browser, available};

use super::dashboard::{FROM, Setup, sign_in};
use crate::common::receiver::{Receiver, Reply};
use crate::common::{assert_ok, create_key, server_with_dns, verified_domain};

/// The widths, with a height that suits each.
pub(super) const SIZES: [(u32, u32); 2] = [(1280, 800), (390, 844)];

/// An address as long as the rules allow a local part (64) on a long domain.
const LONG_TO: &str = "a.very.long.local.part.that.goes.on.and.on.for.sixty.four.chars@\
                       recipients-of-a-rather-long-subdomain.department.example.com";

/// What [`populate`] made, for the tests to visit.
struct World {
    /// The message with the long address and subject.
    message: String,
    /// Its subject.
    subject: String,
    /// The endpoint whose deliveries fail, and one failed delivery of it.
    failing_hook: String,
    failed_delivery: String,
    /// The endpoint whose deliveries succeed, and one delivered delivery of it.
    fine_hook: String,
    delivered: String,
    /// A domain still pending (long DKIM values), the verified one (a sender), a template.
    pending_domain: String,
    template: String,
}

/// A server that may call webhooks on loopback (the receiver), retrying a failed delivery
/// once after a second, with [`super::dashboard::DOMAIN`] verified.
async fn setup() -> Setup {
    let (server, dns) =
        server_with_dns(&[("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true"), ("TIDINGS_WEBHOOK_RETRY_SCHEDULE", "1s")]).await;
    let key = server.key().to_owned();
    let domain_id = verified_domain(&server, &dns, &key, super::dashboard::DOMAIN).await;
    Setup { server, dns, key, domain_id }
}

/// Long values everywhere: messages, a suppression, a template, a sender, a key, two
/// endpoints (one failing with a long answer, one fine) with a delivery each.
async fn populate(setup: &Setup, receiver: &Receiver) -> World {
    let key = &setup.key;
    let word = "Supercalifragilisticexpialidocious".repeat(4);
    let subject = format!("Your order {} has shipped and will arrive {word} soon", "with many parts ".repeat(8));
    let message = setup
        .send(key, json!({"from": FROM, "to": LONG_TO, "subject": subject, "text": "Hello.", "html": "<p>Hello.</p>"}))
        .await;
    setup.send_plain(key, "grace@example.com", "Your receipt #1042").await;
    setup.send_plain(key, "alan@example.com", &word).await;
    let suppressed = "another.long.local.part.that.goes.on.for.many.characters@bounces-of-a-rather-long-subdomain.department.example.com";
    let (status, body) = setup.server.post("/v1/suppressions", key, json!({"email": suppressed})).await;
    assert_ok(status, &body, 201, "a long suppression");
    let template = json!({"name": format!("receipt-{}", "long-name-".repeat(9)), "subject": subject,
                          "html": "<p>Thanks, {{name}}.</p>", "text": "Thanks, {{name}}."});
    let (status, body) = setup.server.post("/v1/templates", key, template).await;
    assert_ok(status, &body, 201, "a template");
    let template = body["data"]["id"].as_str().expect("template id").to_owned();
    let sender = json!({"username": "billing", "displayName": format!("Billing {}", "Department ".repeat(10))});
    let (status, body) = setup.server.post(&format!("/v1/domains/{}/senders", setup.domain_id), key, sender).await;
    assert_ok(status, &body, 201, "a sender with a long display name");
    let (status, body) = setup.server.post("/v1/domains", key, json!({"domain": "news.example"})).await;
    assert_ok(status, &body, 201, "a pending domain");
    let pending_domain = body["data"]["id"].as_str().expect("domain id").to_owned();
    create_key(&setup.server, key, json!({"name": format!("checkout-{}", "service-".repeat(10)), "scope": "send"}))
        .await;

    let failing_path = format!("/{}", "failing-endpoint-path-".repeat(6));
    let answer = format!("receiver exploded: {}", "stack frame ".repeat(40));
    receiver.script(&failing_path, std::iter::repeat_n(Reply::StatusBody(500, answer), 10));
    let failing_hook = endpoint(setup, &receiver.url(&failing_path)).await;
    let fine_hook = endpoint(setup, &receiver.url("/fine")).await;
    let failed_delivery = test_event(setup, &failing_hook, "Failed").await;
    let delivered = test_event(setup, &fine_hook, "Delivered").await;
    setup.wait_for_status(&message, "Delivered").await;
    World { message, subject, failing_hook, failed_delivery, fine_hook, delivered, pending_domain, template }
}

/// Creates an endpoint for every event at `url`; its id.
async fn endpoint(setup: &Setup, url: &str) -> String {
    let body = json!({"url": url, "eventTypes": ["Delivered", "Bounced", "Complained", "Test"]});
    let (status, created) = setup.server.post("/v1/webhooks", &setup.key, body).await;
    assert_ok(status, &created, 201, "an endpoint");
    created["data"]["id"].as_str().expect("endpoint id").to_owned()
}

/// Queues a test event to endpoint `hook` and waits until its delivery is `status`; its id.
async fn test_event(setup: &Setup, hook: &str, status: &str) -> String {
    let (code, body) = setup.server.post(&format!("/v1/webhooks/{hook}/test"), &setup.key, json!({})).await;
    assert!(code == 200 || code == 201 || code == 202, "a test event: {code} {body}");
    let id = body["data"]["id"].as_str().expect("delivery id").to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, list) = setup.server.get(&format!("/v1/webhooks/{hook}/deliveries"), &setup.key).await;
        let found = list["data"].as_array().and_then(|all| all.iter().find(|d| d["id"] == id.as_str()).cloned());
        if found.as_ref().is_some_and(|d| d["status"] == status) {
            return id;
        }
        assert!(Instant::now() < deadline, "delivery {id} is not {status}: {found:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What does not fit on the page now: sideways scroll of the page, a scroll box whose table
/// is wider than the box, a control or cell that leaves the viewport, a time on two lines.
pub(super) const FIT: &str = r#"
    const w = window.innerWidth, bad = [];
    if (document.documentElement.scrollWidth > w) bad.push('page scrolls sideways: ' + document.documentElement.scrollWidth);
    for (const box of document.querySelectorAll('.scroll')) {
        if (box.scrollWidth > box.clientWidth + 1) bad.push('scroll box ' + (box.firstElementChild && box.firstElementChild.id) + ': ' + box.scrollWidth + ' > ' + box.clientWidth);
    }
    const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ? '.' + e.className.trim().split(/\s+/).join('.') : '') + ' "' + (e.textContent || e.value || '').trim().slice(0, 30) + '"';
    for (const e of document.querySelectorAll('main button, main a, main input:not([type=hidden]), main select, main textarea, main td, main .badge')) {
        if (e.closest('[hidden], thead, .visually-hidden')) continue;
        const r = e.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        if (r.left < -1 || r.right > w + 1) bad.push('off-screen ' + name(e) + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
    }
    for (const t of document.querySelectorAll('main time')) {
        if (t.getClientRects().length > 1) bad.push('date on two lines: ' + t.textContent);
    }
    return bad;"#;

/// Every text's contrast against what is drawn under it, from the computed styles:
/// `[failures, how many were checked, the lowest ratio of a badge]`. Large text (24 px, or
/// 18.66 px bold) needs 3:1, other text 4.5:1; pseudo-element labels count too.
const CONTRAST: &str = r#"
    const parse = c => { const m = /rgba?\(([^)]+)\)/.exec(c || ''); if (!m) return null;
        const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
    const over = (top, under) => { const a = top[3]; return [0, 1, 2].map(i => top[i] * a + under[i] * (1 - a)).concat(1); };
    const background = e => { const layers = [];
        for (let n = e; n && n.nodeType === 1; n = n.parentElement) {
            const bg = parse(getComputedStyle(n).backgroundColor);
            if (bg && bg[3] > 0) { layers.push(bg); if (bg[3] >= 1) break; } }
        return layers.reverse().reduce((acc, l) => over(l, acc), [255, 255, 255, 1]); };
    const lum = c => { const v = c.slice(0, 3).map(x => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
        return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
    const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
    const failures = []; let checked = 0, badge = 99;
    const check = (e, style, text) => {
        const bg = background(e), fg = over(parse(e instanceof SVGElement ? style.fill : style.color), bg);
        const size = parseFloat(style.fontSize), bold = parseInt(style.fontWeight, 10) >= 700;
        const need = (size >= 24 || (size >= 18.66 && bold)) ? 3 : 4.5, got = ratio(fg, bg);
        checked++;
        if (e.classList && e.classList.contains('badge')) badge = Math.min(badge, got);
        if (got < need - 0.005) failures.push(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + '.' + [...(e.classList || [])].join('.')
            + ' "' + text.trim().slice(0, 30) + '" ' + got.toFixed(2) + ' < ' + need + ' (' + style.color + ' on rgb(' + bg.slice(0, 3).map(Math.round) + '))');
    };
    for (const e of document.querySelectorAll('body *')) {
        if (['SCRIPT', 'STYLE', 'OPTION', 'IFRAME', 'TITLE'].includes(e.tagName) || e.closest('[hidden], .visually-hidden')) continue;
        const r = e.getBoundingClientRect(); const style = getComputedStyle(e);
        if (r.width <= 1 || r.height <= 1 || style.visibility !== 'visible' || style.opacity === '0') continue;
        const own = [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('');
        if (own.trim()) check(e, style, own);
        else if (['INPUT', 'TEXTAREA', 'SELECT'].includes(e.tagName) && e.value && e.type !== 'checkbox') check(e, style, e.value);
        const before = getComputedStyle(e, '::before');
        if (before.content && before.content !== 'none' && before.content !== 'normal' && before.content.replace(/["']/g, '').trim()) check(e, before, before.content);
    }
    return [failures, checked, badge];"#;

/// Every list with long values fits at both widths, with every action on the screen; a
/// message row is one line at 1280 px, its cut subject whole in the title.
#[test]
fn long_values_keep_every_list_on_the_screen_with_its_actions_at_1280_and_390_px() {
    if !available("long_values_keep_every_list_on_the_screen_with_its_actions_at_1280_and_390_px") {
        return;
    }
    crate::common::block_on(async {
        let setup = setup().await;
        let receiver = Receiver::start().await;
        let world = populate(&setup, &receiver).await;
        let pages = pages(&setup, &world);
        let browser = Browser::start(SIZES[0].0, SIZES[0].1).await;
        sign_in(&browser, &setup, &setup.key).await;
        let mut misfits = Vec::new();
        for (width, height) in SIZES {
            browser.set_viewport(width, height).await;
            for path in &pages {
                browser.goto(&setup.url(path)).await;
                assert_eq!(browser.response_status().await, 200, "{path}:\n{}", browser.page_text().await);
                for bad in browser.execute(FIT, vec![]).await.as_array().expect("a list") {
                    misfits.push(format!("{path} at {width}: {}", bad.as_str().unwrap_or_default()));
                }
            }
            // The actions issue #31 found off-screen at 390 px are there, and on it.
            for (path, action) in [
                ("/suppressions".to_owned(), "table#suppressions form button"),
                ("/keys".to_owned(), "table#keys form.revoke button"),
                ("/keys".to_owned(), "table#keys form.rate input[type=number]"),
                ("/keys".to_owned(), "table#keys form.rate button"),
                (format!("/webhooks/{}", world.failing_hook), "table#deliveries form.retry button"),
                (format!("/domains/{}", world.pending_domain), "table#records .record-value"),
                (format!("/domains/{}", world.pending_domain), "table#records .record-status"),
                (format!("/domains/{}", setup.domain_id), "table#senders form button"),
            ] {
                browser.goto(&setup.url(&path)).await;
                let shown = browser.execute(ON_SCREEN, vec![json!(action)]).await;
                assert_eq!(shown, json!(true), "{action} on {path} at {width} px: {shown}");
            }
        }
        assert!(misfits.is_empty(), "what does not fit:\n{}", misfits.join("\n"));

        // At 1280 px a message row is one line, however long its values; the cut subject is
        // whole in its title.
        browser.set_viewport(SIZES[0].0, SIZES[0].1).await;
        browser.goto(&setup.url("/messages")).await;
        let rows = browser
            .execute("return [...document.querySelectorAll('table#messages tbody tr')].map(r => r.getBoundingClientRect().height);", vec![])
            .await;
        let heights: Vec<f64> = rows.as_array().expect("rows").iter().map(|h| h.as_f64().unwrap()).collect();
        assert!(heights.len() >= 3 && heights.iter().all(|h| *h <= 48.0), "one line a row: {heights:?}");
        let cut = browser
            .execute(
                "const a = document.querySelector('table#messages tr[data-id=\"' + arguments[0] + '\"] a.clip');
                 return [a.title, a.scrollWidth > a.clientWidth, getComputedStyle(a).textOverflow];",
                vec![json!(world.message)],
            )
            .await;
        assert_eq!(
            cut,
            json!([world.subject, true, "ellipsis"]),
            "the subject is cut with an ellipsis, whole in its title"
        );

        // A template's preview sits beside its editor at 1280 px, under it at 390 px.
        for ((width, height), beside) in SIZES.into_iter().zip([true, false]) {
            browser.set_viewport(width, height).await;
            browser.goto(&setup.url(&format!("/templates/{}", world.template))).await;
            let sides = browser
                .execute(
                    "const e = document.getElementById('editor').getBoundingClientRect(),
                           p = document.getElementById('preview-panel').getBoundingClientRect();
                     return [p.left >= e.right - 1, Math.abs(p.top - e.top) < 2];",
                    vec![],
                )
                .await;
            assert_eq!(sides, json!([beside, beside]), "the preview beside the editor at {width} px: {sides}");
        }
        browser.close().await;
    });
}

/// Posts the form matching the selector as a browser without the script would:
/// `form.submit()` skips the submit listeners, so nothing asks and no `confirm=yes` is added.
const SUBMIT_UNASKED: &str = "document.querySelector(arguments[0]).submit();";

/// Whether every element matching the selector (at least one) is inside the viewport's
/// width and drawn.
const ON_SCREEN: &str = r#"
    const all = [...document.querySelectorAll(arguments[0])];
    if (all.length === 0) return 'none on the page';
    const off = all.map(e => e.getBoundingClientRect()).filter(r => r.width === 0 || r.left < -1 || r.right > window.innerWidth + 1);
    return off.length === 0 ? true : off.length + ' of ' + all.length + ' off-screen';"#;

/// The pages the tests visit.
fn pages(setup: &Setup, world: &World) -> Vec<String> {
    vec![
        "/overview".to_owned(),
        "/messages".to_owned(),
        format!("/messages/{}", world.message),
        "/messages/new".to_owned(),
        "/domains".to_owned(),
        format!("/domains/{}", world.pending_domain),
        format!("/domains/{}", setup.domain_id),
        "/templates".to_owned(),
        format!("/templates/{}", world.template),
        "/suppressions".to_owned(),
        "/webhooks".to_owned(),
        format!("/webhooks/{}", world.failing_hook),
        format!("/webhooks/{}/deliveries/{}", world.failing_hook, world.failed_delivery),
        format!("/webhooks/{}", world.fine_hook),
        "/keys".to_owned(),
    ]
}

/// Every text on every page, the sign-in page, a form with mistakes, a confirmation page and
/// the 404 page included, meets AA contrast at both widths (the labels of stacked rows at
/// 390 px too), computed from the rendered styles; the green badge among them.
#[test]
fn every_text_meets_aa_contrast_computed_from_the_rendered_styles() {
    if !available("every_text_meets_aa_contrast_computed_from_the_rendered_styles") {
        return;
    }
    crate::common::block_on(async {
        let setup = setup().await;
        let receiver = Receiver::start().await;
        let world = populate(&setup, &receiver).await;
        let browser = Browser::start(SIZES[0].0, SIZES[0].1).await;
        let mut failures = Vec::new();
        let (mut checked, mut badge) = (0, f64::MAX);
        for (width, height) in SIZES {
            browser.set_viewport(width, height).await;
            browser.client().delete_all_cookies().await.expect("sign out");
            browser.goto(&setup.url("/")).await;
            contrast(&browser, "/", width, &mut failures, &mut checked, &mut badge).await;
            sign_in(&browser, &setup, &setup.key).await;
            for path in pages(&setup, &world).iter().map(String::as_str).chain(["/no/such/page"]) {
                browser.goto(&setup.url(path)).await;
                contrast(&browser, path, width, &mut failures, &mut checked, &mut badge).await;
            }
            // A form with mistakes (the field messages in red), and a confirmation page.
            browser.goto(&setup.url("/messages/new")).await;
            browser.fill("form#send-test input#to", "not an address").await;
            browser.fill("form#send-test input#subject", "s").await;
            super::dashboard::submit(&browser, "form#send-test").await;
            browser.find("#to[aria-invalid=true]").await;
            contrast(&browser, "the send form with mistakes", width, &mut failures, &mut checked, &mut badge).await;
            browser.goto(&setup.url("/suppressions")).await;
            browser.navigating(browser.execute(SUBMIT_UNASKED, vec![json!("table#suppressions form")])).await;
            browser.find("form#confirm-form").await;
            contrast(&browser, "a confirmation page", width, &mut failures, &mut checked, &mut badge).await;
        }
        assert!(failures.is_empty(), "text below AA contrast:\n{}", failures.join("\n"));
        assert!(checked > 500, "checked {checked} texts");
        assert!(badge >= 4.5, "the badges: {badge:.2}");
        eprintln!("contrast: {checked} texts checked, the lowest badge {badge:.2}:1");
        browser.close().await;
    });
}

pub(super) async fn contrast(
    browser: &Browser,
    page: &str,
    width: u32,
    failures: &mut Vec<String>,
    checked: &mut u64,
    badge: &mut f64,
) {
    let result = browser.execute(CONTRAST, vec![]).await;
    for failure in result[0].as_array().expect("failures") {
        failures.push(format!("{page} at {width}: {}", failure.as_str().unwrap_or_default()));
    }
    *checked += result[1].as_u64().unwrap_or(0);
    *badge = badge.min(result[2].as_f64().unwrap_or(99.0));
}

/// A failed delivery's page shows the payload as sent, the receiver's answer and a link to
/// the message's page (for a message event) and offers Retry; a delivered one offers none,
/// on its page or in the log.
#[test]
fn a_webhook_delivery_page_shows_the_payload_and_the_answer_and_retry_only_where_it_failed() {
    if !available("a_webhook_delivery_page_shows_the_payload_and_the_answer_and_retry_only_where_it_failed") {
        return;
    }
    crate::common::block_on(async {
        let setup = setup().await;
        let receiver = Receiver::start().await;
        let world = populate(&setup, &receiver).await;
        let browser = Browser::start(SIZES[0].0, SIZES[0].1).await;
        sign_in(&browser, &setup, &setup.key).await;

        browser.goto(&setup.url(&format!("/webhooks/{}", world.failing_hook))).await;
        let row = format!("table#deliveries tr[data-id=\"{}\"]", world.failed_delivery);
        browser.find(&format!("{row} form.retry button")).await;
        browser.click_to_navigate(&format!("{row} a")).await;
        let payload = browser.find("pre#delivery-payload").await.text().await.unwrap();
        let payload: Value = serde_json::from_str(&payload).expect("the payload is JSON");
        assert_eq!(payload["type"], "Test", "{payload}");
        let error = browser.find("pre#delivery-error").await.text().await.unwrap();
        assert!(error.contains("receiver exploded"), "the receiver's answer: {error}");
        assert!(browser.find("#delivery-response").await.text().await.unwrap().contains("500"));
        browser.find("form.retry button").await;

        browser.goto(&setup.url(&format!("/webhooks/{}", world.fine_hook))).await;
        let row = format!("table#deliveries tr[data-id=\"{}\"]", world.delivered);
        browser.find(&row).await;
        assert!(browser.try_find(&format!("{row} form.retry")).await.is_none(), "no Retry on a delivered row");

        // A message event links its message.
        let hits = receiver.hits("/fine").len();
        setup.send_plain(&setup.key, "linked@example.com", "Linked").await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while receiver.hits("/fine").len() <= hits {
            assert!(Instant::now() < deadline, "the Delivered event reaches the endpoint");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        browser.goto(&setup.url(&format!("/webhooks/{}", world.fine_hook))).await;
        let first = "table#deliveries tbody tr:first-child a";
        browser.click_to_navigate(first).await;
        browser.click_to_navigate("a#delivery-message").await;
        assert!(browser.path().await.starts_with("/messages/"), "the delivery links its message");
        assert_eq!(browser.find("#subject").await.text().await.unwrap(), "Linked");
        browser.close().await;
    });
}

/// Remove asks before it removes (the script's dialog, then the post carries the answer);
/// an unknown path is a page, not JSON; the icon is served.
#[test]
fn removing_asks_first_an_unknown_path_is_a_page_and_the_icon_is_served() {
    if !available("removing_asks_first_an_unknown_path_is_a_page_and_the_icon_is_served") {
        return;
    }
    crate::common::block_on(async {
        let setup = Setup::start().await;
        let (status, body) =
            setup.server.post("/v1/suppressions", &setup.key, json!({"email": "gone@example.com"})).await;
        assert_ok(status, &body, 201, "a suppression");
        let browser = Browser::start(SIZES[0].0, SIZES[0].1).await;
        sign_in(&browser, &setup, &setup.key).await;
        // Without the script, the server asks on a page of its own, and nothing is removed yet.
        browser.goto(&setup.url("/suppressions")).await;
        let row = "table#suppressions tr[data-email=\"gone@example.com\"]";
        browser.navigating(browser.execute(SUBMIT_UNASKED, vec![json!(format!("{row} form"))])).await;
        let question = browser.find("#confirm-question").await.text().await.unwrap();
        assert!(question.contains("gone@example.com"), "{question}");
        let (status, _) = setup.server.get("/v1/suppressions/gone@example.com", &setup.key).await;
        assert_eq!(status, 200, "not removed before the answer");
        browser.click_to_navigate("a.back").await;
        // With it, the browser asks.
        browser.click_and_confirm("table#suppressions tr[data-email=\"gone@example.com\"] form button").await;
        assert_eq!(browser.path().await, "/suppressions");
        assert!(browser.try_find("table#suppressions tr[data-email=\"gone@example.com\"]").await.is_none());
        let (status, _) = setup.server.get("/v1/suppressions/gone@example.com", &setup.key).await;
        assert_eq!(status, 404, "removed");

        browser.goto(&setup.url("/no/such/page")).await;
        assert_eq!(browser.response_status().await, 404);
        assert_eq!(browser.find("main#content h1").await.text().await.unwrap(), "Page not found");

        let icon = browser
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 fetch('/favicon.ico').then(r => r.arrayBuffer().then(b => done([r.status, r.headers.get('content-type'), b.byteLength])));",
                vec![],
            )
            .await;
        assert_eq!(icon[0], 200, "{icon}");
        assert_eq!(icon[1], "image/x-icon", "{icon}");
        assert!(icon[2].as_u64().is_some_and(|n| n > 0 && n < 2048), "small: {icon}");
        let linked = browser.execute("return document.querySelector('link[rel=icon]').href;", vec![]).await;
        assert!(linked.as_str().is_some_and(|href| href.ends_with("/assets/favicon.svg")), "{linked}");
        browser.close().await;
    });
}
