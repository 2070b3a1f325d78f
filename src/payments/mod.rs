//! The payment domain: money, orders, payment attempts and their state machines, refunds,
//! inbound provider webhooks and the reconciler.
//!
//! Folders by use case; the shared vocabulary (`status`, `money`, `text`, `payment_method`,
//! `routing`, `event_log`, `metrics`) and what the flow, the reconciler and webhooks share
//! (`service`) stay flat beside them:
//!
//! - `orders`: an order (its rows and reads), and its keyed work ([`orders::keyed`]: create,
//!   cancel).
//! - `attempts`: a payment attempt (its rows and reads), the payment flow
//!   ([`attempts::pay`]), its keyed work ([`attempts::keyed`]: pay an order, checkout), the
//!   decision on a provider's answer and its recording ([`attempts::transition`]), failover,
//!   and the final attempts a replica remembers.
//! - `refunds`, mirroring attempts: a refund (its rows and reads), the refund flow
//!   ([`refunds::refund`]), its keyed work ([`refunds::keyed`]), the recording of an outcome
//!   ([`refunds::record`]) and the reconciler's part ([`refunds::reconcile`]).
//! - `webhooks`: verified provider events, recorded once and applied.
//! - `reconciler`: the worker that finds the truth about open attempts and refunds, and its
//!   settings.
//! - `support`: what support staff ask of payments.

pub mod attempts;
pub mod event_log;
pub mod metrics;
pub mod money;
pub mod orders;
pub mod payment_method;
pub mod reconciler;
pub mod refunds;
pub mod routing;
pub mod service;
pub mod status;
pub mod support;
pub mod text;
pub mod webhooks;

pub use attempts::{PaymentAttempt, Source};
/// The reconciler's settings under their former path (`config` names them so).
pub use reconciler::settings as reconciler_settings;
pub use service::Payments;
pub use status::AttemptStatus;
