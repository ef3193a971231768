//! SMTP submission against the real binary: an application hands a message to
//! the submission listener with lettre (and with swaks), over STARTTLS with the server's
//! self-signed certificate and AUTH with an API key as the password. What arrives at the
//! relay (an [`SmtpSink`]) is parsed back and its DKIM signatures verified; the messages are
//! read back through the API; and what the API would refuse is refused with its SMTP code.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::dkim::assert_signed_by;
use crate::common::{assert_ok, create_key, start_with_dns, verified_domain};
use lettre::address::Envelope;
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use mail_parser::{MessageParser, MimeHeaders};
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options, TestServer, fresh_key};
use tidings_transport_smtp::testing::SmtpSink;

/// What to install for the swaks test.
const SWAKS: &str = "install swaks (Debian: apt-get install swaks)";
/// How long a test waits for a state it polls for.
const WAIT: Duration = Duration::from_secs(15);
/// The verified sending domain.
const DOMAIN: &str = "app.example";

/// A server relaying to a sink, with the submission listener and the verified domain
/// [`DOMAIN`].
struct Setup {
    // Dropped in this order: the server goes before the sink and DNS server it uses.
    server: TestServer,
    dns: TestDnsServer,
    sink: SmtpSink,
    /// The id of [`DOMAIN`].
    domain_id: String,
}

async fn setup() -> Setup {
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let env = [("TIDINGS_DELIVERY", "relay"), ("TIDINGS_SMTP_RELAY", &format!("smtp://{}", sink.addr()))];
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let options = Options { bootstrap_key: Some(fresh_key()), env, submission: true, ..Options::default() };
    let (server, dns) = start_with_dns(options).await;
    let domain_id = verified_domain(&server, &dns, server.key(), DOMAIN).await;
    Setup { server, dns, sink, domain_id }
}

/// lettre, doing STARTTLS (trusting only the server's certificate) and, given a key, AUTH
/// PLAIN with it as the password.
fn client(server: &TestServer, key: Option<&str>) -> AsyncSmtpTransport<Tokio1Executor> {
    transport(server, key, false)
}

/// [`client`], or with implicit TLS on the other listener.
fn transport(server: &TestServer, key: Option<&str>, implicit_tls: bool) -> AsyncSmtpTransport<Tokio1Executor> {
    let pem = std::fs::read(server.cert_path()).expect("the server's certificate");
    let tls = TlsParameters::builder("localhost".to_owned())
        .add_root_certificate(Certificate::from_pem(&pem).expect("a PEM certificate"))
        .build_rustls()
        .expect("TLS parameters");
    let (addr, tls) = match implicit_tls {
        false => (server.submission_addr(), Tls::Required(tls)),
        true => (server.submission_tls_addr(), Tls::Wrapper(tls)),
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(addr.ip().to_string())
        .port(addr.port())
        .tls(tls)
        .timeout(Some(WAIT));
    if let Some(key) = key {
        builder = builder.credentials(Credentials::new("tidings".to_owned(), key.to_owned()));
        builder = builder.authentication(vec![Mechanism::Plain]);
    }
    builder.build()
}

/// A text + HTML message from `from` to `to`.
fn message(from: &str, to: &[&str], message_id: &str) -> Message {
    let mut builder = Message::builder()
        .from(from.parse::<Mailbox>().unwrap())
        .subject("Your invoice")
        .message_id(Some(message_id.to_owned()));
    for to in to {
        builder = builder.to(to.parse().unwrap());
    }
    builder
        .multipart(MultiPart::alternative_plain_html(
            "Invoice 42 is attached.".to_owned(),
            "<p>Invoice <b>42</b> is attached.</p>".to_owned(),
        ))
        .unwrap()
}

/// The SMTP reply code of a refused send, and its text.
fn refusal(error: lettre::transport::smtp::Error) -> (String, String) {
    let code = error.status().map(|c| c.to_string()).unwrap_or_else(|| panic!("not an SMTP refusal: {error:?}"));
    (code, error.to_string())
}

/// The messages the API lists for `to`.
async fn messages_to(server: &TestServer, to: &str) -> Vec<Value> {
    let (status, body) = server.get(&format!("/v1/messages?to={to}"), server.key()).await;
    assert_ok(status, &body, 200, "list messages");
    body["data"].as_array().unwrap().clone()
}

/// Polls message `id` until it is Delivered; returns its timeline's event types.
async fn delivered_timeline(server: &TestServer, id: &str) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
        if body["data"]["status"] == "Delivered" {
            break;
        }
        assert!(Instant::now() < deadline, "message {id} was not delivered: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, events) = server.get(&format!("/v1/messages/{id}/events"), server.key()).await;
    events["data"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_submitted_with_lettre_is_one_send_delivered_to_each_recipient_with_its_headers() {
    let Setup { server, dns, sink, .. } = setup().await;
    let to = ["Ann <ann@inbox.example>", "bob@inbox.example"];
    let mut mail = Message::builder()
        .from("Billing <billing@app.example>".parse::<Mailbox>().unwrap())
        .cc("Carol <carol@inbox.example>".parse::<Mailbox>().unwrap())
        .subject("Your invoice")
        .message_id(Some("<invoice-42@app.example>".to_owned()));
    for to in to {
        mail = mail.to(to.parse().unwrap());
    }
    let mail = mail
        .multipart(MultiPart::alternative_plain_html(
            "Invoice 42 is attached.".to_owned(),
            "<p>Invoice <b>42</b> is attached.</p>".to_owned(),
        ))
        .unwrap()
        .formatted();
    // dan@ is in the envelope only: a bcc recipient.
    let envelope_to = ["ann@inbox.example", "bob@inbox.example", "carol@inbox.example", "dan@inbox.example"];
    let envelope = Envelope::new(None, envelope_to.iter().map(|t| t.parse().unwrap()).collect()).unwrap();

    let response = client(&server, Some(server.key())).send_raw(&envelope, &mail).await.expect("accepted");

    assert_eq!(response.code().to_string(), "250");
    let listed = messages_to(&server, "dan@inbox.example").await;
    assert_eq!(listed.len(), 1, "one message for the whole submission: {listed:?}");
    let m = &listed[0];
    assert_eq!(m["to"], "\"Ann\" <ann@inbox.example>, bob@inbox.example", "{m}");
    assert_eq!(m["cc"], json!(["\"Carol\" <carol@inbox.example>"]), "{m}");
    assert_eq!(m["bcc"], json!(["dan@inbox.example"]), "{m}");
    let types: Vec<&str> = m["recipients"].as_array().unwrap().iter().map(|r| r["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["to", "to", "cc", "bcc"], "{m}");
    let id = m["id"].as_str().unwrap();
    let timeline = delivered_timeline(&server, id).await;
    assert_eq!(timeline.iter().filter(|t| *t == "Delivered").count(), 4, "{timeline:?}");

    for to in envelope_to {
        let received: Vec<_> = sink.messages().into_iter().filter(|m| m.recipients.iter().any(|r| r == to)).collect();
        assert_eq!(received.len(), 1, "the relay got one copy for {to}");
        assert_eq!(received[0].recipients, [to], "one envelope per recipient");
        let raw = &received[0].data;
        assert_signed_by(raw, dns.addr(), DOMAIN).await;
        let parsed = MessageParser::default().parse(raw).expect("the relayed MIME parses");
        let from = parsed.from().and_then(|f| f.first()).unwrap();
        assert_eq!((from.name(), from.address()), (Some("Billing"), Some("billing@app.example")));
        let shown: Vec<(Option<&str>, Option<&str>)> =
            parsed.to().unwrap().iter().map(|a| (a.name(), a.address())).collect();
        assert_eq!(shown, [(Some("Ann"), Some("ann@inbox.example")), (None, Some("bob@inbox.example"))]);
        let cc = parsed.cc().and_then(|c| c.first()).map(|a| (a.name(), a.address()));
        assert_eq!(cc, Some((Some("Carol"), Some("carol@inbox.example"))));
        assert!(parsed.header("Bcc").is_none(), "no copy carries a Bcc header");
        assert_eq!(parsed.subject(), Some("Your invoice"));
        assert_eq!(parsed.body_text(0).unwrap().trim_end(), "Invoice 42 is attached.");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reply_to_custom_headers_attachments_and_inline_images_are_carried_to_the_sink() {
    use lettre::message::header::{ContentType, HeaderName, HeaderValue};
    use lettre::message::{Attachment, SinglePart};
    let Setup { server, dns, sink, .. } = setup().await;
    let to = "carol@inbox.example";
    let pdf = b"%PDF-1.4 invoice 42".to_vec();
    let png = vec![0x89, b'P', b'N', b'G', 0, 1, 2, 3];
    let mut mail = Message::builder()
        .from("billing@app.example".parse::<Mailbox>().unwrap())
        .reply_to("Help <help@app.example>".parse::<Mailbox>().unwrap())
        .to(to.parse().unwrap())
        .subject("Invoice with logo")
        .message_id(Some("<rich-1@app.example>".to_owned()))
        .multipart(
            MultiPart::mixed()
                .multipart(
                    MultiPart::related()
                        .singlepart(SinglePart::html("<p><img src=\"cid:logo\"> Invoice 42</p>".to_owned()))
                        .singlepart(
                            Attachment::new_inline("logo".to_owned()).body(png.clone(), "image/png".parse().unwrap()),
                        ),
                )
                .singlepart(
                    Attachment::new("invoice-42.pdf".to_owned())
                        .body(pdf.clone(), ContentType::parse("application/pdf").unwrap()),
                ),
        )
        .unwrap();
    mail.headers_mut().insert_raw(HeaderValue::new(HeaderName::new_from_ascii_str("X-Campaign"), "spring".to_owned()));

    client(&server, Some(server.key())).send(mail).await.expect("the submission is accepted");

    let listed = messages_to(&server, to).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["replyTo"], json!(["help@app.example"]));
    let id = listed[0]["id"].as_str().unwrap();
    assert_eq!(delivered_timeline(&server, id).await, ["Queued", "Sent", "Delivered"]);
    let received: Vec<_> = sink.messages().into_iter().filter(|m| m.recipients.iter().any(|r| r == to)).collect();
    assert_eq!(received.len(), 1);
    let raw = &received[0].data;
    assert_signed_by(raw, dns.addr(), DOMAIN).await;
    let parsed = MessageParser::default().parse(raw).expect("the relayed MIME parses");
    assert_eq!(parsed.reply_to().and_then(|r| r.first()).and_then(|a| a.address()), Some("help@app.example"));
    assert_eq!(parsed.header("X-Campaign").and_then(|h| h.as_text()), Some("spring"));
    let parts: Vec<_> = parsed.attachments().collect();
    let logo = parts.iter().find(|p| p.content_id() == Some("logo")).expect("the inline image");
    assert_eq!(logo.contents(), &png[..]);
    let invoice = parts.iter().find(|p| p.attachment_name() == Some("invoice-42.pdf")).expect("the attachment");
    assert_eq!(invoice.contents(), &pdf[..]);
    assert!(parsed.body_html(0).unwrap().contains("cid:logo"));
}

#[tokio::test(flavor = "multi_thread")]
async fn implicit_tls_submission_is_delivered_too() {
    let Setup { server, sink, .. } = setup().await;
    let mail = message("app@app.example", &["tls@inbox.example"], "<implicit@app.example>");

    let response = transport(&server, Some(server.key()), true).send(mail).await.expect("accepted");

    assert_eq!(response.code().to_string(), "250");
    let listed = messages_to(&server, "tls@inbox.example").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    delivered_timeline(&server, listed[0]["id"].as_str().unwrap()).await;
    assert!(sink.messages().iter().any(|m| m.recipients.iter().any(|r| r == "tls@inbox.example")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_submission_takes_one_token_and_a_retry_after_a_rate_limit_sends_it_once() {
    let Setup { server, .. } = setup().await;
    // One token a second: the first submission takes it, the second finds the bucket empty.
    let (_, key) = create_key(&server, server.key(), json!({"name": "smtp", "rateLimitPerSec": 1})).await;
    let to = ["one@inbox.example", "two@inbox.example", "three@inbox.example"];
    let envelope = Envelope::new(None, to.iter().map(|t| t.parse().unwrap()).collect()).unwrap();
    let first = message("app@app.example", &to, "<first@app.example>").formatted();
    client(&server, Some(&key)).send_raw(&envelope, &first).await.expect("three recipients, one token");
    let mail = message("app@app.example", &to, "<retry-1@app.example>").formatted();

    let limited = client(&server, Some(&key)).send_raw(&envelope, &mail).await.expect_err("rate limited");
    let (code, text) = refusal(limited);
    assert_eq!(code, "451", "{text}");
    assert!(text.contains("4.7.1"), "{text}");
    // The client retries the same message, as an MTA would, until it is taken.
    let deadline = Instant::now() + WAIT;
    while let Err(error) = client(&server, Some(&key)).send_raw(&envelope, &mail).await {
        assert_eq!(refusal(error).0, "451");
        assert!(Instant::now() < deadline, "the retry never got through");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // And once more after it was taken: a replay of the same Message-ID, not a new send.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    client(&server, Some(&key)).send_raw(&envelope, &mail).await.expect("a replay is accepted");

    for to in to {
        assert_eq!(messages_to(&server, to).await.len(), 2, "{to}: one message per submission, not per attempt");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_wrong_and_revoked_keys_are_refused() {
    let Setup { server, .. } = setup().await;
    let mail = || message("app@app.example", &["ann@inbox.example"], "<auth@app.example>");

    let (code, text) = refusal(client(&server, None).send(mail()).await.unwrap_err());
    assert_eq!(code, "530", "no AUTH: {text}");

    let (code, text) = refusal(client(&server, Some(&fresh_key())).send(mail()).await.unwrap_err());
    assert_eq!(code, "535", "a wrong key: {text}");
    assert!(text.contains("5.7.8"), "{text}");

    let (id, key) = create_key(&server, server.key(), json!({"name": "revoked"})).await;
    let (status, body) = server.delete(&format!("/v1/keys/{id}"), server.key()).await;
    assert_ok(status, &body, 200, "revoke");
    let (code, text) = refusal(client(&server, Some(&key)).send(mail()).await.unwrap_err());
    assert_eq!(code, "535", "a revoked key: {text}");

    assert!(messages_to(&server, "ann@inbox.example").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn what_the_api_would_refuse_is_refused_with_its_smtp_code() {
    let Setup { server, dns, domain_id, .. } = setup().await;
    let key = server.key().to_owned();
    let send = |from: &str, to: &str, key: &str| {
        let mail = message(from, &[to], &format!("<{}@app.example>", fresh_key()));
        let transport = client(&server, Some(key));
        async move { transport.send(mail).await.map_err(refusal) }
    };
    let (status, body) = server.post("/v1/suppressions", &key, json!({"email": "gone@inbox.example"})).await;
    assert_ok(status, &body, 201, "suppress");
    let (status, body) = server.post("/v1/domains", &key, json!({"domain": "pending.example"})).await;
    assert_ok(status, &body, 201, "add an unverified domain");
    verified_domain(&server, &dns, &key, "other.example").await;
    let (_, scoped) = create_key(&server, &key, json!({"name": "app only", "sendingDomainId": domain_id})).await;

    let (code, text) = send("app@app.example", "gone@inbox.example", &key).await.unwrap_err();
    assert_eq!(code, "550", "a suppressed recipient: {text}");
    assert!(text.contains("5.1.1"), "refused at RCPT: {text}");

    let (code, text) = send("app@pending.example", "ann@inbox.example", &key).await.unwrap_err();
    assert_eq!(code, "550", "an unverified domain: {text}");
    assert!(text.contains("5.7.1") && text.contains("not verified"), "{text}");

    let (code, text) = send("app@other.example", "ann@inbox.example", &scoped).await.unwrap_err();
    assert_eq!(code, "550", "a domain-scoped key: {text}");
    assert!(text.contains("5.7.1") && text.contains("app.example"), "{text}");

    let untitled = Message::builder()
        .from("app@app.example".parse().unwrap())
        .to("ann@inbox.example".parse().unwrap())
        .body("No subject.".to_owned())
        .unwrap();
    let (code, text) = refusal(client(&server, Some(&key)).send(untitled).await.unwrap_err());
    assert_eq!(code, "550", "no subject: {text}");
    assert!(text.contains("5.6.0") && text.contains("subject"), "{text}");

    send("app@other.example", "ann@inbox.example", &key).await.expect("the full key may send from other.example");
    send("app@app.example", "ann@inbox.example", &scoped).await.expect("the scoped key may send from its domain");
    assert_eq!(messages_to(&server, "ann@inbox.example").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn swaks_submits_with_starttls_and_auth_login() {
    let probe = &mut Command::new("swaks");
    if !tidings_e2e::tool_available("swaks_submits_with_starttls_and_auth_login", probe.arg("--version"), SWAKS) {
        return;
    }
    let Setup { server, sink, .. } = setup().await;
    let addr = server.submission_addr();
    let cert = server.cert_path();

    let output = Command::new("swaks")
        .args(["--server", &addr.ip().to_string(), "--port", &addr.port().to_string()])
        .args(["--tls", "--tls-verify", "--tls-ca-path", cert.to_str().unwrap(), "--tls-sni", "localhost"])
        .args(["--auth", "LOGIN", "--auth-user", "tidings", "--auth-password", server.key()])
        .args(["--from", "app@app.example", "--to", "swaks@inbox.example"])
        .args(["--header", "Subject: Sent with swaks", "--body", "Hello from swaks."])
        .output()
        .unwrap_or_else(|e| panic!("cannot run swaks ({e}): {SWAKS}"));

    let transcript = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "swaks failed:\n{transcript}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(transcript.contains("<~  235 2.7.0"), "AUTH LOGIN over TLS succeeded:\n{transcript}");
    let listed = messages_to(&server, "swaks@inbox.example").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["subject"], "Sent with swaks");
    delivered_timeline(&server, listed[0]["id"].as_str().unwrap()).await;
    let received = sink.messages().into_iter().find(|m| m.recipients.iter().any(|r| r == "swaks@inbox.example"));
    let parsed_text = received.map(|m| String::from_utf8_lossy(&m.data).into_owned()).unwrap_or_default();
    assert!(parsed_text.contains("Hello from swaks."), "the relay got the body: {parsed_text}");
}
