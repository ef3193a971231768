//! The optional fields of a send that users of Postmark and Resend expect:
//! `replyTo`, custom `headers`, `tags`, `metadata` and `attachments`, kept on the message as
//! one [`MessageExtras`]. Each part is built only by its checked constructor.

mod attachments;
mod headers;
mod labels;

use serde::{Deserialize, Serialize};

pub use attachments::{
    Attachment, AttachmentContent, AttachmentError, EXECUTABLE_EXTENSIONS, EXECUTABLE_TYPES, MAX_ATTACHMENTS,
    MAX_ATTACHMENTS_ENCODED_BYTES, MAX_CONTENT_ID, MAX_FILENAME_CHARS, holds_encoded_word, windows_extension,
};
pub use headers::{CustomHeader, HeaderError, MAX_HEADER_NAME, MAX_HEADER_VALUE, MAX_HEADERS, is_reserved};
pub use labels::{
    LabelError, MAX_METADATA_BYTES, MAX_METADATA_KEY, MAX_TAG_CHARS, MAX_TAGS, Metadata, Tag, check_metadata_key,
    check_tag_name,
};

use crate::email::EmailAddress;

/// Most `replyTo` addresses.
pub const MAX_REPLY_TO: usize = 50;

/// What a send added beyond recipient, sender, subject and bodies. Every part is empty by
/// default and left out of the stored document when empty, so messages stored before these
/// fields existed read back unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageExtras {
    /// `Reply-To` addresses, in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reply_to: Vec<EmailAddress>,
    /// Custom header fields, written after the ones Tidings writes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<CustomHeader>,
    /// Tags, in the order given; names unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Tag>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
    /// Attachments and inline parts, in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

impl MessageExtras {
    /// Nothing set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Whether the message has a tag named `name`, with `value` when one is given.
    pub fn has_tag(&self, name: &str, value: Option<&str>) -> bool {
        self.tags.iter().any(|t| t.name() == name && value.is_none_or(|v| t.value() == v))
    }
}
