//! Open and click tracking against the real binary (issue #6 "Done means", contract §8): a
//! tracked message is delivered to an SMTP sink, its HTML is parsed back from what the sink
//! received, and the pixel and a link are fetched over HTTPS from the server as a mail client
//! would. Opened and Clicked appear in the timeline; tampered tokens are 404 and record
//! nothing; links that must not be tracked are left alone.
//!
//! Every test runs on one runtime ([`block_on`]): the sink and the DNS server are tasks that a
//! test's own runtime would take down when that test ends.

mod common;

use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{assert_error, assert_ok, server_with_dns, verified_domain};
use mail_parser::MessageParser;
use serde_json::{Value, json};
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::SmtpSink;
use tokio::runtime::Runtime;

const WAIT: Duration = Duration::from_secs(15);

fn block_on<F: Future>(future: F) -> F::Output {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a Tokio runtime")
        })
        .block_on(future)
}

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

#[test]
fn opens_and_clicks_are_recorded_and_tampered_tokens_are_refused() {
    block_on(async {
        let sink = SmtpSink::start().await.expect("the SMTP sink starts");
        let relay = format!("smtp://{}", sink.addr());
        let (server, dns) = server_with_dns(&[("TIDINGS_DELIVERY", "relay"), ("TIDINGS_SMTP_RELAY", &relay)]).await;
        let key = server.key().to_owned();
        verified_domain(&server, &dns, &key, "shop.example").await;

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
            let response = server.request(reqwest::Method::GET, &path).send().await.unwrap();
            let status = response.status().as_u16();
            assert!(response.headers().get("location").is_none(), "{path}: never a redirect");
            let body: Value = response.json().await.unwrap_or(Value::Null);
            assert_error(status, &body, 404, "not_found", &format!("GET {path}"));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let events = events_until(&server, &id, "unchanged", |_| true).await;
        assert_eq!((count(&events, "Opened"), count(&events, "Clicked")), (1, 1), "tampered tokens record nothing");
    });
}
