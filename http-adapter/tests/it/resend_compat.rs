//! `/resend`: Resend's emails API over the same use cases as `/v1`, answered in Resend's
//! shapes, its errors as `{"statusCode","name","message"}` and never in the envelope.

use serde_json::{Value, json};

use crate::support::{Reply, TestApi};

/// A workspace whose `example.com` is Verified.
async fn api() -> TestApi {
    let api = TestApi::new().await;
    api.verified_domain("example.com").await;
    api
}

fn email() -> Value {
    json!({"from": "Acme <hi@example.com>", "to": ["a@example.net", "b@example.net"], "subject": "Hi", "html": "<p>hi</p>"})
}

/// Asserts Resend's error body and returns its name.
fn resend_error(reply: &Reply) -> &str {
    assert_eq!(reply.body["statusCode"], reply.status.as_u16(), "{}", reply.body);
    assert!(reply.body["message"].is_string(), "{}", reply.body);
    assert!(reply.body.get("success").is_none(), "not the envelope: {}", reply.body);
    reply.body["name"].as_str().unwrap()
}

#[tokio::test]
async fn a_send_answers_its_id_and_get_shows_resends_email_object() {
    let api = api().await;
    let mut body = email();
    body["cc"] = json!("c@example.net");
    body["tags"] = json!([{"name": "kind", "value": "welcome"}]);
    body["attachments"] = json!([{"filename": "a.txt", "content": {"type": "Buffer", "data": [104, 105]}}]);
    let sent = api.post("/resend/emails", body).await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    let id = sent.body["id"].as_str().unwrap().to_owned();
    assert_eq!(sent.body, json!({"id": id}));
    let got = api.get(&format!("/resend/emails/{id}")).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.body["object"], "email");
    assert_eq!(got.body["to"], json!(["a@example.net", "b@example.net"]));
    assert_eq!(got.body["cc"], json!(["c@example.net"]));
    assert_eq!(got.body["bcc"], Value::Null);
    assert_eq!(got.body["last_event"], "queued");
    assert_eq!(got.body["html"], "<p>hi</p>");
    assert_eq!(got.body["tags"], json!([{"name": "kind", "value": "welcome"}]));
    let v1 = api.get(&format!("/v1/messages/{id}")).await;
    assert_eq!(v1.data()["attachments"][0]["size"], 2, "the Buffer's two bytes");
    let listed = api.get("/resend/emails?limit=1").await;
    assert_eq!(listed.body["object"], "list", "{}", listed.body);
    assert_eq!(listed.body["data"][0]["id"], id.as_str());
    assert!(listed.body["data"][0].get("html").is_none());
}

#[tokio::test]
async fn list_pages_forward_with_after_and_back_with_before() {
    let api = api().await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(api.post("/resend/emails", email()).await.body["id"].as_str().unwrap().to_owned());
    }
    let page_ids = |body: &serde_json::Value| -> Vec<String> {
        body["data"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect()
    };
    let first = api.get("/resend/emails?limit=2").await;
    assert_eq!(first.body["has_more"], true);
    assert_eq!(page_ids(&first.body), [ids[4].clone(), ids[3].clone()], "newest first");
    let last = first.body["data"][1]["id"].as_str().unwrap();
    let second = api.get(&format!("/resend/emails?limit=2&after={last}")).await;
    assert_eq!(second.body["has_more"], true);
    assert_eq!(page_ids(&second.body), [ids[2].clone(), ids[1].clone()]);
    let third = api.get(&format!("/resend/emails?limit=2&after={}", ids[1])).await;
    assert_eq!((page_ids(&third.body), &third.body["has_more"]), (vec![ids[0].clone()], &json!(false)));

    // Back from the third page: the two just newer, and more newer ones still.
    let back = api.get(&format!("/resend/emails?limit=2&before={}", ids[0])).await;
    assert_eq!(back.status.as_u16(), 200, "{}", back.body);
    assert_eq!(page_ids(&back.body), [ids[2].clone(), ids[1].clone()], "still newest first");
    assert_eq!(back.body["has_more"], true, "newer ones exist");
    let front = api.get(&format!("/resend/emails?limit=2&before={}", ids[2])).await;
    assert_eq!((page_ids(&front.body), &front.body["has_more"]), (vec![ids[4].clone(), ids[3].clone()], &json!(false)));

    let both = api.get(&format!("/resend/emails?after={last}&before={last}")).await;
    assert_eq!((both.status.as_u16(), resend_error(&both)), (422, "validation_error"));
    let bad = api.get("/resend/emails?before=not-an-id").await;
    assert_eq!((bad.status.as_u16(), resend_error(&bad)), (422, "validation_error"));
    assert!(bad.body["message"].as_str().unwrap().contains("before"), "{}", bad.body);
}

#[tokio::test]
async fn errors_take_resends_names_and_never_the_envelope() {
    let api = api().await;
    let no_key = api.call("POST", "/resend/emails", None, Some(email())).await;
    assert_eq!((no_key.status.as_u16(), resend_error(&no_key)), (401, "missing_api_key"));
    let bad_key = api.call("GET", "/resend/emails", Some("tid_nope"), None).await;
    assert_eq!((bad_key.status.as_u16(), resend_error(&bad_key)), (403, "invalid_api_key"));
    let invalid = api
        .post("/resend/emails", json!({"from": "hi@example.com", "to": "not an address", "subject": "s", "text": "t"}))
        .await;
    assert_eq!((invalid.status.as_u16(), resend_error(&invalid)), (422, "validation_error"));
    let missing = api.post("/resend/emails", json!({"from": "hi@example.com", "subject": "s", "text": "t"})).await;
    assert_eq!((missing.status.as_u16(), resend_error(&missing)), (422, "missing_required_field"), "{}", missing.body);
    let path = api.post("/resend/emails", json!({"from": "hi@example.com", "to": "a@example.net", "subject": "s", "text": "t", "attachments": [{"filename": "a.pdf", "path": "https://example.org/a.pdf"}]})).await;
    assert_eq!(resend_error(&path), "validation_error");
    assert!(path.body["message"].as_str().unwrap().contains("attachments[0].path"), "{}", path.body);
    let unknown = api.get("/resend/emails/msg_01J00000000000000000000000").await;
    assert_eq!((unknown.status.as_u16(), resend_error(&unknown)), (404, "not_found"));
    let nowhere = api.get("/resend/nowhere").await;
    assert_eq!((nowhere.status.as_u16(), resend_error(&nowhere)), (404, "not_found"));
    let wrong_method = api.call("DELETE", "/resend/emails", Some(&api.key.clone()), None).await;
    assert_eq!((wrong_method.status.as_u16(), resend_error(&wrong_method)), (405, "method_not_allowed"));
    let not_json = api
        .send(
            axum::http::Request::post("/resend/emails")
                .header("authorization", format!("Bearer {}", api.key))
                .header("content-type", "application/json")
                .body(axum::body::Body::from("{nope"))
                .unwrap(),
        )
        .await;
    assert_eq!((not_json.status.as_u16(), resend_error(&not_json)), (400, "validation_error"));
}

#[tokio::test]
async fn a_reused_idempotency_key_answers_the_same_id_and_another_body_is_a_409() {
    let api = api().await;
    let send = |body: Value| {
        axum::http::Request::post("/resend/emails")
            .header("authorization", format!("Bearer {}", api.key))
            .header("content-type", "application/json")
            .header("idempotency-key", "order-1")
            .body(axum::body::Body::from(body.to_string()))
            .unwrap()
    };
    let first = api.send(send(email())).await;
    let again = api.send(send(email())).await;
    assert_eq!(first.body["id"], again.body["id"]);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    let mut other = email();
    other["subject"] = json!("Another");
    let conflict = api.send(send(other)).await;
    assert_eq!((conflict.status.as_u16(), resend_error(&conflict)), (409, "invalid_idempotent_request"));
}

#[tokio::test]
async fn batches_are_strict_by_default_and_permissive_lists_errors_by_index() {
    let api = api().await;
    let batch = |mode: Option<&str>, body: Value| {
        let mut req = axum::http::Request::post("/resend/emails/batch")
            .header("authorization", format!("Bearer {}", api.key))
            .header("content-type", "application/json");
        if let Some(mode) = mode {
            req = req.header("x-batch-validation", mode);
        }
        req.body(axum::body::Body::from(body.to_string())).unwrap()
    };
    let mut bad = email();
    bad["to"] = json!("nope");
    let strict = api.send(batch(None, json!([email(), bad.clone()]))).await;
    assert_eq!((strict.status.as_u16(), resend_error(&strict)), (422, "validation_error"));
    assert!(strict.body["message"].as_str().unwrap().contains("[1]"), "{}", strict.body);
    let ok = api.send(batch(None, json!([email(), email()]))).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.body["data"].as_array().unwrap().len(), 2);
    let permissive = api.send(batch(Some("permissive"), json!([email(), bad]))).await;
    assert_eq!(permissive.status, 200, "{}", permissive.body);
    assert_eq!(permissive.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(permissive.body["errors"][0]["index"], 1);
    let mut by_url = email();
    by_url["attachments"] = json!([{"filename": "a.pdf", "path": "https://example.org/a.pdf"}]);
    let refused = api.send(batch(Some("permissive"), json!([email(), by_url]))).await;
    assert_eq!((refused.status.as_u16(), resend_error(&refused)), (422, "validation_error"));
    assert!(refused.body["message"].as_str().unwrap().contains("`[1].attachments[0].path`"), "{}", refused.body);
}

#[tokio::test]
async fn a_scheduled_email_is_moved_and_canceled() {
    let api = api().await;
    let mut body = email();
    body["scheduled_at"] = json!((chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339());
    let id = api.post("/resend/emails", body).await.body["id"].as_str().unwrap().to_owned();
    assert_eq!(api.get(&format!("/resend/emails/{id}")).await.body["last_event"], "scheduled");
    let later = (chrono::Utc::now() + chrono::Duration::hours(3)).to_rfc3339();
    let moved = api
        .call("PATCH", &format!("/resend/emails/{id}"), Some(&api.key.clone()), Some(json!({"scheduled_at": later})))
        .await;
    assert_eq!(moved.body, json!({"object": "email", "id": id}), "{}", moved.body);
    let canceled = api.post(&format!("/resend/emails/{id}/cancel"), json!({})).await;
    assert_eq!(canceled.body, json!({"object": "email", "id": id}), "{}", canceled.body);
    assert_eq!(api.get(&format!("/resend/emails/{id}")).await.body["last_event"], "canceled");
    let again = api.post(&format!("/resend/emails/{id}/cancel"), json!({})).await;
    assert_eq!((again.status.as_u16(), resend_error(&again)), (409, "validation_error"));
}

#[tokio::test]
async fn every_resend_route_asks_for_a_key_in_resends_words() {
    let api = api().await;
    let id = "msg_01J00000000000000000000000";
    let routes = [
        ("POST", "/resend/emails".to_owned(), Some(email())),
        ("POST", "/resend/emails/batch".to_owned(), Some(json!([email()]))),
        ("GET", "/resend/emails".to_owned(), None),
        ("GET", format!("/resend/emails/{id}"), None),
        ("PATCH", format!("/resend/emails/{id}"), Some(json!({"scheduled_at": "2030-01-01T00:00:00Z"}))),
        ("POST", format!("/resend/emails/{id}/cancel"), None),
    ];
    for (method, path, body) in routes {
        let none = api.call(method, &path, None, body.clone()).await;
        assert_eq!((none.status.as_u16(), resend_error(&none)), (401, "missing_api_key"), "{method} {path}");
        let wrong = api.call(method, &path, Some("tid_wrong"), body).await;
        assert_eq!((wrong.status.as_u16(), resend_error(&wrong)), (403, "invalid_api_key"), "{method} {path}");
    }
}
