//! The operator's pages in a browser (docs/dashboard.md, "The operator's pages"): signing in
//! with `TIDINGS_OPERATOR_TOKEN` on `/operator`, the cookie kept on `/operator` alone, and
//! the sites page of a server that does not deliver by site (the outbox transport).

use tidings_e2e::browser::available;

use super::dashboard::{Setup, browser, on_sign_in_page, submit};
use crate::common::block_on;

const OPERATOR_TOKEN: &str = "browser-operator-token-0123456789";
const OPERATOR_COOKIE: &str = "__Secure-tidings_operator";

/// A wrong token stays on the form with `#error`; the token leads to `/operator/sites`,
/// whose cookie is HttpOnly, Secure, SameSite=Strict on `/operator`, and which opens no
/// workspace page.
#[test]
fn the_operator_signs_in_with_the_token_and_sees_the_sites_page() {
    if !available("the_operator_signs_in_with_the_token_and_sees_the_sites_page") {
        return;
    }
    block_on(async {
        let setup = Setup::start_with(&[("TIDINGS_OPERATOR_TOKEN", OPERATOR_TOKEN)]).await;
        let browser = browser().await;

        browser.goto(&setup.url("/operator")).await;
        browser.fill("form#operator-sign-in input#token[name=token]", &setup.key).await;
        submit(&browser, "form#operator-sign-in").await;
        assert_eq!(browser.response_status().await, 401, "an API key is not the operator token");
        browser.find("#error").await;

        browser.fill("form#operator-sign-in input#token[name=token]", OPERATOR_TOKEN).await;
        submit(&browser, "form#operator-sign-in").await;
        assert_eq!(browser.path().await, "/operator/sites", "{}", browser.page_text().await);
        browser.find("#no-shaping").await;
        browser.find("form#operator-sign-out input[type=hidden][name=csrf]").await;
        browser.find("nav#operator-nav a[href=\"/operator/sites\"]").await;
        assert!(browser.try_find("nav#nav a[href=\"/messages\"]").await.is_none(), "no workspace navigation");

        let cookies = browser.client().get_all_cookies().await.expect("the cookies");
        let cookie = cookies.into_iter().find(|c| c.name() == OPERATOR_COOKIE).expect("the operator cookie");
        assert_eq!(cookie.http_only(), Some(true), "HttpOnly: {cookie:?}");
        assert_eq!(cookie.secure(), Some(true), "Secure: {cookie:?}");
        assert_eq!(cookie.same_site().map(|s| s.to_string()).as_deref(), Some("Strict"), "{cookie:?}");
        assert_eq!(cookie.path(), Some("/operator"), "Path: {cookie:?}");

        browser.goto(&setup.url("/overview")).await;
        assert!(on_sign_in_page(&browser).await, "the operator cookie opens no workspace page");
        browser.close().await;
    });
}
