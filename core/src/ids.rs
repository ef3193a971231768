//! Typed identifiers: one newtype per resource so a `DomainId` cannot be passed where a
//! `MessageId` is expected. All are ULIDs, so they sort by creation time, which is what the
//! stores rely on for newest-first listing.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use ulid::Ulid;

/// The last id made by this process in each of the most recent milliseconds ids were made
/// for, so that ids made within one millisecond still sort in creation order ("newest first"
/// lists rely on it) even when callers with different clocks interleave (tests with manual
/// clocks do; a real clock only ever needs the newest entry). Across processes order is only
/// by millisecond, which is all ULIDs promise.
///
/// An id made in the same millisecond as the last one is that one plus a random step of
/// 1 to 2^48, not plus 1 (the ULID spec's monotonic mode): with +1, the neighbours of an id
/// anyone holds (a message id in a receipt) were that id ±1, ±2, so one recipient could name
/// the other messages of a batch (contract §8: "message ids are not predictable from another
/// message's id"). 2^48 values to guess between two ids; and from a random start the 80-bit
/// random part has room for about 2^31 such steps in one millisecond. Past that (a burst far
/// beyond any real load), the step is 1.
static LAST_ULIDS: std::sync::Mutex<Vec<u128>> = std::sync::Mutex::new(Vec::new());
/// Milliseconds remembered by [`LAST_ULIDS`].
const REMEMBERED_MILLISECONDS: usize = 64;

fn monotonic_ulid(at: chrono::DateTime<chrono::Utc>, random: &dyn crate::random::Random) -> Ulid {
    let mut bytes = [0u8; 10];
    random.fill(&mut bytes);
    let low = bytes.iter().fold(0u128, |acc, b| (acc << 8) | u128::from(*b));
    let ms = u64::try_from(at.timestamp_millis().max(0)).unwrap_or(0);
    // The nil ULID is every type's `NONE`, which no resource may have.
    let fresh = Ulid::from_parts(ms, if ms == 0 { low.max(1) } else { low });
    let mut last = LAST_ULIDS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // Newest entries are at the end; a real clock finds its millisecond there at once.
    let id = match last.iter().rposition(|id| Ulid(*id).timestamp_ms() == ms) {
        Some(at) => {
            let previous = Ulid(last[at]);
            let id = after(previous, fresh, random);
            last.remove(at);
            id
        }
        None => {
            if last.len() == REMEMBERED_MILLISECONDS {
                last.remove(0);
            }
            fresh
        }
    };
    last.push(id.0);
    id
}

/// An id of `previous`'s millisecond greater than it by a random step of 1 to 2^48, or by 1
/// when its random part has no room for the step (and `fresh` when it has none at all, as
/// before).
fn after(previous: Ulid, fresh: Ulid, random: &dyn crate::random::Random) -> Ulid {
    let mut bytes = [0u8; 8];
    random.fill(&mut bytes[2..]);
    let step = u128::from(u64::from_be_bytes(bytes)) + 1;
    let max_random = (1u128 << 80) - 1;
    match previous.random().checked_add(step).filter(|low| *low <= max_random) {
        Some(low) => Ulid::from_parts(previous.timestamp_ms(), low),
        None => previous.increment().unwrap_or(fresh),
    }
}

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Ulid);

        impl $name {
            /// The id no resource has (the nil ULID, which [`Self::new_at`] never makes).
            /// A front end passes it for a path segment that is not an id at all, so the use
            /// case answers exactly as for an unknown id, after the same scope checks.
            pub const NONE: Self = Self(Ulid::nil());

            /// Parses the text a request names the resource by: the id it spells, or
            /// [`Self::NONE`] if it spells none (such text names nothing, like an unknown id).
            pub fn parse_or_none(text: &str) -> Self {
                Self::parse(text).unwrap_or(Self::NONE)
            }

            /// A fresh id for something created at `at` (millisecond precision), with random
            /// low bits.
            pub fn new_at(at: chrono::DateTime<chrono::Utc>, random: &dyn crate::random::Random) -> Self {
                Self(monotonic_ulid(at, random))
            }

            /// The smallest id that can be minted at `at`'s millisecond: every id minted
            /// before it is smaller, every id minted at or after it is not. For range scans
            /// by creation time.
            pub fn first_at(at: chrono::DateTime<chrono::Utc>) -> Self {
                Self(Ulid::from_parts(u64::try_from(at.timestamp_millis().max(0)).unwrap_or(0), 0))
            }

            /// The underlying ULID.
            pub fn ulid(self) -> Ulid {
                self.0
            }

            /// Parses the 26-character ULID text form; `None` if it is not one.
            pub fn parse(text: &str) -> Option<Self> {
                Ulid::from_string(text).ok().map(Self)
            }

            /// The 16 big-endian bytes; byte order equals creation order, which the stores use
            /// as index keys.
            pub fn to_bytes(self) -> [u8; 16] {
                self.0.to_bytes()
            }

            /// Inverse of [`Self::to_bytes`].
            pub fn from_bytes(bytes: [u8; 16]) -> Self {
                Self(Ulid::from_bytes(bytes))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl TypedId for $name {
            fn parse_or_none(text: &str) -> Self {
                Self::parse_or_none(text)
            }
        }

        impl FromStr for $name {
            type Err = ulid::DecodeError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Ulid::from_string(s).map(Self)
            }
        }
    };
}

typed_id!(
    /// A workspace: the unit of isolation.
    WorkspaceId
);
typed_id!(
    /// An API key.
    ApiKeyId
);
typed_id!(
    /// A message (one recipient).
    MessageId
);
typed_id!(
    /// An event on a message's timeline.
    EventId
);
typed_id!(
    /// A sending domain. A deleted and re-added domain gets a new id.
    DomainId
);
typed_id!(
    /// A registered sender (internal; the API addresses senders by username).
    SenderId
);
typed_id!(
    /// A template.
    TemplateId
);
typed_id!(
    /// One version of a template.
    TemplateVersionId
);
typed_id!(
    /// A suppression list entry.
    SuppressionId
);
typed_id!(
    /// A webhook endpoint.
    WebhookId
);
typed_id!(
    /// One delivery of one event to one webhook endpoint (stable across retries: it is the
    /// `webhook-id` header).
    DeliveryId
);
typed_id!(
    /// A dashboard session.
    SessionId
);
typed_id!(
    /// A message received by the inbound SMTP listener (contract §13).
    InboundMessageId
);
typed_id!(
    /// An inbound route: which mail of an inbound domain goes where.
    InboundRouteId
);
typed_id!(
    /// A connection lease of a delivery site (`Limits::admit_delivery`): held by one
    /// delivery in flight, then kept while its connection may sit idle.
    SiteLeaseId
);

/// What every typed id can do, for front-end code generic over the id types (path
/// extractors).
pub trait TypedId: Copy + fmt::Display + Send + 'static {
    /// See each type's `parse_or_none`.
    fn parse_or_none(text: &str) -> Self;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SystemRandom;

    #[test]
    fn ids_made_in_one_millisecond_sort_in_creation_order() {
        let at = chrono::Utc::now();
        let ids: Vec<MessageId> = (0..1000).map(|_| MessageId::new_at(at, &SystemRandom)).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn ids_stay_in_order_when_callers_with_other_clocks_interleave() {
        // Two manual clocks, as two tests running at once have: each one's ids, made at one
        // millisecond, still sort in the order they were made.
        let (a, b) = (chrono::Utc::now() - chrono::Duration::days(1), chrono::Utc::now() + chrono::Duration::days(1));
        let mut made_at_a = Vec::new();
        for _ in 0..500 {
            made_at_a.push(EventId::new_at(a, &SystemRandom));
            EventId::new_at(b, &SystemRandom);
        }
        assert!(made_at_a.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn ids_made_in_one_millisecond_are_not_their_neighbours_plus_a_small_step() {
        // Contract §8: the neighbours of an id someone holds must not be guessable from it.
        // Steps are random in 1..=2^48; one below 2^20 is a 2^-28 event.
        let at = chrono::Utc::now() + chrono::Duration::days(3);
        let ids: Vec<u128> = (0..1000).map(|_| MessageId::new_at(at, &SystemRandom).ulid().0).collect();
        let small = ids.windows(2).filter(|w| w[1] - w[0] < 1 << 20).count();
        assert_eq!(small, 0, "ids in one millisecond followed each other by small steps");
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "and they still sort in creation order");
    }

    #[test]
    fn a_full_millisecond_still_yields_ids_in_order() {
        // The first id's random part is one below the largest, so the next one in that
        // millisecond has no room for a random step and takes the next value.
        struct NearlyOnes;
        impl crate::random::Random for NearlyOnes {
            fn fill(&self, bytes: &mut [u8]) {
                bytes.fill(0xff);
                if let Some(last) = bytes.last_mut() {
                    *last = 0xfe;
                }
            }
        }
        let at = chrono::DateTime::UNIX_EPOCH + chrono::Duration::days(7);
        let first = MessageId::new_at(at, &NearlyOnes);
        let second = MessageId::new_at(at, &SystemRandom);
        assert!(second > first);
        assert_eq!(second.ulid().timestamp_ms(), first.ulid().timestamp_ms());
    }

    #[test]
    fn no_id_made_even_at_the_epoch_with_zero_randomness_is_none() {
        struct Zeros;
        impl crate::random::Random for Zeros {
            fn fill(&self, bytes: &mut [u8]) {
                bytes.fill(0);
            }
        }
        assert_ne!(MessageId::new_at(chrono::DateTime::UNIX_EPOCH, &Zeros), MessageId::NONE);
        assert_eq!(MessageId::parse_or_none("not-a-ulid"), MessageId::NONE);
    }
}
