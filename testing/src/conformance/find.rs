//! `find_message`: the lookup by id alone that inbound bounce and complaint reports need.

use std::sync::Arc;

use super::Must;
use super::messages::{advance, put};
use crate::fixtures::{message, ulid};
use tidings_core::ids::{ApiKeyId, DomainId, MessageId, WorkspaceId};
use tidings_core::model::{EventType, MessageStatus};
use tidings_core::ports::Store;

pub(super) async fn messages_are_found_by_id_in_any_workspace<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let in_a = message(a, ApiKeyId(ulid()), DomainId(ulid()));
    let in_b = message(b, ApiKeyId(ulid()), DomainId(ulid()));
    put(&*s, &in_a).await;
    put(&*s, &in_b).await;

    assert_eq!(s.find_message(in_a.id).await.must("find in a"), Some(in_a.clone()), "found in its workspace a");
    assert_eq!(s.find_message(in_b.id).await.must("find in b"), Some(in_b.clone()), "found in its workspace b");
    assert_eq!(s.find_message(MessageId(ulid())).await.must("find unknown"), None, "an unknown id finds nothing");

    let sent = advance(&*s, &in_a, EventType::Sent).await;
    let found = s.find_message(in_a.id).await.must("find after an event");
    assert_eq!(found.as_ref().map(|m| m.status), Some(MessageStatus::Sent), "the current state, not the first");
    assert_eq!(found, Some(sent), "the message as get_message would return it");
}
