//! The renderers of every format against one message: which events each format carries
//! (the mapping of [`WebhookFormat::event_name`]), and the field names and values of the
//! shapes Resend's SDK and Postmark's documentation give.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use serde_json::{Value, json};
use ulid::Ulid;

use super::{message_event_body, test_body};
use crate::email::EmailAddress;
use crate::ids::{EventId, WebhookId};
use crate::model::extras::{Metadata, Tag};
use crate::model::{BounceType, EventDetails, EventType, Message, MessageEvent, WebhookFormat};
use crate::outbound::test_support::{message_from, proptest_cases, signing_domain};

fn at() -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_100, 0).unwrap()
}

/// A sent message with two tags and metadata.
fn message() -> Message {
    let mut m = message_from(&signing_domain("example.com"));
    m.provider_message_id = Some("abc.123@example.com".into());
    m.extras.tags = vec![Tag::parse("category", "invoice").unwrap(), Tag::parse("tier", "gold").unwrap()];
    m.extras.metadata = Metadata::parse(BTreeMap::from([("order".to_owned(), "42".to_owned())])).unwrap();
    m
}

fn event(message: &Message, event_type: EventType, details: EventDetails) -> MessageEvent {
    MessageEvent {
        id: EventId(Ulid::from_parts(at().timestamp_millis() as u64, 0xABCD_EF01_2345_6789)),
        message_id: message.id,
        event_type,
        provider_message_id: message.provider_message_id.clone(),
        occurred_at: at(),
        details,
        recipient: None,
    }
}

fn body(format: WebhookFormat, message: &Message, event: &MessageEvent) -> Value {
    let text = message_event_body(format, message, event).unwrap().expect("the format has this event");
    serde_json::from_str(&text).unwrap()
}

fn bounce(kind: BounceType) -> EventDetails {
    EventDetails {
        smtp_code: Some(550),
        enhanced_code: Some("5.1.1".into()),
        response: Some("550 5.1.1 no such user".into()),
        bounce_type: Some(kind),
        ..EventDetails::default()
    }
}

fn click() -> EventDetails {
    EventDetails {
        url: Some("https://example.com/pricing".into()),
        user_agent: Some("Mozilla/5.0 (X11)".into()),
        ..EventDetails::default()
    }
}

/// The event name a body declares: `type` in Tidings' and Resend's envelopes, `RecordType`
/// in Postmark's.
fn declared_type(format: WebhookFormat, body: &Value) -> &str {
    let key = if format == WebhookFormat::Postmark { "RecordType" } else { "type" };
    body[key].as_str().unwrap()
}

#[test]
fn each_format_sends_exactly_the_events_of_its_mapping_under_their_names() {
    let m = message();
    for format in WebhookFormat::ALL {
        for t in EventType::ALL {
            let e = event(&m, t, EventDetails::default());
            let rendered = message_event_body(format, &m, &e).unwrap();
            match format.event_name(t) {
                None => assert_eq!(rendered, None, "{format} {t:?}"),
                Some(name) => {
                    let v: Value = serde_json::from_str(&rendered.expect("rendered")).unwrap();
                    assert_eq!(declared_type(format, &v), name, "{format} {t:?}");
                }
            }
        }
    }
    // The events the task names, spelled as Resend and Postmark spell them.
    let resend: Vec<_> = EventType::ALL.iter().filter_map(|t| WebhookFormat::Resend.event_name(*t)).collect();
    for name in ["email.sent", "email.delivered", "email.delivery_delayed", "email.bounced", "email.complained"] {
        assert!(resend.contains(&name), "{name}");
    }
    for name in ["email.opened", "email.clicked", "email.failed", "email.suppressed", "email.scheduled"] {
        assert!(resend.contains(&name), "{name}");
    }
    let postmark: Vec<_> = EventType::ALL.iter().filter_map(|t| WebhookFormat::Postmark.event_name(*t)).collect();
    assert_eq!(postmark, ["Delivery", "Bounce", "SpamComplaint", "Open", "Click"]);
}

#[test]
fn resend_delivered_has_resends_envelope_and_email_fields() {
    let m = message();
    let v = body(WebhookFormat::Resend, &m, &event(&m, EventType::Delivered, EventDetails::default()));
    assert_eq!(
        v,
        json!({
            "type": "email.delivered",
            "created_at": "2023-11-14T22:15:00Z",
            "data": {
                "email_id": m.id.to_string(),
                "created_at": "2023-11-14T22:13:20Z",
                "from": "\"Acme Billing\" <billing@example.com>",
                "to": ["user@example.net"],
                "subject": "Your invoice",
                "message_id": "<abc.123@example.com>",
                "tags": {"category": "invoice", "tier": "gold"},
            }
        })
    );
}

#[test]
fn resend_bounce_click_failure_and_suppression_carry_their_details() {
    let m = message();
    let hard = body(WebhookFormat::Resend, &m, &event(&m, EventType::Bounced, bounce(BounceType::Hard)));
    assert_eq!(
        hard["data"]["bounce"],
        json!({"message": "550 5.1.1 no such user", "subType": "General", "type": "Permanent"})
    );
    let soft = body(WebhookFormat::Resend, &m, &event(&m, EventType::Bounced, bounce(BounceType::Soft)));
    assert_eq!(soft["data"]["bounce"]["type"], "Transient");
    let clicked = body(WebhookFormat::Resend, &m, &event(&m, EventType::Clicked, click()));
    assert_eq!(
        clicked["data"]["click"],
        json!({"ipAddress": "", "link": "https://example.com/pricing", "timestamp": "2023-11-14T22:15:00Z", "userAgent": "Mozilla/5.0 (X11)"})
    );
    let failed = EventDetails { response: Some("domain deleted".into()), ..EventDetails::default() };
    let failed = body(WebhookFormat::Resend, &m, &event(&m, EventType::Failed, failed));
    assert_eq!(failed["data"]["failed"], json!({"reason": "domain deleted"}));
    let suppressed = body(WebhookFormat::Resend, &m, &event(&m, EventType::Suppressed, EventDetails::default()));
    assert_eq!(suppressed["data"]["suppressed"]["type"], "OnAccountSuppressionList");
    // Only the event that carries a detail object has it.
    let delivered = body(WebhookFormat::Resend, &m, &event(&m, EventType::Delivered, bounce(BounceType::Hard)));
    for key in ["bounce", "click", "failed", "suppressed"] {
        assert!(delivered["data"].get(key).is_none(), "{key}");
        assert!(hard["data"].get(key).is_none() || key == "bounce", "{key}");
    }
}

#[test]
fn postmark_delivery_and_bounces_use_postmarks_field_names() {
    let m = message();
    let delivered = EventDetails { response: Some("250 2.0.0 OK".into()), ..EventDetails::default() };
    let v = body(WebhookFormat::Postmark, &m, &event(&m, EventType::Delivered, delivered));
    assert_eq!(
        v,
        json!({
            "RecordType": "Delivery",
            "MessageID": m.id.to_string(),
            "ServerID": 0,
            "MessageStream": "outbound",
            "Tag": "invoice",
            "Metadata": {"order": "42"},
            "Recipient": "user@example.net",
            "DeliveredAt": "2023-11-14T22:15:00Z",
            "Details": "250 2.0.0 OK",
        })
    );
    let hard = body(WebhookFormat::Postmark, &m, &event(&m, EventType::Bounced, bounce(BounceType::Hard)));
    assert_eq!(hard["RecordType"], "Bounce");
    assert_eq!((&hard["Type"], &hard["TypeCode"], &hard["Inactive"]), (&json!("HardBounce"), &json!(1), &json!(true)));
    assert_eq!(hard["Email"], "user@example.net");
    assert_eq!(hard["From"], "billing@example.com");
    assert_eq!(hard["Subject"], "Your invoice");
    assert_eq!(hard["Details"], "550 5.1.1 no such user");
    assert_eq!(hard["BouncedAt"], "2023-11-14T22:15:00Z");
    assert_eq!(hard["ID"], json!(0x0D_EF01_2345_6789_u64 & ((1 << 53) - 1)));
    for key in ["Name", "Description", "DumpAvailable", "CanActivate", "MessageID", "ServerID", "MessageStream"] {
        assert!(hard.get(key).is_some(), "{key}");
    }
    let soft = body(WebhookFormat::Postmark, &m, &event(&m, EventType::Bounced, bounce(BounceType::Soft)));
    assert_eq!(
        (&soft["Type"], &soft["TypeCode"], &soft["Inactive"]),
        (&json!("SoftBounce"), &json!(4096), &json!(false))
    );
    let complaint = body(WebhookFormat::Postmark, &m, &event(&m, EventType::Complained, EventDetails::default()));
    assert_eq!(
        (&complaint["RecordType"], &complaint["Type"], &complaint["TypeCode"]),
        (&json!("SpamComplaint"), &json!("SpamComplaint"), &json!(100_001))
    );
}

#[test]
fn postmark_open_and_click_carry_the_agent_link_and_time() {
    let mut m = message();
    let open = EventDetails { user_agent: Some("Mail/1.0".into()), ..EventDetails::default() };
    m.tracking_tally.opens = 1;
    let first = body(WebhookFormat::Postmark, &m, &event(&m, EventType::Opened, open.clone()));
    assert_eq!((&first["RecordType"], &first["FirstOpen"]), (&json!("Open"), &json!(true)));
    assert_eq!((&first["UserAgent"], &first["ReceivedAt"]), (&json!("Mail/1.0"), &json!("2023-11-14T22:15:00Z")));
    assert_eq!(first["Recipient"], "user@example.net");
    m.tracking_tally.opens = 2;
    let again = body(WebhookFormat::Postmark, &m, &event(&m, EventType::Opened, open));
    assert_eq!(again["FirstOpen"], false);
    let clicked = body(WebhookFormat::Postmark, &m, &event(&m, EventType::Clicked, click()));
    assert_eq!(clicked["RecordType"], "Click");
    assert_eq!(clicked["OriginalLink"], "https://example.com/pricing");
    assert_eq!(clicked["ClickLocation"], "HTML");
    for key in ["Client", "OS", "Platform", "Geo", "MessageID", "Metadata", "Tag"] {
        assert!(clicked.get(key).is_some(), "{key}");
    }
}

#[test]
fn an_event_about_one_recipient_names_that_recipient() {
    let m = message();
    let mut e = event(&m, EventType::Bounced, bounce(BounceType::Hard));
    e.recipient = Some(EmailAddress::parse("second@example.org").unwrap());
    assert_eq!(body(WebhookFormat::Resend, &m, &e)["data"]["to"], json!(["second@example.org"]));
    assert_eq!(body(WebhookFormat::Postmark, &m, &e)["Email"], "second@example.org");
    assert_eq!(body(WebhookFormat::Tidings, &m, &e)["data"]["recipient"], "second@example.org");
}

#[test]
fn test_events_say_what_they_are_in_each_format() {
    let (webhook, event_id) = (WebhookId(Ulid::from_parts(1, 7)), EventId(Ulid::from_parts(2, 9)));
    let parse =
        |format| -> Value { serde_json::from_str(&test_body(format, webhook, event_id, at()).unwrap()).unwrap() };
    assert_eq!(parse(WebhookFormat::Tidings)["type"], "Test");
    let resend = parse(WebhookFormat::Resend);
    assert_eq!((&resend["type"], &resend["created_at"]), (&json!("tidings.test"), &json!("2023-11-14T22:15:00Z")));
    assert_eq!(resend["data"]["webhook_id"], webhook.to_string());
    let postmark = parse(WebhookFormat::Postmark);
    assert_eq!((&postmark["RecordType"], &postmark["WebhookID"]), (&json!("Test"), &json!(webhook.to_string())));
}

fn any_details() -> impl Strategy<Value = EventDetails> {
    (
        proptest::option::of(any::<u16>()),
        proptest::option::of(".{0,40}"),
        proptest::option::of(prop_oneof![Just(BounceType::Hard), Just(BounceType::Soft)]),
        proptest::option::of(".{0,40}"),
        proptest::option::of(".{0,40}"),
        proptest::option::of(0i64..10_000_000),
    )
        .prop_map(|(smtp_code, response, bounce_type, url, user_agent, later)| EventDetails {
            smtp_code,
            response,
            bounce_type,
            url,
            user_agent,
            next_attempt_at: later.map(|s| at() + Duration::seconds(s)),
            ..EventDetails::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(256)))]

    /// Whatever an event carries, every format renders it as one JSON object (or leaves it
    /// out by its mapping), and the texts a receiver keys on come through unchanged.
    #[test]
    fn any_event_renders_as_json_in_every_format(
        t in proptest::sample::select(EventType::ALL.to_vec()),
        details in any_details(),
        subject in ".{0,60}",
        with_recipient in any::<bool>(),
    ) {
        let mut m = message();
        m.subject = subject.clone();
        let mut e = event(&m, t, details.clone());
        if with_recipient {
            e.recipient = Some(EmailAddress::parse("other@example.org").unwrap());
        }
        let id = m.id.to_string();
        let recipient = if with_recipient { "other@example.org" } else { "user@example.net" };
        for format in WebhookFormat::ALL {
            let rendered = message_event_body(format, &m, &e).unwrap();
            prop_assert_eq!(rendered.is_some(), format.event_name(t).is_some());
            let Some(text) = rendered else { continue };
            let v: Value = serde_json::from_str(&text).unwrap();
            prop_assert!(v.is_object());
            prop_assert_eq!(declared_type(format, &v), format.event_name(t).unwrap());
            match format {
                WebhookFormat::Tidings => prop_assert_eq!(v["data"]["subject"].as_str(), Some(subject.as_str())),
                WebhookFormat::Resend => {
                    prop_assert_eq!(v["data"]["subject"].as_str(), Some(subject.as_str()));
                    prop_assert_eq!(&v["data"]["to"], &json!([recipient]));
                    prop_assert_eq!(v["data"]["email_id"].as_str(), Some(id.as_str()));
                }
                WebhookFormat::Postmark => {
                    let who = if t == EventType::Bounced || t == EventType::Complained { "Email" } else { "Recipient" };
                    prop_assert_eq!(v[who].as_str(), Some(recipient));
                    prop_assert_eq!(v["MessageID"].as_str(), Some(id.as_str()));
                }
            }
            if t == EventType::Clicked {
                let link = if format == WebhookFormat::Postmark { &v["OriginalLink"] } else if format == WebhookFormat::Resend { &v["data"]["click"]["link"] } else { &v["data"]["details"]["url"] };
                let expected = details.url.clone().map_or(if format == WebhookFormat::Tidings { Value::Null } else { json!("") }, Value::from);
                prop_assert_eq!(link, &expected);
            }
        }
    }
}
