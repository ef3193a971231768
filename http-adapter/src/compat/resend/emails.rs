//! Resend's email request and response shapes (as resend-node's `parseEmailToApiOptions`
//! writes them and its `GetEmailResponseSuccess` reads them) and their translation to and
//! from core's `SendRequest` and `Message`. Fields keep Resend's snake_case names.

use base64::Engine as _;
use chrono::SecondsFormat;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tidings_core::Error;
use tidings_core::ids::TemplateId;
use tidings_core::model::{Message, MessageStatus, RecipientKind};
use tidings_core::usecases::{self, AttachmentRequest, SendRequest, TagRequest};

/// Body of `POST /resend/emails` and each item of `POST /resend/emails/batch`.
#[derive(Deserialize)]
pub(super) struct CreateEmailRequest {
    from: Option<String>,
    to: Option<Value>,
    cc: Option<Value>,
    bcc: Option<Value>,
    reply_to: Option<Value>,
    subject: Option<String>,
    html: Option<String>,
    text: Option<String>,
    headers: Option<Value>,
    pub(super) attachments: Option<Vec<ResendAttachment>>,
    tags: Option<Vec<ResendTag>>,
    scheduled_at: Option<String>,
    template: Option<TemplateRef>,
    /// Resend's subscription topics, which Tidings does not have: refused when set.
    topic_id: Option<Value>,
}

/// `template: {id, variables}`.
#[derive(Deserialize)]
struct TemplateRef {
    id: String,
    variables: Option<Value>,
}

/// `tags: [{name, value}]`.
#[derive(Deserialize)]
struct ResendTag {
    name: String,
    #[serde(default)]
    value: String,
}

/// One file of `attachments`: its bytes as `content`, or a URL to fetch them from as `path`
/// (`attachment_paths` fetches them before [`CreateEmailRequest::into_send`]).
#[derive(Deserialize)]
pub(super) struct ResendAttachment {
    pub(super) content: Option<Content>,
    /// resend-node's type allows `false` for "no name".
    #[serde(default, deserialize_with = "filename")]
    filename: Option<String>,
    pub(super) path: Option<String>,
    pub(super) content_type: Option<String>,
    content_id: Option<String>,
}

/// An attachment's bytes in any of the forms resend-node sends: a base64 string (kept as it
/// came; core checks it), or bytes, as an array of byte values or as a Node `Buffer`'s JSON
/// (`{"type":"Buffer","data":[…]}`), encoded here to the base64 core takes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Content {
    Base64(String),
    Bytes(Vec<u8>),
}

impl Content {
    /// The content as standard base64, as core's `AttachmentRequest` takes it.
    pub(super) fn into_base64(self) -> String {
        match self {
            Self::Base64(text) => text,
            Self::Bytes(bytes) => base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Forms;
        impl<'de> Visitor<'de> for Forms {
            type Value = Content;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a base64 string, an array of byte values or a Buffer object {\"type\":\"Buffer\",\"data\":[…]}",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
                Ok(Content::Base64(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Content, E> {
                Ok(Content::Base64(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(b) = seq.next_element::<u8>()? {
                    bytes.push(b);
                }
                Ok(Content::Bytes(bytes))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Content, A::Error> {
                let (mut kind, mut data) = (None::<String>, None::<Vec<u8>>);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "type" => kind = Some(map.next_value()?),
                        "data" => data = Some(map.next_value()?),
                        _ => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                match (kind.as_deref(), data) {
                    (Some("Buffer"), Some(bytes)) => Ok(Content::Bytes(bytes)),
                    _ => Err(de::Error::custom("an object must be a Buffer: {\"type\":\"Buffer\",\"data\":[…]}")),
                }
            }
        }
        deserializer.deserialize_any(Forms)
    }
}

fn filename<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Name {
        Text(String),
        Flag(bool),
    }
    match Option::<Name>::deserialize(d)? {
        Some(Name::Text(name)) => Ok(Some(name)),
        Some(Name::Flag(false)) | None => Ok(None),
        Some(Name::Flag(true)) => Err(de::Error::custom("must be a string (or false)")),
    }
}

/// Used when an attachment names no `content_type`, as Resend does for a type it cannot tell.
const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";

impl CreateEmailRequest {
    /// Core's send request, once every `path` was fetched into `content`; what only Resend has
    /// and Tidings does not serve is refused here, naming the field, rather than dropped
    /// silently.
    pub(super) fn into_send(self) -> Result<SendRequest, Error> {
        if self.topic_id.as_ref().is_some_and(|t| !t.is_null()) {
            return Err(Error::field("topic_id", "is not supported by Tidings: leave it out"));
        }
        let mut attachments = Vec::new();
        for (i, a) in self.attachments.into_iter().flatten().enumerate() {
            if a.path.is_some() {
                // `attachment_paths` takes every path out; one left here was never fetched.
                return Err(Error::field(format!("attachments[{i}].path"), "was not fetched"));
            }
            let content = a.content.ok_or_else(|| Error::field(format!("attachments[{i}].content"), "is required"))?;
            attachments.push(AttachmentRequest {
                filename: a.filename.unwrap_or_default(),
                content_type: a.content_type.unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_owned()),
                content: content.into_base64().into(),
                content_id: a.content_id,
            });
        }
        let (template_id, variables) = match self.template {
            Some(t) => (Some(t.id), t.variables),
            None => (None, None),
        };
        Ok(SendRequest {
            to: self.to,
            cc: self.cc,
            bcc: self.bcc,
            from: self.from,
            subject: self.subject,
            html: self.html,
            text: self.text,
            template_id,
            template_version_id: None,
            variables,
            tracking: None,
            reply_to: self.reply_to,
            headers: self.headers,
            tags: self.tags.map(|tags| tags.into_iter().map(|t| TagRequest { name: t.name, value: t.value }).collect()),
            metadata: None,
            attachments: (!attachments.is_empty()).then_some(attachments),
            scheduled_at: self.scheduled_at,
            written_headers: None,
        })
    }
}

impl CreateEmailRequest {
    /// `template.id` when it is no template id: then it names a template, and the handler
    /// puts that template's id in its place.
    pub(super) fn template_name_mut(&mut self) -> Option<&mut String> {
        self.template.as_mut().map(|t| &mut t.id).filter(|id| TemplateId::parse(id).is_none())
    }
}

/// `{"id"}`: the answer of a send, and each item of a batch's `data`.
#[derive(Serialize)]
pub(super) struct CreatedEmail {
    pub(super) id: String,
}

/// Resend's email object (`GET /emails/{id}`; in a list without `html`, `text`, `tags` and
/// `object`).
#[derive(Serialize)]
pub(super) struct EmailResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<&'static str>,
    id: String,
    to: Vec<String>,
    from: String,
    created_at: String,
    subject: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    html: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<Option<String>>,
    bcc: Option<Vec<String>>,
    cc: Option<Vec<String>>,
    reply_to: Option<Vec<String>>,
    last_event: &'static str,
    scheduled_at: Option<String>,
    message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<Vec<TagResponse>>,
}

#[derive(Serialize)]
struct TagResponse {
    name: String,
    value: String,
}

impl EmailResponse {
    /// The whole object, as `GET /emails/{id}` answers it.
    pub(super) fn full(m: Message) -> Self {
        let tags = m.extras.tags.iter().map(|t| TagResponse { name: t.name().into(), value: t.value().into() });
        let tags = Some(tags.collect());
        let (html, text) = (Some(m.html.clone()), Some(m.text.clone()));
        Self { object: Some("email"), html, text, tags, ..Self::listed(m) }
    }

    /// The object as a list shows it.
    pub(super) fn listed(m: Message) -> Self {
        let shown = |kind| m.mailboxes_of(kind).iter().map(ToString::to_string).collect::<Vec<_>>();
        let or_null = |list: Vec<String>| (!list.is_empty()).then_some(list);
        let reply_to = m.extras.reply_to.iter().map(ToString::to_string).collect();
        Self {
            object: None,
            id: m.id.to_string(),
            to: shown(RecipientKind::To),
            from: m.from.to_string(),
            created_at: m.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            html: None,
            text: None,
            bcc: or_null(shown(RecipientKind::Bcc)),
            cc: or_null(shown(RecipientKind::Cc)),
            reply_to: or_null(reply_to),
            last_event: last_event(m.status),
            scheduled_at: m.scheduled_at.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true)),
            message_id: m.provider_message_id,
            tags: None,
            subject: m.subject,
        }
    }
}

/// A message's status in Resend's words for `last_event`.
pub(super) fn last_event(status: MessageStatus) -> &'static str {
    match status {
        MessageStatus::Queued => "queued",
        MessageStatus::Scheduled => "scheduled",
        MessageStatus::Sent => "sent",
        MessageStatus::Deferred => "delivery_delayed",
        MessageStatus::Delivered => "delivered",
        // Resend has one recipient state per email; some recipients got it.
        MessageStatus::PartiallyDelivered => "delivered",
        MessageStatus::Bounced => "bounced",
        MessageStatus::Complained => "complained",
        MessageStatus::Failed => "failed",
        MessageStatus::Suppressed => "suppressed",
        MessageStatus::Canceled => "canceled",
    }
}

/// Body of `PATCH /emails/{id}`.
#[derive(Deserialize)]
pub(super) struct UpdateEmailRequest {
    pub(super) scheduled_at: Option<String>,
}

impl UpdateEmailRequest {
    /// Core's change: Resend's update only moves the send time, so the field is required.
    pub(super) fn into_change(self) -> Result<usecases::MessageChange, Error> {
        let at = self.scheduled_at.ok_or_else(|| Error::field("scheduled_at", "is required"))?;
        Ok(usecases::MessageChange { scheduled_at: Some(Some(at)) })
    }
}

/// `{"object":"email","id"}`: the answer of an update and a cancel.
#[derive(Serialize)]
pub(super) struct EmailRef {
    object: &'static str,
    id: String,
}

impl EmailRef {
    pub(super) fn of(m: &Message) -> Self {
        Self { object: "email", id: m.id.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn parsed(body: Value) -> Result<SendRequest, Error> {
        serde_json::from_value::<CreateEmailRequest>(body).map_err(|e| Error::field("body", e.to_string()))?.into_send()
    }

    fn content_of(body: Value) -> String {
        let req = parsed(serde_json::json!({ "to": "a@b.example", "attachments": [body] })).unwrap();
        req.attachments.unwrap().remove(0).content.as_str().to_owned()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("TIDINGS_PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
        ))]
        /// The three forms resend-node may send decode to the same bytes.
        #[test]
        fn every_content_form_gives_the_same_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
            let from_string = content_of(serde_json::json!({ "filename": "f.bin", "content": b64 }));
            let from_array = content_of(serde_json::json!({ "filename": "f.bin", "content": bytes }));
            let from_buffer = content_of(serde_json::json!({ "filename": "f.bin", "content": { "type": "Buffer", "data": bytes } }));
            prop_assert_eq!(&from_string, &b64);
            prop_assert_eq!(&from_array, &b64);
            prop_assert_eq!(&from_buffer, &b64);
            let decoded = base64::engine::general_purpose::STANDARD.decode(&from_buffer).unwrap();
            prop_assert_eq!(decoded, bytes);
        }
    }

    #[test]
    fn resend_fields_map_onto_the_send_request() {
        let req = parsed(serde_json::json!({
            "from": "Acme <hi@acme.example>", "to": ["a@x.example", "b@x.example"], "cc": "c@x.example",
            "reply_to": ["r@acme.example"], "subject": "Hi", "html": "<p>hi</p>", "text": "hi",
            "headers": { "X-Campaign": "spring" }, "tags": [{ "name": "kind", "value": "welcome" }],
            "scheduled_at": "2030-01-01T00:00:00Z",
            "attachments": [{ "filename": "a.txt", "content": "aGk=", "content_type": "text/plain", "content_id": "a1" }],
        }))
        .unwrap();
        assert_eq!(req.from.as_deref(), Some("Acme <hi@acme.example>"));
        assert_eq!(req.to, Some(serde_json::json!(["a@x.example", "b@x.example"])));
        assert_eq!(req.reply_to, Some(serde_json::json!(["r@acme.example"])));
        assert_eq!(req.scheduled_at.as_deref(), Some("2030-01-01T00:00:00Z"));
        let tags = req.tags.unwrap();
        assert_eq!((tags[0].name.as_str(), tags[0].value.as_str()), ("kind", "welcome"));
        let file = &req.attachments.unwrap()[0];
        assert_eq!((file.filename.as_str(), file.content_type.as_str()), ("a.txt", "text/plain"));
        assert_eq!(file.content_id.as_deref(), Some("a1"));
        let with_template =
            parsed(serde_json::json!({ "to": "a@x.example", "template": { "id": "tpl_1", "variables": { "n": 1 } } }))
                .unwrap();
        assert_eq!(with_template.template_id.as_deref(), Some("tpl_1"));
        assert_eq!(with_template.variables, Some(serde_json::json!({ "n": 1 })));
    }

    #[test]
    fn what_tidings_does_not_serve_is_refused_naming_the_field() {
        let topic = parsed(serde_json::json!({ "to": "a@x.example", "topic_id": "t" }));
        assert!(matches!(topic, Err(Error::Validation { ref fields }) if fields[0].field == "topic_id"));
        let buffer = serde_json::from_value::<Content>(serde_json::json!({ "type": "Blob", "data": [1] }));
        assert!(buffer.is_err());
        let bad_byte = serde_json::from_value::<Content>(serde_json::json!([1, 256]));
        assert!(bad_byte.is_err());
    }

    #[test]
    fn statuses_read_as_resends_last_event() {
        assert_eq!(last_event(MessageStatus::Deferred), "delivery_delayed");
        assert_eq!(last_event(MessageStatus::Delivered), "delivered");
        assert_eq!(last_event(MessageStatus::Canceled), "canceled");
        for status in MessageStatus::ALL {
            assert!(!last_event(status).is_empty());
        }
    }
}
