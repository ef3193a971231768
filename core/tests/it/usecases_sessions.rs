//! Dashboard sessions over the in-memory store with a fixed clock: sign-in through the
//! API's failed-auth throttle, expiry (idle and absolute), revocation, sign-out, purge.

use std::net::{IpAddr, Ipv4Addr};

use chrono::Duration;
use tidings_core::model::SessionToken;
use tidings_core::ports::SessionStore;
use tidings_core::usecases::{
    AuthOutcome, AuthRefusal, AuthThrottleConfig, CoreConfig, CreateApiKeyRequest, LocalLimits,
    SESSION_TOUCH_RESOLUTION, SessionPolicy,
};
use tidings_testing::TestCore;

const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));

async fn first_key(t: &TestCore) -> String {
    let (_, first) = t.core.workspaces().create("acme", None).await.unwrap();
    first.plaintext.expose().to_owned()
}

#[tokio::test]
async fn a_key_signs_in_and_the_session_acts_as_that_key() {
    let t = TestCore::new();
    let key = first_key(&t).await;
    let limits = LocalLimits::default();
    let signed_in =
        t.core.sessions().sign_in(&limits, CLIENT, &format!("  {key}\n")).await.unwrap().admitted().expect("signed in");
    let as_api = t.core.authenticate(&key).await.unwrap();

    let active = t.core.sessions().resume(signed_in.token.expose()).await.unwrap().expect("the session is live");
    assert_eq!(active.principal, as_api, "the session acts exactly as the key does through the API");
    assert_eq!(active.session, signed_in.session);
    assert!(active.csrf_matches(active.csrf_token()));
    assert!(!active.csrf_matches(""));
    assert!(!active.csrf_matches(&active.csrf_token()[1..]));
    assert_ne!(active.csrf_token(), signed_in.token.expose(), "the CSRF token is not the cookie");

    let stored = t.store.find_session(&signed_in.token.hash()).await.unwrap().expect("stored");
    assert_eq!(stored.token_hash, signed_in.token.hash(), "only the hash is kept");
    let json = serde_json::to_string(&stored).unwrap();
    assert!(!json.contains(signed_in.token.expose()), "the token itself is not stored");
}

#[tokio::test]
async fn failed_sign_ins_count_in_the_api_throttle() {
    let t = TestCore::new();
    let key = first_key(&t).await;
    let limits = LocalLimits::new(AuthThrottleConfig { max_failures: 3, ..AuthThrottleConfig::default() });
    for bad in ["", "   ", "tid_notakey", "tid_0000000000000000000000000000000000000000"] {
        let refused = t.core.sessions().sign_in(&limits, CLIENT, bad).await.unwrap();
        assert!(refused.admitted().is_none(), "{bad:?} is refused");
    }
    // The throttle is the API's: after those failures the API refuses this client too.
    let api = t.core.authenticate_client(&limits, CLIENT, Some(&key)).await.unwrap();
    assert!(matches!(api, AuthOutcome::Refused(AuthRefusal::Blocked(_))), "got {api:?}");
    let again = t.core.sessions().sign_in(&limits, CLIENT, &key).await.unwrap();
    assert!(
        matches!(again, AuthOutcome::Refused(AuthRefusal::Blocked(_))),
        "a right key during a block is refused too"
    );
    let elsewhere = t.core.sessions().sign_in(&limits, IpAddr::V4(Ipv4Addr::LOCALHOST), &key).await.unwrap();
    assert!(elsewhere.admitted().is_some(), "another client is not blocked");
}

#[tokio::test]
async fn sessions_end_when_idle_and_after_their_lifetime() {
    let policy = SessionPolicy { idle_timeout: Duration::minutes(30), max_lifetime: Duration::hours(2) };
    let t = TestCore::with_config(CoreConfig { sessions: policy, ..CoreConfig::default() });
    let key = first_key(&t).await;
    let limits = LocalLimits::default();

    let idle = t.core.sessions().sign_in(&limits, CLIENT, &key).await.unwrap().admitted().unwrap();
    t.clock.advance(Duration::minutes(29));
    assert!(t.core.sessions().resume(idle.token.expose()).await.unwrap().is_some(), "used within the idle time");
    t.clock.advance(Duration::minutes(29));
    assert!(t.core.sessions().resume(idle.token.expose()).await.unwrap().is_some(), "each use moves the idle expiry");
    t.clock.advance(Duration::minutes(30));
    assert!(t.core.sessions().resume(idle.token.expose()).await.unwrap().is_none(), "idle for 30 minutes: ended");
    assert!(t.store.find_session(&idle.token.hash()).await.unwrap().is_none(), "and deleted");

    let busy = t.core.sessions().sign_in(&limits, CLIENT, &key).await.unwrap().admitted().unwrap();
    for _ in 0..7 {
        t.clock.advance(Duration::minutes(15));
        assert!(t.core.sessions().resume(busy.token.expose()).await.unwrap().is_some());
    }
    t.clock.advance(Duration::minutes(15));
    assert!(
        t.core.sessions().resume(busy.token.expose()).await.unwrap().is_none(),
        "however busy, a session ends after its lifetime"
    );
}

#[tokio::test]
async fn touches_are_kept_to_the_resolution() {
    let t = TestCore::new();
    let key = first_key(&t).await;
    let signed_in = t.core.sessions().sign_in(&LocalLimits::default(), CLIENT, &key).await.unwrap().admitted().unwrap();
    t.clock.advance(SESSION_TOUCH_RESOLUTION - Duration::seconds(1));
    t.core.sessions().resume(signed_in.token.expose()).await.unwrap().unwrap();
    let stored = t.store.find_session(&signed_in.token.hash()).await.unwrap().unwrap();
    assert_eq!(stored.last_seen_at, signed_in.session.last_seen_at, "not written again within the resolution");
    t.clock.advance(Duration::seconds(1));
    t.core.sessions().resume(signed_in.token.expose()).await.unwrap().unwrap();
    let stored = t.store.find_session(&signed_in.token.hash()).await.unwrap().unwrap();
    assert_eq!(stored.last_seen_at, t.now());
    assert_eq!(stored.expires_at, t.now() + SessionPolicy::default().idle_timeout);
}

#[tokio::test]
async fn revoking_the_key_ends_its_sessions_and_scope_changes_apply_at_once() {
    let t = TestCore::new();
    let key = first_key(&t).await;
    let limits = LocalLimits::default();
    let admin = t.core.authenticate(&key).await.unwrap();
    let req = CreateApiKeyRequest { scope: Some("send".into()), ..Default::default() };
    let send = t.core.keys().create(&admin, req).await.unwrap();
    let session =
        t.core.sessions().sign_in(&limits, CLIENT, send.plaintext.expose()).await.unwrap().admitted().unwrap();
    let active = t.core.sessions().resume(session.token.expose()).await.unwrap().unwrap();
    assert_eq!(active.principal.scope, tidings_core::model::KeyScope::Send, "a send key's session is a send session");

    t.core.keys().revoke(&admin, send.key.id).await.unwrap();
    assert!(t.core.sessions().resume(session.token.expose()).await.unwrap().is_none(), "revoked: the session ends");
    assert!(t.store.find_session(&session.token.hash()).await.unwrap().is_none(), "and is deleted");
}

#[tokio::test]
async fn sign_out_ends_the_session_and_malformed_tokens_find_nothing() {
    let t = TestCore::new();
    let key = first_key(&t).await;
    let limits = LocalLimits::default();
    let (a, b) = (
        t.core.sessions().sign_in(&limits, CLIENT, &key).await.unwrap().admitted().unwrap(),
        t.core.sessions().sign_in(&limits, CLIENT, &key).await.unwrap().admitted().unwrap(),
    );
    t.core.sessions().sign_out(a.token.expose()).await.unwrap();
    assert!(t.core.sessions().resume(a.token.expose()).await.unwrap().is_none());
    assert!(t.core.sessions().resume(b.token.expose()).await.unwrap().is_some(), "other sessions stay");
    t.core.sessions().sign_out(a.token.expose()).await.unwrap();
    for junk in ["", "tds_", &key, "tds_../../etc/passwd", &"x".repeat(10_000)] {
        assert!(t.core.sessions().resume(junk).await.unwrap().is_none(), "{junk:.20}");
        t.core.sessions().sign_out(junk).await.unwrap();
    }
    let unknown = SessionToken::generate(&tidings_core::ports::SystemRandom);
    assert!(t.core.sessions().resume(unknown.expose()).await.unwrap().is_none());
}

#[tokio::test]
async fn expired_sessions_are_purged() {
    let t = TestCore::new();
    let key = first_key(&t).await;
    let limits = LocalLimits::default();
    let old: Vec<_> = sign_in_times(&t, &limits, &key, 3).await;
    t.clock.advance(Duration::minutes(20));
    let fresh = t.core.sessions().sign_in(&limits, CLIENT, &key).await.unwrap().admitted().unwrap();
    t.clock.advance(Duration::minutes(15));
    assert_eq!(t.core.sessions().purge_expired(100).await.unwrap(), 3);
    for s in &old {
        assert!(t.store.find_session(&s.token.hash()).await.unwrap().is_none());
    }
    assert!(t.core.sessions().resume(fresh.token.expose()).await.unwrap().is_some());
    assert_eq!(t.core.sessions().purge_expired(100).await.unwrap(), 0);
}

async fn sign_in_times(
    t: &TestCore,
    limits: &LocalLimits,
    key: &str,
    n: usize,
) -> Vec<tidings_core::usecases::SignedIn> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(t.core.sessions().sign_in(limits, CLIENT, key).await.unwrap().admitted().unwrap());
    }
    out
}
