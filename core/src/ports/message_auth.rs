//! `MessageAuth`: the port through which the inbound path learns what SPF, DKIM and DMARC
//! say about a message it accepted (contract §13: a stored inbound message carries `spf`,
//! `dkim` and `dmarc`), and the answer, [`AuthResults`], in the words of RFC 8601's
//! Authentication-Results. The adapter (`tidings-dns`'s `MailAuthChecker`) does the DNS
//! lookups and the cryptography; core only stores and reports the results.
//!
//! Every check has a result, never an error: a DNS failure is `temperror` and a broken
//! record `permerror` (RFC 7208 §2.6, RFC 6376 §3.9, RFC 7489 §6.6.3), so a message is
//! stored with what could be learned about it rather than refused for what could not.
//!
//! The results are in the model (`crate::model::AuthResults`), below the ports: the store
//! keeps them with each message (ARCHITECTURE.md, "Layers of core").

use std::net::IpAddr;

use async_trait::async_trait;

use crate::model::AuthResults;

/// What the checks need: the message and its SMTP envelope.
#[derive(Debug, Clone, Copy)]
pub struct AuthInput<'a> {
    /// The message as received (headers and body, CRLF line ends), before any header of ours
    /// is added: DKIM signatures cover these exact bytes.
    pub raw: &'a [u8],
    /// The connecting client's address, the address SPF checks.
    pub client_ip: IpAddr,
    /// The name the client gave in `HELO`/`EHLO`: SPF's identity for a null sender.
    pub helo: &'a str,
    /// The `MAIL FROM` address; `None` (or empty) for the null sender `<>` of bounces.
    pub mail_from: Option<&'a str>,
    /// Our own host name, the receiving host SPF macros (`%{r}`) name.
    pub receiver: &'a str,
}

/// Checks SPF, DKIM and DMARC for one message.
///
/// Never an error: a check that cannot finish is `temperror` (DNS timeout, server failure)
/// or `permerror` (a broken record), as RFC 7208, RFC 6376 and RFC 7489 define, and the
/// implementation bounds its own time, so the caller can await it while holding a client.
#[async_trait]
pub trait MessageAuth: Send + Sync {
    /// The three results for `input`.
    async fn authenticate(&self, input: AuthInput<'_>) -> AuthResults;
}

/// Checks nothing: every result `none` (embedders without DNS, tests of other things).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoMessageAuth;

#[async_trait]
impl MessageAuth for NoMessageAuth {
    async fn authenticate(&self, _input: AuthInput<'_>) -> AuthResults {
        AuthResults::unchecked()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{AuthCheck, AuthOutcome};

    const ALL: [AuthOutcome; 7] = [
        AuthOutcome::Pass,
        AuthOutcome::Fail,
        AuthOutcome::SoftFail,
        AuthOutcome::Neutral,
        AuthOutcome::Absent,
        AuthOutcome::TempError,
        AuthOutcome::PermError,
    ];

    #[test]
    fn outcomes_are_written_as_rfc_8601_names() {
        let names: Vec<_> = ALL.iter().map(|outcome| serde_json::to_value(outcome).unwrap()).collect();
        assert_eq!(
            names,
            [
                json!("pass"),
                json!("fail"),
                json!("softfail"),
                json!("neutral"),
                json!("none"),
                json!("temperror"),
                json!("permerror")
            ]
        );
        for outcome in ALL {
            assert_eq!(serde_json::to_value(outcome).unwrap(), json!(outcome.as_str()));
            assert_eq!(outcome.to_string(), outcome.as_str());
            assert_eq!(serde_json::from_value::<AuthOutcome>(json!(outcome.as_str())).unwrap(), outcome);
        }
        assert!(serde_json::from_value::<AuthOutcome>(json!("absent")).is_err(), "`none` is the only name for Absent");
    }

    #[test]
    fn a_check_writes_only_the_fields_it_has() {
        let spf = AuthCheck { domain: Some("example.com".into()), ..AuthCheck::of(AuthOutcome::Pass) };
        assert_eq!(serde_json::to_value(&spf).unwrap(), json!({"result": "pass", "domain": "example.com"}));
        assert_eq!(serde_json::to_value(AuthCheck::absent()).unwrap(), json!({"result": "none"}));

        let dkim = AuthCheck {
            result: AuthOutcome::Fail,
            domain: Some("example.com".into()),
            selector: Some("s1".into()),
            policy: None,
        };
        assert_eq!(
            serde_json::to_value(&dkim).unwrap(),
            json!({"result": "fail", "domain": "example.com", "selector": "s1"})
        );
    }

    #[test]
    fn results_round_trip_and_read_missing_fields_as_absent() {
        let results = AuthResults {
            spf: AuthCheck { domain: Some("bounce.example.com".into()), ..AuthCheck::of(AuthOutcome::SoftFail) },
            dkim: AuthCheck::of(AuthOutcome::TempError),
            dmarc: AuthCheck {
                result: AuthOutcome::Pass,
                domain: Some("example.com".into()),
                selector: None,
                policy: Some("reject".into()),
            },
        };
        let value = serde_json::to_value(&results).unwrap();
        assert_eq!(
            value,
            json!({
                "spf": {"result": "softfail", "domain": "bounce.example.com"},
                "dkim": {"result": "temperror"},
                "dmarc": {"result": "pass", "domain": "example.com", "policy": "reject"},
            })
        );
        assert_eq!(serde_json::from_value::<AuthResults>(value).unwrap(), results);
        let minimal = json!({"spf": {"result": "none"}, "dkim": {"result": "none"}, "dmarc": {"result": "none"}});
        assert_eq!(serde_json::from_value::<AuthResults>(minimal).unwrap(), AuthResults::unchecked());
    }

    #[tokio::test]
    async fn no_message_auth_says_none_for_every_check() {
        let input = AuthInput {
            raw: b"From: a@example.com\r\n\r\nhi\r\n",
            client_ip: IpAddr::from([192, 0, 2, 1]),
            helo: "mail.example.com",
            mail_from: Some("a@example.com"),
            receiver: "mx.tidings.test",
        };
        let results = NoMessageAuth.authenticate(input).await;
        assert_eq!(results, AuthResults::unchecked());
        for check in [&results.spf, &results.dkim, &results.dmarc] {
            assert_eq!(check.result, AuthOutcome::Absent);
        }
    }
}
