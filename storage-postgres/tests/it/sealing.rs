//! Secrets sealed at rest on PostgreSQL: what the rows hold, what another key gets, and a
//! database written before sealing existed.

use crate::common::{database_url, fresh_store, options, reachable};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use tidings_core::model::{Domain, WebhookEndpoint, WebhookSecret, Workspace};
use tidings_core::ports::{DomainStore, SecretStore, WebhookStore, WorkspaceStore};
use tidings_core::sealing::Sealer;
use tidings_core::secret::{Secret, SecretName};
use tidings_storage_postgres::PgStore;
use tidings_testing::fixtures::{api_key, domain, sealer, sealing_key, webhook, workspace};

const NAME: SecretName = SecretName::new("tracking_key");
const TRACKING: &[u8] = b"a tracking key only this test has";

fn records() -> (Workspace, Domain, WebhookEndpoint) {
    let ws = workspace();
    let mut dom = domain(ws.id, "sealed.example");
    dom.dkim.rsa_private_pkcs8 = Secret::new(b"\x30\x82 the RSA private key document of the test".to_vec());
    dom.dkim.ed25519_private_pkcs8 = Secret::new(b"\x30\x53 the Ed25519 private key document of the test".to_vec());
    let mut hook = webhook(ws.id);
    hook.previous_secret = Some((WebhookSecret::generate(&tidings_core::ports::SystemRandom), hook.created_at));
    (ws, dom, hook)
}

/// Every form in which a secret of these records could show in a dump (`bytea` as hex).
fn secrets_of(dom: &Domain, hook: &WebhookEndpoint) -> Vec<String> {
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let mut all = Vec::new();
    for key in [&dom.dkim.rsa_private_pkcs8, &dom.dkim.ed25519_private_pkcs8] {
        all.push(BASE64.encode(key.expose()));
        all.push(hex(key.expose()));
    }
    for secret in [&hook.secret, &hook.previous_secret.as_ref().unwrap().0] {
        all.push(secret.expose().to_owned());
        all.push(hex(&secret.key_bytes()));
    }
    all.push(hex(TRACKING));
    all
}

async fn fill(store: &PgStore, ws: &Workspace, dom: &Domain, hook: &WebhookEndpoint) {
    store.create_workspace(ws, &api_key(ws.id)).await.unwrap();
    store.insert_domain(dom).await.unwrap();
    store.insert_webhook(hook).await.unwrap();
    store.ensure_secret(NAME, &Secret::new(TRACKING.to_vec())).await.unwrap();
}

/// A client on `schema`.
pub(crate) async fn client(url: &str, schema: &str) -> tokio_postgres::Client {
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.options(format!("-c search_path={schema}"));
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

/// Every row of the tables holding secrets, as text.
async fn dump(client: &tokio_postgres::Client) -> String {
    let mut text = String::new();
    for table in ["domains", "webhooks", "secrets", "sealing"] {
        for row in client.query(&format!("SELECT t::text FROM {table} t"), &[]).await.unwrap() {
            text.push_str(&row.get::<_, String>(0));
            text.push('\n');
        }
    }
    text
}

#[tokio::test]
async fn secrets_are_sealed_in_the_rows_and_read_back_with_the_key() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (store, guard) = fresh_store(&url).await;
    let (ws, dom, hook) = records();
    fill(&store, &ws, &dom, &hook).await;
    let rows = dump(&client(&url, &guard.schema).await).await;
    assert!(rows.contains("sealed.example") && rows.contains("tdsealv1"), "the search reads the records");
    for secret in secrets_of(&dom, &hook) {
        assert!(!rows.contains(&secret), "a secret in the clear: {secret}");
    }

    let store = PgStore::connect(&url, options(&guard.schema), sealer()).await.unwrap();
    assert_eq!(store.sealed_at_connect(), 0);
    assert_eq!(store.get_domain(ws.id, dom.id).await.unwrap(), Some(dom.clone()));
    assert_eq!(store.find_domain_by_name(ws.id, &dom.name).await.unwrap(), Some(dom.clone()));
    assert_eq!(store.get_webhook(ws.id, hook.id).await.unwrap(), Some(hook.clone()));
    assert_eq!(store.list_enabled_webhooks(ws.id).await.unwrap(), vec![hook.clone()]);
    assert_eq!(store.ensure_secret(NAME, &Secret::new(vec![1; 32])).await.unwrap().expose(), TRACKING);
    let mut updated = dom.clone();
    updated.open_tracking = true;
    store.update_domain(&updated).await.unwrap();
    assert_eq!(store.get_domain(ws.id, dom.id).await.unwrap(), Some(updated));
}

#[tokio::test]
async fn another_key_does_not_connect() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (store, guard) = fresh_store(&url).await;
    let (ws, dom, hook) = records();
    fill(&store, &ws, &dom, &hook).await;
    let err = PgStore::connect(&url, options(&guard.schema), Sealer::new(&sealing_key([1; 32]))).await.unwrap_err();
    assert!(err.is_wrong_key(), "{err}");
    assert_eq!(store.get_webhook(ws.id, hook.id).await.unwrap(), Some(hook), "nothing was changed");
}

#[tokio::test]
async fn a_database_written_before_sealing_is_read_and_sealed_at_connect() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (store, guard) = fresh_store(&url).await;
    let (ws, dom, hook) = records();
    fill(&store, &ws, &dom, &hook).await;
    drop(store);
    // As a version before sealing wrote it: the records' serde form, the secret's bytes, no
    // key check.
    let client = client(&url, &guard.schema).await;
    client.execute("UPDATE domains SET doc = $1", &[&serde_json::to_value(&dom).unwrap()]).await.unwrap();
    client.execute("UPDATE webhooks SET doc = $1", &[&serde_json::to_value(&hook).unwrap()]).await.unwrap();
    client.execute("UPDATE secrets SET value = $1", &[&TRACKING]).await.unwrap();
    client.execute("DELETE FROM sealing", &[]).await.unwrap();

    let store = PgStore::connect(&url, options(&guard.schema), sealer()).await.unwrap();
    assert_eq!(store.sealed_at_connect(), 3, "the domain, the webhook and the secret");
    assert_eq!(store.get_domain(ws.id, dom.id).await.unwrap(), Some(dom.clone()));
    assert_eq!(store.get_webhook(ws.id, hook.id).await.unwrap(), Some(hook.clone()));
    assert_eq!(store.ensure_secret(NAME, &Secret::new(vec![1; 32])).await.unwrap().expose(), TRACKING);
    let rows = dump(&client).await;
    for secret in secrets_of(&dom, &hook) {
        assert!(!rows.contains(&secret), "a secret left in the clear: {secret}");
    }
    let other = PgStore::connect(&url, options(&guard.schema), Sealer::new(&sealing_key([1; 32]))).await;
    assert!(other.unwrap_err().is_wrong_key(), "the key check is there now");
    let again = PgStore::connect(&url, options(&guard.schema), sealer()).await.unwrap();
    assert_eq!(again.sealed_at_connect(), 0);
}
