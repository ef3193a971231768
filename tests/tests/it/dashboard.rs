//! The dashboard through the real binary over HTTPS: the sign-in page at `/`, the bootstrap
//! key exchanged for a session cookie with the flags of docs/dashboard.md, the overview behind it, the
//! page policy on the wire; and `TIDINGS_DASHBOARD=off` serving the API alone.

use reqwest::Method;
use tidings_e2e::{Options, TestServer, fresh_key};

/// The `__Host-tidings_session` cookie a response sets, whole.
fn set_cookie(response: &reqwest::Response) -> String {
    response.headers().get("set-cookie").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned()
}

#[tokio::test]
async fn the_bootstrap_key_signs_in_and_sees_the_overview() {
    let server = TestServer::start().await;

    let home = server.request(Method::GET, "/").send().await.unwrap();
    assert_eq!(home.status(), 200);
    let policy = home.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert_eq!(policy, tidings_dashboard::PAGE_CSP);
    let body = home.text().await.unwrap();
    assert!(body.contains(r#"<form id="sign-in" method="post" action="/sign-in">"#), "{body}");

    let wrong = server
        .request(Method::POST, "/sign-in")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("key=tid_wrongwrongwrongwrongwrongwrongwrongwron")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert_eq!(set_cookie(&wrong), "");

    let signed = server
        .request(Method::POST, "/sign-in")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "same-origin")
        .body(format!("key={}", server.key()))
        .send()
        .await
        .unwrap();
    assert_eq!(signed.status(), 303);
    assert_eq!(signed.headers()["location"], "/overview");
    let cookie = set_cookie(&signed);
    let token =
        cookie.strip_prefix("__Host-tidings_session=").and_then(|rest| rest.split(';').next()).unwrap().to_owned();
    assert_eq!(cookie, format!("__Host-tidings_session={token}; Path=/; HttpOnly; Secure; SameSite=Strict"));

    let overview = server
        .request(Method::GET, "/overview")
        .header("cookie", format!("__Host-tidings_session={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(overview.status(), 200);
    assert_eq!(overview.headers()["cache-control"], "no-store");
    assert_eq!(overview.headers()["x-content-type-options"], "nosniff");
    let body = overview.text().await.unwrap();
    assert!(body.contains("<h1>Overview</h1>") && body.contains(r#"<nav id="nav""#), "{body}");
    assert!(body.contains(r#"<svg class="chart""#));

    // The API beside it is untouched: its envelope, its 404s.
    let (status, body) = server.get("/v1/keys", server.key()).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.get("/no-such-page", server.key()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not_found")));
    let css = server.request(Method::GET, "/assets/dashboard.css").send().await.unwrap();
    assert_eq!(css.status(), 200);
}

#[tokio::test]
async fn with_the_dashboard_off_only_the_api_is_served() {
    let env = vec![("TIDINGS_DASHBOARD".to_owned(), "off".to_owned())];
    let server = TestServer::start_with(Options { bootstrap_key: Some(fresh_key()), env, ..Options::default() }).await;
    let home = server.request(Method::GET, "/").send().await.unwrap();
    assert_eq!(home.status(), 404);
    let signed = server.request(Method::POST, "/sign-in").body(format!("key={}", server.key())).send().await.unwrap();
    assert_eq!(signed.status(), 404);
    let (status, _) = server.get("/v1/keys", server.key()).await;
    assert_eq!(status, 200);
}
