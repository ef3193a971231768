//! Secrets sealed at rest ([`tidings_core::sealing`]): the `doc` of `domains` and `webhooks`
//! holds its secrets sealed, `secrets.value` is sealed, and the one row of `sealing` holds
//! the key check.
//!
//! At connect, after the migrations, [`seal_at_connect`] checks the key against the key
//! check (a node given another key does not start) and, in one transaction under the
//! migrations' advisory lock, seals whatever a version before sealing stored in plaintext
//! and writes the key check if there was none. Reads still take a plaintext value as it is,
//! but after the first node's start none is left. Nodes of a version before sealing cannot
//! read sealed secrets: upgrade every node together.

use serde::Serialize;
use serde::de::DeserializeOwned;
use tidings_core::model::{Domain, WebhookEndpoint};
use tidings_core::ports::{Page, StoreError, StoreResult};
use tidings_core::sealing::{SEALED_TEXT_PREFIX, SealError, Sealed, Sealer, SecretFields, is_sealed, secret_label};
use tokio_postgres::{Client, Row};
use uuid::Uuid;

use crate::PgError;
use crate::db::{decode, doc};
use crate::migrate::LOCK_KEY;

/// A sealing failure met while reading or writing: after the key check at start, the data
/// was altered.
pub(crate) fn seal_error(e: SealError) -> StoreError {
    StoreError::Corrupt(tidings_core::Cause::new(e))
}

/// The JSONB form of `record` with its secrets sealed.
pub(crate) fn sealed_doc<R: SecretFields + Clone + Serialize>(
    sealer: &Sealer,
    record: &R,
) -> StoreResult<serde_json::Value> {
    doc(&sealer.seal_record(record).map_err(seal_error)?)
}

/// The record in a row's `doc`, its secrets opened.
pub(crate) fn open_row<R: SecretFields + DeserializeOwned>(sealer: &Sealer, row: &Row, what: &str) -> StoreResult<R> {
    sealer.open_record(decode::<Sealed<R>>(row, what)?).map_err(seal_error)
}

/// Every row's record, opened.
pub(crate) fn open_rows<R: SecretFields + DeserializeOwned>(
    sealer: &Sealer,
    rows: &[Row],
    what: &str,
) -> StoreResult<Vec<R>> {
    rows.iter().map(|row| open_row(sealer, row, what)).collect()
}

/// A page of stored records, opened.
pub(crate) fn open_page<R: SecretFields>(sealer: &Sealer, page: Page<Sealed<R>>) -> StoreResult<Page<R>> {
    let items = page.items.into_iter().map(|s| sealer.open_record(s).map_err(seal_error)).collect::<Result<_, _>>()?;
    Ok(Page { items, has_more: page.has_more })
}

/// Checks `sealer` against the key check, seals what is stored in plaintext and writes the
/// key check if missing; returns how many records and secrets it sealed.
pub(crate) async fn seal_at_connect(client: &mut Client, sealer: &Sealer) -> Result<usize, PgError> {
    let db = PgError::Sealing;
    let tx = client.transaction().await.map_err(|e| db(e.into()))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY]).await.map_err(|e| db(e.into()))?;
    let check = tx.query_opt("SELECT key_check FROM sealing", &[]).await.map_err(|e| db(e.into()))?;
    if let Some(row) = &check {
        let stored: Vec<u8> = row.try_get(0).map_err(|e| db(e.into()))?;
        sealer.verify_key_check(&stored).map_err(PgError::WrongKey)?;
    }
    let prefix = format!("{SEALED_TEXT_PREFIX}%");
    let mut sealed = 0;
    // Only rows with a secret not in the sealed format: after the first start, none.
    let domains = "SELECT id, doc FROM domains WHERE NOT (COALESCE(doc->'dkim'->>'rsa_private_pkcs8', '') LIKE $1 \
                   AND COALESCE(doc->'dkim'->>'ed25519_private_pkcs8', '') LIKE $1) FOR UPDATE";
    sealed += reseal::<Domain>(&tx, sealer, domains, "UPDATE domains SET doc = $2 WHERE id = $1", &prefix).await?;
    let webhooks = "SELECT id, doc FROM webhooks WHERE NOT (COALESCE(doc->>'secret', '') LIKE $1 \
                    AND COALESCE(doc->'previous_secret'->>0, $1) LIKE $1) FOR UPDATE";
    sealed +=
        reseal::<WebhookEndpoint>(&tx, sealer, webhooks, "UPDATE webhooks SET doc = $2 WHERE id = $1", &prefix).await?;
    for row in tx.query("SELECT name, value FROM secrets FOR UPDATE", &[]).await.map_err(|e| db(e.into()))? {
        let (name, value): (String, Vec<u8>) =
            (row.try_get(0).map_err(|e| db(e.into()))?, row.try_get(1).map_err(|e| db(e.into()))?);
        if !is_sealed(&value) {
            let value = sealer.seal(&secret_label(&name), &value).map_err(|e| db(e.into()))?;
            tx.execute("UPDATE secrets SET value = $2 WHERE name = $1", &[&name, &value])
                .await
                .map_err(|e| db(e.into()))?;
            sealed += 1;
        }
    }
    if check.is_none() {
        let value = sealer.key_check().map_err(|e| db(e.into()))?;
        tx.execute("INSERT INTO sealing (key_check) VALUES ($1)", &[&value]).await.map_err(|e| db(e.into()))?;
    }
    tx.commit().await.map_err(|e| db(e.into()))?;
    Ok(sealed)
}

/// Seals the records `select` finds (`id`, `doc`) with `update` (`$1` id, `$2` doc).
async fn reseal<R>(
    tx: &tokio_postgres::Transaction<'_>,
    sealer: &Sealer,
    select: &str,
    update: &str,
    prefix: &str,
) -> Result<usize, PgError>
where
    R: SecretFields + Clone + Serialize + DeserializeOwned,
{
    let db = PgError::Sealing;
    let mut count = 0;
    for row in tx.query(select, &[&prefix]).await.map_err(|e| db(e.into()))? {
        let id: Uuid = row.try_get("id").map_err(|e| db(e.into()))?;
        let stored: Sealed<R> = decode(&row, "record").map_err(|e| db(e.into()))?;
        if stored.is_sealed() {
            continue;
        }
        let record = sealer.open_record(stored).map_err(|e| db(e.into()))?;
        let value = sealed_doc(sealer, &record).map_err(|e| db(e.into()))?;
        tx.execute(update, &[&id, &value]).await.map_err(|e| db(e.into()))?;
        count += 1;
    }
    Ok(count)
}
