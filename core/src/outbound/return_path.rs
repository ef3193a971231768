//! The signed per-message return path (docs/api.md#bounce-and-complaint-reports, contract §8):
//! `bounces+<message id>-<tag>@<return-path domain>`, where the tag is a keyed signature of
//! the message id and the recipient the copy went to.
//!
//! Bounce and complaint reports arrive unauthenticated, over SMTP, from anyone. Before the
//! tag, a report was matched by the message id in the return path (or by the `Message-ID` the
//! report quotes), both of which the recipient of *one* message can read, and ids were
//! sequential within a millisecond: the recipient of one message of a batch could bounce its
//! neighbours and suppress addresses it never saw. With the tag, only a copy's own return
//! path names its message, so a report can only be about mail its sender received (or was
//! sent as the bounce of): the receiving MTA, the recipient's provider, or the recipient.
//!
//! - The tag is the first [`TAG_BYTES`] bytes of HMAC-SHA256 under the server's
//!   [`ReturnPathKey`] (kept in the store, sealed, shared by every node), over a version byte,
//!   the message id and the recipient's lower-cased address; it is written in lower-case hex,
//!   so a system that folds local parts to lower or upper case on the way back changes
//!   nothing. 80 bits: an attacker guessing tags online, one SMTP transaction per guess,
//!   cannot expect a hit.
//! - The recipient is in the signature so that, once a message has several recipients, each
//!   copy's return path speaks for that recipient alone.
//! - A return path without a tag (mail sent before tags existed) no longer matches: a
//!   bounce of such mail arriving after the upgrade changes nothing. That is the price of
//!   closing the forgery at once.

use std::fmt;

use aws_lc_rs::{constant_time, hmac};

use crate::dns_records::RETURN_PATH_LABEL;
use crate::domain_name::DomainName;
use crate::email::EmailAddress;
use crate::ids::MessageId;
use crate::model::Message;
use crate::ports::{Random, SecretStore, StoreResult};
use crate::secret::SecretName;
use crate::shared_key::{SHARED_KEY_BYTES, shared_key};

/// Local-part prefix of per-message return paths.
pub const RETURN_PATH_PREFIX: &str = "bounces+";
/// Bytes of the HMAC kept in the return path (80 bits, 20 hex digits).
pub const TAG_BYTES: usize = 10;
/// The name under which the store keeps the return-path key.
pub const RETURN_PATH_KEY_SECRET: SecretName = SecretName::new("return_path_key");
/// Changes when what is signed changes, so old tags cannot be read as new ones.
const VERSION: u8 = 1;

/// The server's secret for signing return paths. `Debug` never shows it.
#[derive(Clone)]
pub struct ReturnPathKey {
    key: hmac::Key,
}

impl ReturnPathKey {
    /// The key with these secret bytes.
    pub fn from_bytes(bytes: [u8; SHARED_KEY_BYTES]) -> Self {
        Self { key: hmac::Key::new(hmac::HMAC_SHA256, &bytes) }
    }

    /// The key of every node sharing `store` (made and stored on the store's first use):
    /// a report received by one node verifies against mail another node sent.
    pub async fn shared(store: &dyn SecretStore, random: &dyn Random) -> StoreResult<Self> {
        Ok(Self::from_bytes(shared_key(store, RETURN_PATH_KEY_SECRET, random, None).await?))
    }

    fn tag(&self, message: MessageId, recipient: &EmailAddress) -> [u8; TAG_BYTES] {
        let mut context = hmac::Context::with_key(&self.key);
        context.update(&[VERSION]);
        context.update(&message.to_bytes());
        context.update(recipient.normalized().as_bytes());
        let full = context.sign();
        let mut tag = [0u8; TAG_BYTES];
        tag.copy_from_slice(&full.as_ref()[..TAG_BYTES]);
        tag
    }
}

impl fmt::Debug for ReturnPathKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReturnPathKey(***)")
    }
}

/// Where reports come back to: the return-path domain and the key that signs the addresses
/// on it (`TIDINGS_RETURN_PATH_DOMAIN`).
#[derive(Debug, Clone)]
pub struct ReturnPath {
    /// The domain of every return path; the inbound listener takes mail for it.
    pub domain: DomainName,
    /// The signing key.
    pub key: ReturnPathKey,
}

/// What a return path of ours says before it is checked: the message it names and the tag it
/// carries. Only [`ReturnPath::verify`] tells whether the tag is right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimedReturnPath {
    /// The message it names.
    pub message: MessageId,
    tag: [u8; TAG_BYTES],
}

/// Why an address at the return-path domain names no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReturnPathError {
    /// Another domain, or not `bounces+…`: not a return path of ours at all.
    #[error("not a return path")]
    NotAReturnPath,
    /// `bounces+<id>` with no tag, or a tag that is not 20 hex digits.
    #[error("the return path is not signed")]
    Unsigned,
}

impl ReturnPath {
    /// The envelope sender of the copy of `message` that goes to `recipient`.
    pub fn address(&self, message: MessageId, recipient: &EmailAddress) -> EmailAddress {
        let tag = self.key.tag(message, recipient);
        let mut local = String::with_capacity(RETURN_PATH_PREFIX.len() + 26 + 1 + 2 * TAG_BYTES);
        local.push_str(RETURN_PATH_PREFIX);
        // Lower case: some systems fold local parts on the way back; ULIDs and hex read the
        // same in either case.
        local.push_str(&message.to_string().to_ascii_lowercase());
        local.push('-');
        for byte in tag {
            local.push_str(&format!("{byte:02x}"));
        }
        // "bounces+", a ULID, "-" and hex digits are a valid dot-atom of 55 characters and a
        // DomainName is a valid domain, so this cannot fail.
        EmailAddress::from_parts(&local, &self.domain).expect("a return path is a valid address")
    }

    /// What `address` claims, if it is a return path at our domain (any case).
    pub fn claim(&self, address: &EmailAddress) -> Result<ClaimedReturnPath, ReturnPathError> {
        if address.domain() != &self.domain {
            return Err(ReturnPathError::NotAReturnPath);
        }
        parse_local(address.local_part())
    }

    /// Whether `claimed` is the return path of `message`'s copy to `recipient`, compared in
    /// constant time.
    pub fn verify(&self, claimed: &ClaimedReturnPath, recipient: &EmailAddress) -> bool {
        let expected = self.key.tag(claimed.message, recipient);
        constant_time::verify_slices_are_equal(&expected, &claimed.tag).is_ok()
    }
}

/// Every return path a server signs: the server-wide one (`TIDINGS_RETURN_PATH_DOMAIN`) and,
/// with their key, each sending domain's own `bounces.<domain>` (contract §12). One key signs
/// both, so which domain a copy went out with changes nothing about its signature.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReturnPaths<'a> {
    /// The server-wide return path.
    pub server: Option<&'a ReturnPath>,
    /// The key of the per-domain return paths, when they are on.
    pub per_domain: Option<&'a ReturnPathKey>,
}

impl ReturnPaths<'_> {
    /// Whether any return path is signed at all (else no report can be told from a forgery).
    pub fn is_configured(&self) -> bool {
        self.server.is_some() || self.per_domain.is_some()
    }

    /// What `address` claims, and the return path it is on: the server-wide domain, or with
    /// per-domain return paths any `bounces.<domain>` (which domain is right for the message
    /// it names is [`ReturnPaths::serves`]'s question, once the message is read).
    pub fn claim(&self, address: &EmailAddress) -> Result<(ReturnPath, ClaimedReturnPath), ReturnPathError> {
        if let Some(server) = self.server
            && address.domain() == &server.domain
        {
            return server.claim(address).map(|claimed| (server.clone(), claimed));
        }
        let on_subdomain = address
            .domain()
            .as_str()
            .strip_prefix(RETURN_PATH_LABEL)
            .is_some_and(|rest| rest.starts_with('.') && rest.len() > 1);
        match self.per_domain {
            Some(key) if on_subdomain => {
                let at = ReturnPath { domain: address.domain().clone(), key: key.clone() };
                let claimed = at.claim(address)?;
                Ok((at, claimed))
            }
            _ => Err(ReturnPathError::NotAReturnPath),
        }
    }

    /// Whether a return path on `at` is one `message` may have gone out with: the
    /// server-wide domain, or (per-domain return paths on) `bounces.<its From domain>`. A
    /// signature proves the message and recipient; this keeps a return path on another
    /// domain's subdomain from being taken as this message's.
    pub fn serves(&self, at: &DomainName, message: &Message) -> bool {
        if self.server.is_some_and(|server| &server.domain == at) {
            return true;
        }
        self.per_domain.is_some()
            && at.as_str().strip_prefix(RETURN_PATH_LABEL).and_then(|rest| rest.strip_prefix('.'))
                == Some(message.from.address.domain().as_str())
    }
}

fn parse_local(local: &str) -> Result<ClaimedReturnPath, ReturnPathError> {
    let prefix = local.get(..RETURN_PATH_PREFIX.len()).ok_or(ReturnPathError::NotAReturnPath)?;
    if !prefix.eq_ignore_ascii_case(RETURN_PATH_PREFIX) {
        return Err(ReturnPathError::NotAReturnPath);
    }
    let rest = &local[RETURN_PATH_PREFIX.len()..];
    let (id, hex) = rest.split_once('-').ok_or(ReturnPathError::Unsigned)?;
    let message = MessageId::parse(id).ok_or(ReturnPathError::NotAReturnPath)?;
    if hex.len() != 2 * TAG_BYTES || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ReturnPathError::Unsigned);
    }
    let mut tag = [0u8; TAG_BYTES];
    for (i, byte) in tag.iter_mut().enumerate() {
        // Two ASCII hex digits: the slice and the parse cannot fail.
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| ReturnPathError::Unsigned)?;
    }
    Ok(ClaimedReturnPath { message, tag })
}

#[cfg(test)]
#[path = "return_path_tests.rs"]
mod tests;
