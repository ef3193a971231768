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
//!
//! A key rotation ([`tidings_core::sealing::rotation`]): nodes run with the new key and the
//! previous one; [`reseal_batch`] seals a batch of rows again with the new key in a
//! transaction holding their row locks, and [`replace_key_check`] ends it.

use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tidings_core::model::{Domain, WebhookEndpoint};
use tidings_core::ports::{Page, ResealBatch, ResealCursor, SecretHolder, SecretResealStore, StoreError, StoreResult};
use tidings_core::sealing::{SEALED_TEXT_PREFIX, SealError, Sealed, Sealer, SecretFields, is_sealed, secret_label};
use tokio_postgres::{Client, Row};
use uuid::Uuid;

use crate::db::{db_error, decode, doc, execute, query};
use crate::migrate::LOCK_KEY;
use crate::{PgError, PgStore};

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

/// Re-seals up to `limit` records of `kind` after `after` in one transaction that locks the
/// rows it reads (`FOR UPDATE`), so that a node's concurrent update either comes before (and
/// is what gets re-sealed) or waits and comes after (and is kept as it wrote it).
pub(crate) async fn reseal_batch(
    store: &PgStore,
    kind: SecretHolder,
    after: Option<&ResealCursor>,
    limit: usize,
) -> StoreResult<ResealBatch> {
    let sealer = &store.sealer;
    let mut client = store.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let mut done = ResealBatch { examined: 0, resealed: 0, next: None };
    let mut last: Option<Vec<u8>> = None;
    match kind {
        SecretHolder::Domains | SecretHolder::Webhooks => {
            let table = if kind == SecretHolder::Domains { "domains" } else { "webhooks" };
            let after = match after {
                Some(cursor) => Some(Uuid::from_slice(&cursor.0).map_err(|e| StoreError::corrupt("a cursor", e))?),
                None => None,
            };
            let select = format!(
                "SELECT id, doc FROM {table} WHERE $1::uuid IS NULL OR id > $1 ORDER BY id LIMIT $2 FOR UPDATE"
            );
            let update = format!("UPDATE {table} SET doc = $2 WHERE id = $1");
            for row in query(&tx, &select, &[&after, &limit_of(limit)]).await? {
                let id: Uuid = row.try_get("id").map_err(|e| StoreError::corrupt(table, e))?;
                done.examined += 1;
                last = Some(id.as_bytes().to_vec());
                let resealed = if kind == SecretHolder::Domains {
                    resealed_doc::<Domain>(sealer, &row)?
                } else {
                    resealed_doc::<WebhookEndpoint>(sealer, &row)?
                };
                if let Some(value) = resealed {
                    execute(&tx, &update, &[&id, &value]).await?;
                    done.resealed += 1;
                }
            }
        }
        SecretHolder::StoreSecrets => {
            let after = match after {
                Some(cursor) => {
                    Some(String::from_utf8(cursor.0.clone()).map_err(|e| StoreError::corrupt("a cursor", e))?)
                }
                None => None,
            };
            let select = "SELECT name, value FROM secrets WHERE $1::text IS NULL OR name COLLATE \"C\" > $1 \
                          ORDER BY name COLLATE \"C\" LIMIT $2 FOR UPDATE";
            for row in query(&tx, select, &[&after, &limit_of(limit)]).await? {
                let name: String = row.try_get("name").map_err(|e| StoreError::corrupt("secrets", e))?;
                let value: Vec<u8> = row.try_get("value").map_err(|e| StoreError::corrupt("secrets", e))?;
                done.examined += 1;
                if let Some(value) = sealer.reseal(&secret_label(&name), &value).map_err(seal_error)? {
                    execute(&tx, "UPDATE secrets SET value = $2 WHERE name = $1", &[&name, &value]).await?;
                    done.resealed += 1;
                }
                last = Some(name.into_bytes());
            }
        }
    }
    tx.commit().await.map_err(db_error)?;
    if done.examined == limit {
        done.next = last.map(ResealCursor);
    }
    Ok(done)
}

fn limit_of(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// The row's `doc` with its secrets sealed with the key, if any was not.
fn resealed_doc<R>(sealer: &Sealer, row: &Row) -> StoreResult<Option<serde_json::Value>>
where
    R: SecretFields + Clone + Serialize + DeserializeOwned,
{
    let stored: Sealed<R> = decode(row, "record")?;
    match sealer.reseal_record(&stored).map_err(seal_error)? {
        Some(resealed) => doc(&resealed).map(Some),
        None => Ok(None),
    }
}

/// Replaces the key check with the key's own.
pub(crate) async fn replace_key_check(store: &PgStore) -> StoreResult<()> {
    let check = store.sealer.key_check().map_err(seal_error)?;
    let client = store.client().await?;
    execute(
        &client,
        "INSERT INTO sealing (key_check) VALUES ($1) ON CONFLICT (singleton) DO UPDATE SET key_check = EXCLUDED.key_check",
        &[&check],
    )
    .await?;
    Ok(())
}

#[async_trait]
impl SecretResealStore for PgStore {
    async fn reseal_secrets(
        &self,
        kind: SecretHolder,
        after: Option<&ResealCursor>,
        limit: usize,
    ) -> StoreResult<ResealBatch> {
        reseal_batch(self, kind, after, limit.max(1)).await
    }

    async fn replace_key_check(&self) -> StoreResult<()> {
        replace_key_check(self).await
    }
}
