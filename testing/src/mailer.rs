//! [`FakeMailer`]: a `Mailer` that answers from a script and keeps what it was handed.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tidings_core::domain_name::DomainName;
use tidings_core::model::ConnectionTls;
use tidings_core::ports::{Mailer, OutboundEmail, SendError, SendReceipt, SmtpReply};
use tidings_core::shaping::SiteKey;

/// What the mailer answers to one send.
pub type Answer = Result<SendReceipt, SendError>;

/// 250 with an enhanced code, as a relay says it, over a connection of unknown security.
pub fn accepted() -> Answer {
    Ok(SendReceipt {
        reply: SmtpReply::new(250, "2.0.0 Ok: queued as 4Xyz"),
        remote: "relay.test:587".into(),
        tls: None,
    })
}

/// [`accepted`] over a connection secured as `tls`.
pub fn accepted_over(tls: ConnectionTls) -> Answer {
    accepted().map(|receipt| SendReceipt { tls: Some(tls), ..receipt })
}

/// A refusal with `code` and `text` (which may start with an enhanced code).
pub fn rejected(code: u16, text: &str) -> Answer {
    Err(SendError::Rejected { reply: SmtpReply::new(code, text), remote: "mx.example.net[192.0.2.1]:25".into() })
}

/// A `Mailer` that answers from a script (then accepts everything) and keeps what it got.
#[derive(Default)]
pub struct FakeMailer {
    script: Mutex<VecDeque<Answer>>,
    sent: Mutex<Vec<OutboundEmail>>,
    stall: Option<Duration>,
    local: bool,
    /// The site of each recipient domain, as [`Mailer::site`] answers (none: no sites).
    sites: HashMap<String, SiteKey>,
    /// Scripted answers per site, taken before the common script.
    site_scripts: Mutex<HashMap<SiteKey, VecDeque<Answer>>>,
}

impl FakeMailer {
    /// Answers `script` in order, then accepts.
    pub fn answering(script: Vec<Answer>) -> Self {
        Self { script: Mutex::new(script.into()), ..Self::default() }
    }

    /// Takes `stall` before answering each send.
    pub fn stalling(stall: Duration) -> Self {
        Self { stall: Some(stall), ..Self::default() }
    }

    /// Accepts everything and, like the outbox, keeps it on the machine
    /// ([`Mailer::keeps_mail_local`]).
    pub fn local() -> Self {
        Self { local: true, ..Self::default() }
    }

    /// The same mailer naming `site` as the delivery site of mail to `domain`, as direct
    /// delivery does from the MX hosts.
    pub fn routing(mut self, domain: &str, site: &str) -> Self {
        let key = SiteKey::parse(site).unwrap_or_else(|| panic!("{site:?} is not a site key"));
        self.sites.insert(domain.to_owned(), key);
        self
    }

    /// The same mailer answering sends to `site` from `script` first.
    pub fn answering_for(self, site: &str, script: Vec<Answer>) -> Self {
        let key = SiteKey::parse(site).unwrap_or_else(|| panic!("{site:?} is not a site key"));
        self.site_scripts.lock().unwrap_or_else(PoisonError::into_inner).insert(key, script.into());
        self
    }

    /// Every message handed over, in order.
    pub fn sent(&self) -> Vec<OutboundEmail> {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[async_trait]
impl Mailer for FakeMailer {
    async fn send(&self, email: &OutboundEmail) -> Result<SendReceipt, SendError> {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner).push(email.clone());
        if let Some(stall) = self.stall {
            tokio::time::sleep(stall).await;
        }
        if let Some(site) = self.sites.get(email.envelope_to.domain().as_str()) {
            let mut scripts = self.site_scripts.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(answer) = scripts.get_mut(site).and_then(VecDeque::pop_front) {
                return answer;
            }
        }
        let next = self.script.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
        next.unwrap_or_else(accepted)
    }

    async fn site(&self, domain: &DomainName) -> Option<SiteKey> {
        self.sites.get(domain.as_str()).cloned()
    }

    fn keeps_mail_local(&self) -> bool {
        self.local
    }
}
