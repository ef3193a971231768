//! Domains, senders and templates of the [`MemoryStore`](super::MemoryStore).

use super::*;

#[async_trait]
impl DomainStore for MemoryStore {
    async fn insert_domain(&self, domain: &Domain) -> StoreResult<()> {
        let sealed = self.seal(domain)?;
        let mut st = self.state();
        if st.domains.contains_key(&domain.id) {
            return Err(conflict("domain id exists"));
        }
        if st
            .domains
            .values()
            .map(Sealed::unopened)
            .any(|d| d.workspace_id == domain.workspace_id && d.name == domain.name)
        {
            return Err(StoreError::Conflict(format!("domain {} exists", domain.name)));
        }
        st.domains.insert(domain.id, sealed);
        Ok(())
    }

    async fn get_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<Option<Domain>> {
        let st = self.state();
        st.domains.get(&id).filter(|d| d.unopened().workspace_id == workspace).map(|d| self.open(d)).transpose()
    }

    async fn find_domain_by_name(&self, workspace: WorkspaceId, name: &DomainName) -> StoreResult<Option<Domain>> {
        let st = self.state();
        let found = st.domains.values().find(|d| d.unopened().workspace_id == workspace && d.unopened().name == *name);
        found.map(|d| self.open(d)).transpose()
    }

    async fn list_domains(&self, workspace: WorkspaceId, page: PageRequest<DomainId>) -> StoreResult<Page<Domain>> {
        self.open_page(newest_first(&self.state().domains, &page, |d| d.unopened().workspace_id == workspace))
    }

    async fn update_domain(&self, domain: &Domain) -> StoreResult<()> {
        let sealed = self.seal(domain)?;
        let mut st = self.state();
        let stored = st.domains.get_mut(&domain.id).filter(|d| d.unopened().workspace_id == domain.workspace_id);
        let stored = stored.ok_or(StoreError::NotFound)?;
        let old = self.open(stored)?;
        if old.name != domain.name || !old.same_keys(domain) {
            return Err(conflict("a domain's name and keys cannot change"));
        }
        *stored = sealed;
        Ok(())
    }

    async fn update_domain_keys(&self, domain: &Domain, expected: &Domain) -> StoreResult<()> {
        let sealed = self.seal(domain)?;
        let mut st = self.state();
        let stored = st.domains.get_mut(&domain.id).filter(|d| d.unopened().workspace_id == domain.workspace_id);
        let stored = stored.ok_or(StoreError::NotFound)?;
        let old = self.open(stored)?;
        if old.name != domain.name {
            return Err(conflict("a domain's name cannot change"));
        }
        if !old.same_keys(expected) {
            return Err(conflict("the domain's DKIM keys changed meanwhile"));
        }
        *stored = sealed;
        Ok(())
    }

    async fn delete_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<()> {
        let mut st = self.state();
        if st.domains.get(&id).filter(|d| d.unopened().workspace_id == workspace).is_none() {
            return Err(StoreError::NotFound);
        }
        st.domains.remove(&id);
        st.senders.retain(|_, s| s.domain_id != id);
        Ok(())
    }

    async fn list_domains_to_recheck(&self, checked_before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Domain>> {
        let st = self.state();
        let mut due: Vec<&Sealed<Domain>> = st
            .domains
            .values()
            .filter(|d| {
                let d = d.unopened();
                d.needs_recheck() && d.checked_or_created_at() < checked_before
            })
            .collect();
        due.sort_by_key(|d| (d.unopened().checked_or_created_at(), d.unopened().id));
        due.into_iter().take(limit).map(|d| self.open(d)).collect()
    }

    async fn list_domains_to_rotate(&self, made_before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Domain>> {
        let st = self.state();
        let mut due: Vec<(DateTime<Utc>, &Sealed<Domain>)> = st
            .domains
            .values()
            .filter_map(|d| d.unopened().rotation_due_from().filter(|at| *at < made_before).map(|at| (at, d)))
            .collect();
        due.sort_by_key(|(at, d)| (*at, d.unopened().id));
        due.into_iter().take(limit).map(|(_, d)| self.open(d)).collect()
    }

    async fn insert_sender(&self, sender: &Sender) -> StoreResult<()> {
        let mut st = self.state();
        if st.domains.get(&sender.domain_id).filter(|d| d.unopened().workspace_id == sender.workspace_id).is_none() {
            return Err(StoreError::NotFound);
        }
        if st.senders.contains_key(&sender.id) {
            return Err(conflict("sender id exists"));
        }
        if st.sender_of(sender.workspace_id, sender.domain_id, &sender.username).is_some() {
            return Err(StoreError::Conflict(format!("sender {} exists", sender.username)));
        }
        st.senders.insert(sender.id, sender.clone());
        Ok(())
    }

    async fn get_sender(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        username: &SenderUsername,
    ) -> StoreResult<Option<Sender>> {
        Ok(self.state().sender_of(workspace, domain, username).cloned())
    }

    async fn list_senders(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        page: PageRequest<SenderId>,
    ) -> StoreResult<Page<Sender>> {
        Ok(newest_first(&self.state().senders, &page, |s| s.workspace_id == workspace && s.domain_id == domain))
    }

    async fn delete_sender(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        username: &SenderUsername,
    ) -> StoreResult<()> {
        let mut st = self.state();
        let id = st.sender_of(workspace, domain, username).map(|s| s.id).ok_or(StoreError::NotFound)?;
        st.senders.remove(&id);
        Ok(())
    }
}

#[async_trait]
impl TemplateStore for MemoryStore {
    async fn insert_template(&self, template: &Template) -> StoreResult<()> {
        let mut st = self.state();
        if st.templates.contains_key(&template.id) {
            return Err(conflict("template id exists"));
        }
        st.templates.insert(template.id, template.clone());
        Ok(())
    }

    async fn get_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<Option<Template>> {
        Ok(self.state().templates.get(&id).filter(|t| t.workspace_id == workspace).cloned())
    }

    async fn template_ids_named(
        &self,
        workspace: WorkspaceId,
        name: &str,
        limit: usize,
    ) -> StoreResult<Vec<TemplateId>> {
        let st = self.state();
        let mut ids: Vec<TemplateId> =
            st.templates.values().filter(|t| t.workspace_id == workspace && t.name == name).map(|t| t.id).collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        ids.truncate(limit);
        Ok(ids)
    }

    async fn list_templates(
        &self,
        workspace: WorkspaceId,
        page: PageRequest<TemplateId>,
    ) -> StoreResult<Page<Template>> {
        Ok(newest_first(&self.state().templates, &page, |t| t.workspace_id == workspace))
    }

    async fn get_template_version(
        &self,
        workspace: WorkspaceId,
        id: TemplateVersionId,
    ) -> StoreResult<Option<TemplateVersion>> {
        let st = self.state();
        let mut versions = st.templates.values().filter(|t| t.workspace_id == workspace).flat_map(|t| &t.versions);
        Ok(versions.find(|v| v.id == id).cloned())
    }

    async fn add_template_version(
        &self,
        workspace: WorkspaceId,
        template: TemplateId,
        version: NewTemplateVersion,
        make_current: bool,
    ) -> StoreResult<TemplateVersion> {
        let mut st = self.state();
        if st.templates.values().flat_map(|t| &t.versions).any(|v| v.id == version.id) {
            return Err(conflict("template version id exists"));
        }
        let stored = st.template_mut(workspace, template)?;
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
        Ok(added)
    }

    async fn update_template(
        &self,
        workspace: WorkspaceId,
        id: TemplateId,
        change: TemplateChange,
    ) -> StoreResult<Template> {
        let mut st = self.state();
        let stored = st.template_mut(workspace, id)?;
        if let Some(version) = change.current_version_id {
            if !stored.versions.iter().any(|v| v.id == version) {
                return Err(conflict("not a version of this template"));
            }
            stored.current_version_id = version;
        }
        if let Some(name) = change.name {
            stored.name = name;
        }
        Ok(stored.clone())
    }

    async fn delete_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<()> {
        let mut st = self.state();
        st.template_mut(workspace, id)?;
        st.templates.remove(&id);
        Ok(())
    }
}
