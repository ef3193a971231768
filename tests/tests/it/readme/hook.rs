//! The harness side of the command wrappers: a plain-HTTP service on loopback that the
//! `curl` and `tidings-server` wrappers on the blocks' PATH call before and after each run.
//! It keeps the ids seen in responses (for the `<nameId>` placeholders) and judges each
//! curl's status against what its README line says.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

/// What the hook remembers across the blocks.
#[derive(Default)]
struct Book {
    /// `domainId` → the id last seen for it.
    ids: HashMap<String, String>,
    /// README line → the status its comment says the command answers.
    expected: HashMap<usize, u16>,
    /// Every command judged, for the transcript: `README.md:N: GET /v1/… → 200`.
    log: Vec<String>,
}

#[derive(Clone)]
struct Shared {
    book: Arc<Mutex<Book>>,
}

/// The running hook; stops when dropped.
pub struct Hook {
    addr: SocketAddr,
    book: Arc<Mutex<Book>>,
    task: tokio::task::JoinHandle<()>,
}

impl Hook {
    /// Listens on a free loopback port; `expected` maps README lines to the status their
    /// command must answer.
    pub async fn start(expected: HashMap<usize, u16>) -> Self {
        let book = Arc::new(Mutex::new(Book { expected, ..Book::default() }));
        let app = Router::new()
            .route("/resolve", post(resolve))
            .route("/curl", post(judge_curl))
            .route("/cli", post(record_cli))
            .with_state(Shared { book: book.clone() });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the hook");
        let addr = listener.local_addr().expect("its address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, book, task }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every command judged so far, one line each.
    pub fn log(&self) -> Vec<String> {
        self.book.lock().unwrap().log.clone()
    }
}

impl Drop for Hook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The marker the harness writes for a `<nameId>` placeholder: bash reads `<x>` as a
/// redirection, `@@x@@` as text, in any quoting.
pub fn marker(name: &str) -> String {
    format!("@@{name}@@")
}

/// `{line, args}` → `{args}` with every `@@name@@` replaced by the id last recorded for it;
/// 422 `{error}` naming the first one none was recorded for.
async fn resolve(State(shared): State<Shared>, Json(request): Json<Value>) -> (axum::http::StatusCode, Json<Value>) {
    let line = request["line"].as_str().unwrap_or("?");
    let book = shared.book.lock().unwrap();
    let mut resolved = Vec::new();
    for arg in request["args"].as_array().into_iter().flatten() {
        let mut arg = arg.as_str().unwrap_or_default().to_owned();
        while let Some(start) = arg.find("@@") {
            let Some(len) = arg[start + 2..].find("@@") else { break };
            let name = arg[start + 2..start + 2 + len].to_owned();
            let Some(id) = book.ids.get(&name) else {
                let error = format!(
                    "README.md:{line}: <{name}> names no id seen so far (ids are taken from earlier responses: {:?})",
                    book.ids.keys().collect::<Vec<_>>()
                );
                return (axum::http::StatusCode::UNPROCESSABLE_ENTITY, Json(json!({ "error": error })));
            };
            arg.replace_range(start..start + 4 + len, id);
        }
        resolved.push(arg);
    }
    (axum::http::StatusCode::OK, Json(json!({ "args": resolved })))
}

/// `{line, args, status, output}` of one curl → `{ok, message}`: records the ids of the
/// response and checks the status against the README line.
async fn judge_curl(State(shared): State<Shared>, Json(run): Json<Value>) -> Json<Value> {
    let line: usize = run["line"].as_str().and_then(|l| l.parse().ok()).unwrap_or(0);
    let status = run["status"].as_u64().unwrap_or(0);
    let args: Vec<&str> = run["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let url = args.iter().find(|a| a.starts_with("https://") || a.starts_with("http://")).copied().unwrap_or("?");
    let method = args.iter().position(|a| *a == "-X").and_then(|i| args.get(i + 1)).copied().unwrap_or("GET");
    let path = url.splitn(4, '/').nth(3).map_or("/".to_owned(), |p| format!("/{p}"));
    let output = run["output"].as_str().unwrap_or_default();
    let body = response_json(output);
    let mut book = shared.book.lock().unwrap();
    if let (Some(body), Some(kind)) = (&body, id_kind(&path)) {
        let data = &body["data"];
        let item = if data.is_array() { &data[0] } else { data };
        if let Some(id) = item["id"].as_str() {
            book.ids.insert(kind, id.to_owned());
        }
    }
    let verdict = match book.expected.get(&line) {
        Some(&wanted) if u64::from(wanted) == status => Ok(()),
        Some(&wanted) => Err(format!("expected {wanted} (its comment says so)")),
        None if (200..300).contains(&status) => Ok(()),
        None => Err("expected 2xx".to_owned()),
    };
    book.log.push(format!("README.md:{line}: {method} {path} → {status}"));
    Json(match verdict {
        Ok(()) => json!({ "ok": true }),
        Err(why) => json!({
            "ok": false,
            "message": format!("README.md:{line}: {method} {path} answered {status}, {why}:\n{output}"),
        }),
    })
}

/// `{line, args, stdout}` of an operator command: `workspace: ID` and `key id: ID` lines
/// are recorded as `workspaceId` and `keyId`.
async fn record_cli(State(shared): State<Shared>, Json(run): Json<Value>) -> Json<Value> {
    let mut book = shared.book.lock().unwrap();
    for line in run["stdout"].as_str().unwrap_or_default().lines() {
        if let Some(id) = line.strip_prefix("workspace: ") {
            book.ids.insert("workspaceId".to_owned(), id.trim().to_owned());
        } else if let Some(id) = line.strip_prefix("key id: ") {
            book.ids.insert("keyId".to_owned(), id.trim().to_owned());
        }
    }
    let line = run["line"].as_str().unwrap_or("?");
    let args: Vec<&str> = run["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    book.log.push(format!("README.md:{line}: tidings-server {}", args.join(" ")));
    Json(json!({ "ok": true }))
}

/// The placeholder a response's `data.id` (or `data[0].id`, for a list) fills: from the
/// last path segment that is not an id, when it is a collection (a plural): `/v1/domains`
/// and `/v1/domains/{id}` fill `domainId`, `/v1/webhooks/{id}/deliveries` `deliveryId`. An
/// action (`/verify`, `/test`, `/cancel`, `/batch`) fills none.
fn id_kind(path: &str) -> Option<String> {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let segment = path.split('/').rev().find(|s| !s.is_empty() && !is_ulid(s))?;
    let singular = match segment.strip_suffix("ies") {
        Some(stem) => format!("{stem}y"),
        None => segment.strip_suffix('s')?.to_owned(),
    };
    Some(format!("{singular}Id"))
}

fn is_ulid(segment: &str) -> bool {
    segment.len() == 26 && segment.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
}

/// The JSON document in curl's output: all of it, or what follows the headers (`-D -`).
fn response_json(output: &str) -> Option<Value> {
    serde_json::from_str(output).ok().or_else(|| {
        let (_, body) = output.rsplit_once("\r\n\r\n")?;
        serde_json::from_str(body).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collections_name_the_placeholder_their_ids_fill() {
        let id = "01JZ0000000000000000000000";
        assert_eq!(id_kind("/v1/domains").as_deref(), Some("domainId"));
        assert_eq!(id_kind(&format!("/v1/domains/{id}")).as_deref(), Some("domainId"));
        assert_eq!(id_kind(&format!("/v1/webhooks/{id}/deliveries")).as_deref(), Some("deliveryId"));
        assert_eq!(id_kind("/v1/messages?limit=10&status=Delivered").as_deref(), Some("messageId"));
        assert_eq!(id_kind(&format!("/v1/domains/{id}/verify")), None);
        assert_eq!(id_kind(&format!("/v1/webhooks/{id}/test")), None);
        assert_eq!(id_kind("/v1/messages/batch"), None);
    }

    #[test]
    fn the_body_is_found_after_headers() {
        assert_eq!(response_json("{\"a\":1}"), Some(json!({"a": 1})));
        assert_eq!(response_json("HTTP/2 200\r\nx: y\r\n\r\n{\"a\":1}"), Some(json!({"a": 1})));
        assert_eq!(response_json("HTTP/2 200\r\n\r\n"), None);
    }
}
