//! [`Email`]: a send with its required parts required by the type, turned into the
//! [`SendRequest`] every front end hands to
//! [`Messages::send`](crate::usecases::Messages::send).

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::email::{EmailAddress, Mailbox};
use crate::ids::{TemplateId, TemplateVersionId};
use crate::usecases::{AttachmentRequest, SendRequest, TagRequest, TrackingRequest};
use crate::{Error, Result};

#[cfg(doc)]
use crate::usecases::Tidings;

/// One or more recipients: never empty.
///
/// ```
/// use tidings_core::email::EmailAddress;
/// use tidings_core::inprocess::Recipients;
///
/// let ann = EmailAddress::parse("ann@example.net").unwrap();
/// let bob = EmailAddress::parse("bob@example.net").unwrap();
/// let both = Recipients::from(ann).and(bob);
/// assert_eq!(both.len(), 2);
/// assert!(Recipients::try_from(Vec::<EmailAddress>::new()).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipients(Vec<Mailbox>);

/// A list of recipients that was empty: an email needs at least one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an email needs at least one recipient")]
pub struct NoRecipients;

impl Recipients {
    /// These recipients and `next`.
    #[must_use]
    pub fn and(mut self, next: impl Into<Mailbox>) -> Self {
        self.0.push(next.into());
        self
    }

    /// How many (at least one).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: there is at least one recipient.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The recipients, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Mailbox> {
        self.0.iter()
    }

    /// `to` as the API takes it: one address as a string, several as an array.
    fn into_value(self) -> Value {
        match <[Mailbox; 1]>::try_from(self.0) {
            Ok([one]) => Value::String(one.to_string()),
            Err(many) => mailboxes(many).unwrap_or(Value::Null),
        }
    }
}

impl From<Mailbox> for Recipients {
    fn from(mailbox: Mailbox) -> Self {
        Self(vec![mailbox])
    }
}

impl From<EmailAddress> for Recipients {
    fn from(address: EmailAddress) -> Self {
        Self(vec![Mailbox::from(address)])
    }
}

impl TryFrom<Vec<Mailbox>> for Recipients {
    type Error = NoRecipients;
    fn try_from(list: Vec<Mailbox>) -> std::result::Result<Self, NoRecipients> {
        if list.is_empty() { Err(NoRecipients) } else { Ok(Self(list)) }
    }
}

impl TryFrom<Vec<EmailAddress>> for Recipients {
    type Error = NoRecipients;
    fn try_from(list: Vec<EmailAddress>) -> std::result::Result<Self, NoRecipients> {
        Self::try_from(list.into_iter().map(Mailbox::from).collect::<Vec<_>>())
    }
}

/// What the message says: a subject with an HTML or text body (or both), or a template.
/// Only its constructors make one, so an [`Email`] always has a body or a template.
///
/// ```
/// use tidings_core::ids::TemplateId;
/// use tidings_core::inprocess::Content;
///
/// #[derive(serde::Serialize)]
/// struct Welcome<'a> { name: &'a str }
///
/// let plain = Content::text("Welcome", "Hello, Ann.");
/// let both = Content::html_and_text("Welcome", "<p>Hello, Ann.</p>", "Hello, Ann.");
/// # let id = TemplateId::NONE;
/// let templated = Content::template(id).variables(&Welcome { name: "Ann" }).unwrap();
/// // Variables are a JSON object: a list is refused here, before any send.
/// assert!(Content::template(id).variables(&["Ann"]).is_err());
/// # let _ = (plain, both, templated);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Content {
    subject: Option<String>,
    html: Option<String>,
    text: Option<String>,
    template_id: Option<TemplateId>,
    template_version_id: Option<TemplateVersionId>,
    variables: Option<serde_json::Map<String, Value>>,
}

impl Content {
    /// A subject and a plain-text body.
    pub fn text(subject: impl Into<String>, text: impl Into<String>) -> Self {
        Self { subject: Some(subject.into()), text: Some(text.into()), ..Self::empty() }
    }

    /// A subject and an HTML body (the text part is generated from it).
    pub fn html(subject: impl Into<String>, html: impl Into<String>) -> Self {
        Self { subject: Some(subject.into()), html: Some(html.into()), ..Self::empty() }
    }

    /// A subject, an HTML body and its text alternative.
    pub fn html_and_text(subject: impl Into<String>, html: impl Into<String>, text: impl Into<String>) -> Self {
        Self { subject: Some(subject.into()), html: Some(html.into()), text: Some(text.into()), ..Self::empty() }
    }

    /// The current version of template `id` (see [`Content::version`] to pin one), rendered
    /// with no variables until [`Content::variables`] gives some.
    pub fn template(id: TemplateId) -> Self {
        Self { template_id: Some(id), ..Self::empty() }
    }

    /// Renders this exact version of the template instead of its current one.
    #[must_use]
    pub fn version(self, version: TemplateVersionId) -> Self {
        Self { template_version_id: Some(version), ..self }
    }

    /// The values of the template's placeholders: anything that serializes to a JSON object
    /// (a struct, a map). Anything else is refused here with a validation error naming
    /// `variables`, the same the API gives.
    pub fn variables(self, variables: &impl Serialize) -> Result<Self> {
        let value = serde_json::to_value(variables)
            .map_err(|e| Error::field("variables", format!("could not be serialized: {e}")))?;
        match value {
            Value::Object(map) => Ok(Self { variables: Some(map), ..self }),
            _ => Err(Error::field("variables", "must be a JSON object")),
        }
    }

    /// Overrides the template's subject (or replaces the subject given).
    #[must_use]
    pub fn subject(self, subject: impl Into<String>) -> Self {
        Self { subject: Some(subject.into()), ..self }
    }

    fn empty() -> Self {
        Self { subject: None, html: None, text: None, template_id: None, template_version_id: None, variables: None }
    }
}

/// A message to send: build it with [`Email::new`] and the setters, send it with
/// [`WorkspaceHandle::send`](super::WorkspaceHandle::send) (or turn it into the API's
/// request with [`Email::into_request`]).
///
/// ```
/// use chrono::{Duration, Utc};
/// use tidings_core::email::{EmailAddress, Mailbox};
/// use tidings_core::inprocess::{Content, Email, Recipients};
///
/// let from = Mailbox::parse("Acme <hello@example.com>").unwrap();
/// let ann = EmailAddress::parse("ann@example.net").unwrap();
/// let bob = EmailAddress::parse("bob@example.net").unwrap();
/// let email = Email::new(from, Recipients::from(ann).and(bob), Content::text("Hi", "Hello."))
///     .header("X-Campaign", "welcome")
///     .metadata("user_id", "42")
///     .tag("kind", "welcome")
///     .scheduled_at(Utc::now() + Duration::hours(1))
///     .idempotency_key("welcome-42");
/// let (request, key) = email.into_request();
/// assert_eq!(request.to, Some(serde_json::json!(["ann@example.net", "bob@example.net"])));
/// assert_eq!(key.as_deref(), Some("welcome-42"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Email {
    from: Mailbox,
    to: Recipients,
    content: Content,
    cc: Vec<Mailbox>,
    bcc: Vec<Mailbox>,
    reply_to: Vec<Mailbox>,
    headers: BTreeMap<String, String>,
    metadata: BTreeMap<String, String>,
    tags: Vec<TagRequest>,
    attachments: Vec<AttachmentRequest>,
    tracking: Option<TrackingRequest>,
    scheduled_at: Option<DateTime<Utc>>,
    idempotency_key: Option<String>,
}

impl Email {
    /// An email from `from` (on a Verified domain of the workspace) to `to`, saying `content`.
    pub fn new(from: impl Into<Mailbox>, to: impl Into<Recipients>, content: Content) -> Self {
        Self {
            from: from.into(),
            to: to.into(),
            content,
            cc: Vec::new(),
            bcc: Vec::new(),
            reply_to: Vec::new(),
            headers: BTreeMap::new(),
            metadata: BTreeMap::new(),
            tags: Vec::new(),
            attachments: Vec::new(),
            tracking: None,
            scheduled_at: None,
            idempotency_key: None,
        }
    }

    /// Adds a Cc recipient.
    #[must_use]
    pub fn cc(mut self, mailbox: impl Into<Mailbox>) -> Self {
        self.cc.push(mailbox.into());
        self
    }

    /// Adds a Bcc recipient (in no header).
    #[must_use]
    pub fn bcc(mut self, mailbox: impl Into<Mailbox>) -> Self {
        self.bcc.push(mailbox.into());
        self
    }

    /// Adds a `Reply-To` address.
    #[must_use]
    pub fn reply_to(mut self, mailbox: impl Into<Mailbox>) -> Self {
        self.reply_to.push(mailbox.into());
        self
    }

    /// Sets a custom header (the send refuses the names Tidings writes itself).
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Sets a metadata entry, returned with the message and its webhooks.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Adds a tag.
    #[must_use]
    pub fn tag(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.push(TagRequest { name: name.into(), value: value.into() });
        self
    }

    /// Adds an attachment or inline part.
    #[must_use]
    pub fn attachment(mut self, attachment: AttachmentRequest) -> Self {
        self.attachments.push(attachment);
        self
    }

    /// Open and click tracking for this message; what it leaves `None` follows the domain.
    #[must_use]
    pub fn tracking(self, opens: Option<bool>, clicks: Option<bool>) -> Self {
        Self { tracking: Some(TrackingRequest { opens, clicks }), ..self }
    }

    /// Sends at `at` instead of now (at most 30 days ahead; a time not after now sends at once).
    #[must_use]
    pub fn scheduled_at(self, at: DateTime<Utc>) -> Self {
        Self { scheduled_at: Some(at), ..self }
    }

    /// Makes the send idempotent under `key`: a repeat within the window returns the first
    /// message and queues nothing (docs/api.md#idempotency).
    #[must_use]
    pub fn idempotency_key(self, key: impl Into<String>) -> Self {
        Self { idempotency_key: Some(key.into()), ..self }
    }

    /// The API's request for this email and its Idempotency-Key: what
    /// [`Messages::send`](crate::usecases::Messages::send) takes. Every field is written the
    /// way the HTTP API reads it, so the send validates it exactly as it validates a request over HTTP.
    pub fn into_request(self) -> (SendRequest, Option<String>) {
        let Content { subject, html, text, template_id, template_version_id, variables } = self.content;
        let request = SendRequest {
            to: Some(self.to.into_value()),
            cc: mailboxes(self.cc),
            bcc: mailboxes(self.bcc),
            from: Some(self.from.to_string()),
            subject,
            html,
            text,
            template_id: template_id.map(|id| id.to_string()),
            template_version_id: template_version_id.map(|id| id.to_string()),
            variables: variables.map(Value::Object),
            tracking: self.tracking,
            reply_to: mailboxes(self.reply_to),
            headers: string_map(self.headers),
            tags: (!self.tags.is_empty()).then_some(self.tags),
            metadata: string_map(self.metadata),
            attachments: (!self.attachments.is_empty()).then_some(self.attachments),
            scheduled_at: self.scheduled_at.map(|at| at.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
            written_headers: None,
        };
        (request, self.idempotency_key)
    }
}

/// Mailboxes as the API takes a list of them; `None` for none.
fn mailboxes(list: Vec<Mailbox>) -> Option<Value> {
    (!list.is_empty()).then(|| Value::Array(list.iter().map(|m| Value::String(m.to_string())).collect()))
}

/// A map of strings as a JSON object; `None` for an empty one.
fn string_map(map: BTreeMap<String, String>) -> Option<Value> {
    (!map.is_empty()).then(|| Value::Object(map.into_iter().map(|(k, v)| (k, Value::String(v))).collect()))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::email::DisplayName;

    /// Mailboxes whose display names hold the characters that need quoting.
    fn mailbox() -> impl Strategy<Value = Mailbox> {
        let address = ("[a-z0-9][a-z0-9.+_-]{0,12}", "[a-z][a-z0-9-]{0,10}", "(com|net|test)")
            .prop_map(|(local, host, tld)| format!("{local}@{host}.{tld}"))
            .prop_filter_map("a valid address", |text| EmailAddress::parse(&text).ok());
        let name = proptest::option::of("[A-Za-z0-9 ,.;:\"\\\\()<>'-]{1,24}")
            .prop_map(|name| name.and_then(|n| DisplayName::parse(&n).ok()));
        (address, name).prop_map(|(address, display_name)| Mailbox { display_name, address })
    }

    fn parsed(value: &Value) -> Vec<Mailbox> {
        let texts = match value {
            Value::String(one) => vec![one.clone()],
            Value::Array(many) => many.iter().map(|v| v.as_str().expect("a string").to_owned()).collect(),
            other => panic!("not a recipient list: {other}"),
        };
        texts.iter().map(|t| Mailbox::parse(t).expect("the API parses what the builder wrote")).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("TIDINGS_PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
        ))]

        /// Every mailbox the builder is given reaches the send as text the API's parser
        /// reads back as the same mailbox, in the same list and order.
        #[test]
        fn mailboxes_reach_the_request_as_the_api_reads_them(
            from in mailbox(),
            to in proptest::collection::vec(mailbox(), 1..5),
            cc in proptest::collection::vec(mailbox(), 0..3),
            reply_to in proptest::collection::vec(mailbox(), 0..3),
        ) {
            let recipients = Recipients::try_from(to.clone()).unwrap();
            let mut email = Email::new(from.clone(), recipients, Content::text("s", "t"));
            for m in &cc { email = email.cc(m.clone()); }
            for m in &reply_to { email = email.reply_to(m.clone()); }
            let (request, _) = email.into_request();

            prop_assert_eq!(Mailbox::parse(request.from.as_deref().unwrap()).unwrap(), from);
            let written_to = request.to.unwrap();
            prop_assert_eq!(written_to.is_string(), to.len() == 1);
            prop_assert_eq!(parsed(&written_to), to);
            prop_assert_eq!(request.cc.as_ref().map(parsed).unwrap_or_default(), cc);
            prop_assert_eq!(request.reply_to.as_ref().map(parsed).unwrap_or_default(), reply_to);
            prop_assert_eq!(request.bcc, None);
        }

        /// A schedule reaches the API as RFC 3339 text naming the same instant, to the
        /// nanosecond.
        #[test]
        fn a_schedule_is_written_as_the_same_instant(nanos in 0i64..4_102_444_800_000_000_000) {
            let at = DateTime::from_timestamp_nanos(nanos);
            let (request, _) = Email::new(from(), to(), Content::text("s", "t")).scheduled_at(at).into_request();
            let written = DateTime::parse_from_rfc3339(&request.scheduled_at.unwrap()).unwrap();
            prop_assert_eq!(written.with_timezone(&Utc), at);
        }

        /// Headers and metadata become JSON objects holding exactly the entries given (the
        /// last value of a repeated name).
        #[test]
        fn maps_hold_the_entries_given(entries in proptest::collection::vec(("[A-Za-z-]{1,8}", ".{0,12}"), 0..6)) {
            let mut email = Email::new(from(), to(), Content::text("s", "t"));
            let mut expected = serde_json::Map::new();
            for (k, v) in &entries {
                email = email.header(k.clone(), v.clone()).metadata(k.clone(), v.clone());
                expected.insert(k.clone(), Value::String(v.clone()));
            }
            let (request, _) = email.into_request();
            let want = (!expected.is_empty()).then_some(Value::Object(expected));
            prop_assert_eq!(&request.headers, &want);
            prop_assert_eq!(&request.metadata, &want);
        }

        /// Variables are accepted exactly when they serialize to a JSON object.
        #[test]
        fn variables_must_be_an_object(map in proptest::collection::btree_map("[a-z]{1,6}", any::<i32>(), 0..5), list in proptest::collection::vec(any::<i32>(), 0..5)) {
            let content = Content::template(TemplateId::NONE).variables(&map).unwrap();
            let (request, _) = Email::new(from(), to(), content).into_request();
            prop_assert_eq!(request.variables, Some(serde_json::to_value(&map).unwrap()));
            prop_assert_eq!(request.template_id, Some(TemplateId::NONE.to_string()));
            let refused = Content::template(TemplateId::NONE).variables(&list).unwrap_err();
            let refused_field = match refused {
                Error::Validation { fields } => fields.first().map(|f| f.field.clone()),
                _ => None,
            };
            prop_assert_eq!(refused_field.as_deref(), Some("variables"));
        }
    }

    fn from() -> Mailbox {
        Mailbox::parse("hello@example.com").unwrap()
    }

    fn to() -> EmailAddress {
        EmailAddress::parse("ann@example.net").unwrap()
    }

    #[test]
    fn an_empty_list_is_no_recipients() {
        assert_eq!(Recipients::try_from(Vec::<EmailAddress>::new()), Err(NoRecipients));
        assert_eq!(Recipients::try_from(vec![to()]).map(|r| r.len()), Ok(1));
    }
}
