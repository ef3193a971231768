//! No workspace can slow another, against the real binary on sled or PostgreSQL
//! (`TIDINGS_E2E_STORE=postgres`), with two workspaces on one server: one attacking, one
//! measured.
//!
//! - Webhooks: the attacker's twenty endpoints hang every POST (until the 10 s timeout) and
//!   it queues hundreds of test events, more than the dispatcher has slots; the other
//!   workspace's test events still reach its endpoint at once. Before, one workspace's dead
//!   endpoints could hold every slot and its backlog, due first, was claimed first each time
//!   a slot freed: the other workspace's webhooks waited up to 204 s.
//! - Renders: the attacker sends render bombs (templates that use up their work budget) from
//!   eight clients back to back; the other workspace's template sends stay fast. Before, one
//!   first-come render queue on one thread made them wait behind every bomb queued: 4 ms
//!   became 4.6 s at the median.
//!
//! Every test runs on one runtime ([`block_on`]): the receiver and the DNS server are tasks
//! that a test's own runtime would take down when that test ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{DataDir, Options, TestServer};

use crate::common::receiver::{Receiver, Reply};
use crate::common::{assert_ok, block_on, create_key, start_with_dns, verified_domain};
use crate::replays_and_renders::{BOMB_HTML, create_template, thousand_keys};

/// How long a test waits for something it polls for.
const WAIT: Duration = Duration::from_secs(30);

/// A server with `env` on a data dir where the operator made two workspaces, `attacker` and
/// `victim`; returns their full keys.
async fn two_workspaces(env: &[(&str, &str)]) -> (TestServer, TestDnsServer, String, String) {
    let data_dir = DataDir::new();
    let (_, attacker) = data_dir.create_workspace("attacker");
    let (_, victim) = data_dir.create_workspace("victim");
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let options =
        Options { data_dir: Some(data_dir), bootstrap_key: Some(attacker.clone()), env, ..Options::default() };
    let (server, dns) = start_with_dns(options).await;
    (server, dns, attacker, victim)
}

/// Median, 90th percentile and worst of `samples`.
fn spread(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort();
    let at = |q: usize| samples[(samples.len() * q / 100).min(samples.len() - 1)];
    (at(50), at(90), samples[samples.len() - 1])
}

/// Creates an endpoint of the workspace whose key is `key`; returns its id.
async fn endpoint(server: &TestServer, key: &str, url: &str) -> String {
    let (status, body) = server.post("/v1/webhooks", key, json!({"url": url, "eventTypes": ["Delivered"]})).await;
    assert_ok(status, &body, 201, &format!("create the endpoint {url}"));
    body["data"]["id"].as_str().unwrap().to_owned()
}

/// Queues a test event for the endpoint `id`.
async fn test_event(server: &TestServer, key: &str, id: &str) {
    let (status, body) = server.post(&format!("/v1/webhooks/{id}/test"), key, json!({})).await;
    assert_ok(status, &body, 201, "queue a test event");
}

/// When each request to the attacker's endpoints arrived, so far, earliest first.
fn attacker_hits(receiver: &Receiver) -> Vec<Instant> {
    let mut at: Vec<Instant> =
        (0..HANGING_ENDPOINTS).flat_map(|i| receiver.hits(&format!("/hang{i}"))).map(|hit| hit.at).collect();
    at.sort();
    at
}

/// The attacker's POSTs that were in flight together: those that arrived within 9 s of the
/// first, before any could end by the 10 s timeout and free a slot.
fn attacker_in_flight(receiver: &Receiver) -> usize {
    let hits = attacker_hits(receiver);
    hits.first().map_or(0, |first| hits.iter().filter(|at| at.duration_since(*first) < Duration::from_secs(9)).count())
}

const HANGING_ENDPOINTS: usize = 20;
const EVENTS_PER_ENDPOINT: usize = 20;
/// What the dispatcher lets one workspace hold (core's `DispatchSettings` default).
const WORKSPACE_SHARE: usize = 64;

#[test]
fn one_workspaces_hanging_endpoints_do_not_delay_anothers_webhooks() {
    block_on(async {
        let (server, _dns, attacker, victim) = two_workspaces(&[("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true")]).await;
        let receiver = Receiver::start().await;
        let mut hanging = Vec::new();
        for i in 0..HANGING_ENDPOINTS {
            let path = format!("/hang{i}");
            receiver.script(&path, std::iter::repeat_n(Reply::Hang, 1_000));
            hanging.push(endpoint(&server, &attacker, &receiver.url(&path)).await);
        }
        let own = endpoint(&server, &victim, &receiver.url("/victim")).await;

        // The attacker queues 400 test events, 20 per endpoint: with 16 POSTs allowed per
        // endpoint, enough to take all 256 slots of the dispatcher if nothing else held it.
        for _ in 0..EVENTS_PER_ENDPOINT {
            join_all(hanging.iter().map(|id| test_event(&server, &attacker, id))).await;
        }
        let deadline = Instant::now() + WAIT;
        while attacker_hits(&receiver).len() < WORKSPACE_SHARE {
            assert!(Instant::now() < deadline, "the attacker's POSTs did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Time for the dispatcher to take more, if it would.
        tokio::time::sleep(Duration::from_millis(500)).await;

        // The victim queues a test event at a time and waits for it to arrive.
        let mut samples = Vec::new();
        for n in 1..=20 {
            let sent = Instant::now();
            test_event(&server, &victim, &own).await;
            let hits = receiver.wait_for("/victim", n, WAIT).await;
            samples.push(hits[n - 1].at.saturating_duration_since(sent));
        }
        let in_flight = attacker_in_flight(&receiver);
        let (median, p90, worst) = spread(samples);
        println!(
            "webhooks of a workspace while another's {HANGING_ENDPOINTS} endpoints hang {} queued events: \
             victim's event to its endpoint median {median:?}, p90 {p90:?}, worst {worst:?}; \
             attacker's POSTs in flight at once {in_flight}",
            HANGING_ENDPOINTS * EVENTS_PER_ENDPOINT
        );
        assert_eq!(in_flight, WORKSPACE_SHARE, "the attacker holds its share of the slots, no more");
        // Before, up to 204 s (the victim waited for the attacker's timeouts); a generous
        // bound for a loaded 2-core machine running a debug build.
        assert!(median < Duration::from_millis(500), "median {median:?}");
        assert!(worst < Duration::from_secs(3), "worst {worst:?}: below the 10 s timeout the attacker's POSTs hold");
        receiver.release();
    });
}

/// One of the attacker's requests: its renders wait their workspace's turns, so on a loaded
/// machine it may take longer than the harness's 20 s client timeout.
async fn bomb_request(server: &TestServer, path: &str, key: &str, body: Value) -> (u16, Value) {
    let request = server.request(reqwest::Method::POST, path).bearer_auth(key).json(&body);
    let response = request.timeout(Duration::from_secs(300)).send().await.expect("an answer to a bomb");
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON envelope"))
}

/// Sends the victim's template message; returns how long the answer took.
async fn timed_send(server: &TestServer, key: &str, send: &Value) -> Duration {
    let started = Instant::now();
    let (status, body) = server.post("/v1/messages", key, send.clone()).await;
    let took = started.elapsed();
    assert_ok(status, &body, 201, "the victim's template send");
    took
}

#[test]
fn one_workspaces_render_bombs_do_not_slow_anothers_template_sends() {
    block_on(async {
        let (server, dns, attacker, victim) = two_workspaces(&[]).await;
        verified_domain(&server, &dns, &attacker, "bombs.example").await;
        verified_domain(&server, &dns, &victim, "shop.example").await;
        let (_, bomber) = create_key(&server, &attacker, json!({"name": "bomber", "rateLimitPerSec": 10000})).await;
        let (_, sender) = create_key(&server, &victim, json!({"name": "app", "rateLimitPerSec": 1000})).await;
        let bomb_template = create_template(&server, &bomber, "Hello", BOMB_HTML).await;
        let bomb = json!({"from": "a@bombs.example", "to": "b@example.com", "templateId": bomb_template,
                          "variables": thousand_keys()});
        let receipt = create_template(&server, &sender, "Your order {{order}}", "<p>Thanks, {{name}}.</p>").await;
        let send = json!({"from": "orders@shop.example", "to": "ann@example.com", "templateId": receipt,
                          "variables": {"name": "Ann", "order": "A-17"}});

        let mut baseline = Vec::new();
        for _ in 0..10 {
            baseline.push(timed_send(&server, &sender, &send).await);
        }

        // Eight clients bomb back to back: two sending, two batch-sending (two items each),
        // two previewing, two sending again.
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(std::sync::Mutex::new(Vec::<(u16, String)>::new()));
        let clients = (0..8).map(|i| {
            let (server, key, bomb, template) = (&server, bomber.clone(), bomb.clone(), bomb_template.clone());
            let (stop, refused) = (Arc::clone(&stop), Arc::clone(&refused));
            async move {
                while !stop.load(Ordering::Relaxed) {
                    let (path, body) = match i % 4 {
                        1 => ("/v1/messages/batch".to_owned(), json!([bomb.clone(), bomb.clone()])),
                        2 => (format!("/v1/templates/{template}/render"), json!({"variables": thousand_keys()})),
                        _ => ("/v1/messages".to_owned(), bomb.clone()),
                    };
                    let (status, body) = bomb_request(server, &path, &key, body).await;
                    refused.lock().unwrap().push((status, body["error"].to_string()));
                }
            }
        });
        let sampler = async {
            // Let the bombs start and queue, then send 30 times, 50 ms apart.
            tokio::time::sleep(Duration::from_millis(1_000)).await;
            let mut samples = Vec::new();
            for _ in 0..30 {
                samples.push(timed_send(&server, &sender, &send).await);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            stop.store(true, Ordering::Relaxed);
            samples
        };
        let (samples, _) = tokio::join!(sampler, join_all(clients));

        let refused = refused.lock().unwrap().clone();
        assert!(refused.len() >= 8, "the bombs were answered: {refused:?}");
        for (status, error) in &refused {
            assert!(*status == 422 && error.contains("too much work"), "a bomb is refused by its budget: {error}");
        }
        let (base_median, _, base_worst) = spread(baseline);
        let (median, p90, worst) = spread(samples);
        println!(
            "template sends of a workspace while another sends {} render bombs (8 clients): median {median:?}, \
             p90 {p90:?}, worst {worst:?}; unloaded median {base_median:?}, worst {base_worst:?}",
            refused.len()
        );
        // Before, 4 ms became 4.6 s at the median (release build); a debug build on a loaded
        // 2-core machine gets a generous bound.
        assert!(median < Duration::from_millis(500), "median {median:?} while another workspace renders bombs");
        assert!(worst < Duration::from_secs(3), "worst {worst:?} while another workspace renders bombs");
    });
}
