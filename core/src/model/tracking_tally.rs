//! How many opens and clicks a message keeps: every pixel load and every
//! followed link is answered, but only these become `Opened`/`Clicked` events (and webhook
//! deliveries), so replaying a link cannot grow the store without limit.
//!
//! - Opens: the first [`MAX_OPENS_KEPT`] per message.
//! - Clicks: the first click on each distinct link (destination URL), for up to
//!   [`MAX_LINKS_KEPT`] links, and besides those [`MAX_REPEAT_CLICKS_KEPT`] repeat clicks
//!   (a link clicked again) per message.
//!
//! - Besides those, each recipient's first open and first click are always kept, whatever
//!   the caps say: the activity counters (`crate::activity`) count a recipient's first
//!   open and click, as mailbox providers and senders count engagement, and a message to
//!   50 people must not lose the 11th reader's. A message has at most
//!   [`MAX_RECIPIENTS`] recipients, so this adds at most 50 of each.
//!
//! So a message holds at most 10 + 100 + 10 tracking events (plus 50 + 50 for the firsts of
//! its recipients) however often its links are fetched, and the first open and the first
//! click on every link (up to 100 links) are always among them. What is not kept is a
//! repeat: a mail client re-fetching the pixel, a recipient clicking a link again, or
//! someone replaying a link they were given.
//!
//! The tally lives on the message record, and a tracking event is written only if the
//! message did not change since it was read (`EventWrite::expected_last_event_id`), so
//! concurrent requests cannot each see room under the cap and all write.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{MAX_RECIPIENTS, TrackedUrl};

/// Most `Opened` events one message keeps.
pub const MAX_OPENS_KEPT: u32 = 10;
/// Most distinct links of one message whose first click is kept.
pub const MAX_LINKS_KEPT: usize = 100;
/// Most repeat clicks (on a link already clicked) one message keeps.
pub const MAX_REPEAT_CLICKS_KEPT: u32 = 10;
/// Most delays reported after delivery (`Deferred` events from DSNs) one message keeps.
pub const MAX_REPORTED_DELAYS_KEPT: u32 = 5;

/// What a message's timeline holds of opens and clicks, for [`MAX_OPENS_KEPT`] and its
/// siblings. Empty for messages stored before the tally existed; their old events are not
/// counted, which lets each such message keep up to the caps once more.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrackingTally {
    /// `Opened` events kept.
    #[serde(default)]
    pub opens: u32,
    /// The links clicked at least once, as [`link_digest`]s, in the order of their first click.
    #[serde(default)]
    pub clicked_links: Vec<u64>,
    /// `Clicked` events kept for links already in `clicked_links`.
    #[serde(default)]
    pub repeat_clicks: u32,
    /// `Deferred` events kept from delay reports received after delivery.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reported_delays: u32,
    /// The recipients (bit = position in the message's recipient list, 0 for a message
    /// without one) whose open was kept; zero for a message whose opens were all kept before
    /// these bits existed ([`Self::opened_by`]).
    #[serde(default, skip_serializing_if = "is_zero_bits")]
    pub opened_bits: u64,
    /// The recipients whose click was kept, as `opened_bits`.
    #[serde(default, skip_serializing_if = "is_zero_bits")]
    pub clicked_bits: u64,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_bits(n: &u64) -> bool {
    *n == 0
}

// One bit per recipient.
const _: () = assert!(MAX_RECIPIENTS <= 64);

fn bit(recipient: usize) -> u64 {
    1u64.checked_shl(u32::try_from(recipient).unwrap_or(u32::MAX)).unwrap_or(0)
}

/// An open or a click on a link, as [`TrackingTally`] counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engagement<'a> {
    /// The pixel was loaded.
    Open,
    /// A link to this URL was followed.
    Click(&'a TrackedUrl),
}

impl TrackingTally {
    /// Whether nothing was kept yet.
    pub fn is_empty(&self) -> bool {
        self.opens == 0
            && self.clicked_links.is_empty()
            && self.repeat_clicks == 0
            && self.reported_delays == 0
            && self.opened_bits == 0
            && self.clicked_bits == 0
    }

    /// Whether an open of `recipient` (its position in the recipient list, 0 without one)
    /// is already kept. A message whose opens were kept before the per-recipient bits
    /// existed has opens but no bits: it counts as opened by everyone, so that an open after
    /// an upgrade is not taken for a first one.
    pub fn opened_by(&self, recipient: usize) -> bool {
        self.opened_bits & bit(recipient) != 0 || (self.opens > 0 && self.opened_bits == 0)
    }

    /// Whether a click of `recipient` is already kept (as [`Self::opened_by`]).
    pub fn clicked_by(&self, recipient: usize) -> bool {
        let clicks_before_bits = !self.clicked_links.is_empty() && self.clicked_bits == 0;
        self.clicked_bits & bit(recipient) != 0 || clicks_before_bits
    }

    /// The tally after keeping one more reported delay, or `None` when the message already
    /// holds [`MAX_REPORTED_DELAYS_KEPT`].
    pub fn keep_reported_delay(&self) -> Option<Self> {
        (self.reported_delays < MAX_REPORTED_DELAYS_KEPT)
            .then(|| Self { reported_delays: self.reported_delays + 1, ..self.clone() })
    }

    /// The tally after keeping `engagement` of `recipient` (its position in the recipient
    /// list, 0 without one) as an event, or `None` when the message already holds as many
    /// of its kind as it keeps. A recipient's first open or click is always kept.
    pub fn keep(&self, engagement: Engagement<'_>, recipient: usize) -> Option<Self> {
        let mut next = self.clone();
        match engagement {
            Engagement::Open => {
                let first = !self.opened_by(recipient);
                if self.opens >= MAX_OPENS_KEPT && !first {
                    return None;
                }
                next.opens = next.opens.saturating_add(1);
                next.opened_bits |= bit(recipient);
            }
            Engagement::Click(url) => {
                let first = !self.clicked_by(recipient);
                let digest = link_digest(url);
                if self.clicked_links.contains(&digest) {
                    if self.repeat_clicks >= MAX_REPEAT_CLICKS_KEPT && !first {
                        return None;
                    }
                    next.repeat_clicks = next.repeat_clicks.saturating_add(1);
                } else {
                    if self.clicked_links.len() >= MAX_LINKS_KEPT && !first {
                        return None;
                    }
                    next.clicked_links.push(digest);
                }
                next.clicked_bits |= bit(recipient);
            }
        }
        Some(next)
    }
}

/// The first 8 bytes of the SHA-256 of a link's URL: enough to tell a message's links apart
/// (a collision only makes a first click count as a repeat) without storing the URLs again.
pub fn link_digest(url: &TrackedUrl) -> u64 {
    let hash = Sha256::digest(url.as_str().as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hash[..8]);
    u64::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn url(n: usize) -> TrackedUrl {
        TrackedUrl::parse(&format!("https://shop.example/item/{n}")).unwrap()
    }

    #[test]
    fn opens_are_kept_up_to_the_cap() {
        let mut tally = TrackingTally::default();
        for _ in 0..MAX_OPENS_KEPT {
            tally = tally.keep(Engagement::Open, 0).expect("room for another open");
        }
        assert_eq!(tally.opens, MAX_OPENS_KEPT);
        assert_eq!(tally.keep(Engagement::Open, 0), None);
    }

    #[test]
    fn the_first_click_on_each_link_is_kept_after_repeats_ran_out() {
        let mut tally = TrackingTally::default();
        let first = url(0);
        for _ in 0..=MAX_REPEAT_CLICKS_KEPT {
            tally = tally.keep(Engagement::Click(&first), 0).expect("first click and repeats");
        }
        assert_eq!(tally.keep(Engagement::Click(&first), 0), None, "repeats are used up");
        tally = tally.keep(Engagement::Click(&url(1)), 0).expect("another link's first click is kept");
        assert_eq!(tally.clicked_links.len(), 2);
        assert_eq!(tally.keep(Engagement::Open, 0).map(|t| t.opens), Some(1), "opens are counted apart");
    }

    #[test]
    fn first_clicks_stop_at_the_link_cap() {
        let mut tally = TrackingTally::default();
        for n in 0..MAX_LINKS_KEPT {
            tally = tally.keep(Engagement::Click(&url(n)), 0).expect("a new link");
        }
        assert_eq!(tally.keep(Engagement::Click(&url(MAX_LINKS_KEPT)), 0), None);
        assert!(tally.keep(Engagement::Click(&url(0)), 0).is_some(), "a repeat still has room");
    }

    #[test]
    fn each_recipients_first_open_and_click_is_kept_past_the_caps() {
        let mut tally = TrackingTally::default();
        for _ in 0..MAX_OPENS_KEPT {
            tally = tally.keep(Engagement::Open, 0).unwrap();
        }
        for _ in 0..=MAX_REPEAT_CLICKS_KEPT {
            tally = tally.keep(Engagement::Click(&url(0)), 0).unwrap();
        }
        assert_eq!(tally.keep(Engagement::Open, 0), None, "recipient 0 opened: a repeat past the cap");
        assert!(!tally.opened_by(7) && !tally.clicked_by(7));
        tally = tally.keep(Engagement::Open, 7).expect("recipient 7's first open");
        tally = tally.keep(Engagement::Click(&url(0)), 7).expect("recipient 7's first click");
        assert!(tally.opened_by(7) && tally.clicked_by(7) && !tally.opened_by(8));
        assert_eq!(tally.keep(Engagement::Open, 7), None, "its second open is a repeat");
        assert_eq!(tally.keep(Engagement::Click(&url(0)), 7), None, "its second click is a repeat");
    }

    #[test]
    fn opens_kept_before_the_recipient_bits_count_as_everyones() {
        let old: TrackingTally = serde_json::from_str(r#"{"opens":2,"clickedLinks":[5],"repeatClicks":0}"#).unwrap();
        assert!(old.opened_by(0) && old.opened_by(3) && old.clicked_by(0));
        assert!(!TrackingTally::default().opened_by(0), "nothing kept: nobody opened");
    }

    #[test]
    fn an_empty_tally_is_left_out_of_a_stored_message_and_reads_back() {
        let tally = TrackingTally::default().keep(Engagement::Click(&url(3)), 0).unwrap();
        let json = serde_json::to_string(&tally).unwrap();
        assert_eq!(serde_json::from_str::<TrackingTally>(&json).unwrap(), tally);
        assert_eq!(serde_json::from_str::<TrackingTally>("{}").unwrap(), TrackingTally::default());
    }

    proptest! {
        /// Whatever the sequence, a tally never admits more than the caps, admits every
        /// link's first click while under the link cap, and admits the first open.
        #[test]
        fn no_sequence_keeps_more_than_the_caps(seq in proptest::collection::vec(proptest::option::of(0usize..150), 0..600)) {
            let mut tally = TrackingTally::default();
            let (mut opens, mut clicks) = (0u32, 0usize);
            let mut seen = std::collections::HashSet::new();
            for step in seq {
                let target = step.map(url);
                let engagement = match &target {
                    None => Engagement::Open,
                    Some(u) => Engagement::Click(u),
                };
                let first_of_link = step.is_some_and(|n| !seen.contains(&n));
                match tally.keep(engagement, 0) {
                    Some(next) => {
                        tally = next;
                        match step {
                            None => opens += 1,
                            Some(n) => { clicks += 1; seen.insert(n); }
                        }
                    }
                    None => {
                        prop_assert!(step.is_some() || opens == MAX_OPENS_KEPT, "an open refused under the cap");
                        prop_assert!(!first_of_link || seen.len() == MAX_LINKS_KEPT, "a first click refused under the cap");
                    }
                }
            }
            prop_assert!(opens <= MAX_OPENS_KEPT);
            prop_assert!(clicks <= MAX_LINKS_KEPT + MAX_REPEAT_CLICKS_KEPT as usize);
        }
    }
}
