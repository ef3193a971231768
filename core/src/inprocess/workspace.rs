//! [`WorkspaceHandle`]: a workspace as the application inside the process acts on it, and
//! [`Tidings::ensure_workspace`], which finds or makes one by name.

use crate::ids::{MessageId, WorkspaceId};
use crate::model::{Message, RateLimit, Workspace};
use crate::ports::Limits;
use crate::usecases::{Admission, LimitedSend, Principal, SendOutcome, Tidings};
use crate::{Error, Result};

use super::Email;
use super::named::ENSURING;

/// A workspace with the application's [`Principal::trusted`]: every use case of
/// [`Tidings`] can be called with [`WorkspaceHandle::principal`], and the handle adds the
/// typed ones (sending an [`Email`], domains and templates by name). Cheap to clone.
#[derive(Clone)]
pub struct WorkspaceHandle {
    pub(super) core: Tidings,
    pub(super) who: Principal,
    workspace: Workspace,
}

impl std::fmt::Debug for WorkspaceHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceHandle").field("workspace", &self.workspace).field("who", &self.who).finish()
    }
}

impl Tidings {
    /// The workspace named `name`, made (with a first `full` key whose plaintext is
    /// dropped: make keys for other clients with `keys().create`) if there is none, so a
    /// service calls this at every start and gets the same workspace each time. Give it
    /// [`DEFAULT_WORKSPACE_NAME`](crate::usecases::DEFAULT_WORKSPACE_NAME) to share the
    /// workspace `tidings-server` makes on a fresh store.
    ///
    /// Names are compared exactly; of several workspaces with one name, the oldest is the
    /// one. Callers in one process take turns, so they make at most one. On a fresh shared
    /// store, the first workspace is made in one atomic step (as
    /// [`Workspaces::ensure_default`](crate::usecases::Workspaces::ensure_default)), so
    /// nodes starting together agree on it; a further workspace made by several nodes at the
    /// very same moment may be made twice, and every call then returns the oldest, so they
    /// agree from then on.
    pub async fn ensure_workspace(&self, name: &str) -> Result<WorkspaceHandle> {
        let _turn = ENSURING.lock().await;
        if let Some(found) = self.oldest_workspace(name).await? {
            return Ok(self.handle(found));
        }
        let (workspace, created) = self.new_workspace(name, None)?;
        let first = self.store.create_first_workspace(&workspace, &created.key).await?;
        // Not the first: unless another node just made this very one, it is simply added.
        if !first && self.oldest_workspace(name).await?.is_none() {
            self.workspaces().create(name, None).await?;
        }
        let found = self.oldest_workspace(name).await?.ok_or(Error::NotFound("workspace"))?;
        Ok(self.handle(found))
    }

    /// The workspace `id` (404 if there is none) with the application's trusted principal.
    pub async fn workspace(&self, id: WorkspaceId) -> Result<WorkspaceHandle> {
        let found = self.store.get_workspace(id).await?.ok_or(Error::NotFound("workspace"))?;
        Ok(self.handle(found))
    }

    async fn oldest_workspace(&self, name: &str) -> Result<Option<Workspace>> {
        // `Workspaces::list` is oldest first.
        Ok(self.workspaces().list().await?.into_iter().find(|w| w.name == name))
    }

    fn handle(&self, workspace: Workspace) -> WorkspaceHandle {
        WorkspaceHandle { core: self.clone(), who: Principal::trusted(workspace.id), workspace }
    }
}

impl WorkspaceHandle {
    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// Its id.
    pub fn id(&self) -> WorkspaceId {
        self.workspace.id
    }

    /// The application's principal for it, for every other use case of [`Tidings`].
    pub fn principal(&self) -> &Principal {
        &self.who
    }

    /// The service.
    pub fn core(&self) -> &Tidings {
        &self.core
    }

    /// The same handle with another send rate for [`WorkspaceHandle::send_rate_limited`]
    /// (default [`RateLimit::DEFAULT`], 10 a second).
    #[must_use]
    pub fn with_rate_limit(self, rate_limit: RateLimit) -> Self {
        Self { who: self.who.with_rate_limit(rate_limit), ..self }
    }

    /// Sends `email` through [`Messages::send`](crate::usecases::Messages::send), the use case
    /// `POST /v1/messages` calls: the same validation, errors and durability (the message is
    /// stored with its `Queued` event when this returns). No rate limit applies: for a route
    /// the public can call, use [`WorkspaceHandle::send_rate_limited`].
    pub async fn send(&self, email: Email) -> Result<SendOutcome> {
        let (request, key) = email.into_request();
        self.core.messages().send(&self.who, request, key.as_deref()).await
    }

    /// [`WorkspaceHandle::send`] under a rate limit, through
    /// [`Messages::send_rate_limited`](crate::usecases::Messages::send_rate_limited): one token of
    /// this handle's rate ([`WorkspaceHandle::with_rate_limit`]) from `limits`, and `Limited`
    /// (nothing queued) when the bucket is empty. Every trusted principal shares one bucket in a given
    /// limiter, so give each public route its own (`LocalLimits::default()`) to limit that
    /// route alone.
    ///
    /// ```
    /// use tidings_core::inprocess::{Email, WorkspaceHandle};
    /// use tidings_core::usecases::{Admission, LocalLimits};
    ///
    /// async fn signup(acme: &WorkspaceHandle, limits: &LocalLimits, email: Email) -> tidings_core::Result<bool> {
    ///     match acme.send_rate_limited(limits, email).await? {
    ///         Admission::Allowed(sent) => Ok(!sent.outcome.replayed),
    ///         Admission::Limited { .. } => Ok(false), // answer 429 to the visitor
    ///     }
    /// }
    /// ```
    pub async fn send_rate_limited(&self, limits: &dyn Limits, email: Email) -> Result<Admission<LimitedSend>> {
        let (request, key) = email.into_request();
        self.core.messages().send_rate_limited(limits, &self.who, request, key.as_deref()).await
    }

    /// The message `id` of this workspace.
    pub async fn get_message(&self, id: MessageId) -> Result<Message> {
        self.core.messages().get(&self.who, id).await
    }
}
