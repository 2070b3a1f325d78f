//! The payment domain: money, orders, payment attempts and their state machines, refunds,
//! inbound provider webhooks and the reconciler.
//!
//! Folders by use case; the shared vocabulary (`status`, `money`, `text`, `payment_method`,
//! `routing`, `event_log`, `metrics`) and what the flow, the reconciler and webhooks share
//! (`service`) stay flat beside them. Orders, payments and refunds each enter by one function
//! taking one [`service::Context`] (the pool, the idempotency keys, [`Payments`], the keyed
//! request, and the input as the client sent it, validated here):
//!
//! - `orders`: an order (its rows and reads); enters by [`orders::command::run`]
//!   (`OrderContext`: create, cancel), whose keyed work is [`orders::keyed`].
//! - `attempts`: a payment attempt (its rows and reads); enters by [`attempts::pay::pay`]
//!   (`PayContext`: pay an order, checkout), whose keyed work is [`attempts::keyed`]; the
//!   decision on a provider's answer and its recording ([`attempts::transition`]), failover,
//!   and the final attempts a replica remembers.
//! - `refunds`, mirroring attempts: a refund (its rows and reads); enters by
//!   [`refunds::refund::refund`] (`RefundContext`), whose keyed work is [`refunds::keyed`]; the
//!   recording of an outcome ([`refunds::record`]) and the reconciler's part
//!   ([`refunds::reconcile`]).
//! - `webhooks`: verified provider events, recorded once and applied; enters by
//!   [`webhooks::receive`].
//! - `reconciler`: the worker that finds the truth about open attempts and refunds
//!   ([`reconciler::run`]), and its settings.
//! - `late_approvals`: a provider's approval of an attempt payorch holds as failed, given
//!   back at once ([`late_approvals::detect`], [`late_approvals::undo`]).
//! - `support`: what support staff ask of payments.

pub mod answer;
pub mod attempts;
pub mod disputes;
pub mod due;
pub mod event_log;
pub mod holds;
pub mod late_approvals;
pub mod metrics;
pub mod money;
pub mod orders;
pub mod payment_method;
pub mod payment_options;
pub mod reconciler;
pub mod refunds;
pub mod routing;
pub mod service;
pub mod settlement;
pub mod snapshot;
pub mod status;
pub mod success_gauges;
pub mod success_routing;
pub mod success_scores;
pub mod support;
pub mod webhooks;

pub use attempts::{PaymentAttempt, Source};
pub use service::Payments;
pub use status::AttemptStatus;
