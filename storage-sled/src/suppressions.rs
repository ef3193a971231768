//! The suppression list: `SUPPRESSION ‖ ws ‖ normalized address` (the lookup every send
//! makes), plus `by id` and `by reason ‖ id` indexes whose values are the address, so lists
//! walk newest first in O(limit) with or without a reason filter.

use async_trait::async_trait;
use tidings_core::email::EmailAddress;
use tidings_core::ids::{SuppressionId, WorkspaceId};
use tidings_core::model::{Suppression, SuppressionReason};
use tidings_core::ports::{Page, PageRequest, StoreError, StoreResult, SuppressionStore};

use crate::SledStore;
use crate::codec::{bad_key, encode, sled_error};
use crate::db::{Order, get, page};
use crate::layout::{self, Key};

fn address_key(ws: WorkspaceId, normalized: &str) -> Vec<u8> {
    Key::new(layout::SUPPRESSION).id(ws.to_bytes()).raw(normalized.as_bytes()).0
}

fn id_key(ws: WorkspaceId, id: SuppressionId) -> Vec<u8> {
    Key::new(layout::SUPPRESSION_BY_ID).id(ws.to_bytes()).id(id.to_bytes()).0
}

fn reason_prefix(ws: WorkspaceId, reason: SuppressionReason) -> Key {
    Key::new(layout::SUPPRESSION_BY_REASON).id(ws.to_bytes()).byte(layout::reason_code(reason))
}

#[async_trait]
impl SuppressionStore for SledStore {
    async fn insert_suppression(&self, suppression: &Suppression) -> StoreResult<(Suppression, bool)> {
        let ws = suppression.workspace_id;
        let normalized = suppression.email.normalized();
        let key = address_key(ws, &normalized);
        let value = encode(suppression)?;
        self.inner
            .write_durable(|tree, batch| {
                if let Some(existing) = get::<Suppression>(tree, &key, "suppression")? {
                    return Ok((existing, false));
                }
                if tree.contains_key(id_key(ws, suppression.id)).map_err(sled_error)? {
                    return Err(StoreError::Conflict(format!("suppression {} exists", suppression.id)));
                }
                batch.insert(id_key(ws, suppression.id), normalized.as_bytes());
                batch.insert(
                    reason_prefix(ws, suppression.reason).id(suppression.id.to_bytes()).0,
                    normalized.as_bytes(),
                );
                batch.insert(key, value);
                Ok((suppression.clone(), true))
            })
            .await
    }

    async fn get_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<Option<Suppression>> {
        self.inner.get(&address_key(workspace, &email.normalized()), "suppression")
    }

    async fn list_suppressions(
        &self,
        workspace: WorkspaceId,
        reason: Option<SuppressionReason>,
        page_req: PageRequest<SuppressionId>,
    ) -> StoreResult<Page<Suppression>> {
        let tree = self.inner.tree()?;
        let prefix = match reason {
            Some(reason) => reason_prefix(workspace, reason).0,
            None => Key::new(layout::SUPPRESSION_BY_ID).id(workspace.to_bytes()).0,
        };
        let cursor = page_req.cursor.map(SuppressionId::to_bytes);
        page(tree, &prefix, cursor.as_ref().map(|c| &c[..]), page_req.limit, Order::NewestFirst, |key, address| {
            let id = layout::trailing_id(key).ok_or_else(|| bad_key("suppression index"))?;
            let address = std::str::from_utf8(&address).map_err(|_| bad_key("suppression index"))?;
            let entry: Option<Suppression> = get(tree, &address_key(workspace, address), "suppression")?;
            // Deleted and re-added since the index was read: that entry is listed under its own id.
            Ok(entry.filter(|s| s.id.to_bytes() == id))
        })
    }

    async fn delete_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<()> {
        let key = address_key(workspace, &email.normalized());
        self.inner
            .write_durable(|tree, batch| {
                let existing: Suppression = get(tree, &key, "suppression")?.ok_or(StoreError::NotFound)?;
                batch.remove(id_key(workspace, existing.id));
                batch.remove(reason_prefix(workspace, existing.reason).id(existing.id.to_bytes()).0);
                batch.remove(key);
                Ok(())
            })
            .await
    }
}
