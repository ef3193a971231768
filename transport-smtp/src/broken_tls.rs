//! [`BrokenTls`]: the MX hosts whose TLS handshake failed after STARTTLS, remembered for a
//! while so that opportunistic deliveries to them go straight to plaintext.
//!
//! Without it, every delivery to such a host costs two connections (the failed handshake,
//! then the plaintext retry) and a handshake the server cannot finish; a server whose TLS
//! is broken tends to stay broken for longer than a retry schedule's first steps (an
//! expired or mismatched setup, a middlebox that mangles the handshake). Postfix keeps the
//! same kind of memory in its TLS session cache. Only opportunistic delivery consults it:
//! where TLS is required (an MTA-STS `enforce` policy, a site whose TLS is `required`) the
//! mailer tries TLS every time and fails without it.
//!
//! Keyed by MX host name, the name the certificate would be for, as the pools are. Kept for
//! a fixed hour from the last failure, for at most [`MAX_BROKEN_TLS_HOSTS`] hosts: when
//! full, expired hosts are dropped, and if none was, the one that failed longest ago.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a host whose handshake failed gets plaintext without trying STARTTLS.
pub(crate) const BROKEN_TLS_LIFETIME: Duration = Duration::from_secs(60 * 60);

/// Most hosts remembered.
pub(crate) const MAX_BROKEN_TLS_HOSTS: usize = 10_000;

/// Hosts whose handshake failed, each with when it last did.
pub(crate) struct BrokenTls {
    failed_at: Mutex<HashMap<String, Instant>>,
    lifetime: Duration,
    max: usize,
}

impl BrokenTls {
    /// Remembers hosts for `lifetime`, at most `max` of them.
    pub(crate) fn new(lifetime: Duration, max: usize) -> Self {
        Self { failed_at: Mutex::new(HashMap::new()), lifetime, max }
    }

    /// Whether `host`'s handshake failed within the lifetime before `now`.
    pub(crate) fn is_broken(&self, host: &str, now: Instant) -> bool {
        self.hosts().get(&host.to_ascii_lowercase()).is_some_and(|&at| self.fresh(at, now))
    }

    /// Remembers that `host`'s handshake failed at `now`.
    pub(crate) fn remember(&self, host: &str, now: Instant) {
        let host = host.to_ascii_lowercase();
        let mut hosts = self.hosts();
        if hosts.len() >= self.max && !hosts.contains_key(&host) {
            hosts.retain(|_, &mut at| self.fresh(at, now));
            if hosts.len() >= self.max {
                let oldest = hosts.iter().min_by_key(|(_, at)| **at).map(|(name, _)| name.clone());
                if let Some(oldest) = oldest {
                    hosts.remove(&oldest);
                }
            }
        }
        hosts.insert(host, now);
    }

    fn fresh(&self, at: Instant, now: Instant) -> bool {
        now.saturating_duration_since(at) < self.lifetime
    }

    fn hosts(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        // A panic elsewhere cannot leave the map inconsistent: each change is one call.
        self.failed_at.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_remembered_for_the_lifetime_and_no_longer() {
        let broken = BrokenTls::new(BROKEN_TLS_LIFETIME, MAX_BROKEN_TLS_HOSTS);
        let t0 = Instant::now();
        assert!(!broken.is_broken("mx.example.net", t0));
        broken.remember("MX.example.net", t0);
        assert!(broken.is_broken("mx.example.net", t0 + Duration::from_secs(59 * 60)), "names ignore case");
        assert!(!broken.is_broken("mx.example.net", t0 + BROKEN_TLS_LIFETIME));
        assert!(!broken.is_broken("mx2.example.net", t0));
        broken.remember("mx.example.net", t0 + Duration::from_secs(30 * 60));
        assert!(broken.is_broken("mx.example.net", t0 + Duration::from_secs(80 * 60)), "from the last failure");
    }

    #[test]
    fn when_full_expired_hosts_go_first_then_the_oldest() {
        let broken = BrokenTls::new(Duration::from_secs(60), 2);
        let t0 = Instant::now();
        broken.remember("a", t0);
        broken.remember("b", t0 + Duration::from_secs(30));
        let t1 = t0 + Duration::from_secs(70);
        broken.remember("c", t1);
        assert!(broken.is_broken("b", t1) && broken.is_broken("c", t1), "a had expired");
        broken.remember("d", t1 + Duration::from_secs(1));
        let t2 = t1 + Duration::from_secs(1);
        assert!(!broken.is_broken("b", t2), "b failed longest ago");
        assert!(broken.is_broken("c", t2) && broken.is_broken("d", t2));
        assert_eq!(broken.hosts().len(), 2);
    }
}
