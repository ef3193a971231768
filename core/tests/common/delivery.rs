//! Helpers for the delivery worker's tests: a scripted `Mailer`, and a service with a
//! Verified domain holding real DKIM keys and a worker over it. Included with `#[path]`.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tidings_core::delivery::{DeliveryReport, DeliverySettings, DeliveryWorker, RetrySchedule};
use tidings_core::ids::MessageId;
use tidings_core::model::{Domain, DomainStatus, Message, MessageEvent};
use tidings_core::ports::{
    DomainStore, Mailer, MessageStore, OutboundEmail, PageRequest, SendError, SendReceipt, SmtpReply,
};
use tidings_core::usecases::{AddDomainRequest, CoreConfig, Principal, SendRequest};

use crate::common::{TestCore, full_key};

/// What the mailer answers to one send.
pub type Answer = Result<SendReceipt, SendError>;

/// 250 with an enhanced code, as a relay says it.
pub fn accepted() -> Answer {
    Ok(SendReceipt { reply: SmtpReply::new(250, "2.0.0 Ok: queued as 4Xyz"), remote: "relay.test:587".into() })
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
        let next = self.script.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
        next.unwrap_or_else(accepted)
    }

    fn keeps_mail_local(&self) -> bool {
        self.local
    }
}

/// The service, a workspace with a Verified `acme.example.com` (real keys), a mailer and a
/// worker over them.
pub struct Delivery {
    /// Service, store, clock.
    pub t: TestCore,
    /// A full key of the workspace.
    pub who: Principal,
    /// The sending domain.
    pub domain: Domain,
    /// The transport.
    pub mailer: Arc<FakeMailer>,
    /// The worker under test.
    pub worker: DeliveryWorker,
}

impl Delivery {
    /// Everything with the retry schedule `schedule` and the mailer answering `script`.
    pub async fn new(schedule: &str, script: Vec<Answer>) -> Self {
        Self::with(CoreConfig::default(), FakeMailer::answering(script), |s| {
            s.schedule = RetrySchedule::parse(schedule).unwrap();
        })
        .await
    }

    /// Everything with `config`, `mailer`, and the default settings changed by `tune`.
    pub async fn with(config: CoreConfig, mailer: FakeMailer, tune: impl FnOnce(&mut DeliverySettings)) -> Self {
        let t = TestCore::with_config(config);
        let who = full_key();
        let req = AddDomainRequest { domain: Some("acme.example.com".into()) };
        let mut domain = t.core.add_domain(&who, req).await.unwrap();
        domain.status = DomainStatus::Verified;
        domain.verified_at = Some(t.now());
        t.store.update_domain(&domain).await.unwrap();
        let mailer = Arc::new(mailer);
        let mut settings = DeliverySettings::default();
        tune(&mut settings);
        let worker = DeliveryWorker::new(t.core.clone(), Arc::clone(&mailer) as Arc<dyn Mailer>, settings);
        Self { t, who, domain, mailer, worker }
    }

    /// Sends a text and html message to `to` through the API use case.
    pub async fn send(&self, to: &str) -> Message {
        let req = SendRequest {
            to: Some(to.into()),
            from: Some("Acme Billing <billing@acme.example.com>".into()),
            subject: Some("Your invoice".into()),
            text: Some("Thanks for your order.".into()),
            html: Some("<p>Thanks for your order.</p>".into()),
            ..SendRequest::default()
        };
        self.t.core.send_message(&self.who, req, None).await.unwrap().message
    }

    /// One worker step at the clock's time.
    pub async fn step(&self) -> DeliveryReport {
        self.worker.deliver_due(self.t.now()).await.unwrap()
    }

    /// The message as stored.
    pub async fn message(&self, id: MessageId) -> Message {
        self.t.store.get_message(self.who.workspace_id, id).await.unwrap().unwrap()
    }

    /// The message's timeline.
    pub async fn events(&self, id: MessageId) -> Vec<MessageEvent> {
        self.t.store.list_events(self.who.workspace_id, id, PageRequest::first(200)).await.unwrap().items
    }

    /// The timeline's event type names.
    pub async fn event_types(&self, id: MessageId) -> Vec<&'static str> {
        self.events(id).await.iter().map(|e| e.event_type.as_str()).collect()
    }
}
