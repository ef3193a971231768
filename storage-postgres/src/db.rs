//! What every resource module shares: pooled clients, id and JSON conversions, error
//! mapping and newest-first pages.

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Object};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tidings_core::ports::{Page, StoreError, StoreResult};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use ulid::Ulid;
use uuid::Uuid;

use crate::PgStore;

/// A parameter of a statement.
pub(crate) type Param<'a> = &'a (dyn ToSql + Sync);

impl PgStore {
    /// A connection from the pool.
    pub(crate) async fn client(&self) -> StoreResult<Object> {
        self.pool.get().await.map_err(|e| StoreError::unavailable("no database connection", e))
    }
}

/// The UUID column value of a ULID id (same 16 bytes, so the same order).
pub(crate) fn uuid(id: Ulid) -> Uuid {
    Uuid::from_bytes(id.to_bytes())
}

/// Maps a database error to what a caller can act on: unique violations are `Conflict`, a
/// missing referenced row `NotFound`, anything else `Unavailable`.
pub(crate) fn db_error(e: tokio_postgres::Error) -> StoreError {
    let Some(db) = e.as_db_error() else {
        return StoreError::unavailable("database", e);
    };
    match db.code() {
        c if *c == SqlState::UNIQUE_VIOLATION => {
            StoreError::Conflict(db.constraint().map_or_else(|| db.message().to_owned(), |c| format!("{c} exists")))
        }
        c if *c == SqlState::FOREIGN_KEY_VIOLATION => StoreError::NotFound,
        _ => StoreError::unavailable("database", e),
    }
}

/// The JSONB form of a record.
pub(crate) fn doc<T: Serialize>(value: &T) -> StoreResult<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| StoreError::corrupt("cannot encode a record", e))
}

/// The JSON form of a time, for `jsonb_set` of a record's `next_attempt_at`.
pub(crate) fn json_time(at: DateTime<Utc>) -> StoreResult<serde_json::Value> {
    doc(&at)
}

/// The text of a unit enum as serde writes it (`Queued`, `hard_bounce`...), for columns.
pub(crate) fn tag<T: Serialize>(value: &T) -> StoreResult<String> {
    match doc(value)? {
        serde_json::Value::String(text) => Ok(text),
        other => Err(StoreError::Corrupt(format!("not a unit enum: {other}").into())),
    }
}

/// The record in a row's `doc` column.
pub(crate) fn decode<T: DeserializeOwned>(row: &Row, what: &str) -> StoreResult<T> {
    let value: serde_json::Value = row.try_get("doc").map_err(|e| StoreError::corrupt(what, e))?;
    serde_json::from_value(value).map_err(|e| StoreError::corrupt(what, e))
}

/// Decodes every row.
pub(crate) fn decode_all<T: DeserializeOwned>(rows: &[Row], what: &str) -> StoreResult<Vec<T>> {
    rows.iter().map(|row| decode(row, what)).collect()
}

/// A newest-first page of `table`'s records whose `columns` equal `values`, that pass the
/// constant condition `extra` (e.g. `NOT revoked`, so a partial index applies), after
/// `cursor`. Reads `limit + 1` rows from an index on the columns and `id DESC`.
pub(crate) async fn newest_first<T: DeserializeOwned>(
    client: &impl GenericClient,
    table: &str,
    filters: &[(&str, Param<'_>)],
    extra: Option<&str>,
    cursor: Option<Ulid>,
    limit: usize,
) -> StoreResult<Page<T>> {
    let conditions: Vec<(String, Param<'_>)> = filters.iter().map(|(c, v)| (format!("{c} = {{}}"), *v)).collect();
    newest_first_where(client, table, &conditions, extra, cursor, limit).await
}

/// [`newest_first`] with conditions written out: each is SQL with one `{}` where its
/// parameter goes (e.g. `doc -> 'tags' @> {}`).
pub(crate) async fn newest_first_where<T: DeserializeOwned>(
    client: &impl GenericClient,
    table: &str,
    filters: &[(String, Param<'_>)],
    extra: Option<&str>,
    cursor: Option<Ulid>,
    limit: usize,
) -> StoreResult<Page<T>> {
    let mut conditions: Vec<String> =
        filters.iter().enumerate().map(|(i, (c, _))| c.replace("{}", &format!("${}", i + 1))).collect();
    let mut params: Vec<Param<'_>> = filters.iter().map(|(_, v)| *v).collect();
    conditions.extend(extra.map(str::to_owned));
    let cursor = cursor.map(uuid);
    if let Some(cursor) = &cursor {
        params.push(cursor);
        conditions.push(format!("id < ${}", params.len()));
    }
    let fetch = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
    params.push(&fetch);
    let sql = format!(
        "SELECT doc FROM {table} WHERE {} ORDER BY id DESC LIMIT ${}",
        if conditions.is_empty() { "TRUE".to_owned() } else { conditions.join(" AND ") },
        params.len()
    );
    let rows = query(client, &sql, &params).await?;
    let mut items: Vec<T> = decode_all(&rows, table)?;
    let has_more = items.len() > limit;
    items.truncate(limit);
    Ok(Page { items, has_more })
}

/// Runs a (cached) statement and returns its rows.
pub(crate) async fn query(client: &impl GenericClient, sql: &str, params: &[Param<'_>]) -> StoreResult<Vec<Row>> {
    let statement = client.prepare_cached(sql).await.map_err(db_error)?;
    client.query(&statement, params).await.map_err(db_error)
}

/// Runs a (cached) statement and returns its row, if any.
pub(crate) async fn query_opt(
    client: &impl GenericClient,
    sql: &str,
    params: &[Param<'_>],
) -> StoreResult<Option<Row>> {
    let statement = client.prepare_cached(sql).await.map_err(db_error)?;
    client.query_opt(&statement, params).await.map_err(db_error)
}

/// Runs a (cached) statement and returns how many rows it changed.
pub(crate) async fn execute(client: &impl GenericClient, sql: &str, params: &[Param<'_>]) -> StoreResult<u64> {
    let statement = client.prepare_cached(sql).await.map_err(db_error)?;
    client.execute(&statement, params).await.map_err(db_error)
}

/// Counts as `usize`.
pub(crate) fn count(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// A `LIMIT` parameter.
pub(crate) fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
