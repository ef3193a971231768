//! `inReplyToMessageId`: which message Tidings sent a reply answers, from the ids the reply
//! names. Tidings writes `Message-ID: <ULID@sending-domain>`
//! ([`provider_message_id`](crate::outbound::provider_message_id)), so an id of that form
//! whose domain is one of the caller's names a message; the caller checks that it exists
//! in the workspace (an id of that form may be forged or belong to another workspace).

use crate::domain_name::DomainName;
use crate::ids::MessageId;

use super::ParsedInbound;

/// The message `parsed` answers: the first id of Tidings' form whose domain `is_ours`
/// accepts, looking at `In-Reply-To` first (the message replied to), then `References`
/// newest first (a reply to a reply still names the original there).
pub fn in_reply_to_message_id(parsed: &ParsedInbound, is_ours: impl Fn(&DomainName) -> bool) -> Option<MessageId> {
    parsed
        .in_reply_to
        .iter()
        .chain(parsed.references.iter().rev())
        .find_map(|id| tidings_message_id(id).filter(|(_, domain)| is_ours(domain)).map(|(id, _)| id))
}

/// The message id and domain of a Message-ID value (angle brackets optional) of Tidings'
/// form `ULID@domain`; `None` for any other id.
pub fn tidings_message_id(value: &str) -> Option<(MessageId, DomainName)> {
    let value = value.trim().trim_start_matches('<').trim_end_matches('>');
    let (left, domain) = value.split_once('@')?;
    // `Ulid::from_string` takes exactly 26 characters, case-insensitively; the nil ULID is
    // no message's.
    let id = MessageId::parse(left).filter(|id| *id != MessageId::NONE)?;
    let domain = DomainName::parse(domain).ok()?;
    Some((id, domain))
}
