//! The durable event feed as an application follows it: every event of the workspace in
//! order, resumed from a saved cursor by a service started anew over the same store, woken
//! by events this process records; a full key only; cursors that round-trip as text.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tidings_core::Error;
use tidings_core::ids::EventId;
use tidings_core::model::{EventType, KeyScope};
use tidings_core::ports::{FeedPosition, NoDns, SystemRandom};
use tidings_core::usecases::{CoreConfig, FeedCursor, Tidings};
use tidings_testing::delivery::Delivery;

#[tokio::test]
async fn a_follower_resumes_after_a_restart_from_the_cursor_it_saved() {
    let d = Delivery::new("1m", vec![]).await;
    let first = d.send("ann@example.net").await;
    let mut follower = d.t.core.events().follow(&d.who, None);
    let got = follower.next().await.unwrap();
    assert_eq!(got.iter().map(|e| e.event.event_type).collect::<Vec<_>>(), [EventType::Queued]);
    assert_eq!(got[0].event.message_id, first.id);
    let saved = follower.cursor().unwrap().to_string();
    drop(follower);

    // Delivered while "down", then a second message.
    d.step().await;
    let second = d.send("bob@example.net").await;

    // A new service over the same store, as after a restart.
    let restarted = Tidings::new(
        d.t.store.clone(),
        d.t.clock.clone(),
        Arc::new(SystemRandom),
        Arc::new(NoDns),
        CoreConfig::default(),
    );
    let mut follower = restarted.events().follow(&d.who, FeedCursor::parse(&saved));
    let got = follower.next().await.unwrap();
    let seen: Vec<_> = got.iter().map(|e| (e.event.message_id, e.event.event_type)).collect();
    assert_eq!(
        seen,
        [(first.id, EventType::Sent), (first.id, EventType::Delivered), (second.id, EventType::Queued)],
        "what happened after the saved cursor, and nothing before it"
    );
}

#[tokio::test]
async fn a_waiting_follower_is_woken_by_an_event_of_its_workspace() {
    let d = Delivery::new("1m", vec![]).await;
    // A poll interval far longer than the test: only the wake-up can end the wait.
    let mut follower = d.t.core.events().follow(&d.who, None).with_poll_interval(Duration::from_secs(3600));
    let waiting = tokio::spawn(async move { follower.next().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    d.send("ann@example.net").await;
    let got = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("woken").unwrap().unwrap();
    assert_eq!(got[0].event.event_type, EventType::Queued);
}

#[tokio::test]
async fn only_a_full_key_reads_the_feed_and_the_limit_is_checked() {
    let d = Delivery::new("1m", vec![]).await;
    let mut sender = d.who.clone();
    sender.scope = KeyScope::Send;
    assert!(matches!(d.t.core.events().since(&sender, None, 10).await, Err(Error::InsufficientScope)));
    for limit in [0, 501] {
        let refused = d.t.core.events().since(&d.who, None, limit).await;
        assert!(matches!(refused, Err(Error::Validation { .. })), "limit {limit}: {refused:?}");
    }
    let page = d.t.core.events().since(&d.who, None, 500).await.unwrap();
    assert!(page.events.is_empty());
    assert_eq!(page.next, None, "nothing read from the start: still the start");
}

#[test]
fn text_that_no_cursor_writes_is_not_a_cursor() {
    for bad in [
        "",
        "-",
        "1-",
        "-01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "x-01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "10000000000000000-01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "1-nope",
    ] {
        assert_eq!(FeedCursor::parse(bad), None, "{bad:?}");
    }
}

proptest! {
    #[test]
    fn cursors_round_trip_as_text(commit in any::<u64>(), event in any::<u128>()) {
        let cursor = FeedCursor::from(FeedPosition { commit, event: EventId(ulid::Ulid(event)) });
        prop_assert_eq!(FeedCursor::parse(&cursor.to_string()), Some(cursor));
    }
}
