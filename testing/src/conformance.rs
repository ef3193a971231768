//! The conformance suite of [`Store`]: every implementation must pass it.
//!
//! Two parts, both generic over a [`StoreFactory`] that makes a fresh, empty store:
//! - [`run_all`]: example tests of each method's documented contract (round trips, `NotFound`
//!   and `Conflict`, workspace isolation, pagination, filters, idempotency under racing
//!   calls, the first workspace and shared secrets under racing calls, leases and their
//!   release, per-endpoint and per-workspace claim quotas, cascading deletes, messages to
//!   several recipients and their racing recipient events, the activity counters, the event
//!   feed). Each check gets its own store
//!   and runs in its own task; all run even if some fail, and the suite then panics naming
//!   every failed check.
//! - [`model_test`]: random operation sequences run against the store under test and
//!   against [`MemoryStore`](super::MemoryStore), which must give the same answers.
//! - [`search_test`]: random messages and random searches, creation bounds and status
//!   filters, walked both ways, against a plain filter over the messages.
//! - [`rotation_test`]: the store's secrets moved to a new sealing key, interrupted and
//!   resumed, with writes meanwhile; given a function that opens the same store again.
//!
//! A storage crate wires both up in a few lines (sled keeps each store in a temp dir):
//! ```text
//! use tidings_testing::conformance::{model_test, run_all};
//!
//! fn fresh() -> (SledStore, tempfile::TempDir) {
//!     let dir = tempfile::tempdir().unwrap();
//!     (SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap(), dir)
//! }
//!
//! #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
//! async fn conforms_to_the_store_contract() {
//!     run_all(&fresh).await;
//! }
//!
//! #[test]
//! fn answers_like_the_reference_model() {
//!     model_test(&fresh, 32);
//! }
//! ```
//! The suite uses only millisecond-precision times and ids that increase in creation order
//! (see [`fixtures`](super::fixtures)); where the contract leaves a choice open (which of
//! several records due at the same instant a limited claim or lease release takes, the
//! order of `list_enabled_webhooks`) it accepts any answer.

mod activity;
mod batches;
mod domains;
mod event_feed;
mod find;
mod inbound;
mod keys;
mod leases;
mod messages;
mod model;
mod queue;
mod quotas;
mod recipients;
mod reputation;
mod retention;
mod rotation;
mod search;
mod secrets;
mod sessions;
mod suppressions;
mod templates;
mod webhooks;

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tidings_core::ports::{Page, PageRequest, Store, StoreError, StoreResult};

pub use model::{CASES_ENV, model_test};
pub use rotation::rotation_test;
pub use search::search_test;

/// Makes a fresh, empty store for one check or one model case.
///
/// Implemented for every `Fn() -> (S, G)`: `S` is the store, `G` a guard kept alive while the
/// store is in use and dropped after it (a temp dir, a database to drop; `()` if nothing).
/// Implement it by hand when making a store needs `.await`.
pub trait StoreFactory {
    /// The store under test.
    type Store: Store + 'static;
    /// Dropped after the store, when the check is over.
    type Guard;
    /// A fresh, empty store and its guard.
    fn make(&self) -> impl Future<Output = (Self::Store, Self::Guard)>;
}

impl<S, G, F> StoreFactory for F
where
    F: Fn() -> (S, G),
    S: Store + 'static,
{
    type Store = S;
    type Guard = G;
    fn make(&self) -> impl Future<Output = (S, G)> {
        std::future::ready(self())
    }
}

/// How long one check may take before it counts as hung (a deadlock, a lost wake-up).
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment variable: run only the checks whose name contains its value.
pub const FILTER_ENV: &str = "TIDINGS_CONFORMANCE_FILTER";

type Fut<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Check<S> = fn(Arc<S>) -> Fut<()>;

macro_rules! checks {
    ($($module:ident :: $name:ident),* $(,)?) => {
        vec![$((concat!(stringify!($module), "::", stringify!($name)), (|s| Box::pin($module::$name(s))) as Check<S>)),*]
    };
}

fn all_checks<S: Store + 'static>() -> Vec<(&'static str, Check<S>)> {
    checks![
        keys::workspaces_are_created_with_their_first_key,
        keys::only_an_empty_store_gets_a_first_workspace,
        keys::racing_first_workspaces_make_exactly_one,
        keys::keys_round_trip_and_refuse_duplicates,
        keys::key_lists_page_newest_first_without_revoked_keys,
        keys::revoking_a_key_shows_everywhere_once,
        keys::touching_ignores_unknown_and_revoked_keys,
        keys::a_live_keys_rate_changes_everywhere_and_a_revoked_ones_never,
        messages::messages_round_trip_with_their_queued_event,
        messages::message_lists_page_newest_first,
        messages::message_filters_combine,
        messages::message_extras_round_trip_and_lists_filter_by_tags_and_metadata,
        messages::status_filter_follows_recorded_events,
        messages::record_event_checks_the_expected_status,
        messages::record_event_checks_the_expected_last_event,
        messages::events_page_oldest_first,
        messages::events_and_messages_queue_webhook_deliveries,
        find::messages_are_found_by_id_in_any_workspace,
        search::messages_are_found_by_part_of_their_subject_or_any_recipient,
        search::creation_bounds_and_pages_before_a_message,
        recipients::messages_with_recipients_round_trip_with_their_events,
        recipients::recipients_are_found_by_any_address_once,
        recipients::partial_outcomes_make_the_aggregate_status,
        recipients::racing_recipient_events_are_all_kept,
        recipients::concurrent_recipient_events_are_all_kept,
        recipients::a_suppressed_recipient_is_settled_and_the_others_stay_due,
        recipients::the_due_index_follows_the_aggregate_next_attempt,
        queue::idempotency_keys_deduplicate_within_a_workspace,
        queue::expired_idempotency_keys_are_replaced,
        queue::racing_duplicates_create_exactly_one_message,
        queue::concurrent_writes_each_get_their_own_answer,
        queue::claims_take_due_messages_earliest_first_under_a_lease,
        queue::claims_skip_finished_and_deferred_messages,
        leases::released_leases_are_due_at_once_and_retry_times_stay,
        leases::a_requeued_message_waits_without_an_attempt,
        batches::batches_are_all_or_nothing,
        batches::scheduled_messages_wait_for_their_time,
        batches::record_event_checks_the_expected_lease,
        leases::released_delivery_leases_are_due_at_once,
        queue::purge_removes_only_expired_idempotency_records,
        retention::pending_messages_are_counted_with_those_due,
        retention::purges_bodies_and_timelines_of_old_settled_messages_only,
        retention::purges_go_earliest_first_up_to_the_limit,
        domains::domains_round_trip_and_names_are_unique_per_workspace,
        domains::domain_lists_page_newest_first,
        domains::domain_updates_stay_in_their_workspace,
        domains::deleting_a_domain_frees_its_name_and_removes_senders,
        domains::senders_match_usernames_case_insensitively,
        domains::sender_lists_page_newest_first,
        domains::domains_to_recheck_are_the_unverified_least_recently_checked,
        domains::domain_keys_change_only_by_compare_and_swap,
        domains::domains_to_rotate_are_verified_customer_domains_by_key_age,
        templates::templates_round_trip_with_versions,
        templates::template_versions_are_numbered_one_past_the_highest,
        templates::concurrent_versions_get_distinct_numbers,
        templates::template_updates_and_deletes,
        templates::a_template_is_found_by_its_exact_name_newest_first,
        suppressions::suppressions_match_case_insensitively,
        suppressions::suppression_lists_filter_by_reason_and_page,
        webhooks::webhooks_round_trip_and_stay_in_their_workspace,
        webhooks::deliveries_are_logged_per_endpoint,
        webhooks::deliveries_are_claimed_under_a_lease,
        webhooks::deliveries_are_listed_per_message,
        quotas::claims_take_each_endpoint_up_to_its_quota,
        quotas::in_flight_deliveries_count_against_the_quota,
        quotas::quota_claims_keep_the_limit_due_times_and_leases,
        quotas::claims_take_each_workspace_up_to_its_quota,
        quotas::in_flight_deliveries_count_against_the_workspace_quota,
        webhooks::deleting_a_webhook_deletes_its_deliveries,
        secrets::the_first_secret_stored_is_kept,
        secrets::racing_callers_all_get_one_secret,
        sessions::sessions_round_trip_by_token_hash,
        sessions::touches_only_move_sessions_forward,
        sessions::deleted_sessions_are_gone,
        sessions::expired_sessions_are_deleted_earliest_first_up_to_the_limit,
        activity::creates_and_events_count_in_their_hour_and_domain,
        activity::refused_writes_count_nothing,
        activity::purges_take_old_hours_earliest_first_up_to_the_limit,
        activity::counters_equal_a_naive_count_of_the_timelines,
        event_feed::the_feed_keeps_each_workspaces_events_in_write_order,
        event_feed::purged_timelines_leave_the_feed,
        event_feed::a_reader_racing_writers_misses_nothing,
        reputation::changes_are_written_over_the_version_they_were_made_from,
        reputation::racing_changes_of_one_version_write_once,
        inbound::routes_are_unique_per_match_within_a_workspace,
        inbound::messages_are_stored_with_raw_and_deliveries_within_the_quota,
        inbound::messages_are_listed_newest_first_with_filters,
        inbound::purges_take_old_messages_earliest_first_and_give_usage_back,
        inbound::racing_messages_never_overshoot_the_quota,
        inbound::messages_keep_whatever_text_they_were_sent,
        inbound::inbound_domains_are_those_with_inbound_on_in_any_workspace,
    ]
}

/// Runs every example check, each on a fresh store from `factory`, and panics listing the
/// checks that failed (with their messages) if any did. Set [`FILTER_ENV`] to run a subset.
///
/// Call it from a multi-thread tokio runtime
/// (`#[tokio::test(flavor = "multi_thread", worker_threads = 4)]`): the concurrency checks
/// need real parallelism, and each check runs in a spawned task with a time limit.
pub async fn run_all<F: StoreFactory>(factory: &F) {
    assert_eq!(
        tokio::runtime::Handle::current().runtime_flavor(),
        tokio::runtime::RuntimeFlavor::MultiThread,
        "run_all needs a multi-thread runtime: #[tokio::test(flavor = \"multi_thread\", worker_threads = 4)]"
    );
    let filter = std::env::var(FILTER_ENV).unwrap_or_default();
    let mut failures = Vec::new();
    let mut ran = 0;
    for (name, check) in all_checks::<F::Store>() {
        if !name.contains(filter.as_str()) {
            continue;
        }
        ran += 1;
        let (store, guard) = factory.make().await;
        let mut task = tokio::spawn(check(Arc::new(store)));
        let outcome = match tokio::time::timeout(CHECK_TIMEOUT, &mut task).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) if e.is_panic() => Some(panic_text(e.into_panic())),
            Ok(Err(e)) => Some(format!("task failed: {e}")),
            Err(_) => {
                task.abort();
                let _ = task.await;
                Some(format!("timed out after {CHECK_TIMEOUT:?} (deadlock?)"))
            }
        };
        drop(guard);
        if let Some(message) = outcome {
            failures.push(format!("{name}: {message}"));
        }
    }
    assert!(ran > 0, "no conformance check matches {FILTER_ENV}={filter:?}");
    assert!(
        failures.is_empty(),
        "{} of {ran} store conformance checks failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(text) => *text,
        Err(payload) => payload.downcast_ref::<&str>().map_or_else(|| "(non-text panic)".to_owned(), |s| s.to_string()),
    }
}

/// `.must("what")`: the value of a call that has to succeed, or a panic naming the step.
trait Must<T> {
    fn must(self, what: &str) -> T;
}

impl<T> Must<T> for StoreResult<T> {
    #[track_caller]
    fn must(self, what: &str) -> T {
        self.unwrap_or_else(|e| panic!("{what}: unexpected error {e:?}"))
    }
}

#[track_caller]
fn assert_not_found<T: Debug>(result: StoreResult<T>, what: &str) {
    assert!(matches!(result, Err(StoreError::NotFound)), "{what}: expected NotFound, got {result:?}");
}

#[track_caller]
fn assert_conflict<T: Debug>(result: StoreResult<T>, what: &str) {
    assert!(matches!(result, Err(StoreError::Conflict(_))), "{what}: expected Conflict, got {result:?}");
}

/// A list call as a closure of the page request, so [`walk_pages`] can drive it.
type Lister<K, T> = Box<dyn Fn(PageRequest<K>) -> Fut<StoreResult<Page<T>>> + Send + Sync>;

/// `lister!(s, |page| method(args..))`: a [`Lister`] calling `s.method(args..)` on a clone of
/// the `Arc` store `s`. Arguments must be `Copy` (ids) or built from `page`.
macro_rules! lister {
    ($s:ident, |$p:ident| $method:ident ( $($arg:expr),* $(,)? )) => {{
        let store = ::std::sync::Arc::clone(&$s);
        Box::new(move |$p| {
            let $s = ::std::sync::Arc::clone(&store);
            Box::pin(async move { $s.$method($($arg),*).await }) as $crate::conformance::Fut<_>
        }) as $crate::conformance::Lister<_, _>
    }};
}
use lister;

/// Walks a list with page size `limit` from the first page to the end and checks every page
/// against `expected` (the ids in list order): the items, `has_more` exactly, and that the
/// page after the last one is empty.
async fn walk_pages<K, T>(what: &str, list: &Lister<K, T>, id_of: fn(&T) -> K, limit: usize, expected: &[K])
where
    K: Copy + Eq + Debug + Send,
    T: Send,
{
    let mut cursor = None;
    let mut offset = 0;
    loop {
        let page = list(PageRequest { limit, cursor }).await.must(what);
        let ids: Vec<K> = page.items.iter().map(id_of).collect();
        let end = (offset + limit).min(expected.len());
        let wanted = &expected[offset.min(end)..end];
        assert_eq!(ids, wanted, "{what}: limit {limit}, page starting at item {offset} (cursor {cursor:?})");
        let more = end < expected.len();
        assert_eq!(page.has_more, more, "{what}: has_more of the page of limit {limit} starting at item {offset}");
        offset = end;
        if let Some(last) = ids.last() {
            cursor = Some(*last);
        }
        if !more {
            break;
        }
    }
    if cursor.is_some() {
        let after = list(PageRequest { limit, cursor }).await.must(what);
        assert!(after.items.is_empty() && !after.has_more, "{what}: the page after the last item is not empty");
    }
}

/// [`walk_pages`] with page sizes 1, 2, 3 and one larger than the list.
async fn walk_all_sizes<K, T>(what: &str, list: &Lister<K, T>, id_of: fn(&T) -> K, expected: &[K])
where
    K: Copy + Eq + Debug + Send,
    T: Send,
{
    for limit in [1, 2, 3, expected.len() + 1] {
        walk_pages(what, list, id_of, limit, expected).await;
    }
}
