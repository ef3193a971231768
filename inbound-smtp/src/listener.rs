//! The accept loop: one task per session, a semaphore for the connection limit, and a
//! graceful stop.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::handler::InboundHandler;
use crate::reply;
use crate::session::{self, Shared};
use crate::settings::InboundSettings;
use crate::stats::{Counter, InboundStats};

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
    /// is not one printable token or `max_connections` is 0.
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
        if settings.max_connections == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "max_connections must be at least 1"));
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
        let permits = Arc::new(Semaphore::new(settings.max_connections));
        let (stop, stopping) = watch::channel(false);
        let shared = Shared { settings: Arc::clone(&settings), handler, stats: Arc::clone(&stats), stopping };
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
                    Ok((stream, peer)) => match Arc::clone(&permits).try_acquire_owned() {
                        Ok(permit) => {
                            stats.bump(Counter::Connections);
                            let shared = shared.clone();
                            sessions.spawn(async move {
                                session::run(stream, peer, shared).await;
                                drop(permit);
                            });
                        }
                        Err(_) => {
                            stats.bump(Counter::RefusedConnections);
                            tracing::warn!(%peer, "inbound connection refused: too many sessions");
                            // A fresh socket's send buffer is empty, so this does not block
                            // and the accept loop never waits on a client it is refusing.
                            let _ = stream.try_write(reply::TOO_MANY_CONNECTIONS.as_bytes());
                        }
                    },
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
