//! What the tests of other providers' official SDKs share (`resend_sdk.rs`,
//! `postmark_sdk.rs`): a server relaying to an SMTP sink with a verified domain, a driver
//! script run with the key and the addresses, its printed JSON, the installed SDK (`npm ci`
//! when missing), and the copies that reached the sink, each checked to be signed twice by
//! the domain, by mail-auth and by dkimpy.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mail_parser::{MessageParser, MimeHeaders};
use serde_json::Value;
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::{ReceivedMessage, SmtpSink};

use super::dkim::assert_signed_by;
use super::{server_with_dns, verified_domain};
use crate::interop::verifiers::{self, Verdicts};

/// The sending domain of every SDK test.
pub const DOMAIN: &str = "shop.example";
const INSTALL: &str = "install Node.js 20 and npm (Debian: nodejs, npm)";

/// `tests/sdk/<name>`.
pub fn sdk_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk").join(name)
}

/// A server relaying to an SMTP sink, with a verified domain.
pub struct Setup {
    // Dropped in this order: the server goes before the sink and DNS server it uses.
    pub server: TestServer,
    pub dns: TestDnsServer,
    pub sink: SmtpSink,
}

impl Setup {
    pub async fn start() -> Self {
        let sink = SmtpSink::start().await.expect("the SMTP sink starts");
        let relay = format!("smtp://{}", sink.addr());
        let (server, dns) = server_with_dns(&[("TIDINGS_DELIVERY", "relay"), ("TIDINGS_SMTP_RELAY", &relay)]).await;
        let key = server.key().to_owned();
        verified_domain(&server, &dns, &key, DOMAIN).await;
        Self { server, dns, sink }
    }

    /// `program script` in `tests/sdk`, with the key (`TIDINGS_KEY`) and the addresses
    /// (`FROM`, `TO` comma-separated, `CC`, `BCC`, `REPLY_TO`).
    pub fn driver(&self, program: &str, script: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .arg(script)
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk"))
            .env("TIDINGS_KEY", self.server.key())
            .env("FROM", format!("Shop <hello@{DOMAIN}>"))
            .env("TO", "ann@x.example,bob@y.example")
            .env("CC", "carol@z.example")
            .env("BCC", "dan@w.example")
            .env("REPLY_TO", format!("support@{DOMAIN}"));
        command
    }

    /// The copies of the message with this Message-ID that reached the sink, once there are
    /// four (one per recipient of [`Self::driver`]'s addresses), each checked to be signed
    /// twice by the domain.
    pub async fn delivered_copies(&self, provider_id: &str) -> Vec<ReceivedMessage> {
        delivered_copies(&self.sink, &self.dns, provider_id).await
    }
}

/// The copies of the message with this Message-ID that reached `sink`, once there are four
/// (one per recipient of the drivers' addresses), each checked to be signed twice by
/// [`DOMAIN`] with its keys published on `dns`.
pub async fn delivered_copies(sink: &SmtpSink, dns: &TestDnsServer, provider_id: &str) -> Vec<ReceivedMessage> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let copies = loop {
        let copies: Vec<_> = sink.messages().into_iter().filter(|m| m.text().contains(provider_id)).collect();
        if copies.len() == 4 || Instant::now() > deadline {
            break copies;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut rcpts: Vec<String> = copies.iter().flat_map(|m| m.recipients.clone()).collect();
    rcpts.sort();
    assert_eq!(rcpts, ["ann@x.example", "bob@y.example", "carol@z.example", "dan@w.example"]);
    for copy in &copies {
        assert_signed_by(&copy.data, dns.addr(), DOMAIN).await;
    }
    assert_dkimpy_passes(&copies, dns);
    copies
}

/// Both signatures of every copy verified by dkimpy too (`tests/interop/verify_dkim.py`),
/// the verifier of many Python receivers, asking `dns` for the keys.
fn assert_dkimpy_passes(copies: &[ReceivedMessage], dns: &TestDnsServer) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let files: Vec<String> = copies
        .iter()
        .enumerate()
        .map(|(i, copy)| {
            let file = dir.path().join(format!("copy-{i}.eml"));
            std::fs::write(&file, &copy.data).expect("the copy is written");
            file.display().to_string()
        })
        .collect();
    let args = [vec!["--dns".to_owned(), dns.addr().to_string()], files.clone()].concat();
    let mut verdicts = Verdicts::default();
    verifiers::run("python3", "verify_dkim.py", &args, &|file| file.to_owned(), &mut verdicts);
    for file in &files {
        for check in ["dkimpy rsa-sha256", "dkimpy ed25519-sha256"] {
            let verdict = verdicts.get(file).and_then(|v| v.get(check));
            assert!(verdict.is_some_and(|v| v.ok), "{check} of {file}: {:?}", verdict.map(|v| &v.reason));
        }
    }
}

/// What a driver printed, after checking it ran.
pub fn printed(output: &std::process::Output, driver: &str) -> Value {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{driver} failed: {stderr}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("{driver} printed no JSON ({e}): {} {stderr}", String::from_utf8_lossy(&output.stdout))
    })
}

/// The file names and contents of a received copy's attachments.
pub fn attachments(raw: &[u8]) -> Vec<(String, Vec<u8>)> {
    let parsed = MessageParser::default().parse(raw).expect("the copy parses");
    parsed.attachments().map(|a| (a.attachment_name().unwrap_or_default().to_owned(), a.contents().to_vec())).collect()
}

/// Whether Node runs and the pinned npm `packages` are installed in `tests/sdk/<dir>` (`npm ci`
/// when they are not).
pub fn node_sdk_ready(test: &str, dir: &str, packages: &[&str]) -> bool {
    if !tidings_e2e::tool_available(test, Command::new("node").arg("--version"), INSTALL) {
        return false;
    }
    let dir = sdk_dir(dir);
    if packages.iter().all(|package| dir.join("node_modules").join(package).join("package.json").exists()) {
        return true;
    }
    let installed = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--silent"])
        .current_dir(&dir)
        .status()
        .is_ok_and(|s| s.success());
    assert!(installed, "{test}: `npm ci` in {} failed", dir.display());
    true
}
