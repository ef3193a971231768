//! Crash durability: a child process writes messages from concurrent tasks and prints the id
//! of each one `create_message` acknowledged; the parent SIGKILLs it mid-stream, reopens the
//! store and finds every acknowledged message with its `Queued` event and idempotency record.
//!
//! The child is this test binary run again with [`WRITER_DIR_ENV`] set, selecting
//! `child_writer_for_the_sigkill_test`, which does nothing in a normal run.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tidings_core::ids::{MessageId, WorkspaceId};
use tidings_core::model::EventType;
use tidings_core::ports::{CreateOutcome, MessageStore, PageRequest};
use tidings_storage_sled::SledStore;
use tidings_testing::fixtures::{
    api_key, domain, idempotency, idempotency_key, message, new_message, now, plus_secs, workspace,
};

const WRITER_DIR_ENV: &str = "TIDINGS_SLED_KILL9_WRITER_DIR";
const ACKNOWLEDGED_BEFORE_KILL: usize = 2_000;
const WRITER_TASKS: usize = 16;
const ROUNDS: usize = 3;

#[test]
fn acknowledged_messages_survive_a_sigkill() {
    for round in 1..=ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["kill9::child_writer_for_the_sigkill_test", "--exact", "--nocapture", "--test-threads=1"])
            .env(WRITER_DIR_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut acknowledged: Vec<(WorkspaceId, MessageId, String)> = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let mut parts = line.split(' ');
            if parts.next() != Some("ACK") {
                continue;
            }
            let mut next = || parts.next().unwrap().to_owned();
            let (ws, id, key) = (next(), next(), next());
            acknowledged.push((ws.parse().unwrap(), id.parse().unwrap(), key));
            if acknowledged.len() == ACKNOWLEDGED_BEFORE_KILL {
                // Child::kill sends SIGKILL on unix: no destructor, no last flush.
                child.kill().unwrap();
                break;
            }
        }
        let status = child.wait().unwrap();
        assert_eq!(acknowledged.len(), ACKNOWLEDGED_BEFORE_KILL, "round {round}: the writer ended early: {status}");

        let store = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            for (ws, id, key) in &acknowledged {
                let found = store.get_message(*ws, *id).await.unwrap();
                assert!(found.is_some(), "round {round}: acknowledged message {id} is lost");
                let events = store.list_events(*ws, *id, PageRequest::first(10)).await.unwrap();
                assert_eq!(events.items.first().map(|e| e.event_type), Some(EventType::Queued), "round {round}: {id}");
                let record = store.get_idempotency(*ws, &idempotency_key(key)).await.unwrap();
                assert_eq!(record.map(|r| r.message_id), Some(*id), "round {round}: idempotency record of {id}");
            }
        });
    }
}

/// The writer side; a no-op unless run by the test above.
#[test]
fn child_writer_for_the_sigkill_test() {
    let Some(dir) = std::env::var_os(WRITER_DIR_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let store = SledStore::open(dir, tidings_testing::fixtures::sealer()).unwrap();
        let ws = workspace();
        let key = api_key(ws.id);
        let dom = domain(ws.id, "acme.example.com");
        let mut tasks = Vec::new();
        for task in 0..WRITER_TASKS {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                // A bound in case the parent dies without killing us.
                let deadline = Instant::now() + Duration::from_secs(120);
                let mut n = 0;
                while Instant::now() < deadline {
                    n += 1;
                    let m = message(ws.id, key.id, dom.id);
                    let idem_key = format!("task{task}-{n}");
                    let mut new = new_message(&m);
                    new.idempotency = Some(idempotency(ws.id, &idem_key, m.id, now(), plus_secs(now(), 86_400)));
                    if store.create_message(&new).await.unwrap() == CreateOutcome::Created {
                        let mut out = std::io::stdout().lock();
                        writeln!(out, "ACK {} {} {idem_key}", ws.id, m.id).unwrap();
                        out.flush().unwrap();
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}
