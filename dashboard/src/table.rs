//! [`RouteTable`]: the dashboard's router together with the list of what it serves, so that
//! tests can walk every route (the CSRF table, the access matrix) and fail on one that is
//! new to them.

use axum::Router;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, on};

use crate::DashboardState;

/// The routes and the record of what they serve; start from `default()`.
#[derive(Default)]
pub(crate) struct RouteTable {
    router: Router<DashboardState>,
    served: Vec<(Method, &'static str)>,
}

impl RouteTable {
    /// Serves `GET path` (and HEAD) with `handler`.
    pub(crate) fn get<H: Handler<T, DashboardState>, T: 'static>(self, path: &'static str, handler: H) -> Self {
        self.add(Method::GET, MethodFilter::GET, path, handler)
    }

    /// Serves `POST path` with `handler`.
    pub(crate) fn post<H: Handler<T, DashboardState>, T: 'static>(self, path: &'static str, handler: H) -> Self {
        self.add(Method::POST, MethodFilter::POST, path, handler)
    }

    fn add<H: Handler<T, DashboardState>, T: 'static>(
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

    /// The router and the record.
    pub(crate) fn into_parts(self) -> (Router<DashboardState>, Vec<(Method, &'static str)>) {
        (self.router, self.served)
    }
}
