//! What a person does on the pages, through the forms as a browser posts them: a test send
//! and its message page, a domain's records, keys shown once, templates and their errors,
//! webhooks and their secrets, suppressions, the `.eml` download, cancel and reschedule, and
//! what a send key sees.

use axum::http::StatusCode;
use tidings_core::ids::{DomainId, TemplateId, WebhookId};
use tidings_core::model::EventType;
use tidings_core::ports::{MessageStore, WebhookStore};
use tidings_core::usecases::SendRequest;
use tidings_testing::fixtures;

use crate::support::TestApp;

/// The fields of a destructive form once its confirmation was answered yes.
const YES: &[(&str, &str)] = &[("confirm", "yes")];

/// The id at the end of a redirect to `/<family>/<id>`.
fn id_from(location: &str, family: &str) -> String {
    location.strip_prefix(&format!("/{family}/")).unwrap_or_else(|| panic!("{location}")).to_owned()
}

#[tokio::test]
async fn a_test_email_sent_from_the_form_has_its_page_and_is_in_the_list() {
    let app = TestApp::new().await;
    app.verified_domain("send.example").await;
    let browser = app.sign_in(&app.key).await;
    let form = browser.get("/messages/new").await;
    for hook in [
        r#"<form id="send-test""#,
        r#"<label for="to">"#,
        r#"<label for="subject">"#,
        r#"<label for="text">"#,
        r#"<label for="html">"#,
        r#"<label for="from">"#,
    ] {
        assert!(form.body.contains(hook), "{hook}");
    }
    let sent = browser
        .post(
            "/messages",
            &[
                ("to", "ann@example.com"),
                ("subject", "Hello <Ann>"),
                ("text", "Hi"),
                ("html", "<p>Hi</p>"),
                ("from", ""),
            ],
        )
        .await;
    assert_eq!(sent.status, StatusCode::SEE_OTHER, "{}", sent.body);
    let id = id_from(sent.location(), "messages");
    let page = browser.get(&format!("/messages/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(r#"<span id="status" data-status="Queued">"#), "{}", page.body);
    assert!(page.body.contains(r#"<li data-event="Queued">"#));
    assert!(page.body.contains(r#"<iframe id="preview" sandbox="""#));
    assert!(page.body.contains(r#"<pre id="text-body">Hi</pre>"#));
    assert!(page.body.contains(r#"<table id="headers">"#) && page.body.contains("Hello &lt;Ann&gt;"));
    assert!(page.body.contains("noreply@send.example"), "the default sender");
    assert!(!page.body.contains(r#"id="eml""#), "not delivered: no .eml");
    let list = browser.get("/messages?status=Queued").await;
    assert!(list.body.contains(&format!(r#"<tr data-id="{id}">"#)));
    let none = browser.get("/messages?status=Delivered").await;
    assert!(!none.body.contains(&format!(r#"data-id="{id}""#)));
}

#[tokio::test]
async fn a_refused_send_shows_the_form_again_with_what_was_wrong() {
    let app = TestApp::new().await;
    let browser = app.sign_in(&app.key).await;
    let page = browser.post("/messages", &[("to", "not an address"), ("subject", "kept"), ("text", "t")]).await;
    assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.body.contains(r#"id="error""#) && page.body.contains("to:"), "{}", page.body);
    assert!(page.body.contains(r#"value="kept""#), "the typed values stay");
    let page = browser.post("/messages", &[("to", "ann@example.com"), ("subject", "s"), ("text", "t")]).await;
    assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY, "no verified domain: {}", page.body);
    assert!(page.body.contains("no verified domain"));
}

#[tokio::test]
async fn a_domain_shows_its_records_to_copy_and_verifies_from_the_page() {
    let app = TestApp::new().await;
    let browser = app.sign_in(&app.key).await;
    let added = browser.post("/domains", &[("name", "mail.acme.example")]).await;
    assert_eq!(added.status, StatusCode::SEE_OTHER, "{}", added.body);
    let id = id_from(added.location(), "domains");
    let page = browser.get(&format!("/domains/{id}")).await;
    assert!(page.body.contains(r#"<table class="fixed" id="records">"#));
    for kind in ["SPF", "DKIM", "DKIM2", "DMARC"] {
        let row =
            &page.body[page.body.find(&format!(r#"<tr data-kind="{kind}">"#)).unwrap_or_else(|| panic!("{kind}"))..];
        let row = &row[..row.find("</tr>").unwrap()];
        for hook in [
            r#"class="record-name"#,
            r#"class="record-value"#,
            r#"class="record-status""#,
            r#"<button class="copy" type="button" data-copy=""#,
        ] {
            assert!(row.contains(hook), "{kind}: {hook} in {row}");
        }
        assert!(row.contains(r#"data-status="Pending""#), "never checked yet");
    }
    // Verify before publishing: each record says why it failed.
    let verified = browser.post(&format!("/domains/{id}/verify"), &[]).await;
    assert_eq!(verified.status, StatusCode::SEE_OTHER);
    let page = browser.get(&format!("/domains/{id}")).await;
    assert!(page.body.contains(r#"data-status="Failed""#) && page.body.contains(r#"class="record-error""#));
    let domain = app.core.domains().get(&app.principal, DomainId::parse_or_none(&id)).await.unwrap();
    for record in &domain.records {
        app.dns.add_txt(&record.name, &record.value);
    }
    browser.post(&format!("/domains/{id}/verify"), &[]).await;
    let page = browser.get(&format!("/domains/{id}")).await;
    assert!(page.body.contains(r#"<span id="domain-status" data-status="Verified">"#), "{}", page.body);
    assert_eq!(page.body.matches(r#"data-key-state="Active""#).count(), 2, "both DKIM records show their state");
    // A DKIM key rotation: the new records are listed Pending, then the old ones Retiring.
    let rotated = browser.post(&format!("/domains/{id}/rotate-dkim"), &[]).await;
    assert_eq!(rotated.status, StatusCode::SEE_OTHER, "{}", rotated.body);
    let page = browser.get(&format!("/domains/{id}")).await;
    assert_eq!(page.body.matches(r#"data-key-state="Pending""#).count(), 2, "{}", page.body);
    assert!(!page.body.contains("/rotate-dkim"), "one rotation at a time: no button while one is pending");
    let domain = app.core.domains().get(&app.principal, DomainId::parse_or_none(&id)).await.unwrap();
    let pending = domain.dkim_rotation.pending.clone().unwrap();
    assert!(page.body.contains(&pending.rsa_selector) && page.body.contains(&pending.ed25519_selector));
    for record in
        domain.records.iter().filter(|r| r.name.starts_with(&pending.rsa_selector[..pending.rsa_selector.len() - 1]))
    {
        app.dns.add_txt(&record.name, &record.value);
    }
    browser.post(&format!("/domains/{id}/verify"), &[]).await;
    let page = browser.get(&format!("/domains/{id}")).await;
    assert_eq!(page.body.matches(r#"data-key-state="Retiring""#).count(), 2, "{}", page.body);
    assert_eq!(page.body.matches(r#"data-key-state="Active""#).count(), 2);
    let switched = app.core.domains().get(&app.principal, DomainId::parse_or_none(&id)).await.unwrap();
    assert_eq!(switched.status, tidings_core::model::DomainStatus::Verified, "{:#?}", switched.records);
    // Tracking switches, a sender, then deletion.
    browser.post(&format!("/domains/{id}/tracking"), &[("click", "on")]).await;
    let domain = app.core.domains().get(&app.principal, DomainId::parse_or_none(&id)).await.unwrap();
    assert!((domain.click_tracking, domain.open_tracking) == (true, false));
    let added = browser
        .post(&format!("/domains/{id}/senders"), &[("username", "billing"), ("display_name", "Acme Billing")])
        .await;
    assert_eq!(added.status, StatusCode::SEE_OTHER, "{}", added.body);
    assert!(browser.get(&format!("/domains/{id}")).await.body.contains("billing@mail.acme.example"));
    let removed = browser.post(&format!("/domains/{id}/senders/billing/delete"), YES).await;
    assert_eq!(removed.status, StatusCode::SEE_OTHER);
    let deleted = browser.post(&format!("/domains/{id}/delete"), YES).await;
    assert_eq!((deleted.status, deleted.location()), (StatusCode::SEE_OTHER, "/domains"));
    assert_eq!(browser.get(&format!("/domains/{id}")).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_sandbox_domain_is_labelled_and_has_nothing_to_verify_or_delete() {
    let app = TestApp::sandboxed().await;
    let browser = app.sign_in(&app.key).await;
    let list = browser.get("/domains").await;
    assert!(
        list.body.contains("sandbox.tidings.invalid") && list.body.contains("sandbox: outbox only"),
        "{}",
        list.body
    );
    let sent = browser.post("/messages", &[("to", "ann@example.com"), ("subject", "Hi"), ("text", "Hello")]).await;
    assert_eq!(sent.status, StatusCode::SEE_OTHER, "a fresh workspace sends from the sandbox: {}", sent.body);
    let domains = app.core.domains().list(&app.principal, Default::default()).await.unwrap();
    let sandbox = domains.items.iter().find(|d| d.is_sandbox()).expect("the sandbox domain is listed");
    let page = browser.get(&format!("/domains/{}", sandbox.id)).await;
    assert!(page.body.contains(r#"id="sandbox-note""#), "{}", page.body);
    assert!(page.body.contains("nothing to publish"), "its records say there is nothing to publish");
    assert!(!page.body.contains(r#"id="delete-domain""#), "no delete form");
    assert!(!page.body.contains("/verify"), "no verify button");
    // A forged delete is still refused by core, and the domain stays.
    let deleted = browser.post(&format!("/domains/{}/delete", sandbox.id), YES).await;
    assert_ne!(deleted.status, StatusCode::SEE_OTHER, "{}", deleted.body);
    assert!(app.core.domains().get(&app.principal, sandbox.id).await.is_ok());
}

#[tokio::test]
async fn a_new_key_is_shown_once_and_works() {
    let app = TestApp::new().await;
    let browser = app.sign_in(&app.key).await;
    let page = browser.get("/keys").await;
    assert!(page.body.contains(r#"<form id="create-key""#) && !page.body.contains(r#"id="new-key""#));
    let created = browser
        .post("/keys", &[("name", "web"), ("scope", "send"), ("domain_id", ""), ("rate_limit_per_sec", "50")])
        .await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.body);
    let at = created.body.find(r#"<code class="secret" id="new-key">"#).expect("#new-key")
        + r#"<code class="secret" id="new-key">"#.len();
    let plaintext = created.body[at..].split('<').next().unwrap().to_owned();
    let who = app.core.authenticate(&plaintext).await.expect("the plaintext shown is the key");
    assert_eq!((who.scope, who.rate_limit.per_sec()), (tidings_core::model::KeyScope::Send, 50));
    let again = browser.get("/keys").await;
    assert!(!again.body.contains(&plaintext), "shown once");
    assert!(
        again.body.contains(&format!(r#"<tr data-id="{}">"#, who.key_id))
            && again.body.contains(r#"<form class="revoke""#)
    );
    let bad = browser.post("/keys", &[("name", "x"), ("rate_limit_per_sec", "lots")]).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);

    // Its rate changes from the keys page, for its next request.
    let form = format!(r#"<form class="rate" method="post" action="/keys/{}/rate">"#, who.key_id);
    assert!(again.body.contains(&form), "each key has a rate field");
    let set = browser.post(&format!("/keys/{}/rate", who.key_id), &[("rate_limit_per_sec", "400")]).await;
    assert_eq!((set.status, set.location()), (StatusCode::SEE_OTHER, "/keys"), "{}", set.body);
    assert_eq!(app.core.authenticate(&plaintext).await.unwrap().rate_limit.per_sec(), 400);
    for bad in ["0", "10001", "fast"] {
        let refused = browser.post(&format!("/keys/{}/rate", who.key_id), &[("rate_limit_per_sec", bad)]).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    }
    assert_eq!(app.core.authenticate(&plaintext).await.unwrap().rate_limit.per_sec(), 400, "refusals change nothing");
}

#[tokio::test]
async fn templates_preview_with_typed_variables_and_name_line_and_column_of_errors() {
    let app = TestApp::new().await;
    let browser = app.sign_in(&app.key).await;
    let created = browser
        .post(
            "/templates",
            &[
                ("name", "receipt"),
                ("subject", "Receipt {{order}}"),
                ("html", "<p>Hi {{name}}</p>"),
                ("text", "Hi {{name}}"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    let id = id_from(created.location(), "templates");

    let ok = browser
        .post(&format!("/templates/{id}/preview"), &[("variables", r#"{"order": "A-17", "name": "<Ann>"}"#)])
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    assert!(ok.body.contains(r#"<dd id="preview-subject">Receipt A-17</dd>"#), "{}", ok.body);
    assert!(ok.body.contains(r#"<iframe class="preview" id="template-preview" sandbox="" srcdoc=""#));

    let json = browser.post(&format!("/templates/{id}/preview"), &[("variables", "{\n \"order\": ,\n}")]).await;
    assert_eq!(json.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(json.body.contains(r#"id="error""#) && json.body.contains("line 2 column"), "{}", json.body);
    let missing = browser.post(&format!("/templates/{id}/preview"), &[("variables", r#"{"order": "1"}"#)]).await;
    assert_eq!(missing.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(missing.body.contains("name"), "names the missing variable: {}", missing.body);

    let broken = browser
        .post(
            &format!("/templates/{id}/versions"),
            &[("subject", "s"), ("text", "line one\n{{#if x}} unclosed"), ("make_current", "on")],
        )
        .await;
    assert_eq!(broken.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(broken.body.contains("line") && broken.body.contains("column"), "{}", broken.body);
    assert!(broken.body.contains("unclosed"), "the draft is kept");

    let v2 = browser.post(&format!("/templates/{id}/versions"), &[("subject", "v2 {{order}}"), ("text", "t")]).await;
    assert_eq!(v2.status, StatusCode::SEE_OTHER, "{}", v2.body);
    let template = app.core.templates().get(&app.principal, TemplateId::parse_or_none(&id)).await.unwrap();
    assert_eq!(template.versions.len(), 2);
    let first = template.versions.iter().find(|v| v.version_no == 1).unwrap();
    assert_eq!(template.current_version_id, first.id, "added without make_current");
    let v2_id = template.versions.iter().find(|v| v.version_no == 2).unwrap().id.to_string();
    let made = browser.post(&format!("/templates/{id}/current"), &[("version_id", &v2_id)]).await;
    assert_eq!(made.status, StatusCode::SEE_OTHER);
    assert_eq!(
        app.core
            .templates()
            .get(&app.principal, TemplateId::parse_or_none(&id))
            .await
            .unwrap()
            .current_version_id
            .to_string(),
        v2_id
    );

    // Template forms take bodies up to 1 MiB; other forms 64 KiB.
    let big = "x".repeat(200 * 1024);
    let large = browser.post(&format!("/templates/{id}/versions"), &[("subject", "s"), ("text", &big)]).await;
    assert_eq!(large.status, StatusCode::SEE_OTHER, "200 KiB template");
    let too_big = "x".repeat(tidings_dashboard::TEMPLATE_BODY_LIMIT);
    let refused = browser.post(&format!("/templates/{id}/versions"), &[("subject", "s"), ("text", &too_big)]).await;
    assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn a_webhook_secret_is_shown_at_creation_and_rotation_only() {
    let app = TestApp::new().await;
    let browser = app.sign_in(&app.key).await;
    let created = browser
        .post(
            "/webhooks",
            &[("url", "https://hooks.example.com/t"), ("event_types", "Delivered"), ("event_types", "Bounced")],
        )
        .await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.body);
    let secret_at = created.body.find(r#"id="new-secret">whsec_"#).expect("the secret") + r#"id="new-secret">"#.len();
    let secret = created.body[secret_at..].split('<').next().unwrap().to_owned();
    let hook = app.core.webhooks().list(&app.principal, Default::default()).await.unwrap().items.remove(0);
    assert_eq!(hook.secret.expose(), secret);
    assert_eq!(hook.event_types.len(), 2);
    let id = hook.id.to_string();
    let page = browser.get(&format!("/webhooks/{id}")).await;
    assert!(!page.body.contains(&secret), "not shown again");

    assert_eq!(browser.post(&format!("/webhooks/{id}/test"), &[]).await.status, StatusCode::SEE_OTHER);
    let page = browser.get(&format!("/webhooks/{id}")).await;
    assert!(
        page.body.contains(r#"<table class="fixed" id="deliveries">"#) && page.body.contains(">Test<"),
        "{}",
        page.body
    );
    // An attempt that failed: its response code and error are in the log, with a retry.
    let mut delivery = app
        .core
        .webhooks()
        .deliveries(&app.principal, WebhookId::parse_or_none(&id), Default::default())
        .await
        .unwrap()
        .items
        .remove(0);
    (delivery.attempts, delivery.response_code, delivery.last_error) =
        (1, Some(503), Some("HTTP 503: <b>down</b>".into()));
    delivery.status = tidings_core::model::DeliveryStatus::Retrying;
    app.store.update_webhook_delivery(&delivery).await.unwrap();
    let page = browser.get(&format!("/webhooks/{id}")).await;
    assert!(page.body.contains(r#"<td class="response-code" data-label="Response">503</td>"#), "{}", page.body);
    assert!(page.body.contains("HTTP 503: &lt;b&gt;down&lt;/b&gt;") && page.body.contains(r#"data-status="Retrying""#));
    let retried = browser.post(&format!("/webhooks/{id}/deliveries/{}/retry", delivery.id), &[]).await;
    assert_eq!((retried.status, retried.location()), (StatusCode::SEE_OTHER, format!("/webhooks/{id}").as_str()));
    let rotated = browser.post(&format!("/webhooks/{id}/rotate"), &[]).await;
    assert_eq!(rotated.status, StatusCode::OK);
    assert!(rotated.body.contains(r#"id="new-secret">whsec_"#) && !rotated.body.contains(&secret));
    assert_eq!(browser.post(&format!("/webhooks/{id}/disable"), &[]).await.status, StatusCode::SEE_OTHER);
    assert!(!app.core.webhooks().get(&app.principal, WebhookId::parse_or_none(&id)).await.unwrap().enabled);
    browser.post(&format!("/webhooks/{id}/enable"), &[]).await;
    assert!(app.core.webhooks().get(&app.principal, WebhookId::parse_or_none(&id)).await.unwrap().enabled);
    let bad = browser.post("/webhooks", &[("url", "http://127.0.0.1/x"), ("event_types", "Delivered")]).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.body);
    // The form comes back as typed, the URL marked and its message under it.
    assert!(
        bad.body.contains(r#"value="http://127.0.0.1/x" aria-invalid="true" aria-describedby="url-error""#),
        "{}",
        bad.body
    );
    assert!(bad.body.contains(r#"<p class="field-error" id="url-error">"#), "{}", bad.body);
    let none = browser.post(&format!("/webhooks/{id}/edit"), &[("url", "https://hooks.example.com/t")]).await;
    assert_eq!(none.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", none.body);
    assert!(none.body.contains(r#"<fieldset id="event-types" aria-describedby="event-types-error">"#), "{}", none.body);
    assert!(none.body.contains(r#"<p class="field-error" id="event-types-error">"#), "{}", none.body);
}

#[tokio::test]
async fn suppressions_are_added_found_and_removed() {
    let app = TestApp::new().await;
    let browser = app.sign_in(&app.key).await;
    assert_eq!(browser.post("/suppressions", &[("email", "Gone@Example.com")]).await.status, StatusCode::SEE_OTHER);
    let found = browser.get("/suppressions?email=gone%40example.com").await;
    assert!(
        found.body.contains(r#"data-email="Gone@Example.com""#) || found.body.contains("gone@example.com"),
        "{}",
        found.body
    );
    let none = browser.get("/suppressions?email=other%40example.com").await;
    assert!(none.body.contains("No suppressed addresses match"));
    let by_reason = browser.get("/suppressions?reason=HardBounce").await;
    assert!(!by_reason.body.contains("Gone@Example.com"));
    let bad = browser.get("/suppressions?reason=Nope").await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    let removed = browser.post("/suppressions/Gone%40Example.com/delete", YES).await;
    assert_eq!(removed.status, StatusCode::SEE_OTHER, "{}", removed.body);
    assert_eq!(browser.post("/suppressions/Gone%40Example.com/delete", YES).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_html_only_message_shows_the_text_part_it_went_out_with_and_its_subject_as_the_title() {
    let app = TestApp::new().await;
    app.verified_domain("text.example").await;
    let send = |html: &str, text: Option<&str>| SendRequest {
        to: Some("a@example.com".into()),
        subject: Some("Receipt & <thanks>".into()),
        html: Some(html.into()),
        text: text.map(Into::into),
        ..SendRequest::default()
    };
    let html_only = app.core.messages().send(&app.principal, send("<p>Paid <b>42</b></p>", None), None).await.unwrap();
    let opted_out = app.core.messages().send(&app.principal, send("<p>Paid</p>", Some("")), None).await.unwrap();

    let browser = app.sign_in(&app.key).await;
    let page = browser.get(&format!("/messages/{}", html_only.message.id)).await;
    assert!(page.body.contains(r#"<p class="muted" id="text-generated">"#), "{}", page.body);
    assert!(page.body.contains("Paid 42"), "the generated text: {}", page.body);
    assert!(
        page.body.contains("<title>Receipt &amp; &lt;thanks&gt;"),
        "the subject is the title, escaped: {}",
        page.body
    );
    assert!(page.body.contains(&format!(r#"data-copy="{}""#, html_only.message.id)), "a copy button for the id");
    let page = browser.get(&format!("/messages/{}", opted_out.message.id)).await;
    assert!(page.body.contains("the send asked for the HTML alone") && !page.body.contains("text-generated"));
}

#[tokio::test]
async fn a_delivered_outbox_message_offers_its_eml_and_nothing_else_can_be_fetched() {
    let app = TestApp::new().await;
    app.verified_domain("eml.example").await;
    let req = SendRequest {
        to: Some("a@example.com".into()),
        subject: Some("s".into()),
        text: Some("t".into()),
        ..SendRequest::default()
    };
    let message = app.core.messages().send(&app.principal, req, None).await.unwrap().message;
    let write = fixtures::event_write(&message, EventType::Sent, fixtures::now(), None);
    let provider_id = write.message.provider_message_id.clone().unwrap();
    app.store.record_event(write).await.unwrap();
    std::fs::write(app.outbox.path().join(format!("{provider_id}.eml")), b"DKIM-Signature: v=1\r\n\r\nbody\r\n")
        .unwrap();
    std::fs::write(app.outbox.path().join("secret.txt"), b"not for you").unwrap();

    let browser = app.sign_in(&app.key).await;
    let page = browser.get(&format!("/messages/{}", message.id)).await;
    assert!(page.body.contains(&format!(r#"<a id="eml" href="/messages/{}/eml""#, message.id)), "{}", page.body);
    let eml = browser.get(&format!("/messages/{}/eml", message.id)).await;
    assert_eq!(eml.status, StatusCode::OK);
    assert_eq!(eml.header("content-type"), "message/rfc822");
    assert_eq!(eml.header("content-disposition"), format!("attachment; filename=\"{}.eml\"", message.id));
    assert!(eml.body.starts_with("DKIM-Signature"));
    for path in ["/messages/..%2Fsecret.txt/eml", "/messages/secret.txt/eml", "/messages/%2e%2e/eml"] {
        let page = browser.get(path).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
        assert!(!page.body.contains("not for you"));
    }
}

#[tokio::test]
async fn a_delivered_event_says_how_the_connection_was_secured() {
    use tidings_core::model::{CertificateCheck, ConnectionTls, TlsVersion};
    let app = TestApp::new().await;
    app.verified_domain("tls.example").await;
    let mut shown = Vec::new();
    for tls in [
        ConnectionTls::Plaintext,
        ConnectionTls::Tls { certificate: CertificateCheck::Verified, version: Some(TlsVersion::Tls1_3) },
        ConnectionTls::Tls { certificate: CertificateCheck::invalid("<expired> certificate"), version: None },
    ] {
        let req = SendRequest {
            to: Some("a@example.com".into()),
            subject: Some("s".into()),
            text: Some("t".into()),
            ..SendRequest::default()
        };
        let message = app.core.messages().send(&app.principal, req, None).await.unwrap().message;
        let sent = fixtures::event_write(&message, EventType::Sent, fixtures::now(), None);
        let after = sent.message.clone();
        app.store.record_event(sent).await.unwrap();
        let mut delivered = fixtures::event_write(&after, EventType::Delivered, fixtures::now(), None);
        delivered.event.details.tls = Some(tls);
        app.store.record_event(delivered).await.unwrap();
        shown.push(message.id);
    }
    let browser = app.sign_in(&app.key).await;
    let expected = [
        "no TLS (plaintext)",
        "TLSv1.3, certificate verified",
        "TLS, certificate invalid: &lt;expired&gt; certificate",
    ];
    for (id, words) in shown.iter().zip(expected) {
        let page = browser.get(&format!("/messages/{id}")).await;
        assert!(page.body.contains(&format!(r#"<span class="tls">{words}</span>"#)), "{words}: {}", page.body);
    }
}

#[tokio::test]
async fn queued_messages_can_be_rescheduled_and_canceled_then_not_any_more() {
    let app = TestApp::new().await;
    app.verified_domain("sched.example").await;
    let req = SendRequest {
        to: Some("a@example.com".into()),
        subject: Some("s".into()),
        text: Some("t".into()),
        ..SendRequest::default()
    };
    let id = app.core.messages().send(&app.principal, req, None).await.unwrap().message.id.to_string();
    let browser = app.sign_in(&app.key).await;
    assert!(browser.get(&format!("/messages/{id}")).await.body.contains(r#"<form id="reschedule""#));
    let later = (app.clock_now() + chrono::Duration::days(2)).format("%Y-%m-%dT%H:%M").to_string();
    let moved = browser.post(&format!("/messages/{id}/reschedule"), &[("send_at", &later)]).await;
    assert_eq!(moved.status, StatusCode::SEE_OTHER, "{}", moved.body);
    assert!(browser.get(&format!("/messages/{id}")).await.body.contains(r#"data-status="Scheduled""#));
    let past = browser.post(&format!("/messages/{id}/reschedule"), &[("send_at", "2001-01-01T00:00")]).await;
    assert_eq!(past.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", past.body);
    let canceled = browser.post(&format!("/messages/{id}/cancel"), YES).await;
    assert_eq!(canceled.status, StatusCode::SEE_OTHER);
    let page = browser.get(&format!("/messages/{id}")).await;
    assert!(page.body.contains(r#"data-status="Canceled""#) && !page.body.contains(r#"id="reschedule""#));
    let again = browser.post(&format!("/messages/{id}/cancel"), YES).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn a_send_key_sees_only_its_own_messages_and_the_send_form() {
    let app = TestApp::new().await;
    app.verified_domain("own.example").await;
    let (send_key, _) = app.create_key("send", None).await;
    let send_who = app.core.authenticate(&send_key).await.unwrap();
    let req = |subject: &str| SendRequest {
        to: Some("a@example.com".into()),
        subject: Some(subject.into()),
        text: Some("t".into()),
        ..SendRequest::default()
    };
    let theirs = app.core.messages().send(&app.principal, req("full-key-subject"), None).await.unwrap().message.id;
    let mine = app.core.messages().send(&send_who, req("send-key-subject"), None).await.unwrap().message.id;
    let browser = app.sign_in(&send_key).await;
    let list = browser.get("/messages").await;
    assert!(
        list.body.contains(&format!(r#"data-id="{mine}""#)) && !list.body.contains(&format!(r#"data-id="{theirs}""#))
    );
    assert!(!list.body.contains("full-key-subject"));
    assert_eq!(browser.get(&format!("/messages/{theirs}")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(browser.get(&format!("/messages/{theirs}/html")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(browser.get(&format!("/messages/{mine}")).await.status, StatusCode::OK);
    assert_eq!(browser.get("/messages/new").await.status, StatusCode::OK);
    let sent = browser.post("/messages", &[("to", "b@example.com"), ("subject", "s"), ("text", "t")]).await;
    assert_eq!(sent.status, StatusCode::SEE_OTHER, "{}", sent.body);
    for path in ["/domains", "/templates", "/suppressions", "/webhooks", "/keys"] {
        let page = browser.get(path).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{path}");
        assert!(page.body.contains("send scope") && page.body.contains(r#"<nav id="nav""#), "{path}: {}", page.body);
    }
}

#[tokio::test]
async fn bad_input_is_a_page_naming_it_never_a_500() {
    let app = TestApp::new().await;
    let browser = app.sign_in(&app.key).await;
    let gets = [
        "/messages/%FF%FE",
        "/messages/not-an-id",
        "/messages?status=Nope",
        "/messages?cursor=zzz",
        "/messages?metadata=nocolon",
        "/messages?to=%00",
        "/messages?tag=bad%20tag",
        "/domains/x",
        "/domains?cursor=%FF",
        "/templates/1",
        "/webhooks/..",
        "/keys?cursor=-1",
        "/messages/01ARZ3NDEKTSV4RRFFQ69G5FAV/eml",
    ];
    for path in gets {
        let page = browser.get(path).await;
        assert!(page.status.is_client_error(), "{path}: {}", page.status);
        assert!(page.body.contains(r#"<main id="content">"#), "{path}: a page");
    }
    let posts: [(&str, &[(&str, &str)]); 6] = [
        ("/domains", &[("name", "not a domain!")]),
        ("/domains", &[]),
        ("/templates", &[("name", "")]),
        ("/keys", &[("scope", "root"), ("domain_id", "nope")]),
        ("/webhooks", &[("url", "ftp://x")]),
        ("/suppressions", &[("email", "nobody")]),
    ];
    for (path, fields) in posts {
        let page = browser.post(path, fields).await;
        assert!(page.status.is_client_error(), "{path} {fields:?}: {}", page.status);
        assert!(page.body.contains(r#"id="error""#), "{path}: says what is wrong");
    }
    let raw = app
        .send(
            axum::http::Request::post("/suppressions")
                .header("cookie", format!("__Host-tidings_session={}", browser.token))
                .body(axum::body::Body::from(vec![0xffu8, 0xfe, 0x00]))
                .unwrap(),
        )
        .await;
    assert_eq!(raw.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_message_list_pages_with_a_cursor_and_keeps_its_filters() {
    let app = TestApp::new().await;
    app.verified_domain("paging.example").await;
    for i in 0..52 {
        let to = if i % 2 == 0 { "even@example.com" } else { "odd@example.com" };
        let req = SendRequest {
            to: Some(to.into()),
            subject: Some(format!("n{i}")),
            text: Some("t".into()),
            ..SendRequest::default()
        };
        app.core.messages().send(&app.principal, req, None).await.unwrap();
    }
    let browser = app.sign_in(&app.key).await;
    let first = browser.get("/messages").await;
    assert_eq!(first.body.matches("<tr data-id=").count(), 50);
    let at = first.body.find(r#"<a class="next" href=""#).expect("a.next") + r#"<a class="next" href=""#.len();
    let next = first.body[at..].split('"').next().unwrap().replace("&amp;", "&");
    assert!(next.starts_with("/messages?cursor="), "{next}");
    let second = browser.get(&next).await;
    assert_eq!(second.body.matches("<tr data-id=").count(), 2);
    assert!(!second.body.contains(r#"class="next""#), "the last page");
    let queued = browser.get("/messages?status=Queued").await;
    assert!(queued.body.contains(r#"<a class="next" href="/messages?status=Queued&amp;cursor="#), "the filter stays");
    let filtered = browser.get("/messages?to=odd%40example.com").await;
    assert_eq!(filtered.body.matches("<tr data-id=").count(), 26);
    assert!(!filtered.body.contains("even@example.com"));
}

#[tokio::test]
async fn the_message_list_finds_by_part_of_a_subject_and_pages_back_with_its_filters() {
    let app = TestApp::new().await;
    app.verified_domain("search.example").await;
    for i in 0..53 {
        let subject = if i == 0 { "Welcome aboard".to_owned() } else { format!("Your Receipt n{i}") };
        let req = SendRequest {
            to: Some("ann@example.com".into()),
            subject: Some(subject),
            text: Some("t".into()),
            ..SendRequest::default()
        };
        app.core.messages().send(&app.principal, req, None).await.unwrap();
    }
    let browser = app.sign_in(&app.key).await;
    let href = |body: &str, class: &str| {
        let marker = format!(r#"<a class="{class}" href=""#);
        let at = body.find(&marker).unwrap_or_else(|| panic!("a.{class}")) + marker.len();
        body[at..].split('"').next().unwrap().replace("&amp;", "&")
    };
    let first = browser.get("/messages?q=CEIPT").await;
    assert_eq!(first.body.matches("<tr data-id=").count(), 50);
    assert!(!first.body.contains("Welcome aboard"));
    assert!(!first.body.contains(r#"class="prev""#), "the first page has no newer one");
    let older = href(&first.body, "next");
    assert!(older.starts_with("/messages?q=CEIPT&cursor="), "{older}");
    let second = browser.get(&older).await;
    assert_eq!(second.body.matches("<tr data-id=").count(), 2);
    let newer = href(&second.body, "prev");
    assert!(newer.starts_with("/messages?q=CEIPT&endingBefore="), "{newer}");
    let back = browser.get(&newer).await;
    assert_eq!(back.body.matches("<tr data-id=").count(), 50);
    assert!(!back.body.contains(r#"class="prev""#), "back on the newest page");
    assert!(back.body.contains(r#"class="next""#));

    let none = browser.get("/messages?q=no+such+thing&status=Bounced").await;
    assert!(none.body.contains("No messages match \u{201c}no such thing\u{201d}, status Bounced."), "{}", none.body);
    let short = browser.get("/messages?q=ab").await;
    assert_eq!(short.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(short.body.contains(r#"aria-invalid="true" aria-describedby="q-error""#), "{}", short.body);
    assert!(short.body.contains(r#"id="q-error""#));
    let bad_range = browser.get("/messages?createdAfter=2026-05-02&createdBefore=2026-05-01").await;
    assert_eq!(bad_range.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad_range.body.contains(r#"aria-describedby="createdBefore-error""#), "{}", bad_range.body);
}

#[tokio::test]
async fn a_time_from_a_link_stays_a_time_in_the_date_range() {
    let app = TestApp::new().await;
    let browser = app.sign_in(&app.key).await;
    let page = browser.get("/messages?createdAfter=2026-12-05T13:00:00Z&createdBefore=2026-12-06").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains(r#"id="createdAfter" type="text" name="createdAfter" value="2026-12-05T13:00:00Z""#),
        "{}",
        page.body
    );
    assert!(page.body.contains(r#"id="createdBefore" type="date" name="createdBefore" value="2026-12-06""#));
}
