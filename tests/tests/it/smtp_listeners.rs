//! Exhausting the SMTP listeners (the bounce/complaint listener and SMTP submission) from the
//! outside, against the real binary: idle sockets from one address, idle sockets from many,
//! unfinished large messages, and a submission session whose key is revoked under it.
//! Loopback has all of 127.0.0.0/8, so each "client" binds its own 127.x source address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::common::{assert_ok, create_key, start_with_dns};
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, Certificate, TlsParameters};
use lettre::transport::smtp::commands::{Mail, Rcpt};
use lettre::transport::smtp::extension::ClientId;
use serde_json::json;
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options, TestServer, fresh_key};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};

/// The return-path domain, the only one the report listener accepts.
const BOUNCE_DOMAIN: &str = "bounces.example";
/// The default sessions per client.
const PER_CLIENT: usize = 10;
/// What the server's peak memory may grow by while 100 sessions each try to send a 9.9 MB
/// message and never finish it (the issue measured 1,036 MB before the budget): the budget
/// is 64 MiB, and a debug build's own allocations come on top.
const DATA_ATTACK_GROWTH_BOUND_MIB: u64 = 300;

/// A server with the report listener and both submission listeners, delivering nothing.
async fn server() -> (TestServer, TestDnsServer, SocketAddr) {
    let env = [
        ("TIDINGS_DELIVERY", "hold"),
        ("TIDINGS_RETURN_PATH_DOMAIN", BOUNCE_DOMAIN),
        ("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:0"),
    ];
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let options = Options { bootstrap_key: Some(fresh_key()), env, submission: true, ..Options::default() };
    let (server, dns) = start_with_dns(options).await;
    let line = server.wait_for_log(&["inbound SMTP listening on "]).expect("the listener's address is logged");
    let inbound = line.rsplit(' ').next().unwrap().trim().parse().expect("an address");
    (server, dns, inbound)
}

fn loopback(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// A connection to `addr` from `source`.
async fn connect_from(source: IpAddr, addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.bind(SocketAddr::new(source, 0)).expect("bind a loopback source address");
    socket.connect(addr).await.expect("connect")
}

/// A raw SMTP client.
struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    async fn open(source: IpAddr, addr: SocketAddr) -> Self {
        Self { reader: BufReader::new(connect_from(source, addr).await) }
    }

    /// The next reply's last line, or `None` when the server closed the connection.
    async fn reply(&mut self) -> Option<String> {
        loop {
            let mut line = String::new();
            let read = tokio::time::timeout(Duration::from_secs(30), self.reader.read_line(&mut line))
                .await
                .expect("a reply within 30 s");
            match read {
                Ok(0) | Err(_) => return None,
                Ok(_) if line.as_bytes().get(3) == Some(&b'-') => {}
                Ok(_) => return Some(line.trim_end().to_owned()),
            }
        }
    }

    async fn command(&mut self, command: &str) -> Option<String> {
        self.reader.get_mut().write_all(format!("{command}\r\n").as_bytes()).await.ok()?;
        self.reply().await
    }
}

/// Opens `count` sessions from `source` at once; returns the clients and their greetings.
async fn open_many(source: IpAddr, addr: SocketAddr, count: usize) -> Vec<(Client, Option<String>)> {
    let opening = (0..count).map(|_| async move {
        let mut client = Client::open(source, addr).await;
        let greeting = client.reply().await;
        (client, greeting)
    });
    futures::future::join_all(opening).await
}

fn starts(greeting: &Option<String>, code: &str) -> bool {
    greeting.as_deref().is_some_and(|g| g.starts_with(code))
}

#[tokio::test(flavor = "multi_thread")]
async fn one_address_holds_at_most_its_share_of_sessions_and_another_is_still_greeted() {
    let (server, _dns, inbound) = server().await;

    for (listener, addr) in [("report listener", inbound), ("submission listener", server.submission_addr())] {
        let idle = open_many(loopback(1), addr, 100).await;
        let greeted = idle.iter().filter(|(_, g)| starts(g, "220 ")).count();
        let refused = idle.iter().filter(|(_, g)| starts(g, "421 4.7.0")).count();

        let started = Instant::now();
        let mut other = Client::open(loopback(2), addr).await;
        let greeting = other.reply().await;
        let waited = started.elapsed();

        println!(
            "{listener}: 100 idle sockets from 127.0.0.1: {greeted} greeted, {refused} refused 421 4.7.0; \
             127.0.0.2 greeted in {waited:?}: {greeting:?}"
        );
        assert_eq!((greeted, refused), (PER_CLIENT, 100 - PER_CLIENT), "{listener}");
        assert!(starts(&greeting, "220 "), "{listener}: another address is greeted: {greeting:?}");
        assert!(waited < Duration::from_secs(5), "{listener}: greeted after {waited:?}");
        // The held sessions still work.
        let (mut held, _) = idle.into_iter().find(|(_, g)| starts(g, "220 ")).expect("a held session");
        assert!(starts(&held.command("NOOP").await, "250"), "{listener}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_sessions_from_many_addresses_make_room_for_a_fresh_client() {
    let (_server, _dns, inbound) = server().await;
    let mut idle = Vec::new();
    for last in 11..21 {
        idle.extend(open_many(loopback(last), inbound, PER_CLIENT).await);
    }
    assert!(idle.iter().all(|(_, g)| starts(g, "220 ")), "100 sessions from ten addresses fill the listener");
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let started = Instant::now();
    let mut fresh = Client::open(loopback(30), inbound).await;
    let greeting = fresh.reply().await;
    let waited = started.elapsed();
    let reply = fresh.command("EHLO fresh.example").await;
    let closing = idle.iter_mut().map(|(client, _)| tokio::time::timeout(Duration::from_millis(500), client.reply()));
    let closed: Vec<String> =
        futures::future::join_all(closing).await.into_iter().filter_map(|r| r.ok().flatten()).collect();
    assert!(closed.iter().all(|line| line.starts_with("421 4.4.2")), "{closed:?}");
    let evicted = closed.len();

    println!(
        "100 idle sessions from 10 addresses: a fresh client greeted in {waited:?}; {evicted} idle session(s) closed"
    );
    assert!(starts(&greeting, "220 "), "{greeting:?}");
    assert!(starts(&reply, "250"), "{reply:?}");
    assert!(waited < Duration::from_secs(10), "greeted after {waited:?}");
    assert!((1..=3).contains(&evicted), "one idle session makes room, not all of them: {evicted}");
}

/// The server's resident memory now and at its peak (VmRSS, VmHWM), in MiB.
fn memory_mib(server: &TestServer) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).expect("/proc status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("a memory figure")
            / 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// One attacker: a report transaction whose data is `bytes` long and never finished. Returns
/// how many bytes the server took before it stopped reading or closed the connection.
async fn unfinished_message(source: IpAddr, addr: SocketAddr, bytes: usize) -> (Client, usize) {
    let mut client = Client::open(source, addr).await;
    client.reply().await;
    client.command("EHLO attacker.example").await;
    client.command("MAIL FROM:<>").await;
    client.command(&format!("RCPT TO:<bounces+x@{BOUNCE_DOMAIN}>")).await;
    if !starts(&client.command("DATA").await, "354") {
        return (client, 0);
    }
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0;
    while sent < bytes {
        let line = &chunk[..chunk.len().min(bytes - sent)];
        let writing = client.reader.get_mut().write_all(line);
        match tokio::time::timeout(Duration::from_secs(3), writing).await {
            Ok(Ok(())) => sent += line.len(),
            // Closed (the budget refused it) or no longer read (waiting for budget).
            _ => break,
        }
    }
    (client, sent)
}

#[tokio::test(flavor = "multi_thread")]
async fn unfinished_large_messages_stay_within_the_data_budget_and_a_report_still_gets_through() {
    let (server, _dns, inbound) = server().await;
    let (_, before) = memory_mib(&server);

    let attack = (0..100u8).map(|n| unfinished_message(loopback(41 + n % 10), inbound, 9_900_000));
    let started = Instant::now();
    let attackers = futures::future::join_all(attack).await;
    let sent: usize = attackers.iter().map(|(_, sent)| sent).sum();
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // A real report (small) from another address while the attackers hold what they sent.
    let mut reporter = Client::open(loopback(60), inbound).await;
    let greeting = reporter.reply().await;
    reporter.command("EHLO mta.example").await;
    reporter.command("MAIL FROM:<>").await;
    reporter.command(&format!("RCPT TO:<bounces+x@{BOUNCE_DOMAIN}>")).await;
    let data = reporter.command("DATA").await;
    let reported = Instant::now();
    let end = reporter.command("Subject: delivery report\r\n\r\nnot a real one\r\n.").await;
    let report_took = reported.elapsed();
    let (now, peak) = memory_mib(&server);

    println!(
        "100 unfinished 9.9 MB messages from 10 addresses: {:.1} MB taken by the server in {:?}; VmHWM {before} MiB \
         before, {peak} MiB after (VmRSS {now} MiB; bound +{DATA_ATTACK_GROWTH_BOUND_MIB} MiB); a report from \
         127.0.0.60: {greeting:?}, {data:?} then {end:?} in {report_took:?}",
        sent as f64 / 1e6,
        started.elapsed()
    );
    assert!(peak - before < DATA_ATTACK_GROWTH_BOUND_MIB, "peak memory grew by {} MiB", peak - before);
    assert!(starts(&greeting, "220 "), "a place is made for the reporter: {greeting:?}");
    assert!(starts(&data, "354"), "{data:?}");
    assert!(starts(&end, "250"), "the report is taken while the attack holds: {end:?}");
    drop(attackers);
}

/// A submission session over STARTTLS, authenticated with `key`.
async fn authenticated_session(server: &TestServer, key: &str) -> AsyncSmtpConnection {
    let pem = std::fs::read(server.cert_path()).expect("the server's certificate");
    let tls = TlsParameters::builder("localhost".to_owned())
        .add_root_certificate(Certificate::from_pem(&pem).expect("a PEM certificate"))
        .build_rustls()
        .expect("TLS parameters");
    let hello = ClientId::Domain("app.example".to_owned());
    let addr = server.submission_addr();
    let mut conn = AsyncSmtpConnection::connect_tokio1(addr, Some(Duration::from_secs(10)), &hello, None, None)
        .await
        .expect("connect to the submission listener");
    conn.starttls(tls, &hello).await.expect("STARTTLS");
    let credentials = Credentials::new("tidings".to_owned(), key.to_owned());
    conn.auth(&[Mechanism::Plain], &credentials).await.expect("AUTH");
    conn
}

/// The reply to `RCPT TO:<to>`, as "code text".
async fn rcpt(conn: &mut AsyncSmtpConnection, to: &str) -> String {
    match conn.command(Rcpt::new(to.parse().expect("an address"), Vec::new())).await {
        Ok(response) => format!("{} {}", response.code(), response.message().collect::<Vec<_>>().join(" ")),
        Err(error) => error.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_submission_session_whose_key_is_revoked_learns_nothing_more_at_rcpt() {
    let (server, _dns, _) = server().await;
    let (status, body) = server.post("/v1/suppressions", server.key(), json!({"email": "gone@inbox.example"})).await;
    assert_ok(status, &body, 201, "suppress an address");
    let (id, key) = create_key(&server, server.key(), json!({"name": "soon revoked"})).await;
    let mut conn = authenticated_session(&server, &key).await;
    conn.command(Mail::new(None, Vec::new())).await.expect("MAIL");
    let before = (rcpt(&mut conn, "gone@inbox.example").await, rcpt(&mut conn, "ann@inbox.example").await);

    let (status, body) = server.delete(&format!("/v1/keys/{id}"), server.key()).await;
    assert_ok(status, &body, 200, "revoke the key");
    let after = (rcpt(&mut conn, "gone@inbox.example").await, rcpt(&mut conn, "ann@inbox.example").await);

    println!("RCPT before the revocation: {before:?}; after: {after:?}");
    // lettre words a refusal as "permanent error (550): …".
    assert!(before.0.contains("(550): 5.1.1") && before.0.contains("suppression"), "{before:?}");
    assert!(before.1.starts_with("250"), "{before:?}");
    for reply in [&after.0, &after.1] {
        assert!(reply.contains("(550): 5.7.8") && reply.contains("revoked"), "the same refusal for both: {after:?}");
        assert!(!reply.contains("suppression"), "{after:?}");
    }
}
