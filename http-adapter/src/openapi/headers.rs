//! Response headers: `X-Request-Id` (on every response, `components.headers.RequestId`),
//! `Retry-After` and the `RateLimit-*` trio of a send.
//!
//! utoipa's `Header` has no `required`; it is written as an extension key, which serialises
//! in place beside the header's other keys.

use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{Ref, RefOr, Schema};

/// A header of `schema`, `required` or not.
pub fn header(schema: impl Into<RefOr<Schema>>, description: &str, required: bool) -> Header {
    let mut header = HeaderBuilder::new().schema(Some(schema)).description(Some(description)).build();
    header.extensions = Some(Extensions::from_iter([("required", required)]));
    header
}

/// A reference to `components.headers.RequestId`.
pub fn request_id() -> Ref {
    Ref::new("#/components/headers/RequestId")
}

/// `components.headers`.
pub fn components() -> Vec<(&'static str, Header)> {
    let schema = ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).max_length(Some(128));
    let description = "the request's id, as in the server's logs: the `X-Request-Id` the client sent if it was 1–128 \
        printable ASCII characters, else a new ULID";
    vec![("RequestId", header(schema, description, true))]
}

/// `Retry-After`: required on a 429, present on a 503 only when the body budget is full.
pub fn retry_after(required: bool) -> Header {
    let schema = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1));
    header(schema, "whole seconds to wait before retrying (at least 1)", required)
}

fn count(description: &str) -> Header {
    header(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(0)), description, false)
}

/// `RateLimit-Limit`, on a send that took a token (not on a replay answered while the
/// bucket is empty) and on a 429 for the key's rate.
pub fn rate_limit_limit() -> Header {
    count("the key's `rateLimitPerSec`: the capacity of its token bucket")
}

/// `RateLimit-Remaining`.
pub fn rate_limit_remaining() -> Header {
    count("whole sends left in the bucket")
}

/// `RateLimit-Reset`.
pub fn rate_limit_reset() -> Header {
    count("seconds until the bucket is full again")
}

/// `Idempotent-Replayed`.
pub fn idempotent_replayed() -> Header {
    let schema = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["true"]));
    header(schema, "present when an earlier request with this Idempotency-Key created the message(s)", false)
}

/// `Cache-Control` that is always `value`: every request must reach the server.
pub fn no_store(value: &str) -> Header {
    header(
        ObjectBuilder::new().schema_type(Type::String).enum_values(Some([value])),
        "every request must reach the server",
        true,
    )
}
