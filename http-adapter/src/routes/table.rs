//! [`RouteTable`]: an axum router that remembers which `(method, path)` pairs it serves.
//!
//! axum cannot list a `Router`'s routes, yet the OpenAPI document must name exactly the
//! operations the router serves. Every route is therefore added through this table, which
//! records the pair as it registers the handler; [`crate::served_routes`] reads the record and
//! the tests compare it with the document. One route per method: axum merges method routers
//! added for the same path (`.route(p, on(GET, a)).route(p, on(POST, b))`), and panics on a
//! method added twice, so the record cannot hold a pair the router does not serve.

use axum::Router;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, on};

use crate::ApiState;

/// The routes of the API and the record of what they serve; start from `default()`.
#[derive(Default)]
pub struct RouteTable {
    router: Router<ApiState>,
    served: Vec<(Method, &'static str)>,
}

impl RouteTable {
    /// Serves `GET path` (and `HEAD`, as axum does for every GET route) with `handler`.
    pub fn get<H: Handler<T, ApiState>, T: 'static>(self, path: &'static str, handler: H) -> Self {
        self.add(Method::GET, MethodFilter::GET, path, handler)
    }

    /// Serves `POST path` with `handler`.
    pub fn post<H: Handler<T, ApiState>, T: 'static>(self, path: &'static str, handler: H) -> Self {
        self.add(Method::POST, MethodFilter::POST, path, handler)
    }

    /// Serves `PATCH path` with `handler`.
    pub fn patch<H: Handler<T, ApiState>, T: 'static>(self, path: &'static str, handler: H) -> Self {
        self.add(Method::PATCH, MethodFilter::PATCH, path, handler)
    }

    /// Serves `DELETE path` with `handler`.
    pub fn delete<H: Handler<T, ApiState>, T: 'static>(self, path: &'static str, handler: H) -> Self {
        self.add(Method::DELETE, MethodFilter::DELETE, path, handler)
    }

    /// Adds every route of `other`.
    pub fn merge(mut self, other: Self) -> Self {
        self.router = self.router.merge(other.router);
        self.served.extend(other.served);
        self
    }

    /// The router and the `(method, path)` pairs it serves, in the order they were added.
    pub fn into_parts(self) -> (Router<ApiState>, Vec<(Method, &'static str)>) {
        (self.router, self.served)
    }

    fn add<H: Handler<T, ApiState>, T: 'static>(
        mut self,
        method: Method,
        filter: MethodFilter,
        path: &'static str,
        handler: H,
    ) -> Self {
        self.router = self.router.route(path, on(filter, handler));
        self.served.push((method, path));
        self
    }
}
