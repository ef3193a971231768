//! The operator's pages (`/operator`): served only with an operator token; signed in with
//! that token alone (wrong tokens throttled with every other failed authentication); kept
//! apart from workspace sessions both ways; the sites page shows what the limits hold, and
//! its forms suspend and resume a site, with the CSRF protection of every form.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use chrono::Duration as Span;
use tidings_core::ports::{Limits, SiteChange};
use tidings_core::shaping::{MessageRate, SiteKey};
use tidings_core::usecases::LocalLimits;

use crate::support::{OPERATOR_TOKEN, Page, TestApp, csrf_of, encode};

/// A browser signed in as the operator: its cookie and its pages' CSRF token.
struct Operator<'a> {
    app: &'a TestApp,
    cookie: String,
    csrf: String,
}

impl Operator<'_> {
    async fn get(&self, path: &str) -> Page {
        let req = Request::get(path).header("cookie", format!("__Secure-tidings_operator={}", self.cookie));
        self.app.send(req.body(Body::empty()).unwrap()).await
    }

    /// POSTs exactly `fields` with the operator cookie and extra `headers`.
    async fn post_raw(&self, path: &str, fields: &[(&str, &str)], headers: &[(&str, &str)]) -> Page {
        let mut req = Request::post(path)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", format!("__Secure-tidings_operator={}", self.cookie));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        self.app.send(req.body(Body::from(encode(fields))).unwrap()).await
    }

    /// POSTs `fields` and the CSRF token.
    async fn post(&self, path: &str, fields: &[(&str, &str)]) -> Page {
        let mut all = vec![("csrf", self.csrf.as_str())];
        all.extend_from_slice(fields);
        self.post_raw(path, &all, &[]).await
    }
}

/// Signs in through the form; panics unless it works.
async fn sign_in(app: &TestApp) -> Operator<'_> {
    let page = app.post_form("/operator/sign-in", None, &[("token", OPERATOR_TOKEN)], None).await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/operator/sites"), "{}", page.body);
    let set = page.header("set-cookie");
    let cookie = set
        .strip_prefix("__Secure-tidings_operator=")
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no operator cookie: {set}"))
        .to_owned();
    let mut operator = Operator { app, cookie, csrf: String::new() };
    let sites = operator.get("/operator/sites").await;
    assert_eq!(sites.status, StatusCode::OK, "{}", sites.body);
    operator.csrf = csrf_of(&sites.body).expect("a CSRF field on the sites page");
    operator
}

fn google() -> SiteKey {
    SiteKey::parse(".google.com").unwrap()
}

async fn suspended(limits: &LocalLimits, app: &TestApp) -> Option<(chrono::DateTime<chrono::Utc>, Option<String>)> {
    let states = limits.site_states(app.clock_now()).await.unwrap();
    let state = states.into_iter().find(|s| s.site == google())?;
    state.suspended_until.map(|until| (until, state.suspend_reason))
}

#[tokio::test]
async fn without_an_operator_token_the_operator_pages_are_not_served() {
    let app = TestApp::new().await;
    for (method, path) in tidings_dashboard::operator_routes() {
        let page = app.call(method.as_str(), path, None, &[("token", OPERATOR_TOKEN)]).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{method} {path}: {}", page.body);
        assert_eq!(page.header("set-cookie"), "", "{path}");
    }
    assert!(tidings_dashboard::operator_routes().len() >= 6);
}

#[tokio::test]
async fn the_token_signs_in_with_a_strict_short_lived_cookie_on_the_operator_path() {
    let (app, _) = TestApp::with_operator(true).await;
    let page = app.get("/operator").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(r#"<form id="operator-sign-in" method="post" action="/operator/sign-in">"#));
    assert!(!page.body.contains(r#"<nav id="nav" aria-label="Main""#), "no workspace navigation");

    let signed = app.post_form("/operator/sign-in", None, &[("token", OPERATOR_TOKEN)], None).await;
    let cookie = signed.header("set-cookie");
    let value = cookie.strip_prefix("__Secure-tidings_operator=").unwrap().split(';').next().unwrap();
    assert_eq!(
        cookie,
        format!("__Secure-tidings_operator={value}; Path=/operator; Max-Age=28800; HttpOnly; Secure; SameSite=Strict")
    );
    assert!(!cookie.contains(OPERATOR_TOKEN), "the token itself is never the cookie");

    let operator = sign_in(&app).await;
    let home = operator.get("/operator").await;
    assert_eq!((home.status, home.location()), (StatusCode::SEE_OTHER, "/operator/sites"));

    // Eight hours later the session is over: back to the sign-in, the cookie cleared.
    app.clock.advance(Span::hours(8));
    let page = operator.get("/operator/sites").await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/operator"));
    assert!(page.header("set-cookie").ends_with("Max-Age=0; HttpOnly; Secure; SameSite=Strict"));
}

#[tokio::test]
async fn a_wrong_token_or_an_api_key_is_refused_and_failures_are_throttled_with_the_others() {
    let (app, _) = TestApp::with_operator(true).await;
    for token in ["operator-token-0123456789abcdeX", app.key.as_str(), ""] {
        let page = app.post_form("/operator/sign-in", None, &[("token", token)], Some("198.51.100.1")).await;
        assert_eq!(page.status, StatusCode::UNAUTHORIZED, "{token:?}");
        assert!(page.body.contains(r#"id="error""#) && page.body.contains(r#"id="operator-sign-in""#));
        assert_eq!(page.header("set-cookie"), "");
    }
    // With the workspace sign-in's failures from the same client: the allowance (20) is one.
    for _ in 0..17 {
        let page = app
            .post_form("/sign-in", None, &[("key", "tid_nopenopenopenopenopenopenopenopenope")], Some("198.51.100.1"))
            .await;
        assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    }
    let page = app.post_form("/operator/sign-in", None, &[("token", OPERATOR_TOKEN)], Some("198.51.100.1")).await;
    assert_eq!(page.status, StatusCode::TOO_MANY_REQUESTS, "even the right token: {}", page.body);
    assert!(page.header("retry-after").parse::<u64>().unwrap() >= 1);
    assert_eq!(page.header("set-cookie"), "");
    let page = app.post_form("/operator/sign-in", None, &[("token", OPERATOR_TOKEN)], Some("198.51.100.2")).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "another client is not affected");
}

#[tokio::test]
async fn a_workspace_session_opens_no_operator_page_and_the_operator_cookie_no_workspace_page() {
    let (app, limits) = TestApp::with_operator(true).await;
    let workspace = app.sign_in(&app.key).await;
    let operator = sign_in(&app).await;

    let page = workspace.get("/operator/sites").await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/operator"), "{}", page.body);
    let page = workspace.get("/operator").await;
    assert!(page.body.contains("operator-sign-in"), "the workspace session is not the operator's");
    for path in ["/operator/sites/suspend", "/operator/sites/resume"] {
        let page = workspace.post(path, &[("site", ".google.com"), ("duration", "1h")]).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{path}: {}", page.body);
    }
    assert_eq!(suspended(&limits, &app).await, None, "nothing changed");

    let page = operator.get("/overview").await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/"), "{}", page.body);
    let page = operator.get("/messages").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    let page = operator.post("/suppressions", &[("email", "x@example.com")]).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    // A workspace CSRF token is not the operator's, nor the other way round.
    let page =
        operator.post_raw("/operator/sites/resume", &[("site", ".google.com"), ("csrf", &workspace.csrf)], &[]).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_sites_page_lists_a_suspended_and_a_throttled_site_with_every_text_escaped() {
    let (app, limits) = TestApp::with_operator(true).await;
    let now = app.clock_now();
    let why = "421 4.7.28 <script>alert(1)</script> unusual rate";
    limits
        .change_site(&google(), SiteChange::Suspend { until: now + Span::hours(2), reason: why.into() }, now)
        .await
        .unwrap();
    let yahoo = SiteKey::parse(".yahoodns.net").unwrap();
    let throttle = SiteChange::Throttle {
        rate: MessageRate::parse("10/min").unwrap(),
        until: now + Span::minutes(30),
        reason: "[TS02] & more".into(),
    };
    limits.change_site(&yahoo, throttle, now).await.unwrap();

    let operator = sign_in(&app).await;
    let page = operator.get("/operator/sites").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(r#"<table id="sites">"#), "{}", page.body);
    assert!(page.body.contains(r#"<tr data-site=".google.com">"#), "{}", page.body);
    assert!(page.body.contains("suspended</span> until"), "{}", page.body);
    assert!(page.body.contains("421 4.7.28 &lt;script&gt;alert(1)&lt;/script&gt; unusual rate"), "{}", page.body);
    assert!(!page.body.contains("<script>alert"), "a reason is escaped");
    assert!(page.body.contains("5 connections"), "Google's limits: {}", page.body);
    assert!(page.body.contains(r#"<tr data-site=".yahoodns.net">"#));
    assert!(page.body.contains("throttled</span> to 10/min until"), "{}", page.body);
    assert!(page.body.contains("[TS02] &amp; more"));
    assert!(page.body.contains(r#"<form class="resume" method="post" action="/operator/sites/resume">"#));
    assert!(page.body.contains(r#"<form id="operator-sign-out""#));
    assert!(page.body.contains(r#"<nav id="operator-nav""#) && !page.body.contains(r#"<nav id="nav""#));
    assert!(!page.header("content-security-policy").contains("unsafe-inline"), "the dashboard's policy");
    assert!(!page.header("content-security-policy").is_empty());
}

#[tokio::test]
async fn the_forms_suspend_and_resume_a_site() {
    let (app, limits) = TestApp::with_operator(true).await;
    let operator = sign_in(&app).await;
    let page = operator.get("/operator/sites").await;
    assert!(page.body.contains(r#"id="no-sites""#), "{}", page.body);

    let page = operator
        .post("/operator/sites/suspend", &[("site", ".google.com"), ("duration", "2h"), ("reason", "Gmail complained")])
        .await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/operator/sites"), "{}", page.body);
    let now = app.clock_now();
    assert_eq!(suspended(&limits, &app).await, Some((now + Span::hours(2), Some("Gmail complained".into()))));
    let page = operator.get("/operator/sites").await;
    assert!(page.body.contains("Gmail complained"), "{}", page.body);

    let page = operator.post("/operator/sites/resume", &[("site", ".google.com")]).await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/operator/sites"), "{}", page.body);
    assert_eq!(suspended(&limits, &app).await, None);

    // Mistakes come back on the page, naming the field, and change nothing.
    for (fields, field) in [
        (vec![("site", "Not A Site"), ("duration", "1h")], "site"),
        (vec![("site", ".google.com"), ("duration", "8d")], "duration"),
        (vec![("site", ".google.com"), ("duration", "soon")], "duration"),
        (vec![("site", ".google.com")], "duration"),
    ] {
        let page = operator.post("/operator/sites/suspend", &fields).await;
        assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY, "{fields:?}: {}", page.body);
        assert!(page.body.contains(&format!("{field}: ")), "{fields:?}: {}", page.body);
        assert!(page.body.contains(&format!(r#"id="{field}-error""#)), "{fields:?}: {}", page.body);
    }
    let long = "x".repeat(501);
    let page = operator
        .post("/operator/sites/suspend", &[("site", ".google.com"), ("duration", "1h"), ("reason", &long)])
        .await;
    assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(suspended(&limits, &app).await, None, "nothing changed");
}

#[tokio::test]
async fn a_relay_says_it_has_no_sites_and_refuses_to_suspend() {
    let (app, _) = TestApp::with_operator(false).await;
    let operator = sign_in(&app).await;
    let page = operator.get("/operator/sites").await;
    assert!(page.body.contains(r#"id="no-shaping""#), "{}", page.body);
    let page = operator.post("/operator/sites/suspend", &[("site", ".google.com"), ("duration", "1h")]).await;
    assert_eq!(page.status, StatusCode::CONFLICT, "{}", page.body);
}

#[tokio::test]
async fn every_operator_post_needs_the_sessions_token_and_this_site() {
    let (app, limits) = TestApp::with_operator(true).await;
    let operator = sign_in(&app).await;
    // Another session's token (signed in a second later) is not this one's.
    app.clock.advance(Span::seconds(1));
    let other = sign_in(&app).await;
    assert_ne!(operator.csrf, other.csrf);

    let posts: Vec<&str> = tidings_dashboard::operator_routes()
        .into_iter()
        .filter(|(m, p)| *m == Method::POST && *p != "/operator/sign-in")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(posts.len(), 3, "{posts:?}");
    let fields = [("site", ".google.com"), ("duration", "1h")];
    for route in &posts {
        let page = operator.post_raw(route, &fields, &[]).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{route} without a token: {}", page.body);
        assert!(page.body.contains("Nothing was changed"), "{route}: {}", page.body);
        assert_eq!(page.header("set-cookie"), "", "{route}: the cookie is kept");
        for wrong in ["not-the-token", other.csrf.as_str()] {
            let mut with = fields.to_vec();
            with.push(("csrf", wrong));
            let page = operator.post_raw(route, &with, &[]).await;
            assert_eq!(page.status, StatusCode::FORBIDDEN, "{route} with {wrong:?}");
        }
        let mut with = fields.to_vec();
        with.push(("csrf", &operator.csrf));
        for site in [("sec-fetch-site", "cross-site"), ("origin", "https://evil.example")] {
            let page = operator.post_raw(route, &with, &[site, ("host", "dashboard.test")]).await;
            assert_eq!(page.status, StatusCode::FORBIDDEN, "{route} from another site ({site:?})");
        }
    }
    assert_eq!(suspended(&limits, &app).await, None, "a refused POST changed something");

    let req = Request::post("/operator/sign-in")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "cross-site")
        .body(Body::from(encode(&[("token", OPERATOR_TOKEN)])))
        .unwrap();
    let page = app.send(req).await;
    assert_eq!((page.status, page.header("set-cookie")), (StatusCode::FORBIDDEN, ""), "login CSRF");

    // The control: with the token, from this site.
    let page = operator.post("/operator/sign-out", &[]).await;
    assert_eq!((page.status, page.location()), (StatusCode::SEE_OTHER, "/operator"));
    assert!(page.header("set-cookie").starts_with("__Secure-tidings_operator=; Path=/operator; Max-Age=0"));
}
