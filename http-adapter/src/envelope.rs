//! The response envelope (docs/api.md#errors) as types: [`Success`] (`success`,
//! `message`, `statusCode`, `data`), [`Page`] (a list, with `pagination`) and [`Failure`]
//! (`data` null and `error`). Each is the type a handler answers with and the type the
//! OpenAPI document describes it by.
//!
//! Bodies are written through a `serde_json::Value`, whose object keys are sorted: the
//! bytes on the wire do not depend on the order fields are declared in.
//!
//! utoipa's derive inlines a generic type's arguments into a schema of its own
//! (`Success_Message`), so the envelopes implement their schemas by hand: the envelope
//! inline with the operation's status as a constant, `data` a `$ref` to the derived schema
//! of its type. The `#[utoipa::path]` attributes name them through aliases (`type
//! MessageCreated = Success<201, MessageResponse>`), which utoipa reads as plain types.

use std::borrow::Cow;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use tidings_core::usecases::Listed;
use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

/// A success with status `STATUS` (200 or 201) and `data`.
pub struct Success<const STATUS: u16, T> {
    message: Cow<'static, str>,
    data: T,
}

impl<const STATUS: u16, T> Success<STATUS, T> {
    /// The answer `data` with the human text `message`.
    pub fn new(message: impl Into<Cow<'static, str>>, data: T) -> Self {
        Self { message: message.into(), data }
    }
}

/// The body of every success.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SuccessBody<'a, T> {
    success: bool,
    message: &'a str,
    status_code: u16,
    data: &'a T,
    #[serde(skip_serializing_if = "Option::is_none")]
    pagination: Option<&'a Pagination>,
}

impl<const STATUS: u16, T: Serialize> IntoResponse for Success<STATUS, T> {
    fn into_response(self) -> Response {
        let body = SuccessBody {
            success: true,
            message: &self.message,
            status_code: STATUS,
            data: &self.data,
            pagination: None,
        };
        json_response(STATUS, &body)
    }
}

/// A page of a list: `data` is the array, with `pagination` beside it.
pub struct Page<T> {
    items: Vec<T>,
    pagination: Pagination,
}

impl<T> Page<T> {
    /// The listed items, each turned into its response type by `item`.
    pub fn new<U>(listed: Listed<U>, item: impl FnMut(U) -> T) -> Self {
        let Listed { items, limit, has_more, next_cursor, .. } = listed;
        let pagination = Pagination { limit, has_more, next_cursor, prev_cursor: None };
        Self { items: items.into_iter().map(item).collect(), pagination }
    }

    /// [`Self::new`] for a list that pages back too (`endingBefore`): `pagination` carries
    /// `prevCursor`, null on the first page.
    pub fn both_ways<U>(listed: Listed<U>, item: impl FnMut(U) -> T) -> Self {
        let prev_cursor = Some(listed.prev_cursor.clone());
        let mut page = Self::new(listed, item);
        page.pagination.prev_cursor = prev_cursor;
        page
    }
}

impl<T: Serialize> IntoResponse for Page<T> {
    fn into_response(self) -> Response {
        let body = SuccessBody {
            success: true,
            message: "OK",
            status_code: 200,
            data: &self.items,
            pagination: Some(&self.pagination),
        };
        json_response(200, &body)
    }
}

/// paging of a list; pass `nextCursor` as `cursor` for the next page
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pagination {
    #[schema(minimum = 1, maximum = 200)]
    limit: usize,
    has_more: bool,
    /// null on the last page
    #[schema(required)]
    next_cursor: Option<String>,
    /// only on lists that page back (messages): pass as `endingBefore` for the newer page
    /// before this one; null when nothing newer matches (always on the first page)
    // `None`: a list that does not page back, and the field is absent; `Some(None)`: null.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    prev_cursor: Option<Option<String>>,
}

/// `data` of an answer that has none (a delete): `null`.
pub struct Null;

impl Serialize for Null {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_unit()
    }
}

impl PartialSchema for Null {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new().schema_type(Type::Null).into()
    }
}

impl ToSchema for Null {}

/// the envelope of every failure
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = ErrorEnvelope)]
pub struct Failure {
    #[schema(schema_with = always_false)]
    success: bool,
    /// the same human text as `error.message`
    message: String,
    status_code: u16,
    #[schema(inline)]
    data: Null,
    error: ErrorObject,
}

/// what went wrong: the `error` of a failure, and of a refused item of a permissive batch
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Error)]
pub struct ErrorObject {
    /// machine-readable snake_case code
    #[schema(value_type = String)]
    code: Cow<'static, str>,
    /// human text
    message: String,
    /// only where fields are at fault
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    details: Option<Vec<FieldError>>,
}

impl ErrorObject {
    /// The error `code` with `message`, naming `fields` (`(field, message)`) when there are any.
    pub fn new(code: impl Into<Cow<'static, str>>, message: String, fields: &[(String, String)]) -> Self {
        let details = (!fields.is_empty()).then(|| {
            fields
                .iter()
                .map(|(field, message)| FieldError { field: field.clone(), message: message.clone() })
                .collect()
        });
        Self { code: code.into(), message, details }
    }
}

/// a field at fault
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldError {
    /// the JSON field or query parameter, as the client named it
    field: String,
    /// what is wrong
    message: String,
}

/// The body of a failure without details, as bytes: for answers written outside the router
/// (the server's answer to plain HTTP, and to requests hyper could not parse).
pub fn failure_body(status: StatusCode, code: &'static str, message: &str) -> Vec<u8> {
    failure_value(status, ErrorObject::new(code, message.to_owned(), &[])).to_string().into_bytes()
}

/// A failure: `data` null and the `error` object. The response carries its code as an
/// [`ErrorCode`] extension, for the server's request log line.
pub fn failure(status: StatusCode, error: ErrorObject) -> Response {
    let code = ErrorCode(error.code.clone());
    let mut response = (status, Json(failure_value(status, error))).into_response();
    response.extensions_mut().insert(code);
    response
}

/// The `error.code` of a failure response (an extension of it): what a log line names
/// beside the status, so that an operator tells a 422 `domain_not_verified` from a 422
/// `validation_error` without the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorCode(pub Cow<'static, str>);

fn failure_value(status: StatusCode, error: ErrorObject) -> Value {
    let body =
        Failure { success: false, message: error.message.clone(), status_code: status.as_u16(), data: Null, error };
    to_value(&body)
}

fn json_response(status: u16, body: &impl Serialize) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(to_value(body))).into_response()
}

fn to_value(body: &impl Serialize) -> Value {
    // Our DTOs are plain data; serialisation cannot fail (no maps with non-string keys).
    serde_json::to_value(body).unwrap_or(Value::Null)
}

// The schemas of the envelopes.

/// `{"type": ty, "enum": [value]}`: a property that is always `value`.
pub(crate) fn constant(ty: Type, value: impl Into<Value>) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(ty).enum_values(Some([value.into()]))
}

fn always_false() -> ObjectBuilder {
    constant(Type::Boolean, false)
}

/// A closed object of the success envelope's fields, `data` being `data`.
fn success_schema(status: u16, data: impl Into<RefOr<Schema>>) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .property("success", constant(Type::Boolean, true))
        .required("success")
        .property("message", ObjectBuilder::new().schema_type(Type::String))
        .required("message")
        .property("statusCode", constant(Type::Integer, status))
        .required("statusCode")
        .property("data", data)
        .required("data")
}

fn schema_ref<T: ToSchema>() -> Ref {
    Ref::from_schema_name(T::name())
}

/// Registers `T` and what it refers to.
fn register<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
}

impl<const STATUS: u16, T: ToSchema> PartialSchema for Success<STATUS, T> {
    fn schema() -> RefOr<Schema> {
        success_schema(STATUS, schema_ref::<T>()).into()
    }
}

impl<const STATUS: u16, T: ToSchema> ToSchema for Success<STATUS, T> {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        register::<T>(schemas);
    }
}

impl<T: ToSchema> PartialSchema for Page<T> {
    fn schema() -> RefOr<Schema> {
        success_schema(200, ArrayBuilder::new().items(schema_ref::<T>()))
            .property("pagination", schema_ref::<Pagination>())
            .required("pagination")
            .into()
    }
}

impl<T: ToSchema> ToSchema for Page<T> {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        register::<T>(schemas);
        register::<Pagination>(schemas);
    }
}
