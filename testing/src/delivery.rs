//! [`Delivery`]: the service with a Verified domain holding real DKIM keys, a scripted
//! mailer and a delivery worker over them, for the tests of the delivery worker and of what
//! happens to a message after it is sent.

use std::sync::Arc;

use tidings_core::delivery::{DeliveryReport, DeliverySettings, DeliveryWorker, RetrySchedule};
use tidings_core::ids::MessageId;
use tidings_core::model::{Domain, DomainStatus, Message, MessageEvent};
use tidings_core::ports::{DomainStore, Mailer, MessageStore, PageRequest};
use tidings_core::usecases::{AddDomainRequest, CoreConfig, Principal, SendRequest};

use crate::TestCore;
use crate::mailer::{Answer, FakeMailer};
use crate::service::full_key;

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
        let mut domain = t.core.domains().add(&who, req).await.unwrap();
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
        self.t.core.messages().send(&self.who, req, None).await.unwrap().message
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
