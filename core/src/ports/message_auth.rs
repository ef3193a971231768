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
//! The results are defined here, with the port that answers them, rather than in `inbound`
//! (which re-exports them): `inbound` sits above the ports (ARCHITECTURE.md, "Layers of
//! core").

use std::net::IpAddr;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// One check's result, as RFC 8601 names it (§2.7.1 DKIM, §2.7.2 SPF, RFC 7489 §11.2 DMARC;
/// not every value occurs for every check: `softfail` is SPF's only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthOutcome {
    /// The identity is authorised (SPF), a signature verified (DKIM), an aligned identifier
    /// passed (DMARC).
    Pass,
    /// The identity is not authorised (SPF `-all`), no signature verified (DKIM), no aligned
    /// identifier passed under a published policy (DMARC).
    Fail,
    /// SPF only: the domain says the client is probably not authorised (`~all`).
    SoftFail,
    /// SPF: the domain makes no assertion about the client (`?all`); DKIM: a signature that
    /// could not be processed (malformed, expired).
    Neutral,
    /// Nothing to check: no SPF record, no DKIM signature, no DMARC record. `none` on the
    /// wire, as RFC 8601 spells it.
    #[serde(rename = "none")]
    Absent,
    /// The check could not finish for a reason that may pass (DNS timeout or server
    /// failure); the sender's records are not at fault.
    TempError,
    /// The sender's records (or the signature) are broken: repeating the check cannot help.
    PermError,
}

impl AuthOutcome {
    /// The RFC 8601 name: `pass`, `fail`, `softfail`, `neutral`, `none`, `temperror`,
    /// `permerror` (the same text serde writes).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::SoftFail => "softfail",
            Self::Neutral => "neutral",
            Self::Absent => "none",
            Self::TempError => "temperror",
            Self::PermError => "permerror",
        }
    }
}

impl std::fmt::Display for AuthOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One check: its result and what it was about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthCheck {
    /// The result.
    pub result: AuthOutcome,
    /// SPF: the domain checked (MAIL FROM's, or HELO's for a null sender); DKIM: the `d=` of
    /// the signature reported; DMARC: the From domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// DKIM only: the `s=` selector of the signature reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// DMARC only: the policy the From domain's record asks for (`none`, `quarantine`,
    /// `reject`), present only when a record was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

impl AuthCheck {
    /// `none`, about nothing: the check found nothing to check, or was not made.
    pub fn absent() -> Self {
        Self::of(AuthOutcome::Absent)
    }

    /// A result about no particular domain (a DNS failure before any domain was known).
    pub fn of(result: AuthOutcome) -> Self {
        Self { result, domain: None, selector: None, policy: None }
    }
}

/// The three checks of one inbound message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthResults {
    /// SPF (RFC 7208) of the MAIL FROM identity, or of the HELO identity for a null sender.
    pub spf: AuthCheck,
    /// DKIM (RFC 6376): the first signature that verified, else the first signature, else
    /// `none`.
    pub dkim: AuthCheck,
    /// DMARC (RFC 7489) of the From domain, from the SPF and DKIM results above.
    pub dmarc: AuthCheck,
}

impl AuthResults {
    /// All three `none`: what a message gets when nothing checks it ([`NoMessageAuth`]).
    pub fn unchecked() -> Self {
        Self { spf: AuthCheck::absent(), dkim: AuthCheck::absent(), dmarc: AuthCheck::absent() }
    }
}

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
