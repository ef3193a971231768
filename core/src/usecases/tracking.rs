//! Open and click tracking (docs/api.md#tracking): what a send asks for ([`TrackingRequest`]),
//! and the public endpoints' use cases: a pixel load records `Opened`, a followed link records
//! `Clicked` and yields where to redirect.
//!
//! Only so many opens and clicks become events ([`crate::model::tracking_tally`]); the pixel is
//! served and the redirect answered for every request all the same.
//!
//! Every refusal is `NotFound`, whatever its cause (bad token, unknown message, another
//! workspace, tracking not configured), so the endpoints reveal nothing; the token is
//! verified before the store is touched. A valid token for a message whose status takes no
//! opens or clicks (it never left: `Queued`, `Failed`, `Suppressed`) still answers, and
//! records nothing: the recipient's link must work even when the event cannot be kept.

use serde::{Deserialize, Serialize};

use crate::ids::EventId;
use crate::model::tracking_tally::link_digest;
use crate::model::{Domain, EventDetails, EventType, Message, MessageTracking};
use crate::state_machine::{Happening, apply_recipient_event, next_status};
use crate::tracking::{Engagement, TokenKind, TrackedUrl, Verified};
use crate::usecases::Tidings;
use crate::{Error, Result};

/// Longest user agent kept on an event, in characters; the rest is cut off.
pub const MAX_USER_AGENT_CHARS: usize = 512;
/// How often an open or click is tried when a concurrent event (a delivery outcome, another
/// click) changed the message between reading and writing it. Every lost race is another
/// event written, and the tally caps those at 120 per message (plus its delivery events), so
/// a first open or click is kept unless far more than a burst of replays races it.
const CONFLICT_RETRIES: usize = 32;

/// `tracking` of a send: each key overrides the sending domain's default (docs/api.md#tracking).
/// Only a JSON object is read as one (serde's derive would also take `[true, false]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TrackingRequest {
    /// Track opens (default: the domain's `openTracking`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opens: Option<bool>,
    /// Track clicks (default: the domain's `clickTracking`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clicks: Option<bool>,
}

impl<'de> Deserialize<'de> for TrackingRequest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Fields {
            #[serde(default)]
            opens: Option<bool>,
            #[serde(default)]
            clicks: Option<bool>,
        }
        struct ObjectOnly;
        impl<'de> serde::de::Visitor<'de> for ObjectOnly {
            type Value = TrackingRequest;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object with optional boolean `opens` and `clicks`")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> std::result::Result<Self::Value, A::Error> {
                let Fields { opens, clicks } = Fields::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(TrackingRequest { opens, clicks })
            }
        }
        deserializer.deserialize_map(ObjectOnly)
    }
}

impl TrackingRequest {
    /// The tracking of a message sent from `domain` with this request (`None`: none given).
    pub fn resolve(request: Option<Self>, domain: &Domain) -> MessageTracking {
        let request = request.unwrap_or_default();
        MessageTracking {
            opens: request.opens.unwrap_or(domain.open_tracking),
            clicks: request.clicks.unwrap_or(domain.click_tracking),
        }
    }
}

impl Tidings {
    /// The open and click tracking use cases: the public pixel and link endpoints.
    pub fn tracking(&self) -> Tracking<'_> {
        Tracking { core: self }
    }
}

/// The tracking area of [`Tidings`] ([`Tidings::tracking`]): what the public pixel and link
/// endpoints do with a signed token, recording `Opened` and `Clicked` within the message's
/// tally and answering where a link leads.
#[derive(Clone, Copy)]
pub struct Tracking<'a> {
    core: &'a Tidings,
}

impl Tracking<'_> {
    /// `GET /t/o/{token}`: records `Opened` (with the user agent) on the token's message,
    /// if it keeps another open ([`crate::model::tracking_tally`]).
    pub async fn record_open(&self, token: &str, user_agent: Option<&str>) -> Result<()> {
        let (verified, message) = self.tracked_message(token, TokenKind::Open).await?;
        let details = EventDetails { user_agent: user_agent.map(clip_user_agent), ..EventDetails::default() };
        self.record_tracking(message, recipient_of(&verified), Engagement::Open, details).await
    }

    /// `GET /t/c/{token}`: records `Clicked` (URL and user agent) if the message keeps
    /// another click on this link ([`crate::model::tracking_tally`]), and returns the URL to
    /// redirect to, which only ever comes from inside the signed token: every click is
    /// redirected, recorded or not.
    pub async fn record_click(&self, token: &str, user_agent: Option<&str>) -> Result<TrackedUrl> {
        let (verified, message) = self.tracked_message(token, TokenKind::Click).await?;
        let recipient = recipient_of(&verified);
        let url = verified.url.ok_or(Error::NotFound("tracking link"))?;
        let details = EventDetails {
            url: Some(url.as_str().to_owned()),
            user_agent: user_agent.map(clip_user_agent),
            ..EventDetails::default()
        };
        self.record_tracking(message, recipient, Engagement::Click(&url), details).await?;
        Ok(url)
    }

    /// `HEAD /t/o/{token}`: whether the pixel exists, recording nothing (prefetchers and
    /// link scanners probe with HEAD; that is not an open).
    pub async fn check_open(&self, token: &str) -> Result<()> {
        self.tracked_message(token, TokenKind::Open).await.map(|_| ())
    }

    /// `HEAD /t/c/{token}`: where the link leads, recording nothing.
    pub async fn check_click(&self, token: &str) -> Result<TrackedUrl> {
        let (verified, _) = self.tracked_message(token, TokenKind::Click).await?;
        verified.url.ok_or(Error::NotFound("tracking link"))
    }

    /// The verified token and its message, or `NotFound`. The HMAC is checked first: a bad
    /// token costs no store access.
    async fn tracked_message(&self, token: &str, kind: TokenKind) -> Result<(Verified, Message)> {
        const NOT_FOUND: Error = Error::NotFound("tracking link");
        let config = self.core.config.tracking.as_ref().ok_or(NOT_FOUND)?;
        let verified = config.key.verify(token).map_err(|_| NOT_FOUND)?;
        if verified.kind != kind {
            return Err(NOT_FOUND);
        }
        let message = self.core.store.get_message(verified.workspace, verified.message).await?.ok_or(NOT_FOUND)?;
        Ok((verified, message))
    }

    /// Records an open or click on `message` if its tally keeps it. The write succeeds only
    /// if no event was recorded since the message was read; otherwise it is read again and
    /// the tally decides again, so concurrent requests cannot all slip under the cap. Each
    /// lost race means another event was written, and a message takes few, so this ends;
    /// [`CONFLICT_RETRIES`] bounds it anyway, giving up (recording nothing) rather than
    /// failing the recipient's request.
    async fn record_tracking(
        &self,
        mut message: Message,
        recipient: usize,
        engagement: Engagement<'_>,
        details: EventDetails,
    ) -> Result<()> {
        let event_type = match engagement {
            Engagement::Open => EventType::Opened,
            Engagement::Click(_) => EventType::Clicked,
        };
        for _ in 0..CONFLICT_RETRIES {
            let Some(status) = message.recipient_list().get(recipient).map(|r| r.status) else {
                return Ok(());
            };
            if next_status(status, event_type).is_err() {
                return Ok(());
            }
            let Some(tally) = message.tracking_tally.keep(engagement, recipient) else {
                return Ok(());
            };
            let at = self.core.clock.now();
            let happening = Happening {
                event_id: EventId::new_at(at, &*self.core.random),
                event_type,
                at,
                details: details.clone(),
                provider_message_id: None,
                next_attempt_at: None,
            };
            let (mut next, event) = apply_recipient_event(&message, recipient, happening)
                .map_err(|e| Error::Conflict(format!("message {}: {e}", message.id)))?;
            next.tracking_tally = tally;
            let last_event_id = Some(message.last_event_id);
            match self.core.store_message_event(&message, next, event, None, last_event_id).await {
                Ok(_) => return Ok(()),
                Err(Error::Conflict(_)) => {
                    message = self
                        .core
                        .store
                        .get_message(message.workspace_id, message.id)
                        .await?
                        .ok_or(Error::NotFound("tracking link"))?;
                }
                Err(e) => return Err(e),
            }
        }
        let first = match engagement {
            Engagement::Open => !message.tracking_tally.opened_by(recipient),
            Engagement::Click(url) => !message.tracking_tally.clicked_links.contains(&link_digest(url)),
        };
        if first {
            tracing::warn!(message = %message.id, event = event_type.as_str(), "tracking event lost to concurrent updates");
        } else {
            // A repeat lost to a burst of others (a replayed link): expected, not worth a warning.
            tracing::debug!(message = %message.id, event = event_type.as_str(), "repeat tracking event not kept");
        }
        Ok(())
    }
}

/// The position of the recipient whose copy holds the token: the one a version 1 token's
/// message has, else the one the token names.
fn recipient_of(verified: &Verified) -> usize {
    verified.recipient.map_or(0, usize::from)
}

/// `user_agent` cut to [`MAX_USER_AGENT_CHARS`] characters.
fn clip_user_agent(user_agent: &str) -> String {
    match user_agent.char_indices().nth(MAX_USER_AGENT_CHARS) {
        Some((end, _)) => user_agent[..end].to_owned(),
        None => user_agent.to_owned(),
    }
}
