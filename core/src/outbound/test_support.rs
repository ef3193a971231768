//! Shared by the unit tests of `outbound` and `delivery`: a Verified domain with real DKIM
//! keys and messages from it. (`tidings_testing::signing` is the same for integration tests;
//! core's unit tests cannot depend on that crate, whose core is another copy of this one.)

use chrono::{DateTime, Utc};

use crate::dns_records::{RecordPolicy, records_for};
use crate::domain_name::DomainName;
use crate::email::{DisplayName, EmailAddress, Mailbox};
use crate::ids::{ApiKeyId, DomainId, EventId, MessageId, WorkspaceId};
use crate::model::{Domain, DomainKind, DomainStatus, Message, MessageStatus, MessageTracking};
use crate::ports::SystemRandom;

/// A Verified domain named `name` with the shared test keys (generated once per process).
pub(crate) fn signing_domain(name: &str) -> Domain {
    let name = DomainName::parse(name).unwrap();
    let keys = crate::dkim_keys::test_keys().clone();
    let records = records_for(&name, &keys, &RecordPolicy::default()).unwrap();
    let now = Utc::now();
    Domain {
        id: DomainId::new_at(now, &SystemRandom),
        workspace_id: WorkspaceId::new_at(now, &SystemRandom),
        name,
        status: DomainStatus::Verified,
        records,
        dkim: keys,
        dkim_rotation: Default::default(),
        open_tracking: false,
        click_tracking: false,
        created_at: now,
        verified_at: Some(now),
        last_checked_at: Some(now),
        kind: DomainKind::Customer,
        inbound: false,
    }
}

/// A Queued message from `billing@<domain>` ("Acme Billing") to `user@example.net` with a
/// text and an html body.
pub(crate) fn message_from(domain: &Domain) -> Message {
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
        extras: crate::model::MessageExtras::default(),
        scheduled_at: None,
        tracking_tally: Default::default(),
        recipients: Vec::new(),
        written_headers: None,
    }
}

/// The number of cases for a property test: `TIDINGS_PROPTEST_CASES` when set (CI sets 64;
/// run more locally after changing a builder), else `default`.
pub(crate) fn proptest_cases(default: u32) -> u32 {
    std::env::var("TIDINGS_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
