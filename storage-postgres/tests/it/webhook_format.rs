//! Webhook endpoints stored before formats existed (no `format` in the document): they read
//! as `tidings`, and migration 0012 writes that into their documents.

use crate::common::{database_url, fresh_store, options, reachable};
use crate::sealing::client;
use tidings_core::model::{WebhookEndpoint, WebhookFormat};
use tidings_core::ports::{WebhookStore, WorkspaceStore};
use tidings_storage_postgres::PgStore;
use tidings_testing::fixtures::{api_key, sealer, webhook, workspace};

#[tokio::test]
async fn an_endpoint_stored_before_formats_reads_as_tidings_and_0012_writes_it() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (store, guard) = fresh_store(&url).await;
    let ws = workspace();
    store.create_workspace(&ws, &api_key(ws.id)).await.unwrap();
    let old = webhook(ws.id);
    let resend = WebhookEndpoint { format: WebhookFormat::Resend, ..webhook(ws.id) };
    store.insert_webhook(&old).await.unwrap();
    store.insert_webhook(&resend).await.unwrap();
    drop(store);

    // As the version before formats left it: no `format` key, and 0012 not applied yet.
    let client = client(&url, &guard.schema).await;
    let old_id = uuid::Uuid::from_bytes(old.id.0.to_bytes());
    client.execute("UPDATE webhooks SET doc = doc - 'format' WHERE id = $1", &[&old_id]).await.unwrap();
    let missing: i64 =
        client.query_one("SELECT count(*) FROM webhooks WHERE NOT doc ? 'format'", &[]).await.unwrap().get(0);
    assert_eq!(missing, 1);
    client.execute("DELETE FROM schema_migrations WHERE version = '0012_webhook_format'", &[]).await.unwrap();

    let store = PgStore::connect(&url, options(&guard.schema), sealer()).await.unwrap();
    let formats: Vec<(String, String)> = client
        .query("SELECT id::text, doc->>'format' FROM webhooks ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert!(formats.iter().all(|(_, f)| f == "tidings" || f == "resend"), "{formats:?}");
    assert_eq!(formats.iter().filter(|(_, f)| f == "resend").count(), 1, "0012 leaves a format alone: {formats:?}");
    assert_eq!(store.get_webhook(ws.id, old.id).await.unwrap(), Some(old), "reads as tidings, as it was");
    assert_eq!(store.get_webhook(ws.id, resend.id).await.unwrap(), Some(resend));
}
