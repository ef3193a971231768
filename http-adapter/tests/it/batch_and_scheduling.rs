//! `POST /v1/messages/batch`, `PATCH /v1/messages/{id}` and `POST /v1/messages/{id}/cancel`
//! at the HTTP edge: the body shapes, the validation header, and the rate limit counting
//! messages rather than requests.

use crate::support::TestApi;
use serde_json::{Value, json};

/// A workspace with a Verified `example.com` and a key of `rate` sends per second.
async fn api_with_key(rate: u32) -> (TestApi, String) {
    let api = TestApi::new().await;
    api.verified_domain("example.com").await;
    let key = api.post("/v1/keys", json!({"name": "batch", "rateLimitPerSec": rate})).await;
    let key = key.data()["plaintextKey"].as_str().unwrap().to_owned();
    (api, key)
}

fn items(n: usize) -> Value {
    (0..n).map(|i| json!({"to": format!("r{i}@example.net"), "subject": "s", "text": "t"})).collect()
}

async fn batch(api: &TestApi, key: &str, body: Value, mode: Option<&str>) -> crate::support::Reply {
    let mut req = axum::http::Request::post("/v1/messages/batch")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json");
    if let Some(mode) = mode {
        req = req.header("x-batch-validation", mode);
    }
    api.send(req.body(axum::body::Body::from(body.to_string())).unwrap()).await
}

#[tokio::test]
async fn a_batch_takes_one_token_per_message_and_is_refused_whole_when_fewer_are_left() {
    let (api, key) = api_with_key(3).await;
    let queued = batch(&api, &key, items(3), None).await;
    assert_eq!(queued.status, 201, "{}", queued.body);
    assert_eq!(queued.headers["ratelimit-remaining"], "0", "three messages took three tokens");
    let refused = batch(&api, &key, items(1), None).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(refused.error_code(), "rate_limit_exceeded");
    assert!(refused.headers.contains_key("retry-after"));
    let listed = api.call("GET", "/v1/messages", Some(&key), None).await;
    assert_eq!(listed.data().as_array().map(Vec::len), Some(3), "the refused batch queued nothing");
}

#[tokio::test]
async fn a_batch_larger_than_the_bucket_is_a_validation_error_not_a_wait() {
    let (api, key) = api_with_key(2).await;
    let refused = batch(&api, &key, items(3), None).await;
    assert_eq!(refused.status, 422);
    assert_eq!(refused.body["error"]["details"][0]["field"], "batch");
    let too_many = batch(&api, &api.key.clone(), items(501), None).await;
    assert_eq!(too_many.status, 422);
}

#[tokio::test]
async fn refused_items_of_a_permissive_batch_give_their_tokens_back() {
    let (api, key) = api_with_key(2).await;
    let body = json!([{"to": "a@example.net", "subject": "s", "text": "t"}, {"to": "not an address", "subject": "s", "text": "t"}]);
    let partial = batch(&api, &key, body, Some("permissive")).await;
    assert_eq!(partial.status, 200, "{}", partial.body);
    let data = partial.data().as_array().unwrap().clone();
    assert_eq!(data[0]["index"], 0);
    assert_eq!(data[0]["message"]["status"], "Queued");
    assert_eq!(data[1]["index"], 1);
    assert_eq!(data[1]["error"]["details"][0]["field"], "to");
    // The refused item's token came back: one more send fits in this second, not two.
    let one = json!({"to": "b@example.net", "subject": "s", "text": "t"});
    assert_eq!(api.call("POST", "/v1/messages", Some(&key), Some(one.clone())).await.status, 201);
    assert_eq!(api.call("POST", "/v1/messages", Some(&key), Some(one)).await.status, 429);
}

#[tokio::test]
async fn batch_bodies_must_be_arrays_of_objects_and_fields_are_named_by_index() {
    let (api, key) = api_with_key(10).await;
    let object = batch(&api, &key, json!({"messages": items(1)}), None).await;
    assert_eq!((object.status.as_u16(), object.error_code()), (400, "invalid_json"));
    let not_objects = batch(&api, &key, json!([{"to": "a@example.net", "subject": "s", "text": "t"}, 7]), None).await;
    assert_eq!(not_objects.status, 422);
    assert_eq!(not_objects.body["error"]["details"][0]["field"], "[1]");
    let wrong_type = batch(&api, &key, json!([{"to": "a@example.net", "subject": 5, "text": "t"}]), None).await;
    assert_eq!(wrong_type.status, 422);
    assert_eq!(wrong_type.body["error"]["details"][0]["field"], "[0].subject");
    let strict =
        batch(&api, &key, json!([{"to": "a@example.net", "subject": "s", "text": "t"}, {"to": "b@example.net"}]), None)
            .await;
    assert_eq!(strict.status, 422);
    let fields: Vec<&str> =
        strict.body["error"]["details"].as_array().unwrap().iter().map(|d| d["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["[1].subject", "[1].html"]);
    let listed = api.call("GET", "/v1/messages", Some(&key), None).await;
    assert_eq!(listed.data().as_array().map(Vec::len), Some(0), "nothing queued by a refused strict batch");
}

#[tokio::test]
async fn scheduling_answers_and_its_refusals() {
    let (api, key) = api_with_key(10).await;
    let at = (chrono::Utc::now() + chrono::Duration::minutes(30)).to_rfc3339();
    let send = json!({"to": "a@example.net", "subject": "s", "text": "t", "scheduledAt": at});
    let m = api.call("POST", "/v1/messages", Some(&key), Some(send)).await;
    assert_eq!(m.status, 201);
    assert_eq!(m.data()["status"], "Scheduled");
    let id = m.data()["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/messages/{id}");
    let far = (chrono::Utc::now() + chrono::Duration::days(31)).to_rfc3339();
    let refused = api.call("PATCH", &path, Some(&key), Some(json!({"scheduledAt": far}))).await;
    assert_eq!(refused.status, 422);
    assert_eq!(refused.body["error"]["details"][0]["field"], "scheduledAt");
    let wrong = api.call("PATCH", &path, Some(&key), Some(json!({"scheduledAt": 5}))).await;
    assert_eq!(wrong.status, 422);
    let now = api.call("PATCH", &path, Some(&key), Some(json!({"scheduledAt": null}))).await;
    assert_eq!((now.data()["status"].as_str(), now.data()["scheduledAt"].is_null()), (Some("Queued"), true));
    let canceled = api.call("POST", &format!("{path}/cancel"), Some(&key), None).await;
    assert_eq!(canceled.data()["status"], "Canceled");
    let again = api.call("POST", &format!("{path}/cancel"), Some(&key), None).await;
    assert_eq!((again.status.as_u16(), again.error_code()), (409, "conflict"));
    let listed = api.call("GET", "/v1/messages?status=Canceled", Some(&key), None).await;
    assert_eq!(listed.data().as_array().map(Vec::len), Some(1), "Canceled is a status filter");
}
