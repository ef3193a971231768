//! Keyboard navigation and form labels.

use tidings_e2e::browser::fantoccini::key::Key;
use tidings_e2e::browser::{Browser, available};

use super::dashboard::{NAV, Setup, browser, sign_in};
use crate::common::block_on;

/// How many Tab presses a walk through a page may take.
const MAX_TABS: usize = 40;

/// From a freshly loaded page, Tab by Tab: what has the focus (first what the page focused
/// itself, if anything), in order, until `done` has seen what it needs or [`MAX_TABS`]
/// presses.
async fn tab_through(browser: &Browser, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    let first = browser.focused().await;
    if first != "body" {
        seen.push(first);
    }
    for _ in 0..MAX_TABS {
        if done(&seen) {
            break;
        }
        browser.press(Key::Tab).await;
        seen.push(browser.focused().await);
    }
    seen
}

/// Whether `wanted` occur in `seen` in this order (others may come between).
fn in_order(seen: &[String], wanted: &[String]) -> bool {
    let mut rest = seen.iter();
    wanted.iter().all(|w| rest.any(|s| s == w))
}

/// With the keyboard alone: Tab reaches the key field and then the submit button of the
/// sign-in form, typing the key and pressing Enter on the button signs in, and Tab then
/// reaches every link of the navigation in order.
#[test]
fn keyboard_reaches_the_sign_in_field_the_submit_button_and_the_nav_links_in_order() {
    if !available("keyboard_reaches_the_sign_in_field_the_submit_button_and_the_nav_links_in_order") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        let browser = browser().await;
        browser.goto(&setup.url("/")).await;

        let button = browser.find("form#sign-in button[type=submit]").await;
        let script = "arguments[0].setAttribute('data-tab-mark', 'submit');";
        browser.execute(script, vec![serde_json::to_value(&button).unwrap()]).await;
        let focused_is_submit = "return document.activeElement && \
                                 document.activeElement.getAttribute('data-tab-mark') === 'submit';";

        let wanted = ["input#key".to_owned()];
        let seen = tab_through(&browser, |seen| in_order(seen, &wanted)).await;
        assert!(in_order(&seen, &wanted), "Tab reaches the key field; focus went {seen:?}");
        let active = browser.client().active_element().await.expect("the focused element");
        active.send_keys(&setup.key).await.expect("type the key");

        let mut reached = false;
        for _ in 0..5 {
            browser.press(Key::Tab).await;
            if browser.execute(focused_is_submit, vec![]).await == true {
                reached = true;
                break;
            }
        }
        assert!(reached, "Tab goes on from the key field to the submit button");

        browser.navigating(browser.press(Key::Enter)).await;
        assert_eq!(browser.path().await, "/overview", "Enter on the button signs in:\n{}", browser.page_text().await);

        let wanted: Vec<String> = NAV.iter().map(|href| format!("a[href=\"{href}\"]")).collect();
        let seen = tab_through(&browser, |seen| in_order(seen, &wanted)).await;
        assert!(in_order(&seen, &wanted), "Tab reaches the nav links in order; focus went {seen:?}");
        // Enter on a focused link follows it.
        browser.navigating(browser.press(Key::Enter)).await;
        assert_eq!(browser.path().await, "/keys", "Enter on the focused /keys link opens it");
        browser.close().await;
    });
}

/// Every field of the send form and of the sign-in form has an id and a non-empty
/// `<label for=…>`; the API's send fields are all there.
#[test]
fn every_field_of_the_send_form_has_a_label() {
    if !available("every_field_of_the_send_form_has_a_label") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        let browser = browser().await;
        browser.goto(&setup.url("/")).await;
        assert_labelled(&browser, "form#sign-in", &["key"]).await;
        sign_in(&browser, &setup, &setup.key).await;
        browser.goto(&setup.url("/messages/new")).await;
        assert_labelled(&browser, "form#send-test", &["to", "subject", "text", "html", "from"]).await;
        browser.close().await;
    });
}

/// Every visible field of `form` has an id and a label for it with text; the ids `expected`
/// are among them.
async fn assert_labelled(browser: &Browser, form: &str, expected: &[&str]) {
    let script = r#"
        const form = document.querySelector(arguments[0]);
        if (!form) return null;
        return [...form.querySelectorAll('input, textarea, select')]
            .filter(f => !['hidden', 'submit', 'button', 'reset'].includes(f.type))
            .map(f => {
                const label = f.id ? document.querySelector('label[for="' + CSS.escape(f.id) + '"]') : null;
                return [f.id || ('(no id: ' + f.name + ')'), label ? label.textContent.trim() : ''];
            });"#;
    let fields = browser.execute(script, vec![serde_json::json!(form)]).await;
    let Some(fields) = fields.as_array() else { panic!("no {form} on {}", browser.path().await) };
    let ids: Vec<&str> = fields.iter().map(|f| f[0].as_str().unwrap_or_default()).collect();
    for id in expected {
        assert!(ids.contains(id), "{form} has a field #{id}: {ids:?}");
    }
    let unlabelled: Vec<&str> =
        fields.iter().filter(|f| f[1].as_str().is_none_or(str::is_empty)).map(|f| f[0].as_str().unwrap()).collect();
    assert!(unlabelled.is_empty(), "{form}: fields without a <label for>: {unlabelled:?}");
}
