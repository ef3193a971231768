//! Schema migrations: the SQL files of `migrations/`, embedded, applied in order, each in
//! its own transaction and recorded in `schema_migrations`. A session advisory lock makes
//! nodes that start together take turns, so each migration runs exactly once.

use tokio_postgres::Client;

use crate::PgError;

/// Every migration, oldest first. Never edit one that has shipped: add another. Each is
/// applied once, by name.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_initial", include_str!("../migrations/0001_initial.sql")),
    ("0002_limits", include_str!("../migrations/0002_limits.sql")),
    ("0003_settings", include_str!("../migrations/0003_settings.sql")),
    ("0004_message_labels", include_str!("../migrations/0004_message_labels.sql")),
    ("0005_retention", include_str!("../migrations/0005_retention.sql")),
    ("0006_sealing", include_str!("../migrations/0006_sealing.sql")),
    ("0007_sessions", include_str!("../migrations/0007_sessions.sql")),
    ("0008_recipients", include_str!("../migrations/0008_recipients.sql")),
    ("0009_message_search", include_str!("../migrations/0009_message_search.sql")),
    ("0010_activity", include_str!("../migrations/0010_activity.sql")),
    ("0011_deliveries_by_message", include_str!("../migrations/0011_deliveries_by_message.sql")),
    ("0012_webhook_format", include_str!("../migrations/0012_webhook_format.sql")),
    ("0013_search_text", include_str!("../migrations/0013_search_text.sql")),
    ("0014_event_feed", include_str!("../migrations/0014_event_feed.sql")),
    ("0015_site_limits", include_str!("../migrations/0015_site_limits.sql")),
    ("0016_domains_settled", include_str!("../migrations/0016_domains_settled.sql")),
    ("0017_dkim_rotation", include_str!("../migrations/0017_dkim_rotation.sql")),
    ("0018_reputation", include_str!("../migrations/0018_reputation.sql")),
    ("0019_inbound", include_str!("../migrations/0019_inbound.sql")),
];

/// The advisory lock key of Tidings migrations (any constant; "tidings" in ASCII).
pub(crate) const LOCK_KEY: i64 = 0x0074_6964_696e_6773;

/// Refuses a schema name that would need quoting (it goes into `search_path` and DDL).
pub(crate) fn check_schema_name(schema: &str) -> Result<(), PgError> {
    let plain = !schema.is_empty()
        && schema.len() < 64
        && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && schema.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain { Ok(()) } else { Err(PgError::Options(format!("invalid schema name {schema:?}"))) }
}

/// Applies the pending migrations (creating `schema` first if given).
pub(crate) async fn run(client: &mut Client, schema: Option<&str>) -> Result<(), PgError> {
    client.execute("SELECT pg_advisory_lock($1)", &[&LOCK_KEY]).await.map_err(PgError::Migrate)?;
    let result = apply(client, schema).await;
    let unlocked = client.execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY]).await.map_err(PgError::Migrate);
    result.and(unlocked.map(drop))
}

async fn apply(client: &mut Client, schema: Option<&str>) -> Result<(), PgError> {
    if let Some(schema) = schema {
        client.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}")).await.map_err(PgError::Migrate)?;
    }
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                version    text PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await
        .map_err(PgError::Migrate)?;
    for (version, sql) in MIGRATIONS {
        let failed = |source| PgError::Migration { version, source };
        let tx = client.transaction().await.map_err(PgError::Migrate)?;
        let done = tx.query_opt("SELECT 1 FROM schema_migrations WHERE version = $1", &[version]).await;
        if done.map_err(PgError::Migrate)?.is_some() {
            continue;
        }
        tx.batch_execute(sql).await.map_err(failed)?;
        tx.execute("INSERT INTO schema_migrations (version) VALUES ($1)", &[version]).await.map_err(failed)?;
        tx.commit().await.map_err(failed)?;
    }
    Ok(())
}
