//! New messages and message events, each written by one statement: the message's row (or its
//! change), its event, its idempotency record and its webhook deliveries are the
//! data-modifying parts of one `WITH` query, run outside an explicit transaction, so a send
//! or an event costs one round trip and one commit instead of a `BEGIN`, a statement per row
//! and a `COMMIT`. The writes are committed in groups (`group_commit.rs`): a group's
//! statement takes every write's values as arrays (`unnest`), one element per write, and a
//! write whose group failed is written again alone, as a group of one.
//!
//! Each write's rules are the same alone and in a group:
//! - A new message with an idempotency key is inserted only if its key is free, or held by
//!   a record that expired by the time of the request; otherwise nothing of it is written
//!   and its caller reads the holder. Of two statements with one key, the second waits for
//!   the first's row and then finds the key held.
//! - An event changes its message only if the message is as its writer expects (status,
//!   lease, last event); otherwise nothing of it is written and its caller is told why.
//!   `purge_pending`: retention purges the message (again) once it is old, this event
//!   included. Only a write that checked the last event (an open or a click) may change the
//!   tracking tally; any other keeps the stored one (`EventWrite::expected_last_event_id`).
//! - The activity counters get the deltas of the writes the statement made, summed per
//!   counter row and upserted once per row (`activity.rs`).
//! - Deliveries whose endpoint is gone (or in another workspace) are dropped, as the
//!   reference store does. The statement joins them to their endpoints, read
//!   `FOR KEY SHARE` so that none can be deleted before it commits.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use tidings_core::activity::ActivityDelta;
use tidings_core::model::WebhookDelivery;
use tidings_core::ports::{CreateOutcome, EventWrite, NewMessage, StoreError, StoreResult};
use uuid::Uuid;

use crate::PgStore;
use crate::activity::ActivityColumns;
use crate::db::{Param, decode, doc, query, query_opt, tag, uuid};
use crate::group_commit::{Grouped, Groups, Pending};

/// A webhook delivery's row, and the message whose write carries it.
struct DeliveryRow {
    message: Uuid,
    endpoint: Uuid,
    id: Uuid,
    workspace: Uuid,
    status: String,
    due: Option<DateTime<Utc>>,
    doc: serde_json::Value,
}

fn delivery_rows(message: Uuid, deliveries: &[WebhookDelivery]) -> StoreResult<Vec<DeliveryRow>> {
    deliveries
        .iter()
        .map(|d| {
            Ok(DeliveryRow {
                message,
                endpoint: uuid(d.endpoint_id.0),
                id: uuid(d.id.0),
                workspace: uuid(d.workspace_id.0),
                status: tag(&d.status)?,
                due: d.next_attempt_at,
                doc: doc(d)?,
            })
        })
        .collect()
}

/// Deliveries as column arrays: the last seven parameters of every statement here.
#[derive(Default)]
struct DeliveryColumns<'a> {
    messages: Vec<Uuid>,
    endpoints: Vec<Uuid>,
    ids: Vec<Uuid>,
    workspaces: Vec<Uuid>,
    statuses: Vec<&'a str>,
    due: Vec<Option<DateTime<Utc>>>,
    docs: Vec<&'a serde_json::Value>,
}

impl<'a> DeliveryColumns<'a> {
    fn push(&mut self, rows: &'a [DeliveryRow]) {
        for d in rows {
            self.messages.push(d.message);
            self.endpoints.push(d.endpoint);
            self.ids.push(d.id);
            self.workspaces.push(d.workspace);
            self.statuses.push(&d.status);
            self.due.push(d.due);
            self.docs.push(&d.doc);
        }
    }

    fn params(&self) -> [Param<'_>; 7] {
        [&self.messages, &self.endpoints, &self.ids, &self.workspaces, &self.statuses, &self.due, &self.docs]
    }
}

/// The `WITH` items (after a comma) that insert the deliveries of parameters `$first` to
/// `$first + 6` whose message is in the CTE `written`.
fn deliveries_ctes(first: usize, written: &str) -> String {
    let p = |i: usize| format!("${}", first + i);
    format!(
        "endpoints AS (
             SELECT id, workspace_id FROM webhooks WHERE id = ANY({endpoints}::uuid[]) ORDER BY id FOR KEY SHARE
         ), deliveries AS (
             INSERT INTO webhook_deliveries (id, workspace_id, endpoint_id, status, next_attempt_at, doc)
             SELECT d.id, d.workspace_id, d.endpoint_id, d.status, d.next_attempt_at, d.doc
             FROM unnest({messages}::uuid[], {endpoints}::uuid[], {ids}::uuid[], {workspaces}::uuid[],
                         {statuses}::text[], {due}::timestamptz[], {docs}::jsonb[])
                  AS d(message_id, endpoint_id, id, workspace_id, status, next_attempt_at, doc)
             JOIN endpoints e ON e.id = d.endpoint_id AND e.workspace_id = d.workspace_id
             JOIN {written} w ON w.id = d.message_id
         )",
        messages = p(0),
        endpoints = p(1),
        ids = p(2),
        workspaces = p(3),
        statuses = p(4),
        due = p(5),
        docs = p(6),
    )
}

/// Runs a statement of this module: the ids of the messages it wrote.
async fn written(
    client: &impl deadpool_postgres::GenericClient,
    sql: &str,
    params: &[Param<'_>],
) -> StoreResult<HashSet<Uuid>> {
    let rows = query(client, sql, params).await?;
    rows.iter().map(|row| row.try_get(0).map_err(|e| StoreError::corrupt("message id", e))).collect()
}

// ---------------------------------------------------------------------------------------
// New messages

/// A new message's rows, encoded by its caller.
pub(crate) struct NewRow {
    id: Uuid,
    workspace: Uuid,
    status: &'static str,
    to: String,
    key: Uuid,
    due: Option<DateTime<Utc>>,
    doc: serde_json::Value,
    event_id: Uuid,
    event: serde_json::Value,
    /// Events about single recipients written with it (`NewMessage::recipient_events`).
    recipient_events: Vec<(Uuid, serde_json::Value)>,
    /// Its recipients beside the first, normalized (rows of `message_recipients`).
    other_recipients: Vec<String>,
    idempotency: Option<KeyRow>,
    deliveries: Vec<DeliveryRow>,
    /// What it adds to the activity counters, if written.
    activity: ActivityDelta,
}

/// An idempotency record's row, and the time of the request that takes the key.
struct KeyRow {
    workspace: Uuid,
    key: String,
    expires: DateTime<Utc>,
    doc: serde_json::Value,
    at: DateTime<Utc>,
}

impl NewRow {
    pub(crate) fn of(new: &NewMessage) -> StoreResult<Self> {
        let m = &new.message;
        let idempotency = new.idempotency.as_ref().map(|r| {
            Ok::<_, StoreError>(KeyRow {
                workspace: uuid(r.workspace_id.0),
                key: r.key.as_str().to_owned(),
                expires: r.expires_at,
                doc: doc(r)?,
                at: m.created_at,
            })
        });
        Ok(Self {
            id: uuid(m.id.0),
            workspace: uuid(m.workspace_id.0),
            status: m.status.as_str(),
            to: m.to.normalized(),
            key: uuid(m.api_key_id.0),
            due: m.next_attempt_at,
            doc: doc(m)?,
            event_id: uuid(new.event.id.0),
            event: doc(&new.event)?,
            recipient_events: new
                .recipient_events
                .iter()
                .map(|e| Ok((uuid(e.id.0), doc(e)?)))
                .collect::<StoreResult<_>>()?,
            other_recipients: crate::messages::other_recipients(m),
            idempotency: idempotency.transpose()?,
            deliveries: delivery_rows(uuid(m.id.0), &new.webhook_deliveries)?,
            activity: new.activity.clone(),
        })
    }

    /// The outcome of this create, from the messages its statement inserted: created, or
    /// a duplicate of the key's holder. The statement's lock on the holder is gone, but a
    /// held record is unexpired, and the purge takes only expired ones.
    async fn outcome(&self, store: &PgStore, inserted: &HashSet<Uuid>) -> StoreResult<CreateOutcome> {
        if inserted.contains(&self.id) {
            return Ok(CreateOutcome::Created);
        }
        let Some(key) = &self.idempotency else {
            return Err(StoreError::Unavailable("the message was not written; retry".into()));
        };
        let client = store.client().await?;
        let sql = "SELECT doc FROM idempotency WHERE workspace_id = $1 AND key = $2";
        let row = query_opt(&client, sql, &[&key.workspace, &key.key]).await?;
        let row = row.ok_or_else(|| StoreError::Unavailable("idempotency record vanished; retry".into()))?;
        Ok(CreateOutcome::Duplicate(decode(&row, "idempotency record")?))
    }
}

/// Writes `rows` by [`CREATE`]: the ids it inserted.
async fn create(store: &PgStore, rows: &[&NewRow]) -> StoreResult<HashSet<Uuid>> {
    let mut c = NewColumns::default();
    let mut deliveries = DeliveryColumns::default();
    let mut activity = ActivityColumns::default();
    for r in rows {
        activity.push(r.id, &r.activity);
        for (id, event) in &r.recipient_events {
            c.more_event_messages.push(r.id);
            c.more_event_ids.push(*id);
            c.more_events.push(event);
        }
        for address in &r.other_recipients {
            c.other_messages.push(r.id);
            c.other_workspaces.push(r.workspace);
            c.other_addresses.push(address);
        }
        c.ids.push(r.id);
        c.workspaces.push(r.workspace);
        c.statuses.push(r.status);
        c.recipients.push(r.to.as_str());
        c.keys.push(r.key);
        c.due.push(r.due);
        c.docs.push(&r.doc);
        c.event_ids.push(r.event_id);
        c.events.push(&r.event);
        let k = r.idempotency.as_ref();
        c.key_workspaces.push(k.map(|k| k.workspace));
        c.key_names.push(k.map(|k| k.key.as_str()));
        c.key_expiries.push(k.map(|k| k.expires));
        c.key_docs.push(k.map(|k| &k.doc));
        c.key_times.push(k.map(|k| k.at));
        deliveries.push(&r.deliveries);
    }
    let mut params: Vec<Param<'_>> = vec![
        &c.ids,
        &c.workspaces,
        &c.statuses,
        &c.recipients,
        &c.keys,
        &c.due,
        &c.docs,
        &c.event_ids,
        &c.events,
        &c.key_workspaces,
        &c.key_names,
        &c.key_expiries,
        &c.key_docs,
        &c.key_times,
        &c.more_event_messages,
        &c.more_event_ids,
        &c.more_events,
        &c.other_messages,
        &c.other_workspaces,
        &c.other_addresses,
    ];
    params.extend(deliveries.params());
    params.extend(activity.params());
    let client = store.client().await?;
    written(&client, &CREATE, &params).await
}

/// New messages as column arrays (see [`CREATE`]).
#[derive(Default)]
struct NewColumns<'a> {
    ids: Vec<Uuid>,
    workspaces: Vec<Uuid>,
    statuses: Vec<&'static str>,
    recipients: Vec<&'a str>,
    keys: Vec<Uuid>,
    due: Vec<Option<DateTime<Utc>>>,
    docs: Vec<&'a serde_json::Value>,
    event_ids: Vec<Uuid>,
    events: Vec<&'a serde_json::Value>,
    key_workspaces: Vec<Option<Uuid>>,
    key_names: Vec<Option<&'a str>>,
    key_expiries: Vec<Option<DateTime<Utc>>>,
    key_docs: Vec<Option<&'a serde_json::Value>>,
    key_times: Vec<Option<DateTime<Utc>>>,
    /// Events about single recipients, flattened across messages.
    more_event_messages: Vec<Uuid>,
    more_event_ids: Vec<Uuid>,
    more_events: Vec<&'a serde_json::Value>,
    /// Recipients beside the first, flattened across messages.
    other_messages: Vec<Uuid>,
    other_workspaces: Vec<Uuid>,
    other_addresses: Vec<&'a str>,
}

/// New messages: taken keys (fresh, or taken over from a record expired by the time of the
/// request), then the messages whose key was taken or that have none, their events and
/// deliveries. Returns the ids of the messages inserted.
static CREATE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH input AS (
             SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::uuid[], $6::timestamptz[],
                                  $7::jsonb[], $8::uuid[], $9::jsonb[], $10::uuid[], $11::text[],
                                  $12::timestamptz[], $13::jsonb[], $14::timestamptz[])
                 AS u(id, workspace_id, status, to_norm, api_key_id, next_attempt_at, doc, event_id, event_doc,
                      key_workspace, key, key_expires, key_doc, at)
         ), fresh_keys AS (
             INSERT INTO idempotency (workspace_id, key, expires_at, doc)
             SELECT key_workspace, key, key_expires, key_doc FROM input WHERE key IS NOT NULL
             ON CONFLICT (workspace_id, key) DO NOTHING
             RETURNING workspace_id, key
         ), expired_keys AS (
             UPDATE idempotency i SET expires_at = u.key_expires, doc = u.key_doc
             FROM input u
             WHERE u.key IS NOT NULL AND i.workspace_id = u.key_workspace AND i.key = u.key AND i.expires_at <= u.at
             RETURNING i.workspace_id, i.key
         ), inserted AS (
             INSERT INTO messages (id, workspace_id, status, to_norm, api_key_id, next_attempt_at, doc)
             SELECT id, workspace_id, status, to_norm, api_key_id, next_attempt_at, doc FROM input u
             WHERE u.key IS NULL
                OR EXISTS (SELECT 1 FROM fresh_keys k WHERE k.workspace_id = u.key_workspace AND k.key = u.key)
                OR EXISTS (SELECT 1 FROM expired_keys k WHERE k.workspace_id = u.key_workspace AND k.key = u.key)
             RETURNING id, workspace_id
         ), events AS (
             INSERT INTO message_events (message_id, id, doc, workspace_id)
             SELECT u.id, u.event_id, u.event_doc, u.workspace_id FROM input u JOIN inserted i ON i.id = u.id
             UNION ALL
             SELECT e.message_id, e.id, e.doc, i.workspace_id
             FROM unnest($15::uuid[], $16::uuid[], $17::jsonb[]) AS e(message_id, id, doc)
             JOIN inserted i ON i.id = e.message_id
         ), recipients AS (
             INSERT INTO message_recipients (workspace_id, to_norm, message_id)
             SELECT r.workspace_id, r.to_norm, r.message_id
             FROM unnest($18::uuid[], $19::uuid[], $20::text[]) AS r(message_id, workspace_id, to_norm)
             JOIN inserted i ON i.id = r.message_id
         ), {deliveries}, {activity}
         SELECT id FROM inserted",
        deliveries = deliveries_ctes(21, "inserted"),
        activity = crate::activity::upsert_cte(28, "inserted"),
    )
});

impl Grouped for NewRow {
    type Output = CreateOutcome;

    fn groups(store: &PgStore) -> &Groups<Self> {
        &store.groups.creates
    }

    fn exclusive_keys(&self) -> Vec<Vec<u8>> {
        let mut keys = vec![self.id.as_bytes().to_vec()];
        if let Some(k) = &self.idempotency {
            keys.push([k.workspace.as_bytes(), k.key.as_bytes()].concat());
        }
        keys
    }

    async fn write_group(store: &PgStore, group: Vec<Pending<Self>>) {
        let result = create(store, &group.iter().map(|p| &p.write).collect::<Vec<_>>()).await;
        match result {
            Ok(inserted) => {
                for Pending { write, reply } in group {
                    let _ = reply.send(write.outcome(store, &inserted).await);
                }
            }
            Err(e) if group.len() == 1 => group.into_iter().for_each(|p| drop(p.reply.send(Err(e.clone())))),
            Err(_) => {
                for Pending { write, reply } in group {
                    let alone = match create(store, &[&write]).await {
                        Ok(inserted) => write.outcome(store, &inserted).await,
                        Err(e) => Err(e),
                    };
                    let _ = reply.send(alone);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Events

/// An event's rows and what its writer expects of the message, encoded by its caller.
pub(crate) struct EventRow {
    id: Uuid,
    workspace: Uuid,
    status: &'static str,
    to: String,
    key: Uuid,
    due: Option<DateTime<Utc>>,
    doc: serde_json::Value,
    expected_status: &'static str,
    expected_due: Option<DateTime<Utc>>,
    expected_last_event: Option<String>,
    event_id: Uuid,
    event: serde_json::Value,
    /// `EventWrite::more_events`.
    more_events: Vec<(Uuid, serde_json::Value)>,
    deliveries: Vec<DeliveryRow>,
    /// What the events add to the activity counters, if written.
    activity: ActivityDelta,
}

impl EventRow {
    pub(crate) fn of(write: &EventWrite) -> StoreResult<Self> {
        let m = &write.message;
        Ok(Self {
            id: uuid(m.id.0),
            workspace: uuid(m.workspace_id.0),
            status: m.status.as_str(),
            to: m.to.normalized(),
            key: uuid(m.api_key_id.0),
            due: m.next_attempt_at,
            doc: doc(m)?,
            expected_status: write.expected_status.as_str(),
            expected_due: write.expected_next_attempt_at,
            expected_last_event: write.expected_last_event_id.map(|e| e.to_string()),
            event_id: uuid(write.event.id.0),
            event: doc(&write.event)?,
            more_events: write.more_events.iter().map(|e| Ok((uuid(e.id.0), doc(e)?))).collect::<StoreResult<_>>()?,
            deliveries: delivery_rows(uuid(m.id.0), &write.webhook_deliveries)?,
            activity: write.activity.clone(),
        })
    }

    /// The answer to this event's writer, from the messages its statement changed: none if
    /// changed, else why not: the message is gone (`NotFound`) or not as expected
    /// (`Conflict`).
    async fn outcome(&self, store: &PgStore, changed: &HashSet<Uuid>) -> StoreResult<()> {
        if changed.contains(&self.id) {
            return Ok(());
        }
        let client = store.client().await?;
        let sql = "SELECT status FROM messages WHERE id = $1 AND workspace_id = $2";
        let row = query_opt(&client, sql, &[&self.id, &self.workspace]).await?.ok_or(StoreError::NotFound)?;
        let status: String = row.try_get(0).map_err(|e| StoreError::corrupt("message status", e))?;
        if status == self.expected_status {
            return Err(StoreError::Conflict(
                "message is no longer under this lease, or an event was recorded since it was read".to_owned(),
            ));
        }
        Err(StoreError::Conflict(format!("message is {status}, not {}", self.expected_status)))
    }
}

/// Writes `rows` by [`RECORD_EVENTS`]: the messages it changed.
async fn record(store: &PgStore, rows: &[&EventRow]) -> StoreResult<HashSet<Uuid>> {
    let mut c = EventColumns::default();
    let mut deliveries = DeliveryColumns::default();
    let mut activity = ActivityColumns::default();
    for r in rows {
        activity.push(r.id, &r.activity);
        c.ids.push(r.id);
        c.workspaces.push(r.workspace);
        c.statuses.push(r.status);
        c.recipients.push(r.to.as_str());
        c.keys.push(r.key);
        c.due.push(r.due);
        c.docs.push(&r.doc);
        c.expected_statuses.push(r.expected_status);
        c.expected_due.push(r.expected_due);
        c.expected_last_events.push(r.expected_last_event.as_deref());
        c.event_ids.push(r.event_id);
        c.events.push(&r.event);
        for (id, event) in &r.more_events {
            c.more_event_messages.push(r.id);
            c.more_event_ids.push(*id);
            c.more_events.push(event);
        }
        deliveries.push(&r.deliveries);
    }
    let mut params: Vec<Param<'_>> = vec![
        &c.ids,
        &c.workspaces,
        &c.statuses,
        &c.recipients,
        &c.keys,
        &c.due,
        &c.docs,
        &c.expected_statuses,
        &c.expected_due,
        &c.expected_last_events,
        &c.event_ids,
        &c.events,
        &c.more_event_messages,
        &c.more_event_ids,
        &c.more_events,
    ];
    params.extend(deliveries.params());
    params.extend(activity.params());
    let client = store.client().await?;
    written(&client, &RECORD_EVENTS, &params).await
}

/// Events as column arrays (see [`RECORD_EVENTS`]).
#[derive(Default)]
struct EventColumns<'a> {
    ids: Vec<Uuid>,
    workspaces: Vec<Uuid>,
    statuses: Vec<&'static str>,
    recipients: Vec<&'a str>,
    keys: Vec<Uuid>,
    due: Vec<Option<DateTime<Utc>>>,
    docs: Vec<&'a serde_json::Value>,
    expected_statuses: Vec<&'static str>,
    expected_due: Vec<Option<DateTime<Utc>>>,
    expected_last_events: Vec<Option<&'a str>>,
    event_ids: Vec<Uuid>,
    events: Vec<&'a serde_json::Value>,
    /// More events of the writes, flattened.
    more_event_messages: Vec<Uuid>,
    more_event_ids: Vec<Uuid>,
    more_events: Vec<&'a serde_json::Value>,
}

/// Events: each message changed if it is as its writer expects, then the events and the
/// deliveries of those changed. Returns the ids of the messages changed.
static RECORD_EVENTS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH input AS (
             SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::uuid[], $6::timestamptz[],
                                  $7::jsonb[], $8::text[], $9::timestamptz[], $10::text[], $11::uuid[], $12::jsonb[])
                 AS u(id, workspace_id, status, to_norm, api_key_id, next_attempt_at, doc,
                      expected_status, expected_next, expected_last_event, event_id, event_doc)
         ), changed AS (
             UPDATE messages m SET status = u.status, to_norm = u.to_norm, api_key_id = u.api_key_id,
                 next_attempt_at = u.next_attempt_at,
                 doc = CASE WHEN u.expected_last_event IS NULL AND m.doc ? 'tracking_tally'
                            THEN jsonb_set(u.doc, '{{tracking_tally}}', m.doc->'tracking_tally')
                            WHEN u.expected_last_event IS NULL THEN u.doc - 'tracking_tally'
                            ELSE u.doc END,
                 purge_pending = true
             FROM input u
             WHERE m.id = u.id AND m.workspace_id = u.workspace_id AND m.status = u.expected_status
               AND (u.expected_next IS NULL OR m.next_attempt_at = u.expected_next)
               AND (u.expected_last_event IS NULL OR m.doc->>'last_event_id' = u.expected_last_event)
             RETURNING m.id, m.workspace_id
         ), events AS (
             INSERT INTO message_events (message_id, id, doc, workspace_id)
             SELECT u.id, u.event_id, u.event_doc, u.workspace_id FROM input u JOIN changed c ON c.id = u.id
             UNION ALL
             SELECT e.message_id, e.id, e.doc, c.workspace_id
             FROM unnest($13::uuid[], $14::uuid[], $15::jsonb[]) AS e(message_id, id, doc)
             JOIN changed c ON c.id = e.message_id
         ), {deliveries}, {activity}
         SELECT id FROM changed",
        deliveries = deliveries_ctes(16, "changed"),
        activity = crate::activity::upsert_cte(23, "changed"),
    )
});

impl Grouped for EventRow {
    type Output = ();

    fn groups(store: &PgStore) -> &Groups<Self> {
        &store.groups.events
    }

    fn exclusive_keys(&self) -> Vec<Vec<u8>> {
        vec![self.id.as_bytes().to_vec()]
    }

    async fn write_group(store: &PgStore, group: Vec<Pending<Self>>) {
        let result = record(store, &group.iter().map(|p| &p.write).collect::<Vec<_>>()).await;
        match result {
            Ok(changed) => {
                for Pending { write, reply } in group {
                    let _ = reply.send(write.outcome(store, &changed).await);
                }
            }
            Err(e) if group.len() == 1 => group.into_iter().for_each(|p| drop(p.reply.send(Err(e.clone())))),
            Err(_) => {
                for Pending { write, reply } in group {
                    let alone = match record(store, &[&write]).await {
                        Ok(changed) => write.outcome(store, &changed).await,
                        Err(e) => Err(e),
                    };
                    let _ = reply.send(alone);
                }
            }
        }
    }
}

/// The write queues of one store (shared by its clones).
#[derive(Default)]
pub(crate) struct WriteGroups {
    creates: Groups<NewRow>,
    events: Groups<EventRow>,
}
