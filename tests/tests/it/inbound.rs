//! Inbound mail (issue #35, contract §13) through the built server: a sender on loopback
//! hands messages to the public SMTP listener (`TIDINGS_INBOUND_SMTP_LISTEN`) for a domain
//! whose records (DKIM, MX) a loopback DNS server holds; the application reads them back
//! through `/v1/inbound/messages` and gets `InboundReceived` at a webhook receiver, signed
//! (checked with the standardwebhooks crate). SPF, DKIM and DMARC are judged by the server
//! against the same DNS server, for a message dkimpy signed (an independent signer) and
//! the same message altered. Also: the listener is no open relay, routes reject and store,
//! a reply names the message it answers, a kill -9 right after `250` loses nothing, and
//! the limits answer with their codes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::mail::send_ok;
use crate::common::receiver::{Hit, Receiver};
use crate::common::{assert_ok, block_on, publish, start_with_dns};
use serde_json::{Value, json};
use standardwebhooks::Webhook;
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options, TestServer, fresh_key};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(60);
/// The public name of the listener's host, which the MX records name.
const MX_HOST: &str = "mx.tidings.test";
/// The inbound domain.
const INBOUND: &str = "in.shop.example";

/// One SMTP transaction's reply codes: greeting, EHLO, MAIL, each RCPT, then (if any
/// recipient was taken) DATA, the end of data and QUIT.
#[derive(Debug)]
pub(crate) struct Transaction {
    pub(crate) codes: Vec<u16>,
    /// The reply to the end of data, if the data was sent.
    pub(crate) end_of_data: Option<u16>,
}

/// Sends `data` from `mail_from` (`""`: the null sender) to `rcpts`, dot-stuffed, on one
/// connection.
pub(crate) async fn smtp(addr: SocketAddr, mail_from: &str, rcpts: &[&str], data: &[u8]) -> Transaction {
    let stream = TcpStream::connect(addr).await.expect("connect to the inbound listener");
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    async fn reply(lines: &mut tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>) -> u16 {
        loop {
            let line = lines.next_line().await.expect("read a reply").expect("the server closed the connection");
            if line.as_bytes().get(3) != Some(&b'-') {
                return line[..3].parse().expect("a reply code");
            }
        }
    }
    let mut codes = vec![reply(&mut lines).await];
    let mut commands = vec!["EHLO sender.example".to_owned(), format!("MAIL FROM:<{mail_from}>")];
    commands.extend(rcpts.iter().map(|r| format!("RCPT TO:<{r}>")));
    for command in commands {
        write.write_all(format!("{command}\r\n").as_bytes()).await.unwrap();
        codes.push(reply(&mut lines).await);
    }
    if codes[2] != 250 || !codes[3..].contains(&250) {
        return Transaction { codes, end_of_data: None };
    }
    write.write_all(b"DATA\r\n").await.unwrap();
    codes.push(reply(&mut lines).await);
    let mut stuffed = Vec::with_capacity(data.len() + 64);
    for line in data.strip_suffix(b"\r\n").unwrap_or(data).split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.first() == Some(&b'.') {
            stuffed.push(b'.');
        }
        stuffed.extend_from_slice(line);
        stuffed.extend_from_slice(b"\r\n");
    }
    stuffed.extend_from_slice(b".\r\n");
    write.write_all(&stuffed).await.unwrap();
    let end = reply(&mut lines).await;
    codes.push(end);
    write.write_all(b"QUIT\r\n").await.unwrap();
    let _ = lines.next_line().await;
    Transaction { codes, end_of_data: Some(end) }
}

struct Setup {
    server: TestServer,
    dns: TestDnsServer,
    listener: SocketAddr,
    domain_id: String,
}

/// A server with the listener, the inbound domain verified (SPF, DKIM, DMARC) with
/// inbound on and its MX published and verified; `env` adds settings.
async fn setup(env: &[(&str, &str)]) -> Setup {
    let mut vars = vec![
        ("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:0"),
        ("TIDINGS_INBOUND_MX_HOST", MX_HOST),
        ("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("TIDINGS_WEBHOOK_RETRY_SCHEDULE", "1s"),
    ];
    vars.extend_from_slice(env);
    let env = vars.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
    let options = Options { bootstrap_key: Some(fresh_key()), env, ..Options::default() };
    let (server, dns) = start_with_dns(options).await;
    let line = server.wait_for_log(&["inbound SMTP listening on "]).expect("the listener's address is logged");
    let listener = line.rsplit(' ').next().unwrap().trim().parse().expect("an address");
    let (status, body) = server.post("/v1/domains", server.key(), json!({"domain": INBOUND})).await;
    assert_ok(status, &body, 201, "add the inbound domain");
    let domain_id = body["data"]["id"].as_str().unwrap().to_owned();
    publish(&dns, &body["data"], &["SPF", "DKIM", "DMARC"]).await;
    let setup = Setup { server, dns, listener, domain_id };
    setup.switch_inbound_on().await;
    setup
}

impl Setup {
    async fn switch_inbound_on(&self) {
        let path = format!("/v1/domains/{}", self.domain_id);
        let (status, body) = self.server.patch(&path, self.server.key(), json!({"inbound": true})).await;
        assert_ok(status, &body, 200, "switch inbound on");
        assert_eq!(body["data"]["inbound"], true, "{body}");
        assert_eq!(body["data"]["inboundStatus"], "Pending", "{body}");
        let mx = body["data"]["dnsRecords"].as_array().unwrap().iter().find(|r| r["purpose"] == "Inbound (MX)");
        let mx = mx.unwrap_or_else(|| panic!("an Inbound (MX) record: {body}"));
        assert_eq!((&mx["type"], &mx["name"], &mx["value"]), (&json!("MX"), &json!(INBOUND), &json!(MX_HOST)));

        // Not yet published: the listener takes nothing for the domain.
        let refused = smtp(self.listener, "ann@sender.example", &[&format!("support@{INBOUND}")], b"").await;
        assert_eq!(refused.codes[3], 550, "before its MX verifies, the domain receives nothing: {refused:?}");

        publish(&self.dns, &body["data"], &["Inbound"]).await;
        let (status, body) = self.server.post(&format!("{path}/verify"), self.server.key(), json!({})).await;
        assert_ok(status, &body, 200, "verify");
        assert_eq!(body["data"]["overallStatus"], "Verified", "{body}");
        assert_eq!(body["data"]["inboundStatus"], "Verified", "{body}");
    }

    async fn get(&self, path: &str) -> Value {
        let (status, body) = self.server.get(path, self.server.key()).await;
        assert_ok(status, &body, 200, path);
        body
    }

    /// The inbound messages, newest first, with `query`.
    async fn list(&self, query: &str) -> Vec<Value> {
        self.get(&format!("/v1/inbound/messages{query}")).await["data"].as_array().unwrap().clone()
    }

    async fn bytes(&self, path: &str) -> (reqwest::header::HeaderMap, Vec<u8>) {
        let response = self.server.request(reqwest::Method::GET, path).bearer_auth(self.server.key()).send().await;
        let response = response.expect("GET");
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers().clone();
        (headers, response.bytes().await.expect("a body").to_vec())
    }
}

/// A DKIM key of `domain` under `selector`: the private key (PKCS#8 DER, hex) and its
/// record published.
async fn dkim_key(dns: &TestDnsServer, domain: &str, selector: &str) -> String {
    let keys = tidings_core::dkim_keys::generate(&tidings_core::ports::SystemRandom).expect("a key pair");
    let public = tidings_core::dkim_keys::rsa_public_key_base64(&keys).expect("its public key");
    dns.set_txt(&format!("{selector}._domainkey.{domain}"), &[&format!("v=DKIM1; k=rsa; p={public}")]).await;
    keys.rsa_private_pkcs8.expose().iter().map(|b| format!("{b:02x}")).collect()
}

/// `message` signed by dkimpy for `domain` with `selector` and the key `key_hex`.
fn dkimpy_sign(message: &[u8], domain: &str, selector: &str, key_hex: &str) -> Vec<u8> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dns-hickory/tests/sign_dkim.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .args([domain, selector, key_hex])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), message).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "dkimpy signs (./test installs it): {}", String::from_utf8_lossy(&output.stderr));
    output.stdout
}

fn verify(hit: &Hit, secret: &str) {
    Webhook::new(secret).expect("a whsec_ secret").verify(&hit.body, &hit.headers).expect("the signature verifies");
}

const PLAIN: &str = "From: Ann Example <ann@sender.example>\r\nTo: support@in.shop.example\r\n\
Subject: Where is my order?\r\nDate: Sat, 05 Dec 2026 10:00:00 +0000\r\nMessage-ID: <plain-1@sender.example>\r\n\
\r\nHi,\r\n\r\nmy order has not arrived.\r\n\r\nAnn\r\n";

const NON_ASCII: &str = "From: =?UTF-8?Q?Zo=C3=AB_M=C3=BCller?= <zoe@sender.example>\r\nTo: support@in.shop.example\r\n\
Subject: =?UTF-8?B?w4dhIG1hcmNoZSDinJM=?=\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\
Content-Transfer-Encoding: 8bit\r\n\r\nGrüße aus Köln — 東京\r\n";

const HTML_INLINE: &str = "From: ann@sender.example\r\nTo: sales@in.shop.example\r\nSubject: Logo\r\n\
MIME-Version: 1.0\r\nContent-Type: multipart/related; boundary=\"rel\"\r\n\r\n--rel\r\n\
Content-Type: text/html; charset=utf-8\r\n\r\n<p>Our <b>logo</b>: <img src=\"cid:logo@x\"></p>\r\n--rel\r\n\
Content-Type: image/png\r\nContent-ID: <logo@x>\r\nContent-Disposition: inline\r\n\
Content-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=\r\n--rel--\r\n";

pub(crate) const ATTACHED: &str = "From: ann@sender.example\r\nTo: support@in.shop.example\r\nCc: Bob <bob@sender.example>\r\n\
Subject: Invoice\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"mix\"\r\n\r\n--mix\r\n\
Content-Type: text/plain\r\n\r\nSee attached.\r\n--mix\r\nContent-Type: application/pdf; name=\"invoice.pdf\"\r\n\
Content-Disposition: attachment; filename=\"invoice.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n\
JVBERi0xLjQKJcOkw7zDtsOf\r\n--mix--\r\n";

#[test]
fn inbound_mail_reaches_the_application_parsed_authenticated_and_signed() {
    block_on(async {
        let s = setup(&[]).await;
        let receiver = Receiver::start().await;
        let (status, body) = s
            .server
            .post(
                "/v1/webhooks",
                s.server.key(),
                json!({"url": receiver.url("/in"), "eventTypes": ["InboundReceived"]}),
            )
            .await;
        assert_ok(status, &body, 201, "an endpoint for InboundReceived");
        let secret = body["data"]["secret"].as_str().unwrap().to_owned();
        let (status, body) = s
            .server
            .post(
                "/v1/webhooks",
                s.server.key(),
                json!({"url": receiver.url("/pm"), "eventTypes": ["InboundReceived"], "format": "postmark"}),
            )
            .await;
        assert_ok(status, &body, 201, "a Postmark-format endpoint");

        // Several shapes, each taken with 250 after its data.
        for (rcpt, data) in [
            ("support@in.shop.example", PLAIN),
            ("support@in.shop.example", NON_ASCII),
            ("sales@in.shop.example", HTML_INLINE),
            ("support@in.shop.example", ATTACHED),
        ] {
            let t = smtp(s.listener, "ann@sender.example", &[rcpt], data.as_bytes()).await;
            assert_eq!(t.end_of_data, Some(250), "{rcpt}: {t:?}");
        }
        let hits = receiver.wait_for("/in", 4, WAIT).await;
        for hit in &hits {
            verify(hit, &secret);
            assert_eq!(hit.json()["type"], "InboundReceived");
        }
        let listed = s.list("").await;
        assert_eq!(listed.len(), 4, "newest first: {listed:?}");
        let [attached, html, non_ascii, plain] = [&listed[0], &listed[1], &listed[2], &listed[3]];

        assert_eq!(plain["subject"], "Where is my order?");
        assert_eq!(plain["from"], json!({"name": "Ann Example", "address": "ann@sender.example"}));
        assert_eq!(plain["recipients"], json!(["support@in.shop.example"]));
        assert_eq!(plain["messageId"], "plain-1@sender.example");
        assert!(plain["text"].as_str().unwrap().contains("my order has not arrived."), "{plain}");
        let id = plain["id"].as_str().unwrap();
        let (headers, raw) = s.bytes(&format!("/v1/inbound/messages/{id}/raw")).await;
        assert_eq!(raw, PLAIN.as_bytes(), "the raw message, byte for byte");
        assert_eq!(headers["content-type"], "message/rfc822");
        let hook = hits.iter().map(Hit::json).find(|b| b["data"]["inboundMessageId"] == id).expect("its event");
        assert_eq!(hook["data"]["subject"], "Where is my order?", "{hook}");
        let raw_url = hook["data"]["rawUrl"].as_str().unwrap();
        assert!(raw_url.ends_with(&format!("/v1/inbound/messages/{id}/raw")), "{hook}");
        assert!(hook["data"].get("raw").is_none(), "no raw message in the event: {hook}");

        assert_eq!(non_ascii["subject"], "Ça marche ✓", "{non_ascii}");
        assert_eq!(non_ascii["from"]["name"], "Zoë Müller");
        assert_eq!(non_ascii["text"].as_str().unwrap().trim_end(), "Grüße aus Köln — 東京");

        assert!(html["html"].as_str().unwrap().contains("<b>logo</b>"), "{html}");
        let logo = &html["attachments"][0];
        assert_eq!(
            (&logo["contentId"], &logo["inline"], &logo["contentType"]),
            (&json!("logo@x"), &json!(true), &json!("image/png"))
        );

        let pdf = &attached["attachments"][0];
        assert_eq!((&pdf["filename"], &pdf["contentType"]), (&json!("invoice.pdf"), &json!("application/pdf")));
        assert_eq!(attached["cc"], json!([{"name": "Bob", "address": "bob@sender.example"}]));
        let (headers, bytes) = s.bytes(pdf["url"].as_str().unwrap()).await;
        assert_eq!(bytes, b"%PDF-1.4\n%\xc3\xa4\xc3\xbc\xc3\xb6\xc3\x9f");
        assert_eq!(headers["content-type"], "application/pdf");
        assert!(headers["content-disposition"].to_str().unwrap().starts_with("attachment"), "{headers:?}");

        // Filters.
        let to_sales = s.list("?to=SALES@in.shop.example").await;
        assert_eq!(to_sales.iter().map(|m| &m["id"]).collect::<Vec<_>>(), vec![&html["id"]]);
        assert_eq!(s.list("?from=zoe@sender.example").await.len(), 1);

        // Postmark's inbound shape.
        let pm = receiver.wait_for("/pm", 4, WAIT).await;
        let pm_plain = pm.iter().map(Hit::json).find(|b| b["Subject"] == "Where is my order?").expect("Postmark body");
        assert_eq!(pm_plain["FromFull"]["Email"], "ann@sender.example", "{pm_plain}");
        assert_eq!(pm_plain["OriginalRecipient"], "support@in.shop.example", "{pm_plain}");
        assert!(pm_plain["TextBody"].as_str().unwrap().contains("not arrived"), "{pm_plain}");
    });
}

#[test]
fn spf_dkim_and_dmarc_are_judged_for_a_signed_message_and_an_altered_one() {
    block_on(async {
        let s = setup(&[]).await;
        s.dns.set_txt("sender.example", &["v=spf1 ip4:127.0.0.1 -all"]).await;
        s.dns.set_txt("_dmarc.sender.example", &["v=DMARC1; p=reject"]).await;
        let key = dkim_key(&s.dns, "sender.example", "sel").await;
        let signed = dkimpy_sign(PLAIN.as_bytes(), "sender.example", "sel", &key);
        let t = smtp(s.listener, "ann@sender.example", &["support@in.shop.example"], &signed).await;
        assert_eq!(t.end_of_data, Some(250), "{t:?}");
        let altered = String::from_utf8(signed.clone()).unwrap().replace("has not arrived", "has arrived");
        // From another envelope domain, so that SPF cannot align either.
        let t = smtp(s.listener, "ann@elsewhere.example", &["support@in.shop.example"], altered.as_bytes()).await;
        assert_eq!(t.end_of_data, Some(250), "{t:?}");

        let listed = s.list("").await;
        let (tampered, good) = (&listed[0], &listed[1]);
        assert_eq!(good["spf"]["result"], "pass", "{good}");
        assert_eq!(
            good["dkim"],
            json!({"result": "pass", "domain": "sender.example", "selector": "sel", "policy": null}),
            "{good}"
        );
        assert_eq!(good["dmarc"]["result"], "pass", "{good}");
        assert_eq!(good["dmarc"]["policy"], "reject", "{good}");
        assert_eq!(tampered["dkim"]["result"], "fail", "{tampered}");
        assert_eq!(tampered["dmarc"]["result"], "fail", "{tampered}");
    });
}

#[test]
fn the_listener_is_no_relay_and_routes_reject_store_and_pick_the_endpoint() {
    block_on(async {
        let s = setup(&[]).await;
        // Other domains, this server's own domains not receiving, a mailbox that is no address.
        let other = smtp(s.listener, "x@sender.example", &["victim@gmail.com"], b"").await;
        assert_eq!(other.codes[3], 550, "{other:?}");
        let (status, body) = s.server.post("/v1/domains", s.server.key(), json!({"domain": "sendonly.example"})).await;
        assert_ok(status, &body, 201, "a sending-only domain");
        let sending = smtp(s.listener, "x@sender.example", &["a@sendonly.example"], b"").await;
        assert_eq!(sending.codes[3], 550, "{sending:?}");

        let receiver = Receiver::start().await;
        let (status, hook) = s
            .server
            .post(
                "/v1/webhooks",
                s.server.key(),
                json!({"url": receiver.url("/routed"), "eventTypes": ["InboundReceived"]}),
            )
            .await;
        assert_ok(status, &hook, 201, "endpoint");
        let hook_id = hook["data"]["id"].as_str().unwrap();
        let (status, body) = s
            .server
            .post(
                "/v1/webhooks",
                s.server.key(),
                json!({"url": receiver.url("/other"), "eventTypes": ["InboundReceived"]}),
            )
            .await;
        assert_ok(status, &body, 201, "another endpoint");
        for (matcher, action) in [("*@in.shop.example", "store"), ("noreply@in.shop.example", "reject")] {
            let (status, body) =
                s.server.post("/v1/inbound/routes", s.server.key(), json!({"match": matcher, "action": action})).await;
            assert_ok(status, &body, 201, matcher);
        }
        let (status, body) = s
            .server
            .post(
                "/v1/inbound/routes",
                s.server.key(),
                json!({"match": "support@in.shop.example", "action": "webhook", "webhookId": hook_id}),
            )
            .await;
        assert_ok(status, &body, 201, "a webhook route");
        let (status, body) = s
            .server
            .post("/v1/inbound/routes", s.server.key(), json!({"match": "*@in.shop.example", "action": "store"}))
            .await;
        assert_eq!(status, 409, "one route per match: {body}");
        let (status, body) = s
            .server
            .post("/v1/inbound/routes", s.server.key(), json!({"match": "*@nobody.example", "action": "store"}))
            .await;
        assert_eq!((status, &body["error"]["details"][0]["field"]), (422, &json!("match")), "{body}");

        let rejected = smtp(s.listener, "x@sender.example", &["noreply@in.shop.example"], b"").await;
        assert_eq!(rejected.codes[3], 550, "{rejected:?}");
        let stored = smtp(s.listener, "x@sender.example", &["orders@in.shop.example"], PLAIN.as_bytes()).await;
        assert_eq!(stored.end_of_data, Some(250), "{stored:?}");
        let routed = smtp(s.listener, "x@sender.example", &["support@in.shop.example"], NON_ASCII.as_bytes()).await;
        assert_eq!(routed.end_of_data, Some(250), "{routed:?}");
        let hits = receiver.wait_for("/routed", 1, WAIT).await;
        assert_eq!(hits[0].json()["data"]["subject"], "Ça marche ✓");
        let listed = s.list("").await;
        assert_eq!(listed.len(), 2, "the rejected message was never taken: {listed:?}");
        // The stored-only message went nowhere, the routed one only to its endpoint.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(receiver.hits("/other").is_empty(), "a route sends to its endpoint alone");
        assert_eq!(receiver.hits("/routed").len(), 1, "a store route sends nothing");
    });
}

#[test]
fn a_reply_names_the_message_it_answers() {
    block_on(async {
        let s = setup(&[]).await;
        let body = json!({"from": "orders@in.shop.example", "to": "ann@sender.example", "subject": "Shipped", "text": "On its way."});
        let sent = send_ok(&s.server, s.server.key(), body).await;
        let message = crate::common::mail::wait_for_status(&s.server, s.server.key(), &sent, "Delivered", WAIT).await;
        let provider = message["providerMessageId"].as_str().unwrap().trim_matches(['<', '>']).to_owned();
        let reply = format!(
            "From: ann@sender.example\r\nTo: orders@in.shop.example\r\nSubject: Re: Shipped\r\n\
             In-Reply-To: <{provider}>\r\nReferences: <unrelated@x.example> <{provider}>\r\n\r\nThanks!\r\n\r\n\
             On Sat, Dec 5, 2026 at 10:00 AM <orders@in.shop.example> wrote:\r\n> On its way.\r\n"
        );
        let t = smtp(s.listener, "ann@sender.example", &["orders@in.shop.example"], reply.as_bytes()).await;
        assert_eq!(t.end_of_data, Some(250), "{t:?}");
        let got = &s.list("").await[0];
        assert_eq!(got["inReplyToMessageId"], sent.as_str(), "{got}");
        assert_eq!(got["strippedTextReply"], "Thanks!", "{got}");
    });
}

#[test]
fn a_kill_right_after_250_loses_nothing() {
    block_on(async {
        let s = setup(&[]).await;
        let t = smtp(s.listener, "ann@sender.example", &["support@in.shop.example"], ATTACHED.as_bytes()).await;
        assert_eq!(t.end_of_data, Some(250), "{t:?}");
        let key = s.server.key().to_owned();
        let env: Vec<(String, String)> = vec![
            ("TIDINGS_INBOUND_SMTP_LISTEN".into(), "127.0.0.1:0".into()),
            ("TIDINGS_INBOUND_MX_HOST".into(), MX_HOST.into()),
            ("TIDINGS_DNS_SERVER".into(), s.dns.addr().to_string()),
        ];
        let data_dir = s.server.kill();
        let server = TestServer::start_with(Options {
            data_dir: Some(data_dir),
            bootstrap_key: Some(key.clone()),
            env,
            ..Options::default()
        })
        .await;
        let (status, body) = server.get("/v1/inbound/messages", &key).await;
        assert_ok(status, &body, 200, "list after the crash");
        let listed = body["data"].as_array().unwrap();
        assert_eq!(listed.len(), 1, "the message taken with 250 survived kill -9: {body}");
        assert_eq!(listed[0]["subject"], "Invoice");
    });
}

#[test]
fn limits_answer_with_their_codes() {
    block_on(async {
        let s = setup(&[("TIDINGS_INBOUND_MAX_MESSAGE_BYTES", "16KiB"), ("TIDINGS_INBOUND_QUOTA_MESSAGES", "2")]).await;
        let big = format!("{PLAIN}{}\r\n", "x".repeat(20 * 1024));
        let t = smtp(s.listener, "a@sender.example", &["support@in.shop.example"], big.as_bytes()).await;
        assert_eq!(t.end_of_data, Some(552), "over TIDINGS_INBOUND_MAX_MESSAGE_BYTES: {t:?}");
        for n in 0..2 {
            let t = smtp(s.listener, "a@sender.example", &["support@in.shop.example"], PLAIN.as_bytes()).await;
            assert_eq!(t.end_of_data, Some(250), "message {n}: {t:?}");
        }
        let full = smtp(s.listener, "a@sender.example", &["support@in.shop.example"], PLAIN.as_bytes()).await;
        assert_eq!(full.codes[3], 452, "the workspace's quota is full: {full:?}");
        assert_eq!(s.list("").await.len(), 2, "nothing past the quota");
        drop(s);

        let s = setup(&[("TIDINGS_INBOUND_MESSAGES_PER_MINUTE", "2")]).await;
        for n in 0..2 {
            let t = smtp(s.listener, "a@sender.example", &["support@in.shop.example"], PLAIN.as_bytes()).await;
            assert_eq!(t.end_of_data, Some(250), "message {n}: {t:?}");
        }
        let third = smtp(s.listener, "a@sender.example", &["support@in.shop.example"], PLAIN.as_bytes()).await;
        assert_eq!(third.codes[2], 450, "a client's third message in its minute: {third:?}");
        assert_eq!(s.list("").await.len(), 2);
    });
}
