#![warn(unreachable_pub)]
//! payorch: payment orchestration with one promise — one intent of the payer, at most one charge.

pub mod accounts;
pub mod app;
pub mod bounded_map;
pub mod commands;
pub mod config;
pub mod credentials;
pub mod db;
pub mod delivery;
pub mod events;
pub mod fields;
pub mod http;
pub mod idempotency;
pub mod ids;
pub mod lasting;
pub mod payments;
pub mod provider_specs;
pub mod providers;
pub mod rate_limit;
pub mod sealing;
pub mod secret_files;
pub mod telemetry;
pub mod views;
pub mod wiring;
pub mod words;

// Shared with the sandbox provider, so kept in `payorch-wire`; here where they always stood.
pub use payorch_wire::{jitter, secret};
