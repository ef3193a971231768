//! Helpers shared by the transport tests: messages, mailers pointed at a sink, short timeouts.

use std::time::Duration;

use tidings_core::email::EmailAddress;
use tidings_core::ids::MessageId;
use tidings_core::ports::OutboundEmail;
use tidings_transport_smtp::testing::SmtpSink;
use tidings_transport_smtp::{RelayConfig, RelayMailer, Timeouts};

/// How long a test waits for something that should happen at once.
pub const WAIT: Duration = Duration::from_secs(10);

/// Short enough that failure tests finish quickly, long enough for a loaded machine.
pub fn quick_timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(2),
        command: Duration::from_secs(2),
        message: Duration::from_secs(2),
        total: Duration::from_secs(20),
    }
}

/// Message number `n` from `from@acme.test` to `to`. Its body has a line starting with a
/// dot, so it also checks dot-stuffing both ways.
pub fn email_to(n: u8, to: &str) -> OutboundEmail {
    let mut id = [0; 16];
    id[15] = n;
    let provider_message_id = format!("msg{n}@acme.test");
    let raw = format!(
        "From: Acme <from@acme.test>\r\nTo: {to}\r\nSubject: Test {n}\r\nMessage-ID: <{provider_message_id}>\r\n\
         MIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nHello {n}\r\n.a line with a dot\r\n"
    );
    OutboundEmail {
        message_id: MessageId::from_bytes(id),
        provider_message_id,
        envelope_from: EmailAddress::parse("bounces@acme.test").unwrap(),
        envelope_to: EmailAddress::parse(to).unwrap(),
        raw: raw.into_bytes().into(),
    }
}

/// Message number `n` to `to@example.com`.
pub fn email(n: u8) -> OutboundEmail {
    email_to(n, "to@example.com")
}

/// A relay configuration for `url` with quick timeouts.
pub fn relay_config(url: &str) -> RelayConfig {
    let mut config = RelayConfig::from_url(url).unwrap();
    config.timeouts = quick_timeouts();
    config
}

/// A relay mailer for `smtp://127.0.0.1:<sink port>`, trusting the sink's CA if it has one.
pub fn relay_to(sink: &SmtpSink) -> RelayMailer {
    let mut config = relay_config(&format!("smtp://127.0.0.1:{}", sink.port()));
    config.trusted_ca_pem = sink.ca_pem().map(str::to_owned);
    RelayMailer::new(&config).unwrap()
}
