//! `tidings-server sites list|suspend|resume`: the operator's commands over the delivery
//! sites (contract §12, "Visible and operable"). They call the running server's operator API
//! (`/v1/operator/sites`) with `TIDINGS_OPERATOR_TOKEN` rather than open the store: sled
//! allows one process per store, so a command that opened it could not run beside the server,
//! and the sites' activity lives in the server's memory anyway.
//!
//! The server is reached at `--url`, by default `https://` the configured listen address
//! (a wildcard address is asked on loopback), and its certificate must chain to the one the
//! configuration names, or the one the server generated in its data directory.

use std::time::Duration;

use serde_json::Value;

use crate::ServerError;
use crate::config::Config;

/// What to do to the sites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SitesAction {
    /// List every site with something to show.
    List,
    /// Suspend one for a while.
    Suspend {
        /// The site key (`.google.com`).
        site: String,
        /// How long (`30m`, `2h`).
        duration: String,
        /// Why.
        reason: Option<String>,
    },
    /// Lift a suspension or throttle.
    Resume {
        /// The site key.
        site: String,
    },
}

/// Runs `action` against the server at `url` (or the configured one); prints what it did.
pub async fn run(config: &Config, url: Option<String>, action: SitesAction) -> Result<(), ServerError> {
    let operator = |m: String| ServerError::Operator(m);
    let token = std::env::var("TIDINGS_OPERATOR_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| operator("set TIDINGS_OPERATOR_TOKEN to the token the server was started with".into()))?;
    let base = url.unwrap_or_else(|| default_url(config));
    let client = client(config)?;
    let (method, path, body) = match &action {
        SitesAction::List => (reqwest::Method::GET, "/v1/operator/sites".to_owned(), None),
        SitesAction::Suspend { site, duration, reason } => {
            let body = serde_json::json!({ "duration": duration, "reason": reason });
            (reqwest::Method::POST, format!("/v1/operator/sites/{site}/suspend"), Some(body))
        }
        SitesAction::Resume { site } => (reqwest::Method::POST, format!("/v1/operator/sites/{site}/resume"), None),
    };
    let mut request = client.request(method, format!("{}{path}", base.trim_end_matches('/'))).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.map_err(|e| operator(format!("cannot reach the server at {base}: {e}")))?;
    let status = response.status();
    let answer: Value = response
        .json()
        .await
        .map_err(|e| operator(format!("the server at {base} answered {status} without JSON: {e}")))?;
    if !status.is_success() {
        let message = answer["error"]["message"].as_str().unwrap_or("no message");
        let details = answer["error"]["details"].as_array().map(|d| {
            d.iter()
                .filter_map(|f| Some(format!("{}: {}", f["field"].as_str()?, f["message"].as_str()?)))
                .collect::<Vec<_>>()
        });
        let details = details.filter(|d| !d.is_empty()).map(|d| format!(" ({})", d.join("; "))).unwrap_or_default();
        return Err(operator(format!("the server refused: {status} {message}{details}")));
    }
    match action {
        SitesAction::List => print!("{}", table(&answer["data"])),
        SitesAction::Suspend { site, .. } => {
            println!("{site} suspended until {}", answer["data"]["suspendedUntil"].as_str().unwrap_or("?"));
        }
        SitesAction::Resume { site } => println!("{site} resumed"),
    }
    Ok(())
}

/// `https://` the listen address, a wildcard one asked on loopback.
fn default_url(config: &Config) -> String {
    let mut addr = config.listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() { [127, 0, 0, 1].into() } else { std::net::Ipv6Addr::LOCALHOST.into() });
    }
    format!("https://{addr}")
}

/// A client trusting the server's certificate (the configured file, or the generated one).
fn client(config: &Config) -> Result<reqwest::Client, ServerError> {
    let path = match &config.tls {
        Some(files) => files.cert.clone(),
        None => config.generated_tls_dir().join("cert.pem"),
    };
    let pem = std::fs::read(&path)
        .map_err(|e| ServerError::Operator(format!("cannot read the server's certificate {}: {e}", path.display())))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| ServerError::Operator(format!("{} holds no usable certificate: {e}", path.display())))?;
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(30)).tls_certs_only(certificates);
    // The server's address is given, not looked up: no proxy between the operator and it.
    builder = builder.no_proxy();
    builder.build().map_err(|e| ServerError::Operator(format!("cannot set up the HTTPS client: {e}")))
}

/// The sites as a table, one per line under a header.
fn table(data: &Value) -> String {
    if data["shaping"] == Value::Bool(false) {
        return "this server does not deliver by site (TIDINGS_DELIVERY is not mx)\n".to_owned();
    }
    let mut out = String::from("SITE\tLEASES\tWAITING\tIN FLIGHT\tLAST MINUTE\tSTATE\tLAST REPLY\n");
    for site in data["sites"].as_array().into_iter().flatten() {
        let state = match (site["suspendedUntil"].as_str(), site["throttle"]["maxMessageRate"].as_str()) {
            (Some(until), _) => format!("suspended until {until}: {}", site["suspendReason"].as_str().unwrap_or("")),
            (None, Some(rate)) => {
                format!("throttled to {rate} until {}", site["throttle"]["until"].as_str().unwrap_or("?"))
            }
            (None, None) => "open".to_owned(),
        };
        let reply = site["lastReply"]["reply"].as_str().unwrap_or("-");
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{state}\t{reply}\n",
            site["site"].as_str().unwrap_or("?"),
            site["leases"],
            site["waiting"],
            site["inFlight"],
            site["admittedLastMinute"],
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_each_sites_state() {
        let data = serde_json::json!({ "shaping": true, "sites": [
            { "site": ".google.com", "leases": 2, "waiting": 7, "inFlight": 1, "admittedLastMinute": 30,
              "suspendedUntil": null, "throttle": { "maxMessageRate": "1/min", "until": "2026-12-05T12:00:00Z" },
              "lastReply": { "reply": "421 4.7.28 slow down" } },
            { "site": ".yahoodns.net", "leases": 0, "waiting": 3, "inFlight": 0, "admittedLastMinute": 0,
              "suspendedUntil": "2026-12-05T13:00:00Z", "suspendReason": "[TS03]", "throttle": null, "lastReply": null },
        ]});
        let text = table(&data);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(
            lines[1],
            ".google.com\t2\t7\t1\t30\tthrottled to 1/min until 2026-12-05T12:00:00Z\t421 4.7.28 slow down"
        );
        assert_eq!(lines[2], ".yahoodns.net\t0\t3\t0\t0\tsuspended until 2026-12-05T13:00:00Z: [TS03]\t-");
        let off = table(&serde_json::json!({ "shaping": false, "sites": [] }));
        assert!(off.contains("does not deliver by site"), "{off}");
    }
}
