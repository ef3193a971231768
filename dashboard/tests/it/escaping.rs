//! A message whose every field a sender controls holds markup: the pages show it as text,
//! and its HTML is only ever served as a sandboxed document under its own policy, framed by
//! `<iframe sandbox>`. Mail received is held to the same, and its raw bytes and attachments
//! are downloads only.

use axum::http::StatusCode;
use tidings_core::model::EventType;
use tidings_core::ports::MessageStore;
use tidings_core::usecases::{SendRequest, TagRequest};
use tidings_dashboard::{MESSAGE_HTML_CSP, MESSAGE_HTML_IMAGES_CSP};
use tidings_testing::fixtures;

use crate::support::{TestApp, store_inbound};

const SCRIPT: &str = "<script>alert(1)</script>";

#[tokio::test]
async fn markup_in_a_message_is_shown_as_text_everywhere() {
    let app = TestApp::new().await;
    app.verified_domain("evil.example").await;
    let req = SendRequest {
        to: Some("victim@example.com".into()),
        from: Some(format!("\"{SCRIPT}\" <mallory@evil.example>")),
        subject: Some(format!("{SCRIPT} subject")),
        text: Some(format!("{SCRIPT} text")),
        html: Some(format!(
            "<p>hello</p>{SCRIPT}<img src=\"https://tracker.example/pixel.gif\"><a href=\"javascript:alert(2)\">x</a>"
        )),
        headers: Some(serde_json::json!({"X-Evil": SCRIPT})),
        tags: Some(vec![TagRequest { name: "evil".into(), value: "<b>bold</b>".into() }]),
        metadata: Some(serde_json::json!({"<i>key</i>": SCRIPT})),
        reply_to: Some(serde_json::json!("reply@evil.example")),
        ..SendRequest::default()
    };
    let sent = app.core.messages().send(&app.principal, req, None).await.expect("the hostile send is accepted");
    let message = sent.message;
    // An event whose remote answer holds markup too.
    let mut write = fixtures::event_write(&message, EventType::Sent, fixtures::now(), None);
    write.event.details.response = Some(SCRIPT.into());
    app.store.record_event(write).await.unwrap();

    let browser = app.sign_in(&app.key).await;
    let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
    for path in
        [format!("/messages/{}", message.id), "/messages".to_owned(), "/messages?to=victim%40example.com".to_owned()]
    {
        let page = browser.get(&path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(!page.body.contains(SCRIPT), "{path} holds the raw script: {}", page.body);
        assert!(!page.body.contains("<b>bold</b>") && !page.body.contains("<i>key</i>"), "{path}");
        assert!(page.body.contains(escaped), "{path} shows it as text");
    }
    let page = browser.get(&format!("/messages/{}", message.id)).await;
    assert!(
        page.body.matches(escaped).count() >= 6,
        "subject, from (twice), text, header, metadata, event: {}",
        page.body
    );
    assert!(page.body.contains("&lt;b&gt;bold&lt;/b&gt;") && page.body.contains("&lt;i&gt;key&lt;/i&gt;"));
    // The HTML is never markup of the page: it is rendered only in the frame, and shown as
    // text in the source (escaped, inside `pre#source`), nowhere else.
    assert!(
        !page.body.contains("<img") && !page.body.contains("<a href=\"javascript"),
        "no markup of it: {}",
        page.body
    );
    let (before, from_source) = page.body.split_once(r#"<pre id="source">"#).expect("the source is on the page");
    assert!(!before.contains("tracker.example"), "the HTML is not inlined above the source");
    let source = from_source.split("</pre>").next().unwrap_or_default();
    assert!(source.contains("tracker.example") && source.contains("&lt;img"), "the source shows it as text: {source}");
    assert!(!from_source[source.len()..].contains("tracker.example"), "nor after it");
    let frame = format!(r#"<iframe id="preview" sandbox="" src="/messages/{}/html""#, message.id);
    assert!(page.body.contains(&frame), "a sandboxed frame without allow-*: {}", page.body);
    assert!(!page.body.contains("allow-scripts") && !page.body.contains("allow-same-origin"));
}

#[tokio::test]
async fn the_message_html_is_a_sandboxed_document_that_loads_nothing_unless_asked() {
    let app = TestApp::new().await;
    app.verified_domain("frame.example").await;
    let html = format!("{SCRIPT}<img src=\"https://tracker.example/p.gif\"><img src=\"data:image/gif;base64,R0lGOD\">");
    let req = SendRequest {
        to: Some("a@example.com".into()),
        subject: Some("s".into()),
        html: Some(html.clone()),
        tracking: Some(tidings_core::usecases::TrackingRequest { opens: Some(true), clicks: Some(true) }),
        ..SendRequest::default()
    };
    let message = app.core.messages().send(&app.principal, req, None).await.unwrap().message;
    let browser = app.sign_in(&app.key).await;

    let doc = browser.get(&format!("/messages/{}/html", message.id)).await;
    assert_eq!(doc.status, StatusCode::OK);
    assert!(doc.header("content-type").starts_with("text/html"));
    let policy = doc.header("content-security-policy");
    assert_eq!(policy, MESSAGE_HTML_CSP);
    for directive in ["default-src 'none'", "img-src data:;", "sandbox", "frame-ancestors 'self'"] {
        assert!(policy.contains(directive), "{directive} in {policy}");
    }
    assert!(
        !policy.contains("allow-scripts") && !policy.contains("allow-same-origin") && !policy.contains("script-src")
    );
    assert_eq!(doc.header("x-frame-options"), "SAMEORIGIN", "framable by the dashboard only");
    // The HTML as accepted: with open tracking asked for, still no pixel (tracking is added on
    // the way out), and never a tracking URL.
    assert_eq!(doc.body, html);
    assert!(!doc.body.contains("/t/o/"));

    let with_images = browser.get(&format!("/messages/{}/html?images=1", message.id)).await;
    assert_eq!(with_images.header("content-security-policy"), MESSAGE_HTML_IMAGES_CSP);
    assert!(
        MESSAGE_HTML_IMAGES_CSP.contains("img-src data: https: http:") && MESSAGE_HTML_IMAGES_CSP.contains("sandbox")
    );
    let page = browser.get(&format!("/messages/{}?images=1", message.id)).await;
    assert!(page.body.contains(&format!(r#"src="/messages/{}/html?images=1""#, message.id)));

    // Without a session the document is not served at all.
    let anonymous = app.get(&format!("/messages/{}/html", message.id)).await;
    assert_eq!((anonymous.status, anonymous.location()), (StatusCode::SEE_OTHER, "/"));
}

#[tokio::test]
async fn markup_in_received_mail_is_text_on_every_page_and_its_html_only_in_the_frame() {
    let app = TestApp::new().await;
    let raw = format!(
        "From: \"{SCRIPT}\" <mallory@evil.example>\r\nTo: \"{SCRIPT}\" <help@in.example>\r\nSubject: {SCRIPT} subject\r\n\
         Message-ID: <{SCRIPT}@evil.example>\r\nX-Evil: {SCRIPT}\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=outer\r\n\r\n\
         --outer\r\nContent-Type: multipart/alternative; boundary=alt\r\n\r\n\
         --alt\r\nContent-Type: text/plain\r\n\r\n{SCRIPT} text\r\n\
         --alt\r\nContent-Type: text/html\r\n\r\n<p>hello</p>{SCRIPT}<img src=\"https://tracker.example/pixel.gif\">\
         <link rel=prefetch href=\"https://tracker.example/prefetch\">\r\n--alt--\r\n\
         --outer\r\nContent-Type: text/html; name=\"{SCRIPT}.html\"\r\n\
         Content-Disposition: attachment; filename=\"{SCRIPT}.html\"\r\n\r\n{SCRIPT}\r\n--outer--\r\n"
    );
    let message = store_inbound(&app.core, app.workspace(), raw.as_bytes(), "help@in.example", |m| {
        m.envelope.helo = SCRIPT.into();
        m.envelope.mail_from = Some(format!("{SCRIPT}@evil.example"));
        m.auth.dkim.domain = Some(SCRIPT.into());
        m.auth.dkim.selector = Some(SCRIPT.into());
    })
    .await;
    assert_eq!(message.parsed.attachments[0].filename.as_deref(), Some(format!("{SCRIPT}.html").as_str()));
    let browser = app.sign_in(&app.key).await;
    let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
    for path in [format!("/inbound/{}", message.id), "/inbound".to_owned(), "/inbound?to=help%40in.example".to_owned()]
    {
        let page = browser.get(&path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(!page.body.contains(SCRIPT), "{path} holds the raw script: {}", page.body);
        assert!(page.body.contains(escaped), "{path} shows it as text");
        assert!(!page.body.contains("tracker.example"), "{path} holds none of the HTML");
    }
    let page = browser.get(&format!("/inbound/{}", message.id)).await;
    assert!(
        page.body.matches(escaped).count() >= 12,
        "from, to, subject (and title), Message-ID, envelope, EHLO, DKIM domain and selector, text, file name \
         (twice), header values: {}",
        page.body
    );
    assert!(!page.body.contains("<img") && !page.body.contains("<p>hello"), "no markup of it: {}", page.body);
    let frame = format!(r#"<iframe id="preview" sandbox="" src="/inbound/{}/html""#, message.id);
    assert!(page.body.contains(&frame), "a sandboxed frame without allow-*: {}", page.body);
    assert!(!page.body.contains("allow-scripts") && !page.body.contains("allow-same-origin"));

    // The frame's document: the HTML under the message policy, without what connects out.
    let doc = browser.get(&format!("/inbound/{}/html", message.id)).await;
    assert_eq!(doc.header("content-security-policy"), MESSAGE_HTML_CSP);
    assert!(
        doc.body.contains(SCRIPT) && doc.body.contains("pixel.gif") && !doc.body.contains("prefetch"),
        "{}",
        doc.body
    );
    let doc = browser.get(&format!("/inbound/{}/html?images=1", message.id)).await;
    assert_eq!(doc.header("content-security-policy"), MESSAGE_HTML_IMAGES_CSP);

    // The HTML attachment and the raw message are downloads, never documents of this origin.
    let file = browser.get(&format!("/inbound/{}/attachments/0", message.id)).await;
    assert_eq!(file.status, StatusCode::OK);
    assert_eq!(file.header("content-type"), "application/octet-stream", "not the text/html it declared");
    let disposition = file.header("content-disposition");
    assert!(disposition.starts_with(r#"attachment; filename="_script_alert_1___script_.html""#), "{disposition}");
    assert!(!disposition.contains('<'), "{disposition}");
    assert_eq!(file.header("x-content-type-options"), "nosniff");
    let raw_page = browser.get(&format!("/inbound/{}/raw", message.id)).await;
    assert_eq!(raw_page.header("content-type"), "text/plain; charset=utf-8");
    assert_eq!(raw_page.header("x-content-type-options"), "nosniff");
    assert!(raw_page.header("content-security-policy").contains("sandbox"));

    // Without a session none of it is served.
    for path in ["html", "raw", "attachments/0"] {
        let anonymous = app.get(&format!("/inbound/{}/{path}", message.id)).await;
        assert_eq!((anonymous.status, anonymous.location()), (StatusCode::SEE_OTHER, "/"), "{path}");
    }
}

#[tokio::test]
async fn markup_in_a_route_match_typed_into_the_form_is_shown_as_text() {
    let app = TestApp::new().await;
    let browser = app.sign_in(&app.key).await;
    let page = browser.post("/inbound/routes", &[("match", SCRIPT), ("action", SCRIPT)]).await;
    assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(!page.body.contains(SCRIPT), "{}", page.body);
    assert!(page.body.contains(r#"value="&lt;script&gt;alert(1)&lt;/script&gt;""#));
}
