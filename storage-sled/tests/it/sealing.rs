//! Secrets sealed at rest: what the files hold, what another key gets, and a store written
//! before sealing existed.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use tidings_core::model::{Domain, WebhookEndpoint, WebhookSecret};
use tidings_core::ports::{DomainStore, SecretStore, WebhookStore, WorkspaceStore};
use tidings_core::sealing::Sealer;
use tidings_core::secret::{Secret, SecretName};
use tidings_storage_sled::SledStore;
use tidings_testing::fixtures::{api_key, domain, sealer, sealing_key, webhook, workspace};

const NAME: SecretName = SecretName::new("tracking_key");
const TRACKING: &[u8] = b"a tracking key only this test has";

/// A domain whose keys are long enough to search for, and a webhook with a rotated secret.
fn records() -> (tidings_core::model::Workspace, Domain, WebhookEndpoint) {
    let ws = workspace();
    let mut dom = domain(ws.id, "sealed.example");
    dom.dkim.rsa_private_pkcs8 = Secret::new(b"\x30\x82 the RSA private key document of the test".to_vec());
    dom.dkim.ed25519_private_pkcs8 = Secret::new(b"\x30\x53 the Ed25519 private key document of the test".to_vec());
    let mut hook = webhook(ws.id);
    hook.previous_secret = Some((WebhookSecret::generate(&tidings_core::ports::SystemRandom), hook.created_at));
    (ws, dom, hook)
}

fn secrets_of(dom: &Domain, hook: &WebhookEndpoint) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    for key in [&dom.dkim.rsa_private_pkcs8, &dom.dkim.ed25519_private_pkcs8] {
        all.push(key.expose().clone());
        all.push(BASE64.encode(key.expose()).into_bytes());
    }
    for secret in [&hook.secret, &hook.previous_secret.as_ref().unwrap().0] {
        all.push(secret.expose().as_bytes().to_vec());
        all.push(secret.key_bytes());
    }
    all.push(TRACKING.to_vec());
    all
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Every byte of every file under `dir`.
fn files(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() { bytes.extend(files(&path)) } else { bytes.extend(std::fs::read(&path).unwrap()) }
    }
    bytes
}

async fn fill(store: &SledStore, ws: &tidings_core::model::Workspace, dom: &Domain, hook: &WebhookEndpoint) {
    store.create_workspace(ws, &api_key(ws.id)).await.unwrap();
    store.insert_domain(dom).await.unwrap();
    store.insert_webhook(hook).await.unwrap();
    store.ensure_secret(NAME, &Secret::new(TRACKING.to_vec())).await.unwrap();
}

#[tokio::test]
async fn secrets_are_sealed_in_the_files_and_read_back_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, dom, hook) = records();
    {
        let store = SledStore::open(dir.path(), sealer()).unwrap();
        fill(&store, &ws, &dom, &hook).await;
        assert_eq!(store.get_domain(ws.id, dom.id).await.unwrap().as_ref(), Some(&dom));
    }
    let raw = files(dir.path());
    assert!(contains(&raw, b"sealed.example") && contains(&raw, b"tdsealv1"), "the search reads the records");
    for secret in secrets_of(&dom, &hook) {
        assert!(!contains(&raw, &secret), "a secret in the clear: {:?}", String::from_utf8_lossy(&secret));
    }

    let store = once_unlocked(|| SledStore::open(dir.path(), sealer())).await.unwrap();
    assert_eq!(store.sealed_at_open(), 0);
    assert_eq!(store.get_domain(ws.id, dom.id).await.unwrap(), Some(dom.clone()));
    assert_eq!(store.find_domain_by_name(ws.id, &dom.name).await.unwrap(), Some(dom.clone()));
    assert_eq!(store.get_webhook(ws.id, hook.id).await.unwrap(), Some(hook.clone()));
    assert_eq!(store.list_enabled_webhooks(ws.id).await.unwrap(), vec![hook.clone()]);
    let again = store.ensure_secret(NAME, &Secret::new(vec![1; 32])).await.unwrap();
    assert_eq!(again.expose(), TRACKING);
    let mut updated = dom.clone();
    updated.open_tracking = true;
    store.update_domain(&updated).await.unwrap();
    assert_eq!(store.get_domain(ws.id, dom.id).await.unwrap(), Some(updated));
}

#[tokio::test]
async fn another_key_does_not_open_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, dom, hook) = records();
    fill(&SledStore::open(dir.path(), sealer()).unwrap(), &ws, &dom, &hook).await;
    let err = once_unlocked(|| SledStore::open(dir.path(), Sealer::new(&sealing_key([1; 32])))).await.unwrap_err();
    assert!(err.is_wrong_key(), "{err}");
    assert!(err.to_string().contains("sealed with another key"), "{err}");
    // Nothing was changed: the right key still opens it.
    let store = once_unlocked(|| SledStore::open(dir.path(), sealer())).await.unwrap();
    assert_eq!(store.get_webhook(ws.id, hook.id).await.unwrap(), Some(hook));
}

#[tokio::test]
async fn a_store_written_before_sealing_is_read_and_sealed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, dom, hook) = records();
    fill(&SledStore::open(dir.path(), sealer()).unwrap(), &ws, &dom, &hook).await;
    // As a version before sealing wrote it: the records' serde form in the clear, the secret
    // as its bytes, no key check, no redo record (the layout's tags: storage-sled/src/layout.rs).
    {
        let db = once_unlocked(|| open_sled(dir.path())).await.unwrap();
        let tree = db.open_tree("tidings").unwrap();
        for entry in tree.iter() {
            let (key, _) = entry.unwrap();
            let plain = match key[0] {
                0x30 => Some(serde_json::to_vec(&dom).unwrap()),
                0x60 => Some(serde_json::to_vec(&hook).unwrap()),
                0x70 => Some(TRACKING.to_vec()),
                0x00 | 0x7f => {
                    tree.remove(&key).unwrap();
                    None
                }
                _ => None,
            };
            if let Some(plain) = plain {
                tree.insert(&key, plain).unwrap();
            }
        }
        db.flush().unwrap();
    }

    let store = once_unlocked(|| SledStore::open(dir.path(), sealer())).await.unwrap();
    assert_eq!(store.sealed_at_open(), 3, "the domain, the webhook and the secret");
    assert_eq!(store.get_domain(ws.id, dom.id).await.unwrap(), Some(dom.clone()));
    assert_eq!(store.get_webhook(ws.id, hook.id).await.unwrap(), Some(hook.clone()));
    assert_eq!(store.ensure_secret(NAME, &Secret::new(vec![1; 32])).await.unwrap().expose(), TRACKING);
    drop(store);

    // The live records are sealed now, and the key check is there: another key is refused.
    let db = once_unlocked(|| open_sled(dir.path())).await.unwrap();
    let live: Vec<u8> = db.open_tree("tidings").unwrap().iter().flat_map(|e| e.unwrap().1.to_vec()).collect();
    drop(db);
    for secret in secrets_of(&dom, &hook) {
        assert!(!contains(&live, &secret), "a secret left in the clear: {:?}", String::from_utf8_lossy(&secret));
    }
    let other_key = once_unlocked(|| SledStore::open(dir.path(), Sealer::new(&sealing_key([1; 32])))).await;
    assert!(other_key.unwrap_err().is_wrong_key());
    assert_eq!(once_unlocked(|| SledStore::open(dir.path(), sealer())).await.unwrap().sealed_at_open(), 0);
}

/// `open()`, tried again (for up to 10 s) while a database dropped just before still holds
/// the directory's lock: sled releases it from a background thread after the last handle
/// goes, which once took long enough here to fail an immediate open.
pub(crate) async fn once_unlocked<T, E: std::fmt::Display>(mut open: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match open() {
            Err(e) if e.to_string().contains("could not acquire lock") && std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            result => return result,
        }
    }
}

/// Opens a sled database directly, without sled's own flusher thread, whose late exit could
/// keep the directory locked a moment after the database is dropped.
pub(crate) fn open_sled(path: impl AsRef<Path>) -> sled::Result<sled::Db> {
    sled::Config::new().path(path).flush_every_ms(None).open()
}
