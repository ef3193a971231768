//! A Verified domain with real DKIM keys and messages from it, for tests that sign and
//! verify (unlike [`fixtures`](crate::fixtures), whose keys are dummy bytes).

use std::sync::OnceLock;

use chrono::{DateTime, Utc};
use tidings_core::dkim_keys;
use tidings_core::dns_records::{RecordPolicy, records_for};
use tidings_core::domain_name::DomainName;
use tidings_core::email::{DisplayName, EmailAddress, Mailbox};
use tidings_core::ids::{ApiKeyId, DomainId, EventId, MessageId, WorkspaceId};
use tidings_core::model::{DkimKeys, Domain, DomainKind, DomainStatus, Message, MessageStatus, MessageTracking};
use tidings_core::ports::SystemRandom;

/// One real key set shared by every test of the process (RSA generation is slow).
pub fn signing_keys() -> &'static DkimKeys {
    static KEYS: OnceLock<DkimKeys> = OnceLock::new();
    KEYS.get_or_init(|| dkim_keys::generate(&SystemRandom).expect("generating DKIM keys"))
}

/// A Verified domain named `name` with [`signing_keys`] and the records Tidings asks for
/// them.
pub fn signing_domain(name: &str) -> Domain {
    let name = DomainName::parse(name).unwrap();
    let keys = signing_keys().clone();
    let records = records_for(&name, &keys, &RecordPolicy::default()).unwrap();
    let now = Utc::now();
    Domain {
        id: DomainId::new_at(now, &SystemRandom),
        workspace_id: WorkspaceId::new_at(now, &SystemRandom),
        name,
        status: DomainStatus::Verified,
        records,
        dkim: keys,
        open_tracking: false,
        click_tracking: false,
        created_at: now,
        verified_at: Some(now),
        last_checked_at: Some(now),
        kind: DomainKind::Customer,
    }
}

/// A Queued message from `billing@<domain>` ("Acme Billing") to `user@example.net` with a
/// text and an html body.
pub fn message_from(domain: &Domain) -> Message {
    let at = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    Message {
        id: MessageId::new_at(at, &SystemRandom),
        workspace_id: domain.workspace_id,
        api_key_id: ApiKeyId::new_at(at, &SystemRandom),
        domain_id: domain.id,
        status: MessageStatus::Queued,
        to: EmailAddress::parse("user@example.net").unwrap(),
        from: Mailbox {
            display_name: Some(DisplayName::parse("Acme Billing").unwrap()),
            address: EmailAddress::from_parts("billing", &domain.name).unwrap(),
        },
        subject: "Your invoice".to_owned(),
        html: Some("<p>Thanks for your order.</p>".to_owned()),
        text: Some("Thanks for your order.".to_owned()),
        template_id: None,
        template_version_id: None,
        provider_message_id: None,
        attempts: 0,
        created_at: at,
        updated_at: at,
        next_attempt_at: Some(at),
        bounce_type: None,
        last_event_id: EventId::new_at(at, &SystemRandom),
        tracking: MessageTracking::default(),
        extras: tidings_core::model::MessageExtras::default(),
        scheduled_at: None,
        tracking_tally: Default::default(),
    }
}
