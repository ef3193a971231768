//! What both front ends share and SMTP submission adds: authentication behind the failed-auth
//! throttle, the rate-limited send (token refunds, replays with an empty bucket), and a
//! submitted message queued as one send to all its recipients, idempotent on its Message-ID.

use std::net::{IpAddr, Ipv4Addr};

use chrono::Duration;
use tidings_core::Error;
use tidings_core::email::EmailAddress;
use tidings_core::ids::TemplateId;
use tidings_core::model::{DomainStatus, RecipientKind};
use tidings_core::ports::{DomainStore, SuppressionStore};
use tidings_core::usecases::{
    Admission, AuthOutcome, AuthRefusal, AuthThrottleConfig, BatchValidation, CreateApiKeyRequest,
    CreateTemplateRequest, LimitedSend, ListParams, LocalLimits, MessageFilters, Principal, RenderTemplateRequest,
    SendRequest, SubmitFailure,
};
use tidings_testing::TestCore;
use tidings_testing::fixtures;
use tidings_testing::service;

const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));

/// A workspace with the verified domain `acme.com`; its first key's principal and plaintext.
async fn workspace(t: &TestCore) -> (Principal, String) {
    let (workspace, created) = t.core.workspaces().create("acme", None).await.unwrap();
    let mut domain = fixtures::domain(workspace.id, "acme.com");
    domain.status = DomainStatus::Verified;
    t.store.insert_domain(&domain).await.unwrap();
    let plaintext = created.plaintext.expose().to_owned();
    (t.core.authenticate(&plaintext).await.unwrap(), plaintext)
}

/// A key of `rate` sends per second beside `who`.
async fn key_with_rate(t: &TestCore, who: &Principal, rate: i64) -> Principal {
    let req = CreateApiKeyRequest { rate_limit_per_sec: Some(rate), ..CreateApiKeyRequest::default() };
    let created = t.core.keys().create(who, req).await.unwrap();
    t.core.authenticate(created.plaintext.expose()).await.unwrap()
}

fn addresses(list: &[&str]) -> Vec<EmailAddress> {
    list.iter().map(|a| EmailAddress::parse(a).unwrap()).collect()
}

fn mime(message_id: &str) -> Vec<u8> {
    format!(
        "From: Acme <billing@acme.com>\r\nTo: undisclosed-recipients:;\r\nSubject: Invoice\r\n\
         Message-ID: <{message_id}>\r\n\r\nInvoice 42.\r\n"
    )
    .into_bytes()
}

async fn count_to(t: &TestCore, who: &Principal, to: &str) -> usize {
    let filters = MessageFilters { to: Some(to.to_owned()), ..MessageFilters::default() };
    t.core.messages().list(who, ListParams::default(), &filters).await.unwrap().items.len()
}

#[tokio::test]
async fn a_submitted_message_is_one_send_to_every_recipient_and_a_retry_replays_it() {
    let t = TestCore::new();
    let limits = LocalLimits::default();
    let (who, _) = workspace(&t).await;
    let to = addresses(&["ann@example.com", "bob@example.com"]);

    let sent = t.core.submission().submit(&limits, &who, &to, &mime("1@acme.com")).await.unwrap();

    assert!(!sent.replayed);
    let m = &sent.message;
    let recipients: Vec<_> = m.recipient_list().iter().map(|r| (r.email.clone(), r.kind)).collect();
    // `To: undisclosed-recipients:;` names neither: both are bcc, and the header is kept.
    assert_eq!(recipients, to.iter().map(|a| (a.clone(), RecipientKind::Bcc)).collect::<Vec<_>>());
    assert_eq!(m.to_field(), "", "the To header as written names no address");
    assert_eq!(m.from.to_string(), "\"Acme\" <billing@acme.com>");
    assert_eq!((m.subject.as_str(), m.text.as_deref()), ("Invoice", Some("Invoice 42.\r\n")));
    let again = t.core.submission().submit(&limits, &who, &to, &mime("1@acme.com")).await.unwrap();
    assert!(again.replayed);
    assert_eq!(again.message.id, sent.message.id);
    t.core.submission().submit(&limits, &who, &to[..1], &mime("2@acme.com")).await.unwrap();
    assert_eq!((count_to(&t, &who, "ann@example.com").await, count_to(&t, &who, "bob@example.com").await), (2, 1));
}

#[tokio::test]
async fn a_message_id_is_shared_by_full_keys_and_each_send_key_has_its_own() {
    let t = TestCore::new();
    let limits = LocalLimits::default();
    let (admin, _) = workspace(&t).await;
    let other_admin = key_with_rate(&t, &admin, 10).await;
    let send_key = |name: &str| {
        let req = CreateApiKeyRequest {
            name: Some(name.into()),
            scope: Some("send".into()),
            ..CreateApiKeyRequest::default()
        };
        let (t, admin) = (&t, &admin);
        async move { t.core.authenticate(t.core.keys().create(admin, req).await.unwrap().plaintext.expose()).await.unwrap() }
    };
    let (relay, other_relay) = (send_key("relay").await, send_key("other relay").await);
    let to = addresses(&["ann@example.com"]);

    // A retry through another full key is a replay, not a second copy.
    let sent = t.core.submission().submit(&limits, &admin, &to, &mime("5@acme.com")).await.unwrap();
    let again = t.core.submission().submit(&limits, &other_admin, &to, &mime("5@acme.com")).await.unwrap();
    assert!(again.replayed && again.message.id == sent.message.id);
    // A send key's Message-IDs are its own: another key's is not in its way.
    let relayed = t.core.submission().submit(&limits, &relay, &to, &mime("5@acme.com")).await.unwrap();
    assert!(!relayed.replayed && relayed.message.id != sent.message.id, "{relayed:?}");
    // Its own Message-ID it may repeat; another send key's repeat is a send of its own.
    assert!(t.core.submission().submit(&limits, &relay, &to, &mime("5@acme.com")).await.unwrap().replayed);
    let other = t.core.submission().submit(&limits, &other_relay, &to, &mime("5@acme.com")).await.unwrap();
    assert!(!other.replayed, "{other:?}");
    assert_eq!(count_to(&t, &admin, "ann@example.com").await, 3);
}

#[tokio::test]
async fn a_submission_takes_one_rate_limit_token_however_many_recipients_and_the_retry_sends_once() {
    let t = TestCore::new();
    let limits = LocalLimits::default();
    let (admin, _) = workspace(&t).await;
    let who = key_with_rate(&t, &admin, 1).await;
    let to = addresses(&["ann@example.com", "bob@example.com", "carol@example.com"]);

    let sent = t.core.submission().submit(&limits, &who, &to, &mime("3@acme.com")).await.unwrap();
    assert_eq!(sent.message.recipient_list().len(), 3, "three recipients, one token");
    let stopped = t.core.submission().submit(&limits, &who, &to, &mime("6@acme.com")).await.unwrap_err();
    assert!(matches!(stopped, SubmitFailure::RateLimited(wait) if wait.seconds == 1), "{stopped:?}");

    t.clock.advance(Duration::seconds(1));
    let retried = t.core.submission().submit(&limits, &who, &to, &mime("6@acme.com")).await.unwrap();
    assert!(!retried.replayed);
    assert!(t.core.submission().submit(&limits, &who, &to, &mime("6@acme.com")).await.unwrap().replayed);
    assert_eq!(
        (count_to(&t, &admin, "ann@example.com").await, count_to(&t, &admin, "carol@example.com").await),
        (2, 2)
    );
}

#[tokio::test]
async fn a_key_revoked_after_auth_and_what_the_api_refuses_are_refused() {
    let t = TestCore::new();
    let limits = LocalLimits::default();
    let (admin, _) = workspace(&t).await;
    let to = addresses(&["ann@example.com"]);
    let other_domain = b"From: x@elsewhere.com\r\nSubject: s\r\n\r\nbody\r\n";
    let no_subject = b"From: x@acme.com\r\n\r\nbody\r\n";

    let refused = |raw: &'static [u8]| {
        let (core, limits, admin, to) = (&t.core, &limits, &admin, &to);
        async move { core.submission().submit(limits, admin, to, raw).await.unwrap_err() }
    };
    assert!(matches!(refused(other_domain).await, SubmitFailure::Send(Error::DomainNotVerified(_))));
    assert!(matches!(refused(no_subject).await, SubmitFailure::Send(Error::Validation { .. })));

    let who = key_with_rate(&t, &admin, 10).await;
    t.core.keys().revoke(&admin, who.key_id).await.unwrap();
    let error = t.core.submission().submit(&limits, &who, &to, &mime("4@acme.com")).await.unwrap_err();
    assert_eq!(error, SubmitFailure::Send(Error::InvalidApiKey));
    assert_eq!(count_to(&t, &admin, "ann@example.com").await, 0);
}

#[tokio::test]
async fn a_suppressed_recipient_is_refused_at_rcpt() {
    let t = TestCore::new();
    let (who, _) = workspace(&t).await;
    t.store.insert_suppression(&fixtures::suppression(who.workspace_id, "gone@example.com")).await.unwrap();

    let gone = t.core.submission().check_recipient(&who, &EmailAddress::parse("Gone@Example.com").unwrap()).await;

    assert!(matches!(gone, Err(Error::RecipientSuppressed(_))), "{gone:?}");
    let fine = EmailAddress::parse("ann@example.com").unwrap();
    t.core.submission().check_recipient(&who, &fine).await.unwrap();
}

#[tokio::test]
async fn a_key_revoked_after_auth_learns_nothing_about_suppressions_at_rcpt() {
    let t = TestCore::new();
    let (admin, _) = workspace(&t).await;
    let who = key_with_rate(&t, &admin, 10).await;
    t.store.insert_suppression(&fixtures::suppression(who.workspace_id, "gone@example.com")).await.unwrap();
    t.core.keys().revoke(&admin, who.key_id).await.unwrap();

    for to in ["gone@example.com", "ann@example.com"] {
        let answer = t.core.submission().check_recipient(&who, &EmailAddress::parse(to).unwrap()).await;
        assert!(matches!(answer, Err(Error::InvalidApiKey)), "{to}: {answer:?}");
    }
}

#[tokio::test]
async fn failed_authentications_from_one_ipv6_64_count_together() {
    let t = TestCore::new();
    let throttle = AuthThrottleConfig { max_failures: 2, ..AuthThrottleConfig::default() };
    let limits = LocalLimits::new(throttle);
    let (_, key) = workspace(&t).await;
    let host = |id: u16| IpAddr::V6(std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 7, 0, 0, 0, id));

    for id in 1..=2 {
        let answer = t.core.authenticate_client(&limits, host(id), Some("tid_wrong")).await.unwrap();
        assert_eq!(answer, AuthOutcome::Refused(AuthRefusal::Invalid), "address {id}");
    }

    let blocked = t.core.authenticate_client(&limits, host(3), Some(&key)).await.unwrap();
    assert!(
        matches!(blocked, AuthOutcome::Refused(AuthRefusal::Blocked(_))),
        "a third address of the /64: {blocked:?}"
    );
    let next_64 = IpAddr::V6(std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 8, 0, 0, 0, 1));
    assert!(t.core.authenticate_client(&limits, next_64, Some(&key)).await.unwrap().admitted().is_some());
}

#[tokio::test]
async fn authentication_counts_failures_and_blocks_even_a_good_key() {
    let t = TestCore::new();
    let throttle = AuthThrottleConfig { max_failures: 2, ..AuthThrottleConfig::default() };
    let limits = LocalLimits::new(throttle);
    let (who, key) = workspace(&t).await;

    assert_eq!(t.core.authenticate_client(&limits, CLIENT, Some(&key)).await.unwrap(), AuthOutcome::Admitted(who));
    assert_eq!(
        t.core.authenticate_client(&limits, CLIENT, None).await.unwrap(),
        AuthOutcome::Refused(AuthRefusal::Missing)
    );
    assert_eq!(
        t.core.authenticate_client(&limits, CLIENT, Some("tid_wrong")).await.unwrap(),
        AuthOutcome::Refused(AuthRefusal::Invalid)
    );

    let blocked = t.core.authenticate_client(&limits, CLIENT, Some(&key)).await.unwrap();
    assert!(matches!(blocked, AuthOutcome::Refused(AuthRefusal::Blocked(_))), "{blocked:?}");
    let elsewhere = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
    assert!(t.core.authenticate_client(&limits, elsewhere, Some(&key)).await.unwrap().admitted().is_some());
}

#[tokio::test]
async fn a_refused_send_gives_its_token_back_and_a_replay_needs_none() {
    let t = TestCore::new();
    let limits = LocalLimits::default();
    let (admin, _) = workspace(&t).await;
    let who = key_with_rate(&t, &admin, 1).await;
    let send = |subject: Option<&str>| SendRequest {
        to: Some("ann@example.com".into()),
        from: Some("billing@acme.com".into()),
        subject: subject.map(str::to_owned),
        text: Some("Hi".into()),
        ..SendRequest::default()
    };

    let refused = t.core.messages().send_rate_limited(&limits, &who, send(None), None).await;
    assert!(matches!(refused, Err(Error::Validation { .. })), "{refused:?}");
    let Admission::Allowed(LimitedSend { outcome, limit: Some(limit) }) =
        t.core.messages().send_rate_limited(&limits, &who, send(Some("s")), Some("k1")).await.unwrap()
    else {
        panic!("the refused send's token was not given back");
    };
    assert_eq!((limit.limit, limit.remaining), (1, 0));

    let empty = t.core.messages().send_rate_limited(&limits, &who, send(Some("t")), None).await.unwrap();
    assert!(matches!(empty, Admission::Limited { retry_after } if retry_after.seconds == 1), "{empty:?}");
    let replay = t
        .core
        .messages()
        .send_rate_limited(&limits, &who, send(Some("s")), Some("k1"))
        .await
        .unwrap()
        .allowed()
        .unwrap();
    assert!(replay.outcome.replayed && replay.limit.is_none());
    assert_eq!(replay.outcome.message.id, outcome.message.id);
}

/// A send of the template `id` with `variables`, from `acme.com`.
fn templated(id: &str, variables: serde_json::Value) -> SendRequest {
    SendRequest {
        to: Some("ann@example.com".into()),
        from: Some("billing@acme.com".into()),
        template_id: Some(id.to_owned()),
        variables: Some(variables),
        ..SendRequest::default()
    }
}

async fn template(t: &TestCore, who: &Principal) -> String {
    let req = CreateTemplateRequest {
        name: Some("t".into()),
        subject: Some("Hi {{name}}".into()),
        text: Some("Hello {{name}}".into()),
        ..CreateTemplateRequest::default()
    };
    t.core.templates().create(who, req).await.unwrap().id.to_string()
}

#[tokio::test]
async fn a_send_refused_by_its_template_keeps_its_token() {
    let t = TestCore::new();
    let limits = LocalLimits::default();
    let (admin, _) = workspace(&t).await;
    let id = template(&t, &admin).await;
    let who = key_with_rate(&t, &admin, 1).await;

    // Refused before rendering (unknown template): the token comes back, again and again.
    for _ in 0..3 {
        let unknown = templated("01ARZ3NDEKTSV4RRFFQ69G5FAV", serde_json::json!({"name": "Ann"}));
        let refused = t.core.messages().send_rate_limited(&limits, &who, unknown, None).await;
        assert!(matches!(refused, Err(Error::Validation { .. })), "{refused:?}");
    }
    // Refused by the render: the token is spent.
    let refused = t.core.messages().send_rate_limited(&limits, &who, templated(&id, serde_json::json!({})), None).await;
    assert!(matches!(refused, Err(Error::TemplateRender(_))), "{refused:?}");
    let next = t
        .core
        .messages()
        .send_rate_limited(&limits, &who, templated(&id, serde_json::json!({"name": "Ann"})), None)
        .await;
    assert!(matches!(next, Ok(Admission::Limited { .. })), "the bucket is empty: {next:?}");
}

#[tokio::test]
async fn batch_items_that_rendered_keep_their_tokens_when_refused() {
    let t = TestCore::new();
    let limits = LocalLimits::default();
    let (admin, _) = workspace(&t).await;
    let id = template(&t, &admin).await;
    let good = templated(&id, serde_json::json!({"name": "Ann"}));
    let bad = templated(&id, serde_json::json!({}));
    let plain = || SendRequest {
        to: Some("bo@example.com".into()),
        from: Some("billing@acme.com".into()),
        subject: Some("s".into()),
        text: Some("t".into()),
        ..SendRequest::default()
    };

    // Strict: refused as a whole; both items rendered, so both tokens are spent.
    let who = key_with_rate(&t, &admin, 3).await;
    let reqs = vec![good.clone(), bad.clone()];
    let refused = t.core.messages().send_batch_rate_limited(&limits, &who, reqs, BatchValidation::Strict, None).await;
    assert!(matches!(refused, Err(Error::Validation { .. })), "{refused:?}");
    let (_, limit) = t
        .core
        .messages()
        .send_batch_rate_limited(&limits, &who, vec![plain()], BatchValidation::Strict, None)
        .await
        .unwrap()
        .allowed()
        .expect("one token left");
    assert_eq!(limit.map(|l| l.remaining), Some(0), "two of three tokens went to the refused batch");

    // Permissive: the good item queues, the bad one keeps its token, a plain refusal gives it back.
    let who = key_with_rate(&t, &admin, 3).await;
    let mut unaddressed = plain();
    unaddressed.to = None;
    let reqs = vec![good, bad, unaddressed];
    let (outcome, _) = t
        .core
        .messages()
        .send_batch_rate_limited(&limits, &who, reqs, BatchValidation::Permissive, None)
        .await
        .unwrap()
        .allowed()
        .expect("tokens");
    assert_eq!(outcome.refused(), 2);
    let (_, limit) = t
        .core
        .messages()
        .send_batch_rate_limited(&limits, &who, vec![plain()], BatchValidation::Strict, None)
        .await
        .unwrap()
        .allowed()
        .expect("the unaddressed item's token came back");
    assert_eq!(limit.map(|l| l.remaining), Some(0));
}

#[tokio::test]
async fn a_template_preview_takes_a_token_and_keeps_it_when_the_render_fails() {
    let t = TestCore::new();
    let limits = LocalLimits::default();
    let (admin, _) = workspace(&t).await;
    let id = template(&t, &admin).await;
    let who = key_with_rate(&t, &admin, 2).await;
    let with = |variables: serde_json::Value| RenderTemplateRequest { variables: Some(variables), version_id: None };

    let unknown = t
        .core
        .templates()
        .render_rate_limited(
            &limits,
            &who,
            TemplateId::parse_or_none("01ARZ3NDEKTSV4RRFFQ69G5FAV"),
            with(serde_json::json!({})),
        )
        .await;
    assert_eq!(unknown.map(drop), Err(Error::NotFound("template")), "refused before rendering: given back");
    let (rendered, limit) = t
        .core
        .templates()
        .render_rate_limited(&limits, &who, TemplateId::parse_or_none(&id), with(serde_json::json!({"name": "Ann"})))
        .await
        .unwrap()
        .allowed()
        .unwrap();
    assert_eq!((rendered.subject.as_str(), limit.remaining), ("Hi Ann", 1));
    let failed = t
        .core
        .templates()
        .render_rate_limited(&limits, &who, TemplateId::parse_or_none(&id), with(serde_json::json!({})))
        .await;
    assert!(matches!(failed, Err(Error::TemplateRender(_))), "{failed:?}");
    let empty = t
        .core
        .templates()
        .render_rate_limited(&limits, &who, TemplateId::parse_or_none(&id), with(serde_json::json!({"name": "Ann"})))
        .await;
    assert!(matches!(empty, Ok(Admission::Limited { .. })), "the failed render kept its token: {empty:?}");
    let send_key = service::send_key_beside(&who);
    assert_eq!(
        t.core
            .templates()
            .render_rate_limited(&limits, &send_key, TemplateId::parse_or_none(&id), with(serde_json::json!({})))
            .await
            .map(drop),
        Err(Error::InsufficientScope)
    );
}
