//! A webhook receiver on loopback for the end-to-end tests: a real HTTP server (axum on
//! hyper) that records every request and answers as the script of its path says, then 200.
//!
//! Tests share one receiver by giving each endpoint its own path.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// This status with a short body.
    Status(u16),
    /// This status with this body.
    StatusBody(u16, String),
    /// This status with `Retry-After: <value>`.
    RetryAfter(u16, String),
    /// No answer for a minute (longer than the sender's 10 s timeout), then 200.
    Hang,
    /// No answer until [`Receiver::release`], then 200.
    Hold,
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The request's headers.
    pub headers: HeaderMap,
    /// The exact body.
    pub body: Bytes,
    /// When it arrived.
    pub at: Instant,
}

impl Hit {
    /// A header's value as text ("" if absent).
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON webhook body")
    }
}

#[derive(Default)]
struct Book {
    scripts: HashMap<String, VecDeque<Reply>>,
    hits: HashMap<String, Vec<Hit>>,
}

#[derive(Clone)]
struct Shared {
    book: Arc<Mutex<Book>>,
    released: watch::Receiver<bool>,
}

/// The running receiver; stops when dropped.
pub struct Receiver {
    addr: SocketAddr,
    book: Arc<Mutex<Book>>,
    release: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Listens on a free loopback port.
    pub async fn start() -> Self {
        Self::start_at(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Listens on `addr` (a receiver that comes up where a URL already points).
    pub async fn start_at(addr: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind the receiver");
        let addr = listener.local_addr().expect("its address");
        let book = Arc::new(Mutex::new(Book::default()));
        let (release, released) = watch::channel(false);
        let app = Router::new().fallback(receive).with_state(Shared { book: book.clone(), released });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, book, release, task }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The next requests to `path` get these answers, in order; later ones get 200.
    pub fn script(&self, path: &str, replies: impl IntoIterator<Item = Reply>) {
        self.book.lock().unwrap().scripts.entry(path.to_owned()).or_default().extend(replies);
    }

    /// Every request to `path` so far.
    pub fn hits(&self, path: &str) -> Vec<Hit> {
        self.book.lock().unwrap().hits.get(path).cloned().unwrap_or_default()
    }

    /// Answers every held request (and every later [`Reply::Hold`]) with 200.
    pub fn release(&self) {
        let _ = self.release.send(true);
    }

    /// Waits up to `within` until `path` has had at least `count` requests; panics with
    /// what arrived otherwise.
    pub async fn wait_for(&self, path: &str, count: usize, within: Duration) -> Vec<Hit> {
        let deadline = Instant::now() + within;
        loop {
            let hits = self.hits(path);
            if hits.len() >= count {
                return hits;
            }
            if Instant::now() >= deadline {
                let bodies: Vec<String> = hits.iter().map(|h| String::from_utf8_lossy(&h.body).into_owned()).collect();
                panic!("{path}: {} of {count} requests within {within:?}: {bodies:#?}", hits.len());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(State(shared): State<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    let reply = {
        let mut book = shared.book.lock().unwrap();
        book.hits.entry(path.clone()).or_default().push(Hit { headers, body, at: Instant::now() });
        book.scripts.get_mut(&path).and_then(VecDeque::pop_front)
    };
    let status = |code: u16| StatusCode::from_u16(code).expect("a valid status");
    match reply.unwrap_or(Reply::Status(200)) {
        Reply::Status(code) => (status(code), "ok").into_response(),
        Reply::StatusBody(code, body) => (status(code), body).into_response(),
        Reply::RetryAfter(code, after) => (status(code), [("retry-after", after)], "later").into_response(),
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            (StatusCode::OK, "late").into_response()
        }
        Reply::Hold => {
            let mut released = shared.released.clone();
            let _ = released.wait_for(|r| *r).await;
            (StatusCode::OK, "released").into_response()
        }
    }
}
