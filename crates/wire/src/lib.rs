#![warn(unreachable_pub)]
//! What payorch and its sandbox provider share about the wire (docs/DESIGN.md, "Modules and
//! their dependencies"): Stripe's and Adyen's JSON shapes, how each signs its webhooks, the
//! [`Secret`](secret::Secret) those are signed and sent with, and why a webhook is refused.
//! payorch depends on the sandbox (`serve` embeds it), so neither can own these: both depend
//! on this crate, and payorch's `providers` re-exports it where its own modules stood.

pub mod adyen;
pub mod adyen_hmac;
/// Not the wire, but both sides of it draw their waits from it: payorch's reconciler its
/// checks, the sandbox its webhook retries (as a real provider's are jittered). This crate is
/// the one both depend on, so the schedule lives here once instead of in a crate of its own
/// for a function, or in two copies that could drift apart.
pub mod jitter;
pub mod secret;
pub mod signature;
pub mod stripe;
mod webhook_error;

pub use webhook_error::WebhookError;
