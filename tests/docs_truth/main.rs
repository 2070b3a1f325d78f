//! What the documentation lists, held to the code, so that the next drift fails `cargo test`:
//! the event types, the error codes, the flags, the commands, the API's routes, the sections
//! cited, the folders of the layout, the delivery's shape and what "Trying it" runs. Each check reads README.md and docs/ as
//! text and finds its list by its header or its section's title wherever it is, and each
//! failure says what to add or remove, where.

mod citations;
mod commands;
mod configuration;
mod declines;
mod error_codes;
mod event_types;
mod examples;
mod flags;
mod layout;
mod markdown;
mod routes;
mod trying_it;
