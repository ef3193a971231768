//! `GET /v1/messages` (docs/api.md#listing-and-finding-messages): the filters as a client
//! sends them, checked into a [`MessageQuery`], and pages both ways (`cursor` older,
//! `endingBefore` newer).

use chrono::{DateTime, NaiveDate, Utc};

use crate::email::EmailAddress;
use crate::error::FieldError;
use crate::ids::MessageId;
use crate::message_search::{CreatedRange, SearchText};
use crate::model::extras::{check_metadata_key, check_tag_name};
use crate::model::{KeyScope, Message, MessageStatus};
use crate::ports::{MessageQuery, Page, PageRequest, TagFilter};
use crate::usecases::{ListParams, Listed, Messages, Principal};
use crate::{Error, Result};

/// Filters of `GET /v1/messages` as the client sent them, and `endingBefore`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageFilters {
    /// `status`, a status name.
    pub status: Option<String>,
    /// `to`, an address.
    pub to: Option<String>,
    /// Every `tag` parameter: `name` or `name:value`.
    pub tags: Vec<String>,
    /// Every `metadata[key]=value` parameter, as `(key, value)`.
    pub metadata: Vec<(String, String)>,
    /// `q`: part of the subject or of a recipient, 3–200 characters.
    pub q: Option<String>,
    /// `createdAfter`: RFC 3339, or a date (`YYYY-MM-DD`, its 00:00 UTC); inclusive.
    pub created_after: Option<String>,
    /// `createdBefore`: the same forms; exclusive.
    pub created_before: Option<String>,
    /// `endingBefore`: the `prevCursor` of a page, for the page of newer messages before it.
    /// Not with `cursor`.
    pub ending_before: Option<String>,
}

/// Most `tag` and most `metadata[...]` filters one list may use.
pub const MAX_LABEL_FILTERS: usize = 10;

impl Messages<'_> {
    /// `GET /v1/messages`: newest first, filtered; a `send` key sees only its own messages.
    /// `prev_cursor` is set when matching messages newer than the page exist, which only a
    /// page reached with a cursor or `endingBefore` can have; finding out costs one more
    /// store call of one item.
    pub async fn list(&self, who: &Principal, params: ListParams, filters: &MessageFilters) -> Result<Listed<Message>> {
        let query = self.message_query(who, &params, filters)?;
        let found = self.core.store.list_messages(who.workspace_id, &query).await?;
        let limit = query.page.limit;
        let first_id = found.items.first().map(|m| m.id);
        let last_id = found.items.last().map(|m| m.id);
        let (has_more, newer) = match query.ending_before {
            None => {
                let newer = match query.page.cursor {
                    Some(cursor) => self.any_newer(who, &query, cursor).await?.then(|| first_id.unwrap_or(cursor)),
                    None => None,
                };
                (found.has_more, newer)
            }
            // An empty page: nothing newer than `endingBefore` matches any more, and the
            // client starts again from the first page.
            Some(_) => match (first_id, last_id) {
                (Some(first), Some(last)) => {
                    let older = self.any_older(who, &query, last).await?;
                    (older, found.has_more.then_some(first))
                }
                _ => (false, None),
            },
        };
        let page = Page { items: found.items, has_more };
        let mut listed = Listed::from_page(page, limit, |m| m.id.to_string());
        listed.prev_cursor = newer.map(|id| id.to_string());
        Ok(listed)
    }

    /// Whether a message matching `query` is newer than `id`.
    async fn any_newer(&self, who: &Principal, query: &MessageQuery, id: MessageId) -> Result<bool> {
        let probe = MessageQuery { page: PageRequest::first(1), ending_before: Some(id), ..query.clone() };
        Ok(!self.core.store.list_messages(who.workspace_id, &probe).await?.items.is_empty())
    }

    /// Whether a message matching `query` is older than `id`.
    async fn any_older(&self, who: &Principal, query: &MessageQuery, id: MessageId) -> Result<bool> {
        let probe =
            MessageQuery { page: PageRequest { limit: 1, cursor: Some(id) }, ending_before: None, ..query.clone() };
        Ok(!self.core.store.list_messages(who.workspace_id, &probe).await?.items.is_empty())
    }

    /// The store query of a list request, every bad parameter reported at once.
    fn message_query(&self, who: &Principal, params: &ListParams, filters: &MessageFilters) -> Result<MessageQuery> {
        let page = params.to_page(MessageId::parse)?;
        let mut fields = Vec::new();
        let status = filters.status.as_deref().and_then(|s| {
            let parsed = MessageStatus::parse(s);
            if parsed.is_none() {
                fields.push(FieldError::new("status", format!("unknown status {s:?}")));
            }
            parsed
        });
        let to = filters.to.as_deref().and_then(|t| match EmailAddress::parse(t) {
            Ok(a) => Some(a),
            Err(e) => {
                fields.push(FieldError::new("to", e.to_string()));
                None
            }
        });
        let tags = tag_filters(&filters.tags, &mut fields);
        let metadata = metadata_filters(&filters.metadata, &mut fields);
        let text = filters.q.as_deref().and_then(|q| match SearchText::parse(q) {
            Ok(text) => Some(text),
            Err(e) => {
                fields.push(FieldError::new("q", e.to_string()));
                None
            }
        });
        let after = creation_bound("createdAfter", filters.created_after.as_deref(), &mut fields);
        let before = creation_bound("createdBefore", filters.created_before.as_deref(), &mut fields);
        if let (Some(after), Some(before)) = (after, before)
            && after >= before
        {
            fields.push(FieldError::new("createdBefore", "must be later than createdAfter"));
        }
        let ending_before = filters.ending_before.as_deref().and_then(|text| match MessageId::parse(text) {
            Some(id) => Some(id),
            None => {
                fields.push(FieldError::new("endingBefore", "is not a cursor returned by this list"));
                None
            }
        });
        if filters.ending_before.is_some() && page.cursor.is_some() {
            fields.push(FieldError::new("endingBefore", "cannot be used with cursor: give one of them"));
        }
        if !fields.is_empty() {
            return Err(Error::Validation { fields });
        }
        let sent_by = (who.scope == KeyScope::Send).then_some(who.key_id);
        Ok(MessageQuery {
            status,
            to,
            sent_by,
            tags,
            metadata,
            text,
            created: CreatedRange::between(after, before),
            page,
            ending_before,
        })
    }
}

/// A creation bound: RFC 3339, or a plain date meaning its 00:00 UTC.
fn creation_bound(name: &str, text: Option<&str>, fields: &mut Vec<FieldError>) -> Option<DateTime<Utc>> {
    let text = text?.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.with_timezone(&Utc));
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return day.and_hms_opt(0, 0, 0).map(|midnight| midnight.and_utc());
    }
    fields.push(FieldError::new(name, "must be an RFC 3339 time (2026-05-01T12:00:00Z) or a date (2026-05-01)"));
    None
}

/// `tag=name` (any value) or `tag=name:value`; tag names hold no `:`, so the first one
/// splits.
fn tag_filters(raw: &[String], fields: &mut Vec<FieldError>) -> Vec<TagFilter> {
    if raw.len() > MAX_LABEL_FILTERS {
        fields.push(FieldError::new("tag", format!("at most {MAX_LABEL_FILTERS} tag filters")));
        return Vec::new();
    }
    let mut out = Vec::with_capacity(raw.len());
    for text in raw {
        let (name, value) = match text.split_once(':') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (text.as_str(), None),
        };
        match check_tag_name(name) {
            Ok(()) => out.push(TagFilter { name: name.to_owned(), value }),
            Err(e) => fields.push(FieldError::new("tag", format!("{text:?}: the name {e}"))),
        }
    }
    out
}

fn metadata_filters(raw: &[(String, String)], fields: &mut Vec<FieldError>) -> Vec<(String, String)> {
    if raw.len() > MAX_LABEL_FILTERS {
        fields.push(FieldError::new("metadata", format!("at most {MAX_LABEL_FILTERS} metadata filters")));
        return Vec::new();
    }
    for (key, _) in raw {
        if let Err(e) = check_metadata_key(key) {
            fields.push(FieldError::new(format!("metadata[{key}]"), e.to_string()));
        }
    }
    raw.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(text: &str) -> (Option<DateTime<Utc>>, Vec<FieldError>) {
        let mut fields = Vec::new();
        (creation_bound("createdAfter", Some(text), &mut fields), fields)
    }

    #[test]
    fn a_bound_is_an_rfc3339_time_or_a_dates_midnight_in_utc() {
        let midnight = DateTime::parse_from_rfc3339("2026-05-01T00:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(bound("2026-05-01").0, Some(midnight));
        assert_eq!(bound("2026-05-01T02:00:00+02:00").0, Some(midnight));
        for bad in ["2026-13-01", "yesterday", "2026-05-01 00:00", ""] {
            let (at, fields) = bound(bad);
            assert_eq!(at, None, "{bad:?}");
            assert_eq!(fields.len(), 1, "{bad:?} is named");
        }
    }
}
