//! Templates: one record per template holding all its versions (`TEMPLATE ‖ ws ‖ id`), and
//! `TEMPLATE_VERSION ‖ ws ‖ version` → template id so a message's pinned version is found
//! by its id. A template has few versions, so rewriting the record on each change is cheaper
//! than keeping versions apart and costs one read to list a template with its versions.

use async_trait::async_trait;
use tidings_core::ids::{TemplateId, TemplateVersionId, WorkspaceId};
use tidings_core::model::{Template, TemplateVersion};
use tidings_core::ports::{
    NewTemplateVersion, Page, PageRequest, StoreError, StoreResult, TemplateChange, TemplateStore,
};

use crate::SledStore;
use crate::codec::{decode, decode_id, encode, sled_error};
use crate::db::{Order, get, page};
use crate::layout::{self, Key};

fn template_key(ws: WorkspaceId, id: TemplateId) -> Vec<u8> {
    Key::new(layout::TEMPLATE).id(ws.to_bytes()).id(id.to_bytes()).0
}

fn version_key(ws: WorkspaceId, id: TemplateVersionId) -> Vec<u8> {
    Key::new(layout::TEMPLATE_VERSION).id(ws.to_bytes()).id(id.to_bytes()).0
}

#[async_trait]
impl TemplateStore for SledStore {
    async fn insert_template(&self, template: &Template) -> StoreResult<()> {
        let ws = template.workspace_id;
        let key = template_key(ws, template.id);
        let value = encode(template)?;
        self.inner
            .write_durable(|tree, batch| {
                if tree.contains_key(&key).map_err(sled_error)? {
                    return Err(StoreError::Conflict(format!("template {} exists", template.id)));
                }
                for version in &template.versions {
                    batch.insert(version_key(ws, version.id), &template.id.to_bytes());
                }
                batch.insert(key, value);
                Ok(())
            })
            .await
    }

    async fn get_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<Option<Template>> {
        self.inner.get(&template_key(workspace, id), "template")
    }

    /// A scan of the workspace's templates, newest first: names have no index (a workspace
    /// has few templates, and only sends that name a template by its name look one up).
    async fn template_ids_named(
        &self,
        workspace: WorkspaceId,
        name: &str,
        limit: usize,
    ) -> StoreResult<Vec<TemplateId>> {
        let prefix = Key::new(layout::TEMPLATE).id(workspace.to_bytes()).0;
        let mut ids = Vec::new();
        for entry in self.inner.tree()?.scan_prefix(&prefix).rev() {
            if ids.len() >= limit {
                break;
            }
            let (_, value) = entry.map_err(sled_error)?;
            let template: Template = decode(&value, "template")?;
            if template.name == name {
                ids.push(template.id);
            }
        }
        Ok(ids)
    }

    async fn list_templates(
        &self,
        workspace: WorkspaceId,
        page_req: PageRequest<TemplateId>,
    ) -> StoreResult<Page<Template>> {
        let prefix = Key::new(layout::TEMPLATE).id(workspace.to_bytes()).0;
        let cursor = page_req.cursor.map(TemplateId::to_bytes);
        page(
            self.inner.tree()?,
            &prefix,
            cursor.as_ref().map(|c| &c[..]),
            page_req.limit,
            Order::NewestFirst,
            |_, v| decode(&v, "template").map(Some),
        )
    }

    async fn get_template_version(
        &self,
        workspace: WorkspaceId,
        id: TemplateVersionId,
    ) -> StoreResult<Option<TemplateVersion>> {
        let Some(template_id) = self.inner.tree()?.get(version_key(workspace, id)).map_err(sled_error)? else {
            return Ok(None);
        };
        let template_id = TemplateId::from_bytes(decode_id(&template_id, "template version index")?);
        let template: Option<Template> = self.inner.get(&template_key(workspace, template_id), "template")?;
        Ok(template.and_then(|t| t.versions.into_iter().find(|v| v.id == id)))
    }

    async fn add_template_version(
        &self,
        workspace: WorkspaceId,
        template: TemplateId,
        version: NewTemplateVersion,
        make_current: bool,
    ) -> StoreResult<TemplateVersion> {
        let key = template_key(workspace, template);
        self.inner
            .write_durable(|tree, batch| {
                if tree.contains_key(version_key(workspace, version.id)).map_err(sled_error)? {
                    return Err(StoreError::Conflict(format!("template version {} exists", version.id)));
                }
                let mut stored: Template = get(tree, &key, "template")?.ok_or(StoreError::NotFound)?;
                // Numbered under the writer lock: concurrent calls get different numbers.
                let version_no = stored.versions.iter().map(|v| v.version_no).max().unwrap_or(0) + 1;
                let added = TemplateVersion {
                    id: version.id,
                    template_id: template,
                    version_no,
                    subject: version.subject,
                    html: version.html,
                    text: version.text,
                    created_at: version.created_at,
                };
                stored.versions.push(added.clone());
                if make_current {
                    stored.current_version_id = added.id;
                }
                batch.insert(version_key(workspace, added.id), &template.to_bytes());
                batch.insert(key, encode(&stored)?);
                Ok(added)
            })
            .await
    }

    async fn update_template(
        &self,
        workspace: WorkspaceId,
        id: TemplateId,
        change: TemplateChange,
    ) -> StoreResult<Template> {
        let key = template_key(workspace, id);
        self.inner
            .write_durable(|tree, batch| {
                let mut stored: Template = get(tree, &key, "template")?.ok_or(StoreError::NotFound)?;
                if let Some(version) = change.current_version_id {
                    if !stored.versions.iter().any(|v| v.id == version) {
                        return Err(StoreError::Conflict(format!(
                            "version {version} is not a version of template {id}"
                        )));
                    }
                    stored.current_version_id = version;
                }
                if let Some(name) = change.name {
                    stored.name = name;
                }
                batch.insert(key, encode(&stored)?);
                Ok(stored)
            })
            .await
    }

    async fn delete_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<()> {
        let key = template_key(workspace, id);
        self.inner
            .write_durable(|tree, batch| {
                let stored: Template = get(tree, &key, "template")?.ok_or(StoreError::NotFound)?;
                for version in &stored.versions {
                    batch.remove(version_key(workspace, version.id));
                }
                batch.remove(key);
                Ok(())
            })
            .await
    }
}
