//! The production example across a restart: run it, sign a visitor up, stop it with SIGTERM,
//! run it again against the same data directory and key, and find the same workspace,
//! domain and template, nothing made twice, and the first sign-up's Idempotency-Key still
//! remembered. The relay is a stand-in on loopback; DNS is the example's development mode.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tidings_core::ports::{DomainStore, PageRequest, TemplateStore, WorkspaceStore};
use tidings_core::sealing::{Sealer, SealingKey};
use tidings_storage_sled::SledStore;
use tidings_transport_smtp::testing::SmtpSink;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The example running, with the lines it printed at start-up.
struct Running {
    child: Child,
    ready: String,
    addr: String,
}

fn start(dir: &Path, relay: &SmtpSink) -> Running {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidings-example-embed-production"))
        .env("TIDINGS_DATA_DIR", dir.join("data"))
        .env("TIDINGS_SEALING_KEY_FILE", dir.join("sealing.key"))
        .env("TIDINGS_RELAY_URL", format!("smtp://{}", relay.addr()))
        .env("TIDINGS_DNS", "static")
        .env("TIDINGS_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the example starts");
    let (lines, received) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|line| lines.send(line)));
    let next = || received.recv_timeout(Duration::from_secs(60)).expect("a line from the example");
    let ready = next();
    assert!(ready.starts_with("ready: "), "{ready}");
    let listening = next();
    let addr = listening.strip_prefix("listening on ").expect("the address").to_owned();
    Running { child, ready, addr }
}

fn stop(mut running: Running) {
    let killed = Command::new("kill").args(["-TERM", &running.child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = running.child.wait().unwrap();
    assert!(status.success(), "the example stopped with {status}");
}

async fn sign_up(addr: &str, email: &str, name: &str) -> (u16, String) {
    let body = serde_json::json!({ "email": email, "name": name }).to_string();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "POST /signup HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response.get(9..12).and_then(|s| s.parse().ok()).expect("a status line");
    (status, response.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned())
}

async fn relay_holds(relay: &SmtpSink, n: usize) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while relay.messages().len() < n {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the relay received the welcome emails");
}

#[tokio::test]
async fn the_production_example_finds_what_it_made_after_a_restart() {
    let relay = SmtpSink::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();

    let first = start(dir.path(), &relay);
    assert!(first.ready.contains("(Verified)"), "{}", first.ready);
    let (status, ann) = sign_up(&first.addr, "ann@example.net", "Ann").await;
    assert_eq!(status, 202, "{ann}");
    let (status, refused) = sign_up(&first.addr, "not an address", "Nobody").await;
    assert_eq!(status, 422, "{refused}");
    relay_holds(&relay, 1).await;
    let welcome = String::from_utf8_lossy(&relay.messages()[0].data).into_owned();
    assert!(welcome.contains("Subject: Welcome, Ann"), "{welcome}");
    stop(first);

    let second = start(dir.path(), &relay);
    let ready = second.ready.clone();
    let (status, replayed) = sign_up(&second.addr, "ann@example.net", "Ann").await;
    assert_eq!((status, &replayed), (202, &ann), "the sign-up's Idempotency-Key outlived the restart");
    let (status, bob) = sign_up(&second.addr, "bob@example.net", "Bob").await;
    assert_eq!(status, 202, "{bob}");
    relay_holds(&relay, 2).await;
    stop(second);
    let third = start(dir.path(), &relay);
    assert_eq!(third.ready, ready, "the same workspace, domain and template at every start");
    stop(third);

    #[cfg(unix)]
    {
        // Owner-only: the store (made so by the store library) and the key file.
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| std::fs::metadata(dir.path().join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode("data/store"), mode("sealing.key")), (0o700, 0o600));
    }

    // What the three runs left in the store, read with the example's own key.
    let key = SealingKey::from_base64(std::fs::read_to_string(dir.path().join("sealing.key")).unwrap().trim()).unwrap();
    let store = SledStore::open(dir.path().join("data/store"), Sealer::new(&key)).unwrap();
    let workspaces = store.list_workspaces().await.unwrap();
    assert_eq!(workspaces.len(), 1);
    let ws = workspaces[0].id;
    assert_eq!(store.list_domains(ws, PageRequest::first(10)).await.unwrap().items.len(), 1);
    let templates = store.list_templates(ws, PageRequest::first(10)).await.unwrap().items;
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].versions.len(), 1);
    assert!(ready.contains(&ws.to_string()) && ready.contains(&templates[0].id.to_string()), "{ready}");
    assert_eq!(relay.messages().len(), 2, "the replayed sign-up sent nothing");
}
