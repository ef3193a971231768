//! Templates (`templates`, each row holding the template with all its versions) and the
//! version index (`template_versions`: which template holds a version id). Changes lock
//! the template's row, so concurrent versions get distinct numbers.

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Transaction};
use tidings_core::ids::{TemplateId, TemplateVersionId, WorkspaceId};
use tidings_core::model::{Template, TemplateVersion};
use tidings_core::ports::{
    NewTemplateVersion, Page, PageRequest, StoreError, StoreResult, TemplateChange, TemplateStore,
};

use crate::PgStore;
use crate::db::{db_error, decode, doc, execute, limit as db_limit, newest_first, query, query_opt, uuid};

/// The template, locked until the transaction ends. `NotFound` if absent.
async fn lock_template(tx: &Transaction<'_>, workspace: WorkspaceId, id: TemplateId) -> StoreResult<Template> {
    let sql = "SELECT doc FROM templates WHERE id = $1 AND workspace_id = $2 FOR UPDATE";
    let row = query_opt(tx, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?.ok_or(StoreError::NotFound)?;
    decode(&row, "template")
}

async fn save_template(client: &impl GenericClient, template: &Template) -> StoreResult<()> {
    execute(client, "UPDATE templates SET doc = $2 WHERE id = $1", &[&uuid(template.id.0), &doc(template)?])
        .await
        .map(drop)
}

async fn index_version(
    client: &impl GenericClient,
    template: TemplateId,
    version: TemplateVersionId,
) -> StoreResult<()> {
    let sql = "INSERT INTO template_versions (id, template_id) VALUES ($1, $2)";
    execute(client, sql, &[&uuid(version.0), &uuid(template.0)]).await.map(drop)
}

#[async_trait]
impl TemplateStore for PgStore {
    async fn insert_template(&self, template: &Template) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        execute(
            &tx,
            "INSERT INTO templates (id, workspace_id, doc) VALUES ($1, $2, $3)",
            &[&uuid(template.id.0), &uuid(template.workspace_id.0), &doc(template)?],
        )
        .await?;
        for version in &template.versions {
            index_version(&tx, template.id, version.id).await?;
        }
        tx.commit().await.map_err(db_error)
    }

    async fn get_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<Option<Template>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM templates WHERE id = $1 AND workspace_id = $2";
        let row = query_opt(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?;
        row.map(|row| decode(&row, "template")).transpose()
    }

    async fn template_ids_named(
        &self,
        workspace: WorkspaceId,
        name: &str,
        limit: usize,
    ) -> StoreResult<Vec<TemplateId>> {
        let client = self.client().await?;
        // Names have no index: the workspace's rows by `templates_by_workspace`, filtered.
        let sql = "SELECT id FROM templates WHERE workspace_id = $1 AND doc->>'name' = $2 ORDER BY id DESC LIMIT $3";
        let rows = query(&client, sql, &[&uuid(workspace.0), &name, &db_limit(limit)]).await?;
        Ok(rows.iter().map(|row| TemplateId(ulid::Ulid::from_bytes(*row.get::<_, uuid::Uuid>(0).as_bytes()))).collect())
    }

    async fn list_templates(
        &self,
        workspace: WorkspaceId,
        page: PageRequest<TemplateId>,
    ) -> StoreResult<Page<Template>> {
        let client = self.client().await?;
        let ws = uuid(workspace.0);
        newest_first(&client, "templates", &[("workspace_id", &ws)], None, page.cursor.map(|c| c.0), page.limit).await
    }

    async fn get_template_version(
        &self,
        workspace: WorkspaceId,
        id: TemplateVersionId,
    ) -> StoreResult<Option<TemplateVersion>> {
        let client = self.client().await?;
        let sql = "SELECT t.doc FROM template_versions v JOIN templates t ON t.id = v.template_id
                   WHERE v.id = $1 AND t.workspace_id = $2";
        let Some(row) = query_opt(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await? else {
            return Ok(None);
        };
        let template: Template = decode(&row, "template")?;
        Ok(template.versions.into_iter().find(|v| v.id == id))
    }

    async fn add_template_version(
        &self,
        workspace: WorkspaceId,
        template: TemplateId,
        version: NewTemplateVersion,
        make_current: bool,
    ) -> StoreResult<TemplateVersion> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let mut stored = lock_template(&tx, workspace, template).await?;
        index_version(&tx, template, version.id).await?;
        let added = TemplateVersion {
            id: version.id,
            template_id: template,
            version_no: stored.versions.iter().map(|v| v.version_no).max().unwrap_or(0) + 1,
            subject: version.subject,
            html: version.html,
            text: version.text,
            created_at: version.created_at,
        };
        stored.versions.push(added.clone());
        if make_current {
            stored.current_version_id = added.id;
        }
        save_template(&tx, &stored).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(added)
    }

    async fn update_template(
        &self,
        workspace: WorkspaceId,
        id: TemplateId,
        change: TemplateChange,
    ) -> StoreResult<Template> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let mut stored = lock_template(&tx, workspace, id).await?;
        if let Some(version) = change.current_version_id {
            if !stored.versions.iter().any(|v| v.id == version) {
                return Err(StoreError::Conflict("not a version of this template".to_owned()));
            }
            stored.current_version_id = version;
        }
        if let Some(name) = change.name {
            stored.name = name;
        }
        save_template(&tx, &stored).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(stored)
    }

    async fn delete_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<()> {
        let client = self.client().await?;
        // Its version index entries go with it (ON DELETE CASCADE).
        let sql = "DELETE FROM templates WHERE id = $1 AND workspace_id = $2";
        let deleted = execute(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?;
        if deleted == 0 { Err(StoreError::NotFound) } else { Ok(()) }
    }
}
