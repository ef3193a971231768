//! The accept loop: one task per session, the session places (in all and per client, with
//! the idlest session evicted at the cap), and a graceful stop.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::activity::{Need, Registry};
use crate::budget::DataBudget;
use crate::handler::InboundHandler;
use crate::message_rate::{MAX_TRACKED_CLIENTS, MessageRate};
use crate::places::{ClientShare, Place, Places};
use crate::reply;
use crate::session::{self, Shared};
use crate::settings::InboundSettings;
use crate::stats::{Counter, InboundStats};

/// How long a newcomer at the session cap waits for a place. Meanwhile the idlest session
/// is evicted every [`EVICTION_TICK`] (an evicted session says `421` and closes within a
/// second), since sessions busy when it arrived may stall while it waits.
const PLACE_WAIT: Duration = Duration::from_secs(10);
/// How often a waiting newcomer looks again for an idle session to evict.
const EVICTION_TICK: Duration = Duration::from_millis(250);

/// A bound SMTP listener, for reports or submission by its settings' [`Role`](crate::Role).
/// [`InboundListener::serve`] runs it.
pub struct InboundListener {
    listener: TcpListener,
    local_addr: SocketAddr,
    settings: Arc<InboundSettings>,
    handler: Arc<dyn InboundHandler>,
    stats: Arc<InboundStats>,
}

impl InboundListener {
    /// Binds `addr` (port 0 picks a free port). Fails with `InvalidInput` when the hostname
    /// is not one printable token, or a count or time limit is 0, or the data budget cannot
    /// hold one largest message.
    pub async fn bind(
        addr: SocketAddr,
        settings: InboundSettings,
        handler: Arc<dyn InboundHandler>,
    ) -> io::Result<Self> {
        if !settings.hostname_is_valid() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "hostname must be 1-255 printable ASCII characters",
            ));
        }
        if settings.max_connections == 0 || settings.max_connections_per_ip == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "max_connections and max_connections_per_ip must be at least 1",
            ));
        }
        if settings.max_messages_per_client == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "max_messages_per_client must be at least 1, or no message could ever be taken",
            ));
        }
        if settings.message_window.is_zero() || settings.max_session_time.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "message_window and max_session_time must not be zero",
            ));
        }
        if settings.max_data_bytes_in_flight < settings.max_message_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "max_data_bytes_in_flight must be at least max_message_bytes, or such a message could never be taken",
            ));
        }
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        Ok(Self { listener, local_addr, settings: Arc::new(settings), handler, stats: Arc::default() })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The counters, shared with the running listener.
    pub fn stats(&self) -> Arc<InboundStats> {
        Arc::clone(&self.stats)
    }

    /// Accepts connections until `shutdown` completes. Then it stops accepting, tells idle
    /// sessions `421` and closes them, lets sessions in the middle of a message finish for
    /// `shutdown_grace`, and drops whatever is left (those senders retry: no `250` was sent).
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) {
        let Self { listener, settings, handler, stats, .. } = self;
        let places = Places::new(settings.max_connections, settings.max_connections_per_ip);
        let queue = Arc::new(Semaphore::new(settings.max_connections));
        let (stop, stopping) = watch::channel(false);
        let shared = Shared {
            budget: DataBudget::new(settings.max_data_bytes_in_flight, settings.data_share()),
            registry: Registry::new(settings.evict_idle_after),
            rate: MessageRate::new(settings.max_messages_per_client, settings.message_window, MAX_TRACKED_CLIENTS),
            settings: Arc::clone(&settings),
            handler,
            stats: Arc::clone(&stats),
            stopping,
        };
        let mut sessions = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(finished) = sessions.join_next(), if !sessions.is_empty() => {
                    if let Err(error) = finished {
                        tracing::error!(%error, "inbound session task failed");
                    }
                }
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        // Replies are small writes each awaited by the client: without it
                        // Nagle holds one back until the previous one is acknowledged.
                        if let Err(error) = stream.set_nodelay(true) {
                            tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
                        }
                        let Some(share) = places.share(peer.ip()) else {
                            // Debug only: a line per refusal is what a flood would want.
                            tracing::debug!(%peer, "inbound connection refused: too many from its address");
                            refuse(&stats, &stream, reply::TOO_MANY_FROM_CLIENT);
                            continue;
                        };
                        let shared = shared.clone();
                        match places.try_place(share) {
                            Ok(place) => {
                                stats.bump(Counter::Connections);
                                sessions.spawn(session::run(stream, peer, shared, place));
                            }
                            Err(share) => match Arc::clone(&queue).try_acquire_owned() {
                                // At most `max_connections` newcomers wait, each on its
                                // client's share: the queue cannot hold more sockets than
                                // the sessions themselves.
                                Ok(queued) => {
                                    let places = places.clone();
                                    sessions.spawn(async move {
                                        match wait_for_place(&places, &shared, share).await {
                                            Ok(place) => {
                                                drop(queued);
                                                shared.stats.bump(Counter::Connections);
                                                session::run(stream, peer, shared, place).await;
                                            }
                                            Err(_) => refuse(&shared.stats, &stream, reply::TOO_MANY_CONNECTIONS),
                                        }
                                    });
                                }
                                Err(_) => {
                                    tracing::debug!(%peer, "inbound connection refused: too many sessions and waiting");
                                    refuse(&stats, &stream, reply::TOO_MANY_CONNECTIONS);
                                }
                            },
                        }
                    }
                    Err(error) => {
                        // Usually out of file descriptors: back off instead of spinning.
                        tracing::warn!(%error, "inbound accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
            }
        }
        drop(listener);
        let _ = stop.send(true);
        let drained =
            tokio::time::timeout(settings.shutdown_grace, async { while sessions.join_next().await.is_some() {} })
                .await;
        if drained.is_err() {
            tracing::warn!(left = sessions.len(), "inbound sessions dropped at the end of the shutdown grace period");
        }
        sessions.shutdown().await;
    }
}

/// Greets a connection with a `421` and lets it go. A fresh socket's send buffer is empty, so
/// this does not block and the accept loop never waits on a client it is refusing.
fn refuse(stats: &InboundStats, stream: &TcpStream, reply: &str) {
    stats.bump(Counter::RefusedConnections);
    let _ = stream.try_write(reply.as_bytes());
}

/// A place for a newcomer at the cap: the idlest session is evicted for it, again at every
/// tick, until a place is free or [`PLACE_WAIT`] is over.
async fn wait_for_place(places: &Places, shared: &Shared, mut share: ClientShare) -> Result<Place, ClientShare> {
    let deadline = tokio::time::Instant::now() + PLACE_WAIT;
    loop {
        shared.registry.evict_idlest(Need::Place);
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match places.place_within(share, left.min(EVICTION_TICK)).await {
            Err(back) if left > EVICTION_TICK => share = back,
            result => return result,
        }
    }
}
