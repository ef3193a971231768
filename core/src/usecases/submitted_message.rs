//! The MIME → [`SendRequest`] mapping of SMTP submission: what an application wrote in its
//! message becomes the fields an API client would have sent. Parsing only, no I/O.
//!
//! Mapped: `From` (one mailbox, display name kept), `Subject` (RFC 2047 decoded), the first
//! `text/plain` and the first `text/html` body part (transfer encodings and charsets
//! decoded). The envelope recipient becomes `to`; the message's own `To`/`Cc` headers are
//! not kept (each recipient gets a message addressed to them, like the API's sends), and
//! neither is anything else yet: see [`SubmittedMessage::send_request`].

use mail_parser::{Address, MessageParser, PartType};
use sha2::{Digest, Sha256};

use crate::email::EmailAddress;
use crate::usecases::SendRequest;
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
        Ok(Self {
            from,
            subject: message.subject().map(str::to_owned),
            text,
            html,
            message_id: message.message_id().map(str::to_owned),
        })
    }

    /// The send for one envelope recipient.
    ///
    /// Not mapped yet (the fields do not exist on [`SendRequest`] in this version): `Reply-To`
    /// → `replyTo`; `X-` headers → `headers`; attachments, and inline parts by Content-ID →
    /// `attachments`. Each is a field read in [`SubmittedMessage::parse`] and set here.
    pub fn send_request(&self, to: &EmailAddress) -> SendRequest {
        SendRequest {
            to: Some(to.to_string()),
            from: self.from.clone(),
            subject: self.subject.clone(),
            html: self.html.clone(),
            text: self.text.clone(),
            ..SendRequest::default()
        }
    }

    /// The Idempotency-Key of the send to `to`: derived from the `Message-ID`, so a client
    /// that retries after a lost `250` gets the messages already queued back instead of new
    /// ones. `None` without a Message-ID (every retry is then a new send).
    pub fn idempotency_key(&self, to: &EmailAddress) -> Option<String> {
        let message_id = self.message_id.as_deref()?;
        // Hashed: a Message-ID may be longer than a key may be, and the recipient must be in it.
        let digest = Sha256::new().chain_update(message_id).chain_update([0]).chain_update(to.normalized()).finalize();
        Some(format!("smtp-{}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>()))
    }
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

    fn to() -> EmailAddress {
        EmailAddress::parse("user@dest.example").unwrap()
    }

    #[test]
    fn a_multipart_alternative_message_maps_to_one_send_per_recipient() {
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

        assert_eq!(req.to.as_deref(), Some("user@dest.example"));
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
    fn the_idempotency_key_depends_on_the_message_id_and_the_recipient() {
        let with_id = |id: &str| {
            SubmittedMessage::parse(format!("Message-ID: <{id}>\r\nSubject: s\r\n\r\nx\r\n").as_bytes()).unwrap()
        };
        let other = EmailAddress::parse("other@dest.example").unwrap();
        let key = with_id("1@a.example").idempotency_key(&to()).unwrap();

        assert_eq!(key.len(), 5 + 64);
        assert_eq!(with_id("1@a.example").idempotency_key(&to()).unwrap(), key);
        assert_ne!(with_id("1@a.example").idempotency_key(&other).unwrap(), key);
        assert_ne!(with_id("2@a.example").idempotency_key(&to()).unwrap(), key);
        assert_eq!(SubmittedMessage::parse(b"Subject: s\r\n\r\nx\r\n").unwrap().idempotency_key(&to()), None);
        assert!(crate::model::IdempotencyKey::parse(&key).is_ok());
    }
}
