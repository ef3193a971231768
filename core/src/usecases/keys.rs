//! API keys and workspaces (docs/api.md#authentication).
//!
//! Clients create, list, read and revoke keys of their own workspace with a `full` key. A
//! `full` key restricted to a sending domain manages only keys restricted to that same
//! domain ([`Principal::require_key_manager_of`]): it may not make a key that sends from
//! elsewhere, nor revoke one that does, so it cannot widen what it was given.
//! Operators (no [`Principal`]: the server's command line and first start) create
//! workspaces, each with its first `full` key. The plaintext of a key exists only in the
//! [`CreatedKey`] returned at creation; the store keeps its SHA-256.

use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::ids::{ApiKeyId, DomainId, WorkspaceId};
use crate::model::{ApiKey, ApiKeyPlaintext, KeyScope, RateLimit, Workspace};
use crate::ports::StoreError;
use crate::usecases::{ListParams, Listed, Principal, Tidings};
use crate::{Error, Result};

/// Name of a key created without one, and of the first key of a workspace.
pub const DEFAULT_KEY_NAME: &str = "default";
/// Name of the workspace a fresh store gets (docs/api.md#authentication).
pub const DEFAULT_WORKSPACE_NAME: &str = "default";
/// Longest key or workspace name, in characters.
pub const MAX_NAME_CHARS: usize = 100;

/// Body of `POST /v1/keys`, before validation.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateApiKeyRequest {
    /// Label; default `default`; 1–100 characters without control characters.
    pub name: Option<String>,
    /// `full` (default) or `send`.
    pub scope: Option<String>,
    /// Restricts the key to sending from this domain of the workspace.
    pub sending_domain_id: Option<String>,
    /// Sends per second, 1–10,000; default 10.
    pub rate_limit_per_sec: Option<i64>,
}

/// Body of `PATCH /v1/keys/{id}`, before validation: what may change on a live key.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateApiKeyRequest {
    /// Sends per second, 1–10,000 (required: the one thing a key's owner may change).
    pub rate_limit_per_sec: Option<i64>,
}

/// A key just created, with its plaintext: the only time the plaintext is available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedKey {
    /// The stored key.
    pub key: ApiKey,
    /// The full key, to show once (`plaintextKey`).
    pub plaintext: ApiKeyPlaintext,
}

/// What a new key will be, once validated.
struct KeySpec {
    name: String,
    scope: KeyScope,
    sending_domain_id: Option<DomainId>,
    rate_limit: RateLimit,
}

impl Tidings {
    /// The API key use cases.
    pub fn keys(&self) -> Keys<'_> {
        Keys { core: self }
    }

    /// The operator's workspace use cases.
    pub fn workspaces(&self) -> Workspaces<'_> {
        Workspaces { core: self }
    }

    /// A workspace named `name` and its first `full` key, not yet stored.
    pub(crate) fn new_workspace(
        &self,
        name: &str,
        bootstrap: Option<ApiKeyPlaintext>,
    ) -> Result<(Workspace, CreatedKey)> {
        let name = validate_name("name", Some(name), DEFAULT_WORKSPACE_NAME)
            .map_err(|e| Error::Validation { fields: vec![e] })?;
        let now = self.clock.now();
        let workspace = Workspace { id: WorkspaceId::new_at(now, &*self.random), name, created_at: now };
        let spec = KeySpec {
            name: DEFAULT_KEY_NAME.to_owned(),
            scope: KeyScope::Full,
            sending_domain_id: None,
            rate_limit: RateLimit::DEFAULT,
        };
        let created = match bootstrap {
            Some(plaintext) => self.key_from(workspace.id, spec, plaintext),
            None => self.new_key(workspace.id, spec),
        };
        Ok((workspace, created))
    }

    fn new_key(&self, workspace: WorkspaceId, spec: KeySpec) -> CreatedKey {
        self.key_from(workspace, spec, ApiKeyPlaintext::generate(&*self.random))
    }

    fn key_from(&self, workspace: WorkspaceId, spec: KeySpec, plaintext: ApiKeyPlaintext) -> CreatedKey {
        let now = self.clock.now();
        let key = ApiKey {
            id: ApiKeyId::new_at(now, &*self.random),
            workspace_id: workspace,
            name: spec.name,
            prefix: plaintext.prefix(),
            key_hash: plaintext.hash(),
            scope: spec.scope,
            sending_domain_id: spec.sending_domain_id,
            rate_limit: spec.rate_limit,
            created_at: now,
            last_used_at: None,
            revoked_at: None,
        };
        CreatedKey { key, plaintext }
    }
}

/// The API key area of [`Tidings`] ([`Tidings::keys`]): a workspace's keys, created, listed,
/// read, revoked and given another send rate by a `full` key of that workspace.
#[derive(Clone, Copy)]
pub struct Keys<'a> {
    core: &'a Tidings,
}

impl Keys<'_> {
    /// `POST /v1/keys`: creates a key in the caller's workspace and returns it with its
    /// plaintext. All field errors are reported together.
    ///
    /// `sendingDomainId` must name a domain of the workspace (otherwise a 422 naming it),
    /// but need not be Verified yet: a domain can lose or gain verification later, so the
    /// send use case checks verification at send time.
    pub async fn create(&self, who: &Principal, req: CreateApiKeyRequest) -> Result<CreatedKey> {
        who.require_full()?;
        let spec = self.validate_key_request(who.workspace_id, req).await?;
        who.require_key_manager_of(spec.sending_domain_id)?;
        let created = self.core.new_key(who.workspace_id, spec);
        self.core.store.insert_api_key(&created.key).await?;
        Ok(created)
    }

    /// `GET /v1/keys`: the workspace's keys that are not revoked, newest first.
    pub async fn list(&self, who: &Principal, params: ListParams) -> Result<Listed<ApiKey>> {
        who.require_full()?;
        let page = params.to_page(ApiKeyId::parse)?;
        let limit = page.limit;
        let found = self.core.store.list_api_keys(who.workspace_id, page).await?;
        Ok(Listed::from_page(found, limit, |k| k.id.to_string()))
    }

    /// `GET /v1/keys/{id}`: one key. Revoked keys are not found: to the API they are gone.
    pub async fn get(&self, who: &Principal, id: ApiKeyId) -> Result<ApiKey> {
        who.require_full()?;
        match self.core.store.get_api_key(who.workspace_id, id).await? {
            Some(key) if key.revoked_at.is_none() => Ok(key),
            _ => Err(Error::NotFound("API key")),
        }
    }

    /// `DELETE /v1/keys/{id}`: revokes a key; it fails authentication from the moment this
    /// returns. Not found if absent or already revoked. A key may revoke itself (the
    /// request that does so still completes).
    ///
    /// A domain-restricted caller revokes only keys restricted to its domain (itself
    /// included): another live key is 403 `insufficient_scope`; an absent one is 404 as for
    /// any caller (the caller may list the keys anyway, so this tells it nothing new).
    pub async fn revoke(&self, who: &Principal, id: ApiKeyId) -> Result<()> {
        who.require_full()?;
        if who.sending_domain_id.is_some() {
            let target = self.get(who, id).await?;
            who.require_key_manager_of(target.sending_domain_id)?;
        }
        self.core
            .store
            .revoke_api_key(who.workspace_id, id, self.core.clock.now())
            .await
            .map_err(crate::ports::missing("API key"))?;
        Ok(())
    }

    /// `PATCH /v1/keys/{id}`: sets a live key's send rate, from the key's next send on (on
    /// every node: the rate is read with the key). A `full` key changes any key of its
    /// workspace, itself included (it could make a key with any rate anyway); a
    /// domain-restricted one only keys restricted to its domain, as for revoking.
    pub async fn update(&self, who: &Principal, id: ApiKeyId, req: UpdateApiKeyRequest) -> Result<ApiKey> {
        who.require_full()?;
        // Found and allowed before the body is judged: another workspace's id is a 404
        // whatever the body says.
        let target = self.get(who, id).await?;
        who.require_key_manager_of(target.sending_domain_id)?;
        let rate_limit = match req.rate_limit_per_sec {
            None => Err(FieldError::new("rateLimitPerSec", "is required")),
            Some(n) => rate_limit(n),
        }
        .map_err(|e| Error::Validation { fields: vec![e] })?;
        self.core
            .store
            .set_api_key_rate_limit(who.workspace_id, id, rate_limit)
            .await
            .map_err(crate::ports::missing("API key"))
    }

    async fn validate_key_request(&self, workspace: WorkspaceId, req: CreateApiKeyRequest) -> Result<KeySpec> {
        let mut errors = Vec::new();
        let name = validate_name("name", req.name.as_deref(), DEFAULT_KEY_NAME).map_err(|e| errors.push(e)).ok();
        let scope = match req.scope.as_deref() {
            None | Some("full") => Some(KeyScope::Full),
            Some("send") => Some(KeyScope::Send),
            Some(_) => {
                errors.push(FieldError::new("scope", "must be \"full\" or \"send\""));
                None
            }
        };
        let rate_limit = match req.rate_limit_per_sec {
            None => Some(RateLimit::DEFAULT),
            Some(n) => rate_limit(n).map_err(|e| errors.push(e)).ok(),
        };
        let sending_domain_id = match req.sending_domain_id.as_deref() {
            None => None,
            Some(text) => {
                let found = match DomainId::parse(text) {
                    // The sandbox is a domain of the workspace only while sandbox sending is on.
                    Some(id) => {
                        self.core.store.get_domain(workspace, id).await?.filter(|d| self.core.shows(d)).map(|d| d.id)
                    }
                    None => None,
                };
                if found.is_none() {
                    errors.push(FieldError::new("sendingDomainId", "is not a domain of this workspace"));
                }
                found
            }
        };
        match (name, scope, rate_limit) {
            (Some(name), Some(scope), Some(rate_limit)) if errors.is_empty() => {
                Ok(KeySpec { name, scope, sending_domain_id, rate_limit })
            }
            _ => Err(Error::Validation { fields: errors }),
        }
    }
}

/// The workspace area of [`Tidings`] ([`Tidings::workspaces`]), for operators (the server's
/// command line and first start; no [`Principal`]): making a workspace with its first `full`
/// key, the `default` one of a fresh store, and listing them.
#[derive(Clone, Copy)]
pub struct Workspaces<'a> {
    core: &'a Tidings,
}

impl Workspaces<'_> {
    /// Operator: creates a workspace and its first `full` key (named `default`) in one
    /// atomic write. `bootstrap` is the plaintext to use for that key (from configuration);
    /// `None` generates one. A bootstrap key already in use is a `Conflict`.
    pub async fn create(&self, name: &str, bootstrap: Option<ApiKeyPlaintext>) -> Result<(Workspace, CreatedKey)> {
        let (workspace, created) = self.core.new_workspace(name, bootstrap)?;
        self.core.store.create_workspace(&workspace, &created.key).await.map_err(workspace_conflict)?;
        Ok((workspace, created))
    }

    /// Operator: every workspace, oldest first (`tidings-server workspace list`: the id a
    /// new key needs when the first one is lost).
    pub async fn list(&self) -> Result<Vec<Workspace>> {
        Ok(self.core.store.list_workspaces().await?)
    }

    /// Operator, at start-up: gives a fresh store its `default` workspace and first key.
    /// Returns `None` when the store already has a workspace, so restarts change nothing.
    ///
    /// The store checks for "no workspace yet" and writes in one atomic step
    /// ([`create_first_workspace`](crate::ports::WorkspaceStore::create_first_workspace)),
    /// so of several nodes starting at once on one fresh shared store exactly one makes the
    /// workspace and the others get `None`, with or without a bootstrap key.
    pub async fn ensure_default(&self, bootstrap: Option<ApiKeyPlaintext>) -> Result<Option<(Workspace, CreatedKey)>> {
        let (workspace, created) = self.core.new_workspace(DEFAULT_WORKSPACE_NAME, bootstrap)?;
        let first =
            self.core.store.create_first_workspace(&workspace, &created.key).await.map_err(workspace_conflict)?;
        Ok(first.then_some((workspace, created)))
    }
}

/// `rateLimitPerSec` as given: within [`RateLimit::RANGE`].
fn rate_limit(n: i64) -> std::result::Result<RateLimit, FieldError> {
    u32::try_from(n).ok().and_then(RateLimit::new).ok_or_else(|| {
        let (lo, hi) = (RateLimit::RANGE.start(), RateLimit::RANGE.end());
        FieldError::new("rateLimitPerSec", format!("must be between {lo} and {hi}"))
    })
}

/// A store `Conflict` on creating a workspace, in the caller's terms.
fn workspace_conflict(e: StoreError) -> Error {
    match e {
        StoreError::Conflict(_) => Error::Conflict("this API key or workspace already exists".into()),
        e => e.into(),
    }
}

/// A label: `default` when absent; otherwise 1–100 characters, no control characters
/// (names end up in logs and dashboards, where a newline could forge lines).
fn validate_name(field: &str, text: Option<&str>, default: &str) -> std::result::Result<String, FieldError> {
    let Some(text) = text else { return Ok(default.to_owned()) };
    if text.trim().is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    if text.chars().count() > MAX_NAME_CHARS {
        return Err(FieldError::new(field, format!("must be at most {MAX_NAME_CHARS} characters")));
    }
    if text.chars().any(char::is_control) {
        return Err(FieldError::new(field, "must not contain control characters"));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_default_and_are_bounded() {
        assert_eq!(validate_name("name", None, "default").unwrap(), "default");
        assert_eq!(validate_name("name", Some("CI deploys"), "default").unwrap(), "CI deploys");
        assert_eq!(validate_name("name", Some(&"é".repeat(100)), "x").unwrap().chars().count(), 100);
        for bad in ["", "   ", "a\nb", "tab\there", &"x".repeat(101)] {
            let err = validate_name("name", Some(bad), "default").unwrap_err();
            assert_eq!(err.field, "name", "{bad:?}");
        }
    }
}
