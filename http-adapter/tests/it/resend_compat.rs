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

#[tokio::test]
async fn domains_are_created_listed_read_verified_and_removed_in_resends_shapes() {
    let api = TestApi::new().await;
    let created = api.post("/resend/domains", json!({"name": "shop.example", "region": "eu-west-1"})).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_owned();
    assert_eq!(created.body["name"], "shop.example");
    assert_eq!(created.body["status"], "not_started");
    assert_eq!(created.body["region"], "us-east-1", "Tidings has one region");
    let records = created.body["records"].as_array().unwrap();
    assert!(!records.is_empty());
    for record in records {
        for field in ["record", "name", "type", "value", "ttl", "status"] {
            assert!(record[field].is_string(), "{field} in {record}");
        }
        assert_eq!(record["status"], "not_started");
    }
    let kinds: Vec<&str> = records.iter().map(|r| r["record"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["SPF", "DKIM", "DKIM", "DMARC"]);

    let listed = api.get("/resend/domains?limit=10").await;
    assert_eq!((listed.body["object"].as_str(), listed.body["has_more"].as_bool()), (Some("list"), Some(false)));
    assert_eq!(listed.body["data"][0]["id"], id.as_str(), "{}", listed.body);
    assert!(listed.body["data"][0].get("records").is_none());
    let got = api.get(&format!("/resend/domains/{id}")).await;
    assert_eq!((got.body["object"].as_str(), got.body["id"].as_str()), (Some("domain"), Some(id.as_str())));
    assert_eq!(got.body["records"].as_array().map(Vec::len), Some(4));

    // No DNS answers here: the check runs and the records fail.
    let verified = api.post(&format!("/resend/domains/{id}/verify"), json!({})).await;
    assert_eq!(verified.body, json!({"object": "domain", "id": id}), "{}", verified.body);
    let after = api.get(&format!("/resend/domains/{id}")).await;
    assert_eq!(after.body["status"], "failed", "{}", after.body);
    assert_eq!(after.body["records"][0]["status"], "failed");

    let removed = api.call("DELETE", &format!("/resend/domains/{id}"), Some(&api.key.clone()), None).await;
    assert_eq!(removed.body, json!({"object": "domain", "id": id, "deleted": true}), "{}", removed.body);
    let gone = api.get(&format!("/resend/domains/{id}")).await;
    assert_eq!((gone.status.as_u16(), resend_error(&gone)), (404, "not_found"));
    assert_eq!(gone.body["message"], "Domain not found");
}

#[tokio::test]
async fn what_a_domain_cannot_be_is_refused_naming_resends_fields() {
    let api = TestApi::new().await;
    let bad_name = api.post("/resend/domains", json!({"name": "not a domain"})).await;
    assert_eq!((bad_name.status.as_u16(), resend_error(&bad_name)), (422, "validation_error"));
    assert!(bad_name.body["message"].as_str().unwrap().starts_with("`name`"), "{}", bad_name.body);
    let missing = api.post("/resend/domains", json!({})).await;
    assert_eq!(resend_error(&missing), "missing_required_field", "{}", missing.body);
    let unsupported =
        api.post("/resend/domains", json!({"name": "a.example", "custom_return_path": "out", "tls": "enforced"})).await;
    assert_eq!((unsupported.status.as_u16(), resend_error(&unsupported)), (422, "validation_error"));
    let message = unsupported.body["message"].as_str().unwrap();
    assert!(message.contains("`custom_return_path`") && message.contains("`tls`"), "{message}");
    assert_eq!(api.get("/resend/domains").await.body["data"], json!([]), "nothing was added");
    let before = api.get("/resend/domains?before=dom_x").await;
    assert_eq!((before.status.as_u16(), resend_error(&before)), (422, "validation_error"));
}

#[tokio::test]
async fn api_keys_are_created_with_their_token_listed_and_removed() {
    let api = TestApi::new().await;
    let created = api.post("/resend/api-keys", json!({"name": "ci", "permission": "sending_access"})).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let (id, token) = (created.body["id"].as_str().unwrap(), created.body["token"].as_str().unwrap());
    assert_eq!(created.body.as_object().unwrap().len(), 2, "only id and token: {}", created.body);
    // The token is a Tidings key with the scope asked for: it sends, it manages nothing.
    let listed_by_it = api.call("GET", "/resend/emails", Some(token), None).await;
    assert_eq!(listed_by_it.status, 200, "{}", listed_by_it.body);
    let domains_by_it = api.call("GET", "/resend/domains", Some(token), None).await;
    assert_eq!((domains_by_it.status.as_u16(), resend_error(&domains_by_it)), (401, "restricted_api_key"));
    assert_eq!(api.get(&format!("/v1/keys/{id}")).await.data()["scope"], "send");

    let listed = api.get("/resend/api-keys").await;
    assert_eq!(listed.body["object"], "list", "{}", listed.body);
    let ci = listed.body["data"].as_array().unwrap().iter().find(|k| k["id"] == id).expect("listed");
    assert_eq!(ci["name"], "ci");
    assert!(ci["created_at"].is_string() && ci.get("last_used_at").is_some(), "{ci}");

    let removed = api.call("DELETE", &format!("/resend/api-keys/{id}"), Some(&api.key.clone()), None).await;
    assert_eq!(removed.body, json!({"object": "api_key", "id": id, "deleted": true}), "{}", removed.body);
    let revoked = api.call("GET", "/resend/emails", Some(token), None).await;
    assert_eq!((revoked.status.as_u16(), resend_error(&revoked)), (403, "invalid_api_key"));
    let again = api.call("DELETE", &format!("/resend/api-keys/{id}"), Some(&api.key.clone()), None).await;
    assert_eq!((again.status.as_u16(), resend_error(&again)), (404, "not_found"));

    let bad = api.post("/resend/api-keys", json!({"name": "x", "permission": "everything"})).await;
    assert_eq!((bad.status.as_u16(), resend_error(&bad)), (422, "validation_error"));
    assert!(bad.body["message"].as_str().unwrap().contains("`permission`"), "{}", bad.body);
    let no_domain =
        api.post("/resend/api-keys", json!({"name": "x", "domain_id": "dom_01J00000000000000000000000"})).await;
    assert_eq!((no_domain.status.as_u16(), resend_error(&no_domain)), (422, "validation_error"));
    assert!(no_domain.body["message"].as_str().unwrap().contains("`domain_id`"), "{}", no_domain.body);
}

#[tokio::test]
async fn a_batch_holds_at_most_resends_hundred() {
    let api = api().await;
    let many: Vec<Value> = (0..101).map(|_| email()).collect();
    let refused = api.post("/resend/emails/batch", json!(many)).await;
    assert_eq!((refused.status.as_u16(), resend_error(&refused)), (422, "validation_error"));
    assert!(refused.body["message"].as_str().unwrap().contains("at most 100"), "{}", refused.body);
    let hundred: Vec<Value> = (0..100).map(|_| email()).collect();
    let mut api_fast = api;
    api_fast.key = api_fast.post("/v1/keys", json!({"rateLimitPerSec": 1000})).await.data()["plaintextKey"]
        .as_str()
        .unwrap()
        .to_owned();
    let taken = api_fast.post("/resend/emails/batch", json!(hundred)).await;
    assert_eq!(taken.body["data"].as_array().map(Vec::len), Some(100), "{}", taken.body);
}

#[tokio::test]
async fn answers_made_before_routing_are_in_resends_body_too() {
    let api = api().await;
    let long = format!("/resend/emails?after={}", "x".repeat(tidings_http::MAX_URI_BYTES));
    let too_long = api.get(&long).await;
    assert_eq!((too_long.status.as_u16(), resend_error(&too_long)), (414, "validation_error"));
    let heavy = axum::http::Request::get("/resend/emails")
        .header("authorization", format!("Bearer {}", api.key))
        .header("x-padding", "y".repeat(tidings_http::MAX_HEADER_LIST_BYTES))
        .body(axum::body::Body::empty())
        .unwrap();
    let heavy = api.send(heavy).await;
    assert_eq!((heavy.status.as_u16(), resend_error(&heavy)), (431, "validation_error"));
    let root = api.get("/resend").await;
    assert_eq!((root.status.as_u16(), resend_error(&root)), (404, "not_found"));
    let unserved =
        api.call("PATCH", "/resend/api-keys/key_x", Some(&api.key.clone()), Some(json!({"name": "n"}))).await;
    assert_eq!((unserved.status.as_u16(), resend_error(&unserved)), (405, "method_not_allowed"));
    // The envelope stays the envelope elsewhere.
    let v1 = api.get(&format!("/v1/messages?cursor={}", "x".repeat(tidings_http::MAX_URI_BYTES))).await;
    assert_eq!((v1.status.as_u16(), v1.body["success"].as_bool()), (414, Some(false)));
}

/// Files by URL, from a map: the router's handling of `path` (the real fetcher, behind the
/// SSRF guard, is tested in tidings-webhook-http and end to end).
struct Files;

#[async_trait::async_trait]
impl tidings_core::ports::FileFetcher for Files {
    async fn fetch(
        &self,
        url: &str,
        max_bytes: usize,
    ) -> Result<tidings_core::ports::FetchedFile, tidings_core::ports::FetchError> {
        use tidings_core::ports::{FetchError, FetchedFile};
        match url {
            "https://files.example/a.txt" => {
                Ok(FetchedFile { bytes: b"fetched\n".to_vec(), content_type: Some("text/plain".into()) })
            }
            "https://files.example/huge" => Err(FetchError::TooLarge { limit: max_bytes }),
            _ => Err(FetchError::Status(404)),
        }
    }
}

#[tokio::test]
async fn an_attachment_path_is_fetched_into_the_message_or_refused_naming_it() {
    let api = api().await.with_file_fetcher(std::sync::Arc::new(Files));
    let mut body = email();
    body["attachments"] = json!([{"filename": "a.txt", "path": "https://files.example/a.txt"}]);
    let sent = api.post("/resend/emails", body).await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    let v1 = api.get(&format!("/v1/messages/{}", sent.body["id"].as_str().unwrap())).await;
    let file = &v1.data()["attachments"][0];
    assert_eq!((file["size"].as_u64(), file["contentType"].as_str()), (Some(8), Some("text/plain")), "{file}");

    for (path, why) in [("https://files.example/missing", "HTTP 404"), ("https://files.example/huge", "larger than")] {
        let mut body = email();
        body["attachments"] = json!([{"filename": "f", "path": path}]);
        let refused = api.post("/resend/emails", body).await;
        assert_eq!((refused.status.as_u16(), resend_error(&refused)), (422, "validation_error"));
        let message = refused.body["message"].as_str().unwrap();
        assert!(message.contains("`attachments[0].path`") && message.contains(why), "{message}");
    }
    let mut both = email();
    both["attachments"] = json!([{"filename": "f", "path": "https://files.example/a.txt", "content": "aGk="}]);
    assert_eq!(resend_error(&api.post("/resend/emails", both).await), "validation_error");
    let mut eleven = email();
    eleven["attachments"] = json!(
        (0..11)
            .map(|i| json!({"filename": format!("{i}.txt"), "path": "https://files.example/a.txt"}))
            .collect::<Vec<_>>()
    );
    let refused = api.post("/resend/emails", eleven).await;
    assert!(refused.body["message"].as_str().unwrap().contains("`attachments[10].path`: too many"), "{}", refused.body);
    let mut in_batch = email();
    in_batch["attachments"] = json!([{"filename": "a.txt", "path": "https://files.example/missing"}]);
    let batch = api.post("/resend/emails/batch", json!([email(), in_batch])).await;
    assert!(batch.body["message"].as_str().unwrap().contains("`[1].attachments[0].path`"), "{}", batch.body);
}

#[tokio::test]
async fn a_template_is_used_by_its_id_or_by_its_name() {
    let api = api().await;
    let old = api.post("/v1/templates", json!({"name": "Welcome", "subject": "Old {{name}}", "text": "old"})).await;
    assert_eq!(old.status, 201, "{}", old.body);
    let new =
        api.post("/v1/templates", json!({"name": "Welcome", "subject": "Hi {{name}}", "text": "Hello {{name}}"})).await;
    let new_id = new.data()["id"].as_str().unwrap().to_owned();
    let send = |template: Value| json!({"from": "hi@example.com", "to": "a@example.net", "template": template});
    for by in [json!("Welcome"), json!(new_id)] {
        let sent = api.post("/resend/emails", send(json!({"id": by, "variables": {"name": "Ann"}}))).await;
        assert_eq!(sent.status, 200, "{by}: {}", sent.body);
        let got = api.get(&format!("/resend/emails/{}", sent.body["id"].as_str().unwrap())).await;
        assert_eq!(got.body["subject"], "Hi Ann", "{by}: the newest template of that name");
    }
    let unknown = api.post("/resend/emails", send(json!({"id": "Goodbye"}))).await;
    assert_eq!((unknown.status.as_u16(), resend_error(&unknown)), (422, "validation_error"));
    assert!(unknown.body["message"].as_str().unwrap().starts_with("`template.id`"), "{}", unknown.body);
    let batch =
        api.post("/resend/emails/batch", json!([send(json!({"id": "Welcome", "variables": {"name": "Bo"}}))])).await;
    assert_eq!(batch.body["data"].as_array().map(Vec::len), Some(1), "{}", batch.body);
}
