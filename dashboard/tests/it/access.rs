//! The access matrix of the dashboard, as `tests/tests/it/access_under_attack.rs` has it for
//! the API: every route the router serves (read from [`tidings_dashboard::served_routes`], so
//! a new route fails this test until it is classified here) × six kinds of session: none, a
//! revoked key's, another workspace's full key, a send key, a send key restricted to a
//! domain, a full key. Each answer is the one the API's rules give (303 to sign in, 403, 404,
//! or the page), and no answer to a caller carries what that caller may not see.

use axum::http::{Method, StatusCode};
use tidings_core::usecases::AddDomainRequest;

use crate::support::{Page, TestApp, csrf_of};
use crate::world::{Kind, World};

/// How a route is guarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    /// `GET /`: the sign-in page, or 303 to the overview with a session.
    Home,
    /// `POST /sign-in`: anyone may try.
    SignIn,
    /// `POST /sign-out`.
    SignOut,
    /// The compiled-in assets.
    Public,
    /// Any signed-in key (a send key sees its own messages there).
    AnyKey,
    /// A message: any key of its workspace, a send key only on the messages it sent.
    OwnMessage,
    /// Full keys only: 403 for send keys.
    Management,
}

fn classify(method: &Method, path: &str) -> Option<Guard> {
    let guard = match (method.as_str(), path) {
        ("GET", "/") => Guard::Home,
        ("POST", "/sign-in") => Guard::SignIn,
        ("POST", "/sign-out") => Guard::SignOut,
        ("GET", "/assets/dashboard.js" | "/assets/dashboard.css" | "/assets/favicon.svg" | "/favicon.ico") => {
            Guard::Public
        }
        ("GET", "/overview" | "/messages" | "/messages/new") | ("POST", "/messages") => Guard::AnyKey,
        (_, p) if p.starts_with("/messages/{id}") => Guard::OwnMessage,
        (_, p)
            if ["/domains", "/templates", "/suppressions", "/webhooks", "/keys", "/reputation", "/inbound"]
                .iter()
                .any(|family| p == *family || p.starts_with(&format!("{family}/"))) =>
        {
            Guard::Management
        }
        _ => return None,
    };
    Some(guard)
}

/// Destructive routes go last, sign-out very last: the full key must find what it acts on.
fn order(path: &str) -> u8 {
    match path {
        "/sign-out" => 3,
        "/domains/{id}/delete" => 2,
        p if p.ends_with("/delete") || p.ends_with("/revoke") || p.ends_with("/cancel") => 1,
        _ => 0,
    }
}

fn refused_to_sign_in(page: &Page, get: bool) -> bool {
    if get {
        page.status == StatusCode::SEE_OTHER && page.location() == "/"
    } else {
        page.status == StatusCode::FORBIDDEN
    }
}

/// The handler ran for this caller: not refused, not hidden, not redirected to sign in.
fn let_through(route: &str, page: &Page) -> bool {
    let hidden =
        page.status == StatusCode::NOT_FOUND && !(route.ends_with("/eml") && page.body.contains("no .eml file"));
    let to_sign_in = page.status == StatusCode::SEE_OTHER && page.location() == "/";
    !(page.status == StatusCode::FORBIDDEN || hidden || to_sign_in || page.status.is_server_error())
}

#[tokio::test]
async fn every_route_answers_every_kind_of_session_as_the_api_would() {
    let app = TestApp::new().await;
    let domain = app.verified_domain("alpha.example").await;
    let world = World::build(&app.core, app.principal.clone(), app.key.clone(), "alpha", domain).await;
    // Another workspace, with a thing of its own to recognise.
    let (_, beta) = app.core.workspaces().create("beta", None).await.unwrap();
    let beta_key = beta.plaintext.expose().to_owned();
    let beta_who = app.core.authenticate(&beta_key).await.unwrap();
    app.core.domains().add(&beta_who, AddDomainRequest { domain: Some("beta-only.example".into()) }).await.unwrap();

    // One session per kind; the revoked one is made, then its key revoked.
    let revoked = app.sign_in(&world.revoked.0).await;
    app.core.keys().revoke(&app.principal, world.revoked.1).await.unwrap();
    let sessions = [
        (Kind::NoSession, None),
        (Kind::Revoked, Some((revoked.token.clone(), revoked.csrf.clone()))),
        (Kind::OtherWorkspace, Some(session(&app, &beta_key).await)),
        (Kind::Send, Some(session(&app, &world.send).await)),
        (Kind::ScopedSend, Some(session(&app, &world.scoped).await)),
        (Kind::Full, Some(session(&app, &world.full).await)),
    ];

    let mut routes = tidings_dashboard::served_routes();
    routes.sort_by_key(|(_, p)| order(p));
    let mut failures = Vec::new();
    let mut requests = 0;
    for (kind, session) in &sessions {
        for (n, (method, route)) in routes.iter().enumerate() {
            let guard = classify(method, route)
                .unwrap_or_else(|| panic!("{method} {route} is new: classify it in `classify` before it ships"));
            // A send key acts on the message it sent; the others on the full key's.
            let own = world.messages.get(kind).unwrap_or(&world.messages[&Kind::Full]);
            let get = *method == Method::GET;
            let mut fields = world.fields(route, n);
            if let Some((_, csrf)) = session {
                fields.push(("csrf".into(), csrf.clone()));
            }
            if *route == "/sign-in" {
                fields = vec![("key".into(), "tid_wrongwrongwrongwrongwrongwrongwrongwron".into())];
            }
            let borrowed: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let token = session.as_ref().map(|(t, _)| t.as_str());
            let path = world.fill(route, own);
            let page = app.call(method.as_str(), &path, token, &borrowed).await;
            requests += 1;
            let live = matches!(kind, Kind::OtherWorkspace | Kind::Send | Kind::ScopedSend | Kind::Full);
            let (expected, ok) = match (guard, kind) {
                (Guard::Public, _) => ("public", page.status == StatusCode::OK),
                (Guard::SignIn, _) => ("a wrong key", page.status == StatusCode::UNAUTHORIZED),
                (Guard::Home, _) if live => ("to the overview", page.location() == "/overview"),
                (Guard::Home, _) => {
                    ("the sign-in page", page.status == StatusCode::OK && page.body.contains("sign-in"))
                }
                (Guard::SignOut, _) => ("signed out", page.status == StatusCode::SEE_OTHER && page.location() == "/"),
                (_, Kind::NoSession | Kind::Revoked) => ("sign in first", refused_to_sign_in(&page, get)),
                (Guard::AnyKey, _) => ("allowed", let_through(route, &page)),
                (Guard::OwnMessage, Kind::OtherWorkspace) => {
                    ("another workspace's message", page.status == StatusCode::NOT_FOUND)
                }
                (Guard::OwnMessage, _) => ("its own message", let_through(route, &page)),
                (Guard::Management, Kind::Send | Kind::ScopedSend) => {
                    ("send scope", page.status == StatusCode::FORBIDDEN && page.body.contains("send scope"))
                }
                (Guard::Management, Kind::OtherWorkspace) if route.contains('{') => {
                    ("another workspace's id", page.status == StatusCode::NOT_FOUND)
                }
                (Guard::Management, _) => ("allowed", let_through(route, &page)),
            };
            if !ok {
                failures.push(format!(
                    "{kind:?} {method} {path}, expected {expected}: {} {}",
                    page.status,
                    page.location()
                ));
            }
            // Nothing of this workspace reaches another's session, and no send key reads
            // another key's message.
            let foreign: Vec<&String> = match kind {
                Kind::OtherWorkspace => world.markers.iter().collect(),
                Kind::Send => vec![&world.messages[&Kind::Full], &world.messages[&Kind::ScopedSend]],
                Kind::ScopedSend => vec![&world.messages[&Kind::Full], &world.messages[&Kind::Send]],
                _ => Vec::new(),
            };
            // What the caller typed itself and sees again on a refused form is no leak.
            let typed = |marker: &str| !get && fields.iter().any(|(_, value)| value.contains(marker));
            for marker in foreign {
                if page.body.contains(marker.as_str()) && !typed(marker) {
                    failures.push(format!("{kind:?} {method} {route}: the answer holds {marker}"));
                }
            }
            if *kind == Kind::Full && page.body.contains("beta-only.example") {
                failures.push(format!("{method} {route}: the other workspace's domain"));
            }
            // A send key's own message: a second pass on another key's message is hidden.
            if matches!(kind, Kind::Send | Kind::ScopedSend) && guard == Guard::OwnMessage {
                let other = world.fill(route, &world.messages[&Kind::Full]);
                let page = app.call(method.as_str(), &other, token, &borrowed).await;
                requests += 1;
                if page.status != StatusCode::NOT_FOUND {
                    failures.push(format!(
                        "{kind:?} {method} {other}, expected another key's message hidden: {}",
                        page.status
                    ));
                }
            }
        }
    }
    eprintln!(
        "dashboard access matrix: {} routes x {} kinds of session: {requests} requests",
        routes.len(),
        sessions.len()
    );
    assert!(failures.is_empty(), "{} wrong answers:\n{}", failures.len(), failures.join("\n"));
}

/// A live session of `key`: its token and CSRF token.
async fn session(app: &TestApp, key: &str) -> (String, String) {
    let browser = app.sign_in(key).await;
    let overview = browser.get("/overview").await;
    (browser.token.clone(), csrf_of(&overview.body).unwrap())
}
