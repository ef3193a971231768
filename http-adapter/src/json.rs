//! `ApiJson<T>`: the request-body extractor that answers in the API's terms — 400
//! `invalid_json` for a missing content type, bad syntax or a non-object, 413 for a body
//! over the limit, 422 `validation_error` naming the field whose type is wrong, 503 when the
//! server's budget of body bytes in flight is used up (`body`).
//!
//! A body is deserialised straight into `T` after a syntax-only pass, not through a
//! `serde_json::Value`: the tree held a second copy of every string (a send's attachments
//! are most of its body), and the syntax pass keeps the order of answers (any syntax error
//! is a 400 before any field is a 422).

use axum::extract::{FromRequest, Request};
use axum::http::header;
use serde::de::{DeserializeOwned, IgnoredAny};
use tidings_core::Error;

use crate::{ApiError, ApiState};

/// A JSON object body deserialised into `T`.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<ApiState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, Self::Rejection> {
        let bytes = json_bytes(req, state).await?;
        parse(&bytes).map(Self)
    }
}

/// A JSON array body deserialised into `Vec<T>` (`POST /v1/messages/batch`); a wrong field
/// is named with its index, `[3].to`.
pub struct ApiJsonArray<T>(pub Vec<T>);

impl<T: DeserializeOwned> FromRequest<ApiState> for ApiJsonArray<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, Self::Rejection> {
        let bytes = json_bytes(req, state).await?;
        parse_array(&bytes).map(Self)
    }
}

/// Parses an array body straight into its items, as [`parse`] does an object: syntax first
/// (400), then a pass that allocates nothing and finds the first item that is not an object
/// (422 `[i]`) and counts the items (over [`MAX_BATCH`](tidings_core::usecases::MAX_BATCH), a
/// 422 naming `batch` before any item is built: 10 MiB of `{},` would otherwise be millions
/// of them), then the items (422 naming `[i].field`). No `serde_json::Value` tree: it held
/// the whole batch again, with an allocation per string and per object.
pub fn parse_array<T: DeserializeOwned>(bytes: &[u8]) -> Result<Vec<T>, ApiError> {
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(ApiError::InvalidJson(format!("the body is not valid JSON: it is not UTF-8 ({e})")));
    }
    serde_json::from_slice::<IgnoredAny>(bytes)
        .map_err(|e| ApiError::InvalidJson(format!("the body is not valid JSON: {e}")))?;
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'[') {
        return Err(ApiError::InvalidJson("the body must be a JSON array of messages".into()));
    }
    let shape = serde_json::from_slice::<ArrayShape>(bytes)
        .map_err(|e| ApiError::InvalidJson(format!("the body is not valid JSON: {e}")))?;
    if let Some(i) = shape.first_non_object {
        return Err(Error::field(format!("[{i}]"), "must be a JSON object").into());
    }
    if shape.len > tidings_core::usecases::MAX_BATCH {
        tidings_core::usecases::check_batch_len(shape.len)?;
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        Error::field(field, without_position(e.into_inner())).into()
    })
}

/// How many items an array has and which is the first that is not an object, read without
/// keeping anything.
struct ArrayShape {
    len: usize,
    first_non_object: Option<usize>,
}

impl<'de> serde::Deserialize<'de> for ArrayShape {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Items;
        impl<'de> serde::de::Visitor<'de> for Items {
            type Value = ArrayShape;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<ArrayShape, A::Error> {
                let mut shape = ArrayShape { len: 0, first_non_object: None };
                // Every item is read, so that the array's end is where the parser expects it.
                while let Some(IsObject(is_object)) = seq.next_element()? {
                    if !is_object && shape.first_non_object.is_none() {
                        shape.first_non_object = Some(shape.len);
                    }
                    shape.len += 1;
                }
                Ok(shape)
            }
        }
        deserializer.deserialize_seq(Items)
    }
}

/// Whether a JSON value is an object; skips it either way.
struct IsObject(bool);

impl<'de> serde::Deserialize<'de> for IsObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Kind;
        impl<'de> serde::de::Visitor<'de> for Kind {
            type Value = IsObject;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<IsObject, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(IsObject(true))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<IsObject, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(IsObject(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
            fn visit_str<E>(self, _: &str) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
            fn visit_unit<E>(self) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
        }
        deserializer.deserialize_any(Kind)
    }
}

/// The body of a JSON request: 400 without the JSON content type, 413 over the limit, 503
/// over the budget.
async fn json_bytes(req: Request, state: &ApiState) -> Result<Vec<u8>, ApiError> {
    if !is_json(req.headers()) {
        return Err(ApiError::InvalidJson("send the body as JSON with `Content-Type: application/json`".into()));
    }
    crate::body::read(req, &state.body_budget, state.config.max_body_bytes).await
}

/// Whether a request says its body is JSON (`Content-Type: application/json`, any parameters).
pub(crate) fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

/// Parses a body: syntax first (400), then shape (422 naming the field).
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // The skipping pass below does not look inside strings it skips (unknown fields).
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(ApiError::InvalidJson(format!("the body is not valid JSON: it is not UTF-8 ({e})")));
    }
    // Allocates nothing: strings are skipped, not copied.
    serde_json::from_slice::<IgnoredAny>(bytes)
        .map_err(|e| ApiError::InvalidJson(format!("the body is not valid JSON: {e}")))?;
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::InvalidJson("the body must be a JSON object".into()));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let message = without_position(e.into_inner());
        Error::field(if field == "." { "body".to_owned() } else { field }, message).into()
    })
}

/// A shape error's message without serde_json's " at line L column C" (the field is named
/// already, and a tree-based parse, which this replaced, gave none).
fn without_position(e: serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(message) => message.to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Shape {
        to: String,
        count: Option<u32>,
    }

    fn fails(body: &str) -> (u16, String) {
        use axum::response::IntoResponse;
        let e = parse::<Shape>(body.as_bytes()).unwrap_err();
        let debug = format!("{e:?}");
        (e.into_response().status().as_u16(), debug)
    }

    #[test]
    fn syntax_errors_come_before_shape_errors_and_shape_errors_name_the_field_without_a_position() {
        // A wrong type early and broken syntax later: still the syntax error.
        assert_eq!(fails(r#"{"to": 5, "count": }"#).0, 400);
        assert_eq!(fails("[1, 2]").0, 400);
        assert_eq!(fails(" 5 ").0, 400);
        // Invalid UTF-8 in a field nobody reads.
        let e = parse::<Shape>(b"{\"to\": \"a\", \"name\": \"\xff\xfe\"}").unwrap_err();
        assert!(matches!(e, ApiError::InvalidJson(_)), "{e:?}");
        let (status, debug) = fails(r#"{"to": 5}"#);
        assert_eq!(status, 422);
        assert!(debug.contains("\"to\"") && debug.contains("invalid type: integer `5`"), "{debug}");
        assert!(!debug.contains("line 1"), "{debug}");
        let (status, debug) = fails(r#"{"count": 1}"#);
        assert_eq!(status, 422);
        assert!(debug.contains("missing field `to`") && debug.contains("\"body\""), "{debug}");
        assert!(parse::<Shape>(br#" {"to": "a@b.example", "count": 3} "#).is_ok());
    }

    #[test]
    fn arrays_are_checked_item_by_item_in_the_order_the_tree_gave() {
        fn status(e: ApiError) -> (u16, String) {
            use axum::response::IntoResponse;
            let debug = format!("{e:?}");
            (e.into_response().status().as_u16(), debug)
        }
        let fails = |body: &str| status(parse_array::<Shape>(body.as_bytes()).unwrap_err());
        assert_eq!(fails(r#"[{"to": 5}, ]"#).0, 400, "syntax before shape");
        assert_eq!(fails(r#"{"to": "a"}"#).0, 400, "not an array");
        let (code, debug) = fails(r#"[{"to": 5}, 3, {"to": "a"}]"#);
        assert_eq!(code, 422);
        assert!(debug.contains("\"[1]\"") && debug.contains("must be a JSON object"), "{debug}");
        let (code, debug) = fails(r#"[{"to": "a"}, {"to": "b", "count": "x"}]"#);
        assert_eq!(code, 422);
        assert!(debug.contains("[1].count") && !debug.contains("line 1"), "{debug}");
        let many = format!("[{}{{}}]", "{},".repeat(tidings_core::usecases::MAX_BATCH));
        let (code, debug) = fails(&many);
        assert_eq!(code, 422);
        assert!(debug.contains("\"batch\"") && debug.contains("at most 500"), "{debug}");
        let items =
            parse_array::<Shape>(br#" [{"to": "a", "count": 1}, {"to": "b", "nested": [{"x": {}}]}] "#).unwrap();
        assert_eq!(items.iter().map(|i| i.to.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert!(parse_array::<Shape>(b"[]").unwrap().is_empty());
    }
}
