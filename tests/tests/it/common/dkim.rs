//! DKIM verification as a receiver does it, for the test files that check delivered mail.
//! Each file that includes it uses a different part, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::net::SocketAddr;

use mail_auth::dkim::Canonicalization;
use mail_auth::hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts};
use mail_auth::{AuthenticatedMessage, DkimOutput, DkimResult, MessageAuthenticator, Parameters};
use serde_json::Value;
use tidings_testing::dkim::KnownKeys;

/// Checks the DKIM signatures of `raw` as a receiver would: mail-auth's verifier, its
/// resolver asking `dns` (where the test published what the API told it to) for the keys.
/// Both signatures must pass, one `rsa-sha256` and one `ed25519-sha256`, by `domain`,
/// relaxed/relaxed, covering From, To, Subject, Date, Message-ID, MIME-Version and Content-Type.
pub async fn assert_signed_by(raw: &[u8], dns: SocketAddr, domain: &str) {
    let verifier = verifier_asking(dns);
    let message = AuthenticatedMessage::parse(raw).expect("mail-auth parses the message");
    let outputs = verifier.verify_dkim(Parameters::new(&message)).await;
    assert_outputs(&outputs, domain);
}

/// [`assert_signed_by`] with the public keys taken from `records` (a domain response's
/// `dnsRecords`: the `DKIM` and `DKIM2` values the API shows) instead of from DNS. For the
/// sandbox sending domain, whose records are never published and whose `.invalid` name
/// resolvers answer NXDOMAIN for without asking (RFC 6761; hickory does so).
pub async fn assert_signed_with_records(raw: &[u8], records: &Value, domain: &str) {
    let zone = KnownKeys::default();
    for record in records.as_array().expect("dnsRecords is an array") {
        if record["purpose"].as_str().expect("purpose").starts_with("DKIM") {
            zone.add(record["name"].as_str().expect("name"), record["value"].as_str().expect("value"));
        }
    }
    // Every key is in the cache, so the resolver (loopback port 53) is never asked.
    let verifier = verifier_asking(SocketAddr::from(([127, 0, 0, 1], 53)));
    let message = AuthenticatedMessage::parse(raw).expect("mail-auth parses the message");
    let outputs = verifier.verify_dkim(Parameters::new(&message).with_txt_cache(&zone)).await;
    assert_outputs(&outputs, domain);
}

/// Both signatures pass, one of each algorithm, by `domain`, relaxed/relaxed, covering the
/// headers From, To, Subject, Date, Message-ID, MIME-Version and Content-Type.
fn assert_outputs(outputs: &[DkimOutput<'_>], domain: &str) {
    let mut algorithms = Vec::new();
    for output in outputs {
        let signature = output.signature().expect("a DKIM-Signature that parses");
        let algorithm = signature.a.name();
        assert_eq!(output.result(), &DkimResult::Pass, "the {algorithm} signature verifies");
        assert_eq!(signature.d, domain, "the {algorithm} signature's d=");
        assert_eq!((signature.ch, signature.cb), (Canonicalization::Relaxed, Canonicalization::Relaxed), "{algorithm}");
        let signed: Vec<String> = signature.h.iter().map(|h| h.to_ascii_lowercase()).collect();
        for header in ["from", "to", "subject", "date", "message-id", "mime-version", "content-type"] {
            assert!(signed.iter().any(|h| h == header), "the {algorithm} signature covers {header}: h={signed:?}");
        }
        algorithms.push(algorithm);
    }
    algorithms.sort_unstable();
    assert_eq!(algorithms, ["ed25519-sha256", "rsa-sha256"], "one signature with each key of the domain");
}

/// mail-auth's verifier with its resolver asking only `dns` (UDP and TCP).
pub fn verifier_asking(dns: SocketAddr) -> MessageAuthenticator {
    let mut udp = ConnectionConfig::udp();
    udp.port = dns.port();
    let mut tcp = ConnectionConfig::tcp();
    tcp.port = dns.port();
    let servers = vec![NameServerConfig::new(dns.ip(), true, vec![udp, tcp])];
    MessageAuthenticator::new(ResolverConfig::from_parts(None, vec![], servers), ResolverOpts::default())
        .expect("mail-auth's resolver")
}
