//! Every state-changing route, read from the router itself: a POST without the session's
//! CSRF token, with a wrong one, or sent from another site is refused with a 403 page and
//! changes nothing at all; the same POST with the token goes through.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use tidings_core::usecases::Principal;

use crate::support::{Browser, TestApp, encode};
use crate::world::{Kind, World, fingerprint};

/// A POST of `fields` with the session cookie and extra headers.
async fn post_with(
    app: &TestApp,
    browser: &Browser<'_>,
    path: &str,
    fields: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut req = Request::post(path)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", format!("__Host-tidings_session={}", browser.token));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let page = app.send(req.body(Body::from(encode(fields))).unwrap()).await;
    (page.status, page.body)
}

#[tokio::test]
async fn every_post_without_the_right_token_or_from_another_site_is_refused_and_changes_nothing() {
    let app = TestApp::new().await;
    let domain = app.verified_domain("csrf.example").await;
    let world = World::build(&app.core, app.principal.clone(), app.key.clone(), "csrf", domain).await;
    let browser = app.sign_in(&app.key).await;
    let who: Principal = app.principal.clone();
    let before = fingerprint(&*app.store, &who).await;

    let posts: Vec<&str> = tidings_dashboard::served_routes()
        .into_iter()
        .filter(|(m, p)| *m == Method::POST && *p != "/sign-in")
        .map(|(_, p)| p)
        .collect();
    assert!(posts.len() >= 24, "every form route is listed: {posts:?}");
    for (n, route) in posts.iter().enumerate() {
        let path = world.fill(route, &world.messages[&Kind::Full]);
        let fields = world.fields(route, n);
        let mut borrowed: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();

        let (status, body) = post_with(&app, &browser, &path, &borrowed, &[]).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{route} without a token: {body}");
        assert!(body.contains("Nothing was changed"), "{route}: a page saying so: {body}");

        borrowed.push(("csrf", "not-the-token"));
        let (status, _) = post_with(&app, &browser, &path, &borrowed, &[]).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{route} with a wrong token");

        borrowed.pop();
        borrowed.push(("csrf", &browser.csrf));
        for site in
            [("sec-fetch-site", "cross-site"), ("sec-fetch-site", "same-site"), ("origin", "https://evil.example")]
        {
            let (status, _) = post_with(&app, &browser, &path, &borrowed, &[site, ("host", "dashboard.test")]).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{route} from another site ({site:?})");
        }
    }
    assert_eq!(fingerprint(&*app.store, &who).await, before, "a refused POST changed something");
    assert!(
        app.core.sessions().resume(&browser.token).await.unwrap().is_some(),
        "sign-out without a token did nothing"
    );

    // The control: the same kind of request with the token, from this site, goes through.
    let (status, _) = post_with(
        &app,
        &browser,
        "/suppressions",
        &[("email", "control@example.com"), ("csrf", &browser.csrf)],
        &[("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_ne!(fingerprint(&*app.store, &who).await, before);
}

#[tokio::test]
async fn a_token_of_another_session_is_refused() {
    let app = TestApp::new().await;
    let one = app.sign_in(&app.key).await;
    let two = app.sign_in(&app.key).await;
    assert_ne!(one.csrf, two.csrf, "each session has its own token");
    let page = one.post_raw("/suppressions", &[("email", "x@example.com"), ("csrf", &two.csrf)]).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn sign_in_from_another_site_is_refused() {
    let app = TestApp::new().await;
    let req = Request::post("/sign-in")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "cross-site")
        .body(Body::from(encode(&[("key", &app.key)])))
        .unwrap();
    let page = app.send(req).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert_eq!(page.header("set-cookie"), "", "no session for a forged sign-in");
}
