//! Finding messages (`MessageQuery::text`, `created`, `ending_before`): a search matches part
//! of the subject or of any recipient's address or display name, ignoring case and taking
//! `%`, `_` and `\` literally; creation bounds are id bounds; a page before `ending_before`
//! is the nearest newer one; and every combination with the other filters agrees with a
//! plain filter over random messages ([`search_test`]).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use ulid::Ulid;

use super::{Must, StoreFactory, lister, walk_all_sizes};
use crate::fixtures::{email, event_write, message, message_to_several, new_message, plus_secs, ulid};
use tidings_core::ids::{ApiKeyId, DomainId, MessageId, WorkspaceId};
use tidings_core::message_search::{CreatedRange, SearchText};
use tidings_core::model::extras::Tag;
use tidings_core::model::{EventType, Message, MessageStatus};
use tidings_core::ports::{MessageQuery, MessageStore, PageRequest, Store, TagFilter};

fn search(text: &str) -> Option<SearchText> {
    Some(SearchText::parse(text).unwrap_or_else(|e| panic!("search {text:?}: {e}")))
}

/// A message of `ws` minted at millisecond `ms` (its id's time).
fn message_at(ws: WorkspaceId, key: ApiKeyId, domain: DomainId, ms: u64) -> Message {
    let mut m = message(ws, key, domain);
    m.id = MessageId(Ulid::from_parts(ms, ulid().random()));
    let at = DateTime::<Utc>::from_timestamp_millis(i64::try_from(ms).unwrap_or(0)).unwrap_or(m.created_at);
    (m.created_at, m.updated_at, m.next_attempt_at) = (at, at, Some(at));
    m
}

async fn ids<S: Store>(s: &S, ws: WorkspaceId, query: &MessageQuery) -> (Vec<MessageId>, bool) {
    let page = s.list_messages(ws, query).await.must("list_messages");
    (page.items.iter().map(|m| m.id).collect(), page.has_more)
}

fn text_query(text: &str, limit: usize) -> MessageQuery {
    MessageQuery { text: search(text), ..MessageQuery::page(PageRequest::first(limit)) }
}

pub(super) async fn messages_are_found_by_part_of_their_subject_or_any_recipient<S: Store + 'static>(s: Arc<S>) {
    let (ws, key, domain) = (WorkspaceId(ulid()), ApiKeyId(ulid()), DomainId(ulid()));
    let mut invoice = message(ws, key, domain);
    invoice.subject = "Your Invoice #1042".into();
    invoice.to = email("Alice@example.com");
    let mut welcome = message_to_several(
        ws,
        key,
        domain,
        &["Bob Stone <bob@example.org>"],
        &["carol@shop.example"],
        &["dave@hidden.example"],
    );
    welcome.subject = "Welcome aboard".into();
    let mut sale = message(ws, key, domain);
    sale.subject = "50% off today_only".into();
    sale.to = email("erin@example.net");
    sale.extras.tags = vec![Tag::parse("campaign", "spring").expect("a valid tag")];
    let mut elsewhere = message(WorkspaceId(ulid()), key, domain);
    elsewhere.subject = "Your invoice".into();
    for m in [&invoice, &welcome, &sale, &elsewhere] {
        s.create_message(&new_message(m)).await.must("create_message");
    }
    let cases: &[(&str, Vec<MessageId>)] = &[
        ("invoice", vec![invoice.id]),
        ("INVOICE #10", vec![invoice.id]),
        ("alice@EXAMPLE", vec![invoice.id]),
        ("stone", vec![welcome.id]),
        ("shop.ex", vec![welcome.id]),
        ("hidden", vec![welcome.id]),
        ("example", vec![sale.id, welcome.id, invoice.id]),
        ("50%", vec![sale.id]),
        ("y_o", vec![sale.id]),
        // Wildcards are literal: `r_i` would match "your invoice" as a LIKE pattern.
        ("r_i", vec![]),
        ("%%%", vec![]),
        ("\\\\\\", vec![]),
        ("no such thing", vec![]),
    ];
    for (text, expected) in cases {
        assert_eq!(&ids(&*s, ws, &text_query(text, 10)).await.0, expected, "q={text:?}");
    }

    let to_carol = MessageQuery { to: Some(email("carol@shop.example")), ..text_query("example", 10) };
    assert_eq!(ids(&*s, ws, &to_carol).await.0, [welcome.id], "q with to");
    let tagged =
        MessageQuery { tags: vec![TagFilter { name: "campaign".into(), value: None }], ..text_query("example", 10) };
    assert_eq!(ids(&*s, ws, &tagged).await.0, [sale.id], "q with tag");
    let other_key = MessageQuery { sent_by: Some(ApiKeyId(ulid())), ..text_query("example", 10) };
    assert_eq!(ids(&*s, ws, &other_key).await.0, [], "q with another key");
    s.record_event(event_write(&invoice, EventType::Sent, plus_secs(invoice.created_at, 1), None))
        .await
        .must("record Sent");
    let sent = MessageQuery { status: Some(MessageStatus::Sent), ..text_query("example", 10) };
    assert_eq!(ids(&*s, ws, &sent).await.0, [invoice.id], "q with status");
    let queued = MessageQuery { status: Some(MessageStatus::Queued), ..text_query("example", 10) };
    assert_eq!(ids(&*s, ws, &queued).await.0, [sale.id, welcome.id], "q with status");

    let expected = [sale.id, welcome.id, invoice.id];
    let list =
        lister!(s, |page| list_messages(ws, &MessageQuery { text: search("EXAMPLE"), ..MessageQuery::page(page) }));
    walk_all_sizes("list_messages q=EXAMPLE", &list, |m: &Message| m.id, &expected).await;
}

pub(super) async fn creation_bounds_and_pages_before_a_message<S: Store + 'static>(s: Arc<S>) {
    let (ws, key, domain) = (WorkspaceId(ulid()), ApiKeyId(ulid()), DomainId(ulid()));
    let base = 1_700_000_000_000_u64;
    let mut made = Vec::new();
    for i in 0..6_u64 {
        let mut m = message_at(ws, key, domain, base + i * 1_000);
        m.subject = format!("Order {i} shipped");
        s.create_message(&new_message(&m)).await.must("create_message");
        made.push(m.id);
    }
    let at = |i: u64| DateTime::<Utc>::from_timestamp_millis(i64::try_from(base + i * 1_000).unwrap_or(0));
    let bounded = |after: Option<u64>, before: Option<u64>, limit| MessageQuery {
        created: CreatedRange::between(after.and_then(at), before.and_then(at)),
        ..MessageQuery::page(PageRequest::first(limit))
    };
    assert_eq!(ids(&*s, ws, &bounded(Some(1), Some(4), 10)).await, (vec![made[3], made[2], made[1]], false));
    assert_eq!(ids(&*s, ws, &bounded(Some(1), Some(4), 2)).await, (vec![made[3], made[2]], true));
    assert_eq!(ids(&*s, ws, &bounded(Some(5), None, 10)).await, (vec![made[5]], false), "createdAfter is inclusive");
    assert_eq!(ids(&*s, ws, &bounded(None, Some(1), 10)).await, (vec![made[0]], false), "createdBefore is exclusive");
    assert_eq!(ids(&*s, ws, &bounded(Some(3), Some(3), 10)).await, (vec![], false), "an empty range");
    let middle = MessageQuery { page: PageRequest { limit: 10, cursor: Some(made[4]) }, ..bounded(Some(1), None, 10) };
    assert_eq!(ids(&*s, ws, &middle).await.0, [made[3], made[2], made[1]], "a cursor within bounds");

    let before = |id: MessageId, limit| MessageQuery {
        ending_before: Some(id),
        ..MessageQuery::page(PageRequest::first(limit))
    };
    assert_eq!(ids(&*s, ws, &before(made[1], 2)).await, (vec![made[3], made[2]], true), "the nearest newer page");
    assert_eq!(ids(&*s, ws, &before(made[3], 2)).await, (vec![made[5], made[4]], false));
    assert_eq!(ids(&*s, ws, &before(made[5], 2)).await, (vec![], false), "nothing is newer than the newest");
    let searched = MessageQuery { text: search("ORDER"), ..before(made[0], 10) };
    let searched = MessageQuery { created: CreatedRange::between(None, at(4)), ..searched };
    assert_eq!(ids(&*s, ws, &searched).await, (vec![made[3], made[2], made[1]], false), "with q and a bound");
    let status = MessageQuery { status: Some(MessageStatus::Queued), ..before(made[2], 2) };
    assert_eq!(ids(&*s, ws, &status).await, (vec![made[4], made[3]], true), "with status");
}

/// Environment variable: how many random cases [`search_test`] runs (default: its argument).
pub const SEARCH_CASES_ENV: &str = "TIDINGS_PROPTEST_CASES";

const WORDS: &[&str] = &["Invoice", "order", "SHIPPED", "reset", "Passwort", "Grüße", "50%", "a_b", "x\\y"];
const ADDRESSES: &[&str] = &["ann@shop.example", "Bob@Mail.example", "carl@other.example", "dee@shop.example"];

/// One random message: subject words, a recipient (and maybe a cc with a name), a status,
/// its millisecond.
#[derive(Debug, Clone)]
struct Made {
    words: Vec<(usize, bool)>,
    to: usize,
    cc: Option<usize>,
    delivered: bool,
    ms: u64,
}

/// One random query: a search (a slice of a word, shouted or not), a status, bounds and the
/// page size.
#[derive(Debug, Clone)]
struct Asked {
    text: Option<(usize, usize, bool)>,
    address_text: Option<(usize, usize)>,
    delivered: Option<bool>,
    after: Option<u64>,
    before: Option<u64>,
    limit: usize,
}

fn made() -> impl Strategy<Value = Made> {
    (
        proptest::collection::vec((0..WORDS.len(), any::<bool>()), 1..4),
        0..ADDRESSES.len(),
        proptest::option::of(0..ADDRESSES.len()),
        any::<bool>(),
        0_u64..40,
    )
        .prop_map(|(words, to, cc, delivered, ms)| Made { words, to, cc, delivered, ms })
}

fn asked() -> impl Strategy<Value = Asked> {
    (
        proptest::option::of((0..WORDS.len(), 0_usize..4, any::<bool>())),
        proptest::option::of((0..ADDRESSES.len(), 0_usize..8)),
        proptest::option::of(any::<bool>()),
        proptest::option::of(0_u64..40),
        proptest::option::of(0_u64..40),
        1_usize..5,
    )
        .prop_map(|(text, address_text, delivered, after, before, limit)| Asked {
            text,
            address_text,
            delivered,
            after,
            before,
            limit,
        })
}

/// Runs `cases` random cases (or [`SEARCH_CASES_ENV`] if set): random messages on a fresh
/// store from `factory`, then random queries, each walked to the end with `cursor` and back
/// with `ending_before`, must give what a plain filter over the messages gives. Call it from a
/// plain `#[test]`: it runs its own runtime.
pub fn search_test<F: StoreFactory>(factory: &F, cases: u32) {
    let cases = std::env::var(SEARCH_CASES_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(cases);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("search_test cannot start a tokio runtime: {e}"));
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new(config);
    let strategy = (proptest::collection::vec(made(), 1..25), proptest::collection::vec(asked(), 1..6));
    let result = runner.run(&strategy, |(messages, queries)| {
        runtime.block_on(run_search_case(factory, &messages, &queries)).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("the store's search disagrees with a plain filter: {e}");
    }
}

fn shout(text: &str, loud: bool) -> String {
    if loud { text.to_uppercase() } else { text.to_owned() }
}

async fn run_search_case<F: StoreFactory>(factory: &F, made: &[Made], asked: &[Asked]) -> Result<(), String> {
    let (s, guard) = factory.make().await;
    let (ws, key, domain) = (WorkspaceId(ulid()), ApiKeyId(ulid()), DomainId(ulid()));
    let base = 1_750_000_000_000_u64;
    let mut messages = Vec::with_capacity(made.len());
    for one in made {
        let to = ADDRESSES[one.to];
        let mut m = match one.cc {
            Some(cc) => {
                let cc = format!("Dear Friend <{}>", ADDRESSES[cc]);
                message_to_several(ws, key, domain, &[to], &[cc.as_str()], &[])
            }
            None => {
                let mut m = message(ws, key, domain);
                m.to = email(to);
                m
            }
        };
        let at = message_at(ws, key, domain, base + one.ms);
        (m.id, m.created_at, m.updated_at, m.next_attempt_at) =
            (at.id, at.created_at, at.updated_at, at.next_attempt_at);
        m.subject = one.words.iter().map(|(w, loud)| shout(WORDS[*w], *loud)).collect::<Vec<_>>().join(" ");
        if one.delivered {
            m.status = MessageStatus::Delivered;
            m.next_attempt_at = None;
            for r in &mut m.recipients {
                r.status = MessageStatus::Delivered;
                r.next_attempt_at = None;
            }
        }
        s.create_message(&new_message(&m)).await.map_err(|e| format!("create_message: {e}"))?;
        messages.push(m);
    }
    messages.sort_by_key(|m| std::cmp::Reverse(m.id));
    for q in asked {
        let text = match (q.text, q.address_text) {
            (Some((w, from, loud)), _) => {
                let word: Vec<char> = shout(WORDS[w], loud).chars().collect();
                let from = from.min(word.len().saturating_sub(3));
                Some(word[from..].iter().collect::<String>())
            }
            (None, Some((a, from))) => {
                let address: Vec<char> = ADDRESSES[a].chars().collect();
                let from = from.min(address.len().saturating_sub(3));
                Some(address[from..from + 3].iter().collect::<String>())
            }
            (None, None) => None,
        };
        let ms = |n: Option<u64>| n.and_then(|n| DateTime::<Utc>::from_timestamp_millis(i64::try_from(base + n).ok()?));
        let (after, before) = (ms(q.after), ms(q.before));
        if let (Some(a), Some(b)) = (after, before)
            && a >= b
        {
            continue;
        }
        let query = MessageQuery {
            status: q.delivered.map(|d| if d { MessageStatus::Delivered } else { MessageStatus::Queued }),
            text: text.as_deref().map(|t| SearchText::parse(t).map_err(|e| format!("{t:?}: {e}"))).transpose()?,
            created: CreatedRange::between(after, before),
            ..MessageQuery::page(PageRequest::first(q.limit))
        };
        let expected: Vec<MessageId> = messages
            .iter()
            .filter(|m| query.status.is_none_or(|s| m.status == s))
            .filter(|m| query.created.contains(m.id))
            .filter(|m| query.text.as_ref().is_none_or(|t| naive_contains(m, t.as_str())))
            .map(|m| m.id)
            .collect();
        let forward = walk(&s, ws, &query, false).await?;
        if forward != expected {
            return Err(format!("{query:?}: walked older {forward:?}, a plain filter gives {expected:?}"));
        }
        let backward = walk(&s, ws, &query, true).await?;
        if backward != expected {
            return Err(format!("{query:?}: walked newer {backward:?}, a plain filter gives {expected:?}"));
        }
    }
    drop(s);
    drop(guard);
    Ok(())
}

/// The rule, written out plainly: one of the texts, lower-cased, contains `text`.
fn naive_contains(m: &Message, text: &str) -> bool {
    let mut texts = vec![m.subject.clone(), m.to.to_string()];
    for r in &m.recipients {
        texts.push(r.email.to_string());
        texts.extend(r.name.as_ref().map(ToString::to_string));
    }
    texts.iter().any(|t| t.to_lowercase().contains(text))
}

/// Every id `query` lists, newest first: walked older page by page from the first page, or
/// newer page by page from the oldest (pages before `ending_before`) and put in order.
async fn walk<S: Store>(s: &S, ws: WorkspaceId, query: &MessageQuery, newer: bool) -> Result<Vec<MessageId>, String> {
    let mut pages: Vec<Vec<MessageId>> = Vec::new();
    let mut query = query.clone();
    if newer {
        query.ending_before = Some(MessageId::NONE);
    }
    for _ in 0..100 {
        let page = s.list_messages(ws, &query).await.map_err(|e| format!("list_messages: {e}"))?;
        let ids: Vec<MessageId> = page.items.iter().map(|m| m.id).collect();
        if ids.len() > query.page.limit || ids.windows(2).any(|w| w[0] <= w[1]) {
            return Err(format!("{query:?}: a page of {ids:?} is not newest first within the limit"));
        }
        let (first, last) = (ids.first().copied(), ids.last().copied());
        pages.push(ids);
        if !page.has_more {
            if newer {
                pages.reverse();
            }
            return Ok(pages.concat());
        }
        if newer {
            query.ending_before = first;
        } else {
            query.page.cursor = last;
        }
    }
    Err(format!("{query:?}: more than 100 pages"))
}
