//! An independent DKIM verifier for tests: mail-auth's, fed the public keys from the DNS
//! records Tidings tells customers to publish, so a test proves that what DNS would say and
//! what the signer wrote agree. No resolver is ever asked: every key comes from `records`.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::Ipv4Addr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use mail_auth::common::parse::TxtRecordParser;
use mail_auth::common::verify::DomainKey;
use mail_auth::hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use mail_auth::{AuthenticatedMessage, DkimResult, MessageAuthenticator, Parameters, ResolverCache, Txt};

use tidings_core::model::{DnsRecord, RecordKind};

/// The verdict on one `DKIM-Signature` of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DkimCheck {
    /// `s=` of the signature (empty if it did not parse).
    pub selector: String,
    /// `a=`: `rsa-sha256` or `ed25519-sha256`.
    pub algorithm: String,
    /// `pass`, or why not (mail-auth's words).
    pub result: String,
}

impl DkimCheck {
    /// The signature verified.
    pub fn passed(&self) -> bool {
        self.result == "pass"
    }
}

/// Verifies every DKIM signature of `raw` with the keys in the `DKIM` and `DKIM2` records
/// of `records` (a domain's `records`, as published). Panics if a record's value is not a
/// DKIM key record or the message does not parse: both are test bugs.
pub async fn verify_dkim(raw: &[u8], records: &[DnsRecord]) -> Vec<DkimCheck> {
    let zone = KnownKeys::default();
    for record in records.iter().filter(|r| matches!(r.kind, RecordKind::Dkim | RecordKind::Dkim2)) {
        zone.add(&record.name, &record.value);
    }
    // A cache miss would ask loopback port 53; with every key in the zone there is none.
    let servers = vec![NameServerConfig::udp(Ipv4Addr::LOCALHOST.into())];
    let authenticator =
        MessageAuthenticator::new(ResolverConfig::from_parts(None, vec![], servers), ResolverOpts::default())
            .unwrap_or_else(|e| panic!("building mail-auth's resolver: {e}"));
    let message = AuthenticatedMessage::parse(raw).unwrap_or_else(|| panic!("the message does not parse"));
    let outputs = authenticator.verify_dkim(Parameters::new(&message).with_txt_cache(&zone)).await;
    outputs
        .into_iter()
        .map(|output| DkimCheck {
            selector: output.signature().map(|s| s.s.clone()).unwrap_or_default(),
            algorithm: output.signature().map(|s| s.a.name().to_owned()).unwrap_or_default(),
            result: match output.result() {
                DkimResult::Pass => "pass".to_owned(),
                other => format!("{other:?}"),
            },
        })
        .collect()
}

/// mail-auth's TXT cache holding the DKIM keys a test knows (`Parameters::with_txt_cache`):
/// a verifier given it never asks a resolver for those names.
#[derive(Default)]
pub struct KnownKeys(Mutex<HashMap<Box<str>, Txt>>);

impl KnownKeys {
    /// Adds the DKIM key record `value` published at `name` (e.g.
    /// `tdr1._domainkey.example.com`). Panics if `value` is not a DKIM key record: a test bug.
    pub fn add(&self, name: &str, value: &str) {
        let key = DomainKey::parse(value.as_bytes())
            .unwrap_or_else(|e| panic!("record {name} is not a DKIM key record: {e}"));
        let valid_until = Instant::now() + Duration::from_secs(3600);
        self.insert(format!("{}.", name.to_ascii_lowercase()).into_boxed_str(), Txt::from(key), valid_until);
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Txt>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ResolverCache<Box<str>, Txt> for KnownKeys {
    fn get<Q>(&self, name: &Q) -> Option<Txt>
    where
        Box<str>: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map().get(name).cloned()
    }

    fn remove<Q>(&self, name: &Q) -> Option<Txt>
    where
        Box<str>: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map().remove(name)
    }

    fn insert(&self, key: Box<str>, value: Txt, _valid_until: Instant) {
        self.map().insert(key, value);
    }
}
