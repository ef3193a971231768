//! Messages, their timelines and the status index.

use std::sync::Arc;

use super::{Lister, Must, assert_conflict, assert_not_found, lister, walk_all_sizes, walk_pages};
use crate::fixtures::{delivery, email, event_write, idempotency, message, new_message, now, plus_secs, ulid, webhook};
use tidings_core::email::EmailAddress;
use tidings_core::ids::{ApiKeyId, DomainId, EventId, MessageId, WebhookId, WorkspaceId};
use tidings_core::model::{EventType, Message, MessageEvent, MessageStatus, WebhookDelivery, WebhookEventType};
use tidings_core::ports::{CreateOutcome, EndpointQuota, MessageQuery, PageRequest, Store};

/// Three fresh ids a message needs.
fn ids() -> (WorkspaceId, ApiKeyId, DomainId) {
    (WorkspaceId(ulid()), ApiKeyId(ulid()), DomainId(ulid()))
}

/// Stores `m` with its `Queued` event and checks it was created.
pub(super) async fn put<S: Store>(s: &S, m: &Message) {
    let outcome = s.create_message(&new_message(m)).await.must("create_message");
    assert_eq!(outcome, CreateOutcome::Created, "create_message of a new message without a key");
}

/// Applies `event_type` to the stored `m` through the state machine and returns the message
/// as it is now.
pub(super) async fn advance<S: Store>(s: &S, m: &Message, event_type: EventType) -> Message {
    let write = event_write(m, event_type, plus_secs(m.updated_at, 1), None);
    let after = write.message.clone();
    s.record_event(write).await.must("record_event");
    after
}

fn message_lister<S: Store + 'static>(
    s: &Arc<S>,
    ws: WorkspaceId,
    status: Option<MessageStatus>,
    to: Option<EmailAddress>,
    sent_by: Option<ApiKeyId>,
) -> Lister<MessageId, Message> {
    let s = Arc::clone(s);
    Box::new(move |page| {
        let (s, to) = (Arc::clone(&s), to.clone());
        Box::pin(
            async move { s.list_messages(ws, &MessageQuery { status, to, sent_by, ..MessageQuery::page(page) }).await },
        )
    })
}

fn first_page(limit: usize) -> MessageQuery {
    MessageQuery::page(PageRequest::first(limit))
}

pub(super) async fn messages_round_trip_with_their_queued_event<S: Store + 'static>(s: Arc<S>) {
    let (a, key, dom) = ids();
    let b = WorkspaceId(ulid());
    let mut m = message(a, key, dom);
    m.to = email("Mixed.Case@Example.com");
    let new = new_message(&m);
    let queued = new.event.clone();
    assert_eq!(s.create_message(&new).await.must("create_message"), CreateOutcome::Created, "create_message");

    assert_eq!(s.get_message(a, m.id).await.must("get_message"), Some(m.clone()), "get_message round trip");
    assert_eq!(s.get_message(b, m.id).await.must("get from b"), None, "another workspace does not see the message");
    assert_eq!(s.get_message(a, MessageId(ulid())).await.must("get unknown"), None, "unknown message");
    let events = s.list_events(a, m.id, PageRequest::first(10)).await.must("list_events");
    assert_eq!(events.items, vec![queued], "the timeline holds the Queued event");
    assert!(!events.has_more, "has_more of a one-event timeline");
    assert_not_found(s.list_events(b, m.id, PageRequest::first(10)).await, "list_events from another workspace");
    assert_not_found(s.list_events(a, MessageId(ulid()), PageRequest::first(10)).await, "list_events unknown");

    let mut again = new_message(&m);
    again.message.subject = "changed".to_owned();
    assert_conflict(s.create_message(&again).await, "create_message with an existing id");
    assert_eq!(s.get_message(a, m.id).await.must("get"), Some(m.clone()), "a refused create changes nothing");
    let events = s.list_events(a, m.id, PageRequest::first(10)).await.must("list_events");
    assert_eq!(events.items.len(), 1, "a refused create appends no event");
}

pub(super) async fn message_lists_page_newest_first<S: Store + 'static>(s: Arc<S>) {
    let (a, key, dom) = ids();
    let b = WorkspaceId(ulid());
    let mut made = Vec::new();
    let mut between = None;
    for i in 0..7 {
        let m = message(a, key, dom);
        put(&*s, &m).await;
        made.push(m.id);
        if i % 3 == 0 {
            put(&*s, &message(b, key, dom)).await;
        }
        if i == 3 {
            between = Some(MessageId(ulid()));
        }
    }
    let expected: Vec<MessageId> = made.iter().rev().copied().collect();
    let list = message_lister(&s, a, None, None, None);
    walk_all_sizes("list_messages", &list, |m: &Message| m.id, &expected).await;

    // A cursor is an id, not necessarily one of a listed item: the page starts strictly after it.
    let page = list(PageRequest { limit: 10, cursor: between }).await.must("list after a bare id");
    let ids: Vec<MessageId> = page.items.iter().map(|m| m.id).collect();
    assert_eq!(ids, expected[3..], "the page after a cursor id that is no message");

    let other = s.list_messages(WorkspaceId(ulid()), &first_page(5)).await.must("list empty workspace");
    assert!(other.items.is_empty() && !other.has_more, "a workspace without messages lists nothing");
}

pub(super) async fn message_filters_combine<S: Store + 'static>(s: Arc<S>) {
    let (a, k1, dom) = ids();
    let (k2, b) = (ApiKeyId(ulid()), WorkspaceId(ulid()));
    // (key, recipient, advance to Sent?)
    let plan = [
        (k1, "Alice@Example.com", false),
        (k2, "alice@example.com", false),
        (k1, "bob@example.com", false),
        (k1, "ALICE@example.com", true),
        (k2, "Bob@example.com", true),
        (k1, "alice@example.com", false),
    ];
    let mut made = Vec::new();
    for (key, to, sent) in plan {
        let mut m = message(a, key, dom);
        m.to = email(to);
        put(&*s, &m).await;
        if sent {
            m = advance(&*s, &m, EventType::Sent).await;
        }
        let mut noise = message(b, key, dom);
        noise.to = email(to);
        put(&*s, &noise).await;
        made.push(m);
    }
    let statuses = [None, Some(MessageStatus::Queued), Some(MessageStatus::Sent), Some(MessageStatus::Delivered)];
    let recipients = [None, Some(email("aLiCe@example.com")), Some(email("BOB@example.com"))];
    for status in statuses {
        for to in &recipients {
            for sent_by in [None, Some(k1), Some(k2)] {
                let expected: Vec<MessageId> = made
                    .iter()
                    .rev()
                    .filter(|m| status.is_none_or(|st| m.status == st))
                    .filter(|m| to.as_ref().is_none_or(|to| m.to.normalized() == to.normalized()))
                    .filter(|m| sent_by.is_none_or(|k| m.api_key_id == k))
                    .map(|m| m.id)
                    .collect();
                let what = format!("list_messages status={status:?} to={to:?} sent_by={sent_by:?}");
                let list = message_lister(&s, a, status, to.clone(), sent_by);
                for limit in [1, 2, 10] {
                    walk_pages(&what, &list, |m: &Message| m.id, limit, &expected).await;
                }
            }
        }
    }
}

pub(super) async fn status_filter_follows_recorded_events<S: Store + 'static>(s: Arc<S>) {
    let (a, key, dom) = ids();
    let mut made = Vec::new();
    for _ in 0..4 {
        let m = message(a, key, dom);
        put(&*s, &m).await;
        made.push(m);
    }
    let by_status = |status| message_lister(&s, a, Some(status), None, None);
    let sent = advance(&*s, &made[1], EventType::Sent).await;
    let queued_ids = [made[3].id, made[2].id, made[0].id];
    walk_pages("Queued after one Sent", &by_status(MessageStatus::Queued), |m| m.id, 2, &queued_ids).await;
    walk_pages("Sent after one Sent", &by_status(MessageStatus::Sent), |m| m.id, 2, &[sent.id]).await;
    let delivered = advance(&*s, &sent, EventType::Delivered).await;
    walk_pages("Sent after Delivered", &by_status(MessageStatus::Sent), |m| m.id, 2, &[]).await;
    walk_pages("Delivered", &by_status(MessageStatus::Delivered), |m| m.id, 2, &[delivered.id]).await;

    // The cursor's own message changing status does not break paging.
    let first = by_status(MessageStatus::Queued)(PageRequest::first(2)).await.must("first Queued page");
    assert_eq!(first.items.iter().map(|m| m.id).collect::<Vec<_>>(), queued_ids[..2], "first Queued page");
    advance(&*s, &made[2], EventType::Sent).await;
    let next = by_status(MessageStatus::Queued)(PageRequest { limit: 2, cursor: Some(made[2].id) }).await;
    let next = next.must("next Queued page");
    assert_eq!(next.items.iter().map(|m| m.id).collect::<Vec<_>>(), [made[0].id], "page after a moved cursor");
    assert!(!next.has_more, "has_more after a moved cursor");
}

pub(super) async fn record_event_checks_the_expected_status<S: Store + 'static>(s: Arc<S>) {
    let (a, key, dom) = ids();
    let b = WorkspaceId(ulid());
    let m = message(a, key, dom);
    put(&*s, &m).await;

    let mut wrong = event_write(&m, EventType::Sent, plus_secs(m.created_at, 1), None);
    wrong.expected_status = MessageStatus::Deferred;
    assert_conflict(s.record_event(wrong).await, "record_event with a wrong expected_status");
    assert_eq!(s.get_message(a, m.id).await.must("get"), Some(m.clone()), "a refused event changes nothing");
    let events = s.list_events(a, m.id, PageRequest::first(10)).await.must("list_events");
    assert_eq!(events.items.len(), 1, "a refused event is not appended");

    let unknown = message(a, key, dom);
    assert_not_found(
        s.record_event(event_write(&unknown, EventType::Sent, now(), None)).await,
        "record_event on a message that was never created",
    );
    let mut foreign = m.clone();
    foreign.workspace_id = b;
    assert_not_found(
        s.record_event(event_write(&foreign, EventType::Sent, now(), None)).await,
        "record_event naming another workspace",
    );
    assert_eq!(s.get_message(a, m.id).await.must("get"), Some(m.clone()), "a foreign event changes nothing");

    // Two workers read Queued; the second to write loses.
    let first = event_write(&m, EventType::Sent, plus_secs(m.created_at, 1), None);
    let second = event_write(&m, EventType::Failed, plus_secs(m.created_at, 1), None);
    let after = first.message.clone();
    s.record_event(first).await.must("record_event Sent");
    assert_conflict(s.record_event(second).await, "a second write expecting the old status");
    assert_eq!(s.get_message(a, after.id).await.must("get"), Some(after.clone()), "the message is as written");
    let events = s.list_events(a, m.id, PageRequest::first(10)).await.must("list_events");
    let types: Vec<EventType> = events.items.iter().map(|e| e.event_type).collect();
    assert_eq!(types, [EventType::Queued, EventType::Sent], "the timeline after one winning write");
}

/// `expected_last_event_id`: of two writes that read the same message, whatever their
/// events, the second fails once the first recorded anything, also when neither changes the
/// status (two opens); a write expecting the current last event succeeds, and the tracking
/// tally it carries is stored with the message.
pub(super) async fn record_event_checks_the_expected_last_event<S: Store + 'static>(s: Arc<S>) {
    use tidings_core::tracking::{Engagement, TrackedUrl};

    let (a, key, dom) = ids();
    let m = message(a, key, dom);
    put(&*s, &m).await;
    let delivered = advance(&*s, &advance(&*s, &m, EventType::Sent).await, EventType::Delivered).await;

    let open = |read: &Message| {
        let mut write = event_write(read, EventType::Opened, plus_secs(read.updated_at, 1), None);
        write.expected_last_event_id = Some(read.last_event_id);
        write.message.tracking_tally = read.tracking_tally.keep(Engagement::Open, 0).expect("room for an open");
        write
    };
    let first = open(&delivered);
    let second = open(&delivered);
    let after = first.message.clone();
    s.record_event(first).await.must("the first open");
    assert_conflict(s.record_event(second).await, "a second open read before the first was recorded");
    let stored = s.get_message(a, m.id).await.must("get").expect("the message");
    assert_eq!(stored, after, "the message is as the first open wrote it");
    assert_eq!(stored.tracking_tally.opens, 1, "the tally is stored with the message");

    let url = TrackedUrl::parse("https://shop.example/a").expect("a URL");
    let mut click = event_write(&stored, EventType::Clicked, plus_secs(stored.updated_at, 1), None);
    click.expected_last_event_id = Some(stored.last_event_id);
    click.message.tracking_tally = stored.tracking_tally.keep(Engagement::Click(&url), 0).expect("room for a click");
    let expected = click.message.clone();
    s.record_event(click).await.must("a click expecting the current last event");
    assert_eq!(
        s.get_message(a, m.id).await.must("get"),
        Some(expected.clone()),
        "the tally holds the open and the link"
    );

    // A write that does not ask (a delivery outcome) is not held to it.
    let mut late = event_write(&delivered, EventType::Complained, plus_secs(delivered.updated_at, 5), None);
    late.expected_last_event_id = None;
    s.record_event(late).await.must("a write without expected_last_event_id");
    let stored = s.get_message(a, m.id).await.must("get").expect("the message");
    assert_eq!(
        stored.tracking_tally, expected.tracking_tally,
        "a write without expected_last_event_id keeps the stored tally, not the one it read"
    );
    let events = s.list_events(a, m.id, PageRequest::first(10)).await.must("list_events");
    let types: Vec<EventType> = events.items.iter().map(|e| e.event_type).collect();
    assert_eq!(
        types,
        [
            EventType::Queued,
            EventType::Sent,
            EventType::Delivered,
            EventType::Opened,
            EventType::Clicked,
            EventType::Complained
        ],
        "the refused open is not appended"
    );
}

pub(super) async fn events_page_oldest_first<S: Store + 'static>(s: Arc<S>) {
    let (a, key, dom) = ids();
    let (m, other) = (message(a, key, dom), message(a, key, dom));
    let new = new_message(&m);
    let mut expected: Vec<EventId> = vec![new.event.id];
    s.create_message(&new).await.must("create_message");
    put(&*s, &other).await;
    let mut current = m.clone();
    let steps = [
        EventType::Sent,
        EventType::Deferred,
        EventType::Sent,
        EventType::Delivered,
        EventType::Opened,
        EventType::Clicked,
    ];
    for (i, event_type) in steps.into_iter().enumerate() {
        let retry = (event_type == EventType::Deferred).then(|| plus_secs(current.updated_at, 60));
        let write = event_write(&current, event_type, plus_secs(current.updated_at, 1), retry);
        expected.push(write.event.id);
        current = write.message.clone();
        s.record_event(write).await.must("record_event");
        if i == 2 {
            advance(&*s, &other, EventType::Sent).await;
        }
    }
    let list = lister!(s, |page| list_events(a, m.id, page));
    walk_all_sizes("list_events", &list, |e: &MessageEvent| e.id, &expected).await;
    let all = list(PageRequest::first(20)).await.must("list_events");
    assert!(all.items.iter().all(|e| e.message_id == m.id), "list_events shows only this message's events");
    assert_eq!(s.get_message(a, m.id).await.must("get"), Some(current), "the message after every event");
}

/// A delivery of an event of `m`, due `due_in` seconds after `m` was created.
fn message_delivery(ws: WorkspaceId, endpoint: WebhookId, m: &Message, due_in: i64) -> WebhookDelivery {
    WebhookDelivery {
        message_id: Some(m.id),
        event_type: WebhookEventType::Message(EventType::Queued),
        next_attempt_at: Some(plus_secs(m.created_at, due_in)),
        ..delivery(ws, endpoint)
    }
}

pub(super) async fn events_and_messages_queue_webhook_deliveries<S: Store + 'static>(s: Arc<S>) {
    let (a, key, dom) = ids();
    let w = webhook(a);
    s.insert_webhook(&w).await.must("insert_webhook");
    let m = message(a, key, dom);
    let d1 = message_delivery(a, w.id, &m, 1);
    let mut new = new_message(&m);
    new.webhook_deliveries = vec![d1.clone()];
    new.idempotency = Some(idempotency(a, "k1", m.id, m.created_at, plus_secs(m.created_at, 3600)));
    s.create_message(&new).await.must("create_message with a delivery");
    assert_eq!(s.get_webhook_delivery(a, d1.id).await.must("get d1"), Some(d1.clone()), "created with the message");

    let dup = message(a, key, dom);
    let d_dup = message_delivery(a, w.id, &dup, 1);
    let mut new = new_message(&dup);
    new.webhook_deliveries = vec![d_dup.clone()];
    new.idempotency = Some(idempotency(a, "k1", dup.id, dup.created_at, plus_secs(dup.created_at, 3600)));
    let outcome = s.create_message(&new).await.must("duplicate create_message");
    assert!(matches!(outcome, CreateOutcome::Duplicate(_)), "a reused key is a Duplicate, got {outcome:?}");
    assert_eq!(s.get_webhook_delivery(a, d_dup.id).await.must("get"), None, "a Duplicate queues no delivery");

    let mut write = event_write(&m, EventType::Sent, plus_secs(m.created_at, 1), None);
    let d2 = WebhookDelivery { event_id: write.event.id, ..message_delivery(a, w.id, &m, 2) };
    write.webhook_deliveries = vec![d2.clone()];
    let after = write.message.clone();
    s.record_event(write).await.must("record_event with a delivery");
    let mut stale = event_write(&m, EventType::Failed, plus_secs(m.created_at, 2), None);
    let d3 = message_delivery(a, w.id, &m, 3);
    stale.webhook_deliveries = vec![d3.clone()];
    assert_conflict(s.record_event(stale).await, "stale record_event");
    assert_eq!(s.get_webhook_delivery(a, d3.id).await.must("get d3"), None, "a refused event queues no delivery");

    let list = lister!(s, |page| list_webhook_deliveries(a, w.id, page));
    walk_all_sizes("deliveries of message events", &list, |d: &WebhookDelivery| d.id, &[d2.id, d1.id]).await;
    let claimed = s
        .claim_due_webhook_deliveries(
            plus_secs(m.created_at, 60),
            plus_secs(m.created_at, 120),
            10,
            &EndpointQuota::unlimited(),
        )
        .await;
    let claimed: Vec<_> = claimed.must("claim deliveries").into_iter().map(|d| d.id).collect();
    assert_eq!(claimed, [d1.id, d2.id], "queued deliveries are due, earliest first");
    assert_eq!(s.get_message(a, m.id).await.must("get"), Some(after), "the message after the event");
}

/// A message with tags `tags`, metadata `metadata` and one of each other extra.
fn labelled(
    ws: WorkspaceId,
    key: ApiKeyId,
    dom: DomainId,
    tags: &[(&str, &str)],
    metadata: &[(&str, &str)],
) -> Message {
    use tidings_core::model::extras::{Attachment, CustomHeader, Metadata, Tag};
    let mut m = message(ws, key, dom);
    m.extras.tags = tags.iter().map(|(n, v)| Tag::parse(n, v).expect("a valid tag")).collect();
    m.extras.metadata = Metadata::parse(metadata.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
        .expect("valid metadata");
    m.extras.reply_to = vec![email("help@example.com")];
    m.extras.headers = vec![CustomHeader::parse("X-Campaign", "spring").expect("a valid header")];
    m.extras.attachments = vec![Attachment::parse("a.pdf", "application/pdf", "JVBERg==", None).expect("valid")];
    m
}

pub(super) async fn message_extras_round_trip_and_lists_filter_by_tags_and_metadata<S: Store + 'static>(s: Arc<S>) {
    let (a, key, dom) = ids();
    let b = WorkspaceId(ulid());
    let pro = labelled(a, key, dom, &[("plan", "pro"), ("beta", "")], &[("order", "1")]);
    put(&*s, &pro).await;
    let free = labelled(a, key, dom, &[("plan", "free")], &[("order", "2"), ("region", "eu")]);
    put(&*s, &free).await;
    let plain = message(a, key, dom);
    put(&*s, &plain).await;
    let elsewhere = labelled(b, ApiKeyId(ulid()), DomainId(ulid()), &[("plan", "pro")], &[("order", "1")]);
    put(&*s, &elsewhere).await;
    assert_eq!(s.get_message(a, pro.id).await.must("get_message"), Some(pro.clone()), "extras round trip");

    let list = |tags: &[(&str, Option<&str>)], metadata: &[(&str, &str)], page: PageRequest<MessageId>| {
        let query = MessageQuery {
            tags: tags
                .iter()
                .map(|(n, v)| tidings_core::ports::TagFilter { name: (*n).to_owned(), value: v.map(str::to_owned) })
                .collect(),
            metadata: metadata.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            ..MessageQuery::page(page)
        };
        let s = Arc::clone(&s);
        async move { s.list_messages(a, &query).await.must("list_messages") }
    };
    let ids = |page: tidings_core::ports::Page<Message>| page.items.iter().map(|m| m.id).collect::<Vec<_>>();
    let first = PageRequest::first(10);
    assert_eq!(ids(list(&[("plan", Some("pro"))], &[], first).await), [pro.id], "tag name and value");
    assert_eq!(ids(list(&[("plan", None)], &[], first).await), [free.id, pro.id], "tag name only");
    assert_eq!(ids(list(&[("beta", Some(""))], &[], first).await), [pro.id], "an empty tag value");
    assert_eq!(ids(list(&[("plan", Some("gold"))], &[], first).await), [], "a value no message has");
    assert_eq!(ids(list(&[("plan", None), ("beta", None)], &[], first).await), [pro.id], "every tag must match");
    assert_eq!(ids(list(&[], &[("order", "2")], first).await), [free.id], "one metadata entry");
    assert_eq!(ids(list(&[], &[("order", "1"), ("region", "eu")], first).await), [], "every entry must match");
    assert_eq!(ids(list(&[("plan", None)], &[("region", "eu")], first).await), [free.id], "tags and metadata");

    let one = list(&[("plan", None)], &[], PageRequest::first(1)).await;
    assert_eq!((ids(one.clone()), one.has_more), (vec![free.id], true), "first page of one");
    let next = list(&[("plan", None)], &[], PageRequest { limit: 1, cursor: Some(free.id) }).await;
    assert_eq!((ids(next.clone()), next.has_more), (vec![pro.id], false), "second page of one");

    let sent = advance(&*s, &pro, EventType::Sent).await;
    assert_eq!(ids(list(&[("plan", Some("pro"))], &[("order", "1")], first).await), [pro.id], "after an event");
    assert_eq!(s.get_message(a, pro.id).await.must("get_message"), Some(sent), "extras survive an event");
}
