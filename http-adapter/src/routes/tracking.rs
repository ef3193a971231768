//! `/t/o/{token}` (the open pixel) and `/t/c/{token}` (the click redirect): public, without
//! authentication, for mail clients and browsers (docs/api.md#tracking). Their successes are
//! not in the envelope (a GIF and a redirect); every failure is, as 404 `not_found` whatever
//! was wrong with the token.
//!
//! HEAD answers like GET but records nothing: link scanners and prefetchers probe with it,
//! and that is neither an open nor a click.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa::ToResponse;
use utoipa::openapi::schema::{ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{ContentBuilder, RefOr, ResponseBuilder};
use utoipa_axum::routes;

use super::table::RouteTable;
use crate::openapi::failures::{InternalError, Unavailable};
use crate::openapi::headers;
use crate::path::ApiPath;
use crate::{ApiError, ApiResult, ApiState};

const TOKEN: &str = "a tracking token from a sent message; forged, altered and unknown tokens are 404 and record \
    nothing. HEAD answers the same and records nothing";

/// The 200 of the open pixel: a 43-byte transparent GIF, never cached.
struct Pixel;

impl<'r> ToResponse<'r> for Pixel {
    fn response() -> (&'r str, RefOr<utoipa::openapi::Response>) {
        let gif = ObjectBuilder::new().schema_type(Type::String).content_media_type("image/gif");
        let response = ResponseBuilder::new()
            .description("a 1×1 transparent GIF")
            .header("Cache-Control", headers::no_store("no-store, private"))
            .content("image/gif", ContentBuilder::new().schema(Some(gif)).build());
        ("Pixel", response.build().into())
    }
}

/// The 302 of a tracked link, to the URL signed in the token; no body.
struct Redirect;

impl<'r> ToResponse<'r> for Redirect {
    fn response() -> (&'r str, RefOr<utoipa::openapi::Response>) {
        let url = ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::Custom("uri".into())))
            .pattern(Some("^https?://"));
        let response = ResponseBuilder::new()
            .description("the link's destination, taken only from the signed token")
            .header("Location", headers::header(url, "the original http(s) URL of the link", true))
            .header("Cache-Control", headers::no_store("no-store"));
        ("Redirect", response.build().into())
    }
}

/// A 1×1 transparent GIF (GIF89a, one-entry palette, colour 0 transparent): 43 bytes.
pub const PIXEL_GIF: [u8; 43] = [
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff,
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02,
    0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// `GET /t/o/{token}`: records `Opened` and answers the pixel.
#[utoipa::path(
    get,
    path = "/t/o/{token}",
    tag = "tracking",
    summary = "The open pixel: records `Opened`",
    description = TOKEN,
    security(()),
    responses(
        (status = 200, response = inline(Pixel)),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    )
)]
pub async fn get_open_pixel(
    State(state): State<ApiState>,
    method: Method,
    headers: HeaderMap,
    ApiPath(token): ApiPath<String>,
) -> ApiResult<Response> {
    if method == Method::HEAD {
        state.core.tracking().check_open(&token).await?;
    } else {
        state.core.tracking().record_open(&token, user_agent(&headers).as_deref()).await?;
    }
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("image/gif")),
        // Every load is an open: no cache may answer in our place.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store, private")),
    ];
    Ok((StatusCode::OK, headers, PIXEL_GIF.as_slice()).into_response())
}

/// `GET /t/c/{token}`: records `Clicked` and redirects (302) to the URL signed in the token.
#[utoipa::path(
    get,
    path = "/t/c/{token}",
    tag = "tracking",
    summary = "A tracked link: records `Clicked`, redirects",
    description = TOKEN,
    security(()),
    responses(
        (status = 302, response = inline(Redirect)),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    )
)]
pub async fn follow_tracked_link(
    State(state): State<ApiState>,
    method: Method,
    headers: HeaderMap,
    ApiPath(token): ApiPath<String>,
) -> ApiResult<Response> {
    let url = if method == Method::HEAD {
        state.core.tracking().check_click(&token).await?
    } else {
        state.core.tracking().record_click(&token, user_agent(&headers).as_deref()).await?
    };
    // The url crate writes ASCII without controls, so this holds; were it ever not, the link
    // is as good as unknown.
    let location = HeaderValue::from_str(url.as_str())
        .map_err(|_| ApiError::Core(tidings_core::Error::NotFound("tracking link")))?;
    let headers = [(header::LOCATION, location), (header::CACHE_CONTROL, HeaderValue::from_static("no-store"))];
    Ok((StatusCode::FOUND, headers).into_response())
}

/// The `User-Agent` header, if any; bytes that are not UTF-8 become U+FFFD.
fn user_agent(headers: &HeaderMap) -> Option<String> {
    headers.get(header::USER_AGENT).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// `path` as it may be logged: a tracking path (`/t/o/…`, `/t/c/…`) becomes its route
/// template, since its token is a bearer credential and a click token is the base64url of
/// the destination URL, which may carry a password-reset or login token of its own. Other
/// paths lose the segments that hold an address ([`crate::logged_path::without_addresses`]).
pub fn loggable_path(path: &str) -> std::borrow::Cow<'_, str> {
    for (prefix, template) in [("/t/o/", "/t/o/{token}"), ("/t/c/", "/t/c/{token}")] {
        if path.starts_with(prefix) {
            return std::borrow::Cow::Borrowed(template);
        }
    }
    crate::logged_path::without_addresses(path)
}

/// The tracking routes.
pub fn routes() -> RouteTable {
    RouteTable::default().routes(routes!(get_open_pixel)).routes(routes!(follow_tracked_link))
}

#[cfg(test)]
mod tests {
    use super::loggable_path;

    #[test]
    fn tracking_tokens_never_reach_a_logged_path() {
        assert_eq!(loggable_path("/t/c/aHR0cHM6Ly9leGFtcGxlLmNvbS9yZXNldD90b2tlbj1zM2NyM3Q"), "/t/c/{token}");
        assert_eq!(loggable_path("/t/o/AQEAAAAA"), "/t/o/{token}");
        assert_eq!(loggable_path("/t/c/AQEA/https://evil.example/"), "/t/c/{token}", "whatever follows the token");
        assert_eq!(loggable_path("/t/c/"), "/t/c/{token}");
        assert_eq!(loggable_path("/v1/messages/01ARZ3NDEKTSV4RRFFQ69G5FAV"), "/v1/messages/01ARZ3NDEKTSV4RRFFQ69G5FAV");
        assert_eq!(loggable_path("/t/x/abc"), "/t/x/abc");
        assert_eq!(loggable_path("/v1/suppressions/ann@example.com"), "/v1/suppressions/{address}");
    }
}
