//! `list_messages`: one statement per page (two for a `to` filter), every filter a condition
//! on an indexed column or expression, `ORDER BY id DESC LIMIT n + 1` (ascending for a page
//! before `endingBefore`, then reversed).
//!
//! `q` is `search_text LIKE '%part%'`: the generated column of migration 0013 (the subject,
//! then every recipient's address and name, lower-cased, one per line) and its trigram index,
//! the part lower-cased by core and its `%`, `_` and `\` escaped. The creation bounds and the
//! cursor are id bounds (ids are ULIDs minted at creation). The planner chooses between
//! walking the id index newest first and checking each row (cheap when matches are common:
//! a page costs about `limit / share` rows at any size) and a bitmap of the trigram index
//! (cheap when they are rare), by the column's statistics, kept 3,000 entries deep so that it
//! sees a term of one message in a few hundred; bench/README.md ("Finding messages")
//! measures both.

use deadpool_postgres::GenericClient;
use tidings_core::ids::WorkspaceId;
use tidings_core::model::Message;
use tidings_core::ports::{MessageQuery, Page, StoreResult};
use uuid::Uuid;

use crate::db::{Param, db_error, decode_all, uuid};

/// The `LIKE` pattern of a substring: `%text%` with its wildcards and escape character
/// escaped (`\` is `LIKE`'s default escape).
pub(crate) fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 8);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// Up to `limit + 1` rows of `table` passing `filters` (SQL with one `{}` for its
/// parameter), newest first or, if `ascending`, oldest first; the page of `limit` in that
/// order and whether more follow.
async fn page_where(
    client: &impl GenericClient,
    table: &str,
    filters: &[(String, Param<'_>)],
    ascending: bool,
    limit: usize,
) -> StoreResult<Page<Message>> {
    let conditions: Vec<String> =
        filters.iter().enumerate().map(|(i, (c, _))| c.replace("{}", &format!("${}", i + 1))).collect();
    let mut params: Vec<Param<'_>> = filters.iter().map(|(_, v)| *v).collect();
    let fetch = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
    params.push(&fetch);
    let sql = format!(
        "SELECT doc FROM {table} WHERE {} ORDER BY id {} LIMIT ${}",
        if conditions.is_empty() { "TRUE".to_owned() } else { conditions.join(" AND ") },
        if ascending { "ASC" } else { "DESC" },
        params.len()
    );
    // An unnamed statement, planned with this call's values: a cached one switches to a
    // generic plan after five calls, which cannot see how many ids a creation range or a cursor
    // leaves, and at a million messages ANDed the whole range of the id index with the trigram
    // bitmap (300 ms instead of 1; bench/README.md, "Finding messages"). Planning costs less
    // than a millisecond.
    let rows = client.query(sql.as_str(), &params).await.map_err(db_error)?;
    let mut items: Vec<Message> = decode_all(&rows, table)?;
    let has_more = items.len() > limit;
    items.truncate(limit);
    Ok(Page { items, has_more })
}

/// The first `limit` of two pages of disjoint lists walked the same way; more follow if
/// either had more or some were left over.
fn nearest_of(a: Page<Message>, b: Page<Message>, ascending: bool, limit: usize) -> Page<Message> {
    let mut items: Vec<Message> = a.items.into_iter().chain(b.items).collect();
    if ascending {
        items.sort_by_key(|m| m.id);
    } else {
        items.sort_by_key(|m| std::cmp::Reverse(m.id));
    }
    let has_more = a.has_more || b.has_more || items.len() > limit;
    items.truncate(limit);
    Page { items, has_more }
}

/// The page `query` asks for, newest first.
pub(crate) async fn list(
    client: &impl GenericClient,
    workspace: WorkspaceId,
    query: &MessageQuery,
) -> StoreResult<Page<Message>> {
    let ws = uuid(workspace.0);
    let status = query.status.map(|s| s.as_str());
    let to = query.to.as_ref().map(|to| to.normalized());
    let key = query.sent_by.map(|k| uuid(k.0));
    let (tags, metadata) = label_documents(query);
    let pattern = query.text.as_ref().map(|t| contains_pattern(t.as_str()));
    let (low, high) = query.id_bounds();
    let (low, high): (Option<Uuid>, Option<Uuid>) = (low.map(|l| uuid(l.0)), high.map(|h| uuid(h.0)));
    // Filters on the message's own columns, the same for both halves of a `to` list.
    let mut filters: Vec<(String, Param<'_>)> = Vec::new();
    if let Some(status) = &status {
        filters.push(("status = {}".into(), status));
    }
    if let Some(key) = &key {
        filters.push(("api_key_id = {}".into(), key));
    }
    // The same expressions as the GIN indexes of migration 0004, so they apply.
    if let Some(tags) = &tags {
        filters.push(("(doc -> 'extras' -> 'tags') @> {}".into(), tags));
    }
    if let Some(metadata) = &metadata {
        filters.push(("(doc -> 'extras' -> 'metadata') @> {}".into(), metadata));
    }
    // And the column of migration 0013's trigram index.
    if let Some(pattern) = &pattern {
        filters.push(("search_text LIKE {}".into(), pattern));
    }
    if let Some(low) = &low {
        filters.push(("id >= {}".into(), low));
    }
    if let Some(high) = &high {
        filters.push(("id < {}".into(), high));
    }
    let ascending = query.ending_before.is_some();
    let limit = query.page.limit;
    let page = match &to {
        None => {
            let mut all = vec![("workspace_id = {}".to_owned(), &ws as Param<'_>)];
            all.extend(filters);
            page_where(client, "messages", &all, ascending, limit).await?
        }
        Some(to) => {
            // A message's first recipient is its `to_norm` column, the others rows of
            // message_recipients (migration 0008), never both. Each half is a walk of its own
            // index (messages_by_to; message_recipients' key) that stops after a page, and the
            // page is the nearest of the two: a page costs what it did before lists existed,
            // however many messages the address has.
            let mut first = vec![("workspace_id = {}".to_owned(), &ws as Param<'_>), ("to_norm = {}".to_owned(), to)];
            first.extend(filters.iter().cloned());
            let mut others =
                vec![("r.workspace_id = {}".to_owned(), &ws as Param<'_>), ("r.to_norm = {}".to_owned(), to)];
            others.extend(filters);
            let joined = "message_recipients r JOIN messages m ON m.id = r.message_id";
            let a = page_where(client, "messages", &first, ascending, limit).await?;
            let b = page_where(client, joined, &others, ascending, limit).await?;
            nearest_of(a, b, ascending, limit)
        }
    };
    let Page { mut items, has_more } = page;
    if ascending {
        items.reverse();
    }
    Ok(Page { items, has_more })
}

/// The `tags` and `metadata` filters as JSONB documents the message's must contain: an array
/// of `{name}` or `{name, value}` objects (each must match one of the message's tags) and an
/// object of the wanted entries.
fn label_documents(query: &MessageQuery) -> (Option<serde_json::Value>, Option<serde_json::Value>) {
    use serde_json::{Map, Value};
    let tags = (!query.tags.is_empty()).then(|| {
        let wanted = query.tags.iter().map(|t| {
            let mut tag = Map::new();
            tag.insert("name".into(), Value::String(t.name.clone()));
            if let Some(value) = &t.value {
                tag.insert("value".into(), Value::String(value.clone()));
            }
            Value::Object(tag)
        });
        Value::Array(wanted.collect())
    });
    let metadata = (!query.metadata.is_empty())
        .then(|| Value::Object(query.metadata.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect()));
    (tags, metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_escapes_like_wildcards_and_the_escape_character() {
        assert_eq!(contains_pattern("50%_off\\now"), "%50\\%\\_off\\\\now%");
        assert_eq!(contains_pattern("plain"), "%plain%");
    }
}
