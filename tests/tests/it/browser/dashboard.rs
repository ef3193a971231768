//! What the browser tests share: a server with a verified sending domain, signing in, the
//! session cookie, sending and waiting through the API.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_e2e::browser::fantoccini::cookies::Cookie;
use tidings_e2e::browser::{Browser, WAIT};

use crate::common::{assert_ok, server_with_dns, verified_domain};

/// The sending domain a [`Setup::start`] server has verified.
pub const DOMAIN: &str = "app.example";
/// A sender on it.
pub const FROM: &str = "hello@app.example";
/// The session cookie's name (docs/dashboard.md).
pub const COOKIE: &str = "__Host-tidings_session";
/// The viewport the tests use unless they say otherwise.
pub const DESKTOP: (u32, u32) = (1280, 800);
/// The links of `nav#nav`, in order.
pub const NAV: [&str; 8] =
    ["/overview", "/messages", "/inbound", "/domains", "/templates", "/suppressions", "/webhooks", "/keys"];

/// A server on a fresh store (the default `outbox` transport: every message ends
/// `Delivered`) whose domain checks ask a DNS server on loopback, with [`DOMAIN`] verified
/// unless made by [`Setup::fresh`].
pub struct Setup {
    // Dropped in this order: the server before the DNS server it asks.
    pub server: TestServer,
    pub dns: TestDnsServer,
    /// The bootstrap (full) key.
    pub key: String,
    /// The id of [`DOMAIN`]; empty on a [`Setup::fresh`] server.
    pub domain_id: String,
}

impl Setup {
    /// With [`DOMAIN`] verified.
    pub async fn start() -> Self {
        let mut setup = Self::fresh().await;
        setup.domain_id = verified_domain(&setup.server, &setup.dns, &setup.key, DOMAIN).await;
        setup
    }

    /// [`Setup::start`] on a server started with `env` as well.
    pub async fn start_with(env: &[(&str, &str)]) -> Self {
        let (server, dns) = server_with_dns(env).await;
        let key = server.key().to_owned();
        let mut setup = Self { server, dns, key, domain_id: String::new() };
        setup.domain_id = verified_domain(&setup.server, &setup.dns, &setup.key, DOMAIN).await;
        setup
    }

    /// As the server starts the first time: no domain of the workspace's own, only the
    /// sandbox sending domain.
    pub async fn fresh() -> Self {
        let (server, dns) = server_with_dns(&[]).await;
        let key = server.key().to_owned();
        Self { server, dns, key, domain_id: String::new() }
    }

    /// `https://127.0.0.1:<port>{path}`.
    pub fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    /// Sends a message through the API with `key`; its id.
    pub async fn send(&self, key: &str, body: Value) -> String {
        let (status, sent) = self.server.post("/v1/messages", key, body.clone()).await;
        assert_ok(status, &sent, 201, &format!("send {body}"));
        sent["data"]["id"].as_str().expect("the message id").to_owned()
    }

    /// Sends a plain message from [`FROM`] to `to` with `subject` through the API with `key`.
    pub async fn send_plain(&self, key: &str, to: &str, subject: &str) -> String {
        self.send(key, json!({"from": FROM, "to": to, "subject": subject, "text": "Hello."})).await
    }

    /// Waits until the API shows message `id` with `status`; the message.
    pub async fn wait_for_status(&self, id: &str, status: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let (_, body) = self.server.get(&format!("/v1/messages/{id}"), &self.key).await;
            if body["data"]["status"] == status {
                return body["data"].clone();
            }
            assert!(Instant::now() < deadline, "message {id} is not {status} within {WAIT:?}: {body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The types of message `id`'s events, in order.
    pub async fn event_types(&self, id: &str) -> Vec<String> {
        let (status, body) = self.server.get(&format!("/v1/messages/{id}/events"), &self.key).await;
        assert_ok(status, &body, 200, "the events of a message");
        body["data"].as_array().expect("events").iter().map(|e| e["type"].as_str().unwrap_or("").to_owned()).collect()
    }
}

/// A fresh browser at the desktop size.
pub async fn browser() -> Browser {
    Browser::start(DESKTOP.0, DESKTOP.1).await
}

/// Signs in on `/` with `key` and checks that the dashboard answers with the overview and
/// its navigation.
pub async fn sign_in(browser: &Browser, setup: &Setup, key: &str) {
    submit_sign_in(browser, setup, key).await;
    assert_eq!(browser.path().await, "/overview", "signing in leads to the overview:\n{}", browser.page_text().await);
    browser.find("nav#nav").await;
}

/// Opens `/`, types `key` into the sign-in form and submits it.
pub async fn submit_sign_in(browser: &Browser, setup: &Setup, key: &str) {
    browser.goto(&setup.url("/")).await;
    browser.fill("form#sign-in input#key[name=key]", key).await;
    submit(browser, "form#sign-in").await;
}

/// Clicks the submit button of the form matching `form` and waits for the answer.
pub async fn submit(browser: &Browser, form: &str) {
    let button = format!("{form} button:not([type=button]):not([type=reset]), {form} input[type=submit]");
    browser.click_to_navigate(&button).await;
}

/// Whether the page is the sign-in page (and not a page of a signed-in session).
pub async fn on_sign_in_page(browser: &Browser) -> bool {
    browser.try_find("form#sign-in input#key").await.is_some() && browser.try_find("form#sign-out").await.is_none()
}

/// The session cookie as the browser holds it; `None` without one.
pub async fn session_cookie(browser: &Browser) -> Option<Cookie<'static>> {
    let cookies = browser.client().get_all_cookies().await.expect("the cookies");
    cookies.into_iter().find(|c| c.name() == COOKIE)
}

/// The id at the end of the current URL, on `/{section}/{id}`.
pub async fn id_in_url(browser: &Browser, section: &str) -> String {
    let path = browser.path().await;
    match path.strip_prefix(&format!("/{section}/")).filter(|id| !id.is_empty() && !id.contains('/')) {
        Some(id) => id.to_owned(),
        None => panic!("expected /{section}/<id>, the page is {path}:\n{}", browser.page_text().await),
    }
}

/// Sets the form control named `name` inside `form` to `value`, whatever control it is: a
/// `select` (the option with that value), radio buttons (the one with that value), a
/// checkbox (checked for "on"), or a text field.
pub async fn choose(browser: &Browser, form: &str, name: &str, value: &str) {
    let script = r#"
        const [form, name, value] = arguments;
        const controls = [...document.querySelectorAll(form + ' [name="' + name + '"]')];
        if (controls.length === 0) return 'missing';
        for (const c of controls) {
            if (c.type === 'radio') { c.checked = (c.value === value); }
            else if (c.type === 'checkbox') { c.checked = (value === 'on'); }
            else if (c.tagName === 'SELECT') {
                if (![...c.options].some(o => o.value === value)) return 'no option ' + value;
                c.value = value;
            } else { c.value = value; }
        }
        return 'ok';"#;
    let result = browser.execute(script, vec![json!(form), json!(name), json!(value)]).await;
    assert_eq!(result, "ok", "set `{name}` of {form} to {value}");
}
