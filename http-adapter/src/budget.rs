//! The memory budget: every byte a client can make the server hold for a request (a body
//! being received and parsed, a large response waiting to be read) is counted here, shared
//! fairly and taken back from slow holders (docs/decisions.md, "Exhaustion").
//!
//! - **One budget for the whole process** (`TIDINGS_MAX_BODY_BYTES_IN_FLIGHT`), counted in
//!   KiB, which the API and the dashboard share.
//! - **A share per owner.** An owner is the workspace of the key or session making the
//!   request, or, without one, the client's address ([`Owner`]). One owner may hold at most
//!   [`MemoryBudget::share`]: half the budget, and never less than the largest body, so a
//!   single key (or address) can never hold what others need.
//! - **Slow holders lose their place.** When a claim does not fit, uploads still being received
//!   that are *slow* are cancelled to make room, slowest first: no byte for [`STALL`], or
//!   (after [`GRACE`]) a rate at which the declared body would not arrive within the request
//!   timeout. A cancelled upload is answered 503 at once and its bytes go back to the budget.
//!   Responses (a message's HTML, an `.eml` stream) are never cancelled: their bytes are given
//!   back when the response is dropped, which the connection's idle timer bounds.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tidings_core::client_group::client_group;
use tidings_core::ids::WorkspaceId;
use tokio::sync::Notify;

/// An upload younger than this is never judged slow: its rate is not known yet.
pub const GRACE: Duration = Duration::from_secs(1);
/// An upload with no byte for this long is slow, whatever its rate so far.
pub const STALL: Duration = Duration::from_secs(1);

/// Who a claim is counted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Owner {
    /// A request without a key or session, by client ([`Owner::client`]: the address the
    /// failed-auth throttle counts, behind a trusted proxy the forwarded one, grouped as it
    /// groups them).
    Client(IpAddr),
    /// A request made with a key or a dashboard session of this workspace.
    Workspace(WorkspaceId),
}

impl std::fmt::Display for Owner {
    /// `client 192.0.2.7` or `workspace 01J…`, as logs name it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Client(ip) => write!(f, "client {ip}"),
            Self::Workspace(id) => write!(f, "workspace {id}"),
        }
    }
}

impl Owner {
    /// The owner of a keyless request from `ip`: its [`client_group`], so every address of an
    /// IPv6 /64 shares one share, as it shares one allowance of failed authentications.
    pub fn client(ip: IpAddr) -> Self {
        Self::Client(client_group(ip))
    }
}

/// Why a claim was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The owner holds its whole share already (its other requests must finish first).
    OverShare,
    /// The budget is full of other owners' requests, none of them slow.
    Full,
}

/// The process's budget of request memory; clones share it.
#[derive(Debug, Clone)]
pub struct MemoryBudget(Arc<Ledger>);

#[derive(Debug)]
struct Ledger {
    total: usize,
    share: usize,
    /// An upload that would take longer than this at its rate is slow.
    deadline: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    used: usize,
    by_owner: HashMap<Owner, usize>,
    holders: HashMap<u64, Holder>,
    next_id: u64,
}

#[derive(Debug)]
struct Holder {
    owner: Owner,
    kib: usize,
    upload: Option<Upload>,
    cancelled: Arc<Cancel>,
}

#[derive(Debug, Clone, Copy)]
struct Upload {
    started: Instant,
    declared: Option<usize>,
    received: usize,
    last_byte: Instant,
}

impl Upload {
    /// Bytes per second so far (0 before the first byte).
    fn rate(&self, now: Instant) -> f64 {
        self.received as f64 / now.duration_since(self.started).as_secs_f64().max(1e-3)
    }

    /// Whether this upload may be cancelled for someone else.
    fn is_slow(&self, now: Instant, deadline: Duration) -> bool {
        let elapsed = now.duration_since(self.started);
        if elapsed < GRACE {
            return false;
        }
        if now.duration_since(self.last_byte) >= STALL {
            return true;
        }
        // At the rate so far, the whole declared body arrives after the deadline.
        self.declared.is_some_and(|declared| {
            self.received < declared && (declared as f64) > self.rate(now) * deadline.as_secs_f64()
        })
    }
}

#[derive(Debug, Default)]
struct Cancel {
    done: AtomicBool,
    notify: Notify,
}

/// Bytes held in the budget by one request (or response); given back when dropped.
#[derive(Debug)]
pub struct Claim {
    ledger: Arc<Ledger>,
    id: u64,
    cancelled: Arc<Cancel>,
}

impl MemoryBudget {
    /// A budget of `total` bytes in which one owner holds at most half, and at least
    /// `largest` (the largest body a request may have); `deadline` is the request timeout,
    /// by which a slow upload is judged.
    pub fn new(total: usize, largest: usize, deadline: Duration) -> Self {
        let total = kib(total);
        let share = (total / 2).max(kib(largest)).min(total);
        Self(Arc::new(Ledger { total, share, deadline, state: Mutex::new(State::default()) }))
    }

    /// The most one owner may hold, in bytes.
    pub fn share(&self) -> usize {
        self.0.share * 1024
    }

    /// Bytes held now, all owners together.
    pub fn used(&self) -> usize {
        self.0.lock().used * 1024
    }

    /// A claim of `bytes` for a response (never cancelled).
    pub fn hold(&self, owner: Owner, bytes: usize) -> Result<Claim, Refusal> {
        let claim = self.claim(owner, None);
        claim.take(bytes)?;
        Ok(claim)
    }

    /// An empty claim for an upload of `declared` bytes (if said) that is starting now; grow
    /// it with [`Claim::take`], report arrivals with [`Claim::received`].
    pub fn upload(&self, owner: Owner, declared: Option<usize>) -> Claim {
        let now = Instant::now();
        self.claim(owner, Some(Upload { started: now, declared, received: 0, last_byte: now }))
    }

    fn claim(&self, owner: Owner, upload: Option<Upload>) -> Claim {
        let cancelled = Arc::new(Cancel::default());
        let mut state = self.0.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.holders.insert(id, Holder { owner, kib: 0, upload, cancelled: Arc::clone(&cancelled) });
        Claim { ledger: Arc::clone(&self.0), id, cancelled }
    }
}

impl Ledger {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cancels slow uploads (not `except`), slowest first, among those `eligible`, until
    /// `fits` holds; whether it does.
    fn make_room(
        &self,
        state: &mut State,
        except: u64,
        eligible: impl Fn(&Holder) -> bool,
        fits: impl Fn(&State) -> bool,
    ) -> bool {
        if fits(state) {
            return true;
        }
        let now = Instant::now();
        let mut slow: Vec<(f64, u64)> = state
            .holders
            .iter()
            .filter(|(id, h)| **id != except && eligible(h))
            .filter_map(|(id, h)| h.upload.filter(|u| u.is_slow(now, self.deadline)).map(|u| (u.rate(now), *id)))
            .collect();
        slow.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (_, id) in slow {
            if let Some(holder) = state.holders.remove(&id) {
                release(state, &holder);
                holder.cancelled.done.store(true, Ordering::Release);
                holder.cancelled.notify.notify_waiters();
                tracing::debug!(owner = %holder.owner, kib = holder.kib, "slow upload cancelled to make room");
            }
            if fits(state) {
                return true;
            }
        }
        false
    }
}

fn release(state: &mut State, holder: &Holder) {
    state.used -= holder.kib;
    if let Some(held) = state.by_owner.get_mut(&holder.owner) {
        *held -= holder.kib;
        if *held == 0 {
            state.by_owner.remove(&holder.owner);
        }
    }
}

impl Claim {
    /// Takes `bytes` more; refused when the owner's share or the budget cannot hold them
    /// even after slow uploads made room.
    pub fn take(&self, bytes: usize) -> Result<(), Refusal> {
        let n = kib(bytes);
        if n == 0 {
            return Ok(());
        }
        let ledger = &*self.ledger;
        let mut state = ledger.lock();
        let Some(owner) = state.holders.get(&self.id).map(|h| h.owner) else {
            // Cancelled already: its reader is about to stop.
            return Err(Refusal::Full);
        };
        let held = |s: &State| s.by_owner.get(&owner).copied().unwrap_or(0);
        if n > ledger.share
            || !ledger.make_room(&mut state, self.id, |h| h.owner == owner, |s| held(s) + n <= ledger.share)
        {
            return Err(Refusal::OverShare);
        }
        if !ledger.make_room(&mut state, self.id, |_| true, |s| s.used + n <= ledger.total) {
            return Err(Refusal::Full);
        }
        state.used += n;
        *state.by_owner.entry(owner).or_insert(0) += n;
        if let Some(holder) = state.holders.get_mut(&self.id) {
            holder.kib += n;
        }
        Ok(())
    }

    /// `bytes` of the upload arrived.
    pub fn received(&self, bytes: usize) {
        let mut state = self.ledger.lock();
        if let Some(upload) = state.holders.get_mut(&self.id).and_then(|h| h.upload.as_mut()) {
            upload.received += bytes;
            upload.last_byte = Instant::now();
        }
    }

    /// The upload is complete: from now on the claim is held until the request is answered
    /// and is never cancelled.
    pub fn finished_receiving(&self) {
        if let Some(holder) = self.ledger.lock().holders.get_mut(&self.id) {
            holder.upload = None;
        }
    }

    /// Completes when the claim is cancelled to make room for another request.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.cancelled.notify.notified();
            if self.cancelled.done.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut state = self.ledger.lock();
        if let Some(holder) = state.holders.remove(&self.id) {
            release(&mut state, &holder);
        }
    }
}

fn kib(bytes: usize) -> usize {
    bytes.div_ceil(1024)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const MIB: usize = 1024 * 1024;

    fn client(last: u8) -> Owner {
        Owner::Client(IpAddr::V4(Ipv4Addr::new(127, 0, 0, last)))
    }

    fn budget() -> MemoryBudget {
        MemoryBudget::new(100 * MIB, 10 * MIB, Duration::from_secs(30))
    }

    #[test]
    fn one_owner_holds_at_most_its_share_and_others_get_the_rest() {
        let budget = budget();
        assert_eq!(budget.share(), 50 * MIB);
        let first = budget.hold(client(1), 30 * MIB).unwrap();
        let _second = budget.hold(client(1), 20 * MIB).unwrap();
        assert_eq!(budget.hold(client(1), 1).unwrap_err(), Refusal::OverShare);
        let other = budget.hold(client(2), 50 * MIB).unwrap();
        assert_eq!(budget.hold(client(3), 1).unwrap_err(), Refusal::Full);
        assert_eq!(budget.used(), 100 * MIB);
        drop(first);
        drop(other);
        assert_eq!(budget.used(), 20 * MIB);
        budget.hold(client(1), 30 * MIB).unwrap();
    }

    #[test]
    fn the_addresses_of_one_ipv6_64_hold_one_share() {
        let budget = budget();
        let _first = budget.hold(Owner::client("2001:db8::1".parse().unwrap()), 50 * MIB).unwrap();
        let next = budget.hold(Owner::client("2001:db8::2".parse().unwrap()), 1);
        assert_eq!(next.unwrap_err(), Refusal::OverShare);
        budget.hold(Owner::client("2001:db8:0:1::1".parse().unwrap()), MIB).expect("another /64");
    }

    #[test]
    fn the_share_is_never_below_the_largest_body() {
        let budget = MemoryBudget::new(56 * MIB, 56 * MIB, Duration::from_secs(30));
        assert_eq!(budget.share(), 56 * MIB);
        budget.hold(client(1), 56 * MIB).unwrap();
    }

    #[tokio::test]
    async fn fresh_uploads_are_kept_and_stalled_ones_make_room_slowest_first() {
        let budget = budget();
        let young = budget.upload(client(1), Some(40 * MIB));
        young.take(40 * MIB).unwrap();
        let _second = budget.hold(client(2), 40 * MIB).expect("60 MiB were free");
        assert_eq!(budget.hold(client(3), 40 * MIB).unwrap_err(), Refusal::Full, "a young upload is not slow");

        // Make both uploads old: one stalled with nothing, one stalled after some bytes.
        let stalled = budget.upload(client(4), Some(10 * MIB));
        stalled.take(10 * MIB).unwrap();
        stalled.received(MIB);
        {
            let mut state = budget.0.lock();
            let past = Instant::now() - Duration::from_secs(5);
            for holder in state.holders.values_mut() {
                if let Some(u) = holder.upload.as_mut() {
                    u.started = past;
                    u.last_byte = past;
                }
            }
        }
        // 10 MiB are free; 15 more need one cancelled: the slowest, `young` (0 bytes), goes
        // first, and that is enough.
        let fresh = budget.hold(client(5), 25 * MIB).unwrap();
        tokio::time::timeout(Duration::from_secs(1), young.cancelled()).await.expect("the slowest cancelled");
        assert!(!stalled.cancelled.done.load(Ordering::Acquire), "one was enough");
        assert_eq!(young.take(1).unwrap_err(), Refusal::Full, "a cancelled claim takes nothing more");
        drop(young);
        drop(fresh);
        assert_eq!(budget.used(), 50 * MIB);
    }

    #[test]
    fn an_upload_too_slow_to_finish_in_time_is_slow_and_a_finished_one_never() {
        let now = Instant::now();
        let started = now - Duration::from_secs(2);
        let upload = |received| Upload { started, declared: Some(60 * MIB), received, last_byte: now };
        // 1 MiB in 2 s: 60 MiB take two minutes, beyond a 30 s deadline.
        assert!(upload(MIB).is_slow(now, Duration::from_secs(30)));
        // 10 MiB in 2 s: 12 s for the whole.
        assert!(!upload(10 * MIB).is_slow(now, Duration::from_secs(30)));

        let budget = budget();
        let done = budget.upload(client(1), Some(50 * MIB));
        done.take(50 * MIB).unwrap();
        done.finished_receiving();
        budget.0.lock().holders.values_mut().for_each(|h| assert!(h.upload.is_none()));
        let _other = budget.hold(client(2), 50 * MIB).unwrap();
        assert_eq!(budget.hold(client(3), MIB).unwrap_err(), Refusal::Full);
    }

    #[test]
    fn an_owner_over_its_share_cancels_its_own_slow_uploads_only() {
        let budget = budget();
        let own = budget.upload(client(1), Some(50 * MIB));
        own.take(50 * MIB).unwrap();
        let theirs = budget.upload(client(2), Some(50 * MIB));
        theirs.take(50 * MIB).unwrap();
        let past = Instant::now() - Duration::from_secs(5);
        for holder in budget.0.lock().holders.values_mut() {
            holder.upload.as_mut().unwrap().started = past;
            holder.upload.as_mut().unwrap().last_byte = past;
        }
        let again = budget.hold(client(1), 10 * MIB).unwrap();
        assert!(own.cancelled.done.load(Ordering::Acquire));
        assert!(!theirs.cancelled.done.load(Ordering::Acquire));
        drop(again);
    }
}
