//! Activity counters (`tidings_core::activity`) in `activity_hours`: one row per workspace,
//! hour and sending domain (migration `0010_activity`).
//!
//! The grouped statements of `message_writes.rs` carry each write's delta as arrays, one
//! element per (message, hour) ([`ActivityColumns`]), and add them in a `WITH` item
//! ([`upsert_cte`]) that keeps only the messages the statement wrote, sums them per row and
//! upserts each row once: `ON CONFLICT DO UPDATE` adds the sums. So a group of 200 events of
//! one busy domain locks its row once, and the counts commit with the events or not at all.
//! Rows are upserted in key order, so two statements (two nodes) that share rows lock them in
//! the same order instead of deadlocking.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tidings_core::activity::{ActivityCounts, ActivityDelta, ActivityKey, HourStart, HourlyActivity};
use tidings_core::ids::{DomainId, WorkspaceId};
use tidings_core::ports::{ActivityStore, StoreError, StoreResult};
use uuid::Uuid;

use crate::PgStore;
use crate::db::{Param, execute, limit as sql_limit, query, uuid};

const COUNTERS: usize = ActivityCounts::NAMES.len();

/// A counter as a `bigint`: what one statement adds is far from 2^63.
fn bigint(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Deltas as column arrays: the message each belongs to (whose write must happen for it to
/// count), its row, and one array per counter.
#[derive(Default)]
pub(crate) struct ActivityColumns {
    messages: Vec<Uuid>,
    workspaces: Vec<Uuid>,
    hours: Vec<chrono::DateTime<chrono::Utc>>,
    domains: Vec<Uuid>,
    counters: [Vec<i64>; COUNTERS],
}

impl ActivityColumns {
    /// Adds the delta of the write of message `message`.
    pub(crate) fn push(&mut self, message: Uuid, delta: &ActivityDelta) {
        for (key, counts) in delta.entries() {
            self.messages.push(message);
            self.workspaces.push(uuid(key.workspace.0));
            self.hours.push(key.hour.start());
            self.domains.push(uuid(key.domain.0));
            for (column, n) in self.counters.iter_mut().zip(counts.to_array()) {
                column.push(bigint(n));
            }
        }
    }

    /// The parameters of [`upsert_cte`], in its order.
    pub(crate) fn params(&self) -> Vec<Param<'_>> {
        let mut params: Vec<Param<'_>> = vec![&self.messages, &self.workspaces, &self.hours, &self.domains];
        params.extend(self.counters.iter().map(|c| c as Param<'_>));
        params
    }
}

/// The `WITH` item (after a comma) that adds the deltas of parameters `$first` to
/// `$first + PARAMS - 1` whose message is in the CTE `written`.
pub(crate) fn upsert_cte(first: usize, written: &str) -> String {
    let p = |i: usize| format!("${}", first + i);
    let names = ActivityCounts::NAMES;
    let arrays: Vec<String> = (0..COUNTERS).map(|i| format!("{}::bigint[]", p(4 + i))).collect();
    let sums: Vec<String> = names.iter().map(|n| format!("sum(a.{n})::bigint")).collect();
    let adds: Vec<String> = names.iter().map(|n| format!("{n} = t.{n} + excluded.{n}")).collect();
    format!(
        "activity AS (
             INSERT INTO activity_hours AS t (workspace_id, hour, domain_id, {columns})
             SELECT a.workspace_id, a.hour, a.domain_id, {sums}
             FROM unnest({messages}::uuid[], {workspaces}::uuid[], {hours}::timestamptz[], {domains}::uuid[], {arrays})
                  AS a(message_id, workspace_id, hour, domain_id, {columns})
             JOIN {written} w ON w.id = a.message_id
             GROUP BY a.workspace_id, a.hour, a.domain_id
             ORDER BY a.workspace_id, a.hour, a.domain_id
             ON CONFLICT (workspace_id, hour, domain_id) DO UPDATE SET {adds}
         )",
        columns = names.join(", "),
        sums = sums.join(", "),
        messages = p(0),
        workspaces = p(1),
        hours = p(2),
        domains = p(3),
        arrays = arrays.join(", "),
        adds = adds.join(", "),
    )
}

/// Adds rows already summed (`sum_deltas`) inside the caller's transaction: for writes that
/// are all or nothing by themselves (`create_messages`).
pub(crate) async fn add(client: &impl GenericClient, sums: &[(ActivityKey, ActivityCounts)]) -> StoreResult<()> {
    if sums.is_empty() {
        return Ok(());
    }
    let mut columns = ActivityColumns::default();
    for (key, counts) in sums {
        columns.messages.push(Uuid::nil());
        columns.workspaces.push(uuid(key.workspace.0));
        columns.hours.push(key.hour.start());
        columns.domains.push(uuid(key.domain.0));
        for (column, n) in columns.counters.iter_mut().zip(counts.to_array()) {
            column.push(bigint(n));
        }
    }
    let sql = format!("WITH written AS (SELECT $1::uuid AS id), {} SELECT 1", upsert_cte(2, "written"));
    let nil = Uuid::nil();
    let mut params: Vec<Param<'_>> = vec![&nil];
    params.extend(columns.params());
    execute(client, &sql, &params).await.map(drop)
}

#[async_trait]
impl ActivityStore for PgStore {
    async fn activity(
        &self,
        workspace: WorkspaceId,
        from: HourStart,
        until: HourStart,
    ) -> StoreResult<Vec<HourlyActivity>> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT hour, domain_id, {} FROM activity_hours
             WHERE workspace_id = $1 AND hour >= $2 AND hour < $3 ORDER BY hour, domain_id",
            ActivityCounts::NAMES.join(", ")
        );
        let rows = query(&client, &sql, &[&uuid(workspace.0), &from.start(), &until.start()]).await?;
        rows.iter()
            .map(|row| {
                let bad = |e| StoreError::corrupt("activity counters", e);
                let hour: chrono::DateTime<chrono::Utc> = row.try_get(0).map_err(bad)?;
                let domain: Uuid = row.try_get(1).map_err(bad)?;
                let mut counters = [0u64; COUNTERS];
                for (i, n) in counters.iter_mut().enumerate() {
                    let value: i64 = row.try_get(2 + i).map_err(bad)?;
                    *n = u64::try_from(value).unwrap_or(0);
                }
                Ok(HourlyActivity {
                    domain: DomainId(ulid::Ulid::from_bytes(*domain.as_bytes())),
                    hour: HourStart::of(hour),
                    counts: ActivityCounts::from_array(counters),
                })
            })
            .collect()
    }

    async fn purge_activity(&self, before: HourStart, limit: usize) -> StoreResult<usize> {
        let client = self.client().await?;
        // SKIP LOCKED: rows a write holds are its current hours, never old ones; nodes
        // purging at once share the work.
        let sql = "DELETE FROM activity_hours t USING (
                       SELECT workspace_id, hour, domain_id FROM activity_hours WHERE hour < $1
                       ORDER BY hour, workspace_id, domain_id LIMIT $2 FOR UPDATE SKIP LOCKED
                   ) old
                   WHERE t.workspace_id = old.workspace_id AND t.hour = old.hour AND t.domain_id = old.domain_id";
        let n = execute(&client, sql, &[&before.start(), &sql_limit(limit)]).await?;
        Ok(crate::db::count(n))
    }
}
