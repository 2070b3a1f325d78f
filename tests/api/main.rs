//! Integration tests: real PostgreSQL (one private cluster per test run, or `DATABASE_URL`),
//! a real server on port 0 per test, called over real HTTP.
// The tests read back what was committed before them; `get_result` is refused in `src/`
// only, where a statement's first row may come before its commit (src/db/mod.rs, `one`).
#![allow(clippy::disallowed_methods)]

mod helpers;

mod adyen;
mod api_reference;
mod auth;
mod browser;
mod captures;
mod checkout_page;
mod cluster;
mod console;
mod contradictions;
mod crash;
mod database_failover;
mod database_roles;
mod database_tls;
mod declines;
mod dispute_actions;
mod disputes;
mod disputes_api;
mod door;
mod errors;
mod event_delivery;
mod events_api;
mod failover;
mod health;
mod holds;
mod hostile_input;
mod key_lifetime;
mod keys;
mod late_approvals;
mod limits;
mod metrics_access;
mod migrations;
mod monitoring;
mod openapi;
mod orders;
mod outage;
mod outbox;
mod overload;
mod partitions;
mod payer_return;
mod payments;
mod pooler;
mod production;
mod provider_webhooks_kept;
mod refunds;
mod retries;
mod schema_file;
mod schema_mirrors;
mod secrets_at_rest;
mod serve;
mod settlement;
mod slow_clients;
mod success_routing;
mod support;
mod webhook_endpoints;
mod webhooks;
