//! Payment metrics: attempt transitions, provider calls, and the attempts and refunds still
//! unresolved.

use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts};

use super::attempts::{CallKind, Source};
use super::status::AttemptStatus;
use crate::providers::circuit::CircuitState;
use crate::providers::decline::{Decline, DeclineCode};
use crate::providers::ProviderCall;

/// The `result`s of `payorch_late_approvals_total`: the news, then each end of its undo.
pub const LATE_APPROVAL_RESULTS: [&str; 4] = ["detected", "voided", "refunded", "undo_failed"];

pub struct PaymentMetrics {
    transitions: IntCounterVec,
    declines: IntCounterVec,
    provider_calls: IntCounterVec,
    provider_latency: HistogramVec,
    failovers: IntCounterVec,
    retries: IntCounterVec,
    retries_refused: IntCounterVec,
    circuits: IntGaugeVec,
    provider_webhooks: IntCounterVec,
    late_approvals: IntCounterVec,
    disputes: IntCounterVec,
    pub unresolved: IntGaugeVec,
    pub oldest_unresolved_seconds: IntGauge,
    pub unresolved_overdue: IntGauge,
    pub refunds_unresolved_overdue: IntGauge,
    pub late_approvals_undoing_overdue: IntGauge,
    pub disputes_response_due: IntGauge,
}

impl PaymentMetrics {
    pub fn new() -> prometheus::Result<Self> {
        Ok(PaymentMetrics {
            transitions: IntCounterVec::new(
                Opts::new(
                    "payment_attempt_transitions_total",
                    "Payment attempt status changes by from, to and source",
                ),
                &["from", "to", "source"],
            )?,
            declines: IntCounterVec::new(
                Opts::new(
                    "payment_declines_total",
                    "Failed payment attempts by provider, payorch's failure_code and its class \
                     (docs/guides/declines.md)",
                ),
                &["provider", "code", "class"],
            )?,
            provider_calls: IntCounterVec::new(
                Opts::new(
                    "provider_calls_total",
                    "Provider calls by provider, operation and outcome",
                ),
                &["provider", "operation", "outcome"],
            )?,
            provider_latency: HistogramVec::new(
                HistogramOpts::new("provider_call_seconds", "Provider call latency").buckets(vec![
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ]),
                &["provider", "operation"],
            )?,
            failovers: IntCounterVec::new(
                Opts::new(
                    "provider_failovers_total",
                    "Payments moved to the next provider because the first was not reached",
                ),
                &["from", "to"],
            )?,
            retries: IntCounterVec::new(
                Opts::new(
                    "payment_retries_total",
                    "Declined payments tried again, by provider from and to and reason \
                     (soft_decline, authentication_required; docs/guides/declines.md)",
                ),
                &["from", "to", "reason"],
            )?,
            retries_refused: IntCounterVec::new(
                Opts::new(
                    "payment_retries_refused_total",
                    "Declines not tried again, by provider and the rule that refused \
                     (docs/guides/declines.md, \"Retries\")",
                ),
                &["provider", "reason"],
            )?,
            circuits: IntGaugeVec::new(
                Opts::new(
                    "provider_circuit_state",
                    "Each provider's circuit: 0 closed, 1 half-open, 2 open",
                ),
                &["provider"],
            )?,
            provider_webhooks: IntCounterVec::new(
                Opts::new(
                    "webhook_events_total",
                    "Provider webhook deliveries by outcome (applied, stale, conflict, \
                     unknown_attempt, ignored, duplicate, rejected)",
                ),
                &["outcome"],
            )?,
            late_approvals: IntCounterVec::new(
                Opts::new(
                    "late_approvals_total",
                    "Approvals of attempts payorch held as failed, by provider and result \
                     (detected, voided, refunded, undo_failed; docs/guides/declines.md)",
                ),
                &["provider", "result"],
            )?,
            disputes: IntCounterVec::new(
                Opts::new(
                    "disputes_total",
                    "Provider dispute events applied, by provider and the status they left the \
                     dispute in (docs/guides/disputes.md)",
                ),
                &["provider", "status"],
            )?,
            unresolved: IntGaugeVec::new(
                Opts::new(
                    "payment_attempts_unresolved",
                    "Attempts still created or pending, by status",
                ),
                &["status"],
            )?,
            oldest_unresolved_seconds: IntGauge::new(
                "payment_attempts_oldest_unresolved_seconds",
                "Age of the oldest attempt still created or pending",
            )?,
            unresolved_overdue: IntGauge::new(
                "payment_attempts_unresolved_overdue",
                "Attempts unresolved for longer than the alert threshold: a human should look",
            )?,
            refunds_unresolved_overdue: IntGauge::new(
                "refunds_unresolved_overdue",
                "Refunds still created or pending longer than the alert threshold, each \
                 holding its amount: a human should look",
            )?,
            late_approvals_undoing_overdue: IntGauge::new(
                "late_approvals_undoing_overdue",
                "Late approvals still undoing longer than the alert threshold: money a provider \
                 took unasked and has not given back, a human should look",
            )?,
            disputes_response_due: IntGauge::new(
                "disputes_response_due",
                "Disputes awaiting an answer nobody sent, due within 72 hours or past: the \
                 merchant loses them unanswered (docs/guides/support.md, \"Disputes\")",
            )?,
        })
    }

    pub fn register(
        &self,
        registry: &crate::telemetry::metrics::Metrics,
    ) -> prometheus::Result<()> {
        registry.register(Box::new(self.transitions.clone()))?;
        registry.register(Box::new(self.declines.clone()))?;
        registry.register(Box::new(self.provider_calls.clone()))?;
        registry.register(Box::new(self.provider_latency.clone()))?;
        registry.register(Box::new(self.failovers.clone()))?;
        registry.register(Box::new(self.retries.clone()))?;
        registry.register(Box::new(self.retries_refused.clone()))?;
        registry.register(Box::new(self.circuits.clone()))?;
        registry.register(Box::new(self.provider_webhooks.clone()))?;
        registry.register(Box::new(self.late_approvals.clone()))?;
        registry.register(Box::new(self.disputes.clone()))?;
        registry.register(Box::new(self.disputes_response_due.clone()))?;
        registry.register(Box::new(self.unresolved.clone()))?;
        registry.register(Box::new(self.oldest_unresolved_seconds.clone()))?;
        registry.register(Box::new(self.unresolved_overdue.clone()))?;
        registry.register(Box::new(self.refunds_unresolved_overdue.clone()))?;
        registry.register(Box::new(self.late_approvals_undoing_overdue.clone()))
    }

    /// Serves every late-approval series of `providers` from the start, at 0: a counter's
    /// first series appears at 1, which `increase()` reads as no increase, so the first undo
    /// that failed after a start would raise no alert (ops/prometheus/alerts.yml,
    /// `LateApprovalUndoFailed`). Only once a scrape has read the 0, as for deliveries.
    pub fn late_approvals_from_zero<'a>(&self, providers: impl IntoIterator<Item = &'a str>) {
        for provider in providers {
            for result in LATE_APPROVAL_RESULTS {
                self.late_approvals.with_label_values(&[provider, result]);
            }
        }
    }

    pub fn transition(&self, from: AttemptStatus, to: AttemptStatus, source: Source) {
        self.transitions
            .with_label_values(&[from.as_str(), to.as_str(), source.as_str()])
            .inc();
    }

    /// An attempt of `provider` failed with `code` and `decline`, counted in payorch's words
    /// whichever protocol said it (the labels are the vocabulary's, so the series stay few). A
    /// decline no table knows is counted as `declined` and logged with the provider's code, so
    /// the tables can grow; a failure that came with no decline at all is counted the same,
    /// and warned of where it is stored (`Decline::stored`).
    pub fn declined(&self, provider: &str, code: &str, decline: Option<&Decline>) {
        let (stored, _) = Decline::resolved(code, decline);
        if decline.is_some() && stored.code == DeclineCode::Declined {
            tracing::warn!(
                provider,
                provider_code = stored.provider_code.as_deref().unwrap_or_default(),
                "a decline payorch's tables do not know, counted as declined (soft)"
            );
        }
        self.declines
            .with_label_values(&[provider, stored.code.as_str(), stored.class.as_str()])
            .inc();
    }

    /// A new attempt (`∅ → created`).
    pub fn created(&self) {
        self.transitions
            .with_label_values(&["none", "created", Source::Api.as_str()])
            .inc();
    }

    pub fn provider_call(&self, provider: &str, kind: CallKind, call: &ProviderCall) {
        self.provider_calls
            .with_label_values(&[provider, kind.as_str(), call.outcome.label()])
            .inc();
        self.provider_latency
            .with_label_values(&[provider, kind.as_str()])
            .observe(call.latency.as_secs_f64());
    }

    pub fn failover(&self, from: &str, to: &str) {
        self.failovers.with_label_values(&[from, to]).inc();
    }

    /// A declined attempt at `from` tried again at `to` for `reason`.
    pub fn retried(&self, from: &str, to: &str, reason: &str) {
        self.retries.with_label_values(&[from, to, reason]).inc();
    }

    /// A decline at `provider` not tried again, for `reason` (a `NoRetry`'s word).
    pub fn retry_refused(&self, provider: &str, reason: &str) {
        self.retries_refused
            .with_label_values(&[provider, reason])
            .inc();
    }

    pub fn circuit(&self, provider: &str, state: CircuitState) {
        self.circuits
            .with_label_values(&[provider])
            .set(state.gauge());
    }

    pub fn webhook_event(&self, outcome: &str) {
        self.provider_webhooks.with_label_values(&[outcome]).inc();
    }

    /// A late approval of `provider` was `result`: `detected`, then how its undo ended (one of
    /// [`LATE_APPROVAL_RESULTS`]).
    pub fn late_approval(&self, provider: &str, result: &str) {
        self.late_approvals
            .with_label_values(&[provider, result])
            .inc();
    }

    /// A dispute event of `provider` applied, leaving its dispute in `status`.
    pub fn dispute(&self, provider: &str, status: &str) {
        self.disputes.with_label_values(&[provider, status]).inc();
    }

    pub fn set_unresolved(&self, created: i64, pending: i64, oldest: Duration, overdue: i64) {
        self.unresolved.with_label_values(&["created"]).set(created);
        self.unresolved.with_label_values(&["pending"]).set(pending);
        self.oldest_unresolved_seconds.set(oldest.as_secs() as i64);
        self.unresolved_overdue.set(overdue);
    }

    /// Refunds open past the alert age: the ones support's "What needs a human" lists.
    pub fn set_refunds_overdue(&self, overdue: i64) {
        self.refunds_unresolved_overdue.set(overdue);
    }

    /// Late approvals `undoing` past the alert age: support's "What needs a human" lists them
    /// first.
    pub fn set_late_approvals_overdue(&self, overdue: i64) {
        self.late_approvals_undoing_overdue.set(overdue);
    }
}
