//! The payment domain: money, orders, payment attempts and their state machines, the payment
//! flow and the reconciler.

pub mod attempts;
pub mod event_log;
pub mod failover;
pub mod final_attempts;
pub mod flow;
pub mod keyed;
pub mod metrics;
pub mod money;
pub mod orders;
pub mod payment_method;
pub mod reconciler;
pub mod reconciler_settings;
pub mod refunds;
pub mod routing;
pub mod service;
pub mod status;
pub mod support;
pub mod text;
pub mod transition;
pub mod webhooks;

pub use attempts::{PaymentAttempt, Source};
pub use service::Payments;
pub use status::AttemptStatus;
