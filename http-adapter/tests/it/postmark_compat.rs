//! `/postmark`: Postmark's email API over the same use cases as `/v1`, answered in Postmark's
//! shapes (`{To, SubmittedAt, MessageID, ErrorCode, Message}`), its errors as
//! `{"ErrorCode","Message"}` with Postmark's statuses and codes, never in the envelope.

use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};

use crate::support::{Reply, TestApi};

/// A workspace whose `example.com` is Verified.
async fn api() -> TestApi {
    let api = TestApi::new().await;
    api.verified_domain("example.com").await;
    api
}

fn message() -> Value {
    json!({"From": "Acme <hi@example.com>", "To": "a@example.net, \"Bee, B\" <b@example.net>", "Subject": "Hi", "HtmlBody": "<p>hi</p>"})
}

/// `POST /postmark{path}` with `token` in `X-Postmark-Server-Token`.
fn request(path: &str, token: Option<&str>, body: &Value) -> Request<Body> {
    let mut req = Request::post(format!("/postmark{path}")).header("content-type", "application/json");
    if let Some(token) = token {
        req = req.header("x-postmark-server-token", token);
    }
    req.body(Body::from(body.to_string())).unwrap()
}

async fn post(api: &TestApi, path: &str, body: Value) -> Reply {
    api.send(request(path, Some(&api.key.clone()), &body)).await
}

/// Asserts Postmark's error body and status; its `ErrorCode`.
fn postmark_error(reply: &Reply, status: u16) -> u64 {
    assert_eq!(reply.status.as_u16(), status, "{}", reply.body);
    assert!(reply.body["Message"].is_string(), "{}", reply.body);
    assert!(reply.body.get("success").is_none(), "not the envelope: {}", reply.body);
    reply.body["ErrorCode"].as_u64().unwrap_or_else(|| panic!("no ErrorCode: {}", reply.body))
}

#[tokio::test]
async fn a_send_answers_postmarks_response_and_is_an_ordinary_tidings_message() {
    let api = api().await;
    let mut body = message();
    body["Cc"] = json!("c@example.net");
    body["Bcc"] = json!("d@example.net");
    body["Tag"] = json!("welcome");
    body["Metadata"] = json!({"order": "42"});
    body["Headers"] = json!([{"Name": "X-Campaign", "Value": "spring"}]);
    body["Attachments"] = json!([{"Name": "a.txt", "Content": "aGk=", "ContentType": "text/plain"}]);
    let sent = post(&api, "/email", body).await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    assert_eq!(sent.body["ErrorCode"], 0);
    assert_eq!(sent.body["Message"], "OK");
    assert_eq!(sent.body["To"], "a@example.net, \"Bee, B\" <b@example.net>", "the To as written");
    assert!(chrono::DateTime::parse_from_rfc3339(sent.body["SubmittedAt"].as_str().unwrap()).is_ok());
    let id = sent.body["MessageID"].as_str().unwrap();
    let v1 = api.get(&format!("/v1/messages/{id}")).await;
    let m = v1.data();
    let to: Vec<(&str, &str)> = m["recipients"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == "to")
        .map(|r| (r["email"].as_str().unwrap(), r["name"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(to, [("a@example.net", ""), ("b@example.net", "Bee, B")], "{m}");
    assert_eq!((m["cc"][0].as_str(), m["bcc"][0].as_str()), (Some("c@example.net"), Some("d@example.net")), "{m}");
    assert_eq!(m["tags"], json!([{"name": "tag", "value": "welcome"}]));
    assert_eq!(m["metadata"], json!({"order": "42"}));
    assert_eq!(m["attachments"][0]["size"], 2);
}

#[tokio::test]
async fn a_template_is_used_by_its_name_or_its_id() {
    let api = api().await;
    let made =
        api.post("/v1/templates", json!({"name": "welcome", "subject": "Hi {{name}}", "text": "Hello {{name}}"})).await;
    let template_id = made.data()["id"].as_str().unwrap().to_owned();
    let by_alias = json!({"From": "hi@example.com", "To": "a@example.net", "TemplateAlias": "welcome", "TemplateModel": {"name": "Ann"}});
    let sent = post(&api, "/email/withTemplate", by_alias.clone()).await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    let m = api.get(&format!("/v1/messages/{}", sent.body["MessageID"].as_str().unwrap())).await;
    assert_eq!(m.data()["subject"], "Hi Ann");
    let by_id = json!({"From": "hi@example.com", "To": "a@example.net", "TemplateId": template_id, "TemplateModel": {"name": "Bo"}});
    assert_eq!(post(&api, "/email/withTemplate", by_id).await.status, 200);

    let mut unknown = by_alias.clone();
    unknown["TemplateAlias"] = json!("nope");
    assert_eq!(postmark_error(&post(&api, "/email/withTemplate", unknown).await, 422), 1101);
    let wrong_id = json!({"From": "hi@example.com", "To": "a@example.net", "TemplateId": "tpl_nope"});
    assert_eq!(postmark_error(&post(&api, "/email/withTemplate", wrong_id).await, 422), 1101);
    let numeric = json!({"From": "hi@example.com", "To": "a@example.net", "TemplateId": 12345});
    assert_eq!(postmark_error(&post(&api, "/email/withTemplate", numeric).await, 422), 1101);

    api.post("/v1/templates", json!({"name": "welcome", "subject": "Another"})).await;
    let ambiguous = post(&api, "/email/withTemplate", by_alias).await;
    assert_eq!(postmark_error(&ambiguous, 422), 300);
    assert!(ambiguous.body["Message"].as_str().unwrap().contains("names several templates"), "{}", ambiguous.body);
}

#[tokio::test]
async fn batches_answer_200_with_one_result_per_item_in_order() {
    let api = api().await;
    api.post("/v1/suppressions", json!({"email": "gone@example.net"})).await;
    let mut bad = message();
    bad["To"] = json!("not an address");
    let mut inactive = message();
    inactive["To"] = json!("gone@example.net");
    let mut stream = message();
    stream["MessageStream"] = json!("broadcast");
    let reply = post(&api, "/email/batch", json!([message(), bad, inactive, stream, message()])).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let items = reply.body.as_array().unwrap();
    let codes: Vec<u64> = items.iter().map(|i| i["ErrorCode"].as_u64().unwrap()).collect();
    assert_eq!(codes, [0, 300, 406, 300, 0], "{}", reply.body);
    assert!(items[0]["MessageID"].is_string() && items[4]["MessageID"].is_string());
    assert_ne!(items[0]["MessageID"], items[4]["MessageID"]);
    assert!(items[1]["Message"].as_str().unwrap().contains("`To`"), "{}", items[1]);
    assert!(
        items[2]["Message"].as_str().unwrap().contains("Found inactive addresses: gone@example.net."),
        "{}",
        items[2]
    );
    assert!(items[3]["Message"].as_str().unwrap().contains("`MessageStream`"), "{}", items[3]);

    api.post("/v1/templates", json!({"name": "receipt", "subject": "Receipt {{n}}", "text": "n={{n}}"})).await;
    let templated = json!({"Messages": [
        {"From": "hi@example.com", "To": "a@example.net", "TemplateAlias": "receipt", "TemplateModel": {"n": 1}},
        {"From": "hi@example.com", "To": "a@example.net", "TemplateAlias": "missing", "TemplateModel": {}},
    ]});
    let reply = post(&api, "/email/batchWithTemplates", templated).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let codes: Vec<u64> = reply.body.as_array().unwrap().iter().map(|i| i["ErrorCode"].as_u64().unwrap()).collect();
    assert_eq!(codes, [0, 1101], "{}", reply.body);

    let too_many: Vec<Value> = (0..501).map(|_| message()).collect();
    assert_eq!(postmark_error(&post(&api, "/email/batch", json!(too_many)).await, 422), 410);
    assert_eq!(postmark_error(&post(&api, "/email/batch", json!([])).await, 422), 300);
}

#[tokio::test]
async fn an_inactive_recipient_is_406_naming_every_address_as_postmark_js_reads_it() {
    let api = api().await;
    for email in ["gone@example.net", "left@example.org"] {
        api.post("/v1/suppressions", json!({"email": email})).await;
    }
    let mut body = message();
    body["To"] = json!("gone@example.net, Left <left@example.org>");
    let reply = post(&api, "/email", body).await;
    assert_eq!(postmark_error(&reply, 422), 406);
    let text = reply.body["Message"].as_str().unwrap();
    assert!(text.contains("Found inactive addresses: gone@example.net, left@example.org. Inactive"), "{text}");
    // One of two suppressed: the message goes to the other, as Postmark's does.
    let mut some = message();
    some["To"] = json!("gone@example.net, fine@example.net");
    assert_eq!(post(&api, "/email", some).await.status, 200);
}

#[tokio::test]
async fn errors_take_postmarks_statuses_and_codes_and_never_the_envelope() {
    let api = api().await;
    let no_token = api.send(request("/email", None, &message())).await;
    assert_eq!(postmark_error(&no_token, 401), 10);
    let bad_token = api.send(request("/email", Some("tid_nope"), &message())).await;
    assert_eq!(postmark_error(&bad_token, 401), 10);
    let bearer = Request::post("/postmark/email")
        .header("authorization", format!("Bearer {}", api.key))
        .header("content-type", "application/json")
        .body(Body::from(message().to_string()))
        .unwrap();
    assert_eq!(postmark_error(&api.send(bearer).await, 401), 10, "only the Postmark header is read");

    let invalid =
        post(&api, "/email", json!({"From": "hi@example.com", "To": "nope", "Subject": "s", "TextBody": "t"})).await;
    assert_eq!(postmark_error(&invalid, 422), 300);
    let unverified = post(
        &api,
        "/email",
        json!({"From": "hi@elsewhere.example", "To": "a@example.net", "Subject": "s", "TextBody": "t"}),
    )
    .await;
    assert_eq!(postmark_error(&unverified, 422), 400);
    let wrong_type = post(&api, "/email", json!({"From": "hi@example.com", "To": 5})).await;
    assert_eq!(postmark_error(&wrong_type, 422), 300);
    assert!(wrong_type.body["Message"].as_str().unwrap().contains("To"), "{}", wrong_type.body);
    let track =
        post(&api, "/email", json!({"From": "hi@example.com", "To": "a@example.net", "TrackLinks": "Sometimes"})).await;
    assert_eq!(postmark_error(&track, 422), 300);

    let not_json = Request::post("/postmark/email")
        .header("x-postmark-server-token", &api.key)
        .header("content-type", "application/json")
        .body(Body::from("{nope"))
        .unwrap();
    assert_eq!(postmark_error(&api.send(not_json).await, 422), 402);
    let no_type = Request::post("/postmark/email")
        .header("x-postmark-server-token", &api.key)
        .body(Body::from(message().to_string()))
        .unwrap();
    assert_eq!(postmark_error(&api.send(no_type).await, 422), 409);

    let bounces = api.send(Request::get("/postmark/bounces").body(Body::empty()).unwrap()).await;
    postmark_error(&bounces, 404);
    let templates = api.send(request("/templates", Some(&api.key.clone()), &json!({}))).await;
    postmark_error(&templates, 404);
    let get_email = api.send(Request::get("/postmark/email").body(Body::empty()).unwrap()).await;
    postmark_error(&get_email, 405);
}

#[tokio::test]
async fn every_postmark_route_asks_for_a_token_and_a_send_key_may_use_them_all() {
    let api = api().await;
    api.post("/v1/templates", json!({"name": "t", "subject": "s", "text": "x"})).await;
    let send_key =
        api.post("/v1/keys", json!({"scope": "send"})).await.data()["plaintextKey"].as_str().unwrap().to_owned();
    let templated = json!({"From": "hi@example.com", "To": "a@example.net", "TemplateAlias": "t"});
    let routes = [
        ("/email", message()),
        ("/email/batch", json!([message()])),
        ("/email/withTemplate", templated.clone()),
        ("/email/batchWithTemplates", json!({"Messages": [templated]})),
    ];
    for (path, body) in routes {
        assert_eq!(postmark_error(&api.send(request(path, None, &body)).await, 401), 10, "{path}");
        assert_eq!(postmark_error(&api.send(request(path, Some("tid_wrong"), &body)).await, 401), 10, "{path}");
        let ok = api.send(request(path, Some(&send_key), &body)).await;
        assert_eq!(ok.status, 200, "{path}: {}", ok.body);
        let first = if ok.body.is_array() { &ok.body[0] } else { &ok.body };
        assert_eq!(first["ErrorCode"], 0, "{path}: {}", ok.body);
    }
}

#[tokio::test]
async fn the_keys_rate_limit_holds_and_is_answered_429_in_postmarks_shape() {
    let api = api().await;
    let key =
        api.post("/v1/keys", json!({"rateLimitPerSec": 1})).await.data()["plaintextKey"].as_str().unwrap().to_owned();
    let first = api.send(request("/email", Some(&key), &message())).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let second = api.send(request("/email", Some(&key), &message())).await;
    assert_eq!(postmark_error(&second, 429), 429);
    assert!(second.headers.contains_key("retry-after"));
}

#[tokio::test]
async fn answers_made_before_routing_are_in_postmarks_body_too() {
    let api = api().await;
    let long = format!("/postmark/email?x={}", "x".repeat(tidings_http::MAX_URI_BYTES));
    let too_long = api.send(request(&long[9..], Some(&api.key.clone()), &message())).await;
    assert_eq!(postmark_error(&too_long, 414), 300);
    let mut heavy = request("/email", Some(&api.key.clone()), &message());
    heavy.headers_mut().insert("x-padding", "y".repeat(tidings_http::MAX_HEADER_LIST_BYTES).parse().unwrap());
    assert_eq!(postmark_error(&api.send(heavy).await, 431), 300);
    let root = api.send(request("", Some(&api.key.clone()), &message())).await;
    assert_eq!(postmark_error(&root, 404), 0);
}
