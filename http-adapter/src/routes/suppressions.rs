//! `/v1/suppressions` (in progress).

use axum::Router;

use crate::ApiState;

/// The suppressions routes.
pub fn routes() -> Router<ApiState> {
    Router::new()
}
