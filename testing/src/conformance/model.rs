//! The model test: random operation sequences run against the store under test and against
//! [`MemoryStore`]; every answer must be the same.
//!
//! Operations cover messages (with and without idempotency keys, keys reused, to one recipient
//! or several with one suppressed at create, events through the state machine about the
//! message or one of its recipients, including stale and foreign writes, filtered lists walked page by page,
//! claims, lease releases, the pending count, retention purges), idempotency lookups and purges, suppressions, API keys, the first
//! workspace (refused, as a case starts with workspaces), shared secrets, and the webhook
//! delivery queue with per-endpoint claim quotas ([`deliveries`]). Two answers are the
//! same when they are equal, or both the same kind of error. What the contract leaves open is
//! not asked: a limited claim, release or purge never cuts through records due (expiring) at
//! the same instant, and claimed messages are compared in (due time, id) order after checking that
//! they come earliest first.

mod deliveries;

use std::collections::HashMap;
use std::fmt::Debug;

use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::StoreFactory;
use crate::MemoryStore;
use crate::fixtures::{
    api_key, domain, email, idempotency, idempotency_key, message, new_message, new_message_suppressing, ulid,
    workspace,
};
use deliveries::{DeliveryOp, ENDPOINTS, Hooks, delivery_op};
use tidings_core::activity::{ActivityDelta, HourStart, HourlyActivity};
use tidings_core::email::EmailAddress;
use tidings_core::email::Mailbox;
use tidings_core::ids::{DomainId, EventId, MessageId, SuppressionId, WorkspaceId};
use tidings_core::model::{
    ApiKey, EventDetails, EventType, Message, MessageStatus, Recipient, RecipientKind, Suppression, SuppressionReason,
    SuppressionSource,
};
use tidings_core::ports::{EventWrite, MessageQuery, MessageStore, PageRequest, Store, StoreResult, TagFilter};
use tidings_core::secret::{Secret, SecretName};
use tidings_core::state_machine::{Happening, apply_event, apply_recipient_event};

/// Environment variable overriding the number of cases [`model_test`] runs.
pub const CASES_ENV: &str = "TIDINGS_PROPTEST_CASES";

/// The longest operation sequence of one case.
const MAX_OPS: usize = 40;
/// Workspaces that exist; reads also ask one more that never does.
const WORKSPACES: usize = 2;
const ADDRESSES: [&str; 3] = ["alice@example.com", "bob@example.com", "carol@example.org"];
const IDEMPOTENCY_KEYS: usize = 2;
/// Tags a created message gets: none, one of two values of one name, or two names (one with
/// an empty value).
const TAG_SETS: [&[(&str, &str)]; 4] = [&[], &[("plan", "pro")], &[("plan", "free")], &[("plan", "pro"), ("beta", "")]];
/// Metadata a created message gets.
const METADATA_SETS: [&[(&str, &str)]; 4] =
    [&[], &[("order", "1")], &[("order", "2")], &[("order", "1"), ("region", "eu")]];
/// `tag` filters a list may use: name and value, name only, an empty value, a value no
/// message has.
const TAG_FILTERS: [(&str, Option<&str>); 4] =
    [("plan", Some("pro")), ("plan", None), ("beta", Some("")), ("plan", Some("gold"))];
/// `metadata[key]=value` filters a list may use.
const METADATA_FILTERS: [(&str, &str); 3] = [("order", "1"), ("region", "eu"), ("order", "3")];

fn label_set(
    (tags, metadata): (usize, usize),
) -> (Vec<tidings_core::model::extras::Tag>, tidings_core::model::extras::Metadata) {
    let tags = TAG_SETS[tags]
        .iter()
        .map(|(n, v)| tidings_core::model::extras::Tag::parse(n, v).expect("a valid tag"))
        .collect();
    let metadata = METADATA_SETS[metadata].iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    (tags, tidings_core::model::extras::Metadata::parse(metadata).expect("valid metadata"))
}

fn label_filters((tag, metadata): (Option<usize>, Option<usize>)) -> (Vec<TagFilter>, Vec<(String, String)>) {
    let tags =
        tag.map(|i| TAG_FILTERS[i]).map(|(name, value)| TagFilter { name: name.into(), value: value.map(Into::into) });
    let metadata = metadata.map(|i| METADATA_FILTERS[i]).map(|(k, v)| (k.to_owned(), v.to_owned()));
    (tags.into_iter().collect(), metadata.into_iter().collect())
}
/// The names `EnsureSecret` picks from.
const SECRETS: [SecretName; 2] = [SecretName::new("model_a"), SecretName::new("model_b")];
/// A list walk that has not ended after this many pages is broken.
const MAX_PAGES: usize = 200;

/// Runs `cases` random operation sequences (or [`CASES_ENV`] if set) on fresh stores from
/// `factory` and on a [`MemoryStore`], and panics with the smallest sequence it found whose
/// answers differ. Call it from a plain `#[test]`, not inside a tokio runtime: it runs its own.
pub fn model_test<F: StoreFactory>(factory: &F, cases: u32) {
    let cases = std::env::var(CASES_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(cases);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("model_test cannot start a tokio runtime: {e}"));
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&proptest::collection::vec(op(), 1..=MAX_OPS), |ops| {
        runtime.block_on(run_case(factory, &ops)).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("the store under test and the model disagree: {e}");
    }
}

/// How a `Record` operation bends its write.
#[derive(Debug, Clone, Copy)]
enum Twist {
    /// As a worker would write it.
    None,
    /// With an `expected_status` that is not the stored one.
    Stale,
    /// Naming another workspace.
    Foreign,
    /// Expecting the stored `last_event_id`, as an open or click does.
    SameLastEvent,
    /// Expecting a `last_event_id` that is not the stored one (an event came in between).
    StaleLastEvent,
}

/// One step of a case. Indexes pick among the things made so far; `ws` up to `WORKSPACES`
/// inclusive, where `WORKSPACES` is a workspace that does not exist.
#[derive(Debug, Clone)]
enum Op {
    Tick {
        secs: u8,
    },
    Create {
        ws: usize,
        sender: Index,
        to: usize,
        shout: bool,
        idempotency: Option<(usize, u8)>,
        /// Indexes into [`TAG_SETS`] and [`METADATA_SETS`].
        labels: (usize, usize),
        /// Recipients beside `to` (addresses as `to` and `shout`), cc and bcc by turns; with
        /// any (not all the same as `to`) the message has a recipient list.
        others: Vec<(usize, bool)>,
        /// Whether the last of `others` is suppressed at create (a `Suppressed` event).
        suppress_last: bool,
    },
    Record {
        msg: Index,
        event: EventType,
        twist: Twist,
        retry_secs: u8,
        /// The recipient an event is about, on a message with a list (whole-message events,
        /// `Queued`, `Scheduled`, `Canceled` and `Failed`, are about every recipient).
        recipient: Index,
    },
    GetMessage {
        ws: usize,
        msg: Index,
    },
    /// `find_message` of a made message, or (`None`) of an id never used.
    FindMessage {
        msg: Option<Index>,
    },
    ListMessages {
        ws: usize,
        status: Option<MessageStatus>,
        to: Option<(usize, bool)>,
        sent_by: Option<Index>,
        /// Indexes into [`TAG_FILTERS`] and [`METADATA_FILTERS`].
        labels: (Option<usize>, Option<usize>),
        limit: usize,
    },
    ListEvents {
        ws: usize,
        msg: Index,
        limit: usize,
    },
    GetIdempotency {
        ws: usize,
        key: usize,
    },
    Purge {
        ahead_secs: i8,
        limit: usize,
    },
    Claim {
        ahead_secs: i16,
        lease_secs: u8,
        limit: usize,
    },
    Release {
        ahead_secs: i16,
        limit: usize,
    },
    /// `purge_message_content` with the cutoff at the creation millisecond of a made message
    /// (`after`: the next millisecond).
    PurgeContent {
        msg: Index,
        after: bool,
        limit: usize,
    },
    CountPending {
        ahead_secs: i16,
    },
    /// `activity` of a workspace over the hours around the clock.
    Activity {
        ws: usize,
    },
    /// `purge_activity` of the hours before the clock's (plus `ahead_hours`).
    PurgeActivity {
        ahead_hours: i8,
        limit: usize,
    },
    InsertSuppression {
        ws: usize,
        to: usize,
        shout: bool,
        reason: SuppressionReason,
    },
    DeleteSuppression {
        ws: usize,
        to: usize,
        shout: bool,
    },
    GetSuppression {
        ws: usize,
        to: usize,
        shout: bool,
    },
    ListSuppressions {
        ws: usize,
        reason: Option<SuppressionReason>,
        limit: usize,
    },
    InsertKey {
        ws: usize,
        reuse_hash: Option<Index>,
    },
    RevokeKey {
        ws: usize,
        key: Index,
    },
    FindKey {
        key: Index,
    },
    GetKey {
        ws: usize,
        key: Index,
    },
    ListKeys {
        ws: usize,
        limit: usize,
    },
    /// `create_first_workspace` on a store that has workspaces, then `list_workspaces`.
    CreateFirstWorkspace,
    EnsureSecret {
        name: usize,
        fill: u8,
        len: usize,
    },
    Deliveries(DeliveryOp),
}

fn op() -> impl Strategy<Value = Op> {
    let ws = || 0..WORKSPACES;
    let any_ws = || prop_oneof![9 => 0..WORKSPACES, 1 => Just(WORKSPACES)];
    // Mostly short steps and lifetimes, so that expiries and due times are often hit exactly.
    let secs = || prop_oneof![4 => 0u8..=5, 1 => 0u8..=120];
    let ttl = || prop_oneof![3 => 1u8..=6, 1 => 1u8..=90];
    let to = || 0..ADDRESSES.len();
    let limit = || 1usize..=5;
    let reason = || prop::sample::select(vec![SuppressionReason::Manual, SuppressionReason::HardBounce]);
    let twist = prop_oneof![
        8 => Just(Twist::None),
        1 => Just(Twist::Stale),
        1 => Just(Twist::Foreign),
        1 => Just(Twist::SameLastEvent),
        1 => Just(Twist::StaleLastEvent),
    ];
    let event = prop::sample::select(EventType::ALL.to_vec());
    prop_oneof![
        3 => secs().prop_map(|secs| Op::Tick { secs }),
        8 => (
            ws(),
            any::<Index>(),
            to(),
            any::<bool>(),
            prop::option::weighted(0.7, (0..IDEMPOTENCY_KEYS, ttl())),
            (0..TAG_SETS.len(), 0..METADATA_SETS.len()),
            (prop_oneof![2 => Just(Vec::new()), 1 => prop::collection::vec((to(), any::<bool>()), 1..=3)], any::<bool>()),
        )
            .prop_map(|(ws, sender, to, shout, idempotency, labels, (others, suppress_last))| Op::Create {
                ws,
                sender,
                to,
                shout,
                idempotency,
                labels,
                others,
                suppress_last,
            }),
        8 => (any::<Index>(), event, twist, 1u8..=120, any::<Index>())
            .prop_map(|(msg, event, twist, retry_secs, recipient)| Op::Record { msg, event, twist, retry_secs, recipient }),
        2 => (any_ws(), any::<Index>()).prop_map(|(ws, msg)| Op::GetMessage { ws, msg }),
        1 => prop::option::weighted(0.8, any::<Index>()).prop_map(|msg| Op::FindMessage { msg }),
        3 => (
            any_ws(),
            prop::option::of(prop::sample::select(MessageStatus::ALL.to_vec())),
            prop::option::of((to(), any::<bool>())),
            prop::option::of(any::<Index>()),
            (
                prop::option::weighted(0.3, 0..TAG_FILTERS.len()),
                prop::option::weighted(0.3, 0..METADATA_FILTERS.len()),
            ),
            limit(),
        )
            .prop_map(|(ws, status, to, sent_by, labels, limit)| Op::ListMessages { ws, status, to, sent_by, labels, limit }),
        2 => (any_ws(), any::<Index>(), limit()).prop_map(|(ws, msg, limit)| Op::ListEvents { ws, msg, limit }),
        2 => (any_ws(), 0..IDEMPOTENCY_KEYS).prop_map(|(ws, key)| Op::GetIdempotency { ws, key }),
        2 => (prop_oneof![-5i8..=5, -60i8..=60], 1usize..=2).prop_map(|(ahead_secs, limit)| Op::Purge { ahead_secs, limit }),
        3 => (-30i16..=240, 1u8..=120, 1usize..=6)
            .prop_map(|(ahead_secs, lease_secs, limit)| Op::Claim { ahead_secs, lease_secs, limit }),
        2 => (-30i16..=120, 1usize..=3).prop_map(|(ahead_secs, limit)| Op::Release { ahead_secs, limit }),
        2 => (any::<Index>(), any::<bool>(), 1usize..=3)
            .prop_map(|(msg, after, limit)| Op::PurgeContent { msg, after, limit }),
        1 => (-30i16..=400).prop_map(|ahead_secs| Op::CountPending { ahead_secs }),
        2 => any_ws().prop_map(|ws| Op::Activity { ws }),
        1 => (-2i8..=2, 1usize..=3).prop_map(|(ahead_hours, limit)| Op::PurgeActivity { ahead_hours, limit }),
        2 => (ws(), to(), any::<bool>(), reason())
            .prop_map(|(ws, to, shout, reason)| Op::InsertSuppression { ws, to, shout, reason }),
        1 => (any_ws(), to(), any::<bool>()).prop_map(|(ws, to, shout)| Op::DeleteSuppression { ws, to, shout }),
        1 => (any_ws(), to(), any::<bool>()).prop_map(|(ws, to, shout)| Op::GetSuppression { ws, to, shout }),
        1 => (any_ws(), prop::option::of(reason()), limit())
            .prop_map(|(ws, reason, limit)| Op::ListSuppressions { ws, reason, limit }),
        1 => (ws(), prop::option::weighted(0.2, any::<Index>()))
            .prop_map(|(ws, reuse_hash)| Op::InsertKey { ws, reuse_hash }),
        2 => (any_ws(), any::<Index>()).prop_map(|(ws, key)| Op::RevokeKey { ws, key }),
        1 => any::<Index>().prop_map(|key| Op::FindKey { key }),
        1 => (any_ws(), any::<Index>()).prop_map(|(ws, key)| Op::GetKey { ws, key }),
        2 => (any_ws(), limit()).prop_map(|(ws, limit)| Op::ListKeys { ws, limit }),
        1 => Just(Op::CreateFirstWorkspace),
        2 => (0..SECRETS.len(), any::<u8>(), 0usize..=40).prop_map(|(name, fill, len)| Op::EnsureSecret { name, fill, len }),
        8 => delivery_op(WORKSPACES * ENDPOINTS).prop_map(Op::Deliveries),
    ]
}

/// Runs `$call` with `$st` bound to each store in turn: `(answer of the store under test,
/// answer of the model)`.
macro_rules! both {
    ($sut:expr, $model:expr, |$st:ident| $call:expr) => {{
        let $st: &dyn Store = $sut;
        let under_test = $call.await;
        let $st: &dyn Store = $model;
        let model = $call.await;
        (under_test, model)
    }};
}

/// Walks a list on both stores, page by page along the model's cursors, comparing each page.
macro_rules! walk {
    ($what:expr, $sut:expr, $model:expr, $limit:expr, |$st:ident, $page:ident| $call:expr, $id:expr) => {{
        let mut cursor = None;
        for _ in 0..MAX_PAGES {
            let $page = PageRequest { limit: $limit, cursor };
            let (under_test, model) = both!($sut, $model, |$st| $call);
            same(&format!("{} page after {cursor:?}", $what), &under_test, &model)?;
            match model {
                Ok(page) if page.has_more => cursor = page.items.last().map($id),
                _ => break,
            }
        }
    }};
}

/// Rows with nothing counted may be left out (`ActivityStore::activity`).
fn without_zero_rows(rows: Vec<HourlyActivity>) -> Vec<HourlyActivity> {
    rows.into_iter().filter(|r| !r.counts.is_zero()).collect()
}

fn same<T: PartialEq + Debug>(what: &str, under_test: &StoreResult<T>, model: &StoreResult<T>) -> Result<(), String> {
    let agree = match (under_test, model) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => std::mem::discriminant(a) == std::mem::discriminant(b),
        _ => false,
    };
    if agree {
        Ok(())
    } else {
        Err(format!("{what}: the store under test answered {under_test:?}, the model {model:?}"))
    }
}

/// The recipient list of `m` (its `to` first) with `others` beside it, cc and bcc by turns,
/// each address once, all `Queued` and due when `m` is; empty (no list) if no other remains.
fn recipient_list(m: &Message, others: &[(usize, bool)]) -> Vec<Recipient> {
    let mut seen = vec![m.to.normalized()];
    let mut list = vec![(RecipientKind::To, m.to.clone())];
    for (i, (to, shout)) in others.iter().enumerate() {
        let a = address(*to, *shout);
        if !seen.contains(&a.normalized()) {
            seen.push(a.normalized());
            list.push((if i.is_multiple_of(2) { RecipientKind::Cc } else { RecipientKind::Bcc }, a));
        }
    }
    if list.len() == 1 {
        return Vec::new();
    }
    list.into_iter()
        .map(|(kind, address)| {
            let mut r =
                Recipient::new(Mailbox { display_name: None, address }, kind, MessageStatus::Queued, m.created_at);
            r.next_attempt_at = m.next_attempt_at;
            r
        })
        .collect()
}

fn address(to: usize, shout: bool) -> EmailAddress {
    let text = ADDRESSES[to % ADDRESSES.len()];
    if shout {
        let (local, domain) = text.split_once('@').unwrap_or((text, ""));
        email(&format!("{}@{}", local.to_ascii_uppercase(), domain.to_ascii_uppercase()))
    } else {
        email(text)
    }
}

/// What a case has made so far, to pick operands from.
struct World {
    /// The workspaces; the last one is never created.
    workspaces: Vec<WorkspaceId>,
    domains: Vec<DomainId>,
    keys: Vec<ApiKey>,
    /// Every message a `Create` tried to store, stored or not.
    messages: Vec<Message>,
    hooks: Hooks,
    clock: DateTime<Utc>,
}

async fn run_case<F: StoreFactory>(factory: &F, ops: &[Op]) -> Result<(), String> {
    let (store, guard) = factory.make().await;
    let model = MemoryStore::new();
    let mut world = World::set_up(&store, &model).await?;
    for (step, op) in ops.iter().enumerate() {
        world.apply(&store, &model, op).await.map_err(|e| format!("step {step}, {op:?}: {e}"))?;
    }
    drop(store);
    drop(guard);
    Ok(())
}

impl World {
    async fn set_up(sut: &dyn Store, model: &MemoryStore) -> Result<World, String> {
        let mut world = World {
            workspaces: Vec::new(),
            domains: Vec::new(),
            keys: Vec::new(),
            messages: Vec::new(),
            hooks: Hooks::default(),
            clock: DateTime::from_timestamp_millis(1_893_456_000_000).unwrap_or_default(),
        };
        for _ in 0..WORKSPACES {
            let (ws, first, second) = {
                let ws = workspace();
                let (first, second) = (api_key(ws.id), api_key(ws.id));
                (ws, first, second)
            };
            let dom = domain(ws.id, "mail.example.com");
            let (a, b) = both!(sut, model, |st| st.create_workspace(&ws, &first));
            same("create_workspace", &a, &b)?;
            let (a, b) = both!(sut, model, |st| st.insert_api_key(&second));
            same("insert_api_key", &a, &b)?;
            let (a, b) = both!(sut, model, |st| st.insert_domain(&dom));
            same("insert_domain", &a, &b)?;
            world.workspaces.push(ws.id);
            world.domains.push(dom.id);
            world.keys.extend([first, second]);
        }
        world.hooks = Hooks::set_up(sut, model, &world.workspaces).await?;
        world.workspaces.push(WorkspaceId(ulid()));
        Ok(world)
    }

    fn at(&self, secs: i64) -> DateTime<Utc> {
        self.clock + Duration::seconds(secs)
    }

    async fn apply(&mut self, sut: &dyn Store, model: &MemoryStore, op: &Op) -> Result<(), String> {
        match op.clone() {
            Op::Tick { secs } => self.clock = self.at(i64::from(secs)),
            Op::Create { ws, sender, to, shout, idempotency: key, labels, others, suppress_last } => {
                let workspace = self.workspaces[ws];
                let keys: Vec<&ApiKey> = self.keys.iter().filter(|k| k.workspace_id == workspace).collect();
                let mut m = message(workspace, sender.get(&keys).id, self.domains[ws]);
                m.to = address(to, shout);
                (m.extras.tags, m.extras.metadata) = label_set(labels);
                (m.created_at, m.updated_at, m.next_attempt_at) = (self.clock, self.clock, Some(self.clock));
                m.recipients = recipient_list(&m, &others);
                m.settle_from_recipients();
                let mut new = if suppress_last && m.recipients.len() > 1 {
                    new_message_suppressing(&m, &[m.recipients.len() - 1])
                } else {
                    new_message(&m)
                };
                let m = new.message.clone();
                new.idempotency = key.map(|(k, ttl)| {
                    idempotency(workspace, &format!("key-{k}"), m.id, self.clock, self.at(i64::from(ttl)))
                });
                self.messages.push(m);
                let (a, b) = both!(sut, model, |st| st.create_message(&new));
                same("create_message", &a, &b)?;
            }
            Op::Record { msg, event, twist, retry_secs, recipient } => {
                if self.messages.is_empty() {
                    return Ok(());
                }
                let attempted = msg.get(&self.messages).clone();
                let current = model.get_message(attempted.workspace_id, attempted.id).await;
                let current = current.map_err(|e| format!("model get_message: {e}"))?.unwrap_or(attempted);
                let happening = Happening {
                    event_id: EventId(ulid()),
                    event_type: event,
                    at: self.clock,
                    details: EventDetails::default(),
                    provider_message_id: (event == EventType::Sent).then(|| format!("{}@tidings.test", ulid())),
                    next_attempt_at: (event == EventType::Deferred).then(|| self.at(i64::from(retry_secs))),
                };
                // On a message with a list, an event about one recipient moves that one, and
                // the write expects the last event read (as every such write does).
                let about_one = current.has_recipient_list()
                    && !matches!(
                        event,
                        EventType::Queued | EventType::Scheduled | EventType::Canceled | EventType::Failed
                    );
                let applied = if about_one {
                    apply_recipient_event(&current, recipient.index(current.recipients.len()), happening)
                } else {
                    apply_event(&current, happening)
                };
                let Ok((after, event)) = applied else { return Ok(()) };
                let mut write = EventWrite {
                    expected_status: current.status,
                    expected_next_attempt_at: None,
                    expected_last_event_id: current.has_recipient_list().then_some(current.last_event_id),
                    activity: ActivityDelta::of_events(&current, std::slice::from_ref(&event)),
                    message: after,
                    event,
                    more_events: vec![],
                    webhook_deliveries: vec![],
                };
                match twist {
                    Twist::None => {}
                    Twist::Stale => {
                        let i = MessageStatus::ALL.iter().position(|s| *s == current.status).unwrap_or(0);
                        write.expected_status = MessageStatus::ALL[(i + 1) % MessageStatus::ALL.len()];
                    }
                    Twist::Foreign => {
                        let i = self.workspaces.iter().position(|w| *w == current.workspace_id).unwrap_or(0);
                        write.message.workspace_id = self.workspaces[(i + 1) % self.workspaces.len()];
                    }
                    Twist::SameLastEvent => write.expected_last_event_id = Some(current.last_event_id),
                    Twist::StaleLastEvent => write.expected_last_event_id = Some(EventId(ulid())),
                }
                let (a, b) = both!(sut, model, |st| st.record_event(write.clone()));
                same("record_event", &a, &b)?;
            }
            Op::GetMessage { ws, msg } => {
                if let Some(m) = self.pick_message(msg) {
                    let ws = self.workspaces[ws];
                    let (a, b) = both!(sut, model, |st| st.get_message(ws, m));
                    same("get_message", &a, &b)?;
                }
            }
            Op::FindMessage { msg } => {
                let id = match msg {
                    Some(msg) => self.pick_message(msg),
                    None => Some(MessageId(ulid())),
                };
                if let Some(id) = id {
                    let (a, b) = both!(sut, model, |st| st.find_message(id));
                    same("find_message", &a, &b)?;
                }
            }
            Op::ListMessages { ws, status, to, sent_by, labels, limit } => {
                let ws = self.workspaces[ws];
                let to = to.map(|(to, shout)| address(to, shout));
                let sent_by = sent_by.map(|k| k.get(&self.keys).id);
                let (tags, metadata) = label_filters(labels);
                walk!(
                    "list_messages",
                    sut,
                    model,
                    limit,
                    |st, page| st.list_messages(
                        ws,
                        &MessageQuery {
                            status,
                            to: to.clone(),
                            sent_by,
                            tags: tags.clone(),
                            metadata: metadata.clone(),
                            ..MessageQuery::page(page)
                        }
                    ),
                    |m: &Message| m.id
                );
            }
            Op::ListEvents { ws, msg, limit } => {
                if let Some(m) = self.pick_message(msg) {
                    let ws = self.workspaces[ws];
                    walk!("list_events", sut, model, limit, |st, page| st.list_events(ws, m, page), |e| e.id);
                }
            }
            Op::GetIdempotency { ws, key } => {
                let (ws, key) = (self.workspaces[ws], idempotency_key(&format!("key-{key}")));
                let (a, b) = both!(sut, model, |st| st.get_idempotency(ws, &key));
                same("get_idempotency", &a, &b)?;
            }
            Op::Purge { ahead_secs, limit } => {
                let now = self.at(i64::from(ahead_secs));
                let mut expiring = Vec::new();
                for ws in &self.workspaces {
                    for k in 0..IDEMPOTENCY_KEYS {
                        let record = model.get_idempotency(*ws, &idempotency_key(&format!("key-{k}"))).await;
                        let record = record.map_err(|e| format!("model get_idempotency: {e}"))?;
                        expiring.extend(record.map(|r| r.expires_at).filter(|at| *at <= now));
                    }
                }
                expiring.sort();
                let limit = untied(&expiring, limit);
                let (a, b) = both!(sut, model, |st| st.purge_expired_idempotency(now, limit));
                same("purge_expired_idempotency", &a, &b)?;
            }
            Op::Claim { ahead_secs, lease_secs, limit } => {
                self.claim(sut, model, ahead_secs, lease_secs, limit).await?
            }
            Op::Release { ahead_secs, limit } => self.release(sut, model, ahead_secs, limit).await?,
            Op::PurgeContent { msg, after, limit } => {
                if let Some(m) = self.pick_message(msg) {
                    let millis = i64::try_from(m.ulid().timestamp_ms()).unwrap_or(0) + i64::from(after);
                    let cutoff = DateTime::from_timestamp_millis(millis).unwrap_or_default();
                    let (a, b) = both!(sut, model, |st| st.purge_message_content(cutoff, limit));
                    same("purge_message_content", &a, &b)?;
                }
            }
            Op::CountPending { ahead_secs } => {
                let now = self.at(i64::from(ahead_secs));
                let (a, b) = both!(sut, model, |st| st.count_pending_messages(now));
                same("count_pending_messages", &a, &b)?;
            }
            Op::Activity { ws } => {
                let ws = self.workspaces[ws];
                // Every hour a case can reach (it starts at the clock's start and ticks at
                // most 40 × 255 s), and one hour cut at the clock.
                let start = HourStart::of(self.at(0)).plus_hours(-48);
                for (from, until) in [(start, start.plus_hours(96)), (start, HourStart::of(self.at(0)))] {
                    let (a, b) = both!(sut, model, |st| st.activity(ws, from, until));
                    same("activity", &a.map(without_zero_rows), &b.map(without_zero_rows))?;
                }
            }
            Op::PurgeActivity { ahead_hours, limit } => {
                let before = HourStart::of(self.at(0)).plus_hours(i64::from(ahead_hours));
                let (a, b) = both!(sut, model, |st| st.purge_activity(before, limit));
                same("purge_activity", &a, &b)?;
            }
            Op::InsertSuppression { ws, to, shout, reason } => {
                let entry = Suppression {
                    id: SuppressionId(ulid()),
                    workspace_id: self.workspaces[ws],
                    email: address(to, shout),
                    reason,
                    source: SuppressionSource::Api,
                    message_id: None,
                    created_at: self.clock,
                };
                let (a, b) = both!(sut, model, |st| st.insert_suppression(&entry));
                same("insert_suppression", &a, &b)?;
            }
            Op::DeleteSuppression { ws, to, shout } => {
                let (ws, address) = (self.workspaces[ws], address(to, shout));
                let (a, b) = both!(sut, model, |st| st.delete_suppression(ws, &address));
                same("delete_suppression", &a, &b)?;
            }
            Op::GetSuppression { ws, to, shout } => {
                let (ws, address) = (self.workspaces[ws], address(to, shout));
                let (a, b) = both!(sut, model, |st| st.get_suppression(ws, &address));
                same("get_suppression", &a, &b)?;
            }
            Op::ListSuppressions { ws, reason, limit } => {
                let ws = self.workspaces[ws];
                walk!("list_suppressions", sut, model, limit, |st, page| st.list_suppressions(ws, reason, page), |s| s
                    .id);
            }
            Op::InsertKey { ws, reuse_hash } => {
                let mut key = api_key(self.workspaces[ws]);
                key.created_at = self.clock;
                if let Some(i) = reuse_hash {
                    key.key_hash = i.get(&self.keys).key_hash;
                }
                let (a, b) = both!(sut, model, |st| st.insert_api_key(&key));
                same("insert_api_key", &a, &b)?;
                self.keys.push(key);
            }
            Op::RevokeKey { ws, key } => {
                let (ws, id, at) = (self.workspaces[ws], key.get(&self.keys).id, self.clock);
                let (a, b) = both!(sut, model, |st| st.revoke_api_key(ws, id, at));
                same("revoke_api_key", &a, &b)?;
            }
            Op::FindKey { key } => {
                let hash = key.get(&self.keys).key_hash;
                let (a, b) = both!(sut, model, |st| st.find_api_key_by_hash(&hash));
                same("find_api_key_by_hash", &a, &b)?;
            }
            Op::GetKey { ws, key } => {
                let (ws, id) = (self.workspaces[ws], key.get(&self.keys).id);
                let (a, b) = both!(sut, model, |st| st.get_api_key(ws, id));
                same("get_api_key", &a, &b)?;
            }
            Op::ListKeys { ws, limit } => {
                let ws = self.workspaces[ws];
                walk!("list_api_keys", sut, model, limit, |st, page| st.list_api_keys(ws, page), |k| k.id);
            }
            Op::CreateFirstWorkspace => {
                let ws = workspace();
                let key = api_key(ws.id);
                let (a, b) = both!(sut, model, |st| st.create_first_workspace(&ws, &key));
                same("create_first_workspace", &a, &b)?;
                let (a, b) = both!(sut, model, |st| st.list_workspaces());
                same("list_workspaces", &a, &b)?;
            }
            Op::EnsureSecret { name, fill, len } => {
                let candidate = Secret::new(vec![fill; len]);
                let (a, b) = both!(sut, model, |st| st.ensure_secret(SECRETS[name], &candidate));
                same("ensure_secret", &a, &b)?;
            }
            Op::Deliveries(op) => self.hooks.apply(sut, model, self.clock, op).await?,
        }
        Ok(())
    }

    fn pick_message(&self, index: Index) -> Option<MessageId> {
        (!self.messages.is_empty()).then(|| index.get(&self.messages).id)
    }

    /// Claims on both stores; the limit is widened so that it never splits messages due at
    /// the same instant, and answers are compared in (due, id) order once each is checked to
    /// come earliest first.
    async fn claim(
        &self,
        sut: &dyn Store,
        model: &MemoryStore,
        ahead_secs: i16,
        lease_secs: u8,
        limit: usize,
    ) -> Result<(), String> {
        let now = self.at(i64::from(ahead_secs));
        let until = now + Duration::seconds(i64::from(lease_secs));
        let mut due_at: HashMap<MessageId, DateTime<Utc>> = HashMap::new();
        for m in &self.messages {
            let current = model.get_message(m.workspace_id, m.id).await.map_err(|e| format!("model: {e}"))?;
            if let Some(at) = current.and_then(|c| c.next_attempt_at).filter(|at| *at <= now) {
                due_at.insert(m.id, at);
            }
        }
        let mut due: Vec<DateTime<Utc>> = due_at.values().copied().collect();
        due.sort();
        let limit = untied(&due, limit);
        let (a, b) = both!(sut, model, |st| st.claim_due_messages(now, until, limit));
        let in_due_order =
            |answer: StoreResult<Vec<Message>>, who: &str| -> Result<StoreResult<Vec<Message>>, String> {
                let Ok(mut claimed) = answer else { return Ok(answer) };
                let mut keyed = Vec::with_capacity(claimed.len());
                for m in &claimed {
                    let at = due_at.get(&m.id).ok_or_else(|| format!("{who} claimed {} which was not due", m.id))?;
                    keyed.push(*at);
                }
                if keyed.windows(2).any(|w| w[0] > w[1]) {
                    return Err(format!("{who} claimed out of due order: {keyed:?}"));
                }
                claimed.sort_by_key(|m| (due_at.get(&m.id).copied(), m.id));
                Ok(Ok(claimed))
            };
        let a = in_due_order(a, "the store under test")?;
        let b = in_due_order(b, "the model")?;
        same(&format!("claim_due_messages(now {now}, limit {limit})"), &a, &b)
    }

    /// Releases leases on both stores, the limit widened so that it never splits messages
    /// leased until the same instant; then every message must read the same on both.
    async fn release(&self, sut: &dyn Store, model: &MemoryStore, ahead_secs: i16, limit: usize) -> Result<(), String> {
        let now = self.at(i64::from(ahead_secs));
        let mut leased = Vec::new();
        for m in &self.messages {
            let current = model.get_message(m.workspace_id, m.id).await.map_err(|e| format!("model: {e}"))?;
            let lease = current.filter(|c| c.status.next_attempt_is_lease()).and_then(|c| c.next_attempt_at);
            leased.extend(lease.filter(|at| *at > now));
        }
        leased.sort();
        let limit = untied(&leased, limit);
        let (a, b) = both!(sut, model, |st| st.release_message_leases(now, limit));
        same(&format!("release_message_leases(now {now}, limit {limit})"), &a, &b)?;
        for m in &self.messages {
            let (a, b) = both!(sut, model, |st| st.get_message(m.workspace_id, m.id));
            same(&format!("get_message({}) after release_message_leases", m.id), &a, &b)?;
        }
        Ok(())
    }
}

/// `limit` widened so that the first `limit` of `sorted` do not end inside a run of equal
/// values.
fn untied<T: PartialEq>(sorted: &[T], mut limit: usize) -> usize {
    while limit > 0 && limit < sorted.len() && sorted[limit - 1] == sorted[limit] {
        limit += 1;
    }
    limit
}
