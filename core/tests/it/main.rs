//! The integration tests of `tidings-core`, one binary: the use cases and the workers driven
//! through the public API over `tidings-testing`'s in-memory store and fakes, with its
//! `FaultyStore` around the store where a failure or a concurrent writer must be injected,
//! and the conformance suites run on the reference implementations. [`module_graph`] reads
//! the crate's sources instead: its top-level modules must depend on each other without
//! cycles.

mod admission_rule;
mod conformance_memory;
mod delivery_races;
mod delivery_recipients;
mod delivery_restart;
mod delivery_sites;
mod delivery_worker;
mod event_feed;
mod inprocess;
mod limits_conformance;
mod module_graph;
mod observer;
mod outbound_dkim;
mod outbound_tracking;
mod return_path_per_domain;
mod usecases_batch;
mod usecases_dkim_rotation;
mod usecases_domain_recheck;
mod usecases_domains;
mod usecases_feedback;
mod usecases_inbound;
mod usecases_keys;
mod usecases_message_search;
mod usecases_messages;
mod usecases_reputation;
mod usecases_sandbox;
mod usecases_scheduling;
mod usecases_send_fields;
mod usecases_sessions;
mod usecases_submission;
mod usecases_suppressions;
mod usecases_templates;
mod usecases_tracking;
mod usecases_webhooks;
mod webhook_dispatch;
mod webhook_worker;
