//! The second round of hardening (issue #28), each attack run against the real binary:
//! - attachment names as RFC 2047 encoded-words (`=?utf-8?q?invoice=2Eexe?=`), over the API
//!   and, as encoded-words and RFC 2231 `filename*=` forms, over SMTP submission;
//! - a full key restricted to a sending domain creating unrestricted keys and revoking others;
//! - an address in a display name (`From: y@other.test <x@acme.test>`), over the API, in a
//!   sender's display name and over SMTP;
//! - recipient addresses in `info` access-log lines;
//! - one send key probing whether another used an Idempotency-Key (409 against 201);
//! - the dashboard's session cookie without the `__Host-` prefix;
//! - the message preview with images on still holding `<link rel=prefetch>` and its kin.

use lettre::address::Envelope;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use reqwest::Method;
use serde_json::json;
use tidings_e2e::{Options, TestServer, fresh_key};

use crate::common::{assert_error, assert_invalid, assert_ok, create_key, ids, start_with_dns, verified_domain};

const DOMAIN: &str = "round-two.example";

/// A server holding deliveries, with SMTP submission and [`DOMAIN`] verified; its id.
async fn server() -> (TestServer, tidings_dns::testing::TestDnsServer, String) {
    let options = Options {
        bootstrap_key: Some(fresh_key()),
        env: vec![("TIDINGS_DELIVERY".into(), "hold".into())],
        submission: true,
        ..Options::default()
    };
    let (server, dns) = start_with_dns(options).await;
    let id = verified_domain(&server, &dns, server.key(), DOMAIN).await;
    (server, dns, id)
}

/// How many messages the workspace holds.
async fn stored(server: &TestServer) -> usize {
    let (status, body) = server.get("/v1/messages?limit=200", server.key()).await;
    assert_ok(status, &body, 200, "list messages");
    ids(&body).len()
}

/// Submits `raw` to `to` over STARTTLS with `key`; the SMTP code and text of a refusal.
async fn submit(server: &TestServer, key: &str, to: &str, raw: &str) -> Result<(), (String, String)> {
    let pem = std::fs::read(server.cert_path()).expect("the server's certificate");
    let tls = TlsParameters::builder("localhost".to_owned())
        .add_root_certificate(Certificate::from_pem(&pem).expect("a PEM certificate"))
        .build_rustls()
        .expect("TLS parameters");
    let addr = server.submission_addr();
    let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(addr.ip().to_string())
        .port(addr.port())
        .tls(Tls::Required(tls))
        .credentials(Credentials::new("tidings".to_owned(), key.to_owned()))
        .authentication(vec![Mechanism::Plain])
        .build();
    let envelope = Envelope::new(None, vec![to.parse().unwrap()]).unwrap();
    match transport.send_raw(&envelope, raw.as_bytes()).await {
        Ok(_) => Ok(()),
        Err(e) => {
            Err((e.status().map(|c| c.to_string()).unwrap_or_else(|| panic!("not a refusal: {e:?}")), e.to_string()))
        }
    }
}

/// A message from `from` with one attachment whose part headers are `part_headers`.
fn mime(from: &str, part_headers: &str) -> String {
    format!(
        "From: {from}\r\nTo: ann@example.net\r\nSubject: Your invoice\r\nMessage-ID: <{}@{DOMAIN}>\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
         --b\r\nContent-Type: text/plain\r\n\r\nAttached.\r\n\
         --b\r\n{part_headers}\r\nContent-Transfer-Encoding: base64\r\n\r\nTVqQAAMAAAAEAAAA\r\n--b--\r\n",
        fresh_key()
    )
}

#[tokio::test]
async fn encoded_word_attachment_names_are_refused_over_the_api_and_smtp_and_store_nothing() {
    let (server, _dns, _) = server().await;
    let api_names = [
        "=?utf-8?q?invoice=2Eexe?=",
        "=?UTF-8?B?aW52b2ljZS5leGU=?=",
        "invoice=?utf-8?q?=2Eexe?=",
        "=?iso-8859-1?Q?Rechnung=2Epdf=2Escr?=",
        "=?utf-8?q?report=2Epdf?=",
    ];
    for name in api_names {
        let body = json!({
            "to": "ann@example.net", "from": format!("billing@{DOMAIN}"), "subject": "Your invoice", "text": "Attached.",
            "attachments": [{"filename": name, "contentType": "application/octet-stream", "content": "TVqQAAMAAAAEAAAA"}],
        });
        let (status, reply) = server.post("/v1/messages", server.key(), body).await;
        assert_invalid(status, &reply, &["attachments[0].filename"], name);
        assert!(reply["error"]["details"][0]["message"].as_str().unwrap().contains("RFC 2047"), "{reply}");
    }
    // Over SMTP the MIME parser decodes the name first (RFC 2047 and RFC 2231), so the name
    // judged is the one a mail program shows; a name still encoded after that is refused too.
    let smtp_parts = [
        "Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"=?utf-8?q?invoice=2Eexe?=\"",
        "Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename*=utf-8''invoice%2Eexe",
        "Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename*0*=utf-8''invoice;\r\n filename*1*=%2Eexe",
        "Content-Type: application/octet-stream; name=\"=?UTF-8?B?aW52b2ljZS5leGU=?=\"",
        "Content-Type: application/octet-stream\r\nContent-Disposition: attachment; \
         filename=\"=?utf-8?q?=3D=3Futf-8=3Fq=3Finvoice=3D2Eexe=3F=3D?=\"",
        "Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"=?x-unknown?q?invoice=2Eexe?=\"",
    ];
    for part in smtp_parts {
        let (code, text) = submit(&server, server.key(), "ann@example.net", &mime(&format!("billing@{DOMAIN}"), part))
            .await
            .expect_err(part);
        assert_eq!(code, "550", "{part}: {text}");
        assert!(text.contains("5.6.0") && text.contains("filename"), "{part}: {text}");
    }
    assert_eq!(stored(&server).await, 0, "nothing stored");

    // The same name in plain text is fine when it is not an executable.
    let plain = mime(
        &format!("billing@{DOMAIN}"),
        "Content-Type: application/pdf\r\nContent-Disposition: attachment; filename*=utf-8''Rechnung%20M%C3%A4rz.pdf",
    );
    submit(&server, server.key(), "ann@example.net", &plain).await.expect("a PDF with an RFC 2231 name");
    assert_eq!(stored(&server).await, 1);
    println!(
        "encoded-word names: {} over the API (before: 201), {} over SMTP, all refused, 0 stored",
        api_names.len(),
        smtp_parts.len()
    );
}

#[tokio::test]
async fn a_domain_restricted_full_key_cannot_create_wider_keys_or_revoke_others() {
    let (server, dns, mine) = server().await;
    let admin = server.key().to_owned();
    let other = verified_domain(&server, &dns, &admin, "other.example").await;
    let (restricted_id, restricted) =
        create_key(&server, &admin, json!({"name": "ops for round-two", "sendingDomainId": mine})).await;
    let (other_id, _) = create_key(&server, &admin, json!({"scope": "send", "sendingDomainId": other})).await;
    let (status, listed) = server.get("/v1/keys", &admin).await;
    assert_ok(status, &listed, 200, "list keys");
    let before = ids(&listed);
    let admin_id = listed["data"].as_array().unwrap().iter().find(|k| k["name"] == "default").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let widening = [
        json!({}),
        json!({"scope": "full"}),
        json!({"scope": "send"}),
        json!({"scope": "full", "sendingDomainId": other}),
        json!({"scope": "send", "sendingDomainId": other}),
    ];
    for body in &widening {
        let (status, reply) = server.post("/v1/keys", &restricted, body.clone()).await;
        assert_error(status, &reply, 403, "insufficient_scope", &format!("create {body}"));
    }
    for target in [&admin_id, &other_id] {
        let (status, reply) = server.delete(&format!("/v1/keys/{target}"), &restricted).await;
        assert_error(status, &reply, 403, "insufficient_scope", &format!("revoke {target}"));
    }
    let (status, listed) = server.get("/v1/keys", &admin).await;
    assert_ok(status, &listed, 200, "the workspace key still works");
    assert_eq!(ids(&listed), before, "no key was made or revoked");

    // Within its own domain it manages keys as before, itself included.
    let (same_id, _) = create_key(&server, &restricted, json!({"scope": "send", "sendingDomainId": mine})).await;
    let (status, reply) = server.delete(&format!("/v1/keys/{same_id}"), &restricted).await;
    assert_ok(status, &reply, 200, "revoke a key of its own domain");
    let (status, reply) = server.delete(&format!("/v1/keys/{restricted_id}"), &restricted).await;
    assert_ok(status, &reply, 200, "revoke itself");
    println!(
        "domain-restricted full key: {} widening creations and 2 revocations refused 403 (before: 201 and 200), keys unchanged ({})",
        widening.len(),
        before.len()
    );
}

#[tokio::test]
async fn an_address_in_a_display_name_is_422_naming_its_field_and_stores_nothing() {
    let (server, _dns, domain_id) = server().await;
    let key = server.key().to_owned();
    let from_cases = [
        format!("y@other.test <billing@{DOMAIN}>"),
        format!("\"y@other.test\" <billing@{DOMAIN}>"),
        format!("\"Security team security@bank.test\" <billing@{DOMAIN}>"),
        format!("\"y\u{FF20}other.test\" <billing@{DOMAIN}>"),
    ];
    for from in &from_cases {
        let body = json!({"to": "ann@example.net", "from": from, "subject": "Hello", "text": "t"});
        let (status, reply) = server.post("/v1/messages", &key, body).await;
        assert_invalid(status, &reply, &["from"], from);
    }
    let (status, reply) = server
        .post(
            &format!("/v1/domains/{domain_id}/senders"),
            &key,
            json!({"username": "billing", "displayName": "y@other.test"}),
        )
        .await;
    assert_invalid(status, &reply, &["displayName"], "a sender's display name");
    let raw = format!(
        "From: \"y@other.test\" <billing@{DOMAIN}>\r\nTo: ann@example.net\r\nSubject: Hello\r\nMessage-ID: <{}@{DOMAIN}>\r\n\r\nt\r\n",
        fresh_key()
    );
    let (code, text) = submit(&server, &key, "ann@example.net", &raw).await.expect_err("an SMTP From");
    assert!(code == "550" && text.contains("from"), "{code} {text}");
    assert_eq!(stored(&server).await, 0, "nothing stored");

    // A mailbox named by its own address misleads no one, as many mail libraries write it.
    let own = json!({"to": "ann@example.net", "from": format!("\"billing@{DOMAIN}\" <billing@{DOMAIN}>"), "subject": "Hello", "text": "t"});
    let (status, reply) = server.post("/v1/messages", &key, own).await;
    assert_ok(status, &reply, 201, "its own address as the name");
    println!(
        "display names holding another address: {} over the API, 1 sender, 1 over SMTP, all refused (before: 201)",
        from_cases.len()
    );
}

#[tokio::test]
async fn recipient_addresses_stay_out_of_info_log_lines() {
    let (server, _dns, _) = server().await;
    let key = server.key().to_owned();
    let address = "ann.private@recipient-secret.example";
    let (status, reply) = server
        .post(
            "/v1/messages",
            &key,
            json!({"to": address, "from": format!("billing@{DOMAIN}"), "subject": "Hello", "text": "t"}),
        )
        .await;
    assert_ok(status, &reply, 201, "send");
    for path in [
        format!("/v1/messages?to={address}"),
        format!("/v1/messages?to={}", address.replace('@', "%40")),
        format!("/v1/suppressions/{address}"),
        format!("/v1/suppressions/{}", address.replace('@', "%40")),
    ] {
        let response = server.request(Method::GET, &path).bearer_auth(&key).send().await.unwrap();
        assert!(response.status().as_u16() == 200 || response.status().as_u16() == 404, "{path}");
    }
    let (status, reply) = server.post("/v1/suppressions", &key, json!({"email": address})).await;
    assert_ok(status, &reply, 201, "suppress");
    let (status, reply) = server.delete(&format!("/v1/suppressions/{address}"), &key).await;
    assert_ok(status, &reply, 200, "unsuppress");

    let logged = server.wait_for_log(&["tidings::request", "DELETE", "/v1/suppressions/{address}"]);
    assert!(logged.is_some(), "the access log names the path with the address replaced");
    let lines: Vec<String> = server.stderr_lines().into_iter().chain(server.stdout_lines()).collect();
    let requests = lines.iter().filter(|l| l.contains("tidings::request")).count();
    let leaking: Vec<&String> = lines.iter().filter(|l| l.contains("recipient-secret")).collect();
    assert!(leaking.is_empty(), "log lines with the recipient's address: {leaking:#?}");
    println!("access log: {requests} request lines, {} lines in all at info, 0 holding the address", lines.len());
}

#[tokio::test]
async fn one_send_key_cannot_tell_whether_another_used_an_idempotency_key() {
    let (server, _dns, _) = server().await;
    let admin = server.key().to_owned();
    let (_, victim) = create_key(&server, &admin, json!({"name": "billing app", "scope": "send"})).await;
    let (_, prober) = create_key(&server, &admin, json!({"name": "other app", "scope": "send"})).await;
    let mail = |text: &str| json!({"to": "ann@example.net", "from": format!("billing@{DOMAIN}"), "subject": "Receipt", "text": text});
    let (status, replayed, original) =
        server.post_idempotent("/v1/messages", &victim, &mail("secret order"), "order-7731").await;
    assert_ok(status, &original, 201, "the victim sends");
    assert_eq!(replayed, None);
    let (status, _, second) = server.post_idempotent("/v1/messages", &victim, &mail("other order"), "order-8842").await;
    assert_ok(status, &second, 201, "the victim sends again");
    let victims = [original["data"]["id"].clone(), second["data"]["id"].clone()];

    // The prober tries the victim's keys (with the victim's body and another) and fresh ones:
    // every answer is a new message of its own, with the same status and headers.
    let mut answers = Vec::new();
    for (idem, body) in [
        ("order-7731", "secret order"),
        ("order-8842", "guess"),
        ("order-0000", "secret order"),
        ("order-0001", "guess"),
    ] {
        let (status, replayed, reply) = server.post_idempotent("/v1/messages", &prober, &mail(body), idem).await;
        assert_ok(status, &reply, 201, &format!("{idem} {body}"));
        assert_eq!(replayed, None, "{idem}: not a replay");
        assert!(!victims.contains(&reply["data"]["id"]), "{idem}: never the victim's message");
        answers.push((status, replayed));
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "the same answer for a used and a fresh key: {answers:?}");
    // Batches alike: the victim's batch key and a fresh one answer the prober the same.
    let batch = |key: &str, idem: &str| {
        let request = server
            .request(Method::POST, "/v1/messages/batch")
            .bearer_auth(key)
            .header("idempotency-key", idem)
            .json(&json!([mail("b")]));
        async move { request.send().await.unwrap() }
    };
    assert_eq!(batch(&victim, "batch-5500").await.status().as_u16(), 201, "the victim's batch");
    for idem in ["batch-5500", "batch-fresh"] {
        let response = batch(&prober, idem).await;
        assert_eq!(response.status().as_u16(), 201, "{idem}");
        assert!(response.headers().get("idempotent-replayed").is_none(), "{idem}");
    }
    // The victim's own retry is still a replay.
    let (status, replayed, again) =
        server.post_idempotent("/v1/messages", &victim, &mail("secret order"), "order-7731").await;
    assert_ok(status, &again, 201, "the victim retries");
    assert_eq!((replayed.as_deref(), &again["data"]["id"]), (Some("true"), &original["data"]["id"]));
    println!("idempotency probe: used key and fresh key both answer 201 without replay (before: 409 against 201)");
}

/// Signs in to the dashboard with `key`; the whole `Set-Cookie` value and the token.
async fn sign_in(server: &TestServer, key: &str) -> (String, String) {
    let signed = server
        .request(Method::POST, "/sign-in")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "same-origin")
        .body(format!("key={key}"))
        .send()
        .await
        .unwrap();
    assert_eq!(signed.status(), 303, "signed in");
    let cookie = signed.headers().get("set-cookie").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let token =
        cookie.split(';').next().and_then(|pair| pair.split_once('=')).map(|(_, v)| v.to_owned()).unwrap_or_default();
    (cookie, token)
}

#[tokio::test]
async fn the_session_cookie_is_host_prefixed_and_an_unprefixed_one_is_not_honoured() {
    let server = TestServer::start().await;
    let (cookie, token) = sign_in(&server, server.key()).await;
    assert!(cookie.starts_with("__Host-tidings_session="), "{cookie}");
    let attributes: Vec<&str> = cookie.split(';').skip(1).map(str::trim).collect();
    assert!(attributes.contains(&"Secure") && attributes.contains(&"Path=/"), "{cookie}");
    assert!(!attributes.iter().any(|a| a.to_ascii_lowercase().starts_with("domain")), "no Domain: {cookie}");

    let overview = |cookie: String| {
        let request = server.request(Method::GET, "/overview").header("cookie", cookie);
        async move { request.send().await.unwrap() }
    };
    assert_eq!(overview(format!("__Host-tidings_session={token}")).await.status(), 200);
    // What a sibling domain could plant (a cookie without the prefix) is not a session.
    let planted = overview(format!("tidings_session={token}")).await;
    assert_eq!(planted.status(), 303, "an unprefixed cookie is no session");
    assert_eq!(planted.headers()["location"], "/");
    println!("session cookie: {cookie}");
}

#[tokio::test]
async fn the_preview_with_images_keeps_images_and_drops_links_that_fetch_by_themselves() {
    let (server, _dns, _) = server().await;
    let key = server.key().to_owned();
    let html = r#"<html><head>
        <link rel="prefetch" href="https://tracker.example/prefetch">
        <link rel="dns-prefetch" href="//dns.tracker.example">
        <link rel="preconnect" href="https://pre.tracker.example">
        <link rel="preload" as="image" href="https://tracker.example/preload.png">
        <meta http-equiv="x-dns-prefetch-control" content="on"></head>
        <body><p id="hello">Hello</p>
        <noscript><link rel="prefetch" href="https://tracker.example/noscript"></noscript>
        <LINK REL=PREFETCH HREF="https://tracker.example/in-body">
        <img src="https://images.example/logo.png" alt="logo"></body></html>"#;
    let body =
        json!({"to": "ann@example.net", "from": format!("billing@{DOMAIN}"), "subject": "Preview", "html": html});
    let (status, reply) = server.post("/v1/messages", &key, body).await;
    assert_ok(status, &reply, 201, "send");
    let id = reply["data"]["id"].as_str().unwrap().to_owned();
    let (_, token) = sign_in(&server, &key).await;

    for query in ["?images=1", ""] {
        let response = server
            .request(Method::GET, &format!("/messages/{id}/html{query}"))
            .header("cookie", format!("__Host-tidings_session={token}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{query}");
        let policy = response.headers()["content-security-policy"].to_str().unwrap().to_owned();
        assert!(policy.starts_with("default-src 'none';") && policy.contains("sandbox"), "{policy}");
        assert_eq!(response.headers()["x-dns-prefetch-control"], "off");
        let shown = response.text().await.unwrap();
        assert!(!shown.to_ascii_lowercase().contains("<link"), "{query}: a link is left: {shown}");
        assert!(!shown.contains("tracker.example") && !shown.contains("http-equiv"), "{query}: {shown}");
        assert!(
            shown.contains(r#"<img src="https://images.example/logo.png" alt="logo">"#),
            "{query}: the image stays"
        );
    }
    println!(
        "preview: 7 elements that connect out by themselves in the mail, 0 in the document served (before: all 7)"
    );
}
