//! `/v1/messages` against the real binary: sends (bodies, senders, templates), reads, the
//! timeline, lists with paging and filters, every refusal, Idempotency-Keys and how refused
//! sends and replays count against the rate limit (docs/api.md#errors, #authentication,
//! #messages and #templates).

use crate::common::{
    assert_error, assert_invalid, assert_ok, create_key, ids, server_with_dns, verified_domain, walk_pages,
};
use reqwest::Method;
use serde_json::{Value, json};
use tidings_e2e::{TestServer, into_parts};

/// A ULID that names nothing in any store.
const UNKNOWN_ID: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

/// Creates a template (as the bootstrap key); returns its id and current version id.
async fn template(server: &TestServer, body: Value) -> (String, String) {
    let (status, created) = server.post("/v1/templates", server.key(), body).await;
    assert_ok(status, &created, 201, "create a template");
    let data = &created["data"];
    (data["id"].as_str().unwrap().to_owned(), data["currentVersionId"].as_str().unwrap().to_owned())
}

/// `POST /v1/messages` with the bootstrap key; the message's `data` after checking for 201.
async fn send_ok(server: &TestServer, body: Value) -> Value {
    let (status, reply) = server.post("/v1/messages", server.key(), body.clone()).await;
    assert_ok(status, &reply, 201, &format!("send {body}"));
    reply["data"].clone()
}

#[tokio::test]
async fn sends_are_queued_and_can_be_read_listed_and_filtered() {
    // Delivery on hold, so every message read back is still Queued.
    let (server, dns) = server_with_dns(&[("TIDINGS_DELIVERY", "hold")]).await;
    let key = server.key().to_owned();
    verified_domain(&server, &dns, &key, "mail.example").await;
    let (id, v1) = template(
        &server,
        json!({"name": "welcome", "subject": "Welcome {{name}}", "html": "<p>Hi {{name}}</p>", "text": "Hi {{name}}"}),
    )
    .await;
    let (status, body) = server
        .post(&format!("/v1/templates/{id}/versions"), &key, json!({"subject": "Welcome back {{name}}", "text": "Hi"}))
        .await;
    assert_ok(status, &body, 201, "add version 2");
    let v2 = body["data"]["id"].as_str().unwrap().to_owned();

    let html = send_ok(
        &server,
        json!({"to": "ann@example.com", "from": "Acme <hello@mail.example>", "subject": "Hello", "html": "<p>x</p>"}),
    )
    .await;
    assert_eq!(html["status"], "Queued", "{html}");
    assert_eq!(html["to"], "ann@example.com", "{html}");
    assert_eq!(html["fromAddress"], "hello@mail.example", "the address without the display name: {html}");
    assert_eq!(html["subject"], "Hello", "{html}");
    assert_eq!(html["attempts"], 0, "{html}");
    assert!(html["providerMessageId"].is_null(), "{html}");
    assert!(html["templateVersionId"].is_null(), "{html}");
    assert!(html["createdAt"].is_string(), "{html}");
    assert_eq!(html["id"].as_str().unwrap().len(), 26, "a ULID: {html}");

    let text = send_ok(&server, json!({"to": "ann@example.com", "subject": "Plain", "text": "x"})).await;
    assert_eq!(text["fromAddress"], "noreply@mail.example", "the only verified domain's noreply@: {text}");
    let current =
        send_ok(&server, json!({"to": "ann@example.com", "templateId": id, "variables": {"name": "Ann"}})).await;
    assert_eq!(current["subject"], "Welcome back Ann", "the current version (2): {current}");
    assert_eq!(current["templateVersionId"], v2.as_str(), "{current}");
    let pinned =
        send_ok(&server, json!({"to": "ann@example.com", "templateVersionId": v1, "variables": {"name": "Ann"}})).await;
    assert_eq!(pinned["subject"], "Welcome Ann", "the pinned version (1): {pinned}");
    assert_eq!(pinned["templateVersionId"], v1.as_str(), "{pinned}");
    let overridden = send_ok(
        &server,
        json!({"to": "ann@example.com", "templateId": id, "subject": "Custom", "variables": {"name": "Ann"}}),
    )
    .await;
    assert_eq!(overridden["subject"], "Custom", "the send's subject overrides the template's: {overridden}");
    let long_subject = "s".repeat(998);
    let bob =
        send_ok(&server, json!({"to": "bob@example.com", "subject": long_subject, "text": "x", "html": "<b>x</b>"}))
            .await;
    let sent = [&html, &text, &current, &pinned, &overridden, &bob];

    // Get: the same message the send returned.
    let message = html["id"].as_str().unwrap();
    let (status, body) = server.get(&format!("/v1/messages/{message}"), &key).await;
    assert_ok(status, &body, 200, "get a message");
    assert_eq!(body["data"], html, "GET shows what the send returned");
    for missing in [UNKNOWN_ID, "not-a-ulid"] {
        let (status, body) = server.get(&format!("/v1/messages/{missing}"), &key).await;
        assert_error(status, &body, 404, "not_found", &format!("GET /v1/messages/{missing}"));
        let (status, body) = server.get(&format!("/v1/messages/{missing}/events"), &key).await;
        assert_error(status, &body, 404, "not_found", &format!("GET /v1/messages/{missing}/events"));
    }

    // The timeline: one Queued event, paged like every list.
    let (status, body) = server.get(&format!("/v1/messages/{message}/events"), &key).await;
    assert_ok(status, &body, 200, "the timeline");
    let events = body["data"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{body}");
    assert_eq!(events[0]["type"], "Queued", "{body}");
    assert!(events[0]["providerMessageId"].is_null(), "null on Queued: {body}");
    assert!(events[0]["occurredAt"].is_string() && events[0]["id"].is_string(), "{body}");
    assert!(events[0]["details"].is_object(), "{body}");
    assert_eq!(body["pagination"], json!({"limit": 50, "hasMore": false, "nextCursor": null}), "{body}");
    let (status, body) = server.get(&format!("/v1/messages/{message}/events?limit=0"), &key).await;
    assert_invalid(status, &body, &["limit"], "events?limit=0");
    let (status, body) = server.get(&format!("/v1/messages/{message}/events?cursor=x"), &key).await;
    assert_invalid(status, &body, &["cursor"], "events?cursor=x");

    // The list: newest first, paged, filtered by status and recipient.
    let newest_first: Vec<String> = sent.iter().rev().map(|m| m["id"].as_str().unwrap().to_owned()).collect();
    let (status, body) = server.get("/v1/messages", &key).await;
    assert_ok(status, &body, 200, "list messages");
    assert_eq!(ids(&body), newest_first, "newest first");
    assert_eq!(body["data"][0], bob, "list items are whole messages");
    assert_eq!(walk_pages(&server, &key, "/v1/messages", 4).await, newest_first, "pages of 4");
    assert_eq!(walk_pages(&server, &key, "/v1/messages", 1).await, newest_first, "pages of 1");
    assert_eq!(walk_pages(&server, &key, "/v1/messages?status=Queued", 50).await, newest_first, "all are Queued");
    assert_eq!(walk_pages(&server, &key, "/v1/messages?status=Delivered", 50).await, Vec::<String>::new());
    let to_ann = walk_pages(&server, &key, "/v1/messages?to=ann@example.com", 2).await;
    assert_eq!(to_ann, newest_first[1..], "to=ann, in pages of 2");
    let bob_id = bob["id"].as_str().unwrap().to_owned();
    assert_eq!(walk_pages(&server, &key, "/v1/messages?status=Queued&to=bob@example.com", 5).await, [bob_id]);
    for (query, field) in [
        ("status=Bogus", "status"),
        ("to=not-an-address", "to"),
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("limit=many", "limit"),
        ("cursor=nope", "cursor"),
    ] {
        let (status, body) = server.get(&format!("/v1/messages?{query}"), &key).await;
        assert_invalid(status, &body, &[field], &format!("GET /v1/messages?{query}"));
    }
}

#[tokio::test]
async fn refused_sends_name_their_reason_and_queue_nothing() {
    // Not the outbox: there the sandbox sending domain would be the default sender
    // (tests/tests/it/sandbox.rs). Nothing here needs delivering.
    let (server, dns) = server_with_dns(&[("TIDINGS_DELIVERY", "hold")]).await;
    let key = server.key().to_owned();
    let refuse = |body: Value| {
        let server = &server;
        let key = &key;
        async move { server.post("/v1/messages", key, body).await }
    };

    // Before any domain is verified there is no default sender.
    let (status, body) = refuse(json!({"to": "ann@example.com", "subject": "s", "text": "t"})).await;
    assert_invalid(status, &body, &["from"], "no `from` and no verified domain");
    let (status, body) = server.post("/v1/domains", &key, json!({"domain": "pending.example"})).await;
    assert_ok(status, &body, 201, "add a domain left Pending");
    for from in ["billing@pending.example", "billing@nowhere.example"] {
        let (status, body) = refuse(json!({"to": "ann@example.com", "from": from, "subject": "s", "text": "t"})).await;
        assert_error(status, &body, 422, "domain_not_verified", &format!("from {from}"));
    }
    verified_domain(&server, &dns, &key, "mail.example").await;

    let long_to = format!("{}@{}.example", "a".repeat(64), "b".repeat(260));
    let cases: Vec<(Value, &[&str])> = vec![
        (json!({}), &["to", "subject", "html"]),
        (json!({"subject": "s", "text": "t"}), &["to"]),
        (json!({"to": ["ann@example.com", 7], "subject": "s", "text": "t"}), &["to[1]"]),
        (json!({"to": 5, "subject": "s", "text": "t"}), &["to"]),
        (json!({"to": "not-an-address", "subject": "s", "text": "t"}), &["to"]),
        (json!({"to": "ann@example.com\r\nBcc: eve@example.com", "subject": "s", "text": "t"}), &["to"]),
        (json!({"to": long_to, "subject": "s", "text": "t"}), &["to"]),
        (json!({"to": "ann@example.com", "text": "t"}), &["subject"]),
        (json!({"to": "ann@example.com", "subject": "", "text": "t"}), &["subject"]),
        (json!({"to": "ann@example.com", "subject": "a\r\nBcc: eve@example.com", "text": "t"}), &["subject"]),
        (json!({"to": "ann@example.com", "subject": "s".repeat(999), "text": "t"}), &["subject"]),
        (json!({"to": "ann@example.com", "subject": "s"}), &["html"]),
        (json!({"to": "ann@example.com", "subject": "s", "html": 5}), &["html"]),
        (json!({"to": "ann@example.com", "from": "not an address", "subject": "s", "text": "t"}), &["from"]),
        (
            json!({"to": "ann@example.com", "from": "Eve\r\nBcc: eve@example.com <a@mail.example>", "subject": "s", "text": "t"}),
            &["from"],
        ),
        (json!({"to": "ann@example.com", "subject": "s", "text": "t", "variables": {"a": 1}}), &["variables"]),
    ];
    for (request, fields) in cases {
        let (status, body) = refuse(request.clone()).await;
        assert_invalid(status, &body, fields, &format!("send {request}"));
    }

    // Suppressed recipients, matched case-insensitively, until the entry is removed.
    let (status, body) = server.post("/v1/suppressions", &key, json!({"email": "Gone@Example.com"})).await;
    assert_ok(status, &body, 201, "suppress an address");
    let (status, body) = refuse(json!({"to": "gone@example.com", "subject": "s", "text": "t"})).await;
    assert_error(status, &body, 422, "recipient_suppressed", "a suppressed recipient");

    // Templates that do not exist, do not match, or lack what the send needs.
    let (tid, vid) = template(&server, json!({"name": "hi", "subject": "Hi {{name}}", "text": "Hi {{name}}"})).await;
    let (other, _) = template(&server, json!({"name": "bare", "subject": "Just a subject"})).await;
    let template_cases: Vec<(Value, &str)> = vec![
        (json!({"to": "ann@example.com", "templateId": UNKNOWN_ID}), "templateId"),
        (json!({"to": "ann@example.com", "templateId": "garbage"}), "templateId"),
        (json!({"to": "ann@example.com", "templateVersionId": UNKNOWN_ID}), "templateVersionId"),
        (json!({"to": "ann@example.com", "templateId": other, "templateVersionId": vid}), "templateVersionId"),
        (json!({"to": "ann@example.com", "templateId": tid, "variables": "name=Ann"}), "variables"),
        (json!({"to": "ann@example.com", "templateId": other}), "html"),
    ];
    for (request, field) in template_cases {
        let (status, body) = refuse(request.clone()).await;
        assert_invalid(status, &body, &[field], &format!("send {request}"));
    }
    let (status, body) = refuse(json!({"to": "ann@example.com", "templateId": tid, "variables": {"other": 1}})).await;
    assert_error(status, &body, 422, "template_render_error", "a missing variable");
    assert!(body["error"]["message"].as_str().unwrap().contains("name"), "names the variable: {body}");

    let (_, body) = server.get("/v1/messages", &key).await;
    assert_eq!(body["data"], json!([]), "nothing was queued: {body}");

    let (status, body) = server.delete("/v1/suppressions/gone@example.com", &key).await;
    assert_ok(status, &body, 200, "unsuppress");
    let sent = send_ok(&server, json!({"to": "gone@example.com", "templateId": tid, "variables": {"name": "G"}})).await;
    assert_eq!(sent["subject"], "Hi G", "sendable again once unsuppressed: {sent}");
}

#[tokio::test]
async fn idempotency_keys_replay_the_original_and_refuse_other_bodies() {
    let (server, dns) = server_with_dns(&[]).await;
    let key = server.key().to_owned();
    verified_domain(&server, &dns, &key, "idem.example").await;
    let send = json!({"to": "ann@example.com", "subject": "Receipt", "text": "t"});

    let (status, replayed, first) = server.send_with_key(&send, "order-1").await;
    assert_ok(status, &first, 201, "first send");
    assert_eq!(replayed, None, "a first send is not a replay");
    let (status, replayed, again) = server.send_with_key(&send, "order-1").await;
    assert_ok(status, &again, 201, "replay");
    assert_eq!(replayed.as_deref(), Some("true"), "Idempotent-Replayed on a replay");
    assert_eq!(again["data"], first["data"], "the original message");
    let other = json!({"to": "ann@example.com", "subject": "Receipt", "text": "changed"});
    let (status, _, body) = server.send_with_key(&other, "order-1").await;
    assert_error(status, &body, 409, "idempotency_key_reused", "same key, other body");

    let (status, _, body) = server.send_with_key(&send, "").await;
    assert_error(status, &body, 400, "invalid_idempotency_key", "an empty Idempotency-Key");
    let (status, _, body) = server.send_with_key(&send, &"k".repeat(257)).await;
    assert_error(status, &body, 400, "invalid_idempotency_key", "a 257-character Idempotency-Key");
    let (status, replayed, body) = server.send_with_key(&send, &"k".repeat(256)).await;
    assert_ok(status, &body, 201, "a 256-character Idempotency-Key");
    assert_eq!(replayed, None);

    // A refused request does not claim its key.
    let (status, _, body) = server.send_with_key(&json!({"to": "ann@example.com"}), "order-2").await;
    assert_invalid(status, &body, &["subject", "html"], "a refused send with a key");
    let (status, replayed, body) = server.send_with_key(&send, "order-2").await;
    assert_ok(status, &body, 201, "the key is free after a refusal");
    assert_eq!(replayed, None);

    let (_, body) = server.get("/v1/messages", &key).await;
    assert_eq!(body["data"].as_array().unwrap().len(), 3, "order-1, the 256-char key and order-2: {body}");
}

/// `POST path` with `key`, `body` and an Idempotency-Key: status, `Idempotent-Replayed`, envelope.
async fn post_with_key(
    server: &TestServer,
    path: &str,
    key: &str,
    body: &Value,
    idem: &str,
) -> (u16, Option<String>, Value) {
    server.post_idempotent(path, key, body, idem).await
}

#[tokio::test]
async fn full_keys_share_an_idempotency_key_and_each_send_key_has_its_own() {
    let (server, dns) = server_with_dns(&[("TIDINGS_DELIVERY", "hold")]).await;
    let admin = server.key().to_owned();
    verified_domain(&server, &dns, &admin, "shared.example").await;
    let (_, other_admin) = create_key(&server, &admin, json!({"name": "second full key"})).await;
    let (_, sender) = create_key(&server, &admin, json!({"name": "app", "scope": "send"})).await;
    let (_, other_sender) = create_key(&server, &admin, json!({"name": "other app", "scope": "send"})).await;
    let send = json!({"to": "ann@example.com", "subject": "Receipt", "text": "t"});
    let other = json!({"to": "ann@example.com", "subject": "Receipt", "text": "changed"});
    let post = |key: &str, body: &Value, idem: &str| {
        let (key, body, idem) = (key.to_owned(), body.clone(), idem.to_owned());
        let server = &server;
        async move { post_with_key(server, "/v1/messages", &key, &body, &idem).await }
    };

    // Two full keys: the second is answered with the first's message.
    let (status, replayed, first) = post(&admin, &send, "order-1").await;
    assert_ok(status, &first, 201, "the first full key sends");
    assert_eq!(replayed, None);
    let (status, replayed, again) = post(&other_admin, &send, "order-1").await;
    assert_ok(status, &again, 201, "another full key repeats the send");
    assert_eq!(replayed.as_deref(), Some("true"), "Idempotent-Replayed: {again}");
    assert_eq!(again["data"]["id"], first["data"]["id"], "the original message");
    // Another body is still another request for a full key; a body that is not a send at all
    // is still refused for what it is.
    let (status, _, refused) = post(&other_admin, &other, "order-1").await;
    assert_error(status, &refused, 409, "idempotency_key_reused", "another body under the key");
    assert_eq!(refused["error"]["message"], "this Idempotency-Key was already used with a different request");
    let (status, _, refused) = post(&other_admin, &json!({"to": "ann@example.com", "subject": 5}), "order-1").await;
    assert_invalid(status, &refused, &["subject"], "a malformed body under the key");

    // A send key's Idempotency-Keys are its own: the full keys' "order-1" is a new send for
    // it, replayed to itself only; another send key sends anew too.
    let (status, replayed, mine) = post(&sender, &send, "order-1").await;
    assert_ok(status, &mine, 201, "the send key sends");
    assert!(replayed.is_none() && mine["data"]["id"] != first["data"]["id"], "a message of its own: {mine}");
    let (status, replayed, again) = post(&sender, &send, "order-1").await;
    assert_ok(status, &again, 201, "the send key repeats");
    assert_eq!((replayed.as_deref(), &again["data"]["id"]), (Some("true"), &mine["data"]["id"]));
    let (status, _, refused) = post(&sender, &other, "order-1").await;
    assert_error(status, &refused, 409, "idempotency_key_reused", "its own key, another body");
    let (status, replayed, theirs) = post(&other_sender, &send, "order-1").await;
    assert_ok(status, &theirs, 201, "another send key");
    assert!(replayed.is_none() && theirs["data"]["id"] != mine["data"]["id"], "{theirs}");

    let (_, body) = server.get("/v1/messages", &admin).await;
    assert_eq!(ids(&body).len(), 3, "one message per full-key space and per send key: {body}");
}

#[tokio::test]
async fn refused_sends_and_replays_take_no_rate_limit_token() {
    let (server, dns) = server_with_dns(&[]).await;
    let admin = server.key().to_owned();
    verified_domain(&server, &dns, &admin, "tokens.example").await;
    let (_, key) = create_key(&server, &admin, json!({"scope": "send", "rateLimitPerSec": 1})).await;
    let post = |body: Value, idempotency_key: Option<&'static str>| {
        let mut request = server.request(Method::POST, "/v1/messages").bearer_auth(&key).json(&body);
        if let Some(k) = idempotency_key {
            request = request.header("idempotency-key", k);
        }
        async move {
            let response = request.send().await.expect("an HTTPS response");
            let headers = response.headers().clone();
            let (status, body) = into_parts(response).await;
            (status, headers, body)
        }
    };

    // A bucket of one token: three refusals in a row leave it full for the send after them,
    // and the next send finds it empty.
    for attempt in 1..=3 {
        let (status, _, body) = post(json!({"to": "not-an-address", "subject": "s", "text": "t"}), None).await;
        assert_invalid(status, &body, &["to"], &format!("refused send {attempt}"));
    }
    let send = json!({"to": "ann@example.com", "subject": "s", "text": "t"});
    let (status, _, body) = post(send.clone(), Some("once")).await;
    assert_ok(status, &body, 201, "the one token is still there after three refusals");
    let (status, headers, body) = post(json!({"to": "bob@example.com", "subject": "s", "text": "t"}), None).await;
    assert_error(status, &body, 429, "rate_limit_exceeded", "the bucket is empty now");

    // Once it refilled, replays leave the token for the next new send.
    let retry_after = headers.get("retry-after").expect("Retry-After on 429").to_str().unwrap();
    let wait: u64 = retry_after.parse().expect("whole seconds");
    tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
    for attempt in 1..=3 {
        let (status, headers, body) = post(send.clone(), Some("once")).await;
        assert_ok(status, &body, 201, &format!("replay {attempt}"));
        assert_eq!(headers.get("idempotent-replayed").map(|v| v.as_bytes()), Some(&b"true"[..]), "replay {attempt}");
    }
    let (status, _, body) = post(json!({"to": "cy@example.com", "subject": "s", "text": "t"}), None).await;
    assert_ok(status, &body, 201, "the refilled token is still there after three replays");
    let (status, _, body) = post(json!({"to": "dee@example.com", "subject": "s", "text": "t"}), None).await;
    assert_error(status, &body, 429, "rate_limit_exceeded", "and the bucket is empty again");
}

#[tokio::test]
async fn a_replay_is_answered_even_when_the_bucket_is_empty() {
    let (server, dns) = server_with_dns(&[]).await;
    let admin = server.key().to_owned();
    verified_domain(&server, &dns, &admin, "replay.example").await;
    let (_, key) = create_key(&server, &admin, json!({"scope": "send", "rateLimitPerSec": 1})).await;
    let send = json!({"to": "ann@example.com", "subject": "s", "text": "t"});
    let post = || {
        let request =
            server.request(Method::POST, "/v1/messages").bearer_auth(&key).header("idempotency-key", "retry-me");
        let request = request.json(&send);
        async move {
            let response = request.send().await.expect("an HTTPS response");
            let replayed = response.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap().to_owned());
            let (status, body) = into_parts(response).await;
            (status, replayed, body)
        }
    };

    let (status, _, first) = post().await;
    assert_ok(status, &first, 201, "the send takes the one token");
    // The client's retry (say, after a timeout) needs no token: it queues nothing.
    let (status, replayed, again) = post().await;
    assert_ok(status, &again, 201, "a replay right after, with the bucket empty");
    assert_eq!(replayed.as_deref(), Some("true"));
    assert_eq!(again["data"]["id"], first["data"]["id"]);
}

/// Every id of one `GET` page of `path`, and its `pagination`.
async fn page_of(server: &TestServer, key: &str, path: &str) -> (Vec<String>, Value) {
    let (status, body) = server.get(path, key).await;
    assert_ok(status, &body, 200, &format!("GET {path}"));
    (ids(&body), body["pagination"].clone())
}

#[tokio::test]
async fn messages_are_found_by_part_of_a_subject_or_an_address_and_paged_both_ways() {
    let (server, dns) = server_with_dns(&[("TIDINGS_DELIVERY", "hold")]).await;
    let key = server.key().to_owned();
    verified_domain(&server, &dns, &key, "mail.example").await;
    let mut orders = Vec::new();
    for n in 0..7 {
        let sent = send_ok(
            &server,
            json!({"to": format!("buyer{n}@Shop.example"), "subject": format!("Order #{n} shipped"), "text": "t"}),
        )
        .await;
        orders.push(sent["id"].as_str().unwrap().to_owned());
    }
    orders.reverse();
    // The next sends are in a later millisecond than every order.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let welcome = send_ok(
        &server,
        json!({"to": "Reader Ann <ann@example.com>", "cc": "boss@example.com", "subject": "Welcome", "text": "t"}),
    )
    .await;
    let welcome_id = welcome["id"].as_str().unwrap().to_owned();

    // Part of a subject, any case; part of an address; a display name; a cc.
    let (found, _) = page_of(&server, &key, "/v1/messages?q=oRdEr%20%23").await;
    assert_eq!(found, orders);
    let (found, _) = page_of(&server, &key, "/v1/messages?q=shop.EX").await;
    assert_eq!(found, orders);
    let (found, _) = page_of(&server, &key, "/v1/messages?q=%20reader%20").await;
    assert_eq!(found, std::slice::from_ref(&welcome_id), "a display name, trimmed");
    let (found, _) = page_of(&server, &key, "/v1/messages?q=boss@").await;
    assert_eq!(found, std::slice::from_ref(&welcome_id), "a cc recipient");
    let (found, _) = page_of(&server, &key, "/v1/messages?q=50%25_off").await;
    assert!(found.is_empty(), "nothing matches");
    let (found, _) = page_of(&server, &key, "/v1/messages?q=shipped&status=Delivered").await;
    assert!(found.is_empty(), "q and status together");

    // Dates: the welcome's own creation time is inclusive, as `createdAfter`.
    let since = welcome["createdAt"].as_str().unwrap().replace('+', "%2B");
    let (found, _) = page_of(&server, &key, &format!("/v1/messages?createdAfter={since}")).await;
    assert_eq!(found, std::slice::from_ref(&welcome_id));
    let (found, _) = page_of(&server, &key, &format!("/v1/messages?createdBefore={since}&q=order")).await;
    assert_eq!(found, orders, "createdBefore is exclusive");
    let today = welcome["createdAt"].as_str().unwrap()[..10].to_owned();
    let (found, _) = page_of(&server, &key, &format!("/v1/messages?createdBefore={today}")).await;
    assert!(found.is_empty(), "a date is its midnight: nothing was sent before today");

    // Three pages older, then back newer with `endingBefore`.
    let path = "/v1/messages?q=order&limit=3";
    let (first, p1) = page_of(&server, &key, path).await;
    assert_eq!(first, orders[0..3]);
    assert!(p1["prevCursor"].is_null(), "the first page: {p1}");
    let (second, p2) = page_of(&server, &key, &format!("{path}&cursor={}", p1["nextCursor"].as_str().unwrap())).await;
    assert_eq!(second, orders[3..6]);
    assert_eq!(p2["prevCursor"], orders[3].as_str(), "{p2}");
    let (third, p3) = page_of(&server, &key, &format!("{path}&cursor={}", p2["nextCursor"].as_str().unwrap())).await;
    assert_eq!(third, orders[6..7]);
    assert_eq!((&p3["hasMore"], &p3["nextCursor"]), (&json!(false), &Value::Null), "{p3}");
    let (back, b2) =
        page_of(&server, &key, &format!("{path}&endingBefore={}", p3["prevCursor"].as_str().unwrap())).await;
    assert_eq!(back, second);
    assert_eq!((&b2["hasMore"], &b2["nextCursor"]), (&json!(true), &json!(orders[5])), "{b2}");
    let (top, b1) =
        page_of(&server, &key, &format!("{path}&endingBefore={}", b2["prevCursor"].as_str().unwrap())).await;
    assert_eq!(top, first);
    assert!(b1["prevCursor"].is_null(), "back on the first page: {b1}");

    // Refusals name the parameter.
    let long = "x".repeat(201);
    for (query, field) in [
        ("q=ab".to_owned(), "q"),
        ("q=%20%20ab%20".to_owned(), "q"),
        (format!("q={long}"), "q"),
        ("createdAfter=last-week".to_owned(), "createdAfter"),
        ("createdBefore=2026-02-30".to_owned(), "createdBefore"),
        ("createdAfter=2026-05-02&createdBefore=2026-05-01".to_owned(), "createdBefore"),
        (format!("cursor={welcome_id}&endingBefore={welcome_id}"), "endingBefore"),
        ("endingBefore=nope".to_owned(), "endingBefore"),
    ] {
        let (status, body) = server.get(&format!("/v1/messages?{query}"), &key).await;
        assert_invalid(status, &body, &[field], &format!("GET /v1/messages?{query}"));
    }
}
