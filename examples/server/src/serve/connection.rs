//! One connection's life after the TLS handshake: served by hyper until the client closes
//! it, until it has had no request in flight for the idle timeout (shorter while the server
//! is short of connections or descriptors), or until shutdown. hyper closes idle HTTP/1
//! connections itself (its header read timeout also runs between requests) but keeps an
//! HTTP/2 connection open for as long as the client does, even one that never sends a
//! request: the idle timer here closes both. Under pressure, a connection whose requests are
//! all waiting for their bodies, which arrive slower than [`IdlePolicy::min_upload_rate`],
//! is closed too: a slow client must not keep a place that a fresh one needs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tidings_http::ConnectionUploads;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// When an idle connection is closed.
#[derive(Debug, Clone, Copy)]
pub struct IdlePolicy {
    /// No request in flight for this long: closed.
    pub timeout: Duration,
    /// The same while the server is under pressure (at its connection cap, or out of file
    /// descriptors).
    pub under_pressure: Duration,
    /// How long an idle connection being closed may take over it (the HTTP/2 GOAWAY
    /// exchange) before it is dropped; under pressure at most `under_pressure`.
    pub close_grace: Duration,
    /// How long a connection may take to finish its in-flight requests on shutdown.
    pub shutdown_grace: Duration,
    /// Under pressure, body bytes a connection whose requests all wait for their bodies must
    /// receive per `under_pressure` period to keep its place.
    pub min_upload_rate: u64,
}

/// How many requests a connection has in flight; a request counts from the moment hyper
/// hands it to the service until its response is ready.
#[derive(Debug, Clone, Default)]
pub struct Activity(Arc<ActivityInner>);

#[derive(Debug, Default)]
struct ActivityInner {
    in_flight: AtomicUsize,
    changed: Notify,
}

/// A request in flight; dropping it ends it.
#[derive(Debug)]
pub struct Busy(Arc<ActivityInner>);

impl Activity {
    /// Marks a request as started.
    pub fn begin(&self) -> Busy {
        self.0.in_flight.fetch_add(1, Ordering::AcqRel);
        self.0.changed.notify_one();
        Busy(Arc::clone(&self.0))
    }

    fn in_flight(&self) -> usize {
        self.0.in_flight.load(Ordering::Acquire)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_one();
    }
}

/// Why a connection ended.
#[derive(Debug)]
pub enum Ended<E> {
    /// The client closed it, or it failed; hyper's result.
    Finished(Result<(), E>),
    /// Closed by the server after being idle.
    Idle,
    /// Closed by the server for shutdown.
    Shutdown,
    /// Closed by the server (idle or shutdown) and dropped when it did not finish in time.
    Dropped,
}

/// Drives `conn` (a hyper connection; `graceful` starts its graceful shutdown) to its end
/// under `policy`. `uploads` are its requests' bodies being received; `pressure` says whether
/// the server is short of connections; `shutdown` becomes true when the server stops.
pub async fn drive<C, E>(
    conn: C,
    graceful: impl FnOnce(Pin<&mut C>),
    activity: &Activity,
    uploads: &ConnectionUploads,
    policy: IdlePolicy,
    mut pressure: watch::Receiver<bool>,
    mut shutdown: watch::Receiver<bool>,
) -> Ended<E>
where
    C: Future<Output = Result<(), E>>,
{
    tokio::pin!(conn);
    let mut idle_since = Instant::now();
    // Under pressure: when the body bytes received were last counted, and how many.
    let mut sample: Option<(Instant, u64)> = None;
    let shutting_down = loop {
        let pressed = *pressure.borrow();
        let limit = if pressed { policy.under_pressure } else { policy.timeout };
        let deadline = (activity.in_flight() == 0).then_some(idle_since + limit);
        if !pressed {
            sample = None;
        } else if sample.is_none() {
            sample = Some((Instant::now(), uploads.received()));
        }
        let check = sample.map(|(at, _)| at + policy.under_pressure);
        tokio::select! {
            result = conn.as_mut() => return Ended::Finished(result),
            () = activity.0.changed.notified() => {
                if activity.in_flight() == 0 {
                    idle_since = Instant::now();
                }
            }
            Ok(()) = pressure.changed() => {}
            Ok(_) = shutdown.wait_for(|stopping| *stopping) => break true,
            () = sleep_until(deadline) => break false,
            () = sleep_until(check) => {
                let received = uploads.received();
                let before = sample.map_or(received, |(_, before)| before);
                if waits_only_for_slow_bodies(activity.in_flight(), uploads.receiving(), received - before, &policy) {
                    break false;
                }
                sample = Some((Instant::now(), received));
            }
        }
    };
    graceful(conn.as_mut());
    // Under pressure a place is wanted now: a peer that does not take part in the HTTP/2
    // goodbye (answer the GOAWAY's ping) is not waited for long.
    let grace = match (shutting_down, *pressure.borrow()) {
        (true, _) => policy.shutdown_grace,
        (false, true) => policy.close_grace.min(policy.under_pressure),
        (false, false) => policy.close_grace,
    };
    match tokio::time::timeout(grace, conn).await {
        Ok(_) if shutting_down => Ended::Shutdown,
        Ok(_) => Ended::Idle,
        Err(_) => Ended::Dropped,
    }
}

/// Sleeps until `deadline`, or for ever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Whether a connection with `in_flight` requests, `receiving` of them waiting for their
/// bodies, which received `progress` bytes in the last period, only holds its place for slow
/// clients: every request it has waits on its client, and the bytes trickle.
fn waits_only_for_slow_bodies(in_flight: usize, receiving: usize, progress: u64, policy: &IdlePolicy) -> bool {
    in_flight > 0 && receiving >= in_flight && progress < policy.min_upload_rate
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;

    /// A connection that never ends by itself and ends at once when asked to.
    struct Fake {
        asked: Arc<AtomicBool>,
    }

    impl Future for Fake {
        type Output = Result<(), ()>;
        fn poll(self: Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
            if self.asked.load(Ordering::Acquire) { std::task::Poll::Ready(Ok(())) } else { std::task::Poll::Pending }
        }
    }

    // Real time (tokio's paused clock needs its `test-util` feature, which would rebuild
    // tokio for the whole workspace): short timeouts, generous margins.
    const POLICY: IdlePolicy = IdlePolicy {
        timeout: Duration::from_millis(300),
        under_pressure: Duration::from_millis(50),
        close_grace: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(5),
        min_upload_rate: 1000,
    };

    async fn run(activity: Activity, pressure: watch::Receiver<bool>, shutdown: watch::Receiver<bool>) -> Ended<()> {
        let asked = Arc::new(AtomicBool::new(false));
        let fake = Fake { asked: Arc::clone(&asked) };
        let uploads = ConnectionUploads::default();
        drive(fake, move |_| asked.store(true, Ordering::Release), &activity, &uploads, POLICY, pressure, shutdown)
            .await
    }

    #[tokio::test]
    async fn an_idle_connection_is_closed_after_the_timeout_and_a_busy_one_is_not() {
        let (_p, pressure) = watch::channel(false);
        let (_s, shutdown) = watch::channel(false);
        let started = Instant::now();
        assert!(matches!(run(Activity::default(), pressure.clone(), shutdown.clone()).await, Ended::Idle));
        assert!(started.elapsed() >= POLICY.timeout);

        let activity = Activity::default();
        let busy = activity.begin();
        let task = tokio::spawn(run(activity, pressure, shutdown));
        tokio::time::sleep(POLICY.timeout * 3).await;
        assert!(!task.is_finished(), "closed while a request was in flight");
        let ended = Instant::now();
        drop(busy);
        assert!(matches!(task.await.unwrap(), Ended::Idle));
        assert!(ended.elapsed() >= POLICY.timeout, "the idle time counts from the end of the last request");
    }

    #[tokio::test]
    async fn pressure_shortens_the_idle_timeout_and_shutdown_closes_at_once() {
        let (pressure_tx, pressure) = watch::channel(false);
        let (shutdown_tx, shutdown) = watch::channel(false);
        let task = tokio::spawn(run(Activity::default(), pressure, shutdown.clone()));
        tokio::time::sleep(POLICY.timeout / 3).await;
        assert!(!task.is_finished());
        pressure_tx.send_replace(true);
        let pressed = Instant::now();
        assert!(matches!(task.await.unwrap(), Ended::Idle));
        assert!(
            pressed.elapsed() < POLICY.timeout / 2,
            "idle longer than the pressure timeout already: closed at once"
        );

        let (_p, calm) = watch::channel(false);
        let task = tokio::spawn(run(Activity::default(), calm, shutdown));
        tokio::time::sleep(POLICY.timeout / 3).await;
        let stopped = Instant::now();
        shutdown_tx.send_replace(true);
        assert!(matches!(task.await.unwrap(), Ended::Shutdown));
        assert!(stopped.elapsed() < POLICY.timeout / 2);
    }

    #[test]
    fn only_connections_whose_every_request_waits_for_a_trickling_body_are_slow() {
        assert!(waits_only_for_slow_bodies(2, 2, 999, &POLICY));
        assert!(!waits_only_for_slow_bodies(2, 2, 1000, &POLICY), "a body arriving at the floor rate");
        assert!(!waits_only_for_slow_bodies(2, 1, 0, &POLICY), "one request is the server's to answer");
        assert!(!waits_only_for_slow_bodies(0, 0, 0, &POLICY), "idle: the idle timer's business");
    }
}
