//! What the payment flow, the reconciler and the webhooks share: the provider and the
//! settings they act with, and the steps each of them takes on an attempt (the charge as the
//! provider sees it, the completion of the key that made a final attempt); and the context
//! every keyed use case enters the domain with ([`Context`]).

use std::sync::Arc;

use super::attempts::final_attempts::FinalAttempts;
use super::attempts::PaymentAttempt;
use super::event_log::EventLog;
use super::metrics::PaymentMetrics;
use super::reconciler::settings::ReconcilerSettings;
use super::routing::RoutingCache;
use super::success_scores::SuccessScores;
use crate::db::DbPool;
use crate::db::PgConn;
use crate::idempotency::in_flight::complete_for_resource;
use crate::idempotency::{KeyedRequest, Keys, Recorded, ResourceType};
use crate::ids::PaymentId;
use crate::providers::registry::Providers;
use crate::providers::{ChargeRequest, PaymentProvider};

/// What a keyed request brings into the domain, built the same way for every use case that
/// enters by one function: an order's ([`crate::payments::orders::command::run`]), a payment's
/// ([`crate::payments::attempts::pay::pay`]) and a refund's
/// ([`crate::payments::refunds::refund::refund`]). `input` is what the client asked for, read
/// but not validated: the use case validates it, and answers every field problem at once.
pub struct Context<'a, I> {
    pub pool: &'a DbPool,
    pub keys: &'a Keys,
    pub payments: &'a Payments,
    /// The request's merchant, key, operation and fingerprint.
    pub keyed: &'a KeyedRequest,
    pub input: I,
}

/// What the payment flow, the reconciler and the webhooks share.
pub struct Payments {
    /// Every configured provider, by name, in the default routing order.
    pub providers: Providers,
    /// Merchants' routings, as recently read.
    pub routing: RoutingCache,
    /// The providers' recent approval rates, as this replica last read them, for the routes
    /// that choose by success.
    pub success: Arc<SuccessScores>,
    pub metrics: Arc<PaymentMetrics>,
    pub reconciler: ReconcilerSettings,
    /// Attempts this replica saw finish, so their webhooks skip a read.
    pub finals: FinalAttempts,
    /// Where events that change no attempt are recorded, in batches.
    pub event_log: EventLog,
    /// Where payers' browsers reach payorch, without a trailing `/`: the base of the return
    /// route providers send them back to.
    pub public_url: String,
}

impl Payments {
    /// The adapter of the provider an attempt or refund went to (by its recorded name).
    pub fn adapter(&self, provider: &str) -> Arc<dyn PaymentProvider> {
        self.providers.adapter(provider)
    }

    /// Sets each provider's circuit gauge to its circuit's state now. Called by the
    /// reconciler every round and by `/metrics` before it answers, so a scrape sees a circuit
    /// that opened between rounds (or while the reconciler sleeps).
    pub fn publish_circuits(&self) {
        for provider in self.providers.iter() {
            self.metrics
                .circuit(&provider.name, provider.circuit.state());
        }
    }

    /// Where a provider sends the payer back after a challenge: payorch's own
    /// `GET /v1/payments/{id}/return`, which asks the provider for the outcome (Adyen's
    /// `/payments/details`) before it sends the payer on to the merchant's `return_url`
    /// (docs/guides/three-d-secure.md, "3-D Secure").
    pub fn payer_return_url(&self, attempt: PaymentId) -> String {
        format!("{}/v1/payments/{attempt}/return", self.public_url)
    }

    /// The charge as the provider sees it: the same on every resend, so long as the public
    /// URL stays the same. A merchant's `return_url` says a payer is there to follow a
    /// redirect; the provider is given payorch's return route in its place, never the
    /// merchant's, so that nothing reaches the merchant's page before payorch has finished
    /// the payment.
    pub fn charge_request(&self, attempt: &PaymentAttempt) -> ChargeRequest {
        ChargeRequest {
            amount: attempt.amount,
            currency: attempt.currency.clone(),
            payment_method: attempt.payment_method.clone(),
            idempotency_key: attempt.provider_idempotency_key.clone(),
            attempt_id: attempt.id.to_string(),
            order_id: attempt.order_id.to_string(),
            merchant_id: attempt.merchant_id.to_string(),
            capture_method: attempt.capture_method,
            return_url: attempt
                .return_url
                .as_ref()
                .map(|_| self.payer_return_url(attempt.id)),
            return_route: self.payer_return_url(attempt.id),
            // The attempt's own, stored with it, so every resend asks the same.
            three_d_secure: attempt.three_d_secure,
        }
    }
}

/// Completes the Idempotency-Key that made a now-final attempt, for whoever finished it
/// (the reconciler, a webhook), so a late retry replays the final result and the key may
/// expire.
pub async fn settle_key(conn: &mut PgConn, attempt: &PaymentAttempt) -> diesel::QueryResult<()> {
    match &attempt.idempotency_key {
        Some(key) => {
            complete_for_resource(conn, attempt.merchant_id, key, &recorded(attempt)).await
        }
        None => Ok(()),
    }
}

/// What a payment key records: `201` and its attempt, which a replay shows as it is then. An
/// open attempt keeps its key from being reaped.
pub fn recorded(attempt: &PaymentAttempt) -> Recorded {
    Recorded {
        status: 201,
        resource_type: ResourceType::PaymentAttempt,
        resource_id: attempt.id.0,
        unresolved: !attempt.status.is_final(),
    }
}
