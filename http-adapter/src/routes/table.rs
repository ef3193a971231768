//! [`RouteTable`]: the API's routes and their OpenAPI operations, added together.
//!
//! A route is added only as utoipa-axum's `routes!(handler, ...)` of handlers that carry
//! `#[utoipa::path]`: the router serves each handler at the path and methods its attribute
//! documents, so the served routes and the document cannot drift apart. The table offers no
//! way to add a route without its operation (utoipa-axum's `OpenApiRouter::route` would).
//! [`crate::served_routes`] lists what was added, which the tests compare with the document
//! as it is served, after `crate::openapi` has completed it.

use axum::Router;
use axum::http::Method;
use utoipa::openapi::OpenApi;
use utoipa::openapi::path::PathItem;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use crate::ApiState;

/// The routes of the API with their operations; start from `default()`.
#[derive(Default)]
pub struct RouteTable(OpenApiRouter<ApiState>);

impl RouteTable {
    /// Serves the handlers of `routes!(...)`, each at the path and methods of its
    /// `#[utoipa::path]`, and adds their operations to the document.
    pub fn routes(self, handlers: UtoipaMethodRouter<ApiState>) -> Self {
        Self(self.0.routes(handlers))
    }

    /// Adds every route of `other`.
    pub fn merge(self, other: Self) -> Self {
        Self(self.0.merge(other.0))
    }

    /// The router, and the operations of its routes as their handlers describe them.
    pub fn into_parts(self) -> (Router<ApiState>, OpenApi) {
        self.0.split_for_parts()
    }
}

/// The `(method, path)` pairs of `api`'s operations.
pub fn operations(api: &OpenApi) -> Vec<(Method, String)> {
    let mut pairs = Vec::new();
    for (path, item) in &api.paths.paths {
        for (method, operation) in methods(item) {
            if operation {
                pairs.push((method, path.clone()));
            }
        }
    }
    pairs
}

fn methods(item: &PathItem) -> [(Method, bool); 8] {
    [
        (Method::GET, item.get.is_some()),
        (Method::PUT, item.put.is_some()),
        (Method::POST, item.post.is_some()),
        (Method::DELETE, item.delete.is_some()),
        (Method::OPTIONS, item.options.is_some()),
        (Method::HEAD, item.head.is_some()),
        (Method::PATCH, item.patch.is_some()),
        (Method::TRACE, item.trace.is_some()),
    ]
}
