//! Mail received (contract §13) as a person sees it: the list with its filters and paging,
//! a message's page with its authentication results, reply, attachments and headers, the
//! downloads, the routes and the domain's receive-mail switch.

use axum::http::StatusCode;
use chrono::Duration;
use tidings_core::ids::DomainId;
use tidings_core::model::{AuthCheck, AuthOutcome, AuthResults};
use tidings_core::usecases::{CreateWebhookRequest, SendRequest};

use crate::support::{INBOUND_MX_HOST, TestApp, store_inbound};

/// A message with a text part, an HTML part and one attachment, `{from}`, `{to}` and
/// `{subject}` filled in.
fn mail(from: &str, to: &str, subject: &str) -> String {
    format!(
        "From: {from}\r\nTo: {to}\r\nCc: Carl <carl@sender.example>\r\nSubject: {subject}\r\n\
         Message-ID: <m1@sender.example>\r\nIn-Reply-To: <elsewhere@sender.example>\r\nX-Mailer: Example 1.0\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=outer\r\n\r\n\
         --outer\r\nContent-Type: multipart/alternative; boundary=alt\r\n\r\n\
         --alt\r\nContent-Type: text/plain\r\n\r\nYes, Friday works.\r\n\r\nOn Monday, Ann wrote:\r\n> Does Friday work?\r\n\
         --alt\r\nContent-Type: text/html\r\n\r\n<p>Yes, Friday works.</p>\r\n--alt--\r\n\
         --outer\r\nContent-Type: text/csv; name=\"list.csv\"\r\nContent-Disposition: attachment; filename=\"list.csv\"\r\n\r\n\
         a,b\r\n1,2\r\n--outer--\r\n"
    )
}

#[tokio::test]
async fn received_mail_is_listed_newest_first_with_its_checks_and_filtered_by_to_and_from() {
    let app = TestApp::new().await;
    let ws = app.workspace();
    let first = mail("Ann <ann@sender.example>", "help@in.example", "First");
    store_inbound(&app.core, ws, first.as_bytes(), "help@in.example", |m| {
        m.auth.spf = AuthCheck { result: AuthOutcome::Pass, ..AuthCheck::absent() };
        m.auth.dmarc = AuthCheck { result: AuthOutcome::Fail, ..AuthCheck::absent() };
    })
    .await;
    app.clock.advance(Duration::minutes(1));
    let second = mail("Bob <bob@other.example>", "sales@in.example", "Second");
    store_inbound(&app.core, ws, second.as_bytes(), "sales@in.example", |_| {}).await;
    let browser = app.sign_in(&app.key).await;

    let list = browser.get("/inbound").await;
    assert_eq!(list.status, StatusCode::OK);
    let body = &list.body;
    assert!(body.contains(r#"<table class="fixed" id="inbound">"#), "{body}");
    let (at_first, at_second) = (body.find(">First<").unwrap(), body.find(">Second<").unwrap());
    assert!(at_second < at_first, "newest first");
    assert!(body.contains("Ann &lt;ann@sender.example&gt;") && body.contains("sales@in.example"));
    assert!(body.contains(r#"data-check="spf" data-result="pass""#) && body.contains("SPF pass"));
    assert!(body.contains(r#"data-check="dmarc" data-result="fail""#));
    assert!(body.contains(r#"data-check="dkim" data-result="none""#));
    assert!(body.contains(r#"<td class="attachments" data-label="Files">1</td>"#), "one file each: {body}");
    assert!(body.contains(r#"href="/inbound/routes""#));
    assert!(body.contains(r#"<li><a href="/inbound">Inbound</a></li>"#), "in the navigation");

    let to = browser.get("/inbound?to=HELP%40in.example").await;
    assert!(to.body.contains(">First<") && !to.body.contains(">Second<"), "to is an envelope recipient, any case");
    assert!(to.body.contains(r#"value="HELP@in.example""#), "the filter is shown again");
    let from = browser.get("/inbound?from=bob%40other.example").await;
    assert!(from.body.contains(">Second<") && !from.body.contains(">First<"));
    let none = browser.get("/inbound?from=nobody%40x.example").await;
    assert!(none.body.contains("No received mail matches from nobody@x.example."), "{}", none.body);

    let bad = browser.get("/inbound?to=not-an-address").await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.body.contains(r#"aria-invalid="true" aria-describedby="to-error""#), "{}", bad.body);
    assert!(bad.body.contains("is not an email address"));
}

#[tokio::test]
async fn an_empty_inbox_says_how_to_receive_mail() {
    let app = TestApp::new().await;
    let browser = app.sign_in(&app.key).await;
    let page = browser.get("/inbound").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(r#"<div id="inbound-empty">"#), "{}", page.body);
    assert!(page.body.contains("Receive mail") && page.body.contains("Inbound MX record"));
    assert!(page.body.contains(r#"<a href="/domains">"#) && page.body.contains(r#"<a href="/inbound/routes">"#));
}

#[tokio::test]
async fn the_inbound_list_pages_older_mail_with_its_filters() {
    let app = TestApp::new().await;
    let raw = mail("Ann <ann@sender.example>", "help@in.example", "Paged");
    for _ in 0..51 {
        store_inbound(&app.core, app.workspace(), raw.as_bytes(), "help@in.example", |_| {}).await;
        app.clock.advance(Duration::seconds(1));
    }
    let browser = app.sign_in(&app.key).await;
    let first = browser.get("/inbound?to=help%40in.example").await;
    assert_eq!(first.body.matches("<tr data-id=").count(), 50);
    let at =
        first.body.find(r#"<a class="next" href=""#).expect("a link to older mail") + r#"<a class="next" href=""#.len();
    let href = first.body[at..].split('"').next().unwrap().replace("&amp;", "&");
    assert!(href.starts_with("/inbound?to=help%40in.example&cursor="), "{href}");
    let second = browser.get(&href).await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.body.matches("<tr data-id=").count(), 1);
    assert!(!second.body.contains(r#"class="next""#));
}

#[tokio::test]
async fn a_received_message_shows_who_checks_reply_text_html_files_and_headers() {
    let app = TestApp::new().await;
    app.verified_domain("in.example").await;
    let sent = SendRequest {
        to: Some("ann@sender.example".into()),
        subject: Some("Friday?".into()),
        text: Some("Does Friday work?".into()),
        ..SendRequest::default()
    };
    let sent = app.core.messages().send(&app.principal, sent, None).await.unwrap().message;
    let raw = mail("Ann <ann@sender.example>", "Help <help@in.example>", "Re: Friday?");
    let received = store_inbound(&app.core, app.workspace(), raw.as_bytes(), "help@in.example", |m| {
        m.in_reply_to_message_id = Some(sent.id);
        m.auth = AuthResults {
            spf: AuthCheck {
                result: AuthOutcome::SoftFail,
                domain: Some("sender.example".into()),
                ..AuthCheck::absent()
            },
            dkim: AuthCheck {
                result: AuthOutcome::Pass,
                domain: Some("sender.example".into()),
                selector: Some("s2026".into()),
                policy: None,
            },
            dmarc: AuthCheck {
                result: AuthOutcome::Pass,
                domain: Some("sender.example".into()),
                policy: Some("reject".into()),
                selector: None,
            },
        };
    })
    .await;
    let browser = app.sign_in(&app.key).await;
    let page = browser.get(&format!("/inbound/{}", received.id)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;
    assert!(body.contains("<title>Re: Friday? · Tidings</title>"), "titled by its subject");
    assert!(body.contains(r#"<dd class="mono" id="inbound-from">Ann &lt;ann@sender.example&gt;</dd>"#), "{body}");
    assert!(body.contains("Help &lt;help@in.example&gt;") && body.contains("Carl &lt;carl@sender.example&gt;"));
    assert!(body.contains("&lt;m1@sender.example&gt;"), "the Message-ID");
    assert!(body.contains(&format!(r#"<a id="in-reply-to" href="/messages/{}">"#, sent.id)), "the message it answers");
    for row in [
        r#"<tr data-check="spf" data-result="softfail">"#,
        r#"<tr data-check="dkim" data-result="pass">"#,
        r#"<tr data-check="dmarc" data-result="pass">"#,
    ] {
        assert!(body.contains(row), "{row}");
    }
    assert!(body.contains(">s2026<") && body.contains(">reject<"), "the selector and the policy");
    assert!(
        body.contains(r#"<pre id="inbound-reply">Yes, Friday works.</pre>"#),
        "the reply without its quote: {body}"
    );
    assert!(body.contains(r#"<pre id="text-body">Yes, Friday works."#) && body.contains("&gt; Does Friday work?"));
    let frame = format!(r#"<iframe id="preview" sandbox="" src="/inbound/{}/html""#, received.id);
    assert!(body.contains(&frame), "the HTML in the sandboxed frame");
    assert!(!body.contains("<p>Yes, Friday works.</p>"), "and nowhere on the page");
    let link = format!(
        r#"<a class="download" href="/inbound/{}/attachments/0" download="list.csv">list.csv</a>"#,
        received.id
    );
    assert!(body.contains(&link), "{body}");
    assert!(
        body.contains(r#"<details id="all-headers">"#) && body.contains(">X-Mailer<") && body.contains(">Example 1.0<")
    );
    assert!(body.contains(&format!(r#"href="/inbound/{}/raw?download=1""#, received.id)));

    let html = browser.get(&format!("/inbound/{}/html", received.id)).await;
    assert_eq!(html.header("content-security-policy"), tidings_dashboard::MESSAGE_HTML_CSP);
    assert_eq!(html.body, "<p>Yes, Friday works.</p>");

    let file = browser.get(&format!("/inbound/{}/attachments/0", received.id)).await;
    assert_eq!(file.status, StatusCode::OK);
    assert_eq!(file.body, "a,b\r\n1,2");
    assert_eq!(file.header("content-type"), "application/octet-stream");
    assert!(file.header("content-disposition").starts_with(r#"attachment; filename="list.csv""#));
    assert_eq!(file.header("x-content-type-options"), "nosniff");
    assert!(file.header("content-security-policy").contains("sandbox"));
    for missing in ["7", "x", "-1"] {
        let page = browser.get(&format!("/inbound/{}/attachments/{missing}", received.id)).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "attachment {missing}");
    }

    let text = browser.get(&format!("/inbound/{}/raw", received.id)).await;
    assert_eq!(text.body, raw, "byte for byte");
    assert_eq!(text.header("content-type"), "text/plain; charset=utf-8");
    assert_eq!(text.header("x-content-type-options"), "nosniff");
    assert_eq!(text.header("content-disposition"), "");
    let eml = browser.get(&format!("/inbound/{}/raw?download=1", received.id)).await;
    assert_eq!(eml.header("content-type"), "message/rfc822");
    assert!(eml.header("content-disposition").starts_with(&format!(r#"attachment; filename="{}.eml""#, received.id)));

    let unknown = browser.get("/inbound/01J0000000000000000000000Z").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(browser.get("/inbound/not-an-id/raw").await.status == StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn routes_are_added_with_an_inbound_endpoint_refused_when_wrong_and_deleted_after_asking() {
    let app = TestApp::new().await;
    app.verified_domain("in.example").await;
    let hook = |url: &str, events: &[&str]| CreateWebhookRequest {
        url: Some(url.into()),
        event_types: Some(events.iter().map(|e| (*e).to_owned()).collect()),
        enabled: Some(true),
        format: None,
    };
    let inbound =
        app.core.webhooks().create(&app.principal, hook("https://hooks.example.com/in", &["InboundReceived"])).await;
    let inbound = inbound.unwrap();
    let other = app.core.webhooks().create(&app.principal, hook("https://hooks.example.com/out", &["Delivered"])).await;
    let other = other.unwrap();
    let browser = app.sign_in(&app.key).await;

    let page = browser.get("/inbound/routes").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(r#"<form id="create-route""#) && page.body.contains("No routes"));
    assert!(page.body.contains(&format!(r#"<option value="{}">https://hooks.example.com/in</option>"#, inbound.id)));
    assert!(!page.body.contains(&other.id.to_string()), "only endpoints subscribed to InboundReceived are offered");

    let id = inbound.id.to_string();
    let made = browser
        .post("/inbound/routes", &[("match", "help@in.example"), ("action", "webhook"), ("webhook_id", &id)])
        .await;
    assert_eq!((made.status, made.location()), (StatusCode::SEE_OTHER, "/inbound/routes"), "{}", made.body);
    // The endpoint select keeps its value when another action is chosen: it is not sent.
    let made =
        browser.post("/inbound/routes", &[("match", "*@in.example"), ("action", "store"), ("webhook_id", &id)]).await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    let list = browser.get("/inbound/routes").await;
    assert!(list.body.contains(r#"data-action="webhook""#) && list.body.contains(r#"data-action="store""#));
    assert!(list.body.contains(&format!(r#"href="/webhooks/{id}" title="https://hooks.example.com/in""#)));

    let without = browser
        .post("/inbound/routes", &[("match", "sales@in.example"), ("action", "webhook"), ("webhook_id", "")])
        .await;
    assert_eq!(without.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(without.body.contains(r#"aria-describedby="webhook_id-error""#), "{}", without.body);
    assert!(without.body.contains(r#"value="sales@in.example""#), "what was typed stays");
    let subscribed_elsewhere = other.id.to_string();
    let wrong = browser
        .post(
            "/inbound/routes",
            &[("match", "sales@in.example"), ("action", "webhook"), ("webhook_id", &subscribed_elsewhere)],
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(wrong.body.contains("does not subscribe to InboundReceived"));
    let foreign = browser.post("/inbound/routes", &[("match", "a@elsewhere.example"), ("action", "store")]).await;
    assert_eq!(foreign.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        foreign.body.contains(r#"aria-describedby="match-error""#)
            && foreign.body.contains("not a domain of this workspace")
    );
    let twice = browser.post("/inbound/routes", &[("match", "HELP@in.example"), ("action", "reject")]).await;
    assert_eq!(twice.status, StatusCode::CONFLICT, "{}", twice.body);

    let routes = app.core.inbound_routes().list(&app.principal).await.unwrap();
    assert_eq!(routes.len(), 2);
    let delete = format!("/inbound/routes/{}/delete", routes[0].id);
    let ask = browser.post(&delete, &[]).await;
    assert_eq!(ask.status, StatusCode::OK);
    assert!(ask.body.contains(r#"<form class="danger" id="confirm-form""#) && ask.body.contains("help@in.example"));
    assert_eq!(app.core.inbound_routes().list(&app.principal).await.unwrap().len(), 2, "nothing deleted yet");
    let done = browser.post(&delete, &[("confirm", "yes")]).await;
    assert_eq!((done.status, done.location()), (StatusCode::SEE_OTHER, "/inbound/routes"));
    assert_eq!(app.core.inbound_routes().list(&app.principal).await.unwrap().len(), 1);
    assert_eq!(browser.post(&delete, &[("confirm", "yes")]).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_domain_switches_receiving_on_and_off_and_lists_its_inbound_mx_record() {
    let app = TestApp::receiving().await;
    let id = app.verified_domain("in.example").await;
    let browser = app.sign_in(&app.key).await;
    let page = browser.get(&format!("/domains/{id}")).await;
    assert!(page.body.contains(r#"<form id="inbound" method="post""#), "{}", page.body);
    assert!(page.body.contains(r#"data-inbound="false""#) && !page.body.contains(r#"data-kind="Inbound""#));

    let on = browser.post(&format!("/domains/{id}/inbound"), &[("inbound", "on")]).await;
    assert_eq!((on.status, on.location()), (StatusCode::SEE_OTHER, format!("/domains/{id}#receiving").as_str()));
    let page = browser.get(&format!("/domains/{id}")).await;
    assert!(page.body.contains(r#"data-inbound="true" data-receiving="false""#), "waiting for its MX: {}", page.body);
    let row = page
        .body
        .split(r#"<tr data-kind="Inbound">"#)
        .nth(1)
        .expect("the Inbound record")
        .split("</tr>")
        .next()
        .unwrap();
    assert!(row.contains("Inbound (MX)") && row.contains("priority 10") && row.contains(INBOUND_MX_HOST), "{row}");
    assert!(row.contains(r#"data-status="Pending""#));
    assert!(page.body.contains(r#"id="inbound-on" type="checkbox" name="inbound" value="on" checked"#));
    assert!(app.core.domains().get(&app.principal, DomainId::parse_or_none(&id)).await.unwrap().inbound);

    let off = browser.post(&format!("/domains/{id}/inbound"), &[]).await;
    assert_eq!(off.status, StatusCode::SEE_OTHER);
    let page = browser.get(&format!("/domains/{id}")).await;
    assert!(page.body.contains(r#"data-inbound="false""#) && !page.body.contains(r#"data-kind="Inbound""#));
    // The tracking form leaves receiving as it is.
    browser.post(&format!("/domains/{id}/inbound"), &[("inbound", "on")]).await;
    browser.post(&format!("/domains/{id}/tracking"), &[("open", "on")]).await;
    assert!(app.core.domains().get(&app.principal, DomainId::parse_or_none(&id)).await.unwrap().inbound);
}

#[tokio::test]
async fn a_server_that_receives_no_mail_says_so_and_refuses_the_switch() {
    let app = TestApp::new().await;
    let id = app.verified_domain("in.example").await;
    let browser = app.sign_in(&app.key).await;
    let page = browser.get(&format!("/domains/{id}")).await;
    assert!(page.body.contains(r#"<p class="muted" id="inbound-note">This server receives no mail"#), "{}", page.body);
    assert!(!page.body.contains(r#"<form id="inbound""#));
    let refused = browser.post(&format!("/domains/{id}/inbound"), &[("inbound", "on")]).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.body.contains("TIDINGS_INBOUND_MX_HOST"), "{}", refused.body);
}
