//! Authentication as every front end does it (docs/api.md#authentication): the
//! failed-authentication throttle per client address (every address of an IPv6 /64 counts as
//! one, [`crate::client_group`]) around [`Tidings::authenticate`]. The HTTP
//! adapter calls it with the bearer token, SMTP submission with the AUTH password.

use std::net::IpAddr;

use crate::client_group::client_group;
use crate::ports::Limits;
use crate::usecases::{Admission, Principal, RetryAfter, Tidings};
use crate::{Error, Result};

/// Why a client was not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthRefusal {
    /// It presented no key at all (counts as a failure).
    Missing,
    /// Its key is unknown, malformed or revoked.
    Invalid,
    /// It failed too often lately and must wait, whatever key it presents now.
    Blocked(RetryAfter),
}

/// What authenticating a client came to: let in with `T`, or refused. A refusal is an
/// answer to the client (401 or 429), not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum AuthOutcome<T> {
    /// Let in.
    Admitted(T),
    /// Not let in, and why.
    Refused(AuthRefusal),
}

impl<T> AuthOutcome<T> {
    /// Who or what was let in, if anything was.
    pub fn admitted(self) -> Option<T> {
        match self {
            Self::Admitted(value) => Some(value),
            Self::Refused(_) => None,
        }
    }
}

impl Tidings {
    /// Authenticates `presented` for `client`, counting failures in `limits`. `Err` only when
    /// the store or the limits cannot be reached: the key may well be good, so that is never
    /// a refusal.
    pub async fn authenticate_client(
        &self,
        limits: &dyn Limits,
        client: IpAddr,
        presented: Option<&str>,
    ) -> Result<AuthOutcome<Principal>> {
        let now = self.clock.now();
        // An IPv6 host holds a whole /64: counted per address, it could take a fresh allowance
        // for every guess.
        let client = client_group(client);
        // A failure is refused (401) only if counting it fits the client's allowance, decided
        // in one step so that concurrent failures cannot all pass a check made before any
        // was counted.
        let Some(presented) = presented else {
            if let Admission::Limited { retry_after } = limits.record_auth_failure(client, now).await? {
                return Ok(AuthOutcome::Refused(AuthRefusal::Blocked(retry_after)));
            }
            return Ok(AuthOutcome::Refused(AuthRefusal::Missing));
        };
        // Both are reads of shared state; asking at once saves a round trip when the limits
        // are in a database. A blocked client is refused whatever its key, so a right guess
        // during a block reveals nothing.
        let (blocked, authenticated) = tokio::join!(limits.check_auth(client, now), self.authenticate(presented));
        if let Admission::Limited { retry_after } = blocked? {
            return Ok(AuthOutcome::Refused(AuthRefusal::Blocked(retry_after)));
        }
        match authenticated {
            Ok(principal) => Ok(AuthOutcome::Admitted(principal)),
            Err(Error::InvalidApiKey) => match limits.record_auth_failure(client, now).await? {
                Admission::Allowed(()) => Ok(AuthOutcome::Refused(AuthRefusal::Invalid)),
                Admission::Limited { retry_after } => Ok(AuthOutcome::Refused(AuthRefusal::Blocked(retry_after))),
            },
            Err(other) => Err(other),
        }
    }
}
