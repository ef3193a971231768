//! Postmark's message shapes (as postmark.js's `Message` and `TemplatedMessage` write them,
//! PascalCase) and their translation to core's `SendRequest`; the answer of a send.
//!
//! What Postmark writes differently from core: recipients as one comma-separated string
//! (display names allowed, quoted ones may hold commas), `Headers` as `[{Name, Value}]`, one
//! `Tag` (the Tidings tag `tag`), `ContentID` as `cid:…`, link tracking per body part. What
//! Tidings does not serve (another `MessageStream`, `TrackLinks: "TextOnly"`, a numeric
//! `TemplateId`) is refused naming the field, never dropped.

use chrono::SecondsFormat;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tidings_core::model::Message;
use tidings_core::usecases::{AttachmentRequest, SendRequest, TagRequest, TrackingRequest};

use super::error::{Code, Fault};

/// The only stream Tidings has: Postmark's default transactional stream.
const OUTBOUND_STREAM: &str = "outbound";
/// The Tidings tag a Postmark `Tag` becomes.
const TAG_NAME: &str = "tag";

/// Which endpoint a message came to: `/email` takes bodies, `/email/withTemplate` a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Plain,
    Templated,
}

impl Kind {
    pub(super) const fn of(templated: bool) -> Self {
        if templated { Self::Templated } else { Self::Plain }
    }
}

/// Body of `POST /postmark/email` and `/email/withTemplate`, and each item of their batches,
/// each field under its name on the wire (Postmark's, exact case).
#[derive(Deserialize)]
pub(super) struct PostmarkMessage {
    #[serde(rename = "From")]
    from: Option<String>,
    #[serde(rename = "To")]
    to: Option<String>,
    #[serde(rename = "Cc")]
    cc: Option<String>,
    #[serde(rename = "Bcc")]
    bcc: Option<String>,
    #[serde(rename = "ReplyTo")]
    reply_to: Option<String>,
    #[serde(rename = "Subject")]
    subject: Option<String>,
    #[serde(rename = "HtmlBody")]
    html_body: Option<String>,
    #[serde(rename = "TextBody")]
    text_body: Option<String>,
    #[serde(rename = "Headers")]
    headers: Option<Vec<PostmarkHeader>>,
    #[serde(rename = "Attachments")]
    attachments: Option<Vec<PostmarkAttachment>>,
    #[serde(rename = "Tag")]
    tag: Option<String>,
    #[serde(rename = "Metadata")]
    metadata: Option<Value>,
    #[serde(rename = "TrackOpens")]
    track_opens: Option<bool>,
    #[serde(rename = "TrackLinks")]
    track_links: Option<TrackLinks>,
    #[serde(rename = "MessageStream")]
    message_stream: Option<String>,
    /// A number in Postmark; here a Tidings template id (a string).
    #[serde(rename = "TemplateId")]
    template_id: Option<Value>,
    /// A Tidings template's name.
    #[serde(rename = "TemplateAlias")]
    template_alias: Option<String>,
    #[serde(rename = "TemplateModel")]
    template_model: Option<Value>,
    // `InlineCss` is not read: Postmark inlines a template's CSS, Tidings sends the HTML as
    // the template holds it (docs/api.md says so).
}

/// Body of `POST /postmark/email/batchWithTemplates`.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct TemplatedBatch {
    pub messages: Vec<PostmarkMessage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PostmarkHeader {
    name: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PostmarkAttachment {
    name: Option<String>,
    content: Option<String>,
    content_type: Option<String>,
    #[serde(rename = "ContentID")]
    content_id: Option<String>,
}

/// `TrackLinks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
enum TrackLinks {
    None,
    HtmlAndText,
    HtmlOnly,
    TextOnly,
}

/// A message ready for core: the request, the `To` to echo, and the template alias still to
/// be looked up (core finds templates by id).
pub(super) struct Translated {
    pub req: SendRequest,
    pub to: String,
    pub alias: Option<String>,
}

/// Used when an attachment names no `ContentType`.
const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";

impl PostmarkMessage {
    /// Core's send request, or the fault naming the Postmark field Tidings cannot take.
    pub(super) fn translate(self, kind: Kind) -> Result<Translated, Fault> {
        self.check_template_fields(kind)?;
        if let Some(stream) = self.message_stream.as_deref().filter(|s| *s != OUTBOUND_STREAM) {
            return Err(Fault::field(
                "MessageStream",
                format!("`{stream}` is not served by Tidings: it has one transactional stream, `outbound`"),
            ));
        }
        let clicks = match self.track_links {
            None => None,
            Some(TrackLinks::None) => Some(false),
            // Tidings rewrites the links of the HTML part; those of the text part stay as written.
            Some(TrackLinks::HtmlAndText | TrackLinks::HtmlOnly) => Some(true),
            Some(TrackLinks::TextOnly) => {
                return Err(Fault::field("TrackLinks", "`TextOnly` is not supported: Tidings tracks links in HTML"));
            }
        };
        let tracking = (self.track_opens.is_some() || clicks.is_some())
            .then_some(TrackingRequest { opens: self.track_opens, clicks });
        let template_id = match self.template_id {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(id),
            Some(other) => {
                return Err(Fault::new(
                    Code::TemplateNotFound,
                    format!(
                        "Template not found: `TemplateId` {other} is not a Tidings template id (they are strings, \
                         `tpl_…`); or name the template by its name in `TemplateAlias`"
                    ),
                ));
            }
        };
        let to = self.to.clone().unwrap_or_default();
        let req = SendRequest {
            from: self.from,
            to: addresses(self.to),
            cc: addresses(self.cc),
            bcc: addresses(self.bcc),
            reply_to: addresses(self.reply_to),
            subject: self.subject,
            html: self.html_body,
            text: self.text_body,
            headers: self.headers.map(headers).transpose()?,
            attachments: self.attachments.map(attachments).transpose()?,
            tags: self.tag.filter(|t| !t.is_empty()).map(|value| vec![TagRequest { name: TAG_NAME.into(), value }]),
            metadata: self.metadata,
            tracking,
            template_id,
            variables: self.template_model,
            ..SendRequest::default()
        };
        Ok(Translated { req, to, alias: self.template_alias })
    }

    /// `/email` takes no template fields; `/email/withTemplate` takes one of `TemplateId` and
    /// `TemplateAlias` and no bodies or subject (the template's are used).
    fn check_template_fields(&self, kind: Kind) -> Result<(), Fault> {
        let id = self.template_id.as_ref().is_some_and(|v| !v.is_null());
        let alias = self.template_alias.is_some();
        match kind {
            Kind::Plain => {
                let given =
                    [("TemplateId", id), ("TemplateAlias", alias), ("TemplateModel", self.template_model.is_some())];
                match given.iter().find(|(_, set)| *set) {
                    Some((field, _)) => Err(Fault::field(field, "is taken by /email/withTemplate, not by /email")),
                    None => Ok(()),
                }
            }
            Kind::Templated => {
                let bodies = [("Subject", &self.subject), ("HtmlBody", &self.html_body), ("TextBody", &self.text_body)];
                if let Some((field, _)) = bodies.iter().find(|(_, v)| v.is_some()) {
                    return Err(Fault::field(field, "is not taken with a template: the template's is used"));
                }
                match (id, alias) {
                    (true, true) => Err(Fault::field("TemplateId", "and `TemplateAlias` cannot both be given")),
                    (false, false) => Err(Fault::field("TemplateId", "or `TemplateAlias` is required")),
                    _ => Ok(()),
                }
            }
        }
    }
}

/// A comma-separated address list as core takes it: one address as a string, several as an
/// array; an empty list as none.
fn addresses(text: Option<String>) -> Option<Value> {
    let mut list = split_addresses(text.as_deref()?);
    match list.len() {
        0 => None,
        1 => list.pop().map(Value::String),
        _ => Some(Value::Array(list.into_iter().map(Value::String).collect())),
    }
}

/// Splits `a@x.example, "Doe, Jo" <jo@y.example>` at the commas that separate addresses: not
/// those inside a quoted display name or inside `<…>`. Empty entries are dropped.
pub(super) fn split_addresses(text: &str) -> Vec<String> {
    let mut list = Vec::new();
    let mut current = String::new();
    let (mut quoted, mut escaped, mut angle) = (false, false, false);
    for c in text.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '<' if !quoted => angle = true,
            '>' if !quoted => angle = false,
            ',' if !quoted && !angle => {
                list.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    list.push(current);
    list.into_iter().map(|a| a.trim().to_owned()).filter(|a| !a.is_empty()).collect()
}

/// `[{Name, Value}]` as core's header object; a name given twice is refused (core would see
/// only the last).
fn headers(list: Vec<PostmarkHeader>) -> Result<Value, Fault> {
    let mut map = Map::with_capacity(list.len());
    for (i, header) in list.into_iter().enumerate() {
        if map.insert(header.name, Value::String(header.value)).is_some() {
            return Err(Fault::field(&format!("Headers[{i}].Name"), "is given twice"));
        }
    }
    Ok(Value::Object(map))
}

fn attachments(list: Vec<PostmarkAttachment>) -> Result<Vec<AttachmentRequest>, Fault> {
    list.into_iter()
        .enumerate()
        .map(|(i, a)| {
            let content = a.content.ok_or_else(|| Fault::field(&format!("Attachments[{i}].Content"), "is required"))?;
            // Postmark writes the id as the HTML refers to it, `cid:logo.png`.
            let content_id = a.content_id.filter(|id| !id.is_empty()).map(|id| {
                if id.get(..4).is_some_and(|prefix| prefix.eq_ignore_ascii_case("cid:")) {
                    id[4..].to_owned()
                } else {
                    id
                }
            });
            Ok(AttachmentRequest {
                filename: a.name.unwrap_or_default(),
                content_type: a.content_type.unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_owned()),
                content: content.into(),
                content_id,
            })
        })
        .collect()
}

/// A send's answer, and a batch item's when it was queued.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct Sent {
    to: String,
    submitted_at: String,
    #[serde(rename = "MessageID")]
    message_id: String,
    error_code: u16,
    message: &'static str,
}

impl Sent {
    /// The message as queued; `to` as the request wrote it, as Postmark echoes it.
    pub(super) fn of(message: &Message, to: String) -> Self {
        Self {
            to,
            submitted_at: message.created_at.to_rfc3339_opts(SecondsFormat::Micros, false),
            message_id: message.id.to_string(),
            error_code: Code::Zero as u16,
            message: "OK",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translated(body: Value, kind: Kind) -> Result<Translated, Fault> {
        serde_json::from_value::<PostmarkMessage>(body).expect("the shape parses").translate(kind)
    }

    #[test]
    fn comma_separated_lists_split_outside_quotes_and_angle_brackets() {
        assert_eq!(
            split_addresses(
                r#"a@x.example, "Doe, Jo" <jo@y.example>,Ann <ann@z.example> , "Q \"x, y\"" <q@q.example>,"#
            ),
            ["a@x.example", r#""Doe, Jo" <jo@y.example>"#, "Ann <ann@z.example>", r#""Q \"x, y\"" <q@q.example>"#]
        );
        assert!(split_addresses(" , ").is_empty());
        assert_eq!(addresses(Some("one@x.example".into())), Some(Value::String("one@x.example".into())));
        assert_eq!(addresses(Some("".into())), None);
    }

    #[test]
    fn postmark_fields_map_onto_the_send_request() {
        let t = translated(
            serde_json::json!({
                "From": "Acme <hi@acme.example>", "To": "a@x.example, B <b@x.example>", "Cc": "c@x.example",
                "Bcc": "d@x.example", "ReplyTo": "r@acme.example", "Subject": "Hi", "HtmlBody": "<p>hi</p>",
                "TextBody": "hi", "Tag": "welcome", "Metadata": {"order": "7"}, "TrackOpens": true,
                "TrackLinks": "HtmlOnly", "MessageStream": "outbound",
                "Headers": [{"Name": "X-Campaign", "Value": "spring"}],
                "Attachments": [{"Name": "a.txt", "Content": "aGk=", "ContentType": "text/plain", "ContentID": "cid:a1"}],
            }),
            Kind::Plain,
        )
        .unwrap_or_else(|f| panic!("{f:?}"));
        let req = t.req;
        assert_eq!(t.to, "a@x.example, B <b@x.example>");
        assert_eq!(req.to, Some(serde_json::json!(["a@x.example", "B <b@x.example>"])));
        assert_eq!(req.cc, Some(serde_json::json!("c@x.example")));
        assert_eq!(req.headers, Some(serde_json::json!({"X-Campaign": "spring"})));
        assert_eq!(req.tracking, Some(TrackingRequest { opens: Some(true), clicks: Some(true) }));
        let tags = req.tags.unwrap();
        assert_eq!((tags[0].name.as_str(), tags[0].value.as_str()), ("tag", "welcome"));
        let file = &req.attachments.unwrap()[0];
        assert_eq!((file.filename.as_str(), file.content_id.as_deref()), ("a.txt", Some("a1")));
        assert_eq!(req.metadata, Some(serde_json::json!({"order": "7"})));
    }

    #[test]
    fn what_tidings_does_not_serve_is_refused_naming_the_field() {
        let refused = |body: Value, kind| translated(body, kind).err().map(|f| (f.code as u16, f.message)).unwrap();
        let (code, message) =
            refused(serde_json::json!({"To": "a@x.example", "MessageStream": "broadcast"}), Kind::Plain);
        assert_eq!(code, 300);
        assert!(message.contains("`MessageStream`"), "{message}");
        assert!(refused(serde_json::json!({"TrackLinks": "TextOnly"}), Kind::Plain).1.contains("`TrackLinks`"));
        assert!(refused(serde_json::json!({"TemplateAlias": "w"}), Kind::Plain).1.contains("/email/withTemplate"));
        assert!(
            refused(serde_json::json!({"TemplateAlias": "w", "Subject": "s"}), Kind::Templated).1.contains("`Subject`")
        );
        assert!(refused(serde_json::json!({}), Kind::Templated).1.contains("`TemplateId`"));
        assert_eq!(refused(serde_json::json!({"TemplateId": 1234}), Kind::Templated).0, 1101);
        let twice = serde_json::json!({"Headers": [{"Name": "X-A", "Value": "1"}, {"Name": "X-A", "Value": "2"}]});
        assert!(refused(twice, Kind::Plain).1.contains("`Headers[1].Name`"));
        assert!(serde_json::from_value::<PostmarkMessage>(serde_json::json!({"TrackLinks": "Sometimes"})).is_err());
        let t = translated(serde_json::json!({"TemplateAlias": "welcome", "TemplateModel": {"n": 1}}), Kind::Templated)
            .unwrap_or_else(|f| panic!("{f:?}"));
        assert_eq!((t.alias.as_deref(), t.req.variables), (Some("welcome"), Some(serde_json::json!({"n": 1}))));
    }
}
