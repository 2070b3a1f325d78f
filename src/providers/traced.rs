//! Every call to a provider in a `tracing` span of its own, `provider.call`, with the
//! provider's name, the operation, and what came back: so a slow checkout's time reads from
//! one trace as its claim (`idempotency.claim`), its statements (`db.statement`) and its
//! provider calls (docs/operations/monitoring.md, "Tracing"). At `debug` under [`crate::telemetry::TRACE`], like the
//! others: off unless asked for.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tracing::field::Empty;
use tracing::Instrument;

use super::{AcceptDisputeRequest, DisputeEvidenceRequest};
use super::{
    CancelRequest, CaptureRequest, ChargeRequest, Lookups, PaymentProvider, ProviderCall,
    RefundRequest, SendWindow, WebhookError, WebhookEvent,
};

/// `inner`, each call traced under the configured provider name `name`.
pub struct Traced {
    name: String,
    inner: Arc<dyn PaymentProvider>,
}

impl Traced {
    pub fn wrap(name: &str, inner: Arc<dyn PaymentProvider>) -> Arc<dyn PaymentProvider> {
        Arc::new(Traced {
            name: name.to_owned(),
            inner,
        })
    }

    async fn call(
        &self,
        operation: &'static str,
        call: impl std::future::Future<Output = ProviderCall>,
    ) -> ProviderCall {
        let span = tracing::debug_span!(
            target: crate::telemetry::TRACE,
            "provider.call",
            provider = %self.name,
            operation,
            outcome = Empty,
            http_status = Empty,
        );
        let call = call.instrument(span.clone()).await;
        span.record("outcome", call.outcome.label());
        if let Some(status) = call.http_status {
            span.record("http_status", status);
        }
        call
    }
}

#[async_trait]
impl PaymentProvider for Traced {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn signature_header(&self) -> Option<&'static str> {
        self.inner.signature_header()
    }

    fn acknowledgement(&self) -> Option<&'static str> {
        self.inner.acknowledgement()
    }

    async fn create_charge(&self, req: &ChargeRequest) -> ProviderCall {
        self.call("create_charge", self.inner.create_charge(req))
            .await
    }

    async fn retrieve(&self, provider_id: &str) -> ProviderCall {
        self.call("retrieve", self.inner.retrieve(provider_id))
            .await
    }

    fn lookups(&self) -> Lookups {
        self.inner.lookups()
    }

    async fn find_by_attempt(&self, attempt_id: &str, window: SendWindow) -> ProviderCall {
        self.call(
            "find_by_attempt",
            self.inner.find_by_attempt(attempt_id, window),
        )
        .await
    }

    async fn create_refund(&self, req: &RefundRequest) -> ProviderCall {
        self.call("create_refund", self.inner.create_refund(req))
            .await
    }

    async fn retrieve_refund(&self, provider_refund_id: &str) -> ProviderCall {
        self.call(
            "retrieve_refund",
            self.inner.retrieve_refund(provider_refund_id),
        )
        .await
    }

    async fn find_refund(&self, provider_payment_id: &str, refund_id: &str) -> ProviderCall {
        self.call(
            "find_refund",
            self.inner.find_refund(provider_payment_id, refund_id),
        )
        .await
    }

    async fn capture(&self, req: &CaptureRequest) -> ProviderCall {
        self.call("capture", self.inner.capture(req)).await
    }

    async fn cancel(&self, req: &CancelRequest) -> ProviderCall {
        self.call("cancel", self.inner.cancel(req)).await
    }

    async fn submit_dispute_evidence(&self, req: &DisputeEvidenceRequest) -> ProviderCall {
        self.call(
            "submit_dispute_evidence",
            self.inner.submit_dispute_evidence(req),
        )
        .await
    }

    async fn accept_dispute(&self, req: &AcceptDisputeRequest) -> ProviderCall {
        self.call("accept_dispute", self.inner.accept_dispute(req))
            .await
    }

    async fn complete_action(
        &self,
        provider_id: &str,
        attempt_id: &str,
        params: &[(String, String)],
    ) -> ProviderCall {
        self.call(
            "complete_action",
            self.inner.complete_action(provider_id, attempt_id, params),
        )
        .await
    }

    fn verify_delivery(
        &self,
        raw_body: &[u8],
        signature_header: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<WebhookEvent>, WebhookError> {
        self.inner.verify_delivery(raw_body, signature_header, now)
    }

    async fn settlement_entries(
        &self,
        query: &super::settlement::SettlementQuery,
    ) -> super::settlement::SettlementRead {
        self.inner.settlement_entries(query).await
    }
}
