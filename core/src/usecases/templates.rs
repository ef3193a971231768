//! Templates and their versions (docs/api.md#templates): creation,
//! versions, renaming and switching the current version, rendering without sending (also
//! under the key's rate limit, as a send is), and the lookup the send use case uses to find
//! the version a message is built from.
//!
//! Decisions of our own:
//! - `html` and `text` are both optional, also together: a template may carry only a subject,
//!   and a send from it must then supply its own `html` or `text` (the send checks the body
//!   it ends up with). An empty string counts as absent.
//! - A new version is a whole snapshot: `subject` is required as at creation, and a body it
//!   leaves out is absent in that version, not inherited from the previous one.
//! - A subject template may not contain line breaks or control characters (it becomes a header); what variables
//!   put into the rendered subject is checked by the send.
//! - Every operation here, `render` included, is management: a `send` key gets 403.

use serde_json::{Map, Value};

use crate::ids::{TemplateId, TemplateVersionId, WorkspaceId};
use crate::model::{Template, TemplateVersion};
use crate::ports::{Limits, NewTemplateVersion, StoreError, TemplateChange};
use crate::templates::Rendered;
use crate::text_checks::is_line_or_control;
use crate::usecases::rate_limited_send::is_render_refusal;
use crate::usecases::render_pool::OwnedSource;
use crate::usecases::{Admission, ListParams, Listed, Principal, RateLimitState, Tidings};
use crate::{Error, FieldError, Result};

/// Longest template name, in characters.
pub const MAX_TEMPLATE_NAME_CHARS: usize = 200;

/// Body of `POST /v1/templates`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTemplateRequest {
    /// Name, 1–200 characters (required).
    pub name: Option<String>,
    /// Subject template (required).
    pub subject: Option<String>,
    /// HTML body template.
    pub html: Option<String>,
    /// Plain-text body template.
    pub text: Option<String>,
}

/// Body of `POST /v1/templates/{id}/versions`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddTemplateVersionRequest {
    /// Subject template (required).
    pub subject: Option<String>,
    /// HTML body template.
    pub html: Option<String>,
    /// Plain-text body template.
    pub text: Option<String>,
    /// Make the new version the current one (default true).
    pub make_current: Option<bool>,
}

/// Body of `PATCH /v1/templates/{id}`; an absent field is left as it is.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTemplateRequest {
    /// New name, 1–200 characters.
    pub name: Option<String>,
    /// Id of one of this template's versions to make current.
    pub current_version_id: Option<String>,
}

/// Body of `POST /v1/templates/{id}/render`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderTemplateRequest {
    /// Values for the placeholders: a JSON object (absent or null: no values).
    pub variables: Option<Value>,
    /// Render this version of the template instead of the current one.
    pub version_id: Option<String>,
}

/// `variables`: a JSON object; absent or `null` means none.
fn variables_map(variables: Option<Value>) -> Result<Map<String, Value>, FieldError> {
    match variables {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map),
        Some(_) => Err(FieldError::new("variables", "must be a JSON object")),
    }
}

fn version_source(version: &TemplateVersion) -> OwnedSource {
    OwnedSource { subject: version.subject.clone(), html: version.html.clone(), text: version.text.clone() }
}

impl Tidings {
    /// The template use cases.
    pub fn templates(&self) -> Templates<'_> {
        Templates { core: self }
    }
}

/// The template area of [`Tidings`] ([`Tidings::templates`]): templates and their versions,
/// renaming and switching the current version, rendering without sending (also under the
/// key's rate limit), and the lookups the send use cases make by id or by name.
#[derive(Clone, Copy)]
pub struct Templates<'a> {
    core: &'a Tidings,
}

impl Templates<'_> {
    /// `POST /v1/templates`: creates a template whose version 1 is current. The bodies are
    /// compiled first; a syntax error is a 422 `template_syntax_error` naming line and column.
    pub async fn create(&self, who: &Principal, req: CreateTemplateRequest) -> Result<Template> {
        who.require_full()?;
        let mut faults = Vec::new();
        let name = collect(&mut faults, template_name(req.name.as_deref()));
        let subject = collect(&mut faults, subject_template(req.subject.as_deref()));
        let (Some(name), Some(subject), true) = (name, subject, faults.is_empty()) else {
            return Err(Error::Validation { fields: faults });
        };
        let (html, text) = (non_empty(req.html), non_empty(req.text));
        self.check_syntax(who.workspace_id, &subject, &html, &text).await?;

        let now = self.core.clock.now();
        let id = TemplateId::new_at(now, &*self.core.random);
        let version_id = TemplateVersionId::new_at(now, &*self.core.random);
        let template = Template {
            id,
            workspace_id: who.workspace_id,
            name,
            current_version_id: version_id,
            created_at: now,
            versions: vec![TemplateVersion {
                id: version_id,
                template_id: id,
                version_no: 1,
                subject,
                html,
                text,
                created_at: now,
            }],
        };
        self.core.store.insert_template(&template).await?;
        Ok(template)
    }

    /// `GET /v1/templates`: templates with all their versions, newest first.
    pub async fn list(&self, who: &Principal, params: ListParams) -> Result<Listed<Template>> {
        who.require_full()?;
        let page = params.to_page(TemplateId::parse)?;
        let found = self.core.store.list_templates(who.workspace_id, page).await?;
        Ok(Listed::from_page(found, page.limit, |t| t.id.to_string()))
    }

    /// `GET /v1/templates/{id}`: a template with all its versions.
    pub async fn get(&self, who: &Principal, id: TemplateId) -> Result<Template> {
        who.require_full()?;
        self.template_of(who.workspace_id, id).await
    }

    /// `DELETE /v1/templates/{id}`: deletes the template and its versions. Messages already
    /// sent keep the version id they recorded.
    pub async fn delete(&self, who: &Principal, id: TemplateId) -> Result<()> {
        who.require_full()?;
        self.core.store.delete_template(who.workspace_id, id).await.map_err(template_gone)
    }

    /// `POST /v1/templates/{id}/versions`: adds the next version (numbered one past the
    /// highest) and, unless `makeCurrent` is false, makes it current.
    pub async fn add_version(
        &self,
        who: &Principal,
        id: TemplateId,
        req: AddTemplateVersionRequest,
    ) -> Result<TemplateVersion> {
        who.require_full()?;
        let template = self.template_of(who.workspace_id, id).await?;
        let subject = subject_template(req.subject.as_deref()).map_err(|f| Error::Validation { fields: vec![f] })?;
        let (html, text) = (non_empty(req.html), non_empty(req.text));
        self.check_syntax(who.workspace_id, &subject, &html, &text).await?;

        let now = self.core.clock.now();
        let version = NewTemplateVersion {
            id: TemplateVersionId::new_at(now, &*self.core.random),
            subject,
            html,
            text,
            created_at: now,
        };
        self.core
            .store
            .add_template_version(who.workspace_id, template.id, version, req.make_current.unwrap_or(true))
            .await
            .map_err(template_gone)
    }

    /// `PATCH /v1/templates/{id}`: renames the template or makes another of its versions
    /// current. A version id that is not one of this template's is a 422 naming
    /// `currentVersionId`.
    pub async fn update(&self, who: &Principal, id: TemplateId, req: UpdateTemplateRequest) -> Result<Template> {
        who.require_full()?;
        let template = self.template_of(who.workspace_id, id).await?;
        let mut faults = Vec::new();
        let name = match req.name.as_deref() {
            None => None,
            Some(text) => collect(&mut faults, template_name(Some(text))),
        };
        let current_version_id = match req.current_version_id.as_deref() {
            None => None,
            Some(text) => collect(&mut faults, own_version(&template, "currentVersionId", text).map(|v| v.id)),
        };
        if !faults.is_empty() {
            return Err(Error::Validation { fields: faults });
        }
        match self
            .core
            .store
            .update_template(who.workspace_id, template.id, TemplateChange { name, current_version_id })
            .await
        {
            Ok(template) => Ok(template),
            // Checked above; the store says so only if the template changed under us.
            Err(StoreError::Conflict(_)) => {
                Err(Error::Validation { fields: vec![not_a_version_of("currentVersionId", &template)] })
            }
            Err(e) => Err(template_gone(e)),
        }
    }

    /// `POST /v1/templates/{id}/render`: renders the current version, or `versionId`, with
    /// `variables`, without sending anything. A missing variable is a 422
    /// `template_render_error` naming it.
    pub async fn render(&self, who: &Principal, id: TemplateId, req: RenderTemplateRequest) -> Result<Rendered> {
        who.require_full()?;
        let template = self.template_of(who.workspace_id, id).await?;
        let mut faults = Vec::new();
        let variables = collect(&mut faults, variables_map(req.variables));
        let version = match req.version_id.as_deref() {
            None => Some(template.current_version().ok_or_else(|| inconsistent(&template))?),
            Some(text) => collect(&mut faults, own_version(&template, "versionId", text)),
        };
        let (Some(variables), Some(version)) = (variables, version) else {
            return Err(Error::Validation { fields: faults });
        };
        self.core.render_in_pool(who.workspace_id, version_source(version), variables).await
    }

    /// Renders a version of template `id` as typed, with `variables`, storing nothing: what
    /// the dashboard's editor previews before the version is added. The subject is required as
    /// when adding one; a syntax error is a 422 `template_syntax_error`, a missing variable a
    /// 422 `template_render_error`, as for a stored version.
    pub async fn render_draft(
        &self,
        who: &Principal,
        id: TemplateId,
        draft: AddTemplateVersionRequest,
        variables: Option<Value>,
    ) -> Result<Rendered> {
        who.require_full()?;
        // Only a template of this workspace has drafts to preview.
        self.template_of(who.workspace_id, id).await?;
        let mut faults = Vec::new();
        let subject = collect(&mut faults, subject_template(draft.subject.as_deref()));
        let variables = collect(&mut faults, variables_map(variables));
        let (Some(subject), Some(variables)) = (subject, variables) else {
            return Err(Error::Validation { fields: faults });
        };
        let source = OwnedSource { subject, html: non_empty(draft.html), text: non_empty(draft.text) };
        self.core.render_in_pool(who.workspace_id, source, variables).await
    }

    /// For the send use case: the template version a message is built from. A pinned
    /// `templateVersionId` wins over the template's current version; with only `templateId`
    /// it is the current version; with neither, `None`. Unknown ids (or ids of another
    /// workspace) are 422s naming `templateId` or `templateVersionId`, and so is a version
    /// that does not belong to the named template.
    pub async fn resolve_version(
        &self,
        workspace: WorkspaceId,
        template_id: Option<&str>,
        template_version_id: Option<&str>,
    ) -> Result<Option<TemplateVersion>> {
        let template_id = match template_id {
            None => None,
            Some(text) => Some(TemplateId::parse(text).ok_or_else(|| unknown("templateId", "template"))?),
        };
        if let Some(text) = template_version_id {
            let unknown_version = || unknown("templateVersionId", "template version");
            let version_id = TemplateVersionId::parse(text).ok_or_else(unknown_version)?;
            let version =
                self.core.store.get_template_version(workspace, version_id).await?.ok_or_else(unknown_version)?;
            if let Some(template_id) = template_id
                && version.template_id != template_id
            {
                return Err(Error::field("templateVersionId", format!("is not a version of template {template_id}")));
            }
            return Ok(Some(version));
        }
        let Some(template_id) = template_id else { return Ok(None) };
        let template = self
            .core
            .store
            .get_template(workspace, template_id)
            .await?
            .ok_or_else(|| unknown("templateId", "template"))?;
        template.current_version().cloned().map(Some).ok_or_else(|| inconsistent(&template))
    }

    /// The ids of `who`'s workspace's templates named exactly `name` (surrounding white
    /// space ignored), newest first, at most `limit` (names are not unique, so the caller
    /// decides what several mean: Resend's `template.id` takes the newest, Postmark's
    /// `TemplateAlias` asks for 2 and refuses an ambiguous name, the in-process
    /// `upsert_template` updates the newest). Any key may ask, `send` keys too: a send may
    /// use any template of the workspace, and this reveals no more.
    pub async fn ids_named(&self, who: &Principal, name: &str, limit: usize) -> Result<Vec<TemplateId>> {
        Ok(self.core.store.template_ids_named(who.workspace_id, name.trim(), limit).await?)
    }

    /// Compiles a version's subject and bodies in the render pool, as they will be stored:
    /// a syntax error is a 422 `template_syntax_error` naming line and column.
    async fn check_syntax(
        &self,
        workspace: WorkspaceId,
        subject: &str,
        html: &Option<String>,
        text: &Option<String>,
    ) -> Result<()> {
        let source = OwnedSource { subject: subject.to_owned(), html: html.clone(), text: text.clone() };
        self.core.check_syntax_in_pool(workspace, source).await
    }

    async fn template_of(&self, workspace: WorkspaceId, id: TemplateId) -> Result<Template> {
        self.core.store.get_template(workspace, id).await?.ok_or(Error::NotFound("template"))
    }
}

// Previews under the key's rate limit (docs/api.md#rate-limits): a preview renders like a
// send, so it takes a token like one, and keeps it once its template was compiled or
// rendered, as a send refused by its template does (see `rate_limited_send.rs`).
impl Templates<'_> {
    /// [`Templates::render`] under the key's rate limit: a preview renders like a send
    /// and takes a token like one (`Limited` when the bucket is empty, and nothing
    /// was rendered). The token is given back only when the request was refused before
    /// anything was rendered (an unknown template or version, bad variables).
    pub async fn render_rate_limited(
        &self,
        limits: &dyn Limits,
        who: &Principal,
        id: TemplateId,
        req: RenderTemplateRequest,
    ) -> Result<Admission<(Rendered, RateLimitState)>> {
        who.require_full()?;
        let limit = match limits.acquire_send(who.key_id, who.rate_limit, self.core.clock.now()).await? {
            Admission::Allowed(limit) => limit,
            Admission::Limited { retry_after } => return Ok(Admission::Limited { retry_after }),
        };
        match self.render(who, id, req).await {
            Ok(rendered) => Ok(Admission::Allowed((rendered, limit))),
            Err(e) => {
                if !is_render_refusal(&e) {
                    self.core.refund_send(limits, who).await;
                }
                Err(e)
            }
        }
    }

    /// [`Templates::render_draft`] under the key's rate limit, as
    /// [`Self::render_rate_limited`]: a draft's preview renders like a send.
    pub async fn render_draft_rate_limited(
        &self,
        limits: &dyn Limits,
        who: &Principal,
        id: TemplateId,
        draft: AddTemplateVersionRequest,
        variables: Option<serde_json::Value>,
    ) -> Result<Admission<(Rendered, RateLimitState)>> {
        who.require_full()?;
        let limit = match limits.acquire_send(who.key_id, who.rate_limit, self.core.clock.now()).await? {
            Admission::Allowed(limit) => limit,
            Admission::Limited { retry_after } => return Ok(Admission::Limited { retry_after }),
        };
        match self.render_draft(who, id, draft, variables).await {
            Ok(rendered) => Ok(Admission::Allowed((rendered, limit))),
            Err(e) => {
                if !is_render_refusal(&e) {
                    self.core.refund_send(limits, who).await;
                }
                Err(e)
            }
        }
    }
}

fn template_gone(e: StoreError) -> Error {
    crate::ports::missing("template")(e)
}

pub(crate) fn template_name(text: Option<&str>) -> Result<String, FieldError> {
    let name = text.map(str::trim).unwrap_or_default();
    if name.is_empty() {
        return Err(FieldError::new("name", "is required"));
    }
    if name.chars().count() > MAX_TEMPLATE_NAME_CHARS {
        return Err(FieldError::new("name", format!("must be at most {MAX_TEMPLATE_NAME_CHARS} characters")));
    }
    if name.chars().any(is_line_or_control) {
        return Err(FieldError::new("name", "must not contain line breaks or control characters"));
    }
    Ok(name.to_owned())
}

fn subject_template(text: Option<&str>) -> Result<String, FieldError> {
    match text {
        None => Err(FieldError::new("subject", "is required")),
        Some(s) if s.trim().is_empty() => Err(FieldError::new("subject", "is required")),
        // The rendered subject is checked again by the send; refusing here says so sooner.
        Some(s) if s.chars().any(|c| c != '\t' && is_line_or_control(c)) => {
            Err(FieldError::new("subject", crate::usecases::messages::SUBJECT_CHARS))
        }
        Some(s) => Ok(s.to_owned()),
    }
}

pub(crate) fn non_empty(body: Option<String>) -> Option<String> {
    body.filter(|b| !b.is_empty())
}

/// Records a field fault and yields the value when there is none.
fn collect<T>(faults: &mut Vec<FieldError>, checked: Result<T, FieldError>) -> Option<T> {
    checked.map_err(|f| faults.push(f)).ok()
}

/// The version `text` of `template`, or a fault naming `field` (`currentVersionId` or
/// `versionId`, as the request called it).
fn own_version<'t>(template: &'t Template, field: &str, text: &str) -> Result<&'t TemplateVersion, FieldError> {
    TemplateVersionId::parse(text)
        .and_then(|id| template.versions.iter().find(|v| v.id == id))
        .ok_or_else(|| not_a_version_of(field, template))
}

fn not_a_version_of(field: &str, template: &Template) -> FieldError {
    FieldError::new(field, format!("is not a version of template {}", template.id))
}

fn unknown(field: &str, what: &str) -> Error {
    Error::field(field, format!("is not a {what} of this workspace"))
}

fn inconsistent(template: &Template) -> Error {
    Error::Internal(format!("template {} has no current version", template.id).into())
}
