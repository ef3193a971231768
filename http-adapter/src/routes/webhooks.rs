//! `/v1/webhooks` (in progress).

use axum::Router;

use crate::ApiState;

/// The webhooks routes.
pub fn routes() -> Router<ApiState> {
    Router::new()
}
