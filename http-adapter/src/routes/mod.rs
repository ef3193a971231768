//! The route table: one module per resource, each with its DTOs and handlers, added through
//! [`table::RouteTable`] so that every route is served as its `#[utoipa::path]` documents it.

mod batch;
mod domains;
mod health;
mod inbound;
mod keys;
mod messages;
mod metrics;
mod openapi;
mod reputation;
mod send_request;
mod suppressions;
mod table;
mod templates;
mod tracking;
mod webhooks;
mod wire;

use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};

use crate::body::BodyLimit;
use crate::{ApiError, ApiState};

pub(crate) use messages::idempotency_key;
pub use tracking::loggable_path;

/// Every route of the API; `send_body_limit` is the body limit of `POST /v1/messages`;
/// `/metrics` only `with_metrics`.
fn table(send_body_limit: usize, with_metrics: bool) -> table::RouteTable {
    let table = table::RouteTable::default()
        .merge(keys::routes())
        .merge(messages::routes(send_body_limit))
        .merge(domains::routes())
        .merge(reputation::routes())
        .merge(inbound::routes())
        .merge(templates::routes())
        .merge(suppressions::routes())
        .merge(webhooks::routes())
        .merge(openapi::routes())
        .merge(tracking::routes())
        .merge(health::routes());
    if with_metrics { table.merge(metrics::routes()) } else { table }
}

/// The `(method, path)` pairs [`router`] serves, paths in axum's `{name}` template syntax
/// (which is OpenAPI's too). A GET route also answers HEAD; that is not listed. `/metrics` is
/// listed though a router configured to leave it to [`metrics_router`] does not serve it.
pub fn served_routes() -> Vec<(Method, String)> {
    table::operations(&operations())
}

/// The operations of every route, as their handlers describe them, before
/// [`crate::openapi`] completes them into the document.
pub(crate) fn operations() -> utoipa::openapi::OpenApi {
    table(0, true).into_parts().1
}

/// The whole API under `/v1`, the public tracking endpoints under `/t`, the probes
/// `/healthz` and `/readyz` and the Prometheus metrics at `/metrics` (unless
/// [`HttpConfig::serve_metrics`](crate::HttpConfig) is off), with requests counted
/// by route, with the envelope on unknown routes (404) and wrong methods (405), the body
/// limits (413; a larger one for sends, which may carry attachments), the budget of body
/// bytes in flight (503), the URI and header limits (414, 431), the request timeout (503)
/// and an `X-Request-Id` on every response.
pub fn router(state: ApiState) -> Router {
    let limit = state.config.max_body_bytes;
    let timeout = state.config.request_timeout;
    let send_limit = state.config.max_send_body_bytes.max(limit);
    let (routes, _) = table(send_limit, state.config.serve_metrics).into_parts();
    let routes = match state.config.operator_token {
        Some(_) => routes.nest(
            "/v1/operator",
            crate::operator::routes().fallback(unknown_route).method_not_allowed_fallback(method_not_allowed),
        ),
        None => routes,
    };
    routes
        // Resend's API (contract §11), with its own answers for unknown paths and methods.
        .nest("/resend", crate::compat::resend::routes(send_limit))
        // Postmark's email API (contract §11), likewise.
        .nest("/postmark", crate::compat::postmark::routes(send_limit))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(Extension(BodyLimit(limit)))
        .layer(axum::middleware::from_fn(move |req, next| time_limited(timeout, req, next)))
        // Outside the time limit: a body's budget is held until its answer, the 503 included.
        .layer(axum::middleware::from_fn(crate::body::hold_budget))
        // Before any handler: an oversized URI or header section is refused as it came.
        .layer(axum::middleware::from_fn(crate::head::check_head))
        // A panic is a bug, but it must cost one request, not the connection or the process,
        // and the client still gets the envelope.
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panic_response))
        // The catcher sees no request: a caught panic under `/resend` gets Resend's body here.
        .layer(axum::middleware::from_fn(resend_panic_body))
        // Outside the time limit and the panic catcher, so their 503 and 500 are counted.
        .layer(axum::middleware::from_fn_with_state(state.metrics.clone(), crate::metrics::track_requests))
        // Outside the time limit, so timeouts and panics are answered with the id and logged
        // in its span.
        .layer(axum::middleware::from_fn(crate::request_id::with_request_id))
        // Outermost: everything inside, the auth throttle above all, sees the client.
        .layer(axum::middleware::from_fn_with_state(state.clone(), crate::client_addr::resolve_client))
        .with_state(state)
}

/// `/metrics` alone, for a listener of its own (`TIDINGS_METRICS_LISTEN`), with the same
/// token check, client address, request id and envelope on other paths as [`router`]; build
/// the main router with [`HttpConfig::serve_metrics`](crate::HttpConfig) off beside it.
pub fn metrics_router(state: ApiState) -> Router {
    let (routes, _) = metrics::routes().into_parts();
    routes
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.metrics.clone(), crate::metrics::track_requests))
        .layer(axum::middleware::from_fn(crate::request_id::with_request_id))
        .layer(axum::middleware::from_fn_with_state(state.clone(), crate::client_addr::resolve_client))
        .with_state(state)
}

/// Answers 503 `unavailable` in the envelope when a request takes longer than `limit`
/// (tower-http's timeout layer would answer with an empty body).
async fn time_limited(
    limit: std::time::Duration,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = req.uri().path().to_owned();
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        // Another provider's SDK reads only its provider's error body.
        Err(_) => crate::compat::timed_out(&path).unwrap_or_else(|| {
            ApiError::Core(tidings_core::Error::Unavailable("request timed out".into())).into_response()
        }),
    }
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    let mut response = ApiError::Core(tidings_core::Error::Internal("handler panicked".into())).into_response();
    response.extensions_mut().insert(Panicked);
    response
}

/// Marks [`panic_response`]'s answer, for [`resend_panic_body`].
#[derive(Debug, Clone, Copy)]
struct Panicked;

/// A caught panic's 500 in Resend's or Postmark's body for a request under `/resend` or
/// `/postmark`.
async fn resend_panic_body(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let path = req.uri().path().to_owned();
    let response = next.run(req).await;
    if response.extensions().get::<Panicked>().is_none() || !crate::compat::owns(&path) {
        return response;
    }
    if crate::compat::resend::owns(&path) {
        return crate::compat::resend::ResendError::Panicked.into_response();
    }
    crate::compat::outer_answer(&path, ApiError::Core(tidings_core::Error::Internal("handler panicked".into())))
}

/// Marks the answer of [`router`]'s fallbacks (a path it does not serve, a method a path
/// does not take), in the response's extensions, so that a front end merged beside the API
/// (the dashboard) can answer a browser with a page instead of the envelope, and leave
/// every other 404 and 405 alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unrouted {
    /// 404: no route has this path.
    UnknownPath,
    /// 405: the path is served, not with this method.
    WrongMethod,
}

async fn unknown_route(uri: axum::http::Uri) -> Response {
    // `/resend` and `/postmark` themselves: the nested routers serve only the paths below.
    if crate::compat::resend::owns(uri.path()) {
        return crate::compat::resend::unknown_route().await;
    }
    if crate::compat::postmark::owns(uri.path()) {
        return crate::compat::outer_answer(uri.path(), ApiError::UnknownRoute);
    }
    let mut response = ApiError::UnknownRoute.into_response();
    response.extensions_mut().insert(Unrouted::UnknownPath);
    response
}

async fn method_not_allowed() -> Response {
    let mut response = ApiError::MethodNotAllowed.into_response();
    response.extensions_mut().insert(Unrouted::WrongMethod);
    response
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    use super::*;

    /// A panic is a bug, so no route can be made to panic on purpose: a router with one that
    /// does, under the same two layers as [`router`].
    #[tokio::test]
    async fn a_caught_panic_under_resend_is_answered_in_resends_body() {
        async fn boom() -> Response {
            panic!("a bug")
        }
        let app: Router = Router::new()
            .route("/resend/emails", axum::routing::get(boom))
            .route("/v1/messages", axum::routing::get(boom))
            .layer(tower_http::catch_panic::CatchPanicLayer::custom(panic_response))
            .layer(axum::middleware::from_fn(resend_panic_body));
        let body = |response: Response| async move {
            let bytes = axum::body::to_bytes(response.into_body(), 4096).await.unwrap();
            serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()
        };
        let resend = app.clone().oneshot(Request::get("/resend/emails").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(resend.status(), 500);
        let resend = body(resend).await;
        assert_eq!(
            (resend["statusCode"].as_u64(), resend["name"].as_str()),
            (Some(500), Some("internal_server_error"))
        );
        let v1 = app.oneshot(Request::get("/v1/messages").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(body(v1).await["success"], false, "the envelope elsewhere");
    }
}
