//! What issue #31 asked of the pages beyond their looks: destructive forms ask before they
//! act (a page of their own without the script), a person gets a page and not the API's
//! JSON for a path nothing serves, the icon is served, a refused form marks its wrong fields
//! for assistive technology, a template shows its id and the `curl` that uses it and can be
//! test-sent and deleted, and a webhook delivery has a page with its payload and answer.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use tidings_core::ids::{TemplateId, WebhookId};
use tidings_core::model::DeliveryStatus;
use tidings_core::ports::{MessageStore, WebhookStore};
use tidings_core::usecases::{
    AddSuppressionRequest, CreateTemplateRequest, CreateWebhookRequest, ListParams, SendRequest,
};

use crate::support::{Page, TestApp};
use crate::world::fingerprint;

/// `GET path` with `Accept: accept` and no session.
async fn get_accepting(app: &TestApp, path: &str, accept: Option<&str>) -> Page {
    let mut req = Request::get(path);
    if let Some(accept) = accept {
        req = req.header("accept", accept);
    }
    app.send(req.body(Body::empty()).unwrap()).await
}

/// What Chromium sends when it navigates.
const BROWSER_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8";

#[tokio::test]
async fn each_destructive_form_posted_without_the_answer_asks_on_a_page_and_changes_nothing() {
    let app = TestApp::new().await;
    let domain = app.verified_domain("ask.example").await;
    let who = &app.principal;
    let later = (app.clock_now() + chrono::Duration::hours(1)).to_rfc3339();
    let send = SendRequest {
        to: Some("later@example.com".into()),
        from: Some("hi@ask.example".into()),
        subject: Some("Later".into()),
        text: Some("t".into()),
        scheduled_at: Some(later),
        ..SendRequest::default()
    };
    let message = app.core.messages().send(who, send, None).await.unwrap().message.id;
    app.core.suppressions().add(who, AddSuppressionRequest { email: Some("kept@example.com".into()) }).await.unwrap();
    let template = CreateTemplateRequest {
        name: Some("kept".into()),
        subject: Some("s".into()),
        html: None,
        text: Some("t".into()),
    };
    let template = app.core.templates().create(who, template).await.unwrap().id;
    let hook = CreateWebhookRequest {
        url: Some("https://hooks.example.com/kept".into()),
        event_types: Some(vec!["Delivered".into()]),
        enabled: Some(true),
        format: None,
    };
    let hook = app.core.webhooks().create(who, hook).await.unwrap().id;
    let (_, key) = app.create_key("full", None).await;
    let browser = app.sign_in(&app.key).await;
    let before = fingerprint(&*app.store, who).await;

    for (action, names) in [
        (format!("/messages/{message}/cancel"), "Later"),
        ("/suppressions/kept%40example%2Ecom/delete".to_owned(), "kept@example.com"),
        (format!("/templates/{template}/delete"), "kept"),
        (format!("/webhooks/{hook}/delete"), "hooks.example.com/kept"),
        (format!("/keys/{key}/revoke"), "full key"),
        (format!("/domains/{domain}/delete"), "ask.example"),
    ] {
        let asked = browser.post(&action, &[]).await;
        assert_eq!(asked.status, StatusCode::OK, "{action}: {}", asked.body);
        assert!(asked.body.contains("<h1>Are you sure?</h1>"), "{action}: {}", asked.body);
        assert!(asked.body.contains(names), "{action}: the question names the thing: {}", asked.body);
        let form = format!(r#"<form class="danger" id="confirm-form" method="post" action="{action}">"#);
        assert!(asked.body.contains(&form), "{action}: the form posts the same action again: {}", asked.body);
        assert!(asked.body.contains(r#"<input type="hidden" name="confirm" value="yes">"#), "{action}");
        assert!(asked.body.contains(&format!(r#"name="csrf" value="{}""#, browser.csrf)), "{action}: with the token");
        assert!(asked.body.contains(r#"class="back""#), "{action}: and a way back");
        // An answer other than yes is no answer.
        let maybe = browser.post(&action, &[("confirm", "maybe")]).await;
        assert_eq!(maybe.status, StatusCode::OK, "{action}");
    }
    assert_eq!(fingerprint(&*app.store, who).await, before, "nothing changed before a yes");

    let canceled = browser.post(&format!("/messages/{message}/cancel"), &[("confirm", "yes")]).await;
    assert_eq!(canceled.status, StatusCode::SEE_OTHER, "{}", canceled.body);
    let stored = app.store.get_message(app.workspace(), message).await.unwrap().unwrap();
    assert_eq!(stored.status.as_str(), "Canceled");
}

#[tokio::test]
async fn a_person_gets_a_page_for_an_unknown_path_and_an_api_client_the_envelope() {
    let app = TestApp::new().await;
    let page = get_accepting(&app, "/no/such/page", Some(BROWSER_ACCEPT)).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(page.header("content-type").starts_with("text/html"), "{}", page.header("content-type"));
    assert!(page.body.contains("<h1>Page not found</h1>") && page.body.contains("/no/such/page"), "{}", page.body);
    assert!(page.header("content-security-policy").contains("default-src 'self'"), "the page's policy");
    assert_eq!(page.header("cache-control"), "no-store");
    assert!(!page.header("x-request-id").is_empty(), "the request id is kept");

    // Under the dashboard's sections a page whatever the client accepts.
    for path in ["/messages/x/y", "/keys/x/y/z", "/templates/x/nothing"] {
        let page = get_accepting(&app, path, None).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
        assert!(page.body.contains("<h1>Page not found</h1>"), "{path}: {}", page.body);
    }
    // A form's address opened directly: 405 as a page, the Allow header kept.
    let page = get_accepting(&app, "/sign-in", Some(BROWSER_ACCEPT)).await;
    assert_eq!(page.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(page.body.contains("<h1>Not here</h1>"), "{}", page.body);

    // API clients keep the envelope: elsewhere without HTML in Accept, and always under /v1/.
    for (path, accept) in [
        ("/no/such/page", None),
        ("/no/such/page", Some("application/json")),
        ("/v1/nothing", Some(BROWSER_ACCEPT)),
        ("/v1/messages/x/y", None),
    ] {
        let page = get_accepting(&app, path, accept).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
        assert!(page.header("content-type").starts_with("application/json"), "{path} {accept:?}");
        assert!(page.body.contains(r#""code":"not_found""#), "{path}: {}", page.body);
    }
}

#[tokio::test]
async fn the_icon_is_served_small_typed_and_cached() {
    let app = TestApp::new().await;
    let ico = app.get("/favicon.ico").await;
    assert_eq!(ico.status, StatusCode::OK);
    assert_eq!(ico.header("content-type"), "image/x-icon");
    assert_eq!(ico.header("cache-control"), "public, max-age=3600");
    assert_eq!(ico.body.as_bytes()[..4], [0, 0, 1, 0], "an ICO header");
    assert!(ico.body.len() < 1024, "small: {} bytes", ico.body.len());
    let svg = app.get("/assets/favicon.svg").await;
    assert_eq!((svg.status, svg.header("content-type")), (StatusCode::OK, "image/svg+xml"));
    assert!(svg.body.starts_with("<svg") && svg.body.len() < 1024);
    let home = app.get("/").await;
    assert!(home.body.contains(r#"<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">"#));
}

#[tokio::test]
async fn a_refused_form_marks_its_wrong_fields_and_points_at_their_messages() {
    let app = TestApp::new().await;
    app.verified_domain("send.example").await;
    let browser = app.sign_in(&app.key).await;
    let refused = browser.post("/messages", &[("to", "not an address"), ("subject", "s"), ("text", "t")]).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    let to = r#"id="to" type="text" name="to" inputmode="email" autocomplete="off" required value="not an address" aria-invalid="true" aria-describedby="to-error">"#;
    assert!(refused.body.contains(to), "{}", refused.body);
    assert!(refused.body.contains(r#"<p class="field-error" id="to-error">"#), "{}", refused.body);
    assert!(!refused.body.contains(r#"name="subject" required value="s" aria-invalid"#), "a right field is not marked");
    let fine = browser.get("/messages/new").await;
    assert!(!fine.body.contains("aria-invalid"), "nothing marked before a mistake");

    // The one-field forms: a domain, a suppression.
    for (path, field, value, id) in
        [("/domains", "name", "not a domain!", "name"), ("/suppressions", "email", "nobody", "add-email")]
    {
        let refused = browser.post(path, &[(field, value)]).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {}", refused.body);
        let marked = format!(r#"value="{value}" aria-invalid="true" aria-describedby="{id}-error">"#);
        assert!(refused.body.contains(&marked), "{path}: {}", refused.body);
        assert!(refused.body.contains(&format!(r#"<p class="field-error" id="{id}-error">"#)), "{path}");
    }

    // The key form: a rate out of range keeps what was typed and marks the rate alone.
    let refused = browser.post("/keys", &[("name", "web app"), ("scope", "send"), ("rate_limit_per_sec", "0")]).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    assert!(
        refused.body.contains(r#"value="0" aria-invalid="true" aria-describedby="rate_limit_per_sec-error">"#),
        "{}",
        refused.body
    );
    assert!(refused.body.contains(r#"<p class="field-error" id="rate_limit_per_sec-error">"#));
    assert!(refused.body.contains(r#"value="web app">"#), "the name as typed: {}", refused.body);
    assert!(refused.body.contains(r#"<option value="send" selected>"#), "the scope as chosen");
    assert!(!refused.body.contains(r#"id="new-key""#), "no key was made");
    let rate = browser.post("/keys", &[("rate_limit_per_sec", "fast")]).await;
    assert!(rate.body.contains(r#"aria-describedby="rate_limit_per_sec-error""#), "not a number: {}", rate.body);

    // The sender form of a domain page.
    let domains = app.core.domains().list(&app.principal, Default::default()).await.unwrap();
    let domain = domains.items.iter().find(|d| d.name.to_string() == "send.example").unwrap().id;
    let path = format!("/domains/{domain}/senders");
    let refused = browser.post(&path, &[("username", "no spaces allowed"), ("display_name", "Shop")]).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    let marked = r#"value="no spaces allowed" aria-invalid="true" aria-describedby="username-error">"#;
    assert!(refused.body.contains(marked), "{}", refused.body);
    assert!(refused.body.contains(r#"value="Shop">"#), "the display name as typed");

    // The template form too: a name too long and no subject, each marked.
    let long = "n".repeat(300);
    let refused = browser.post("/templates", &[("name", &long), ("subject", " "), ("text", "t")]).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    for (id, field) in [("name", "name"), ("subject", "subject")] {
        assert!(
            refused.body.contains(&format!(r#"aria-invalid="true" aria-describedby="{id}-error""#)),
            "#{id} ({field}) is marked: {}",
            refused.body
        );
        assert!(refused.body.contains(&format!(r#"<p class="field-error" id="{id}-error">"#)), "#{id}'s message");
    }
}

#[tokio::test]
async fn a_template_shows_its_id_and_curl_sends_a_test_and_is_deleted() {
    let app = TestApp::new().await;
    app.verified_domain("tpl.example").await;
    let browser = app.sign_in(&app.key).await;
    let created = browser
        .post("/templates", &[("name", "receipt"), ("subject", "Receipt {{order}}"), ("text", "Hi {{name}}")])
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    let id = created.location().strip_prefix("/templates/").unwrap().to_owned();

    let page = browser.get(&format!("/templates/{id}")).await;
    assert!(page.body.contains(&format!(r#"<code id="template-id">{id}</code>"#)), "{}", page.body);
    assert!(page.body.contains(&format!(r#"data-copy="{id}""#)), "a copy button for the id");
    let snippet = format!(
        r#"-d '{{&quot;to&quot;: &quot;you@example.com&quot;, &quot;templateId&quot;: &quot;{id}&quot;, &quot;variables&quot;: {{&quot;order&quot;: &quot;...&quot;, &quot;name&quot;: &quot;...&quot;}}}}'"#
    );
    assert!(page.body.contains(&snippet), "the curl names the id and the variables:\n{}", page.body);
    assert!(page.body.contains(r#"<div class="preview-beside">"#), "the preview beside the editor");

    // The editor's draft previews beside it, rendered, kept as typed, and not stored.
    let drafted = browser
        .post(
            &format!("/templates/{id}/preview-draft"),
            &[
                ("subject", "Draft {{order}}"),
                ("text", "Dear {{name}}"),
                ("variables", r#"{"order": "B-2", "name": "Bo"}"#),
            ],
        )
        .await;
    assert_eq!(drafted.status, StatusCode::OK, "{}", drafted.body);
    assert!(drafted.body.contains(r#"<div id="preview-result" data-of="draft">"#), "{}", drafted.body);
    assert!(drafted.body.contains(r#"<dd id="preview-subject">Draft B-2</dd>"#), "{}", drafted.body);
    assert!(drafted.body.contains(r#"<pre id="preview-text">Dear Bo</pre>"#), "{}", drafted.body);
    assert!(drafted.body.contains(r#"value="Draft {{order}}""#), "the editor keeps the draft");
    let stored = app.core.templates().get(&app.principal, TemplateId::parse_or_none(&id)).await.unwrap();
    assert_eq!(stored.versions.len(), 1, "nothing stored");
    let broken = browser
        .post(&format!("/templates/{id}/preview-draft"), &[("subject", "Draft {{#if x}}"), ("variables", "{}")])
        .await;
    assert_eq!(broken.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", broken.body);
    assert!(broken.body.contains("line 1"), "the syntax error names its place: {}", broken.body);

    // A test send with the template: bad variables are marked on their field.
    let bad = browser.post(&format!("/templates/{id}/send"), &[("to", "ann@example.com"), ("variables", "{")]).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.body);
    assert!(bad.body.contains(r#"aria-invalid="true" aria-describedby="send-variables-error""#), "{}", bad.body);
    let sent = browser
        .post(
            &format!("/templates/{id}/send"),
            &[
                ("to", "ann@example.com"),
                ("from", "hi@tpl.example"),
                ("variables", r#"{"order": "A-17", "name": "Ann"}"#),
            ],
        )
        .await;
    assert_eq!(sent.status, StatusCode::SEE_OTHER, "{}", sent.body);
    let message = sent.location().strip_prefix("/messages/").unwrap();
    let listed = app.core.messages().list(&app.principal, ListParams::default(), &Default::default()).await.unwrap();
    let m = listed.items.iter().find(|m| m.id.to_string() == message).expect("the test message");
    assert_eq!(m.subject, "Receipt A-17");
    assert!(m.template_version_id.is_some(), "rendered from the template");

    let deleted = browser.post(&format!("/templates/{id}/delete"), &[("confirm", "yes")]).await;
    assert_eq!((deleted.status, deleted.location()), (StatusCode::SEE_OTHER, "/templates"));
    assert!(app.core.templates().get(&app.principal, TemplateId::parse_or_none(&id)).await.is_err(), "deleted");
}

#[tokio::test]
async fn a_webhook_delivery_has_a_page_and_retry_shows_only_where_it_failed() {
    let app = TestApp::new().await;
    let who = &app.principal;
    let hook = CreateWebhookRequest {
        url: Some("https://hooks.example.com/h".into()),
        event_types: Some(vec!["Delivered".into()]),
        enabled: Some(true),
        format: None,
    };
    let hook = app.core.webhooks().create(who, hook).await.unwrap().id;
    let mut failed = app.core.webhooks().test(who, hook).await.unwrap();
    failed.status = DeliveryStatus::Failed;
    failed.attempts = 3;
    failed.response_code = Some(500);
    failed.last_error = Some("HTTP 500: <b>receiver exploded</b>".into());
    failed.next_attempt_at = None;
    app.store.update_webhook_delivery(&failed).await.unwrap();
    let mut delivered = app.core.webhooks().test(who, hook).await.unwrap();
    delivered.status = DeliveryStatus::Delivered;
    delivered.attempts = 1;
    delivered.response_code = Some(204);
    delivered.next_attempt_at = None;
    app.store.update_webhook_delivery(&delivered).await.unwrap();
    let browser = app.sign_in(&app.key).await;

    let log = browser.get(&format!("/webhooks/{hook}")).await;
    let row = |id: &str| {
        let at = log.body.find(&format!(r#"data-id="{id}""#)).unwrap_or_else(|| panic!("row {id}: {}", log.body));
        log.body[at..].split("</tr>").next().unwrap().to_owned()
    };
    assert!(row(&failed.id.to_string()).contains(r#"class="action retry""#), "Retry on a failed delivery");
    assert!(!row(&delivered.id.to_string()).contains("retry"), "none on a delivered one");
    assert!(log.body.contains(r#"id="edit-webhook""#) && log.body.contains(r#"id="delete-webhook""#));

    let page = browser.get(&format!("/webhooks/{hook}/deliveries/{}", failed.id)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(r#"<pre id="delivery-payload">{"#), "the payload: {}", page.body);
    assert!(page.body.contains("&quot;type&quot;: &quot;Test&quot;") || page.body.contains(r#""type": "Test""#));
    assert!(page.body.contains("HTTP 500: &lt;b&gt;receiver exploded&lt;/b&gt;"), "the answer, escaped");
    assert!(page.body.contains(r#"class="action retry""#));
    let other = browser.get(&format!("/webhooks/{}/deliveries/{}", WebhookId::NONE, failed.id)).await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "only under its own endpoint");

    let edited = browser
        .post(
            &format!("/webhooks/{hook}/edit"),
            &[("url", "https://hooks.example.com/moved"), ("event_types", "Bounced"), ("event_types", "Delivered")],
        )
        .await;
    assert_eq!(edited.status, StatusCode::SEE_OTHER, "{}", edited.body);
    let endpoint = app.core.webhooks().get(who, hook).await.unwrap();
    assert_eq!(endpoint.url.as_str(), "https://hooks.example.com/moved");
    assert_eq!(endpoint.event_types.len(), 2);
    let deleted = browser.post(&format!("/webhooks/{hook}/delete"), &[("confirm", "yes")]).await;
    assert_eq!((deleted.status, deleted.location()), (StatusCode::SEE_OTHER, "/webhooks"));
    assert!(app.core.webhooks().get(who, hook).await.is_err());
}
