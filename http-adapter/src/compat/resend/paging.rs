//! Resend's list parameters (`limit`, `after`, `before`) read into core's page request, for
//! the lists that page one way only (domains, API keys); the emails list also pages
//! backwards and reads `before` itself.

use tidings_core::Error;
use tidings_core::usecases::ListParams;

use crate::query;

/// Resend's page size when `limit` is absent.
pub(super) const DEFAULT_LIMIT: i64 = 20;

/// `limit` (default 20) and `after` (the id of the last item of the previous page, which is
/// core's cursor). `before` is refused naming it: these lists page forwards only.
pub(super) fn forward_page(raw: Option<&str>) -> Result<ListParams, Error> {
    let q = query::params(raw);
    if q.contains_key("before") {
        return Err(Error::field("before", "is not supported on this list: page forwards with `after`"));
    }
    Ok(ListParams { limit: Some(limit(q.get("limit").map(String::as_str))?), cursor: q.get("after").cloned() })
}

/// `limit` as Resend writes it; core checks the range.
pub(super) fn limit(text: Option<&str>) -> Result<i64, Error> {
    match text {
        None => Ok(DEFAULT_LIMIT),
        Some(text) => text.parse().map_err(|_| Error::field("limit", "must be an integer between 1 and 100")),
    }
}
