//! List parameters as clients send them (`limit`, `cursor`) and pages as they get them back.

use crate::ports::{Page, PageRequest};
use crate::{Error, Result};

/// Default and bounds of `limit` (docs/api.md#lists-and-pagination).
pub const DEFAULT_LIMIT: usize = 50;
/// Largest `limit`.
pub const MAX_LIMIT: usize = 200;

/// `?limit=&cursor=` before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParams {
    /// `limit`, 1–200; default 50.
    pub limit: Option<i64>,
    /// `cursor`: the `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

impl ListParams {
    /// Validates into a store page request; a cursor that is not an id of the right kind
    /// is a 422 naming `cursor`.
    pub fn to_page<C>(&self, parse: impl Fn(&str) -> Option<C>) -> Result<PageRequest<C>> {
        let limit = match self.limit {
            None => DEFAULT_LIMIT,
            Some(n) if (1..=MAX_LIMIT as i64).contains(&n) => n as usize,
            Some(_) => return Err(Error::field("limit", format!("must be between 1 and {MAX_LIMIT}"))),
        };
        let cursor = match &self.cursor {
            None => None,
            Some(text) => {
                Some(parse(text).ok_or_else(|| Error::field("cursor", "is not a cursor returned by this list"))?)
            }
        };
        Ok(PageRequest { limit, cursor })
    }
}

/// A page as the API returns it: items plus the cursor of the next page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed<T> {
    /// Items in list order.
    pub items: Vec<T>,
    /// The `limit` used.
    pub limit: usize,
    /// Whether more follow.
    pub has_more: bool,
    /// Pass as `cursor` to get the next page; `None` on the last page.
    pub next_cursor: Option<String>,
    /// Pass as `endingBefore` to get the previous page (newer items): `None` on the first
    /// page. Only the messages list pages backwards; every other list leaves it `None`.
    pub prev_cursor: Option<String>,
}

impl<T> Listed<T> {
    /// Builds the API page from a store page; `cursor_of` gives an item's cursor text.
    pub fn from_page(page: Page<T>, limit: usize, cursor_of: impl Fn(&T) -> String) -> Self {
        let next_cursor = if page.has_more { page.items.last().map(&cursor_of) } else { None };
        Self { has_more: page.has_more, next_cursor, items: page.items, limit, prev_cursor: None }
    }

    /// Maps the items, keeping the paging.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Listed<U> {
        Listed {
            items: self.items.into_iter().map(f).collect(),
            limit: self.limit,
            has_more: self.has_more,
            next_cursor: self.next_cursor,
            prev_cursor: self.prev_cursor,
        }
    }
}
