//! Domains and templates found by name or made: what a service calls at every start, so
//! that a restart finds what the previous run made instead of adding it again.
//!
//! How far each is safe against concurrent callers:
//! - domains: completely. The store keeps a workspace's domain names unique, so of two
//!   callers adding one name at once (on one node or several) one adds it and the other
//!   finds it.
//! - templates: their names are not unique in the store (the API allows two templates of
//!   one name), so callers in one process take turns ([`ENSURING`]); callers on several
//!   nodes sharing a database may each make one at the same moment, and then every later
//!   call uses the oldest of that name, so they agree from then on.

use tokio::sync::Mutex;

use crate::domain_name::DomainName;
use crate::model::{Domain, Template, TemplateVersion};
use crate::usecases::templates::{non_empty, template_name};
use crate::usecases::{AddDomainRequest, AddTemplateVersionRequest, CreateTemplateRequest, is_reserved_for_sandbox};
use crate::{Error, Result};

use super::WorkspaceHandle;

/// Find-or-make steps of this process take turns: between a lookup that found nothing and
/// the write, no other caller here may make the same thing. One lock for the process is
/// enough: these run at start-up, a few times.
pub(super) static ENSURING: Mutex<()> = Mutex::const_new(());

/// What a template says: its subject and bodies (each a Handlebars template).
///
/// ```
/// use tidings_core::inprocess::TemplateBody;
///
/// let body = TemplateBody::new("Welcome, {{name}}")
///     .html("<p>Hello, {{name}}.</p>")
///     .text("Hello, {{name}}.");
/// # let _ = body;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateBody {
    subject: String,
    html: Option<String>,
    text: Option<String>,
}

impl TemplateBody {
    /// A template with this subject and no body yet (a send from it must then bring its own).
    pub fn new(subject: impl Into<String>) -> Self {
        Self { subject: subject.into(), html: None, text: None }
    }

    /// Its HTML body.
    #[must_use]
    pub fn html(self, html: impl Into<String>) -> Self {
        Self { html: Some(html.into()), ..self }
    }

    /// Its plain-text body.
    #[must_use]
    pub fn text(self, text: impl Into<String>) -> Self {
        Self { text: Some(text.into()), ..self }
    }

    /// Whether `version` says exactly this (an empty body counts as none, as when stored).
    fn is_version(&self, version: &TemplateVersion) -> bool {
        version.subject == self.subject
            && version.html == non_empty(self.html.clone())
            && version.text == non_empty(self.text.clone())
    }
}

impl WorkspaceHandle {
    /// The workspace's domain `name`, added (status `Pending`, with fresh DKIM keys and the
    /// records to publish) if it has none of that name; an existing one is returned as it
    /// is, whatever its status, so its keys and records stay the same across restarts.
    /// `name` is validated as `POST /v1/domains` validates it.
    ///
    /// Verification is separate: publish the records, then
    /// [`Domains::verify`](crate::usecases::Domains::verify) (or let the
    /// runtime's re-check loop find them).
    pub async fn ensure_domain(&self, name: &str) -> Result<Domain> {
        let parsed = DomainName::parse(name).map_err(|e| Error::field("domain", e.to_string()))?;
        let add = AddDomainRequest { domain: Some(name.to_owned()) };
        // The sandbox's names are refused as the API refuses them, though a workspace's
        // sandbox domain may be in the store under one.
        if is_reserved_for_sandbox(&parsed) {
            return self.core.domains().add(&self.who, add).await;
        }
        if let Some(found) = self.find_domain(&parsed).await? {
            return Ok(found);
        }
        match self.core.domains().add(&self.who, add).await {
            // Added by someone else since the lookup: the store's uniqueness rule refused ours.
            Err(Error::Conflict(_)) => self.find_domain(&parsed).await?.ok_or(Error::NotFound("domain")),
            added => added,
        }
    }

    async fn find_domain(&self, name: &DomainName) -> Result<Option<Domain>> {
        Ok(self.core.store.find_domain_by_name(self.who.workspace_id, name).await?)
    }

    /// The workspace's template `name` saying `body`: made if there is none of that name;
    /// given a new current version if its current one says something else; returned as it
    /// is if it already says `body`, so calling this at every start writes nothing after
    /// the first. Names are compared as stored (without surrounding white space); of
    /// several templates with one name, the oldest is the one. Validation (and a
    /// Handlebars syntax error) as `POST /v1/templates`.
    pub async fn upsert_template(&self, name: &str, body: TemplateBody) -> Result<Template> {
        let name = template_name(Some(name)).map_err(|fault| Error::Validation { fields: vec![fault] })?;
        let _turn = ENSURING.lock().await;
        let Some(found) = self.oldest_template(&name).await? else {
            let request = CreateTemplateRequest {
                name: Some(name),
                subject: Some(body.subject),
                html: body.html,
                text: body.text,
            };
            return self.core.templates().create(&self.who, request).await;
        };
        if found.current_version().is_some_and(|current| body.is_version(current)) {
            return Ok(found);
        }
        let version = AddTemplateVersionRequest {
            subject: Some(body.subject),
            html: body.html,
            text: body.text,
            make_current: Some(true),
        };
        self.core.templates().add_version(&self.who, found.id, version).await?;
        self.core.templates().get(&self.who, found.id).await
    }

    /// The oldest template named `name`: the last of all of them (`Templates::ids_named` lists
    /// newest first). Once per start of a service, over the few templates of one name.
    async fn oldest_template(&self, name: &str) -> Result<Option<Template>> {
        match self.core.templates().ids_named(&self.who, name, usize::MAX).await?.last() {
            Some(id) => Ok(Some(self.core.templates().get(&self.who, *id).await?)),
            None => Ok(None),
        }
    }
}
