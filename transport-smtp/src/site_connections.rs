//! The connection cap of one delivery site on this node (contract §12, "Destinations";
//! docs/decisions.md, "Direct delivery by site"): every connection open to any host of the
//! site, busy or idle, holds a [`SiteSeat`], and the site has as many seats as its
//! `connection_limit`.
//!
//! The seat lives in the [`Session`], so it is given back exactly when the connection is
//! closed: after QUIT, when the reaper drops an expired idle session, when a failed or
//! cancelled delivery drops its session. A sender that needs a new connection while every
//! seat is taken does not wait for an idle connection to expire: when another host of the
//! site has an idle connection, that one is closed and its seat taken over (an idle
//! connection to the *same* host is simply reused, see [`crate::pool::Slot::ready`]).

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, TryAcquireError};

use crate::pool::HostPool;

/// The right to keep one connection open to a site.
#[derive(Debug)]
pub(crate) struct SiteSeat {
    _permit: OwnedSemaphorePermit,
}

/// This node's connections to one site, over the pools of all its hosts (the opportunistic
/// ones and the MTA-STS `enforce` ones alike).
pub(crate) struct SiteConnections {
    /// One permit per connection the site allows.
    seats: Arc<Semaphore>,
    /// Woken whenever a session of the site is parked idle: a sender waiting for a seat may
    /// then reuse it (same host) or close it (another host).
    parked: Notify,
    /// The site's host pools. Weak: the pools own the site, not the other way round, so
    /// the site is dropped with its last pool.
    pools: Mutex<Vec<Weak<HostPool>>>,
}

/// What a sender needing a new connection got.
pub(crate) enum Seating {
    /// A seat: open the connection.
    Seat(SiteSeat),
    /// A session was parked meanwhile; look at the own pool again.
    Parked,
}

impl SiteConnections {
    /// A site allowing `connection_limit` connections at once.
    pub(crate) fn new(connection_limit: usize) -> Arc<Self> {
        Arc::new(Self {
            seats: Arc::new(Semaphore::new(connection_limit)),
            parked: Notify::new(),
            pools: Mutex::new(Vec::new()),
        })
    }

    /// Counts `pool` as one of the site's.
    pub(crate) fn register(&self, pool: &Arc<HostPool>) {
        let mut pools = self.pools();
        pools.retain(|pool| pool.strong_count() > 0);
        pools.push(Arc::downgrade(pool));
    }

    /// Tells waiting senders a session was parked idle.
    pub(crate) fn notify_parked(&self) {
        self.parked.notify_waiters();
    }

    /// A seat for a new connection to a host whose pool is `own`: a free one; else the seat
    /// of an idle connection to another host of the site, closed first; else waits for
    /// either a seat to be freed or a session to be parked ([`Seating::Parked`]: the caller
    /// looks for an idle session of its own host before asking again).
    pub(crate) async fn seat(&self, own: &HostPool) -> Seating {
        let parked = self.parked.notified();
        tokio::pin!(parked);
        // Registered before looking, so a session parked after the look still wakes us.
        parked.as_mut().enable();
        match Arc::clone(&self.seats).try_acquire_owned() {
            Ok(permit) => return Seating::Seat(SiteSeat { _permit: permit }),
            Err(TryAcquireError::Closed) => unreachable!("a site's semaphore is never closed"),
            Err(TryAcquireError::NoPermits) => {}
        }
        if let Some(seat) = self.close_idle_elsewhere(own).await {
            return Seating::Seat(seat);
        }
        tokio::select! {
            permit = Arc::clone(&self.seats).acquire_owned() => {
                Seating::Seat(SiteSeat { _permit: permit.expect("a site's semaphore is never closed") })
            }
            () = parked => Seating::Parked,
        }
    }

    /// Closes the longest-idle connection to another host of the site and hands over its
    /// seat; `None` when no other host has one.
    async fn close_idle_elsewhere(&self, own: &HostPool) -> Option<SiteSeat> {
        let pools: Vec<Arc<HostPool>> = self.pools().iter().filter_map(Weak::upgrade).collect();
        for pool in pools.iter().filter(|pool| !std::ptr::eq(Arc::as_ptr(pool), own)) {
            let Some(mut session) = pool.take_oldest_idle() else { continue };
            let seat = session.seat.take();
            tracing::debug!(remote = %session.remote, "closing an idle connection to make room for another host of its site");
            // QUIT before the seat is reused, so the site never has one connection too many.
            session.quit().await;
            match seat {
                Some(seat) => return Some(seat),
                // Not possible for a pool of a site; look further rather than trust it.
                None => continue,
            }
        }
        None
    }

    fn pools(&self) -> MutexGuard<'_, Vec<Weak<HostPool>>> {
        self.pools.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
