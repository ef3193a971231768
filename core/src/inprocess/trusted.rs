//! [`Principal::trusted`]: the caller that is the application itself.

use crate::ids::{ApiKeyId, WorkspaceId};
use crate::model::{KeyScope, RateLimit};
use crate::usecases::Principal;

impl Principal {
    /// The application acting on `workspace` from inside the process: `full` scope, every
    /// sending domain, and no API key ([`ApiKeyId::NONE`] as its key, which is what the
    /// messages it sends record as their key; a `send` key of the workspace therefore does
    /// not see them, as it sees only its own).
    ///
    /// Its rate limit is [`RateLimit::DEFAULT`] (10 sends a second), and it applies only
    /// where a limiter is given: [`Messages::send`](crate::usecases::Messages::send)
    /// applies none, [`Messages::send_rate_limited`](crate::usecases::Messages::send_rate_limited)
    /// takes from the bucket of [`ApiKeyId::NONE`] in the [`Limits`](crate::ports::Limits)
    /// given, one bucket shared by every trusted principal that uses that limiter. Give a
    /// public route its own limiter (a `LocalLimits`) and its own rate
    /// ([`Principal::with_rate_limit`]) to bound that route alone.
    ///
    /// Nothing checks that `workspace` exists: take it from
    /// [`Tidings::ensure_workspace`](crate::usecases::Tidings::ensure_workspace) (which
    /// returns a handle holding this principal) or `workspaces().list`.
    pub fn trusted(workspace: WorkspaceId) -> Self {
        Self {
            workspace_id: workspace,
            key_id: ApiKeyId::NONE,
            scope: KeyScope::Full,
            sending_domain_id: None,
            rate_limit: RateLimit::DEFAULT,
        }
    }

    /// The same principal with another send rate, for
    /// [`Messages::send_rate_limited`](crate::usecases::Messages::send_rate_limited).
    #[must_use]
    pub fn with_rate_limit(self, rate_limit: RateLimit) -> Self {
        Self { rate_limit, ..self }
    }
}
