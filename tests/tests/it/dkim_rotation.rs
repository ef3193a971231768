//! DKIM key rotation (issue #34, contract §12 "DKIM key rotation") through the built server,
//! relaying to an [`SmtpSink`], its domain's records in a loopback DNS server: dkimpy
//! (`tests/interop/verify_dkim.py`, asking that DNS server) verifies both signatures of every
//! message sent before the rotation, while the new records are pending, in flight across the
//! switch (held by the sink after their data, before its 250, while the background re-check
//! finds the new records and switches), and after it; then the old records retire and leave
//! the list. No message may be signed with a key whose record is not published.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::{ReceivedMessage, SmtpSink, Stage};

use crate::common::mail::{plain_mail, send_ok};
use crate::common::{assert_error, assert_ok, create_key, publish, server_relaying_to, verified_domain};
use crate::interop::verifiers::{self, Verdicts};

const DOMAIN: &str = "rotate.example";
const WAIT: Duration = Duration::from_secs(30);
/// `TIDINGS_DKIM_RETIRE_AFTER`: long enough to see the old records `Retiring`.
const RETIRE_AFTER: &str = "8s";

/// The `s=` of each DKIM-Signature of a message, in order.
fn selectors(raw: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(raw);
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    // Unfold: a line starting with white space continues the field before it.
    let unfolded = head.replace("\r\n\t", " ").replace("\r\n ", " ");
    unfolded
        .lines()
        .filter(|line| line.to_ascii_lowercase().starts_with("dkim-signature:"))
        .filter_map(|line| line.split(';').map(str::trim).find_map(|tag| tag.strip_prefix("s=")).map(str::to_owned))
        .collect()
}

/// dkimpy's verdicts on `messages`, asking `dns` for the keys: for each message, whether its
/// RSA and its Ed25519 signature verify.
fn dkimpy(messages: &[ReceivedMessage], dns: &TestDnsServer) -> Vec<(bool, bool)> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let files: Vec<String> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let file = dir.path().join(format!("message-{i}.eml"));
            std::fs::write(&file, &m.data).expect("the message is written");
            file.display().to_string()
        })
        .collect();
    let args = [vec!["--dns".to_owned(), dns.addr().to_string()], files.clone()].concat();
    let mut verdicts = Verdicts::default();
    verifiers::run("python3", "verify_dkim.py", &args, &|file| file.to_owned(), &mut verdicts);
    let ok = |file: &String, check: &str| verdicts.get(file).and_then(|v| v.get(check)).is_some_and(|v| v.ok);
    if std::env::var_os("TEST_LOG").is_some() {
        eprintln!("dkimpy: {verdicts:?}");
    }
    files.iter().map(|f| (ok(f, "dkimpy rsa-sha256"), ok(f, "dkimpy ed25519-sha256"))).collect()
}

/// Every message's two signatures verify with dkimpy, and were made with `pair`'s selectors.
#[track_caller]
fn assert_verified_with(messages: &[ReceivedMessage], dns: &TestDnsServer, pair: &(String, String), when: &str) {
    assert!(!messages.is_empty(), "{when}: no messages");
    for (message, verdict) in messages.iter().zip(dkimpy(messages, dns)) {
        assert_eq!(
            verdict,
            (true, true),
            "{when}: dkimpy (rsa, ed25519) of\n{}",
            String::from_utf8_lossy(&message.data)
        );
        assert_eq!(selectors(&message.data), [pair.0.clone(), pair.1.clone()], "{when}: signed with the pair");
    }
}

/// The DKIM records of a domain response as (selector, state, status), in the listed order.
fn dkim_records(domain: &Value) -> Vec<(String, String, String)> {
    let records = domain["dnsRecords"].as_array().expect("dnsRecords");
    records
        .iter()
        .filter(|r| r["purpose"].as_str().is_some_and(|p| p.starts_with("DKIM")))
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_else(|| panic!("{k} of {r}")).to_owned();
            (text("selector"), text("state"), text("status"))
        })
        .collect()
}

/// The (RSA, Ed25519) selectors of the pair in `state`.
fn pair_in(domain: &Value, state: &str) -> (String, String) {
    let of = dkim_records(domain).into_iter().filter(|(_, s, _)| s == state).map(|(sel, _, _)| sel).collect::<Vec<_>>();
    assert_eq!(of.len(), 2, "one {state} pair in {domain}");
    (of[0].clone(), of[1].clone())
}

struct Setup {
    server: TestServer,
    dns: TestDnsServer,
    sink: SmtpSink,
    id: String,
    /// Messages the sink has accepted so far.
    accepted: usize,
}

impl Setup {
    async fn domain(&self) -> Value {
        let (status, body) = self.server.get(&format!("/v1/domains/{}", self.id), self.server.key()).await;
        assert_ok(status, &body, 200, "GET the domain");
        body["data"].clone()
    }

    /// Polls the domain until `done` holds, for at most [`WAIT`].
    async fn domain_until(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let domain = self.domain().await;
            if done(&domain) {
                return domain;
            }
            assert!(Instant::now() < deadline, "after {WAIT:?}, still not {what}: {domain}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Sends `n` messages (their ids).
    async fn send(&self, n: usize) -> Vec<String> {
        let mut ids = Vec::new();
        for i in 0..n {
            ids.push(
                send_ok(&self.server, self.server.key(), plain_mail(DOMAIN, &format!("user{i}@example.net"))).await,
            );
        }
        ids
    }

    /// Waits until `n` more messages are accepted; those `n`.
    async fn accepted(&mut self, n: usize) -> Vec<ReceivedMessage> {
        let all = self.sink.wait_for(self.accepted + n, WAIT).await.expect("the messages arrive");
        self.accepted += n;
        all[all.len() - n..].to_vec()
    }
}

// Multi-threaded: dkimpy runs as a blocking child process while the DNS server it asks
// answers on the test's runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_verifies_before_during_and_after_a_dkim_key_rotation_and_old_keys_retire() {
    let test = "mail_verifies_before_during_and_after_a_dkim_key_rotation_and_old_keys_retire";
    let probe = "import dkim, dns.message, nacl";
    if !tidings_e2e::tool_available(test, std::process::Command::new("python3").args(["-c", probe]), verifiers::INSTALL)
    {
        return;
    }
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let env = [("TIDINGS_DOMAIN_RECHECK_INTERVAL", "1s"), ("TIDINGS_DKIM_RETIRE_AFTER", RETIRE_AFTER)];
    let (server, dns) = server_relaying_to(&sink, &env).await;
    let id = verified_domain(&server, &dns, server.key(), DOMAIN).await;
    let mut t = Setup { server, dns, sink, id, accepted: 0 };
    let first = t.domain().await;
    let old = pair_in(&first, "Active");
    assert!(
        first["dnsRecords"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["purpose"].as_str().unwrap().starts_with("DKIM") == r["state"].is_string()),
        "only DKIM records carry a state: {first}"
    );

    // Before: signed with the only pair.
    t.send(2).await;
    let before = t.accepted(2).await;
    assert_verified_with(&before, &t.dns, &old, "before the rotation");

    // Rotate: who may, and one at a time.
    let path = format!("/v1/domains/{}/rotate-dkim", t.id);
    let (_, send_key) = create_key(&t.server, t.server.key(), json!({"name": "app", "scope": "send"})).await;
    let (status, body) = t.server.post(&path, &send_key, json!({})).await;
    assert_error(status, &body, 403, "insufficient_scope", "a send key rotating");
    let unknown = "/v1/domains/01JDKR0TAT10N0000000000000/rotate-dkim";
    let (status, body) = t.server.post(unknown, t.server.key(), json!({})).await;
    assert_error(status, &body, 404, "not_found", "an unknown domain");
    let (status, body) = t.server.post(&path, t.server.key(), json!({})).await;
    assert_ok(status, &body, 200, "rotate");
    let rotated = body["data"].clone();
    let new = pair_in(&rotated, "Pending");
    assert_ne!(new, old);
    assert_eq!(
        dkim_records(&rotated).into_iter().map(|(_, state, status)| (state, status)).collect::<Vec<_>>(),
        [("Active", "Verified"), ("Active", "Verified"), ("Pending", "Pending"), ("Pending", "Pending")]
            .map(|(a, b)| (a.to_owned(), b.to_owned())),
        "{rotated}"
    );
    assert_eq!(rotated["overallStatus"], "Verified", "the domain stays sendable");
    let (status, body) = t.server.post(&path, t.server.key(), json!({})).await;
    assert_error(status, &body, 409, "conflict", "a second rotation while one is pending");

    // During, new records not in DNS yet: the old keys sign (a new key's signature would fail).
    tokio::time::sleep(Duration::from_secs(2)).await; // a re-check or two pass meanwhile
    t.send(2).await;
    let pending = t.accepted(2).await;
    assert_verified_with(&pending, &t.dns, &old, "while the new records are not published");
    assert_eq!(pair_in(&t.domain().await, "Pending"), new, "still pending: its records are not in DNS");

    // In flight across the switch: two messages signed with the old keys are held by the
    // receiver while the new records are published and the background re-check switches.
    t.sink.hold(Stage::Message);
    t.send(2).await;
    t.sink.wait_for_held(2, WAIT).await.expect("two deliveries in flight");
    publish(&t.dns, &rotated, &["DKIM"]).await;
    let switched =
        t.domain_until("switched to the new keys", |d| pair_in_state(d, "Active") == Some(new.clone())).await;
    assert_eq!(pair_in(&switched, "Retiring"), old, "the old records are kept, Retiring: {switched}");
    t.send(2).await;
    t.sink.wait_for_held(4, WAIT).await.expect("two more deliveries in flight, signed after the switch");
    t.sink.release();
    let in_flight = t.accepted(4).await;
    let (old_signed, new_signed): (Vec<_>, Vec<_>) =
        in_flight.into_iter().partition(|m| selectors(&m.data).first() == Some(&old.0));
    assert_eq!((old_signed.len(), new_signed.len()), (2, 2), "two signed before the switch, two after");
    assert_verified_with(&old_signed, &t.dns, &old, "in flight, signed before the switch, received after it");
    assert_verified_with(&new_signed, &t.dns, &new, "in flight, signed after the switch");

    // After: the new keys sign; the old records say when they retire.
    let retiring = t.domain().await;
    let retires_at = retiring["dnsRecords"].as_array().unwrap().iter().find(|r| r["selector"] == json!(old.0));
    assert!(retires_at.is_some_and(|r| r["retiresAt"].is_string()), "a Retiring record says when: {retiring}");
    t.send(2).await;
    let after = t.accepted(2).await;
    assert_verified_with(&after, &t.dns, &new, "after the switch");

    // Retirement: after TIDINGS_DKIM_RETIRE_AFTER the old records are Retired (safe to
    // remove). Removed from DNS, mail signed before the switch no longer verifies (so the
    // checks above told the keys apart) while new mail still does.
    let retired = t.domain_until("retired", |d| pair_in_state(d, "Retired") == Some(old.clone())).await;
    assert_eq!(retired["overallStatus"], "Verified");
    assert!(retired["dnsRecords"].as_array().unwrap().iter().all(|r| r["retiresAt"].is_null()), "{retired}");
    for selector in [&old.0, &old.1] {
        t.dns.remove_name(&format!("{selector}._domainkey.{DOMAIN}")).await;
    }
    assert!(dkimpy(&before, &t.dns).iter().all(|v| *v == (false, false)), "old keys' mail fails once unpublished");
    t.send(1).await;
    let last = t.accepted(1).await;
    assert_verified_with(&last, &t.dns, &new, "after the old records are removed");

    // Then they leave the list.
    let done = t.domain_until("without the retired records", |d| dkim_records(d).len() == 2).await;
    assert_eq!(pair_in(&done, "Active"), new);
    let (status, body) = t.server.post(&path, t.server.key(), json!({})).await;
    assert_ok(status, &body, 200, "a new rotation once none is pending");
}

/// The pair in `state`, if exactly one pair is.
fn pair_in_state(domain: &Value, state: &str) -> Option<(String, String)> {
    let of = dkim_records(domain).into_iter().filter(|(_, s, _)| s == state).map(|(sel, _, _)| sel).collect::<Vec<_>>();
    (of.len() == 2).then(|| (of[0].clone(), of[1].clone()))
}
