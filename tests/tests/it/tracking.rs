//! Open and click tracking against the real binary (docs/api.md#tracking): a tracked message is delivered to an SMTP sink, its HTML is parsed
//! back from what the sink received, and the pixel and a link are fetched over HTTPS from the
//! server as a mail client would. Opened and Clicked appear in the timeline; tampered tokens
//! are 404 and record nothing; links that must not be tracked are left alone.
//!
//! Every test runs on one runtime ([`block_on`]): the sink and the DNS server are tasks that a
//! test's own runtime would take down when that test ends.

use std::time::{Duration, Instant};

use crate::common::{assert_error, assert_ok, block_on, server_with_dns, verified_domain};
use mail_parser::MessageParser;
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::SmtpSink;

const WAIT: Duration = Duration::from_secs(15);

/// Polls the message's timeline until `done` holds for it.
async fn events_until(server: &TestServer, id: &str, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, body) = server.get(&format!("/v1/messages/{id}/events"), server.key()).await;
        let events = body["data"].as_array().cloned().unwrap_or_default();
        if done(&events) {
            return events;
        }
        assert!(Instant::now() < deadline, "{what}: the timeline is {events:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

/// Every `href`/`src` value in `html` that starts with `prefix`.
fn urls_with_prefix(html: &str, prefix: &str) -> Vec<String> {
    html.match_indices(prefix)
        .map(|(at, _)| html[at..].split(['"', '\'', ' ', '>']).next().unwrap().replace("&amp;", "&"))
        .collect()
}

/// The path and query of an absolute URL on the server.
fn path_of(url: &str, server: &TestServer) -> String {
    url.strip_prefix(&server.url("")).unwrap_or_else(|| panic!("{url} is not on the server")).to_owned()
}

/// A server relaying to a fresh SMTP sink, with `shop.example` verified; its key.
async fn relayed_server() -> (SmtpSink, TestServer, TestDnsServer, String) {
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let relay = format!("smtp://{}", sink.addr());
    let (server, dns) = server_with_dns(&[("TIDINGS_DELIVERY", "relay"), ("TIDINGS_SMTP_RELAY", &relay)]).await;
    let key = server.key().to_owned();
    verified_domain(&server, &dns, &key, "shop.example").await;
    (sink, server, dns, key)
}

/// `GET path` is a 404 in the envelope, and never a redirect.
async fn assert_refused(server: &TestServer, path: &str) {
    let response = server.request(reqwest::Method::GET, path).send().await.unwrap();
    let status = response.status().as_u16();
    assert!(response.headers().get("location").is_none(), "{path}: never a redirect");
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_error(status, &body, 404, "not_found", &format!("GET {path}"));
}

#[test]
fn opens_and_clicks_are_recorded_and_tampered_tokens_are_refused() {
    block_on(async {
        let (sink, server, _dns, key) = relayed_server().await;

        let html = concat!(
            "<html><body><p>Your order shipped.</p>",
            r#"<a href="https://shop.example/orders/42?a=1&amp;b=2">Track it</a> "#,
            r##"<a href="mailto:help@shop.example">Help</a> <a href="#top">Top</a> "##,
            r#"<a data-tidings-notrack href="https://shop.example/unsubscribe">Unsubscribe</a>"#,
            "</body></html>"
        );
        let text = "Your order shipped: https://shop.example/orders/42";
        let send = json!({
            "from": "orders@shop.example", "to": "reader@example.com", "subject": "Shipped",
            "html": html, "text": text, "tracking": {"opens": true, "clicks": true},
        });
        let (status, body) = server.post("/v1/messages", &key, send).await;
        assert_ok(status, &body, 201, "a tracked send");
        assert_eq!(body["data"]["tracking"], json!({"opens": true, "clicks": true}), "{body}");
        let id = body["data"]["id"].as_str().unwrap().to_owned();
        // An untracked one beside it, whose HTML must arrive exactly as sent.
        let plain = json!({"from": "orders@shop.example", "to": "plain@example.com", "subject": "Plain", "html": html});
        let (status, body) = server.post("/v1/messages", &key, plain).await;
        assert_ok(status, &body, 201, "an untracked send");

        let received = sink.wait_for(2, WAIT).await.expect("both messages reach the sink");
        let tracked = received.iter().find(|m| m.recipients == ["reader@example.com"]).expect("the tracked one");
        let parsed = MessageParser::default().parse(&tracked.data).expect("MIME");
        let got_html = parsed.body_html(0).expect("an HTML part").into_owned();
        assert_eq!(parsed.body_text(0).expect("a text part").trim_end(), text, "the text part is untouched");
        let untracked = received.iter().find(|m| m.recipients == ["plain@example.com"]).expect("the untracked one");
        let untracked_html =
            MessageParser::default().parse(&untracked.data).unwrap().body_html(0).unwrap().into_owned();
        assert!(!untracked_html.contains("/t/"), "nothing rewritten without tracking: {untracked_html}");

        let clicks = urls_with_prefix(&got_html, &server.url("/t/c/"));
        let pixels = urls_with_prefix(&got_html, &server.url("/t/o/"));
        assert_eq!(clicks.len(), 1, "one link is tracked: {got_html}");
        assert_eq!(pixels.len(), 1, "one pixel: {got_html}");
        assert!(got_html.contains(r#"href="mailto:help@shop.example""#), "mailto untouched: {got_html}");
        assert!(got_html.contains(r##"href="#top""##), "anchors untouched: {got_html}");
        assert!(got_html.contains(r#"href="https://shop.example/unsubscribe""#), "notrack untouched: {got_html}");
        assert!(!got_html.contains("shop.example/orders/42"), "the tracked URL is inside the token only");

        // The pixel: a GIF, and an Opened event with the user agent.
        let response = server
            .request(reqwest::Method::GET, &path_of(&pixels[0], &server))
            .header("user-agent", "MailReader/1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "image/gif");
        let gif = response.bytes().await.unwrap();
        assert!(gif.starts_with(b"GIF8") && gif.len() == 43, "a 1x1 GIF: {} bytes", gif.len());
        let events = events_until(&server, &id, "Opened", |e| count(e, "Opened") == 1).await;
        let opened = events.iter().find(|e| e["type"] == "Opened").unwrap();
        assert_eq!(opened["details"]["userAgent"], "MailReader/1.0", "{opened}");

        // The link: 302 to the original URL (entities decoded), and a Clicked event with it.
        let response = server
            .request(reqwest::Method::GET, &path_of(&clicks[0], &server))
            .header("user-agent", "MailReader/1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 302);
        assert_eq!(response.headers()["location"], "https://shop.example/orders/42?a=1&b=2");
        let events = events_until(&server, &id, "Clicked", |e| count(e, "Clicked") == 1).await;
        let clicked = events.iter().find(|e| e["type"] == "Clicked").unwrap();
        assert_eq!(clicked["details"]["url"], "https://shop.example/orders/42?a=1&b=2", "{clicked}");
        let (_, message) = server.get(&format!("/v1/messages/{id}"), &key).await;
        assert_eq!(message["data"]["status"], "Delivered", "opens and clicks do not change the status");

        // Tampered tokens: one character changed, cut short, extended, or the other kind's
        // path; each is a 404 in the envelope, and nothing more is recorded.
        let click_path = path_of(&clicks[0], &server);
        let pixel_path = path_of(&pixels[0], &server);
        let flip = |path: &str| {
            let mut chars: Vec<char> = path.chars().collect();
            let at = chars.len() - 10;
            chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
            chars.into_iter().collect::<String>()
        };
        let token = click_path.trim_start_matches("/t/c/");
        for path in [
            flip(&click_path),
            flip(&pixel_path),
            click_path[..click_path.len() - 4].to_owned(),
            format!("{click_path}AAAA"),
            format!("/t/o/{token}"),
            "/t/c/not-a-token".to_owned(),
        ] {
            assert_refused(&server, &path).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let events = events_until(&server, &id, "unchanged", |_| true).await;
        assert_eq!((count(&events, "Opened"), count(&events, "Clicked")), (1, 1), "tampered tokens record nothing");
    });
}

#[test]
fn tracking_tokens_cannot_be_forged_swapped_or_used_as_an_open_redirect() {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    const TARGET: &str = "https://shop.example/orders/7";
    block_on(async {
        let (sink, server, _dns, key) = relayed_server().await;
        let send = json!({
            "from": "orders@shop.example", "to": "reader@example.com", "subject": "Shipped",
            "html": format!(r#"<p><a href="{TARGET}">Track it</a></p>"#), "tracking": {"opens": true, "clicks": true},
        });
        let (status, body) = server.post("/v1/messages", &key, send).await;
        assert_ok(status, &body, 201, "a tracked send");
        let id = body["data"]["id"].as_str().unwrap().to_owned();
        let received = sink.wait_for(1, WAIT).await.expect("the message reaches the sink");
        let html = MessageParser::default().parse(&received[0].data).unwrap().body_html(0).unwrap().into_owned();
        let click = path_of(&urls_with_prefix(&html, &server.url("/t/c/"))[0], &server);
        let pixel = path_of(&urls_with_prefix(&html, &server.url("/t/o/"))[0], &server);
        let click_token = URL_SAFE_NO_PAD.decode(click.trim_start_matches("/t/c/")).expect("base64url");
        let pixel_token = URL_SAFE_NO_PAD.decode(pixel.trim_start_matches("/t/o/")).expect("base64url");

        // Every way of altering a token is a 404 in the envelope, never a redirect.
        let mut forged: Vec<String> = Vec::new();
        for (prefix, token) in [("/t/c/", &click_token), ("/t/o/", &pixel_token)] {
            // Each byte in turn: version, kind, workspace, message, URL, tag.
            for at in 0..token.len() {
                let mut bytes = token.clone();
                bytes[at] ^= 0x01;
                forged.push(format!("{prefix}{}", URL_SAFE_NO_PAD.encode(&bytes)));
            }
        }
        // The click's URL part swapped, at another length and at the same length, tag kept.
        let (payload, tag) = click_token.split_at(click_token.len() - 32);
        let url_part = &payload[34..];
        assert_eq!(url_part, TARGET.as_bytes(), "the token carries the URL after a 34-byte header");
        let same_length = format!("https://evil.example/{}", "x".repeat(TARGET.len() - 21));
        for evil in ["https://evil.example/", same_length.as_str()] {
            let swapped = [&payload[..34], evil.as_bytes(), tag].concat();
            forged.push(format!("/t/c/{}", URL_SAFE_NO_PAD.encode(swapped)));
        }
        // Each kind used as the other.
        forged.push(format!("/t/c/{}", URL_SAFE_NO_PAD.encode(&pixel_token)));
        forged.push(format!("/t/o/{}", URL_SAFE_NO_PAD.encode(&click_token)));
        // A target after the token.
        forged.push(format!("{click}/https://evil.example/"));
        forged.push(format!("{click}%2F%2Fevil.example"));
        for path in &forged {
            assert_refused(&server, path).await;
        }

        // No query parameter changes where the valid link goes.
        let queries = [
            "?url=https://evil.example/",
            "?redirect=https%3A%2F%2Fevil.example%2F",
            "?next=//evil.example&to=https://evil.example&u=https://evil.example",
            "?location=https://evil.example/&target=https://evil.example/&dest=https://evil.example/",
            "?url=https://evil.example/&url=https://evil.example/2",
        ];
        for query in queries {
            let response = server.request(reqwest::Method::GET, &format!("{click}{query}")).send().await.unwrap();
            assert_eq!(response.status(), 302, "{query}");
            assert_eq!(response.headers()["location"], TARGET, "{query} cannot move the redirect");
        }
        // The pixel once; then the timeline holds exactly the real open and clicks, and
        // nothing from the forged tokens (recorded before each answer, so all are in by now).
        assert_eq!(server.request(reqwest::Method::GET, &pixel).send().await.unwrap().status(), 200);
        let events = events_until(&server, &id, "the real open and clicks", |e| {
            count(e, "Opened") >= 1 && count(e, "Clicked") >= queries.len()
        })
        .await;
        assert_eq!((count(&events, "Opened"), count(&events, "Clicked")), (1, queries.len()), "{events:#?}");
        for event in events.iter().filter(|e| e["type"] == "Clicked") {
            assert_eq!(event["details"]["url"], TARGET, "{event}");
        }
        println!(
            "tracking: {} forged or altered tokens answered 404 with no event; {} redirect queries kept the target",
            forged.len(),
            queries.len()
        );
    });
}
