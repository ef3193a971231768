//! A Verified domain with real DKIM keys and messages from it, for tests that sign and
//! verify (unlike [`fixtures`](crate::fixtures), whose keys are dummy bytes).

use std::sync::OnceLock;

use chrono::DateTime;
use tidings_core::dkim_keys;
use tidings_core::dns_records::{RecordPolicy, records_for};
use tidings_core::email::EmailAddress;
use tidings_core::ids::{ApiKeyId, EventId, MessageId, WorkspaceId};
use tidings_core::model::{DkimKeys, Domain, DomainStatus, Message};
use tidings_core::ports::SystemRandom;

use crate::fixtures;

/// One real key set shared by every test of the process (RSA generation is slow).
pub fn signing_keys() -> &'static DkimKeys {
    static KEYS: OnceLock<DkimKeys> = OnceLock::new();
    KEYS.get_or_init(|| dkim_keys::generate(&SystemRandom).expect("generating DKIM keys"))
}

/// A Verified domain named `name` with [`signing_keys`] and the records Tidings asks for
/// them: [`fixtures::domain`] with real keys.
pub fn signing_domain(name: &str) -> Domain {
    let mut domain = fixtures::domain(WorkspaceId(fixtures::ulid()), name);
    domain.dkim = signing_keys().clone();
    domain.records = records_for(&domain.name, &domain.dkim, &RecordPolicy::default()).unwrap();
    domain.status = DomainStatus::Verified;
    domain.verified_at = Some(domain.created_at);
    domain.last_checked_at = Some(domain.created_at);
    domain
}

/// A Queued message from `billing@<domain>` ("Acme Billing") to `user@example.net` with a
/// text and an html body, created at a fixed time: [`fixtures::message`] from `domain`.
pub fn message_from(domain: &Domain) -> Message {
    let at = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    let mut message = fixtures::message(domain.workspace_id, ApiKeyId::new_at(at, &SystemRandom), domain.id);
    message.id = MessageId::new_at(at, &SystemRandom);
    message.last_event_id = EventId::new_at(at, &SystemRandom);
    message.to = fixtures::email("user@example.net");
    message.from.address = EmailAddress::from_parts("billing", &domain.name).unwrap();
    (message.created_at, message.updated_at, message.next_attempt_at) = (at, at, Some(at));
    message
}
