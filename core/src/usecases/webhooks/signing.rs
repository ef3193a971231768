//! Standard Webhooks signatures (docs/api.md#signing): `webhook-signature` is a
//! space-separated list of `v1,<base64 HMAC-SHA256(secret bytes, "{id}.{timestamp}.{body}")>`,
//! one per secret that currently signs, so receivers holding either secret accept a request
//! during a rotation.

use aws_lc_rs::hmac;
use base64::Engine as _;
use chrono::{DateTime, Utc};

use crate::model::{WebhookEndpoint, WebhookSecret};

/// The `webhook-signature` header value for one request: `msg_id` is the `webhook-id`
/// header (the delivery id), `timestamp` the `webhook-timestamp` header (unix seconds) and
/// `body` the exact bytes sent. One `v1,` signature per secret, in the order given.
pub fn sign_webhook(secrets: &[&WebhookSecret], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut content = format!("{msg_id}.{timestamp}.").into_bytes();
    content.extend_from_slice(body);
    secrets
        .iter()
        .map(|secret| {
            let key = hmac::Key::new(hmac::HMAC_SHA256, &secret.key_bytes());
            let tag = hmac::sign(&key, &content);
            format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(tag.as_ref()))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The secrets that sign requests to `endpoint` at `now`: the current one, then the one
/// before the last rotation while its overlap has not expired.
pub fn signing_secrets(endpoint: &WebhookEndpoint, now: DateTime<Utc>) -> Vec<&WebhookSecret> {
    let mut secrets = vec![&endpoint.secret];
    if let Some((previous, until)) = &endpoint.previous_secret
        && now < *until
    {
        secrets.push(previous);
    }
    secrets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(text: &str) -> WebhookSecret {
        serde_json::from_value(serde_json::Value::String(text.to_owned())).unwrap()
    }

    /// The test vector of the Standard Webhooks specification and its reference libraries.
    #[test]
    fn matches_the_standard_webhooks_test_vector() {
        let secret = secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let signature =
            sign_webhook(&[&secret], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#);
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn each_secret_adds_one_signature_and_every_input_matters() {
        let a = secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let b = secret("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
        let both = sign_webhook(&[&a, &b], "msg_1", 1, b"{}");
        let parts: Vec<&str> = both.split(' ').collect();
        assert_eq!(parts, [sign_webhook(&[&a], "msg_1", 1, b"{}"), sign_webhook(&[&b], "msg_1", 1, b"{}")]);
        assert_ne!(parts[0], parts[1]);
        assert_ne!(sign_webhook(&[&a], "msg_2", 1, b"{}"), parts[0]);
        assert_ne!(sign_webhook(&[&a], "msg_1", 2, b"{}"), parts[0]);
        assert_ne!(sign_webhook(&[&a], "msg_1", 1, b"{ }"), parts[0]);
        assert_eq!(sign_webhook(&[], "msg_1", 1, b"{}"), "");
    }

    #[test]
    fn the_previous_secret_signs_until_its_overlap_ends() {
        let t0 = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let current = secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let previous = secret("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
        let mut endpoint = WebhookEndpoint {
            id: crate::ids::WebhookId(ulid::Ulid(1)),
            workspace_id: crate::ids::WorkspaceId(ulid::Ulid(2)),
            url: crate::model::WebhookUrl::parse("https://hooks.example.com/", false).unwrap(),
            event_types: vec![crate::model::WebhookEventType::Test],
            enabled: true,
            format: crate::model::WebhookFormat::Tidings,
            secret: current.clone(),
            previous_secret: None,
            disabled_reason: None,
            failing_since: None,
            created_at: t0,
            updated_at: t0,
        };
        assert_eq!(signing_secrets(&endpoint, t0), [&current]);
        let until = t0 + chrono::Duration::hours(24);
        endpoint.previous_secret = Some((previous.clone(), until));
        assert_eq!(signing_secrets(&endpoint, t0), [&current, &previous]);
        assert_eq!(signing_secrets(&endpoint, until - chrono::Duration::seconds(1)), [&current, &previous]);
        assert_eq!(signing_secrets(&endpoint, until), [&current]);
    }
}
