//! `/v1/domains` (in progress).

use axum::Router;

use crate::ApiState;

/// The domains routes.
pub fn routes() -> Router<ApiState> {
    Router::new()
}
