//! A store written by the previous version (the server of commit `bb14cf0`, before recipient
//! lists) is read by this one as it was written, and this one goes on with it.
//!
//! The fixture, `tests/fixtures/bb14cf0/`, was made by running that server (a debug build)
//! on a fresh data dir with the outbox transport, as `make.sh` there records: two messages
//! delivered (one with an Idempotency-Key, tags, metadata and a mixed-case recipient), one
//! scheduled, one canceled, one soft-bounced and one deferred (the outbox replaced by a file,
//! with retry schedules `1s` and `1h`). `store/` holds sled's files of that data dir,
//! gzipped one by one (the 512 KiB log is mostly zeros), and `manifest.json` what the old
//! server's API answered about each message before it stopped. The store's sealing key is
//! `tidings_testing::fixtures::SEALING_KEY`.

use std::io::Read;
use std::path::Path;

use tidings_core::ports::{MessageQuery, MessageStore, PageRequest};
use tidings_storage_sled::SledStore;
use tidings_testing::fixtures::sealer;
use tidings_testing::legacy::check_store_of_bb14cf0;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bb14cf0");

/// Unpacks the fixture's sled files into `dir/store`.
fn unpack(dir: &Path) -> std::path::PathBuf {
    let store = dir.join("store");
    std::fs::create_dir_all(&store).unwrap();
    for entry in std::fs::read_dir(Path::new(FIXTURE).join("store")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().strip_suffix(".gz").expect("a .gz file").to_owned();
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap()).read_to_end(&mut bytes).unwrap();
        std::fs::write(store.join(name), bytes).unwrap();
    }
    store
}

#[tokio::test]
async fn a_store_of_the_previous_version_reads_as_it_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = unpack(dir.path());
    let manifest = std::fs::read_to_string(Path::new(FIXTURE).join("manifest.json")).unwrap();
    let all = {
        let store = SledStore::open(&path, sealer()).expect("this version opens the old store");
        check_store_of_bb14cf0(&store, &manifest).await;
        let ws = tidings_core::ports::WorkspaceStore::list_workspaces(&store).await.unwrap()[0].id;
        store.list_messages(ws, &MessageQuery::page(PageRequest::first(200))).await.unwrap()
    };
    // What this version wrote on top of the old data is there after a reopen.
    let store = SledStore::open(&path, sealer()).expect("reopen");
    let ws = tidings_core::ports::WorkspaceStore::list_workspaces(&store).await.unwrap()[0].id;
    let again = store.list_messages(ws, &MessageQuery::page(PageRequest::first(200))).await.unwrap();
    assert_eq!(again, all, "the same messages after a reopen");
}
