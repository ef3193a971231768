//! Domains (`DOMAIN ‖ ws ‖ id`, unique by name through `DOMAIN_BY_NAME`) and their senders
//! (`SENDER ‖ ws ‖ domain ‖ id`, unique by lower-cased username through `SENDER_BY_NAME`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tidings_core::domain_name::DomainName;
use tidings_core::ids::{DomainId, SenderId, WorkspaceId};
use tidings_core::model::{Domain, Sender, SenderUsername};
use tidings_core::ports::{DomainStore, Page, PageRequest, StoreError, StoreResult};
use tidings_core::sealing::Sealed;

use crate::SledStore;
use crate::codec::{decode, decode_id, encode, sled_error};
use crate::db::{Order, page};
use crate::layout::{self, Key};
use crate::sealing::{decode_sealed, encode_sealed, seal_error};

fn name_key(ws: WorkspaceId, name: &DomainName) -> Vec<u8> {
    // DomainName is lower-case by construction; lower-casing again costs nothing and keeps
    // the index right should that ever change.
    Key::new(layout::DOMAIN_BY_NAME).id(ws.to_bytes()).raw(name.as_str().to_ascii_lowercase().as_bytes()).0
}

fn senders_of(ws: WorkspaceId, domain: DomainId) -> Key {
    Key::new(layout::SENDER).id(ws.to_bytes()).id(domain.to_bytes())
}

fn sender_name_key(ws: WorkspaceId, domain: DomainId, username: &SenderUsername) -> Vec<u8> {
    Key::new(layout::SENDER_BY_NAME)
        .id(ws.to_bytes())
        .id(domain.to_bytes())
        .raw(username.as_str().to_ascii_lowercase().as_bytes())
        .0
}

impl SledStore {
    /// The domain stored under `key`, its keys opened.
    fn domain(&self, key: &[u8]) -> StoreResult<Option<Domain>> {
        let Some(bytes) = self.inner.tree()?.get(key).map_err(sled_error)? else { return Ok(None) };
        let decode = |bytes: &[u8]| decode_sealed(&self.sealer, bytes, "domain");
        self.domains.get_or_decode(key, bytes, decode).map(Some)
    }
}

#[async_trait]
impl DomainStore for SledStore {
    async fn insert_domain(&self, domain: &Domain) -> StoreResult<()> {
        let key = layout::domain(domain.workspace_id, domain.id).0;
        let name = name_key(domain.workspace_id, &domain.name);
        let value = encode_sealed(&self.sealer, domain)?;
        self.inner
            .write_durable(|tree, batch| {
                if tree.contains_key(&name).map_err(sled_error)? {
                    return Err(StoreError::Conflict(format!("domain {} is already added", domain.name.as_str())));
                }
                if tree.contains_key(&key).map_err(sled_error)? {
                    return Err(StoreError::Conflict(format!("domain {} exists", domain.id)));
                }
                batch.insert(name, &domain.id.to_bytes());
                batch.insert(key, value);
                Ok(())
            })
            .await
    }

    async fn get_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<Option<Domain>> {
        self.domain(&layout::domain(workspace, id).0)
    }

    async fn find_domain_by_name(&self, workspace: WorkspaceId, name: &DomainName) -> StoreResult<Option<Domain>> {
        let Some(id) = self.inner.tree()?.get(name_key(workspace, name)).map_err(sled_error)? else {
            return Ok(None);
        };
        let id = DomainId::from_bytes(decode_id(&id, "domain name index")?);
        self.domain(&layout::domain(workspace, id).0)
    }

    async fn list_domains(&self, workspace: WorkspaceId, page_req: PageRequest<DomainId>) -> StoreResult<Page<Domain>> {
        let prefix = Key::new(layout::DOMAIN).id(workspace.to_bytes()).0;
        let cursor = page_req.cursor.map(DomainId::to_bytes);
        page(
            self.inner.tree()?,
            &prefix,
            cursor.as_ref().map(|c| &c[..]),
            page_req.limit,
            Order::NewestFirst,
            |_, v| decode_sealed(&self.sealer, &v, "domain").map(Some),
        )
    }

    async fn update_domain(&self, domain: &Domain) -> StoreResult<()> {
        let key = layout::domain(domain.workspace_id, domain.id).0;
        let value = encode_sealed(&self.sealer, domain)?;
        self.inner
            .write_durable(|tree, batch| {
                let old = tree.get(&key).map_err(sled_error)?.ok_or(StoreError::NotFound)?;
                let old: Domain = decode_sealed(&self.sealer, &old, "domain")?;
                if old.name != domain.name || !old.same_keys(domain) {
                    // The trait forbids it (and the name index would go stale): refuse loudly.
                    return Err(StoreError::Conflict("a domain's name and keys cannot change".into()));
                }
                batch.insert(key, value);
                Ok(())
            })
            .await
    }

    async fn update_domain_keys(&self, domain: &Domain, expected: &Domain) -> StoreResult<()> {
        let key = layout::domain(domain.workspace_id, domain.id).0;
        let value = encode_sealed(&self.sealer, domain)?;
        // `write_durable` runs its closure under the writer lock: read, compare and write are
        // one step that no other write can come between.
        self.inner
            .write_durable(|tree, batch| {
                let old = tree.get(&key).map_err(sled_error)?.ok_or(StoreError::NotFound)?;
                let old: Domain = decode_sealed(&self.sealer, &old, "domain")?;
                if old.name != domain.name {
                    return Err(StoreError::Conflict("a domain's name cannot change".into()));
                }
                if !old.same_keys(expected) {
                    return Err(StoreError::Conflict("the domain's DKIM keys changed meanwhile".into()));
                }
                batch.insert(key, value);
                Ok(())
            })
            .await
    }

    async fn delete_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<()> {
        let key = layout::domain(workspace, id).0;
        self.inner
            .write_durable(|tree, batch| {
                let old: Sealed<Domain> = crate::db::get(tree, &key, "domain")?.ok_or(StoreError::NotFound)?;
                batch.remove(key);
                batch.remove(name_key(workspace, &old.unopened().name));
                for entry in tree.scan_prefix(senders_of(workspace, id).0) {
                    let (sender_key, value) = entry.map_err(sled_error)?;
                    let sender: Sender = decode(&value, "sender")?;
                    batch.remove(sender_name_key(workspace, id, &sender.username));
                    batch.remove(sender_key);
                }
                Ok(())
            })
            .await
    }

    async fn list_domains_to_recheck(&self, checked_before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Domain>> {
        // A scan of every domain record: domains are few and this runs every few minutes,
        // so an index on the last check is not worth its upkeep on every update.
        let mut due = Vec::new();
        for entry in self.inner.tree()?.scan_prefix(Key::new(layout::DOMAIN).0) {
            let (_, value) = entry.map_err(sled_error)?;
            let stored: Sealed<Domain> = decode(&value, "domain")?;
            let domain = stored.unopened();
            if domain.needs_recheck() && domain.checked_or_created_at() < checked_before {
                due.push(stored);
            }
        }
        due.sort_by_key(|d| (d.unopened().checked_or_created_at(), d.unopened().id));
        due.truncate(limit);
        // Opened only once chosen: the scan reads every domain.
        due.into_iter().map(|d| self.sealer.open_record(d).map_err(seal_error)).collect()
    }

    async fn list_domains_to_rotate(&self, made_before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Domain>> {
        // A scan, as for re-checks: it runs with them, every few minutes, and only when the
        // operator turned automatic rotation on.
        let mut due = Vec::new();
        for entry in self.inner.tree()?.scan_prefix(Key::new(layout::DOMAIN).0) {
            let (_, value) = entry.map_err(sled_error)?;
            let stored: Sealed<Domain> = decode(&value, "domain")?;
            if let Some(at) = stored.unopened().rotation_due_from().filter(|at| *at < made_before) {
                due.push((at, stored));
            }
        }
        due.sort_by_key(|(at, d)| (*at, d.unopened().id));
        due.truncate(limit);
        due.into_iter().map(|(_, d)| self.sealer.open_record(d).map_err(seal_error)).collect()
    }

    async fn insert_sender(&self, sender: &Sender) -> StoreResult<()> {
        let (ws, domain) = (sender.workspace_id, sender.domain_id);
        let key = senders_of(ws, domain).id(sender.id.to_bytes()).0;
        let name = sender_name_key(ws, domain, &sender.username);
        let value = encode(sender)?;
        self.inner
            .write_durable(|tree, batch| {
                if !tree.contains_key(layout::domain(ws, domain).0).map_err(sled_error)? {
                    return Err(StoreError::NotFound);
                }
                if tree.contains_key(&name).map_err(sled_error)? || tree.contains_key(&key).map_err(sled_error)? {
                    return Err(StoreError::Conflict(format!("sender {} exists", sender.username)));
                }
                batch.insert(name, &sender.id.to_bytes());
                batch.insert(key, value);
                Ok(())
            })
            .await
    }

    async fn get_sender(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        username: &SenderUsername,
    ) -> StoreResult<Option<Sender>> {
        let Some(id) = self.inner.tree()?.get(sender_name_key(workspace, domain, username)).map_err(sled_error)? else {
            return Ok(None);
        };
        let id = SenderId::from_bytes(decode_id(&id, "sender name index")?);
        self.inner.get(&senders_of(workspace, domain).id(id.to_bytes()).0, "sender")
    }

    async fn list_senders(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        page_req: PageRequest<SenderId>,
    ) -> StoreResult<Page<Sender>> {
        let prefix = senders_of(workspace, domain).0;
        let cursor = page_req.cursor.map(SenderId::to_bytes);
        page(
            self.inner.tree()?,
            &prefix,
            cursor.as_ref().map(|c| &c[..]),
            page_req.limit,
            Order::NewestFirst,
            |_, v| decode(&v, "sender").map(Some),
        )
    }

    async fn delete_sender(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        username: &SenderUsername,
    ) -> StoreResult<()> {
        let name = sender_name_key(workspace, domain, username);
        self.inner
            .write_durable(|tree, batch| {
                let id = tree.get(&name).map_err(sled_error)?.ok_or(StoreError::NotFound)?;
                let id = SenderId::from_bytes(decode_id(&id, "sender name index")?);
                batch.remove(senders_of(workspace, domain).id(id.to_bytes()).0);
                batch.remove(name);
                Ok(())
            })
            .await
    }
}
