//! [`MailAuthChecker`]: the [`MessageAuth`] port on mail-auth (Stalwart's SPF, DKIM and DMARC
//! library), asking the same upstream as [`HickoryDns`](crate::HickoryDns).
//!
//! mail-auth decides every result; this module chooses which identities are checked, bounds
//! the time spent, and translates mail-auth's outputs into [`AuthResults`]. mail-auth 0.13
//! is built on the same hickory-resolver (0.26) as this crate, so it is handed a resolver
//! built exactly like [`HickoryDns`]'s (see `build_resolver`).

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use mail_auth::dkim::DkimError;
use mail_auth::dmarc::Policy;
use mail_auth::dmarc::verify::DmarcParameters;
use mail_auth::spf::verify::SpfParameters;
use mail_auth::{
    AuthenticatedMessage, DkimOutput, DkimResult, DmarcOutput, DmarcResult, Error as MailAuthError,
    MessageAuthenticator, SpfOutput, SpfResult,
};
use tidings_core::inbound::{AuthCheck, AuthOutcome, AuthResults};
use tidings_core::ports::{AuthInput, MessageAuth};
use tokio::time::{Instant, timeout_at};

use crate::resolver::build_resolver;
use crate::{Settings, Upstream};

/// How long [`MailAuthChecker::authenticate`](MessageAuth::authenticate) may take for one
/// message, all three checks together, unless [`MailAuthChecker::with_deadline`] says
/// otherwise. A check still running then is `temperror`.
///
/// Ten seconds: SPF alone may make ten lookups (RFC 7208 §4.6.4), which a healthy resolver
/// answers in well under a second, while the SMTP client waits for our reply to its
/// end of `DATA` (RFC 5321 §4.5.3.2.6 gives it 10 minutes, so this is far inside).
pub const DEFAULT_AUTH_DEADLINE: Duration = Duration::from_secs(10);

/// The most DKIM signatures verified per message; later ones are not looked at. Mail
/// people send carries one to three (author, ESP, mailing list); each costs a DNS lookup
/// and an RSA verification, so a message with hundreds must not buy hundreds.
pub const MAX_DKIM_SIGNATURES: usize = 10;

/// The [`MessageAuth`] adapter. Cheap to clone (the resolver is shared).
///
/// - **SPF** (RFC 7208) of the `MAIL FROM` identity, or of the `HELO` identity for a null
///   sender (§2.4), from the client's address. mail-auth enforces the limit of ten
///   DNS-querying mechanisms and ten MX names (§4.6.4): past it the result is `permerror`.
/// - **DKIM** (RFC 6376) of at most [`MAX_DKIM_SIGNATURES`] signatures; the result
///   reported is the first that verified, else the first (see
///   [`AuthResults::dkim`]).
/// - **DMARC** (RFC 7489) of the From domain, from the SPF result and every DKIM result.
///
/// No cache, like [`HickoryDns`](crate::HickoryDns): the upstream resolver caches.
#[derive(Clone)]
pub struct MailAuthChecker {
    authenticator: MessageAuthenticator,
    /// Where lookups go, for logs.
    upstream: Upstream,
    /// The bound on one message's checks.
    deadline: Duration,
}

impl fmt::Debug for MailAuthChecker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MailAuthChecker").field("upstream", &self.upstream).field("deadline", &self.deadline).finish()
    }
}

impl MailAuthChecker {
    /// The system's resolvers with default [`Settings`] and [`DEFAULT_AUTH_DEADLINE`].
    pub fn system() -> crate::Result<Self> {
        Self::new(Upstream::System, Settings::default())
    }

    /// One server at `addr` (`TIDINGS_DNS_SERVER`) with default [`Settings`] and
    /// [`DEFAULT_AUTH_DEADLINE`].
    pub fn with_server(addr: SocketAddr) -> crate::Result<Self> {
        Self::new(Upstream::Server(addr), Settings::default())
    }

    /// Checks asking `upstream`, each lookup waiting as `settings` say, one message's
    /// checks bounded by [`DEFAULT_AUTH_DEADLINE`].
    pub fn new(upstream: Upstream, settings: Settings) -> crate::Result<Self> {
        let resolver = build_resolver(upstream, settings)?;
        Ok(Self { authenticator: MessageAuthenticator(resolver), upstream, deadline: DEFAULT_AUTH_DEADLINE })
    }

    /// The same checks bounded by `deadline` per message instead. A zero deadline makes
    /// every result `temperror`.
    pub fn with_deadline(self, deadline: Duration) -> Self {
        Self { deadline, ..self }
    }

    /// The bound on one message's checks.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }
}

#[async_trait]
impl MessageAuth for MailAuthChecker {
    async fn authenticate(&self, input: AuthInput<'_>) -> AuthResults {
        let deadline = Instant::now() + self.deadline;
        let auth = &self.authenticator;

        // A null sender (bounces) is checked by its HELO identity (RFC 7208 §2.4), and DMARC's
        // SPF alignment then uses that domain too (RFC 7489 §3.1.2).
        let (spf_params, spf_domain) = match input.mail_from.filter(|sender| !sender.is_empty()) {
            Some(sender) => (
                SpfParameters::verify_mail_from(input.client_ip, input.helo, input.receiver, sender),
                // As mail-auth reads it: a sender without `@` is checked by the HELO name.
                sender.rsplit_once('@').map_or(input.helo, |(_, domain)| domain),
            ),
            None => (SpfParameters::verify_ehlo(input.client_ip, input.helo, input.receiver), input.helo),
        };
        let spf = timeout_at(deadline, auth.verify_spf(spf_params));

        // `None` when the bytes hold no header at all: no signature, no From, nothing to check.
        let message = AuthenticatedMessage::parse(input.raw).map(|mut message| {
            message.dkim_headers.truncate(MAX_DKIM_SIGNATURES);
            message
        });
        let dkim = async {
            match &message {
                Some(message) => timeout_at(deadline, auth.verify_dkim(message)).await.map(Some),
                None => Ok(None),
            }
        };

        let (spf, dkim) = tokio::join!(spf, dkim);
        // `None`: ran out of time.
        let dmarc = match (&spf, &dkim, &message) {
            (Ok(spf), Ok(Some(dkim)), Some(message)) => {
                let params = DmarcParameters::new(message, dkim, spf.domain(), spf);
                timeout_at(deadline, auth.verify_dmarc(params)).await.ok().map(|output| dmarc_check(&output))
            }
            (_, _, None) => Some(AuthCheck::absent()),
            // A check that ran out of time leaves DMARC nothing to decide on, and no time.
            _ => None,
        };

        let timed_out = spf.is_err() || dkim.is_err() || dmarc.is_none();
        if timed_out {
            tracing::warn!(
                upstream = %self.upstream,
                deadline = ?self.deadline,
                spf = spf.is_err(),
                dkim = dkim.is_err(),
                "SPF, DKIM and DMARC checks of an inbound message ran out of time: temperror"
            );
        }
        AuthResults {
            spf: spf.map_or_else(
                |_| AuthCheck { domain: non_empty(spf_domain), ..AuthCheck::of(AuthOutcome::TempError) },
                |output| spf_check(&output),
            ),
            dkim: match dkim {
                Ok(Some(outputs)) => dkim_check(&outputs),
                Ok(None) => AuthCheck::absent(),
                // About the signature that would have been reported had none verified.
                Err(_) => {
                    let first = message.as_ref().and_then(|message| message.dkim_headers.first());
                    AuthCheck {
                        domain: first.and_then(|header| non_empty(&header.header.d)),
                        selector: first.and_then(|header| non_empty(&header.header.s)),
                        ..AuthCheck::of(AuthOutcome::TempError)
                    }
                }
            },
            dmarc: dmarc.unwrap_or_else(|| AuthCheck {
                domain: message.as_ref().and_then(from_domain),
                ..AuthCheck::of(AuthOutcome::TempError)
            }),
        }
    }
}

/// SPF's result about the domain it checked.
fn spf_check(output: &SpfOutput) -> AuthCheck {
    let result = match output.result() {
        SpfResult::Pass => AuthOutcome::Pass,
        SpfResult::Fail => AuthOutcome::Fail,
        SpfResult::SoftFail => AuthOutcome::SoftFail,
        SpfResult::Neutral => AuthOutcome::Neutral,
        SpfResult::TempError => AuthOutcome::TempError,
        SpfResult::PermError => AuthOutcome::PermError,
        SpfResult::None => AuthOutcome::Absent,
    };
    AuthCheck { domain: non_empty(output.domain()), ..AuthCheck::of(result) }
}

/// The signature reported: the first that verified, else the first (in mail-auth's order:
/// malformed signatures, then the others as they appear in the header), else `none`.
fn dkim_check(outputs: &[DkimOutput<'_>]) -> AuthCheck {
    let Some(output) = outputs.iter().find(|output| *output.result() == DkimResult::Pass).or(outputs.first()) else {
        return AuthCheck::absent();
    };
    let result = match output.result() {
        DkimResult::Pass => AuthOutcome::Pass,
        DkimResult::Fail(_) => AuthOutcome::Fail,
        // mail-auth calls a body that no longer matches its hash `neutral`; RFC 6376 §6.1.3
        // and RFC 8601 §2.7.1 call a signature that does not verify a failure, which is what
        // a reader of the result needs to hear about altered mail.
        DkimResult::Neutral(MailAuthError::Dkim(DkimError::FailedBodyHashMatch)) => AuthOutcome::Fail,
        DkimResult::Neutral(_) => AuthOutcome::Neutral,
        DkimResult::TempError(_) => AuthOutcome::TempError,
        DkimResult::PermError(_) => AuthOutcome::PermError,
        DkimResult::None => AuthOutcome::Absent,
    };
    let signature = output.signature();
    AuthCheck {
        domain: signature.and_then(|signature| non_empty(&signature.d)),
        selector: signature.and_then(|signature| non_empty(&signature.s)),
        ..AuthCheck::of(result)
    }
}

/// DMARC's result about the From domain, with the policy its record asks for when it has one.
fn dmarc_check(output: &DmarcOutput) -> AuthCheck {
    let result = match output.result() {
        DmarcResult::Pass => AuthOutcome::Pass,
        DmarcResult::Fail(_) => AuthOutcome::Fail,
        DmarcResult::TempError(_) => AuthOutcome::TempError,
        DmarcResult::PermError(_) => AuthOutcome::PermError,
        DmarcResult::None => AuthOutcome::Absent,
    };
    let policy = output.dmarc_record().and_then(|_| match output.policy() {
        Policy::None => Some("none"),
        Policy::Quarantine => Some("quarantine"),
        Policy::Reject => Some("reject"),
        Policy::Unspecified => None,
    });
    AuthCheck { domain: non_empty(output.domain()), policy: policy.map(str::to_owned), ..AuthCheck::of(result) }
}

/// The From domain DMARC would have checked: the one domain of the From addresses.
fn from_domain(message: &AuthenticatedMessage<'_>) -> Option<String> {
    let mut domains = message.from.iter().filter_map(|address| address.rsplit_once('@')).map(|(_, domain)| domain);
    let first = domains.next()?;
    // Several From domains are exempt from DMARC (RFC 7489 §6.6.1): no domain to name.
    domains.all(|domain| domain.eq_ignore_ascii_case(first)).then(|| first.to_ascii_lowercase())
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checker_can_be_built_outside_a_runtime() {
        let addr: SocketAddr = "127.0.0.1:53".parse().unwrap();
        let checker = MailAuthChecker::with_server(addr).unwrap();
        assert_eq!(checker.deadline(), DEFAULT_AUTH_DEADLINE);
        assert_eq!(checker.with_deadline(Duration::from_secs(3)).deadline(), Duration::from_secs(3));
    }

    #[test]
    fn settings_that_would_fail_every_lookup_are_refused() {
        let addr: SocketAddr = "127.0.0.1:53".parse().unwrap();
        let zero = Settings { timeout: Duration::ZERO, attempts: 2 };
        assert!(matches!(
            MailAuthChecker::new(Upstream::Server(addr), zero),
            Err(crate::ConfigError::InvalidSettings(_))
        ));
    }

    #[test]
    fn the_from_domain_is_named_only_when_there_is_one() {
        let one = AuthenticatedMessage::parse(b"From: Ann <ann@Example.COM>\r\n\r\nhi\r\n").unwrap();
        assert_eq!(from_domain(&one), Some("example.com".to_owned()));
        let two = AuthenticatedMessage::parse(b"From: ann@example.com, bob@example.net\r\n\r\nhi\r\n").unwrap();
        assert_eq!(from_domain(&two), None);
        let none = AuthenticatedMessage::parse(b"Subject: hi\r\n\r\nhi\r\n").unwrap();
        assert_eq!(from_domain(&none), None);
    }

    #[test]
    fn the_first_passing_signature_is_reported_else_the_first() {
        assert_eq!(dkim_check(&[]), AuthCheck::absent());
        let outputs = [
            DkimOutput::temp_err(MailAuthError::Dns(mail_auth::DnsError::Resolver("timeout".into()))),
            DkimOutput::fail(MailAuthError::Dkim(DkimError::FailedAuidMatch)),
            DkimOutput::pass(),
        ];
        assert_eq!(dkim_check(&outputs).result, AuthOutcome::Pass);
        assert_eq!(dkim_check(&outputs[..2]).result, AuthOutcome::TempError);
        assert_eq!(dkim_check(&outputs[1..2]).result, AuthOutcome::Fail);
        let altered = [DkimOutput::neutral(MailAuthError::Dkim(DkimError::FailedBodyHashMatch))];
        assert_eq!(dkim_check(&altered).result, AuthOutcome::Fail);
        let expired = [DkimOutput::neutral(MailAuthError::Dkim(DkimError::SignatureExpired))];
        assert_eq!(dkim_check(&expired).result, AuthOutcome::Neutral);
    }
}
