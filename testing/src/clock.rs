//! [`FixedClock`]: time that moves only when the test moves it.

use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Duration, Utc};
use tidings_core::ports::Clock;

/// A clock that stands still until the test moves it.
#[derive(Debug)]
pub struct FixedClock(Mutex<DateTime<Utc>>);

impl FixedClock {
    /// Stopped at `at`.
    pub fn at(at: DateTime<Utc>) -> Self {
        Self(Mutex::new(at))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) += by;
    }

    /// Sets the clock to `at` (which may be earlier).
    pub fn set(&self, at: DateTime<Utc>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }
}

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
