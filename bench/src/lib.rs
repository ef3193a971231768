//! Helpers shared by the benchmarks that drive the real `tidings-server` (`http-load`,
//! `delivery-load`): finding the release binary, verifying a sending domain through the
//! in-process DNS server, and creating send keys; and by the store benchmarks
//! (`tidings-bench`, `engine-compare`): the message body they store and latency percentiles;
//! [`procstat`], the CPU time and memory of the processes a run watches; and [`postfix`],
//! the private Postfix instance the Postfix comparisons run.

use std::path::PathBuf;

pub mod postfix;
pub mod procstat;

use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;

/// Errors end a run with a message; a benchmark has nothing to recover.
pub type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

/// `tidings-server` built with the same profile as the running executable (or
/// `TIDINGS_SERVER_BIN`).
pub fn release_server_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("TIDINGS_SERVER_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    let path = exe.parent().map(|d| d.join("tidings-server")).ok_or("no directory for this executable")?;
    if !path.exists() {
        return Err(format!("{} is missing: run `cargo build --release -p tidings-server`", path.display()).into());
    }
    Ok(path)
}

/// Adds the sending domain `name`, publishes the records the API asks for on `dns`, and
/// verifies it.
pub async fn verified_domain(server: &TestServer, dns: &TestDnsServer, name: &str) -> Result<()> {
    let (status, body) = server.post("/v1/domains", server.key(), json!({"domain": name})).await;
    if status != 201 {
        return Err(format!("adding the domain: {status} {body}").into());
    }
    let id = body["data"]["id"].as_str().ok_or("no domain id")?.to_owned();
    for record in body["data"]["dnsRecords"].as_array().ok_or("no dnsRecords")? {
        let (Some(name), Some(value)) = (record["name"].as_str(), record["value"].as_str()) else {
            return Err(format!("a record without name or value: {record}").into());
        };
        dns.set_txt(name, &[value]).await;
    }
    let (status, body) = server.post(&format!("/v1/domains/{id}/verify"), server.key(), json!({})).await;
    if status != 200 || body["data"]["overallStatus"] != "Verified" {
        return Err(format!("verifying the domain: {status} {body}").into());
    }
    Ok(())
}

/// Every message of the server key's workspace as `GET /v1/messages` lists it, page by page
/// (200 a page).
pub async fn all_messages(server: &TestServer) -> Result<Vec<Value>> {
    let mut messages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/messages?limit=200&cursor={c}"),
            None => "/v1/messages?limit=200".to_owned(),
        };
        let (status, body) = server.get(&path, server.key()).await;
        if status != 200 {
            return Err(format!("listing messages: {status} {body}").into());
        }
        messages.extend(body["data"].as_array().ok_or("no data")?.iter().cloned());
        match body["pagination"]["nextCursor"].as_str() {
            Some(next) if body["pagination"]["hasMore"] == true => cursor = Some(next.to_owned()),
            _ => return Ok(messages),
        }
    }
}

/// Creates `count` send keys at the highest rate limit (10,000/s each); their plaintexts.
pub async fn create_keys(server: &TestServer, count: usize) -> Result<Vec<String>> {
    let mut keys = Vec::with_capacity(count);
    for i in 0..count {
        let request = json!({"name": format!("load-{i}"), "scope": "send", "rateLimitPerSec": 10_000});
        let (status, body) = server.post("/v1/keys", server.key(), request).await;
        let key = body["data"]["plaintextKey"].as_str().filter(|_| status == 201);
        keys.push(key.ok_or_else(|| format!("creating a key: {status} {body}"))?.to_owned());
    }
    Ok(keys)
}

/// What wrk reported for one run.
#[derive(Debug, Default)]
pub struct WrkFigures {
    /// `Requests/sec`.
    pub requests_per_sec: f64,
    /// Latency percentiles as wrk prints them (`7.50ms`).
    pub p50: String,
    /// See `p50`.
    pub p90: String,
    /// See `p50`.
    pub p99: String,
    /// Requests completed.
    pub requests: u64,
    /// Responses other than 2xx or 3xx.
    pub non_2xx: u64,
    /// wrk's `Socket errors:` line, `0` when there was none.
    pub socket_errors: String,
}

/// Reads wrk's `--latency` report.
pub fn parse_wrk(output: &str) -> Result<WrkFigures> {
    let mut figures = WrkFigures { socket_errors: "0".into(), ..WrkFigures::default() };
    for line in output.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", rate] => figures.requests_per_sec = rate.parse()?,
            ["50%", value] => figures.p50 = (*value).to_owned(),
            ["90%", value] => figures.p90 = (*value).to_owned(),
            ["99%", value] => figures.p99 = (*value).to_owned(),
            ["Non-2xx", "or", "3xx", "responses:", n] => figures.non_2xx = n.parse()?,
            [n, "requests", "in", ..] => figures.requests = n.parse()?,
            ["Socket", "errors:", rest @ ..] => figures.socket_errors = rest.join(" "),
            _ => {}
        }
    }
    if figures.requests == 0 {
        return Err(format!("wrk printed no figures:\n{output}").into());
    }
    Ok(figures)
}

/// The send every benchmark makes: a receipt from `from` to `to` with a ~1 KiB HTML body
/// and a text part, so that figures from different benchmarks compare.
pub fn receipt(from: &str, to: &str) -> Value {
    let html = format!("<p>{}</p>", "Thanks for your order. ".repeat(46));
    json!({"from": from, "to": to, "subject": "Your receipt", "html": html, "text": "Thanks for your order."})
}

/// Sends `count` receipts from `from` to `user<i>@example.com` with `key`, `senders` at a time;
/// fails on the first answer that is not 201.
pub async fn send_receipts(
    server: &std::sync::Arc<TestServer>,
    key: &str,
    from: &str,
    count: usize,
    senders: usize,
) -> Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = std::sync::Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..senders {
        let (server, next, key, from) = (server.clone(), next.clone(), key.to_owned(), from.to_owned());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return Ok::<(), String>(());
                }
                let send = receipt(&from, &format!("user{i}@example.com"));
                let (status, body) = server.post("/v1/messages", &key, send).await;
                if status != 201 {
                    return Err(format!("send {i}: {status} {body}"));
                }
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// A body of about `bytes` bytes that looks like a transactional email.
pub fn html_body(bytes: usize) -> String {
    let mut html = String::from("<html><body><h1>Your receipt</h1><table>");
    let mut line = 0;
    while html.len() + 40 < bytes {
        line += 1;
        html.push_str(&format!("<tr><td>Item {line}</td><td>$ {line}.00</td></tr>"));
    }
    html.push_str("</table></body></html>");
    html
}

/// The `p`-th percentile (nearest rank) of `sorted` latencies in microseconds, in
/// milliseconds; NaN when there are none.
pub fn percentile_ms(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    f64::from(sorted[rank.clamp(1, sorted.len()) - 1]) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_wrk_report() {
        let report = "Running 10s test @ https://127.0.0.1:1/v1/messages
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     8.10ms    3.20ms  60.00ms   80.00%
    Req/Sec     7.90k   400.00     8.50k    70.00%
  Latency Distribution
     50%    7.50ms
     75%    9.00ms
     90%   11.00ms
     99%   20.00ms
  79000 requests in 10.00s, 60.00MB read
  Socket errors: connect 0, read 0, write 0, timeout 2
  Non-2xx or 3xx responses: 3
Requests/sec:   7899.50
Transfer/sec:      6.00MB
";
        let f = parse_wrk(report).unwrap();
        assert_eq!((f.requests, f.non_2xx), (79_000, 3));
        assert!((f.requests_per_sec - 7899.5).abs() < 1e-9);
        assert_eq!((f.p50.as_str(), f.p90.as_str(), f.p99.as_str()), ("7.50ms", "11.00ms", "20.00ms"));
        assert_eq!(f.socket_errors, "connect 0, read 0, write 0, timeout 2");
        assert!(parse_wrk("nothing").is_err());
    }
}
