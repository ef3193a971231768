//! The MIME → [`SendRequest`] mapping of SMTP submission: what an application wrote in its
//! message becomes the fields an API client would have sent. Parsing only, no I/O.
//!
//! Mapped: `From` (one mailbox, display name kept), `Subject` (RFC 2047 decoded), the first
//! `text/plain` and the first `text/html` body part (transfer encodings and charsets
//! decoded), `Reply-To` → `replyTo`, every header a send may set (anything but the ones
//! Tidings writes itself, see [`is_reserved`]) → `headers`, and every other part →
//! `attachments` (with its `Content-ID` an inline part). One submitted message is one send
//! (contract §10): each envelope recipient is in `to` or `cc` when that header names it, else
//! in `bcc`, and the `To:` and `Cc:` headers go out as written. What the API would refuse (a reserved header cannot get
//! through here, but an executable attachment or an over-long header can) is refused the
//! same way, so the client hears `550 5.6.0` with the reason.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use mail_parser::{Address, MessageParser, MimeHeaders, PartType};
use sha2::{Digest, Sha256};

use crate::email::{DisplayName, EmailAddress, Mailbox};
use crate::model::WrittenHeaders;
use crate::model::extras::is_reserved;
use crate::usecases::{AttachmentRequest, SendRequest};
use crate::{Error, Result};

/// What a submitted message asks for, read from its MIME.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmittedMessage {
    /// The `From` mailbox as `"Name" <address>` or `address`; `None` without a From header
    /// (the send then defaults its sender as the API does).
    from: Option<String>,
    subject: Option<String>,
    text: Option<String>,
    html: Option<String>,
    /// The `Message-ID` header, without angle brackets.
    message_id: Option<String>,
    /// `Reply-To` addresses.
    reply_to: Vec<String>,
    /// The `To:` and `Cc:` mailboxes as written (those that are valid addresses).
    written: WrittenHeaders,
    /// Headers a send may set, unfolded, in the order written.
    headers: Vec<(String, String)>,
    /// Every part that is not the text or HTML body.
    attachments: Vec<AttachmentRequest>,
}

impl SubmittedMessage {
    /// Reads a message as received after `DATA`. Refuses what cannot map to one send: a
    /// `From` with several mailboxes. Missing fields are left for the send's own validation,
    /// so the client hears the same rule as an API client.
    pub fn parse(raw: &[u8]) -> Result<Self> {
        let message =
            MessageParser::default().parse(raw).ok_or_else(|| Error::field("message", "is not an RFC 5322 message"))?;
        let from = match message.from() {
            None => None,
            Some(address) => Some(single_mailbox(address)?),
        };
        let text = message.text_body.iter().find_map(|&id| match &message.part(id)?.body {
            PartType::Text(text) => Some(text.to_string()),
            _ => None,
        });
        let html = message.html_body.iter().find_map(|&id| match &message.part(id)?.body {
            PartType::Html(html) => Some(html.to_string()),
            _ => None,
        });
        let reply_to = message.reply_to().map(addresses).unwrap_or_default();
        let written = WrittenHeaders {
            to: message.to().map(mailboxes).unwrap_or_default(),
            cc: message.cc().map(mailboxes).unwrap_or_default(),
        };
        let headers = message
            .headers()
            .iter()
            .filter(|h| !is_reserved(h.name.as_str()))
            .map(|h| {
                let raw = raw.get(h.offset_start as usize..h.offset_end as usize).unwrap_or_default();
                (h.name.as_str().to_owned(), unfold(raw))
            })
            .collect();
        let attachments = message
            .attachments()
            .enumerate()
            .map(|(i, part)| AttachmentRequest {
                filename: part.attachment_name().map_or_else(|| format!("attachment-{}", i + 1), str::to_owned),
                content_type: part.content_type().map_or_else(
                    || "application/octet-stream".to_owned(),
                    |t| format!("{}/{}", t.ctype(), t.subtype().unwrap_or("octet-stream")),
                ),
                content: BASE64.encode(part.contents()).into(),
                content_id: part.content_id().map(|id| id.trim_matches(['<', '>']).to_owned()),
            })
            .collect();
        Ok(Self {
            from,
            subject: message.subject().map(str::to_owned),
            text,
            html,
            message_id: message.message_id().map(str::to_owned),
            reply_to,
            written,
            headers,
            attachments,
        })
    }

    /// The one send of the message to its envelope `recipients`: each in `to` or `cc` as
    /// its header names it (with the display name written there), else in `bcc`. The headers
    /// as written are kept when they are not exactly the to and cc recipients.
    pub fn send_request(&self, recipients: &[EmailAddress]) -> SendRequest {
        let strings = |items: &[String]| items.iter().cloned().map(serde_json::Value::String).collect();
        let headers: serde_json::Map<String, serde_json::Value> =
            self.headers.iter().map(|(name, value)| (name.clone(), serde_json::Value::String(value.clone()))).collect();
        let named_in = |list: &[Mailbox], address: &EmailAddress| {
            list.iter().find(|m| m.address.normalized() == address.normalized()).cloned()
        };
        let (mut to, mut cc, mut bcc) = (Vec::new(), Vec::new(), Vec::new());
        for address in recipients {
            if let Some(mailbox) = named_in(&self.written.to, address) {
                to.push(mailbox);
            } else if let Some(mailbox) = named_in(&self.written.cc, address) {
                cc.push(mailbox);
            } else {
                bcc.push(Mailbox { display_name: None, address: address.clone() });
            }
        }
        // Without a to recipient the headers are kept whatever they say, so that the send
        // needs no `to` (every recipient in cc or bcc, as with `undisclosed-recipients:;`).
        let as_written = to == self.written.to && cc == self.written.cc && !to.is_empty();
        let list = |items: &[Mailbox]| {
            (!items.is_empty()).then(|| serde_json::Value::Array(items.iter().map(|m| m.to_string().into()).collect()))
        };
        SendRequest {
            to: list(&to),
            cc: list(&cc),
            bcc: list(&bcc),
            written_headers: (!as_written).then(|| self.written.clone()),
            from: self.from.clone(),
            subject: self.subject.clone(),
            html: self.html.clone(),
            text: self.text.clone(),
            reply_to: (!self.reply_to.is_empty()).then(|| serde_json::Value::Array(strings(&self.reply_to))),
            headers: (!headers.is_empty()).then_some(serde_json::Value::Object(headers)),
            attachments: (!self.attachments.is_empty()).then(|| self.attachments.clone()),
            ..SendRequest::default()
        }
    }

    /// The Idempotency-Key of the send: derived from the `Message-ID`, so a client that
    /// retries after a lost `250` gets the message already queued back instead of a new one.
    /// `None` without a Message-ID (every retry is then a new send).
    pub fn idempotency_key(&self) -> Option<String> {
        let message_id = self.message_id.as_deref()?;
        // Hashed: a Message-ID may be longer than a key may be.
        let digest = Sha256::new().chain_update(message_id).finalize();
        Some(format!("smtp-{}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>()))
    }
}

/// The mailboxes of an address header (groups flattened) that are valid addresses, with
/// their display names; what is not an address we could send to (an empty group such as
/// `undisclosed-recipients:;`) is left out.
fn mailboxes(address: &Address<'_>) -> Vec<Mailbox> {
    let all: Vec<_> = match address {
        Address::List(list) => list.iter().collect(),
        Address::Group(groups) => groups.iter().flat_map(|group| group.addresses.iter()).collect(),
    };
    all.into_iter()
        .filter_map(|m| {
            let address = EmailAddress::parse(m.address()?).ok()?;
            let name = m.name().map(str::trim).filter(|n| !n.is_empty());
            let display_name = name.and_then(|n| DisplayName::parse_for(n, &address).ok());
            Some(Mailbox { display_name, address })
        })
        .collect()
}

/// The bare addresses of an address header (display names dropped, as `replyTo` takes
/// addresses only).
fn addresses(address: &Address<'_>) -> Vec<String> {
    let mailboxes: Vec<_> = match address {
        Address::List(list) => list.iter().collect(),
        Address::Group(groups) => groups.iter().flat_map(|group| group.addresses.iter()).collect(),
    };
    mailboxes.into_iter().filter_map(|m| m.address().map(str::to_owned)).collect()
}

/// A raw header value as one line: folding (CRLF before white space) removed, the value
/// trimmed. A value whose text still holds a control character is left to the send's
/// validation, which refuses it.
fn unfold(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    text.replace("\r\n ", " ").replace("\r\n\t", "\t").replace("\n ", " ").replace("\n\t", "\t").trim().to_owned()
}

/// `"Name" <address>` (quoted, so any display name reads back as it was) or `address`.
fn single_mailbox(address: &Address<'_>) -> Result<String> {
    let mut mailboxes = match address {
        Address::List(list) => list.iter().collect::<Vec<_>>(),
        Address::Group(groups) => groups.iter().flat_map(|group| group.addresses.iter()).collect(),
    };
    if mailboxes.len() != 1 {
        return Err(Error::field("from", "must name exactly one mailbox"));
    }
    let mailbox = mailboxes.remove(0);
    let Some(addr) = mailbox.address() else {
        return Err(Error::field("from", "must name exactly one mailbox"));
    };
    Ok(match mailbox.name().map(str::trim).filter(|name| !name.is_empty()) {
        Some(name) => format!("\"{}\" <{addr}>", name.replace('\\', "\\\\").replace('"', "\\\"")),
        None => addr.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to() -> Vec<EmailAddress> {
        vec![EmailAddress::parse("user@dest.example").unwrap()]
    }

    #[test]
    fn a_multipart_alternative_message_maps_to_one_send() {
        let raw = "From: \"Acme \\\"Billing\\\"\" <billing@acme.example>\r\n\
                   To: someone@else.example\r\n\
                   Subject: =?UTF-8?B?w4lsw6lwaGFudA==?=\r\n\
                   Message-ID: <abc@acme.example>\r\n\
                   MIME-Version: 1.0\r\n\
                   Content-Type: multipart/alternative; boundary=b\r\n\r\n\
                   --b\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n\
                   caf=C3=A9\r\n\
                   --b\r\nContent-Type: text/html\r\n\r\n<p>caf\u{e9}</p>\r\n--b--\r\n";

        let message = SubmittedMessage::parse(raw.as_bytes()).unwrap();
        let req = message.send_request(&to());

        // Named by no header: a bcc recipient, the To header kept as written.
        assert_eq!((req.to.as_ref(), req.bcc), (None, Some(serde_json::json!(["user@dest.example"]))));
        let written = req.written_headers.expect("the To header as written");
        assert_eq!(written.to.iter().map(ToString::to_string).collect::<Vec<_>>(), ["someone@else.example"]);
        assert_eq!(req.from.as_deref(), Some("\"Acme \\\"Billing\\\"\" <billing@acme.example>"));
        let mailbox = crate::email::Mailbox::parse(req.from.as_deref().unwrap()).unwrap();
        assert_eq!(mailbox.display_name.unwrap().as_str(), "Acme \"Billing\"");
        assert_eq!(req.subject.as_deref(), Some("\u{c9}l\u{e9}phant"));
        assert_eq!(req.text.as_deref().map(str::trim_end), Some("caf\u{e9}"));
        assert_eq!(req.html.as_deref().map(str::trim_end), Some("<p>caf\u{e9}</p>"));
    }

    #[test]
    fn a_text_only_message_has_no_html_and_a_bare_from() {
        let raw = b"From: app@acme.example\r\nSubject: Hi\r\n\r\nplain body\r\n";
        let req = SubmittedMessage::parse(raw).unwrap().send_request(&to());
        assert_eq!(req.from.as_deref(), Some("app@acme.example"));
        assert_eq!(req.text.as_deref(), Some("plain body\r\n"));
        assert_eq!(req.html, None);
    }

    #[test]
    fn an_html_only_message_has_no_text() {
        let raw = b"From: app@acme.example\r\nSubject: Hi\r\nContent-Type: text/html\r\n\r\n<b>x</b>\r\n";
        let req = SubmittedMessage::parse(raw).unwrap().send_request(&to());
        assert_eq!(req.text, None);
        assert_eq!(req.html.as_deref(), Some("<b>x</b>\r\n"));
    }

    #[test]
    fn several_from_mailboxes_are_refused_and_missing_fields_are_left_to_the_send() {
        let raw = b"From: a@acme.example, b@acme.example\r\nSubject: Hi\r\n\r\nx\r\n";
        let error = SubmittedMessage::parse(raw).unwrap_err();
        assert!(matches!(&error, Error::Validation { fields } if fields[0].field == "from"), "{error:?}");

        let req = SubmittedMessage::parse(b"\r\nbody only\r\n").unwrap().send_request(&to());
        assert_eq!((req.from, req.subject), (None, None));
    }

    #[test]
    fn reply_to_custom_headers_attachments_and_inline_parts_are_mapped() {
        let raw = "From: app@acme.example\r\n\
                   To: someone@else.example\r\n\
                   Reply-To: Help <help@acme.example>, billing@acme.example\r\n\
                   Subject: Invoice\r\n\
                   X-Campaign: spring\r\n\
                   List-Unsubscribe: <https://acme.example/u/1>,\r\n <mailto:u@acme.example>\r\n\
                   Message-ID: <m1@acme.example>\r\n\
                   MIME-Version: 1.0\r\n\
                   Content-Type: multipart/mixed; boundary=m\r\n\r\n\
                   --m\r\nContent-Type: multipart/related; boundary=r\r\n\r\n\
                   --r\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:logo\">\r\n\
                   --r\r\nContent-Type: image/png\r\nContent-ID: <logo>\r\nContent-Disposition: inline\r\n\
                   Content-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=\r\n--r--\r\n\
                   --m\r\nContent-Type: application/pdf; name=\"invoice.pdf\"\r\n\
                   Content-Disposition: attachment; filename=\"invoice.pdf\"\r\n\
                   Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQ=\r\n--m--\r\n";

        let req = SubmittedMessage::parse(raw.as_bytes()).unwrap().send_request(&to());

        assert_eq!(req.reply_to, Some(serde_json::json!(["help@acme.example", "billing@acme.example"])));
        let headers = req.headers.expect("headers");
        assert_eq!(headers["X-Campaign"], "spring");
        assert_eq!(headers["List-Unsubscribe"], "<https://acme.example/u/1>, <mailto:u@acme.example>");
        for reserved in ["From", "To", "Subject", "Message-ID", "Reply-To", "MIME-Version", "Content-Type"] {
            assert!(headers.get(reserved).is_none(), "{reserved} is written by Tidings");
        }
        let attachments = req.attachments.expect("attachments");
        assert_eq!(attachments.len(), 2, "{attachments:?}");
        let logo = attachments.iter().find(|a| a.content_id.as_deref() == Some("logo")).expect("the inline part");
        assert_eq!((logo.content_type.as_str(), logo.content.as_str()), ("image/png", "iVBORw0KGgo="));
        let pdf = attachments.iter().find(|a| a.filename == "invoice.pdf").expect("the attachment");
        assert_eq!(
            (pdf.content_type.as_str(), pdf.content.as_str(), pdf.content_id.as_deref()),
            ("application/pdf", "JVBERi0xLjQ=", None)
        );
    }

    #[test]
    fn to_and_cc_headers_sort_the_envelope_recipients_and_the_rest_are_bcc() {
        let raw = b"From: app@acme.example\r\nTo: Ann <ann@x.example>, bob@y.example\r\n\
                    Cc: \"Carol, C.\" <carol@z.example>\r\nSubject: Hi\r\n\r\nx\r\n";
        let envelope: Vec<EmailAddress> = ["ANN@x.example", "bob@y.example", "carol@z.example", "dan@w.example"]
            .iter()
            .map(|a| EmailAddress::parse(a).unwrap())
            .collect();
        let req = SubmittedMessage::parse(raw).unwrap().send_request(&envelope);
        assert_eq!(req.to, Some(serde_json::json!(["\"Ann\" <ann@x.example>", "bob@y.example"])));
        assert_eq!(req.cc, Some(serde_json::json!(["\"Carol, C.\" <carol@z.example>"])));
        assert_eq!(req.bcc, Some(serde_json::json!(["dan@w.example"])));
        assert_eq!(req.written_headers, None, "the headers are exactly the to and cc recipients");
    }

    #[test]
    fn the_idempotency_key_depends_on_the_message_id() {
        let with_id = |id: &str| {
            SubmittedMessage::parse(format!("Message-ID: <{id}>\r\nSubject: s\r\n\r\nx\r\n").as_bytes()).unwrap()
        };
        let key = with_id("1@a.example").idempotency_key().unwrap();

        assert_eq!(key.len(), 5 + 64);
        assert_eq!(with_id("1@a.example").idempotency_key().unwrap(), key);
        assert_ne!(with_id("2@a.example").idempotency_key().unwrap(), key);
        assert_eq!(SubmittedMessage::parse(b"Subject: s\r\n\r\nx\r\n").unwrap().idempotency_key(), None);
        assert!(crate::model::IdempotencyKey::parse(&key).is_ok());
    }
}
