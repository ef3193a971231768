//! The optional send fields through the router: what a send with them answers,
//! the 422s naming the field at fault, the `tag` and `metadata[key]` list filters, and the
//! larger body limit of the send route (other routes keep theirs).

use crate::support::TestApi;
use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use tidings_core::ids::DomainId;
use tidings_core::model::DomainStatus;
use tidings_http::{DEFAULT_MAX_SEND_BODY_BYTES, HttpConfig};

/// A Verified domain `acme.example.com` of the default workspace.
async fn verified_domain(api: &TestApi) {
    let r = api.post("/v1/domains", json!({ "domain": "acme.example.com" })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.data()["id"].as_str().unwrap().to_owned();
    let who = api.core.authenticate(&api.key).await.unwrap();
    let mut domain = api.core.domains().get(&who, DomainId::parse_or_none(&id)).await.unwrap();
    domain.status = DomainStatus::Verified;
    domain.verified_at = Some(domain.created_at);
    api.core.store().update_domain(&domain).await.unwrap();
}

/// `extra` on top of a plain valid send.
fn send(extra: Value) -> Value {
    let mut body = json!({
        "to": "ann@example.net",
        "from": "billing@acme.example.com",
        "subject": "Your invoice",
        "html": "<p><img src=\"cid:logo\"> Thanks</p>",
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn detail_fields(body: &Value) -> Vec<String> {
    body["error"]["details"].as_array().unwrap().iter().map(|d| d["field"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn a_send_with_every_field_shows_them_on_the_message_without_attachment_content() {
    let api = TestApi::new().await;
    verified_domain(&api).await;
    let pdf = STANDARD.encode(b"%PDF-1.7 invoice");

    let r = api
        .post(
            "/v1/messages",
            send(json!({
                "replyTo": "help@acme.example.com",
                "headers": {"X-Campaign": "spring", "List-Unsubscribe": "<https://acme.example.com/u/1>"},
                "tags": [{"name": "plan", "value": "pro"}],
                "metadata": {"orderId": "A-17"},
                "attachments": [
                    {"filename": "invoice.pdf", "contentType": "application/pdf", "content": pdf},
                    {"filename": "logo.png", "contentType": "image/png", "content": "iVBORw0KGgo=", "contentId": "logo"},
                ],
            })),
        )
        .await;

    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let m = r.data();
    assert_eq!(m["replyTo"], json!(["help@acme.example.com"]));
    assert_eq!(m["tags"], json!([{"name": "plan", "value": "pro"}]));
    assert_eq!(m["metadata"], json!({"orderId": "A-17"}));
    assert_eq!(
        m["attachments"],
        json!([
            {"filename": "invoice.pdf", "contentType": "application/pdf", "contentId": null, "size": 16},
            {"filename": "logo.png", "contentType": "image/png", "contentId": "logo", "size": 8},
        ])
    );
    assert!(!r.body.to_string().contains(&pdf), "the content is never returned");
    let got = api.get(&format!("/v1/messages/{}", m["id"].as_str().unwrap())).await;
    assert_eq!(got.data(), m);
    let plain = api.post("/v1/messages", send(json!({}))).await;
    assert_eq!(plain.data()["tags"], json!([]));
    assert_eq!(plain.data()["metadata"], json!({}));
}

#[tokio::test]
async fn bad_fields_are_422_naming_them_and_queue_nothing() {
    let api = TestApi::new().await;
    verified_domain(&api).await;
    let cases = [
        (json!({"replyTo": ["ok@acme.example.com", "nope"]}), vec!["replyTo[1]"]),
        (json!({"headers": {"Subject": "x"}}), vec!["headers.Subject"]),
        (json!({"headers": {"X-Evil": "a\r\nBcc: victim@example.com"}}), vec!["headers.X-Evil"]),
        (json!({"tags": [{"name": "a b", "value": "x"}]}), vec!["tags[0].name"]),
        (json!({"metadata": {"k": 1}}), vec!["metadata.k"]),
        (
            json!({"attachments": [{"filename": "run.exe", "contentType": "application/octet-stream", "content": ""}]}),
            vec!["attachments[0].filename"],
        ),
        (
            json!({"attachments": [{"filename": "a.pdf", "contentType": "application/pdf", "content": "!!"}]}),
            vec!["attachments[0].content"],
        ),
    ];
    for (extra, fields) in cases {
        let r = api.post("/v1/messages", send(extra.clone())).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{extra}: {}", r.body);
        assert_eq!(r.error_code(), "validation_error");
        assert_eq!(detail_fields(&r.body), fields, "{extra}");
    }
    // A wrongly typed field is named by the JSON extractor too.
    let r = api.post("/v1/messages", send(json!({"tags": "plan"}))).await;
    assert_eq!((r.status, detail_fields(&r.body)), (StatusCode::UNPROCESSABLE_ENTITY, vec!["tags".to_owned()]));
    assert_eq!(api.get("/v1/messages").await.data(), &json!([]));
}

#[tokio::test]
async fn lists_filter_by_tag_and_metadata_from_the_query_string() {
    let api = TestApi::new().await;
    verified_domain(&api).await;
    let mut ids = Vec::new();
    for (plan, order) in [("pro", "1"), ("free", "2"), ("pro", "3")] {
        let r = api
            .post(
                "/v1/messages",
                send(json!({"tags": [{"name": "plan", "value": plan}], "metadata": {"order": order}})),
            )
            .await;
        ids.push(r.data()["id"].as_str().unwrap().to_owned());
    }
    api.post("/v1/messages", send(json!({}))).await;
    let listed = |path: String| {
        let api = &api;
        async move {
            let r = api.get(&path).await;
            assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.body);
            r.data().as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
        }
    };

    assert_eq!(listed("/v1/messages?tag=plan:pro".into()).await, [ids[2].clone(), ids[0].clone()]);
    assert_eq!(listed("/v1/messages?tag=plan".into()).await.len(), 3);
    assert_eq!(listed("/v1/messages?metadata%5Border%5D=2".into()).await, [ids[1].clone()]);
    assert_eq!(listed("/v1/messages?tag=plan%3Apro&metadata[order]=1".into()).await, [ids[0].clone()]);
    assert_eq!(listed("/v1/messages?tag=plan:pro&tag=plan:free".into()).await, Vec::<String>::new());
    let page = api.get("/v1/messages?tag=plan:pro&limit=1").await;
    assert_eq!(page.body["pagination"]["hasMore"], true);

    let bad = api.get("/v1/messages?tag=no%20spaces").await;
    assert_eq!((bad.status, detail_fields(&bad.body)), (StatusCode::UNPROCESSABLE_ENTITY, vec!["tag".to_owned()]));
    let bad = api.get("/v1/messages?metadata%5B%5D=x").await;
    assert_eq!(detail_fields(&bad.body), ["metadata[]"]);
}

#[tokio::test]
async fn the_send_route_takes_a_larger_body_than_the_others() {
    assert_eq!(HttpConfig::default().max_send_body_bytes, DEFAULT_MAX_SEND_BODY_BYTES);
    assert_eq!(DEFAULT_MAX_SEND_BODY_BYTES, 56 * 1024 * 1024);
    let config = HttpConfig { max_body_bytes: 2048, max_send_body_bytes: 16 * 1024, ..HttpConfig::default() };
    let api = TestApi::with_config(config).await;
    verified_domain(&api).await;
    let file = |bytes: usize| {
        json!({"attachments": [{"filename": "a.bin", "contentType": "application/octet-stream",
            "content": STANDARD.encode(vec![7u8; bytes])}]})
    };

    let r = api.post("/v1/messages", send(file(8 * 1024))).await;
    assert_eq!(r.status, StatusCode::CREATED, "a send over the general limit but under its own: {}", r.body);
    let r = api.post("/v1/messages", send(file(16 * 1024))).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"));
    let template = json!({"name": "big", "subject": "s", "html": "x".repeat(4096)});
    let r = api.post("/v1/templates", template).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"));
}
