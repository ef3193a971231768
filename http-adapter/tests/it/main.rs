//! The integration tests of `tidings-http`, one binary: the router over the in-memory store,
//! driven in-process ([`support`]), one module per area of the API.

mod batch_and_scheduling;
mod client_address_and_metrics_access;
mod domains_and_templates;
mod envelope_and_auth;
mod hostile_bodies;
mod metrics;
mod openapi;
mod operations;
mod operator_sites;
mod postmark_compat;
mod resend_compat;
mod send_fields;
mod support;
mod suppressions_and_webhooks;
mod tracking;
