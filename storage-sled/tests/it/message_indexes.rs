//! Filtered message lists on buckets larger than the selectivity probe, and over records
//! whose status moved.

use tidings_core::ids::MessageId;
use tidings_core::model::{EventType, MessageStatus};
use tidings_core::ports::{MessageQuery, MessageStore, PageRequest};
use tidings_storage_sled::SledStore;
use tidings_testing::fixtures::{
    api_key, domain, email, event_write, idempotency, message, new_message, now, workspace,
};

/// Walks a query page by page and returns the ids in list order.
async fn walk(store: &SledStore, ws: tidings_core::ids::WorkspaceId, query: &MessageQuery) -> Vec<MessageId> {
    let mut ids = Vec::new();
    let mut query = query.clone();
    loop {
        let page = store.list_messages(ws, &query).await.unwrap();
        ids.extend(page.items.iter().map(|m| m.id));
        if !page.has_more {
            return ids;
        }
        query.page.cursor = ids.last().copied();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn combined_filters_find_the_rare_matches_in_a_large_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
    let ws = workspace();
    let (key, other_key) = (api_key(ws.id), api_key(ws.id));
    let dom = domain(ws.id, "acme.example.com");
    let mut rare = Vec::new();
    let mut rare_sent = Vec::new();
    // 600 Queued messages (more than twice the probe), 1 in 50 to a rare address.
    for n in 0..600 {
        let mut m = message(ws.id, if n % 3 == 0 { other_key.id } else { key.id }, dom.id);
        if n % 50 == 7 {
            m.to = email("Rare@Example.com");
            rare.push(m.clone());
        }
        store.create_message(&new_message(&m)).await.unwrap();
    }
    // Some of the rare ones move on to Sent.
    for m in rare.iter().step_by(2) {
        let write = event_write(m, EventType::Sent, now(), None);
        rare_sent.push(write.message.id);
        store.record_event(write).await.unwrap();
    }
    let newest_first = |mut ids: Vec<MessageId>| {
        ids.sort();
        ids.reverse();
        ids
    };
    let rare_ids: Vec<MessageId> = rare.iter().map(|m| m.id).collect();
    let still_queued: Vec<MessageId> = rare_ids.iter().copied().filter(|id| !rare_sent.contains(id)).collect();
    let by_key: Vec<MessageId> = rare.iter().filter(|m| m.api_key_id == key.id).map(|m| m.id).collect();

    let query = |status, sent_by, limit| MessageQuery {
        status,
        to: Some(email("rare@example.com")),
        sent_by,
        tags: Vec::new(),
        metadata: Vec::new(),
        ..MessageQuery::page(PageRequest { limit, cursor: None })
    };
    for limit in [1, 3, 200] {
        assert_eq!(walk(&store, ws.id, &query(None, None, limit)).await, newest_first(rare_ids.clone()));
        let queued = walk(&store, ws.id, &query(Some(MessageStatus::Queued), None, limit)).await;
        assert_eq!(queued, newest_first(still_queued.clone()), "limit {limit}");
        let sent = walk(&store, ws.id, &query(Some(MessageStatus::Sent), None, limit)).await;
        assert_eq!(sent, newest_first(rare_sent.clone()), "limit {limit}");
        let mine = walk(&store, ws.id, &query(None, Some(key.id), limit)).await;
        assert_eq!(mine, newest_first(by_key.clone()), "limit {limit}");
    }
    let all_queued = MessageQuery {
        status: Some(MessageStatus::Queued),
        to: None,
        sent_by: Some(key.id),
        tags: Vec::new(),
        metadata: Vec::new(),
        ..MessageQuery::page(PageRequest { limit: 50, cursor: None })
    };
    assert_eq!(
        walk(&store, ws.id, &all_queued).await.len(),
        400 - by_key.iter().filter(|id| rare_sent.contains(id)).count()
    );
}

/// A create's trigram entries go in before its locked write (`search_index.rs`); a create
/// refused as an idempotent replay takes them out again, so replays leave nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_replay_leaves_no_search_entries() {
    use tidings_core::message_search::SearchText;
    use tidings_core::ports::CreateOutcome;

    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
    let ws = workspace();
    let key = api_key(ws.id);
    let dom = domain(ws.id, "acme.example.com");
    let mut first = message(ws.id, key.id, dom.id);
    first.subject = "Quokka newsletter".into();
    let record = idempotency(ws.id, "replayed-key", first.id, now(), now() + chrono::Duration::hours(24));
    let mut new = new_message(&first);
    new.idempotency = Some(record.clone());
    assert!(matches!(store.create_message(&new).await.unwrap(), CreateOutcome::Created));
    // The same key again, with a message of its own (a new id, another subject).
    let mut replay = message(ws.id, key.id, dom.id);
    replay.subject = "Wombat newsletter".into();
    let mut new = new_message(&replay);
    new.idempotency = Some(record);
    assert!(matches!(store.create_message(&new).await.unwrap(), CreateOutcome::Duplicate(_)));

    let search = |text: &str| {
        let mut query = MessageQuery::page(PageRequest::first(10));
        query.text = Some(SearchText::parse(text).unwrap());
        query
    };
    let found = store.list_messages(ws.id, &search("quokka")).await.unwrap();
    assert_eq!(found.items.iter().map(|m| m.id).collect::<Vec<_>>(), [first.id]);
    assert!(store.list_messages(ws.id, &search("wombat")).await.unwrap().items.is_empty());
    drop(store);

    // In the files: entries name the stored message, none the replayed one.
    let db = crate::sealing::once_unlocked(|| crate::sealing::open_sled(dir.path())).await.unwrap();
    let tree = db.open_tree("tidings").unwrap();
    let naming =
        |id: MessageId| tree.scan_prefix([0x15]).filter(|e| e.as_ref().unwrap().0.ends_with(&id.to_bytes())).count();
    assert!(naming(first.id) > 10, "the stored message has its trigram entries");
    assert_eq!(naming(replay.id), 0, "the replay's entries were taken out");
}
