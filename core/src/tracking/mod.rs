//! Open and click tracking (docs/api.md#tracking): signed tokens ([`token`]), the rewriting of a
//! message's HTML part ([`html`]) that puts them into links and a pixel, and how many opens
//! and clicks a message keeps ([`TrackingTally`], on the message record in the model).
//!
//! A token carries everything the public endpoints need: what it is for (open or click),
//! the workspace and message, and for a click the destination URL, all under an
//! HMAC-SHA256 tag. The endpoints check the tag before anything else, so a forged or altered
//! token costs one HMAC and no store access, and a redirect can only ever lead to a URL that
//! Tidings itself signed: there is no open redirect.
//!
//! The key is the server's ([`TrackingConfig`]), kept in the store ([`TrackingKey::shared`])
//! so that every node sharing the store signs and verifies with the same one. Rotating it
//! breaks the links of every message sent before, which is why tokens carry a version byte
//! but no key id yet.

pub mod html;
pub mod token;

use std::fmt;

use aws_lc_rs::hmac;

use crate::ports::{Random, SecretStore, StoreResult};
use crate::secret::SecretName;
use crate::shared_key::{SHARED_KEY_BYTES, shared_key};

pub use html::{decode_entities, rewrite_html};
pub use token::{MAX_TOKEN_CHARS, TokenError, TokenKind, Verified};

// The tally and the URLs it counts live on the message record, in the model; the tracking
// front ends use them under these names.
pub use crate::model::tracking_tally::{
    Engagement, MAX_LINKS_KEPT, MAX_OPENS_KEPT, MAX_REPEAT_CLICKS_KEPT, MAX_REPORTED_DELAYS_KEPT, TrackingTally,
};
pub use crate::model::{MAX_TRACKED_URL_BYTES, TrackedUrl};

/// Length of a [`TrackingKey`] in bytes: HMAC-SHA256's output size, the key length RFC 2104
/// recommends as the minimum.
pub const TRACKING_KEY_BYTES: usize = SHARED_KEY_BYTES;

/// The name under which the store keeps the tracking key ([`TrackingKey::shared`]).
pub const TRACKING_KEY_SECRET: SecretName = SecretName::new("tracking_key");

/// The server's secret for signing tracking tokens. `Debug` never shows it.
#[derive(Clone)]
pub struct TrackingKey {
    key: hmac::Key,
}

impl TrackingKey {
    /// The key with these secret bytes.
    pub fn from_bytes(bytes: [u8; TRACKING_KEY_BYTES]) -> Self {
        Self { key: hmac::Key::new(hmac::HMAC_SHA256, &bytes) }
    }

    /// A fresh random key.
    pub fn generate(random: &dyn Random) -> Self {
        let mut bytes = [0u8; TRACKING_KEY_BYTES];
        random.fill(&mut bytes);
        Self::from_bytes(bytes)
    }

    /// The key of every node sharing `store`: the one stored there under
    /// [`TRACKING_KEY_SECRET`]; or, on the store's first start, `kept` (a key this node kept
    /// from before, so that the links it signed keep working) or else a fresh random one,
    /// stored first. Nodes starting together all get the one that was stored. Warns when
    /// `kept` lost to another key (links signed with it no longer open). `Corrupt` if the
    /// stored secret is not [`TRACKING_KEY_BYTES`] long.
    pub async fn shared(
        store: &dyn SecretStore,
        random: &dyn Random,
        kept: Option<[u8; TRACKING_KEY_BYTES]>,
    ) -> StoreResult<Self> {
        let bytes = shared_key(store, TRACKING_KEY_SECRET, random, kept).await?;
        if kept.is_some_and(|kept| kept != bytes) {
            tracing::warn!(
                "the store already holds another tracking key, which this node now uses: links signed with \
                 the key this node kept before no longer open"
            );
        }
        Ok(Self::from_bytes(bytes))
    }

    pub(crate) fn hmac_key(&self) -> &hmac::Key {
        &self.key
    }
}

impl fmt::Debug for TrackingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TrackingKey(***)")
    }
}

/// Why a text is not a [`PublicUrl`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublicUrlError {
    /// Not an absolute URL.
    #[error("not an absolute URL: {0}")]
    Syntax(String),
    /// Neither http nor https.
    #[error("the scheme must be http or https, not {0}")]
    Scheme(String),
    /// A query, fragment or user info would be mangled by appending `/t/...`.
    #[error("a public URL is a base: no user info, query or fragment")]
    NotABase,
}

/// The base under which the tracking endpoints are reachable from the internet
/// (`TIDINGS_PUBLIC_URL`): `http(s)://host[:port][/path]`, kept without a trailing slash so
/// `{base}/t/o/{token}` is always well formed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl(String);

impl PublicUrl {
    /// Parses and normalises a base URL.
    pub fn parse(text: &str) -> Result<Self, PublicUrlError> {
        let url = url::Url::parse(text.trim()).map_err(|e| PublicUrlError::Syntax(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(PublicUrlError::Scheme(url.scheme().to_owned()));
        }
        if url.cannot_be_a_base()
            || url.host().is_none()
            || !url.username().is_empty()
            || url.password().is_some()
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(PublicUrlError::NotABase);
        }
        Ok(Self(url.as_str().trim_end_matches('/').to_owned()))
    }

    /// The base, without a trailing slash.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The pixel URL of an open token.
    pub fn open_url(&self, token: &str) -> String {
        format!("{}/t/o/{token}", self.0)
    }

    /// The redirect URL of a click token.
    pub fn click_url(&self, token: &str) -> String {
        format!("{}/t/c/{token}", self.0)
    }
}

impl fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the server needs to track opens and clicks. Without it ([`CoreConfig::tracking`]
/// `None`) sends that ask for tracking are accepted and stored with their choice, but
/// nothing is rewritten and every token is unknown.
///
/// [`CoreConfig::tracking`]: crate::usecases::CoreConfig::tracking
#[derive(Debug, Clone)]
pub struct TrackingConfig {
    /// Base of the pixel and redirect URLs.
    pub public_url: PublicUrl,
    /// The signing key.
    pub key: TrackingKey,
}

#[cfg(test)]
mod tests;
