//! Counters an operator can export as metrics; relaxed atomics, since each is independent.

use std::sync::atomic::{AtomicU64, Ordering};

/// Running totals since the listener was bound.
#[derive(Debug, Default)]
pub struct InboundStats {
    connections: AtomicU64,
    refused_connections: AtomicU64,
    messages_accepted: AtomicU64,
    rejected_recipients: AtomicU64,
    handler_errors: AtomicU64,
    too_big: AtomicU64,
    timeouts: AtomicU64,
    auth_failures: AtomicU64,
    evicted: AtomicU64,
    data_refused: AtomicU64,
    too_many_messages: AtomicU64,
    session_time_exceeded: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Sessions served (greeted with 220).
    pub connections: u64,
    /// Connections turned away: `max_connections` sessions were running and none was idle,
    /// or the client had `max_connections_per_ip`.
    pub refused_connections: u64,
    /// Messages the handler accepted (answered 250).
    pub messages_accepted: u64,
    /// `RCPT TO` refused: another domain, or too many recipients.
    pub rejected_recipients: u64,
    /// Messages the handler refused, temporarily or permanently.
    pub handler_errors: u64,
    /// Messages refused for size, at `MAIL` (`SIZE=`) or after `DATA`.
    pub too_big: u64,
    /// Sessions closed for idling, for a message taking too long, or in a TLS handshake
    /// that did not finish.
    pub timeouts: u64,
    /// `AUTH` attempts refused (submission).
    pub auth_failures: u64,
    /// Idle sessions closed to make room for another client or another message's data.
    pub evicted: u64,
    /// Messages whose data the budget could not hold (closed with `421`).
    pub data_refused: u64,
    /// `MAIL` refused with `450 4.7.1`: the client had handed over `max_messages_per_client`
    /// messages within `message_window`.
    pub too_many_messages: u64,
    /// Sessions closed with `421 4.4.2` for lasting `max_session_time`.
    pub session_time_exceeded: u64,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Counter {
    Connections,
    RefusedConnections,
    MessagesAccepted,
    RejectedRecipients,
    HandlerErrors,
    TooBig,
    Timeouts,
    AuthFailures,
    Evicted,
    DataRefused,
    TooManyMessages,
    SessionTimeExceeded,
}

impl InboundStats {
    pub(crate) fn bump(&self, counter: Counter) {
        let cell = match counter {
            Counter::Connections => &self.connections,
            Counter::RefusedConnections => &self.refused_connections,
            Counter::MessagesAccepted => &self.messages_accepted,
            Counter::RejectedRecipients => &self.rejected_recipients,
            Counter::HandlerErrors => &self.handler_errors,
            Counter::TooBig => &self.too_big,
            Counter::Timeouts => &self.timeouts,
            Counter::AuthFailures => &self.auth_failures,
            Counter::Evicted => &self.evicted,
            Counter::DataRefused => &self.data_refused,
            Counter::TooManyMessages => &self.too_many_messages,
            Counter::SessionTimeExceeded => &self.session_time_exceeded,
        };
        cell.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        let get = |cell: &AtomicU64| cell.load(Ordering::Relaxed);
        StatsSnapshot {
            connections: get(&self.connections),
            refused_connections: get(&self.refused_connections),
            messages_accepted: get(&self.messages_accepted),
            rejected_recipients: get(&self.rejected_recipients),
            handler_errors: get(&self.handler_errors),
            too_big: get(&self.too_big),
            timeouts: get(&self.timeouts),
            auth_failures: get(&self.auth_failures),
            evicted: get(&self.evicted),
            data_refused: get(&self.data_refused),
            too_many_messages: get(&self.too_many_messages),
            session_time_exceeded: get(&self.session_time_exceeded),
        }
    }
}
