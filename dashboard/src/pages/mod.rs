//! The pages, one module per resource, each a set of handlers that call a use case with the
//! signed-in key and render what it returns. [`table`] is every route.

mod domains;
mod inbound;
mod keys;
mod message;
mod messages;
mod operator;
pub(crate) mod overview;
mod sign_in;
mod suppressions;
mod templates;
mod webhooks;

use axum::extract::{FromRequestParts, Path};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tidings_core::ids::TypedId;
use tidings_core::usecases::ListParams;

use crate::error::PageError;
use crate::table::RouteTable;

/// Every route of the dashboard.
pub(crate) fn table() -> RouteTable {
    RouteTable::default()
        .get("/", sign_in::home)
        .post("/sign-in", sign_in::sign_in)
        .post("/sign-out", sign_in::sign_out)
        .get("/overview", overview::show)
        .get("/messages", messages::list)
        .post("/messages", messages::send)
        .get("/messages/new", messages::new_form)
        .get("/messages/{id}", message::show)
        .get("/messages/{id}/html", message::html)
        .get("/messages/{id}/eml", message::eml)
        .get("/messages/{id}/source", message::source)
        .get("/messages/{id}/progress", message::progress)
        .post("/messages/{id}/cancel", message::cancel)
        .post("/messages/{id}/reschedule", message::reschedule)
        .get("/inbound", inbound::list)
        .get("/inbound/routes", inbound::routes::list)
        .post("/inbound/routes", inbound::routes::create)
        .post("/inbound/routes/{id}/delete", inbound::routes::delete)
        .get("/inbound/{id}", inbound::message::show)
        .get("/inbound/{id}/html", inbound::message::html)
        .get("/inbound/{id}/raw", inbound::message::raw)
        .get("/inbound/{id}/attachments/{n}", inbound::message::attachment)
        .get("/domains", domains::list)
        .post("/domains", domains::add)
        .get("/domains/{id}", domains::show)
        .post("/domains/{id}/verify", domains::verify)
        .post("/domains/{id}/resume", overview::reputation::resume_domain)
        .post("/reputation/resume", overview::reputation::resume_workspace)
        .post("/domains/{id}/rotate-dkim", domains::rotate_dkim)
        .post("/domains/{id}/tracking", domains::tracking)
        .post("/domains/{id}/inbound", domains::inbound)
        .post("/domains/{id}/delete", domains::delete)
        .post("/domains/{id}/senders", domains::add_sender)
        .post("/domains/{id}/senders/{username}/delete", domains::delete_sender)
        .get("/templates", templates::list)
        .post("/templates", templates::create)
        .get("/templates/{id}", templates::show)
        .post("/templates/{id}/versions", templates::add_version)
        .post("/templates/{id}/current", templates::make_current)
        .post("/templates/{id}/preview", templates::preview)
        .post("/templates/{id}/preview-draft", templates::preview_draft)
        .post("/templates/{id}/send", templates::send)
        .post("/templates/{id}/delete", templates::delete)
        .get("/suppressions", suppressions::list)
        .post("/suppressions", suppressions::add)
        .post("/suppressions/{email}/delete", suppressions::remove)
        .get("/webhooks", webhooks::list)
        .post("/webhooks", webhooks::create)
        .get("/webhooks/{id}", webhooks::show)
        .post("/webhooks/{id}/enable", webhooks::enable)
        .post("/webhooks/{id}/disable", webhooks::disable)
        .post("/webhooks/{id}/rotate", webhooks::rotate)
        .post("/webhooks/{id}/test", webhooks::test)
        .post("/webhooks/{id}/edit", webhooks::edit)
        .post("/webhooks/{id}/delete", webhooks::delete)
        .get("/webhooks/{id}/deliveries/{delivery_id}", webhooks::delivery)
        .post("/webhooks/{id}/deliveries/{delivery_id}/retry", webhooks::retry)
        .get("/keys", keys::list)
        .post("/keys", keys::create)
        .post("/keys/{id}/rate", keys::set_rate)
        .post("/keys/{id}/revoke", keys::revoke)
        .get(crate::assets::JS_PATH, crate::assets::script)
        .get(crate::assets::CSS_PATH, crate::assets::stylesheet)
        .get(crate::assets::FAVICON_SVG_PATH, crate::assets::favicon_svg)
        .get(crate::assets::FAVICON_ICO_PATH, crate::assets::favicon_ico)
}

/// The operator's routes (`/operator/…`), added to `table` when the operator set a token.
pub(crate) fn operator_table(table: RouteTable) -> RouteTable {
    table
        .get("/operator", operator::home)
        .post("/operator/sign-in", operator::sign_in)
        .post("/operator/sign-out", operator::sign_out)
        .get("/operator/sites", operator::sites)
        .post("/operator/sites/suspend", operator::suspend)
        .post("/operator/sites/resume", operator::resume)
}

/// Path parameters; one that cannot be decoded (not UTF-8) names nothing: a 404 page, as an
/// unknown id.
pub(crate) struct PagePath<T>(pub(crate) T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for PagePath<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(Self(value)),
            Err(_) => Err(PageError::status(StatusCode::NOT_FOUND, "Not found", "No such page.").into_response()),
        }
    }
}

/// One path parameter that is a typed id; text that is no id becomes the type's `NONE`, which
/// the use case answers as an unknown id. Rejected only as [`PagePath`] rejects.
pub(crate) struct PageId<T>(pub(crate) T);

impl<S: Send + Sync, T: TypedId> FromRequestParts<S> for PageId<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let PagePath(text) = PagePath::<String>::from_request_parts(parts, state).await?;
        Ok(Self(T::parse_or_none(&text)))
    }
}

/// The query string's pairs, in order.
pub(crate) fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    raw.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default()
}

/// The first non-empty value of `name` in `pairs`, trimmed.
pub(crate) fn query_value(pairs: &[(String, String)], name: &str) -> Option<String> {
    pairs.iter().find(|(n, v)| n == name && !v.trim().is_empty()).map(|(_, v)| v.trim().to_owned())
}

/// A list page's paging: the cursor from the query, the default page size.
/// A filtered list page's items: what `fetch` lists when the filters as typed are valid
/// (`errors` empty), else nothing; a validation error of the use case joins `errors` (the
/// page is shown again with the filters marked), any other error is the error page.
pub(crate) async fn listed_unless_invalid<T>(
    errors: &mut crate::layout::FormErrors,
    viewer: &crate::session::Viewer,
    fetch: impl std::future::Future<Output = tidings_core::Result<T>>,
) -> Result<Option<T>, PageError> {
    if !errors.0.is_empty() {
        return Ok(None);
    }
    match fetch.await {
        Ok(listed) => Ok(Some(listed)),
        Err(tidings_core::Error::Validation { fields }) => {
            *errors = crate::layout::FormErrors::from_fields(&fields);
            Ok(None)
        }
        Err(e) => Err(PageError::from(e).with_viewer(viewer)),
    }
}

pub(crate) fn list_params(pairs: &[(String, String)]) -> ListParams {
    ListParams { limit: None, cursor: query_value(pairs, "cursor") }
}

/// A JSON object typed into a form, or the parser's complaint with its line and column.
pub(crate) fn json_object(field: &str, text: Option<&str>) -> Result<Option<Value>, String> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else { return Ok(None) };
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(Some(value)),
        Ok(_) => Err(format!("{field}: must be a JSON object, like {{\"name\": \"Ann\"}}")),
        Err(e) => Err(format!("{field}: not valid JSON: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_errors_name_line_and_column() {
        assert_eq!(json_object("variables", Some("  ")), Ok(None));
        assert!(json_object("variables", Some(r#"{"a": 1}"#)).unwrap().is_some());
        let err = json_object("variables", Some("{\n  \"a\": ,\n}")).unwrap_err();
        assert!(err.contains("line 2 column"), "{err}");
        assert!(json_object("variables", Some("[1]")).unwrap_err().contains("JSON object"));
    }
}
