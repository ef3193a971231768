//! `/v1/templates` (in progress).

use axum::Router;

use crate::ApiState;

/// The templates routes.
pub fn routes() -> Router<ApiState> {
    Router::new()
}
