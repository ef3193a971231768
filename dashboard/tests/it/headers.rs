//! The policy and headers on every response, pages, errors and redirects alike, and pages
//! without any inline script, inline style or event-handler attribute the policy would
//! block.

use axum::http::{Method, StatusCode};
use tidings_dashboard::{DOWNLOAD_CSP, MESSAGE_HTML_CSP, PAGE_CSP};

use crate::support::{Page, TestApp};
use crate::world::{Kind, World};

/// The headers every dashboard response carries; `policy` is the CSP it must have.
fn assert_headers(what: &str, page: &Page, policy: &str) {
    assert_eq!(page.header("content-security-policy"), policy, "{what}");
    assert_eq!(page.header("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(page.header("referrer-policy"), "no-referrer", "{what}");
}

/// No markup the page policy would block: script only from the one asset, no inline style,
/// no event handlers, no `javascript:` URLs.
fn assert_no_inline_code(what: &str, body: &str) {
    let scripts: Vec<&str> = body.match_indices("<script").map(|(i, _)| &body[i..(i + 60).min(body.len())]).collect();
    for script in &scripts {
        assert!(script.starts_with(r#"<script src="/assets/dashboard.js" defer></script>"#), "{what}: {script}");
    }
    assert!(!body.contains(" style="), "{what}: an inline style attribute");
    assert!(!body.contains("<style"), "{what}: an inline style element");
    assert!(!body.contains("javascript:"), "{what}: a javascript: URL");
    let lower = body.to_ascii_lowercase();
    for handler in [" onclick=", " onload=", " onerror=", " onsubmit=", " onchange=", " onmouseover="] {
        assert!(!lower.contains(handler), "{what}: an event handler attribute {handler}");
    }
}

#[tokio::test]
async fn every_page_carries_the_policy_and_no_inline_code() {
    let app = TestApp::new().await;
    let domain = app.verified_domain("headers.example").await;
    let world = World::build(&app.core, app.principal.clone(), app.key.clone(), "hdr", domain).await;
    let browser = app.sign_in(&app.key).await;
    let gets: Vec<&str> =
        tidings_dashboard::served_routes().into_iter().filter(|(m, _)| *m == Method::GET).map(|(_, p)| p).collect();
    for route in gets {
        let path = world.fill(route, &world.messages[&Kind::Full]);
        let page = browser.get(&path).await;
        let what = format!("GET {path}");
        match route {
            "/messages/{id}/html" => {
                assert_eq!(page.status, StatusCode::OK, "{what}");
                assert_headers(&what, &page, MESSAGE_HTML_CSP);
                assert_eq!(page.header("cache-control"), "no-store", "{what}");
            }
            "/inbound/{id}/html" => {
                assert_eq!(page.status, StatusCode::OK, "{what}");
                assert_headers(&what, &page, MESSAGE_HTML_CSP);
                assert_eq!(page.header("x-frame-options"), "SAMEORIGIN", "{what}: framed by the dashboard only");
            }
            "/inbound/{id}/raw" | "/inbound/{id}/attachments/{n}" => {
                // The sender's bytes: read as text or saved, never a document of this origin.
                assert_eq!(page.status, StatusCode::OK, "{what}");
                assert_headers(&what, &page, DOWNLOAD_CSP);
                assert_eq!(page.header("x-frame-options"), "DENY", "{what}");
                assert_eq!(page.header("cache-control"), "no-store", "{what}");
                let kind =
                    if route.ends_with("raw") { "text/plain; charset=utf-8" } else { "application/octet-stream" };
                assert_eq!(page.header("content-type"), kind, "{what}");
            }
            "/messages/{id}/eml" => {
                // Not delivered: no file, a 404 page, with the headers all the same.
                assert_eq!(page.status, StatusCode::NOT_FOUND, "{what}");
                assert_headers(&what, &page, PAGE_CSP);
            }
            "/messages/{id}/source" => {
                // The sender's bytes as text: never sniffed into a document.
                assert_eq!(page.status, StatusCode::OK, "{what}");
                assert_headers(&what, &page, PAGE_CSP);
                assert_eq!(page.header("content-type"), "text/plain; charset=utf-8", "{what}");
                assert_eq!(page.header("cache-control"), "no-store", "{what}");
                assert!(page.body.contains("MIME-Version: 1.0"), "{what}: {}", page.body);
            }
            "/messages/{id}/progress" => {
                assert_eq!(page.status, StatusCode::OK, "{what}");
                assert_headers(&what, &page, PAGE_CSP);
                assert_eq!(page.header("content-type"), "application/json", "{what}");
                assert_eq!(page.header("cache-control"), "no-store", "{what}");
                let progress: serde_json::Value = serde_json::from_str(&page.body).expect("JSON");
                assert!(progress["status"].is_string() && progress["lastEventId"].is_string(), "{what}: {progress}");
            }
            "/assets/dashboard.js" | "/assets/dashboard.css" => {
                assert_eq!(page.status, StatusCode::OK, "{what}");
                assert_headers(&what, &page, PAGE_CSP);
                assert!(page.header("content-type").starts_with(if route.ends_with(".js") {
                    "text/javascript"
                } else {
                    "text/css"
                }));
            }
            "/assets/favicon.svg" | "/favicon.ico" => {
                assert_eq!(page.status, StatusCode::OK, "{what}");
                assert_headers(&what, &page, PAGE_CSP);
                assert_eq!(page.header("cache-control"), "public, max-age=3600", "{what}");
                assert!(page.header("content-type").starts_with("image/"), "{what}");
            }
            "/" => {
                assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/overview"), "{what}");
                assert_headers(&what, &page, PAGE_CSP);
            }
            _ => {
                assert_eq!(page.status, StatusCode::OK, "{what}: {}", page.body);
                assert_headers(&what, &page, PAGE_CSP);
                assert_eq!(page.header("cache-control"), "no-store", "{what}");
                assert_eq!(page.header("x-frame-options"), "DENY", "{what}");
                assert!(page.header("content-type").starts_with("text/html"), "{what}");
                assert!(page.body.contains(r#"<main id="content">"#) && page.body.contains("<h1>"), "{what}");
                assert_no_inline_code(&what, &page.body);
            }
        }
    }
}

#[tokio::test]
async fn errors_redirects_and_the_sign_in_page_carry_it_too() {
    let app = TestApp::new().await;
    let sign_in = app.get("/").await;
    assert_headers("sign-in page", &sign_in, PAGE_CSP);
    assert_no_inline_code("sign-in page", &sign_in.body);
    let redirect = app.get("/overview").await;
    assert_eq!(redirect.status, StatusCode::SEE_OTHER);
    assert_headers("redirect", &redirect, PAGE_CSP);
    let failed = app.post_form("/sign-in", None, &[("key", "nope")], None).await;
    assert_headers("failed sign-in", &failed, PAGE_CSP);
    let browser = app.sign_in(&app.key).await;
    let missing = browser.get("/domains/01ARZ3NDEKTSV4RRFFQ69G5FAV").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_headers("404 page", &missing, PAGE_CSP);
    assert_no_inline_code("404 page", &missing.body);
    let refused = browser.post_raw("/suppressions", &[("email", "a@example.com")]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_headers("403 page", &refused, PAGE_CSP);
    let big = "x".repeat(tidings_dashboard::FORM_BODY_LIMIT + 1);
    let too_large = browser.post("/suppressions", &[("email", &big)]).await;
    assert_eq!(too_large.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_headers("413 page", &too_large, PAGE_CSP);
}
