//! Signing in and out, the session cookie, CSRF.

use serde_json::json;
use tidings_e2e::browser::available;
use tidings_e2e::browser::fantoccini::cookies::Cookie;

use super::dashboard::{COOKIE, NAV, Setup, browser, on_sign_in_page, session_cookie, sign_in, submit, submit_sign_in};
use crate::common::block_on;

/// A wrong key is refused on the sign-in page (with `#error`, no session); the bootstrap key
/// signs in to the overview with its navigation; `/` then leads to the overview.
#[test]
fn sign_in_with_the_bootstrap_key_and_not_with_a_wrong_one() {
    if !available("sign_in_with_the_bootstrap_key_and_not_with_a_wrong_one") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        let browser = browser().await;

        browser.goto(&setup.url("/")).await;
        assert!(on_sign_in_page(&browser).await, "`/` without a session is the sign-in page");
        browser.find("label[for=key]").await;
        submit_sign_in(&browser, &setup, &tidings_e2e::fresh_key()).await;
        assert_eq!(browser.response_status().await, 401, "a wrong key: 401");
        let error = browser.find("#error").await.text().await.unwrap();
        assert!(!error.trim().is_empty(), "#error says why");
        assert!(on_sign_in_page(&browser).await, "a wrong key stays on the sign-in form");
        assert!(session_cookie(&browser).await.is_none(), "no session cookie for a wrong key");

        sign_in(&browser, &setup, &setup.key).await;
        for href in NAV {
            browser.find(&format!("nav#nav a[href=\"{href}\"]")).await;
        }
        browser.find("main#content h1").await;
        browser.find("form#sign-out input[type=hidden][name=csrf]").await;
        assert!(session_cookie(&browser).await.is_some(), "a session cookie after signing in");

        browser.goto(&setup.url("/")).await;
        assert_eq!(browser.path().await, "/overview", "`/` with a session leads to the overview");
        browser.close().await;
    });
}

/// The session cookie is `HttpOnly` (and so not in `document.cookie`), `Secure`,
/// `SameSite=Strict`, on `/`, and ends with the browser (no expiry of its own).
#[test]
fn the_session_cookie_is_httponly_secure_and_samesite_strict() {
    if !available("the_session_cookie_is_httponly_secure_and_samesite_strict") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        let browser = browser().await;
        sign_in(&browser, &setup, &setup.key).await;

        let cookie = session_cookie(&browser).await.expect("the session cookie");
        assert_eq!(cookie.http_only(), Some(true), "HttpOnly: {cookie:?}");
        assert_eq!(cookie.secure(), Some(true), "Secure: {cookie:?}");
        assert_eq!(cookie.same_site().map(|s| s.to_string()).as_deref(), Some("Strict"), "SameSite: {cookie:?}");
        assert_eq!(cookie.path(), Some("/"), "Path: {cookie:?}");
        assert!(cookie.expires().and_then(|e| e.datetime()).is_none(), "a session cookie: {cookie:?}");
        assert!(cookie.value().len() >= 32, "a long random token: {cookie:?}");
        assert!(!cookie.value().contains(&setup.key), "the token is not the API key");

        let visible = browser.execute("return document.cookie;", vec![]).await;
        assert!(!visible.as_str().unwrap_or_default().contains(COOKIE), "page scripts cannot read it: {visible}");
        browser.close().await;
    });
}

/// Signing out returns to the sign-in page and clears the cookie; the old cookie value, put
/// back into the browser, opens nothing: the server session is gone.
#[test]
fn sign_out_ends_the_session_and_the_old_cookie_is_refused() {
    if !available("sign_out_ends_the_session_and_the_old_cookie_is_refused") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        let browser = browser().await;
        sign_in(&browser, &setup, &setup.key).await;
        let old = session_cookie(&browser).await.expect("the session cookie").value().to_owned();

        submit(&browser, "form#sign-out").await;
        assert_eq!(browser.path().await, "/", "sign-out leads to `/`");
        assert!(on_sign_in_page(&browser).await, "sign-out shows the sign-in page");
        assert!(session_cookie(&browser).await.is_none(), "the cookie is cleared");

        // Chrome takes a cookie for an IP address only with that address as its domain,
        // which stays host-only, as a `__Host-` cookie must be.
        let mut replayed = Cookie::new(COOKIE, old);
        replayed.set_domain("127.0.0.1");
        replayed.set_path("/");
        replayed.set_secure(true);
        replayed.set_http_only(true);
        browser.client().add_cookie(replayed).await.expect("put the old cookie back");
        for path in ["/overview", "/messages", "/keys"] {
            browser.goto(&setup.url(path)).await;
            assert!(on_sign_in_page(&browser).await, "{path} with the old cookie is the sign-in page");
        }
        browser.close().await;
    });
}

/// State-changing forms without their CSRF token, or with a wrong one, are refused with 403
/// and change nothing; the same forms with it work (so the refusal is about the token).
#[test]
fn a_form_without_the_csrf_token_is_refused_and_nothing_changes() {
    if !available("a_form_without_the_csrf_token_is_refused_and_nothing_changes") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        let browser = browser().await;
        sign_in(&browser, &setup, &setup.key).await;
        let domains = |body: serde_json::Value| -> Vec<String> {
            body["data"].as_array().unwrap().iter().map(|d| d["domain"].as_str().unwrap().to_owned()).collect()
        };

        // Adding a domain with the hidden field removed.
        browser.goto(&setup.url("/domains")).await;
        let form = "form[action=\"/domains\"]";
        browser.fill(&format!("{form} input[name=name]"), "no-token.example").await;
        let removed = browser
            .execute(
                "const f = document.querySelector(arguments[0] + ' input[name=csrf]'); \
                 if (!f) return false; f.remove(); return true;",
                vec![json!(form)],
            )
            .await;
        assert_eq!(removed, true, "the add-domain form carries a csrf field");
        submit(&browser, form).await;
        assert_eq!(browser.response_status().await, 403, "without the token: 403");
        let (_, body) = setup.server.get("/v1/domains", &setup.key).await;
        assert!(!domains(body).contains(&"no-token.example".to_owned()), "no domain was added");

        // Creating a key with a wrong token.
        browser.goto(&setup.url("/keys")).await;
        browser.fill("form#create-key input[name=name]", "wrong-token").await;
        browser
            .execute("document.querySelector('form#create-key input[name=csrf]').value = 'x' + 'y'.repeat(40);", vec![])
            .await;
        submit(&browser, "form#create-key").await;
        assert_eq!(browser.response_status().await, 403, "a wrong token: 403");
        assert!(browser.try_find("#new-key").await.is_none(), "no key shown");
        let (_, body) = setup.server.get("/v1/keys", &setup.key).await;
        assert!(!body.to_string().contains("wrong-token"), "no key was created: {body}");

        // Signing out by a script's POST without the token (what a forged request would be).
        let status = browser
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 fetch('/sign-out', {method: 'POST', body: new URLSearchParams({}), redirect: 'manual'})
                   .then(r => done(r.status), e => done(String(e)));",
                vec![],
            )
            .await;
        assert_eq!(status, 403, "sign-out without the token");
        browser.goto(&setup.url("/overview")).await;
        assert!(!on_sign_in_page(&browser).await, "the session is still there");

        // The same add-domain form, untouched, works.
        browser.goto(&setup.url("/domains")).await;
        browser.fill(&format!("{form} input[name=name]"), "with-token.example").await;
        submit(&browser, form).await;
        let (_, body) = setup.server.get("/v1/domains", &setup.key).await;
        assert!(domains(body).contains(&"with-token.example".to_owned()), "with the token the domain is added");
        browser.close().await;
    });
}
