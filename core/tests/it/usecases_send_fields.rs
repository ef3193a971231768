//! The optional send fields through the send use case: what is accepted and kept
//! on the message, every refusal naming its field, the list filters on tags and metadata,
//! tags and metadata in webhook payloads, and idempotency hashes unchanged for requests
//! that do not use them.

use base64::Engine as _;
use serde_json::json;
use tidings_core::model::{Domain, DomainStatus};
use tidings_core::ports::DomainStore;
use tidings_core::usecases::{
    AttachmentRequest, CreateWebhookRequest, ListParams, MessageFilters, Principal, SendRequest, TagRequest,
};
use tidings_testing::TestCore;
use tidings_testing::fixtures;
use tidings_testing::service::{full_key, invalid_fields};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn send(to: &str) -> SendRequest {
    SendRequest {
        to: Some(to.into()),
        from: Some("billing@acme.com".into()),
        subject: Some("Your receipt".into()),
        text: Some("Thanks.".into()),
        html: Some(r#"<p><img src="cid:logo"> Thanks.</p>"#.into()),
        ..SendRequest::default()
    }
}

fn tag(name: &str, value: &str) -> TagRequest {
    TagRequest { name: name.into(), value: value.into() }
}

fn file(filename: &str, content_type: &str, content: &str, content_id: Option<&str>) -> AttachmentRequest {
    AttachmentRequest {
        filename: filename.into(),
        content_type: content_type.into(),
        content: content.into(),
        content_id: content_id.map(Into::into),
    }
}

async fn verified(t: &TestCore, who: &Principal) -> Domain {
    let mut domain = fixtures::domain(who.workspace_id, "acme.com");
    domain.status = DomainStatus::Verified;
    domain.verified_at = Some(t.now());
    t.store.insert_domain(&domain).await.unwrap();
    domain
}

fn full_send(to: &str) -> SendRequest {
    SendRequest {
        reply_to: Some(json!(["help@acme.com", "Ops@Acme.com"])),
        headers: Some(json!({"X-Campaign": "spring", "List-Unsubscribe": "<https://acme.com/u>"})),
        tags: Some(vec![tag("plan", "pro"), tag("beta", "")]),
        metadata: Some(json!({"orderId": "A-17", "region": "eu"})),
        attachments: Some(vec![
            file("invoice.pdf", "application/pdf", &b64(b"%PDF-1.7"), None),
            file("logo.png", "image/png", &b64(b"png"), Some("logo")),
        ]),
        ..send(to)
    }
}

#[tokio::test]
async fn every_field_is_kept_on_the_message() {
    let t = TestCore::new();
    let who = full_key();
    verified(&t, &who).await;

    let m = t.core.messages().send(&who, full_send("u@example.com"), None).await.unwrap().message;

    let extras = &m.extras;
    let reply_to: Vec<String> = extras.reply_to.iter().map(ToString::to_string).collect();
    assert_eq!(reply_to, ["help@acme.com", "Ops@acme.com"], "domains are kept in lower case, local parts as given");
    let headers: Vec<(&str, &str)> = extras.headers.iter().map(|h| (h.name(), h.value())).collect();
    assert_eq!(headers, [("List-Unsubscribe", "<https://acme.com/u>"), ("X-Campaign", "spring")]);
    let tags: Vec<(&str, &str)> = extras.tags.iter().map(|t| (t.name(), t.value())).collect();
    assert_eq!(tags, [("plan", "pro"), ("beta", "")]);
    assert_eq!(extras.metadata.iter().collect::<Vec<_>>(), [("orderId", "A-17"), ("region", "eu")]);
    let files: Vec<(&str, Option<&str>, u64)> =
        extras.attachments.iter().map(|a| (a.filename(), a.content_id(), a.size())).collect();
    assert_eq!(files, [("invoice.pdf", None, 8), ("logo.png", Some("logo"), 3)]);
    let stored = t.core.messages().get(&who, m.id).await.unwrap();
    assert_eq!(stored, m);
}

#[tokio::test]
async fn one_reply_to_address_may_be_a_plain_string() {
    let t = TestCore::new();
    let who = full_key();
    verified(&t, &who).await;
    let req = SendRequest { reply_to: Some(json!("help@acme.com")), ..send("u@example.com") };

    let m = t.core.messages().send(&who, req, None).await.unwrap().message;

    assert_eq!(m.extras.reply_to.iter().map(ToString::to_string).collect::<Vec<_>>(), ["help@acme.com"]);
}

#[tokio::test]
async fn each_bad_field_is_reported_by_name_and_nothing_is_stored() {
    let t = TestCore::new();
    let who = full_key();
    verified(&t, &who).await;
    let many = |n: usize| (0..n).map(|i| json!(format!("r{i}@acme.com"))).collect::<Vec<_>>();
    let big = "A".repeat(40 * 1024 * 1024 + 4);
    let cases: Vec<(SendRequest, Vec<&str>)> = vec![
        (SendRequest { reply_to: Some(json!("not an address")), ..send("u@example.com") }, vec!["replyTo"]),
        (
            SendRequest { reply_to: Some(json!(["a@acme.com", "bad", 3])), ..send("u@example.com") },
            vec!["replyTo[1]", "replyTo[2]"],
        ),
        (SendRequest { reply_to: Some(json!(many(51))), ..send("u@example.com") }, vec!["replyTo"]),
        (SendRequest { reply_to: Some(json!([])), ..send("u@example.com") }, vec!["replyTo"]),
        (SendRequest { reply_to: Some(json!({"a": 1})), ..send("u@example.com") }, vec!["replyTo"]),
        (SendRequest { headers: Some(json!(["X-A"])), ..send("u@example.com") }, vec!["headers"]),
        (SendRequest { headers: Some(json!({"From": "x@evil.com"})), ..send("u@example.com") }, vec!["headers.From"]),
        (
            SendRequest { headers: Some(json!({"reply-to": "x@evil.com"})), ..send("u@example.com") },
            vec!["headers.reply-to"],
        ),
        (
            SendRequest { headers: Some(json!({"X-A": "1\r\nBcc: v@example.com"})), ..send("u@example.com") },
            vec!["headers.X-A"],
        ),
        (SendRequest { headers: Some(json!({"X A": "1"})), ..send("u@example.com") }, vec!["headers.X A"]),
        (SendRequest { headers: Some(json!({"X-A": 1})), ..send("u@example.com") }, vec!["headers.X-A"]),
        (SendRequest { headers: Some(json!({"X-A": "1", "x-a": "2"})), ..send("u@example.com") }, vec!["headers.x-a"]),
        (SendRequest { headers: Some(json!({"X-A": "v".repeat(999)})), ..send("u@example.com") }, vec!["headers.X-A"]),
        (
            SendRequest {
                headers: Some(serde_json::Value::Object((0..51).map(|i| (format!("X-{i}"), json!("v"))).collect())),
                ..send("u@example.com")
            },
            vec!["headers"],
        ),
        (SendRequest { tags: Some(vec![tag("has space", "v")]), ..send("u@example.com") }, vec!["tags[0].name"]),
        (SendRequest { tags: Some(vec![tag("ok", "é")]), ..send("u@example.com") }, vec!["tags[0].value"]),
        (SendRequest { tags: Some(vec![tag("a", "1"), tag("a", "2")]), ..send("u@example.com") }, vec!["tags[1].name"]),
        (
            SendRequest { tags: Some((0..11).map(|i| tag(&format!("t{i}"), "")).collect()), ..send("u@example.com") },
            vec!["tags"],
        ),
        (SendRequest { metadata: Some(json!({"n": 1})), ..send("u@example.com") }, vec!["metadata.n"]),
        (
            SendRequest { metadata: Some(json!({"k".repeat(41): "v"})), ..send("u@example.com") },
            vec!["metadata.kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"],
        ),
        (SendRequest { metadata: Some(json!({"a[b]": "v"})), ..send("u@example.com") }, vec!["metadata.a[b]"]),
        (
            SendRequest { metadata: Some(json!({"big": "v".repeat(10 * 1024)})), ..send("u@example.com") },
            vec!["metadata"],
        ),
        (SendRequest { metadata: Some(json!("text")), ..send("u@example.com") }, vec!["metadata"]),
        (
            SendRequest {
                attachments: Some(vec![file("setup.exe", "application/octet-stream", "", None)]),
                ..send("u@example.com")
            },
            vec!["attachments[0].filename"],
        ),
        (
            SendRequest {
                attachments: Some(vec![
                    file("ok.pdf", "application/pdf", "", None),
                    file("x.bin", "application/x-msdownload", "", None),
                ]),
                ..send("u@example.com")
            },
            vec!["attachments[1].contentType"],
        ),
        (
            SendRequest {
                attachments: Some(vec![file("../a.pdf", "application/pdf", "", None)]),
                ..send("u@example.com")
            },
            vec!["attachments[0].filename"],
        ),
        (
            SendRequest { attachments: Some(vec![file("a.pdf", "pdf", "", None)]), ..send("u@example.com") },
            vec!["attachments[0].contentType"],
        ),
        (
            SendRequest {
                attachments: Some(vec![file("a.pdf", "application/pdf", "***", None)]),
                ..send("u@example.com")
            },
            vec!["attachments[0].content"],
        ),
        (
            SendRequest {
                attachments: Some(vec![file("a.png", "image/png", "", Some("<a>"))]),
                ..send("u@example.com")
            },
            vec!["attachments[0].contentId"],
        ),
        (
            SendRequest {
                attachments: Some(vec![
                    file("a.png", "image/png", "", Some("a")),
                    file("b.png", "image/png", "", Some("a")),
                ]),
                ..send("u@example.com")
            },
            vec!["attachments[1].contentId"],
        ),
        (
            SendRequest {
                attachments: Some(vec![file("big.bin", "application/octet-stream", &big, None)]),
                ..send("u@example.com")
            },
            vec!["attachments"],
        ),
        (
            SendRequest {
                attachments: Some((0..101).map(|i| file(&format!("{i}.txt"), "text/plain", "", None)).collect()),
                ..send("u@example.com")
            },
            vec!["attachments"],
        ),
        (
            SendRequest {
                html: None,
                attachments: Some(vec![file("a.png", "image/png", "", Some("a"))]),
                ..send("u@example.com")
            },
            vec!["attachments[0].contentId"],
        ),
    ];
    for (req, fields) in cases {
        let described = format!("{:?}", (&req.reply_to, &req.headers, &req.tags, &req.metadata));
        assert_eq!(invalid_fields(t.core.messages().send(&who, req, None).await), fields, "{described}");
    }

    let listed = t.core.messages().list(&who, ListParams::default(), &MessageFilters::default()).await.unwrap();
    assert!(listed.items.is_empty());
}

#[tokio::test]
async fn lists_filter_by_tag_and_by_metadata() {
    let t = TestCore::new();
    let who = full_key();
    verified(&t, &who).await;
    let labelled = |tags: Vec<TagRequest>, metadata: serde_json::Value| SendRequest {
        tags: Some(tags),
        metadata: Some(metadata),
        ..send("u@example.com")
    };
    let pro =
        t.core.messages().send(&who, labelled(vec![tag("plan", "pro")], json!({"order": "1"})), None).await.unwrap();
    let free = t
        .core
        .messages()
        .send(&who, labelled(vec![tag("plan", "free")], json!({"order": "2", "region": "eu"})), None)
        .await
        .unwrap();
    t.core.messages().send(&who, send("u@example.com"), None).await.unwrap();
    let list = |tags: &[&str], metadata: &[(&str, &str)]| {
        let filters = MessageFilters {
            tags: tags.iter().map(|s| (*s).to_owned()).collect(),
            metadata: metadata.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            ..MessageFilters::default()
        };
        let core = t.core.clone();
        let who = who.clone();
        async move {
            core.messages()
                .list(&who, ListParams::default(), &filters)
                .await
                .map(|l| l.items.into_iter().map(|m| m.id).collect::<Vec<_>>())
        }
    };

    assert_eq!(list(&["plan:pro"], &[]).await.unwrap(), [pro.message.id]);
    assert_eq!(list(&["plan"], &[]).await.unwrap(), [free.message.id, pro.message.id]);
    assert_eq!(list(&["plan:gold"], &[]).await.unwrap(), []);
    assert_eq!(list(&[], &[("order", "2")]).await.unwrap(), [free.message.id]);
    assert_eq!(list(&["plan"], &[("region", "eu")]).await.unwrap(), [free.message.id]);
    assert_eq!(list(&["plan:pro"], &[("region", "eu")]).await.unwrap(), []);
    assert_eq!(invalid_fields(list(&["bad name:x"], &[]).await), ["tag"]);
    assert_eq!(invalid_fields(list(&[], &[("", "x")]).await), ["metadata[]"]);
}

#[tokio::test]
async fn webhook_payloads_carry_the_tags_and_metadata() {
    let t = TestCore::new();
    let who = full_key();
    verified(&t, &who).await;
    let hook = t
        .core
        .webhooks()
        .create(
            &who,
            CreateWebhookRequest {
                url: Some("https://hooks.example.com/tidings".into()),
                event_types: Some(vec!["Queued".into()]),
                enabled: None,
                format: None,
            },
        )
        .await
        .unwrap();

    t.core.messages().send(&who, full_send("u@example.com"), None).await.unwrap();

    let deliveries = t.core.webhooks().deliveries(&who, hook.id, ListParams::default()).await.unwrap();
    let payload: serde_json::Value = serde_json::from_str(&deliveries.items[0].payload).unwrap();
    assert_eq!(payload["data"]["tags"], json!([{"name": "plan", "value": "pro"}, {"name": "beta", "value": ""}]));
    assert_eq!(payload["data"]["metadata"], json!({"orderId": "A-17", "region": "eu"}));
}

#[test]
fn a_request_without_the_new_fields_serializes_as_before_so_idempotency_hashes_still_match() {
    let value = serde_json::to_value(send("u@example.com")).unwrap();
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["from", "html", "subject", "templateId", "templateVersionId", "text", "to", "variables"]);
}

#[tokio::test]
async fn html_and_text_over_five_mib_are_refused_naming_the_field_and_five_mib_is_accepted() {
    use tidings_core::usecases::MAX_BODY_PART_BYTES;
    let t = TestCore::new();
    let who = full_key();
    verified(&t, &who).await;
    let over = "a".repeat(MAX_BODY_PART_BYTES + 1);
    let req = SendRequest { html: Some(over.clone()), text: Some(over), ..send("u@example.com") };
    assert_eq!(invalid_fields(t.core.messages().send(&who, req, None).await), ["html", "text"]);
    let at_limit = "a".repeat(MAX_BODY_PART_BYTES);
    let req = SendRequest { html: Some(at_limit.clone()), text: Some(at_limit), ..send("u@example.com") };
    let sent = t.core.messages().send(&who, req, None).await.unwrap();
    assert_eq!(sent.message.html.as_deref().map(str::len), Some(MAX_BODY_PART_BYTES));
}
