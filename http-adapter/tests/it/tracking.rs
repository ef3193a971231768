//! Open and click tracking end to end through the router (docs/api.md#tracking): a tracked send, the
//! pixel and links its MIME really carries, the events they record, and every tampered token
//! or odd path answered 404 in the envelope without recording anything.

use crate::support::{PUBLIC_URL, RawReply, TestApi};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mail_parser::MessageParser;
use serde_json::{Value, json};
use tidings_core::ids::{DomainId, EventId, MessageId};
use tidings_core::model::{DomainStatus, EventDetails, EventType, Message};
use tidings_core::outbound::build_message;
use tidings_core::ports::SystemRandom;
use tidings_core::state_machine::Happening;

const ORDER_URL: &str = "https://shop.example.com/orders/42?a=1&b=2";
const HTML: &str = concat!(
    r#"<html><body><p><a href="https://shop.example.com/orders/42?a=1&amp;b=2">Your order</a>"#,
    r#" <a href="mailto:help@shop.example.com">help</a></p></body></html>"#
);
const USER_AGENT: &str = "Mozilla/5.0 (Tidings test)";

/// A Verified domain `shop.example.com` of the default workspace, with its id.
async fn verified_domain(api: &TestApi) -> String {
    let r = api.post("/v1/domains", json!({ "domain": "shop.example.com" })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.data()["id"].as_str().unwrap().to_owned();
    let who = api.core.authenticate(&api.key).await.unwrap();
    let mut domain = api.core.domains().get(&who, DomainId::parse_or_none(&id)).await.unwrap();
    domain.status = DomainStatus::Verified;
    domain.verified_at = Some(domain.created_at);
    api.core.store().update_domain(&domain).await.unwrap();
    id
}

/// Sends `body` (plus recipient, sender and subject), asserting the 201; returns `data`.
async fn send(api: &TestApi, mut body: Value) -> Value {
    body["to"] = json!("ann@example.net");
    body["from"] = json!("orders@shop.example.com");
    body["subject"] = json!("Your order");
    let r = api.post("/v1/messages", body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    r.data().clone()
}

async fn stored_message(api: &TestApi, id: &str) -> Message {
    let who = api.core.authenticate(&api.key).await.unwrap();
    api.core.messages().get(&who, MessageId::parse_or_none(id)).await.unwrap()
}

/// The message as the delivery worker would build it, marked Sent; returns the paths (under
/// the public URL) of its tracking links and pixel, in document order.
async fn send_out(api: &TestApi, id: &str) -> Vec<String> {
    let message = stored_message(api, id).await;
    let who = api.core.authenticate(&api.key).await.unwrap();
    let domain = api.core.domains().get(&who, message.domain_id).await.unwrap();
    let built = build_message(&message, &domain, api.core.config().tracking.as_ref()).unwrap();
    let sent = Happening {
        event_id: EventId::new_at(api.core.clock().now(), &SystemRandom),
        event_type: EventType::Sent,
        at: api.core.clock().now(),
        details: EventDetails::default(),
        provider_message_id: Some(built.provider_message_id.clone()),
        next_attempt_at: None,
    };
    api.core.messages().record_event(&message, sent).await.unwrap();

    let parsed = MessageParser::default().parse(&built.raw).unwrap();
    let html = parsed.body_html(0).unwrap().into_owned();
    html.match_indices(PUBLIC_URL)
        .map(|(at, _)| {
            let rest = &html[at + PUBLIC_URL.len()..];
            rest[..rest.find('"').unwrap()].to_owned()
        })
        .collect()
}

async fn get(api: &TestApi, method: &str, path: &str) -> RawReply {
    let req = Request::builder().method(method).uri(path).header("user-agent", USER_AGENT);
    api.send_raw(req.body(Body::empty()).unwrap()).await
}

/// The message's timeline as the API shows it.
async fn events(api: &TestApi, id: &str) -> Vec<Value> {
    let r = api.get(&format!("/v1/messages/{id}/events")).await;
    r.data().as_array().unwrap().clone()
}

fn assert_not_found(reply: &RawReply, what: &str) {
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{what}");
    let body: Value = serde_json::from_slice(&reply.bytes).unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
    assert_eq!((&body["success"], &body["error"]["code"]), (&json!(false), &json!("not_found")), "{what}");
}

#[tokio::test]
async fn a_tracked_message_records_its_open_and_click_and_redirects_to_the_real_url() {
    let api = TestApi::new().await;
    verified_domain(&api).await;
    let data =
        send(&api, json!({ "html": HTML, "text": "plain", "tracking": { "opens": true, "clicks": true } })).await;
    assert_eq!(data["tracking"], json!({ "opens": true, "clicks": true }));
    let id = data["id"].as_str().unwrap();
    let paths = send_out(&api, id).await;
    assert_eq!(paths.len(), 2, "one tracked link (mailto is not) and the pixel: {paths:?}");
    let (click, pixel) = (&paths[0], &paths[1]);
    assert!(click.starts_with("/t/c/") && pixel.starts_with("/t/o/"), "{paths:?}");

    let r = get(&api, "GET", pixel).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!((r.headers["content-type"].to_str().unwrap(), r.bytes.len()), ("image/gif", 43));
    assert!(r.bytes.starts_with(b"GIF89a"));
    assert_eq!(r.headers["cache-control"], "no-store, private");

    let r = get(&api, "GET", click).await;
    assert_eq!(r.status, StatusCode::FOUND);
    assert_eq!(r.headers["location"], ORDER_URL);
    assert_eq!(r.headers["cache-control"], "no-store");
    assert!(r.bytes.is_empty());

    let timeline = events(&api, id).await;
    let types: Vec<&str> = timeline.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["Queued", "Sent", "Opened", "Clicked"]);
    assert_eq!(timeline[2]["details"], json!({ "userAgent": USER_AGENT }));
    assert_eq!(timeline[3]["details"], json!({ "url": ORDER_URL, "userAgent": USER_AGENT }));
    assert_eq!(stored_message(&api, id).await.status.as_str(), "Sent", "opens and clicks change no status");
}

#[tokio::test]
async fn head_requests_answer_like_get_and_record_nothing() {
    let api = TestApi::new().await;
    verified_domain(&api).await;
    let id = send(&api, json!({ "html": HTML, "tracking": { "opens": true, "clicks": true } })).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let paths = send_out(&api, &id).await;

    let pixel = get(&api, "HEAD", &paths[1]).await;
    let click = get(&api, "HEAD", &paths[0]).await;

    assert_eq!((pixel.status, pixel.headers["content-type"].to_str().unwrap()), (StatusCode::OK, "image/gif"));
    assert_eq!((click.status, click.headers["location"].to_str().unwrap()), (StatusCode::FOUND, ORDER_URL));
    assert_eq!(events(&api, &id).await.len(), 2, "Queued and Sent only");
}

#[tokio::test]
async fn tampered_tokens_are_404_in_the_envelope_and_record_nothing() {
    let api = TestApi::new().await;
    verified_domain(&api).await;
    let tracked = json!({ "html": HTML, "tracking": { "opens": true, "clicks": true } });
    let id = send(&api, tracked.clone()).await["id"].as_str().unwrap().to_owned();
    let other = send(&api, tracked).await["id"].as_str().unwrap().to_owned();
    let paths = send_out(&api, &id).await;
    send_out(&api, &other).await;
    let (click, pixel) = (&paths[0], &paths[1]);

    let mut tampered = Vec::new();
    for path in [click, pixel] {
        let at = path.len() - 10;
        let flipped = if &path[at..=at] == "A" { "B" } else { "A" };
        tampered.push(format!("{}{flipped}{}", &path[..at], &path[at + 1..]));
        tampered.push(path[..path.len() - 1].to_owned());
        tampered.push(format!("{path}A"));
        // The other message's id in place of this one's, the tag left as it was.
        let (prefix, token) = path.split_at(5);
        let mut bytes = URL_SAFE_NO_PAD.decode(token).unwrap();
        bytes[18..34].copy_from_slice(&MessageId::parse(&other).unwrap().to_bytes());
        tampered.push(format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes)));
    }
    // A genuine token at the other endpoint.
    tampered.push(format!("/t/o/{}", &click[5..]));
    tampered.push(format!("/t/c/{}", &pixel[5..]));

    for path in &tampered {
        assert_not_found(&get(&api, "GET", path).await, path);
        // A HEAD answer has no body, but the same status.
        assert_eq!(get(&api, "HEAD", path).await.status, StatusCode::NOT_FOUND, "HEAD {path}");
    }
    assert_eq!(events(&api, &id).await.len(), 2, "Queued and Sent only");
    assert_eq!(events(&api, &other).await.len(), 2, "Queued and Sent only");
}

#[tokio::test]
async fn paths_of_other_shapes_are_404_and_other_methods_405() {
    let api = TestApi::new().await;
    for path in ["/t", "/t/", "/t/o", "/t/o/", "/t/c/", "/t/x/abc", "/t/o/abc/def", "/t/o/%FF", "/t/c/not-a-token"] {
        assert_not_found(&get(&api, "GET", path).await, path);
    }
    let r = get(&api, "POST", "/t/o/abc").await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_send_without_tracking_takes_the_domains_defaults_and_untracked_html_is_unchanged() {
    let api = TestApi::new().await;
    let domain = verified_domain(&api).await;
    let patch = json!({ "clickTracking": true });
    let r = api.call("PATCH", &format!("/v1/domains/{domain}"), Some(&api.key), Some(patch)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);

    let defaults = send(&api, json!({ "html": HTML })).await;
    let opted_out = send(&api, json!({ "html": HTML, "tracking": { "clicks": false, "opens": null } })).await;

    assert_eq!(defaults["tracking"], json!({ "opens": false, "clicks": true }));
    assert_eq!(opted_out["tracking"], json!({ "opens": false, "clicks": false }));
    assert_eq!(send_out(&api, opted_out["id"].as_str().unwrap()).await, Vec::<String>::new());
    let r = api.get(&format!("/v1/messages/{}", defaults["id"].as_str().unwrap())).await;
    assert_eq!(r.data()["tracking"], json!({ "opens": false, "clicks": true }));
}

#[tokio::test]
async fn a_tracking_field_of_the_wrong_type_is_a_validation_error_naming_it() {
    let api = TestApi::new().await;
    verified_domain(&api).await;
    let base = json!({ "to": "ann@example.net", "subject": "s", "html": "<p>x</p>" });
    for (tracking, field) in [
        (json!("yes"), "tracking"),
        (json!([true]), "tracking"),
        (json!({ "opens": "yes" }), "tracking.opens"),
        (json!({ "clicks": 1 }), "tracking.clicks"),
    ] {
        let mut body = base.clone();
        body["tracking"] = tracking.clone();
        let r = api.post("/v1/messages", body).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"), "{tracking}");
        assert_eq!(r.body["error"]["details"][0]["field"], field, "{tracking}");
    }
}
