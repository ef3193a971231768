//! Secrets at rest, against the real binary, on sled and on PostgreSQL
//! (`TIDINGS_E2E_STORE=postgres`):
//!
//! - [`the_data_dir_is_the_servers_alone_from_the_first_start_and_after_an_upgrade`]
//!   checks that every directory under the data dir is `700` and every file `600` (store,
//!   key file, TLS files, outbox `.eml`), also when a data dir left `755`/`644` is started
//!   again.
//! - [`the_store_holds_no_dkim_key_webhook_secret_or_tracking_key_in_the_clear`] searches
//!   the raw store (sled files, or every row of every table) for the private key documents
//!   of the domain's published keys, the webhook secrets and a tracking key the test chose.
//! - [`a_copied_store_does_not_open_with_another_key_and_says_so`] checks that the store
//!   alone, or with another key, fails the start (and `workspace create`) with exit code 2
//!   and a message naming the key; with the key moved to `TIDINGS_SECRET_KEY` it starts.
//! - [`a_store_with_plaintext_secrets_from_before_is_read_and_sealed_at_start`] checks that
//!   a store whose secrets are turned back into the plaintext an earlier version wrote
//!   (known DKIM keys, webhook secrets, tracking key) is read with those values and holds
//!   them sealed after the start.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::raw_store::{self, contains, raw_store};
use crate::common::{assert_ok, start_with_dns, verified_domain};
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::Ed25519KeyPair;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use tidings_core::ids::{DomainId, WebhookId, WorkspaceId};
use tidings_core::sealing::{Sealer, SealingKey};
use tidings_core::secret::Secret;
use tidings_core::tracking::TRACKING_KEY_SECRET;
use tidings_e2e::{DataDir, Options, TestServer, fresh_key, server_binary};

/// A tracking key the test gives the server (through the `tracking.key` file an earlier
/// version kept, which a store without a key adopts), so that it can be searched for.
const TRACKING_KEY: &[u8; 32] = b"tracking-key-known-to-the-test!!";

/// The base64 start of an Ed25519 PKCS#8 document: v2 with the public key as `[1]` (what
/// aws-lc-rs writes), v2 with an explicit tag, and v1.
const ED25519_PKCS8_STARTS: [&str; 3] = ["MFECAQEwBQYDK2VwBCIE", "MFMCAQEwBQYDK2VwBCIE", "MC4CAQAwBQYDK2VwBCIE"];

/// The base64 of the rsaEncryption algorithm identifier followed by an OCTET STRING, at a
/// 3-byte boundary in every RSA PKCS#8 document (the public key's form has a BIT STRING).
const RSA_PKCS8_MARK: &str = "BgkqhkiG9w0BAQEFAASC";

/// Mode bits of `path` (not following links).
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

/// Every path under `dir` (itself included) with its mode.
fn modes(dir: &Path) -> Vec<(std::path::PathBuf, u32)> {
    let mut all = vec![(dir.to_owned(), mode(dir))];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            all.extend(modes(&path));
        } else {
            all.push((path.clone(), mode(&path)));
        }
    }
    all
}

/// Asserts every directory under `dir` is 700 and every file 600; returns how many paths.
fn assert_private(dir: &Path, when: &str) -> usize {
    let all = modes(dir);
    for (path, m) in &all {
        let wanted = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(*m, wanted, "{when}: {} is {m:o}, not {wanted:o}", path.display());
    }
    all.len()
}

/// Sets every directory under `dir` to 755 and every file to 644, as an older version left it.
fn loosen(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for (path, _) in modes(dir) {
        let m = if path.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m)).unwrap();
    }
}

/// Sends a message from `domain` and waits until the outbox has written it.
async fn send_to_outbox(server: &TestServer, domain: &str) {
    let body = json!({"from": format!("app@{domain}"), "to": "ann@inbox.example", "subject": "Hi", "text": "Hello"});
    let (status, reply) = server.post("/v1/messages", server.key(), body).await;
    assert_ok(status, &reply, 201, "send");
    let id = reply["data"]["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
        if body["data"]["status"] == "Delivered" {
            return;
        }
        assert!(Instant::now() < deadline, "not written to the outbox: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_data_dir_is_the_servers_alone_from_the_first_start_and_after_an_upgrade() {
    let (server, dns) = start_with_dns(Options { bootstrap_key: Some(fresh_key()), ..Options::default() }).await;
    verified_domain(&server, &dns, server.key(), "modes.example").await;
    send_to_outbox(&server, "modes.example").await;
    let (status, data_dir) = server.stop().await;
    assert!(status.success(), "{status}");
    let root = data_dir.path();
    let checked = assert_private(root, "after the first start");
    for made in ["secret.key", "tls/key.pem", "tls/cert.pem", "outbox"] {
        assert!(root.join(made).exists(), "{made} was made");
    }
    assert!(std::fs::read_dir(root.join("outbox")).unwrap().count() == 1, "one .eml in the outbox");

    // An upgrade: the data dir as an older version (umask 022) left it.
    loosen(root);
    assert_eq!(mode(root), 0o755);
    let options = Options { data_dir: Some(data_dir.clone()), bootstrap_key: Some(fresh_key()), ..Options::default() };
    let server = TestServer::start_with(options).await;
    let line = server
        .wait_for_log(&["took group and other permissions away", "(644 -> 600)", "(755 -> 700)"])
        .unwrap_or_else(|| panic!("the narrowing is logged: {:#?}", server.stderr_lines()));
    assert!(line.contains("secret.key"), "{line}");
    let logged = server.stderr_lines().iter().filter(|l| l.contains("took group and other permissions away")).count();
    assert_eq!(logged, 1, "logged once");
    let (status, _) = server.stop().await;
    assert!(status.success(), "{status}");
    assert_private(root, "after the upgrade");
    println!("modes: {checked} paths 700/600 after a fresh start; the same after a 755/644 data dir was started");
}

/// The published DKIM public keys of a domain response: (RSA SubjectPublicKeyInfo, raw
/// Ed25519), from the `p=` of its records.
fn published_keys(domain: &Value) -> (Vec<u8>, Vec<u8>) {
    let p = |purpose: &str| {
        let record = domain["dnsRecords"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["purpose"].as_str().unwrap().starts_with(purpose))
            .unwrap_or_else(|| panic!("a {purpose} record: {domain}"));
        let value = record["value"].as_str().unwrap();
        let p = value.split("p=").nth(1).unwrap().trim();
        BASE64.decode(p).unwrap()
    };
    (p("DKIM ("), p("DKIM2"))
}

/// Asserts the raw store holds none of the private key documents of `ed25519` (by its
/// public key, which sits in the v2 document at byte 51) nor any RSA or Ed25519 PKCS#8
/// document at all.
fn assert_no_private_keys(store: &[u8], what: &str, ed25519_public: &[u8]) {
    for start in ED25519_PKCS8_STARTS {
        assert!(!contains(store, start.as_bytes()), "{what} holds an Ed25519 private key document ({start})");
    }
    assert!(!contains(store, RSA_PKCS8_MARK.as_bytes()), "{what} holds an RSA private key document");
    assert!(!contains(store, &[0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]), "{what} holds Ed25519 DER");
    // Bytes 48..78 of the v2 document, at a 3-byte boundary: the public key's tag and
    // length (`81 21 00`, which the published `p=` lacks), then its first 27 bytes.
    let inside = BASE64.encode([&[0x81, 0x21, 0x00][..], &ed25519_public[..27]].concat());
    assert!(!contains(store, inside.as_bytes()), "{what} holds the private key document of the published Ed25519 key");
}

/// Asserts the raw store holds neither the text nor the bytes of `secret` (`whsec_…`).
fn assert_no_webhook_secret(store: &[u8], what: &str, secret: &str) {
    let encoded = &secret["whsec_".len()..];
    assert!(!contains(store, encoded.as_bytes()), "{what} holds a webhook secret in the clear");
    assert!(!contains(store, &BASE64.decode(encoded).unwrap()), "{what} holds a webhook secret's bytes");
}

/// Asserts the raw store holds the tracking key in no form (bytes, base64, hex as a
/// `bytea` dump shows it).
fn assert_no_tracking_key(store: &[u8], what: &str, key: &[u8]) {
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    for (form, needle) in
        [("bytes", key.to_vec()), ("base64", BASE64.encode(key).into_bytes()), ("hex", hex.into_bytes())]
    {
        assert!(!contains(store, &needle), "{what} holds the tracking key ({form})");
    }
}

/// A data dir holding the `tracking.key` file of an earlier version, with [`TRACKING_KEY`].
fn data_dir_with_tracking_key() -> DataDir {
    let data_dir = DataDir::new();
    std::fs::write(data_dir.path().join("tracking.key"), TRACKING_KEY).unwrap();
    data_dir
}

/// Adds a domain and a webhook (its secret rotated once); returns the domain response's
/// `data` and the two webhook secrets.
async fn domain_and_webhook(server: &TestServer, name: &str) -> (Value, String, Vec<String>) {
    let (status, body) = server.post("/v1/domains", server.key(), json!({"domain": name})).await;
    assert_ok(status, &body, 201, "add a domain");
    let domain = body["data"].clone();
    let hook = json!({"url": "https://hooks.example.com/at-rest", "eventTypes": ["Delivered"]});
    let (status, body) = server.post("/v1/webhooks", server.key(), hook).await;
    assert_ok(status, &body, 201, "create a webhook");
    let webhook = body["data"]["id"].as_str().unwrap().to_owned();
    let mut secrets = vec![body["data"]["secret"].as_str().unwrap().to_owned()];
    let (status, body) = server.post(&format!("/v1/webhooks/{webhook}/rotate-secret"), server.key(), json!({})).await;
    assert_ok(status, &body, 200, "rotate the secret");
    secrets.push(body["data"]["secret"].as_str().unwrap().to_owned());
    (domain, webhook, secrets)
}

#[tokio::test]
async fn the_store_holds_no_dkim_key_webhook_secret_or_tracking_key_in_the_clear() {
    let data_dir = data_dir_with_tracking_key();
    let options = Options { data_dir: Some(data_dir.clone()), bootstrap_key: Some(fresh_key()), ..Options::default() };
    let server = TestServer::start_with(options).await;
    let (domain, _, secrets) = domain_and_webhook(&server, "at-rest.example").await;
    let (status, _) = server.stop().await;
    assert!(status.success(), "{status}");

    let (store, what) = raw_store(&data_dir).await;
    let (rsa_public, ed25519_public) = published_keys(&domain);
    // What is public is there: the search reads where the domain lives.
    assert!(contains(&store, b"at-rest.example"), "{what} holds the domain (else the search is blind)");
    assert!(contains(&store, BASE64.encode(&rsa_public).as_bytes()), "{what} holds the published RSA key");
    assert_no_private_keys(&store, what, &ed25519_public);
    for secret in &secrets {
        assert_no_webhook_secret(&store, what, secret);
    }
    assert_no_tracking_key(&store, what, TRACKING_KEY);
    assert!(contains(&store, b"tdsealv1"), "{what} holds sealed values");
    println!("{} bytes of {what}: no DKIM private key, webhook secret or tracking key in the clear", store.len());
}

/// Runs `tidings-server ARGS` on `data_dir` with `env`, expecting it to exit by itself
/// within 30 s (a server that starts is killed and the test fails).
fn run_to_exit(data_dir: &DataDir, args: &[&str], env: &[(&str, String)]) -> Output {
    let mut command = Command::new(server_binary());
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TIDINGS_DATA_DIR", data_dir.path())
        .env("TIDINGS_LISTEN", "127.0.0.1:0")
        .env("TIDINGS_DNS_SERVER", "127.0.0.1:53")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("start tidings-server");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!("tidings-server did not exit: {}", String::from_utf8_lossy(&output.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("its output")
}

/// Asserts `output` is the refusal of a store sealed with another key, naming `key`.
fn assert_wrong_key(output: &Output, key: &str, what: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{what}: exit code 2 (configuration): {stderr}");
    assert!(stderr.contains("sealed with another key than"), "{what}: {stderr}");
    assert!(stderr.contains(key), "{what}: names the key ({key}): {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
}

#[tokio::test]
async fn a_copied_store_does_not_open_with_another_key_and_says_so() {
    let server = TestServer::start().await;
    let api_key = server.key().to_owned();
    domain_and_webhook(&server, "copied.example").await;
    let (status, original) = server.stop().await;
    assert!(status.success(), "{status}");
    let key_file = original.path().join("secret.key");
    let key_text = std::fs::read_to_string(&key_file).unwrap().trim().to_owned();
    let other_key = BASE64.encode([9u8; 32]);

    // Another key for the same store: the server and the operator commands refuse it.
    let env = |key: &str| -> Vec<(&str, String)> {
        let mut env = vec![("TIDINGS_SECRET_KEY", key.to_owned())];
        env.extend(original.database_url().map(|url| ("TIDINGS_DATABASE_URL", url)));
        env
    };
    assert_wrong_key(&run_to_exit(&original, &[], &env(&other_key)), "TIDINGS_SECRET_KEY", "serve");
    let cli = run_to_exit(&original, &["workspace", "create", "x"], &env(&other_key));
    assert_wrong_key(&cli, "TIDINGS_SECRET_KEY", "workspace create");

    // The store copied without the data dir's key file (sled: the store directory; the
    // database is shared as it is): a fresh data dir generates a key, which does not open it,
    // and is not kept.
    let copy = DataDir::new();
    let mut copy_env = Vec::new();
    match original.database_url() {
        Some(url) => copy_env.push(("TIDINGS_DATABASE_URL", url)),
        None => {
            let status = Command::new("cp").arg("-a").arg(original.path().join("store")).arg(copy.path()).status();
            assert!(status.unwrap().success(), "copy the store");
        }
    }
    let output = run_to_exit(&copy, &[], &copy_env);
    assert_wrong_key(&output, "generated now", "the copy");
    assert!(!copy.path().join("secret.key").exists(), "the key generated for the copy is not kept");

    // The key moved from the file to the environment: the store opens, for commands too.
    std::fs::remove_file(&key_file).unwrap();
    let cli = run_to_exit(&original, &["workspace", "create", "y"], &env(&key_text));
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    let mut options = Options { data_dir: Some(original.clone()), bootstrap_key: Some(api_key), ..Options::default() };
    options.env.push(("TIDINGS_SECRET_KEY".to_owned(), key_text));
    let server = TestServer::start_with(options).await;
    let (status, body) = server.get("/v1/domains", server.key()).await;
    assert_ok(status, &body, 200, "list the domains");
    // Beside the sandbox sending domain this list makes with the default outbox.
    let names: Vec<&Value> = body["data"].as_array().unwrap().iter().map(|d| &d["domain"]).collect();
    assert!(names.contains(&&json!("copied.example")), "{body}");
    assert!(!original.path().join("secret.key").exists(), "no key file is made when the environment has the key");
    let (status, _) = server.stop().await;
    assert!(status.success(), "{status}");
}

/// Known DKIM keys, as PKCS#8 DER: (RSA, Ed25519).
fn known_dkim_keys() -> (Vec<u8>, Vec<u8>) {
    let rsa = RsaKeyPair::generate(KeySize::Rsa2048).unwrap().as_der().unwrap().as_ref().to_vec();
    let ed = Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new()).unwrap().as_ref().to_vec();
    (rsa, ed)
}

/// What an earlier version stored in the clear, which the test writes back into the store.
struct Plaintext {
    rsa: Vec<u8>,
    ed25519: Vec<u8>,
    secret: String,
    previous: String,
}

/// Sets `doc`'s secrets to `plain`, as an earlier version stored them; whether it held any.
fn unseal_doc(doc: &mut Value, plain: &Plaintext) -> bool {
    if doc.get("dkim").is_some() {
        doc["dkim"]["rsa_private_pkcs8"] = BASE64.encode(&plain.rsa).into();
        doc["dkim"]["ed25519_private_pkcs8"] = BASE64.encode(&plain.ed25519).into();
        true
    } else if doc.get("event_types").is_some() && doc.get("secret").is_some() {
        doc["secret"] = plain.secret.clone().into();
        if doc["previous_secret"].is_array() {
            doc["previous_secret"][0] = plain.previous.clone().into();
        }
        true
    } else {
        false
    }
}

/// Turns the stopped server's sled store back into what an earlier version wrote: secrets
/// in plaintext, no key check, no redo record. Knows three tags of the layout
/// (storage-sled/src/layout.rs): the redo record `0x00`, secrets `0x70`, metadata `0x7f`.
fn unseal_sled(store: &Path, plain: &Plaintext) -> usize {
    let db = open_sled(store).expect("open the sled store");
    let tree = db.open_tree("tidings").unwrap();
    let mut changed = 0;
    for entry in tree.iter() {
        let (key, value) = entry.unwrap();
        match key[0] {
            0x00 => drop(tree.remove(&key).unwrap()),
            0x70 => {
                tree.insert(&key, &TRACKING_KEY[..]).unwrap();
                changed += 1;
            }
            0x7f if key.ends_with(b"sealing-key-check") => drop(tree.remove(&key).unwrap()),
            _ => {
                if let Ok(mut doc) = serde_json::from_slice::<Value>(&value)
                    && unseal_doc(&mut doc, plain)
                {
                    tree.insert(&key, serde_json::to_vec(&doc).unwrap()).unwrap();
                    changed += 1;
                }
            }
        }
    }
    db.flush().unwrap();
    changed
}

/// The same for the PostgreSQL store at `url`.
async fn unseal_postgres(url: &str, plain: &Plaintext) -> usize {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connect");
    let driver = tokio::spawn(connection);
    let mut changed = 0;
    for table in ["domains", "webhooks"] {
        for row in client.query(&format!("SELECT id, doc FROM {table}"), &[]).await.unwrap() {
            let (id, mut doc): (uuid::Uuid, Value) = (row.get(0), row.get(1));
            assert!(unseal_doc(&mut doc, plain));
            client.execute(&format!("UPDATE {table} SET doc = $2 WHERE id = $1"), &[&id, &doc]).await.unwrap();
            changed += 1;
        }
    }
    changed += client.execute("UPDATE secrets SET value = $1", &[&&TRACKING_KEY[..]]).await.unwrap() as usize;
    client.execute("DELETE FROM sealing", &[]).await.unwrap();
    drop(client);
    let _ = driver.await;
    changed
}

#[tokio::test]
async fn a_store_with_plaintext_secrets_from_before_is_read_and_sealed_at_start() {
    let data_dir = data_dir_with_tracking_key();
    let api_key = fresh_key();
    let options =
        Options { data_dir: Some(data_dir.clone()), bootstrap_key: Some(api_key.clone()), ..Options::default() };
    let server = TestServer::start_with(options).await;
    let (domain, webhook, _) = domain_and_webhook(&server, "legacy.example").await;
    let (status, _) = server.stop().await;
    assert!(status.success(), "{status}");

    // The store as an earlier version left it: plaintext secrets, no key check, no key file.
    let (rsa, ed25519) = known_dkim_keys();
    let whsec = |byte: u8| format!("whsec_{}", BASE64.encode([byte; 32]));
    let plain = Plaintext { rsa, ed25519, secret: whsec(1), previous: whsec(2) };
    let changed = match data_dir.database_url() {
        Some(url) => unseal_postgres(&url, &plain).await,
        None => unseal_sled(&data_dir.path().join("store"), &plain),
    };
    assert_eq!(changed, 3, "a domain, a webhook and the tracking key made plaintext");
    std::fs::remove_file(data_dir.path().join("secret.key")).unwrap();

    let options = Options { data_dir: Some(data_dir.clone()), bootstrap_key: Some(api_key), ..Options::default() };
    let server = TestServer::start_with(options).await;
    server
        .wait_for_log(&["sealed the secrets an earlier version stored in plaintext", "count=3"])
        .unwrap_or_else(|| panic!("the sealing is logged: {:#?}", server.stderr_lines()));
    let (status, body) = server.get(&format!("/v1/domains/{}", domain["id"].as_str().unwrap()), server.key()).await;
    assert_ok(status, &body, 200, "the domain reads");
    let (status, _) = server.stop().await;
    assert!(status.success(), "{status}");

    // The store now holds none of them in the clear (PostgreSQL: every row; sled: every
    // live record, read through sled itself: the files may still hold the superseded
    // versions until sled reuses their space, see SECURITY.md).
    let ed25519_public = Ed25519KeyPair::from_pkcs8(&plain.ed25519).unwrap();
    let ed25519_public = aws_lc_rs::signature::KeyPair::public_key(&ed25519_public).as_ref().to_vec();
    let (store, what) = match data_dir.database_url() {
        Some(url) => (raw_store::dump_database(&url).await.into_bytes(), "the database"),
        None => (live_sled_values(&data_dir.path().join("store")), "the live sled records"),
    };
    assert!(contains(&store, b"tdsealv1"), "{what} holds sealed values");
    assert!(!contains(&store, BASE64.encode(&plain.rsa).as_bytes()), "{what} holds the old RSA key");
    assert_no_private_keys(&store, what, &ed25519_public);
    assert_no_webhook_secret(&store, what, &plain.secret);
    assert_no_webhook_secret(&store, what, &plain.previous);
    assert_no_tracking_key(&store, what, TRACKING_KEY);

    // And what is sealed is what was there: the store opened with the generated key gives
    // back the plaintext values.
    let key = std::fs::read_to_string(data_dir.path().join("secret.key")).unwrap();
    let sealer = Sealer::new(&SealingKey::from_base64(&key).unwrap());
    let domain_id = DomainId::parse(domain["id"].as_str().unwrap()).unwrap();
    let webhook_id = WebhookId::parse(&webhook).unwrap();
    let store: Box<dyn tidings_core::ports::Store> = match data_dir.database_url() {
        Some(url) => Box::new(
            tidings_storage_postgres::PgStore::connect(&url, Default::default(), sealer).await.expect("connect"),
        ),
        None => Box::new(tidings_storage_sled::SledStore::open(data_dir.path().join("store"), sealer).expect("open")),
    };
    let workspace: WorkspaceId = store.list_workspaces().await.unwrap()[0].id;
    let stored = store.get_domain(workspace, domain_id).await.unwrap().expect("the domain");
    assert_eq!(stored.dkim.rsa_private_pkcs8.expose(), &plain.rsa);
    assert_eq!(stored.dkim.ed25519_private_pkcs8.expose(), &plain.ed25519);
    let hook = store.get_webhook(workspace, webhook_id).await.unwrap().expect("the webhook");
    assert_eq!(hook.secret.expose(), plain.secret);
    assert_eq!(hook.previous_secret.expect("the previous secret").0.expose(), plain.previous);
    let tracking = store.ensure_secret(TRACKING_KEY_SECRET, &Secret::new(vec![0; 32])).await.unwrap();
    assert_eq!(tracking.expose(), &TRACKING_KEY.to_vec());
}

/// Every value of the sled store's live records, concatenated.
fn live_sled_values(store: &Path) -> Vec<u8> {
    let db = open_sled(store).expect("open the sled store");
    let tree = db.open_tree("tidings").unwrap();
    tree.iter().flat_map(|entry| entry.unwrap().1.to_vec()).collect()
}

/// Opens a sled database directly, without sled's own flusher thread, whose late exit could
/// keep the directory locked a moment after the database is dropped.
fn open_sled(path: impl AsRef<Path>) -> sled::Result<sled::Db> {
    sled::Config::new().path(path).flush_every_ms(None).open()
}
