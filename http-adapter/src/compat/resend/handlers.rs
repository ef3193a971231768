//! The `/resend/emails` handlers: each reads Resend's request, calls the same use case as its
//! `/v1/messages` counterpart, and answers in Resend's shape. Resend's answers carry no
//! envelope: a send is `{"id"}`, a batch `{"data":[{"id"}…]}`, a list
//! `{"object":"list","has_more","data"}`.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tidings_core::Error;
use tidings_core::ids::MessageId;
use tidings_core::usecases::{
    Admission, BatchItem, BatchValidation, LimitedSend, ListParams, MessageFilters, Principal, RateLimitState,
};

use super::attachment_paths::{FetchBudget, fetch_paths};
use super::auth::{Caller, Resend, ResendBody};
use super::emails::{CreateEmailRequest, CreatedEmail, EmailRef, EmailResponse, UpdateEmailRequest};
use super::error::{ResendError, renamed};
use crate::json::{ApiJson, ApiJsonArray};
use crate::path::IdPath;
use crate::routes::idempotency_key;
use crate::{ApiError, ApiState, query};

type Result<T, E = ResendError> = std::result::Result<T, E>;

/// `POST /resend/emails`: one send, under the key's rate limit and Idempotency-Key.
pub(super) async fn send_email(
    State(state): State<ApiState>,
    Resend(who): Caller,
    headers: HeaderMap,
    ResendBody(ApiJson(req)): ResendBody<ApiJson<CreateEmailRequest>>,
) -> Result<Response> {
    let who = who.0;
    let key = idempotency_key(&headers)?;
    let mut reqs = [req];
    let _fetched = fetch_paths(&mut reqs, false, &fetch_budget(&state, &who)).await?;
    resolve_template_names(&state, &who, &mut reqs).await?;
    let [req] = reqs;
    let req = req.into_send()?;
    match state.core.messages().send_rate_limited(&*state.limits, &who, req, key).await? {
        Admission::Allowed(LimitedSend { outcome, limit }) => {
            let created = CreatedEmail { id: outcome.message.id.to_string() };
            Ok(answer(StatusCode::OK, created, limit.as_ref(), outcome.replayed))
        }
        Admission::Limited { retry_after } => {
            Err(ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() }.into())
        }
    }
}

/// `POST /resend/emails/batch`: `x-batch-validation: strict` (default) or `permissive`.
pub(super) async fn send_batch(
    State(state): State<ApiState>,
    Resend(who): Caller,
    headers: HeaderMap,
    ResendBody(ApiJsonArray(mut reqs)): ResendBody<ApiJsonArray<CreateEmailRequest>>,
) -> Result<Response> {
    let who = who.0;
    let key = idempotency_key(&headers)?;
    let mode = BatchValidation::parse(headers.get("x-batch-validation").and_then(|v| v.to_str().ok()))?;
    if reqs.len() > MAX_BATCH {
        return Err(Error::field("batch", format!("must hold at most {MAX_BATCH} emails")).into());
    }
    let _fetched = fetch_paths(&mut reqs, true, &fetch_budget(&state, &who)).await?;
    resolve_template_names(&state, &who, &mut reqs).await?;
    let reqs = reqs
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.into_send().map_err(|e| at_index(i, e)))
        .collect::<Result<Vec<_>, Error>>()?;
    let (outcome, limit) =
        match state.core.messages().send_batch_rate_limited(&*state.limits, &who, reqs, mode, key).await? {
            Admission::Allowed(allowed) => allowed,
            Admission::Limited { retry_after } => {
                return Err(ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() }.into());
            }
        };
    let mut data = Vec::new();
    let mut errors = Vec::new();
    for (index, item) in outcome.items.into_iter().enumerate() {
        match item {
            BatchItem::Queued(m) => data.push(CreatedEmail { id: m.id.to_string() }),
            BatchItem::Refused(e) => {
                let fields = e.fields.iter().map(|(f, m)| format!(" `{f}`: {m}")).collect::<String>();
                errors.push(json!({ "index": index, "message": format!("{}{fields}", e.message) }));
            }
        }
    }
    let body = match mode {
        BatchValidation::Permissive => json!({ "data": data, "errors": errors }),
        BatchValidation::Strict => json!({ "data": data }),
    };
    Ok(answer(StatusCode::OK, body, limit.as_ref(), outcome.replayed))
}

/// Most emails in one batch: Resend's limit (core's, for `/v1`, is higher).
pub(super) const MAX_BATCH: usize = 100;

/// Where this request's `path` attachments are fetched and counted.
fn fetch_budget<'a>(state: &'a ApiState, who: &Principal) -> FetchBudget<'a> {
    FetchBudget { fetcher: &*state.file_fetcher, memory: &state.body_budget, workspace: who.workspace_id }
}

/// Resend's `template.id` may be a template's name (contract §11): each name becomes the id
/// of the newest template so named. A name no template has is left as it is, and the send
/// use case refuses it as an unknown template (422 naming `template.id`).
async fn resolve_template_names(state: &ApiState, who: &Principal, emails: &mut [CreateEmailRequest]) -> Result<()> {
    let mut found: HashMap<String, Option<String>> = HashMap::new();
    for email in emails {
        let Some(name) = email.template_name_mut() else { continue };
        let id = match found.get(name.as_str()) {
            Some(id) => id.clone(),
            None => {
                let id = state.core.templates().ids_named(who, name, 1).await?.first().map(ToString::to_string);
                found.insert(name.clone(), id.clone());
                id
            }
        };
        if let Some(id) = id {
            *name = id;
        }
    }
    Ok(())
}

/// An item's fault named with its index, as the batch body's parse names them (`[2].to`).
fn at_index(i: usize, e: Error) -> Error {
    match e {
        Error::Validation { fields } => {
            let fields = fields.into_iter().map(|mut f| {
                f.field = format!("[{i}].{}", f.field);
                f
            });
            Error::Validation { fields: fields.collect() }
        }
        other => other,
    }
}

/// `GET /resend/emails?limit&after|before`: newest first. `after` is the id of the last email
/// of the previous page, which is exactly core's cursor; `before` is the id of the first
/// email of a page, for the page of newer emails (core's `endingBefore`), whose `has_more`
/// then says whether still newer ones exist, as Resend's does for that direction.
pub(super) async fn list_emails(
    State(state): State<ApiState>,
    Resend(who): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Response> {
    let q = query::params(raw.as_deref());
    let before = q.get("before").cloned();
    if before.is_some() && q.contains_key("after") {
        return Err(Error::field("before", "cannot be used with `after`: page one way at a time").into());
    }
    let limit = super::paging::limit(q.get("limit").map(String::as_str))?;
    let params = ListParams { limit: Some(limit), cursor: q.get("after").cloned() };
    let backwards = before.is_some();
    let filters = MessageFilters { ending_before: before, ..MessageFilters::default() };
    // Core names its own parameter; the client wrote `before`.
    let listed =
        state.core.messages().list(&who.0, params, &filters).await.map_err(|e| renamed(e, "endingBefore", "before"))?;
    let has_more = if backwards { listed.prev_cursor.is_some() } else { listed.has_more };
    let data = listed.items.into_iter().map(EmailResponse::listed).collect::<Vec<_>>();
    Ok(Json(json!({ "object": "list", "has_more": has_more, "data": data })).into_response())
}

/// `GET /resend/emails/{id}`.
pub(super) async fn get_email(
    State(state): State<ApiState>,
    Resend(who): Caller,
    Resend(IdPath(id)): Resend<IdPath<MessageId>>,
) -> Result<Json<EmailResponse>> {
    let message = state.core.messages().get(&who.0, id).await?;
    Ok(Json(EmailResponse::full(message)))
}

/// `PATCH /resend/emails/{id}`: moves `scheduled_at`.
pub(super) async fn update_email(
    State(state): State<ApiState>,
    Resend(who): Caller,
    Resend(IdPath(id)): Resend<IdPath<MessageId>>,
    ResendBody(ApiJson(req)): ResendBody<ApiJson<UpdateEmailRequest>>,
) -> Result<Json<EmailRef>> {
    let message = state.core.messages().reschedule(&who.0, id, req.into_change()?).await?;
    Ok(Json(EmailRef::of(&message)))
}

/// `POST /resend/emails/{id}/cancel`.
pub(super) async fn cancel_email(
    State(state): State<ApiState>,
    Resend(who): Caller,
    Resend(IdPath(id)): Resend<IdPath<MessageId>>,
) -> Result<Json<EmailRef>> {
    let message = state.core.messages().cancel(&who.0, id).await?;
    Ok(Json(EmailRef::of(&message)))
}

/// A 2xx answer with the rate-limit headers when a token was taken, and
/// `Idempotent-Replayed` on a replay, as `/v1` gives them.
fn answer(status: StatusCode, body: impl serde::Serialize, limit: Option<&RateLimitState>, replayed: bool) -> Response {
    let mut response = (status, Json(body)).into_response();
    if let Some(limit) = limit {
        crate::rate_limit::insert_headers(response.headers_mut(), limit);
    }
    if replayed {
        response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}
