//! `MailAuthChecker` against a real DNS server on loopback (`TestDnsServer`) publishing SPF,
//! DKIM and DMARC records, with messages signed by an independent signer (python's dkimpy,
//! `tests/sign_dkim.py`), and against a DNS server that never answers.

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tidings_core::dkim_keys;
use tidings_core::inbound::{AuthCheck, AuthOutcome, AuthResults};
use tidings_core::model::DkimKeys;
use tidings_core::ports::{AuthInput, MessageAuth, SystemRandom};
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_dns::{MailAuthChecker, Settings, Upstream};
use tokio::net::UdpSocket;

/// Short enough that the failure tests finish quickly, long enough for a loaded CI machine.
const TEST_SETTINGS: Settings = Settings { timeout: Duration::from_millis(500), attempts: 2 };

/// How late a test may see a deadline pass on a busy machine.
const SCHEDULING_SLACK: Duration = Duration::from_secs(1);

const SELECTOR: &str = "sel";
const SENDER_IP: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// An address no SPF record here names (TEST-NET-1).
const STRANGER_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
const RECEIVER: &str = "mx.tidings.test";

/// What is said to install when the signer cannot run.
const INSTALL: &str = "this test signs mail with python3's dkimpy: `pip install dkimpy==1.1.8` (./test installs it)";

/// One RSA key for every test here (generation is slow).
fn keys() -> &'static DkimKeys {
    static KEYS: OnceLock<DkimKeys> = OnceLock::new();
    KEYS.get_or_init(|| dkim_keys::generate(&SystemRandom).expect("RSA key"))
}

/// The message from ann@example.com, CRLF line ends.
fn message(from: &str, body: &str) -> Vec<u8> {
    format!(
        "From: Ann <{from}>\r\n\
         To: support@in.acme.test\r\n\
         Subject: Where is my order?\r\n\
         Date: Sat, 05 Dec 2026 10:00:00 +0000\r\n\
         Message-ID: <order.42@example.com>\r\n\
         \r\n\
         {body}\r\n"
    )
    .into_bytes()
}

/// `message` signed for `example.com` by dkimpy with [`keys`].
fn signed_by_dkimpy(message: &[u8]) -> Vec<u8> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sign_dkim.py");
    let key_hex: String = keys().rsa_private_pkcs8.expose().iter().map(|byte| format!("{byte:02x}")).collect();
    let mut child = Command::new("python3")
        .arg(&script)
        .args(["example.com", SELECTOR, &key_hex])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run python3 ({error}); {INSTALL}"));
    child.stdin.take().expect("stdin").write_all(message).expect("message to the signer");
    let output = child.wait_with_output().expect("the signer's output");
    assert!(output.status.success(), "dkimpy could not sign: {}\n{INSTALL}", String::from_utf8_lossy(&output.stderr));
    assert!(output.stdout.starts_with(b"DKIM-Signature:"), "the signer wrote no signature");
    output.stdout
}

/// `example.com` with the key, SPF and a rejecting DMARC policy; `other.test` with SPF only
/// (a MAIL FROM domain not aligned with example.com); `mail.example.com` with SPF for its
/// HELO identity; `nothing.test` exists (an A record) but publishes nothing else.
async fn zone() -> TestDnsServer {
    let public_key = dkim_keys::rsa_public_key_base64(keys()).expect("public key");
    TestDnsServer::start([
        TestRecord::txt("sel._domainkey.example.com", &format!("v=DKIM1; k=rsa; p={public_key}")),
        TestRecord::txt("example.com", "v=spf1 ip4:127.0.0.1 -all"),
        TestRecord::txt("_dmarc.example.com", "v=DMARC1; p=reject"),
        TestRecord::txt("other.test", "v=spf1 ip4:127.0.0.1 -all"),
        TestRecord::txt("mail.example.com", "v=spf1 ip4:127.0.0.1 -all"),
        TestRecord::a("nothing.test", Ipv4Addr::new(192, 0, 2, 1)),
    ])
    .await
    .expect("test DNS server")
}

fn checker_for(addr: SocketAddr) -> MailAuthChecker {
    MailAuthChecker::new(Upstream::Server(addr), TEST_SETTINGS).expect("checker")
}

fn input<'a>(raw: &'a [u8], client_ip: IpAddr, mail_from: Option<&'a str>) -> AuthInput<'a> {
    AuthInput { raw, client_ip, helo: "mail.example.com", mail_from, receiver: RECEIVER }
}

fn check(result: AuthOutcome, domain: &str) -> AuthCheck {
    AuthCheck { domain: Some(domain.to_owned()), ..AuthCheck::of(result) }
}

fn dkim(result: AuthOutcome) -> AuthCheck {
    AuthCheck { selector: Some(SELECTOR.to_owned()), ..check(result, "example.com") }
}

fn dmarc(result: AuthOutcome) -> AuthCheck {
    AuthCheck { policy: Some("reject".to_owned()), ..check(result, "example.com") }
}

#[tokio::test]
async fn mail_signed_by_dkimpy_from_an_authorised_address_passes_all_three() {
    let server = zone().await;
    let raw = signed_by_dkimpy(&message("ann@example.com", "Hello,\r\nit has not arrived."));

    let results = checker_for(server.addr()).authenticate(input(&raw, SENDER_IP, Some("ann@example.com"))).await;

    assert_eq!(
        results,
        AuthResults {
            spf: check(AuthOutcome::Pass, "example.com"),
            dkim: dkim(AuthOutcome::Pass),
            dmarc: dmarc(AuthOutcome::Pass),
        }
    );
}

#[tokio::test]
async fn an_altered_body_fails_dkim_and_only_aligned_spf_keeps_dmarc_passing() {
    let server = zone().await;
    let signed = signed_by_dkimpy(&message("ann@example.com", "Please pay invoice 1."));
    let text = String::from_utf8(signed).unwrap();
    assert!(text.contains("invoice 1."));
    let altered = text.replace("invoice 1.", "invoice 2.").into_bytes();
    let checker = checker_for(server.addr());

    // The envelope sender on another domain: SPF passes for it, but it does not align.
    let unaligned = checker.authenticate(input(&altered, SENDER_IP, Some("bounces@other.test"))).await;
    assert_eq!(
        unaligned,
        AuthResults {
            spf: check(AuthOutcome::Pass, "other.test"),
            dkim: dkim(AuthOutcome::Fail),
            dmarc: dmarc(AuthOutcome::Fail),
        }
    );

    // The same message from the From domain's own envelope: aligned SPF is enough for DMARC.
    let aligned = checker.authenticate(input(&altered, SENDER_IP, Some("ann@example.com"))).await;
    assert_eq!((aligned.dkim, aligned.dmarc), (dkim(AuthOutcome::Fail), dmarc(AuthOutcome::Pass)));
}

#[tokio::test]
async fn a_client_the_spf_record_does_not_name_fails_spf_while_dkim_carries_dmarc() {
    let server = zone().await;
    let raw = signed_by_dkimpy(&message("ann@example.com", "Hello."));

    let results = checker_for(server.addr()).authenticate(input(&raw, STRANGER_IP, Some("ann@example.com"))).await;

    assert_eq!(
        results,
        AuthResults {
            spf: check(AuthOutcome::Fail, "example.com"),
            dkim: dkim(AuthOutcome::Pass),
            dmarc: dmarc(AuthOutcome::Pass),
        }
    );
}

#[tokio::test]
async fn an_unsigned_message_from_a_stranger_fails_dmarc_under_its_policy() {
    let server = zone().await;
    let raw = message("ann@example.com", "Hello.");

    let results = checker_for(server.addr()).authenticate(input(&raw, STRANGER_IP, Some("ann@example.com"))).await;

    assert_eq!(
        results,
        AuthResults {
            spf: check(AuthOutcome::Fail, "example.com"),
            dkim: AuthCheck::absent(),
            dmarc: dmarc(AuthOutcome::Fail),
        }
    );
}

#[tokio::test]
async fn a_domain_without_records_gives_none_for_every_check() {
    let server = zone().await;
    let raw = message("someone@nothing.test", "Hello.");

    let results = checker_for(server.addr()).authenticate(input(&raw, SENDER_IP, Some("someone@nothing.test"))).await;

    assert_eq!(
        results,
        AuthResults {
            spf: check(AuthOutcome::Absent, "nothing.test"),
            dkim: AuthCheck::absent(),
            dmarc: check(AuthOutcome::Absent, "nothing.test"),
        }
    );
}

#[tokio::test]
async fn a_null_sender_is_checked_by_its_helo_name() {
    let server = zone().await;
    let raw = message("mailer-daemon@mail.example.com", "Delivery failed.");
    let checker = checker_for(server.addr());

    let bounce = checker.authenticate(input(&raw, SENDER_IP, None)).await;
    assert_eq!(bounce.spf, check(AuthOutcome::Pass, "mail.example.com"));
    let empty = checker.authenticate(input(&raw, STRANGER_IP, Some(""))).await;
    assert_eq!(empty.spf, check(AuthOutcome::Fail, "mail.example.com"));
}

#[tokio::test]
async fn a_dns_server_that_never_answers_gives_temperror_within_the_lookup_bound() {
    // Bound but never read: queries vanish, as with a firewalled resolver.
    let silent = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let checker = checker_for(silent.local_addr().unwrap());
    let raw = signed_by_dkimpy(&message("ann@example.com", "Hello."));

    let started = Instant::now();
    let results = checker.authenticate(input(&raw, SENDER_IP, Some("ann@example.com"))).await;
    let elapsed = started.elapsed();

    // hickory gives up after its tries; mail-auth calls that a temporary error.
    assert_eq!(
        results,
        AuthResults {
            spf: check(AuthOutcome::TempError, "example.com"),
            dkim: dkim(AuthOutcome::TempError),
            dmarc: check(AuthOutcome::TempError, "example.com"),
        }
    );
    assert!(elapsed < checker.deadline(), "took {elapsed:?}, the deadline is {:?}", checker.deadline());
}

#[tokio::test]
async fn checks_still_waiting_at_the_deadline_are_temperror() {
    let silent = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    // Lookups that would wait 5 s each, cut at 1 s for the whole message.
    let deadline = Duration::from_secs(1);
    let checker = MailAuthChecker::new(Upstream::Server(silent.local_addr().unwrap()), Settings::default())
        .unwrap()
        .with_deadline(deadline);
    let signed = signed_by_dkimpy(&message("ann@example.com", "Hello."));
    let unsigned = message("ann@example.com", "Hello.");

    let started = Instant::now();
    let results = checker.authenticate(input(&signed, SENDER_IP, Some("ann@example.com"))).await;
    let elapsed = started.elapsed();

    assert_eq!(
        results,
        AuthResults {
            spf: check(AuthOutcome::TempError, "example.com"),
            dkim: dkim(AuthOutcome::TempError),
            dmarc: check(AuthOutcome::TempError, "example.com"),
        }
    );
    assert!(elapsed >= deadline && elapsed < deadline + SCHEDULING_SLACK, "took {elapsed:?}");

    let results = checker.authenticate(input(&unsigned, SENDER_IP, Some("ann@example.com"))).await;
    assert_eq!(results.dkim, AuthCheck::absent(), "an unsigned message has no DKIM to wait for");
    assert_eq!(results.spf.result, AuthOutcome::TempError);
}

#[tokio::test]
async fn servfail_is_a_temporary_error_not_an_absent_record() {
    let addr = answer_everything_with(RCODE_SERVFAIL).await;
    let raw = signed_by_dkimpy(&message("ann@example.com", "Hello."));

    let results = checker_for(addr).authenticate(input(&raw, SENDER_IP, Some("ann@example.com"))).await;

    assert_eq!(
        (results.spf.result, results.dkim.result, results.dmarc.result),
        (AuthOutcome::TempError, AuthOutcome::TempError, AuthOutcome::TempError)
    );
}

const RCODE_SERVFAIL: u8 = 2;

/// A UDP "server" that answers every query with `rcode` and nothing else: the query echoed
/// back with QR set and the RCODE replaced. The task ends with the test's runtime.
async fn answer_everything_with(rcode: u8) -> SocketAddr {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        while let Ok((len, peer)) = socket.recv_from(&mut buf).await {
            if len < 12 {
                continue;
            }
            let mut reply = buf[..len].to_vec();
            reply[2] |= 0x80; // QR: this is a response
            reply[3] = (reply[3] & 0xf0) | rcode;
            let _ = socket.send_to(&reply, peer).await;
        }
    });
    addr
}
