//! Messages per client: one client (an IPv4 address or an IPv6 /64,
//! [`client_group`]) hands over at most `max_messages_per_client` messages in any
//! `message_window`, across all its sessions and connections.
//!
//! A transaction takes a [`MessageSlot`] at `MAIL`, before any data is read, so that
//! sessions running side by side cannot all pass the check and then all deliver. The slot
//! counts in the window only once the message is accepted (the `250` after the data); a
//! transaction that ends otherwise (`RSET`, a refused message, the client gone) gives it
//! back, so a sender whose mail we refuse does not use up its allowance on it.
//!
//! The window slides, in [`SLOTS`] steps: accepted messages are counted per step of a
//! sixteenth of the window, and a step counts for as long as any part of it is within the
//! window. So in any interval of one window no more than the limit are ever accepted, and a
//! message stops counting between one window and one window and a sixteenth after it was
//! accepted. A client takes at most `SLOTS + 1` counters whatever the limit.
//!
//! The table is bounded. A client with no open transaction and nothing left in the window
//! is dropped, at the latest one window after its last message (the table is swept once a
//! window, as messages come). At most `max_clients` are tracked: a newcomer to a full table
//! first sweeps it, then displaces the client whose last message is oldest, which thereby
//! starts afresh. That forgets a limit only when more clients than that sent mail within
//! one window, and gives nobody more than they could get from another /64 anyway; refusing
//! newcomers instead would let a flood of fresh /64s lock every new sender out. Clients in
//! the middle of a transaction are never displaced, so the table grows past `max_clients`
//! only while every client in it has one open: it never holds more clients than the larger
//! of `max_clients` and the most transactions ever open at once (one per session).
//!
//! [`client_group`]: tidings_core::client_group::client_group

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tidings_core::client_group::client_group;

/// Steps per window.
const SLOTS: u64 = 16;

/// How many clients a listener tracks at most. Each takes a few hundred bytes, so the table
/// stays within a few MiB; far more distinct clients than a transactional mail service's
/// inbound sees in a window.
pub(crate) const MAX_TRACKED_CLIENTS: usize = 10_000;

/// The per-client message counts of one listener.
#[derive(Debug)]
pub(crate) struct MessageRate {
    max: usize,
    /// One step of the window, at least a nanosecond.
    step: Duration,
    max_clients: usize,
    epoch: Instant,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    clients: HashMap<IpAddr, Client>,
    /// The step from which the next sweep is due.
    next_sweep: u64,
}

/// One client's messages.
#[derive(Debug, Default)]
struct Client {
    /// Accepted messages per step, oldest step first, only steps still within the window.
    accepted: VecDeque<(u64, usize)>,
    /// Transactions holding a slot, their messages not yet accepted.
    open: usize,
}

impl Client {
    /// Forgets the steps wholly before the window that ends in step `now`.
    fn expire(&mut self, now: u64) {
        let first = now.saturating_sub(SLOTS);
        while self.accepted.front().is_some_and(|&(step, _)| step < first) {
            self.accepted.pop_front();
        }
    }

    /// Messages counted against the client in the window ending in step `now`.
    fn used(&mut self, now: u64) -> usize {
        self.expire(now);
        self.accepted.iter().map(|&(_, count)| count).fold(self.open, usize::saturating_add)
    }

    fn is_idle(&mut self, now: u64) -> bool {
        self.expire(now);
        self.open == 0 && self.accepted.is_empty()
    }
}

/// One message's place in its client's allowance, from `MAIL` to the end of the
/// transaction; given back when dropped unless [`spent`](Self::spend).
#[derive(Debug)]
pub(crate) struct MessageSlot {
    rate: Arc<MessageRate>,
    client: IpAddr,
}

impl MessageRate {
    /// At most `max` messages per client in any `window` (not zero), tracking at most
    /// `max_clients` clients (see the module doc).
    pub(crate) fn new(max: usize, window: Duration, max_clients: usize) -> Arc<Self> {
        let step = (window / u32::try_from(SLOTS).unwrap_or(u32::MAX)).max(Duration::from_nanos(1));
        Arc::new(Self {
            max,
            step,
            max_clients: max_clients.max(1),
            epoch: Instant::now(),
            state: Mutex::new(State { clients: HashMap::new(), next_sweep: 0 }),
        })
    }

    /// A slot for one more message from `ip`'s client at `now`, or `None` when its messages
    /// accepted within the window and its open transactions make the limit.
    pub(crate) fn take(self: &Arc<Self>, ip: IpAddr, now: Instant) -> Option<MessageSlot> {
        let client = client_group(ip);
        let now = self.step_of(now);
        let mut state = self.lock();
        if now >= state.next_sweep {
            state.clients.retain(|_, client| !client.is_idle(now));
            state.next_sweep = now.saturating_add(SLOTS);
        }
        if !state.clients.contains_key(&client) && state.clients.len() >= self.max_clients {
            self.make_room(&mut state, now);
        }
        let entry = state.clients.entry(client).or_default();
        if entry.used(now) >= self.max {
            if entry.is_idle(now) {
                state.clients.remove(&client);
            }
            return None;
        }
        entry.open += 1;
        Some(MessageSlot { rate: Arc::clone(self), client })
    }

    /// Drops idle clients, and if that frees nothing, the client without an open
    /// transaction whose last message is oldest.
    fn make_room(&self, state: &mut State, now: u64) {
        state.clients.retain(|_, client| !client.is_idle(now));
        state.next_sweep = now.saturating_add(SLOTS);
        if state.clients.len() < self.max_clients {
            return;
        }
        let oldest = state
            .clients
            .iter()
            .filter(|(_, client)| client.open == 0)
            .filter_map(|(ip, client)| client.accepted.back().map(|&(step, _)| (step, *ip)))
            .min();
        if let Some((_, ip)) = oldest {
            state.clients.remove(&ip);
        }
    }

    /// The step `now` falls in.
    fn step_of(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.epoch).as_nanos() / self.step.as_nanos();
        u64::try_from(elapsed).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change is whole between statements: a panic elsewhere leaves nothing half-done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Clients tracked now.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.lock().clients.len()
    }
}

impl MessageSlot {
    /// The message was accepted at `now`: it counts in its client's window from then on.
    pub(crate) fn spend(self, now: Instant) {
        let now = self.rate.step_of(now);
        let mut state = self.rate.lock();
        // Dropping `self` below gives the open transaction back.
        let entry = state.clients.entry(self.client).or_default();
        // A clock read before another session's keeps the steps in order: a step later
        // counts no less.
        let step = entry.accepted.back().map_or(now, |&(last, _)| last.max(now));
        match entry.accepted.back_mut() {
            Some((last, count)) if *last == step => *count = count.saturating_add(1),
            _ => entry.accepted.push_back((step, 1)),
        }
        drop(state);
    }
}

impl Drop for MessageSlot {
    fn drop(&mut self) {
        let mut state = self.rate.lock();
        if let Some(entry) = state.clients.get_mut(&self.client) {
            entry.open = entry.open.saturating_sub(1);
            if entry.open == 0 && entry.accepted.is_empty() {
                state.clients.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const WINDOW: Duration = Duration::from_secs(60);

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    /// Sends one accepted message from `client` at `at`; `false` when refused.
    fn send(rate: &Arc<MessageRate>, client: &str, at: Instant) -> bool {
        rate.take(ip(client), at).map(|slot| slot.spend(at)).is_some()
    }

    #[test]
    fn a_client_gets_its_messages_per_window_and_others_theirs() {
        let rate = MessageRate::new(3, WINDOW, 100);
        let start = rate.epoch;
        for i in 0..3 {
            assert!(send(&rate, "192.0.2.1", start + Duration::from_secs(i)), "message {i}");
        }

        assert!(!send(&rate, "192.0.2.1", start + Duration::from_secs(30)), "a fourth within the window");
        assert!(send(&rate, "192.0.2.2", start + Duration::from_secs(30)), "another client");
        assert!(!send(&rate, "192.0.2.1", start + WINDOW - Duration::from_millis(1)), "still the window");
        // The first step stops counting at most a step after a window.
        assert!(send(&rate, "192.0.2.1", start + WINDOW + WINDOW / 16));
    }

    #[test]
    fn the_addresses_of_one_ipv6_64_share_an_allowance() {
        let rate = MessageRate::new(2, WINDOW, 100);
        let now = rate.epoch;
        assert!(send(&rate, "2001:db8:5:6::1", now));
        assert!(send(&rate, "2001:db8:5:6:ffff::2", now));
        assert!(!send(&rate, "2001:db8:5:6::3", now));
        assert!(send(&rate, "2001:db8:5:7::1", now));
    }

    #[test]
    fn open_transactions_count_and_a_slot_not_spent_comes_back() {
        let rate = MessageRate::new(2, WINDOW, 100);
        let now = rate.epoch;
        let first = rate.take(ip("192.0.2.1"), now).expect("a first");
        let second = rate.take(ip("192.0.2.1"), now).expect("a second, side by side");
        assert!(rate.take(ip("192.0.2.1"), now).is_none(), "two open transactions make the limit");

        drop(first);
        let third = rate.take(ip("192.0.2.1"), now).expect("the refused message gave its slot back");
        second.spend(now);
        third.spend(now);
        assert!(rate.take(ip("192.0.2.1"), now).is_none());
    }

    #[test]
    fn a_client_is_forgotten_when_it_has_nothing_left_in_the_window() {
        let rate = MessageRate::new(5, WINDOW, 100);
        let now = rate.epoch;
        drop(rate.take(ip("192.0.2.1"), now).unwrap());
        assert_eq!(rate.tracked(), 0, "a transaction that took nothing leaves nothing");

        assert!(send(&rate, "192.0.2.1", now));
        assert!(send(&rate, "192.0.2.2", now));
        assert_eq!(rate.tracked(), 2);
        let later = now + 3 * WINDOW;
        assert!(send(&rate, "192.0.2.3", later));
        assert_eq!(rate.tracked(), 1, "the idle clients were swept");
    }

    #[test]
    fn a_full_table_displaces_the_client_whose_last_message_is_oldest_never_an_open_one() {
        let rate = MessageRate::new(1, WINDOW, 3);
        let now = rate.epoch;
        let open = rate.take(ip("192.0.2.1"), now).unwrap();
        assert!(send(&rate, "192.0.2.2", now));
        assert!(send(&rate, "192.0.2.3", now + Duration::from_secs(10)));

        assert!(send(&rate, "192.0.2.4", now + Duration::from_secs(20)), "a newcomer to a full table");

        assert_eq!(rate.tracked(), 3);
        let later = now + Duration::from_secs(20);
        assert!(!send(&rate, "192.0.2.3", later) && !send(&rate, "192.0.2.4", later), "the others were kept");
        assert!(rate.take(ip("192.0.2.1"), later).is_none(), "the open one too");
        assert!(send(&rate, "192.0.2.2", later), "the oldest was forgotten");
        drop(open);
    }

    #[test]
    fn clients_all_in_a_transaction_may_pass_the_cap_by_their_transactions_only() {
        let rate = MessageRate::new(1, WINDOW, 2);
        let now = rate.epoch;
        let slots: Vec<_> = (1..=4).map(|i| rate.take(ip(&format!("192.0.2.{i}")), now).unwrap()).collect();
        assert_eq!(rate.tracked(), 4);
        for slot in slots {
            slot.spend(now);
        }

        assert!(send(&rate, "192.0.2.5", now));
        assert_eq!(rate.tracked(), 4, "a newcomer displaces one that is done");
        drop(rate.take(ip("192.0.2.6"), now + 2 * WINDOW));
        assert_eq!(rate.tracked(), 0);
    }

    /// One step of a random run: which client, what it does, and how far time moves.
    #[derive(Debug, Clone)]
    enum Op {
        /// `MAIL` from client `n`, accepted or dropped later.
        Take(u8),
        /// The open transaction at this index (modulo) is accepted.
        Spend(usize),
        /// The open transaction at this index (modulo) ends without a message.
        Drop(usize),
        /// Time passes, in milliseconds.
        Wait(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..12).prop_map(Op::Take),
            3 => any::<usize>().prop_map(Op::Spend),
            1 => any::<usize>().prop_map(Op::Drop),
            2 => (0u16..400).prop_map(Op::Wait),
        ]
    }

    proptest! {
        /// With a table big enough for every client, no interval of one window ever holds
        /// more accepted messages of one client than the limit; and whatever the table's
        /// size, it holds no more clients than its cap or the most transactions open at once.
        #[test]
        fn no_window_holds_more_than_the_limit_and_the_table_stays_bounded(
            ops in proptest::collection::vec(op(), 1..300),
            max in 1usize..5,
            cap in 1usize..16,
        ) {
            let window = Duration::from_millis(1000);
            let exact = MessageRate::new(max, window, 100);
            let small = MessageRate::new(max, window, cap);
            let mut now = exact.epoch;
            let mut open: Vec<(u8, MessageSlot, Option<MessageSlot>)> = Vec::new();
            let mut accepted: Vec<(u8, Instant)> = Vec::new();
            let mut most_open = 0;
            for op in ops {
                match op {
                    Op::Take(client) => {
                        let address = IpAddr::from([192, 0, 2, client]);
                        if let Some(slot) = exact.take(address, now) {
                            open.push((client, slot, small.take(address, now)));
                        } else if let Some(slot) = small.take(address, now) {
                            drop(slot);
                        }
                    }
                    Op::Spend(i) if !open.is_empty() => {
                        let (client, slot, other) = open.remove(i % open.len());
                        slot.spend(now);
                        if let Some(other) = other {
                            other.spend(now);
                        }
                        accepted.push((client, now));
                    }
                    Op::Drop(i) if !open.is_empty() => {
                        open.remove(i % open.len());
                    }
                    Op::Wait(ms) => now += Duration::from_millis(ms.into()),
                    Op::Spend(_) | Op::Drop(_) => {}
                }
                most_open = most_open.max(open.iter().filter(|(_, _, other)| other.is_some()).count());
                prop_assert!(small.tracked() <= cap.max(most_open), "{} tracked", small.tracked());
            }
            for &(client, at) in &accepted {
                let within = accepted.iter().filter(|&&(c, t)| c == client && t >= at && t < at + window).count();
                prop_assert!(within <= max, "client {client}: {within} within a window from {at:?}");
            }
            drop(open);
            let later = now + 3 * window;
            prop_assert!(exact.take(IpAddr::from([198, 51, 100, 1]), later).is_some());
            prop_assert_eq!(exact.tracked(), 0, "every client idle for a window is forgotten");
        }
    }
}
