//! The end-to-end tests: one test binary, one module per area, each starting the real
//! `tidings-server` binary through the harness in `tests/src` and talking HTTPS to it.
//!
//! One binary links once instead of once per file. Nothing here needs a process of its own:
//! no test sets process-wide state (environment, working directory, limits of its own
//! process) or re-executes itself; servers are child processes, each on its own data dir
//! and port, and `prlimit` and `kill` act on a server's pid. Tests of every module run in
//! parallel with each other (`--test-threads` as usual); a module whose tests share one
//! server runs them on [`common::block_on`]'s runtime, which the whole binary shares.
//!
//! Run one area with its module path as the filter: `cargo test -p tidings-e2e --test it
//! cluster::`, `… --test it browser::`.

mod common;

mod access_under_attack;
mod architecture;
mod batch;
mod browser;
mod cluster;
mod crash_loop;
mod dashboard;
mod delivery;
mod delivery_sites;
mod disk_full;
mod dkim_rotation;
mod domains_templates;
mod errors;
mod exhaustion;
mod exhaustion_memory;
mod hardening_edges;
mod hardening_round_two;
mod header_injection;
mod inbound;
mod interop;
mod keys_and_access;
mod messages;
mod mta_sts;
mod mx_guard;
mod operations;
mod operator_logs;
mod overview;
mod postgres;
mod postmark_sdk;
mod readme;
mod recipients;
mod replays_and_renders;
mod reports;
mod reputation;
mod resend_sdk;
mod return_path;
mod sandbox;
mod scheduling;
mod secret_rotation;
mod secrets_at_rest;
mod send_fields;
mod sending_host;
mod server;
mod smtp_faults;
mod smtp_listeners;
mod submission;
mod suppressions_webhooks;
mod tenant_fairness;
mod tracking;
mod walkthrough;
mod webhook_formats;
mod webhooks;
