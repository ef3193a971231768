//! Hardening at the edges against the real binary: attachment names that
//! hide an executable extension and subjects or display names with control characters are
//! 422 naming the field and store nothing; behind a trusted proxy the failed-auth throttle
//! and the access log go by the `X-Forwarded-For` client, and an untrusted peer's header is
//! ignored; `/metrics` behind `TIDINGS_METRICS_TOKEN` or on `TIDINGS_METRICS_LISTEN`.

use std::net::{IpAddr, Ipv4Addr};

use crate::common::{assert_error, assert_invalid, assert_ok, block_on, server_with_dns, verified_domain};
use serde_json::{Value, json};
use tidings_e2e::{Options, TestServer, fresh_key, into_parts};

const DOMAIN: &str = "edges.example";

fn mail(extra: Value) -> Value {
    let mut body = json!({
        "to": "ann@example.net",
        "from": format!("billing@{DOMAIN}"),
        "subject": "Your invoice",
        "text": "Attached.",
    });
    for (k, v) in extra.as_object().expect("an object") {
        body[k] = v.clone();
    }
    body
}

#[test]
fn hidden_executables_and_control_characters_in_subjects_and_names_are_422_and_store_nothing() {
    block_on(async {
        let (server, dns) = server_with_dns(&[("TIDINGS_DELIVERY", "hold")]).await;
        verified_domain(&server, &dns, server.key(), DOMAIN).await;
        let file =
            |name: &str| json!({"attachments": [{"filename": name, "contentType": "application/pdf", "content": ""}]});
        let mut cases: Vec<(Value, &str)> = [
            "x.exe\u{200b}",
            "x.ex\u{ad}e",
            "x.exe::$DATA",
            "invoice\u{202e}fdp.exe",
            "x.exe\u{feff}",
            "x.exe\u{85}",
            "invoice.pdf.exe",
            "invoice.pdf.ScR . .",
        ]
        .into_iter()
        .map(|name| (file(name), "attachments[0].filename"))
        .collect();
        for bad in ["\0", "\x0b", "\u{85}", "\u{2028}", "\x1b[2J"] {
            cases.push((json!({"subject": format!("Your invoice{bad}Bcc: x@y.z")}), "subject"));
            cases.push((json!({"from": format!("Billing{bad}Team <billing@{DOMAIN}>")}), "from"));
        }
        for (extra, field) in &cases {
            let (status, reply) = server.post("/v1/messages", server.key(), mail(extra.clone())).await;
            assert_invalid(status, &reply, &[field], &format!("{extra}"));
        }
        let (status, reply) = server.get("/v1/messages", server.key()).await;
        assert_ok(status, &reply, 200, "list");
        assert_eq!(reply["data"].as_array().map(Vec::len), Some(0), "nothing stored: {reply}");

        // The same domain and key send when the fields are clean (a TAB in a subject is fine).
        let clean = mail(json!({"subject": "Order\t42", "attachments": [
            {"filename": "Rechnung März.pdf", "contentType": "application/pdf", "content": ""}
        ]}));
        let (status, reply) = server.post("/v1/messages", server.key(), clean).await;
        assert_ok(status, &reply, 201, "a clean send");
        assert_eq!(reply["data"]["subject"], "Order\t42");
        println!("hardening: {} hostile sends, all 422 naming their field, none stored", cases.len());
    });
}

/// `GET /v1/keys` from `client` with `X-Forwarded-For: forwarded` and `key`: the status.
async fn keys_from(server: &TestServer, client: &reqwest::Client, forwarded: &str, key: &str) -> (u16, Value) {
    let response = client
        .get(server.url("/v1/keys"))
        .header("x-forwarded-for", forwarded)
        .bearer_auth(key)
        .send()
        .await
        .expect("an HTTPS response");
    into_parts(response).await
}

#[test]
fn behind_a_trusted_proxy_forwarded_clients_are_throttled_apart_and_untrusted_headers_are_ignored() {
    block_on(async {
        // 127.0.0.1 plays the load balancer; 127.0.0.2 is a client that talks to the server
        // directly and sends the header itself.
        let options = Options {
            bootstrap_key: Some(fresh_key()),
            env: vec![("TIDINGS_TRUSTED_PROXIES".into(), "127.0.0.1/32".into())],
            ..Options::default()
        };
        let server = TestServer::start_with(options).await;
        let proxy = server.client_from(IpAddr::V4(Ipv4Addr::LOCALHOST));
        for _ in 0..20 {
            let (status, body) = keys_from(&server, &proxy, "6.6.6.6, 198.51.100.1", &fresh_key()).await;
            assert_error(status, &body, 401, "invalid_api_key", "a bad key from 198.51.100.1");
        }
        let (status, body) = keys_from(&server, &proxy, "198.51.100.1", server.key()).await;
        assert_error(status, &body, 429, "too_many_auth_failures", "198.51.100.1 after 20 failures");
        let (status, body) = keys_from(&server, &proxy, "198.51.100.2", server.key()).await;
        assert_ok(status, &body, 200, "198.51.100.2 behind the same proxy");
        let (status, body) = keys_from(&server, &proxy, "198.51.100.2", &fresh_key()).await;
        assert_error(status, &body, 401, "invalid_api_key", "198.51.100.2 has an allowance of its own");
        assert!(
            server.wait_for_log(&["tidings::request", "198.51.100.2"]).is_some(),
            "the access log names the forwarded client"
        );

        let direct = server.client_from(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
        for n in 0..20 {
            let (status, body) = keys_from(&server, &direct, &format!("203.0.113.{n}"), &fresh_key()).await;
            assert_error(status, &body, 401, "invalid_api_key", "a bad key from the untrusted 127.0.0.2");
        }
        let (status, body) = keys_from(&server, &direct, "203.0.113.99", server.key()).await;
        assert_error(status, &body, 429, "too_many_auth_failures", "the header did not give 127.0.0.2 new buckets");
        println!(
            "trusted proxy: 2 forwarded clients throttled apart; an untrusted peer's 21 forged addresses, one bucket"
        );
    });
}

#[test]
fn with_a_metrics_token_metrics_need_it() {
    block_on(async {
        let token = "scrape-token-0123456789abcdef";
        let options = Options {
            bootstrap_key: Some(fresh_key()),
            env: vec![("TIDINGS_METRICS_TOKEN".into(), token.into())],
            ..Options::default()
        };
        let server = TestServer::start_with(options).await;
        for bearer in [None, Some("wrong-token-0123456789abcdef"), Some(server.key())] {
            let mut request = server.request(reqwest::Method::GET, "/metrics");
            if let Some(bearer) = bearer {
                request = request.bearer_auth(bearer);
            }
            let response = request.send().await.expect("an HTTPS response");
            assert_eq!(response.headers()["www-authenticate"], "Bearer realm=\"metrics\"");
            let (status, body) = into_parts(response).await;
            assert_error(status, &body, 401, "invalid_metrics_token", &format!("/metrics with {bearer:?}"));
        }
        let response = server.request(reqwest::Method::GET, "/metrics").bearer_auth(token).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.text().await.unwrap().contains("tidings_http_requests_total"));
        assert!(server.stderr_lines().iter().all(|line| !line.contains(token)), "the token appears in no log line");
    });
}

#[test]
fn metrics_on_their_own_listener_answer_there_and_no_longer_on_the_api() {
    block_on(async {
        let options = Options {
            bootstrap_key: Some(fresh_key()),
            env: vec![("TIDINGS_METRICS_LISTEN".into(), "127.0.0.1:0".into())],
            ..Options::default()
        };
        let server = TestServer::start_with(options).await;
        let line = server.wait_for_log(&["metrics listening on http://"]).expect("the metrics listener's line");
        let addr = line.split("http://").nth(1).expect("an address").trim();
        let response = reqwest::get(format!("http://{addr}/metrics")).await.expect("a plain-HTTP response");
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/plain; version=0.0.4; charset=utf-8");
        assert!(response.text().await.unwrap().contains("tidings_queue_depth"));
        let (status, body) = into_parts(reqwest::get(format!("http://{addr}/v1/keys")).await.unwrap()).await;
        assert_error(status, &body, 404, "not_found", "the metrics listener serves nothing else");

        let (status, body) = into_parts(server.request(reqwest::Method::GET, "/metrics").send().await.unwrap()).await;
        assert_error(status, &body, 404, "not_found", "/metrics on the HTTPS listener");
        let (status, _) = server.get("/v1/keys", server.key()).await;
        assert_eq!(status, 200, "the API is served as before");
    });
}
