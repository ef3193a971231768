//! Tracking tokens: `base64url(payload ‖ tag)` without padding, where
//!
//! ```text
//! payload = version (1 byte, 1) | kind (1 byte: 1 open, 2 click)
//!         | workspace ULID (16 bytes) | message ULID (16 bytes) | [click: URL, UTF-8]
//! tag     = HMAC-SHA256(key, payload), all 32 bytes
//! ```
//!
//! Version 2, for the copy of one recipient of a message to several (contract §10: opens and
//! clicks are attributed to the recipient whose copy was opened), has one more byte after
//! the message: the recipient's position in the message's list (0–49). Version 1 tokens,
//! in every message to one recipient and in mail sent before version 2, stay valid.
//!
//! The full tag is kept: truncating it to 16 bytes would save 22 characters per URL, which
//! is nothing beside a click token's URL, and verifying the whole tag is exactly
//! aws-lc-rs's constant-time `hmac::verify`, with no truncation code of our own to get wrong.
//!
//! An open token is 88 characters. A click token grows with its URL, 4/3 of it plus 88;
//! URLs over [`MAX_TRACKED_URL_BYTES`] are left untracked, so a token is at most
//! [`MAX_TOKEN_CHARS`] characters and a rewritten link stays under ~2,800 characters plus
//! the public base: within what every mail client and browser accepts.

use aws_lc_rs::hmac;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::TrackingKey;
use crate::ids::{MessageId, WorkspaceId};
use crate::model::{MAX_TRACKED_URL_BYTES, TrackedUrl};

/// Longest token [`TrackingKey::verify`] looks at (that of a click on the longest URL, with
/// a recipient).
pub const MAX_TOKEN_CHARS: usize = (HEADER + 1 + MAX_TRACKED_URL_BYTES + TAG).div_ceil(3) * 4;

const VERSION: u8 = 1;
/// The version whose tokens name a recipient.
const RECIPIENT_VERSION: u8 = 2;
const HEADER: usize = 2 + 16 + 16;
const TAG: usize = 32;

/// What a token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// The pixel of an HTML part.
    Open,
    /// A rewritten link.
    Click,
}

impl TokenKind {
    fn byte(self) -> u8 {
        match self {
            Self::Open => 1,
            Self::Click => 2,
        }
    }
}

/// What a valid token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Open or click.
    pub kind: TokenKind,
    /// The message's workspace.
    pub workspace: WorkspaceId,
    /// The message.
    pub message: MessageId,
    /// The recipient whose copy it is, by position in the message's list; `None` for a
    /// message to one recipient.
    pub recipient: Option<u8>,
    /// The destination of a click; `None` for an open.
    pub url: Option<TrackedUrl>,
}

/// Why a token is refused. The endpoints answer every one of them the same way (404);
/// the variants are for tests and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not canonical unpadded base64url, too short or too long.
    #[error("the token is malformed")]
    Malformed,
    /// The tag does not match: forged, altered, or signed with another key.
    #[error("the token's signature does not verify")]
    BadSignature,
    /// A version or kind this build does not know, or a click without a valid URL (only
    /// reachable with the key, i.e. by a bug or a future version).
    #[error("the token's contents are not understood")]
    Unsupported,
}

impl TrackingKey {
    /// The token of `message`'s pixel (in the copy of `recipient`, by position, when the
    /// message has a recipient list).
    pub fn sign_open(&self, workspace: WorkspaceId, message: MessageId, recipient: Option<u8>) -> String {
        self.sign(&payload(TokenKind::Open, workspace, message, recipient, b""))
    }

    /// The token of a link in `message` to `url` (in the copy of `recipient`).
    pub fn sign_click(
        &self,
        workspace: WorkspaceId,
        message: MessageId,
        recipient: Option<u8>,
        url: &TrackedUrl,
    ) -> String {
        self.sign(&payload(TokenKind::Click, workspace, message, recipient, url.as_str().as_bytes()))
    }

    /// Checks `token`'s tag (in constant time) and then reads it. Never panics, whatever
    /// the input.
    pub fn verify(&self, token: &str) -> Result<Verified, TokenError> {
        if token.len() > MAX_TOKEN_CHARS {
            return Err(TokenError::Malformed);
        }
        // The default engine refuses padding and non-zero trailing bits, so each byte
        // string has exactly one accepted spelling.
        let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| TokenError::Malformed)?;
        if bytes.len() < HEADER + TAG {
            return Err(TokenError::Malformed);
        }
        let (payload, tag) = bytes.split_at(bytes.len() - TAG);
        hmac::verify(self.hmac_key(), payload, tag).map_err(|_| TokenError::BadSignature)?;
        read(payload)
    }

    fn sign(&self, payload: &[u8]) -> String {
        let tag = hmac::sign(self.hmac_key(), payload);
        let mut bytes = Vec::with_capacity(payload.len() + TAG);
        bytes.extend_from_slice(payload);
        bytes.extend_from_slice(tag.as_ref());
        URL_SAFE_NO_PAD.encode(bytes)
    }
}

fn payload(kind: TokenKind, workspace: WorkspaceId, message: MessageId, recipient: Option<u8>, url: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER + 1 + url.len());
    bytes.push(if recipient.is_some() { RECIPIENT_VERSION } else { VERSION });
    bytes.push(kind.byte());
    bytes.extend_from_slice(&workspace.to_bytes());
    bytes.extend_from_slice(&message.to_bytes());
    bytes.extend(recipient);
    bytes.extend_from_slice(url);
    bytes
}

/// Reads a payload whose tag has verified.
fn read(payload: &[u8]) -> Result<Verified, TokenError> {
    let (&[version, kind], rest) = payload.split_first_chunk::<2>().ok_or(TokenError::Malformed)?;
    let (workspace, rest) = rest.split_first_chunk::<16>().ok_or(TokenError::Malformed)?;
    let (message, rest) = rest.split_first_chunk::<16>().ok_or(TokenError::Malformed)?;
    let (recipient, url) = match version {
        VERSION => (None, rest),
        RECIPIENT_VERSION => {
            let (&[index], url) = rest.split_first_chunk::<1>().ok_or(TokenError::Malformed)?;
            (Some(index), url)
        }
        _ => return Err(TokenError::Unsupported),
    };
    let (kind, url) = match kind {
        1 if url.is_empty() => (TokenKind::Open, None),
        2 => {
            let text = std::str::from_utf8(url).map_err(|_| TokenError::Unsupported)?;
            // Only what `TrackedUrl` accepts was signed; checking again keeps a redirect to
            // anything else impossible even if that ever changed.
            let url = TrackedUrl::parse(text).filter(|u| u.as_str() == text).ok_or(TokenError::Unsupported)?;
            (TokenKind::Click, Some(url))
        }
        _ => return Err(TokenError::Unsupported),
    };
    Ok(Verified {
        kind,
        workspace: WorkspaceId::from_bytes(*workspace),
        message: MessageId::from_bytes(*message),
        recipient,
        url,
    })
}
