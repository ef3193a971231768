//! Signing in and out: the session cookie and its flags, wrong keys, the failed-auth
//! throttle shared with the API (same client address, same count), revocation ending a
//! session.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use tidings_http::{HttpConfig, TrustedProxies};

use crate::support::{TestApp, csrf_of};

#[tokio::test]
async fn the_bootstrap_key_signs_in_with_a_strict_http_only_secure_cookie() {
    let app = TestApp::new().await;
    let page = app.get("/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(r#"<form id="sign-in" method="post" action="/sign-in">"#), "{}", page.body);
    assert!(page.body.contains(r#"<label for="key">"#) && page.body.contains(r#"id="key""#));

    let signed = app.post_form("/sign-in", None, &[("key", &app.key)], None).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER);
    assert_eq!(signed.location(), "/overview");
    let cookie = signed.header("set-cookie");
    let token = cookie.strip_prefix("__Host-tidings_session=").unwrap().split(';').next().unwrap();
    assert!(token.len() >= 32, "an opaque token: {cookie}");
    assert_eq!(cookie, format!("__Host-tidings_session={token}; Path=/; HttpOnly; Secure; SameSite=Strict"));
    assert!(!cookie.contains(&app.key), "the key itself is never the cookie");

    let browser = app.sign_in(&app.key).await;
    let overview = browser.get("/overview").await;
    assert!(overview.body.contains("<h1>Overview</h1>"), "{}", overview.body);
    assert!(overview.body.contains(r#"<nav id="nav""#) && overview.body.contains(r#"<form id="sign-out""#));
    // Signed in, `/` goes to the overview.
    let home = browser.get("/").await;
    assert_eq!((home.status, home.location()), (StatusCode::SEE_OTHER, "/overview"));
}

#[tokio::test]
async fn a_wrong_key_gets_401_with_the_form_and_no_cookie() {
    let app = TestApp::new().await;
    for key in ["tid_wrongwrongwrongwrongwrongwrongwrongwrong", "not a key", ""] {
        let page = app.post_form("/sign-in", None, &[("key", key)], None).await;
        assert_eq!(page.status, StatusCode::UNAUTHORIZED, "{key:?}");
        assert!(page.body.contains(r#"id="error""#) && page.body.contains(r#"id="sign-in""#));
        assert_eq!(page.header("set-cookie"), "");
    }
    let revoked = app.create_key("full", None).await;
    app.core.keys().revoke(&app.principal, revoked.1).await.unwrap();
    let page = app.post_form("/sign-in", None, &[("key", &revoked.0)], None).await;
    assert_eq!(page.status, StatusCode::UNAUTHORIZED, "a revoked key does not sign in");
}

/// An API call with a wrong key from `peer`, through the same router.
async fn failed_api_call(app: &TestApp, peer: &str, forwarded: Option<&str>) -> StatusCode {
    let mut req =
        Request::get("/v1/domains").header("authorization", "Bearer tid_nopenopenopenopenopenopenopenopenopenope");
    if let Some(xff) = forwarded {
        req = req.header("x-forwarded-for", xff);
    }
    let mut req = req.body(Body::empty()).unwrap();
    req.extensions_mut().insert(ConnectInfo(std::net::SocketAddr::new(peer.parse().unwrap(), 1234)));
    app.send(req).await.status
}

#[tokio::test]
async fn failed_sign_ins_and_failed_api_calls_share_one_allowance_per_client() {
    let app = TestApp::new().await;
    let bad = "tid_badbadbadbadbadbadbadbadbadbadbadbadbadb";
    // 10 failures through the API and 10 through the sign-in form: the allowance (20).
    for _ in 0..10 {
        assert_eq!(failed_api_call(&app, "198.51.100.1", None).await, StatusCode::UNAUTHORIZED);
        let page = app.post_form("/sign-in", None, &[("key", bad)], Some("198.51.100.1")).await;
        assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    }
    // The 21st, through either door, is throttled: even the right key.
    let page = app.post_form("/sign-in", None, &[("key", &app.key)], Some("198.51.100.1")).await;
    assert_eq!(page.status, StatusCode::TOO_MANY_REQUESTS, "{}", page.body);
    assert!(page.header("retry-after").parse::<u64>().unwrap() >= 1);
    assert!(page.body.contains(r#"id="error""#));
    assert_eq!(page.header("set-cookie"), "");
    assert_eq!(failed_api_call(&app, "198.51.100.1", None).await, StatusCode::TOO_MANY_REQUESTS);
    // Another client is not affected.
    let page = app.post_form("/sign-in", None, &[("key", &app.key)], Some("198.51.100.2")).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn behind_a_trusted_proxy_both_doors_count_the_forwarded_client() {
    let proxies = TrustedProxies::parse("10.0.0.0/8").unwrap();
    let app = TestApp::with(HttpConfig::default(), proxies).await;
    let bad = "tid_badbadbadbadbadbadbadbadbadbadbadbadbadb";
    let sign_in = |key: &'static str, client: &'static str| {
        let body = format!("key={key}");
        let mut req = Request::post("/sign-in")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-forwarded-for", format!("6.6.6.6, {client}"))
            .body(Body::from(body))
            .unwrap();
        req.extensions_mut().insert(ConnectInfo(std::net::SocketAddr::new("10.0.0.5".parse().unwrap(), 1234)));
        req
    };
    for _ in 0..10 {
        assert_eq!(failed_api_call(&app, "10.0.0.5", Some("198.51.100.7")).await, StatusCode::UNAUTHORIZED);
        assert_eq!(app.send(sign_in(bad, "198.51.100.7")).await.status, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(app.send(sign_in(bad, "198.51.100.7")).await.status, StatusCode::TOO_MANY_REQUESTS);
    // The proxy's other clients are not locked out.
    assert_eq!(app.send(sign_in(bad, "198.51.100.8")).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn signing_out_ends_the_session_on_the_server_and_clears_the_cookie() {
    let app = TestApp::new().await;
    let browser = app.sign_in(&app.key).await;
    let out = browser.post("/sign-out", &[]).await;
    assert_eq!((out.status, out.location()), (StatusCode::SEE_OTHER, "/"));
    assert_eq!(
        out.header("set-cookie"),
        "__Host-tidings_session=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0"
    );
    // The old cookie names nothing any more: pages send it to sign in, and clear it.
    let page = browser.get("/overview").await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/"));
    assert!(page.header("set-cookie").contains("Max-Age=0"));
    assert!(app.core.sessions().resume(&browser.token).await.unwrap().is_none());
}

#[tokio::test]
async fn revoking_the_key_ends_its_sessions_at_once() {
    let app = TestApp::new().await;
    let (key, id) = app.create_key("full", None).await;
    let browser = app.sign_in(&key).await;
    assert_eq!(browser.get("/messages").await.status, StatusCode::OK);
    // Revoked from another session (the bootstrap key's), through the dashboard.
    let admin = app.sign_in(&app.key).await;
    let revoked = admin.post(&format!("/keys/{id}/revoke"), &[("confirm", "yes")]).await;
    assert_eq!((revoked.status, revoked.location()), (StatusCode::SEE_OTHER, "/keys"));
    let page = browser.get("/messages").await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/"));
    let post = browser.post("/suppressions", &[("email", "x@example.com")]).await;
    assert_eq!(post.status, StatusCode::FORBIDDEN, "a dead session changes nothing");
    assert!(csrf_of(&admin.get("/keys").await.body).is_some());
}
