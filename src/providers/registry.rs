//! The providers payorch is configured with, by name (docs/guides/routing.md, "Routing and failover"). An
//! attempt records the name of the provider it was sent to, and everything that later asks
//! about it (the reconciler, support, refunds, webhooks) finds its adapter here by that name.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::circuit::{Circuit, CircuitSettings};
use super::traced::Traced;
use super::{AcceptDisputeRequest, DisputeEvidenceRequest};
use super::{
    CancelRequest, CaptureRequest, ChargeRequest, Lookups, PaymentProvider, ProviderCall,
    RefundRequest, SendWindow, WebhookError, WebhookEvent,
};

/// One configured provider: its name (what attempts record and what its webhook path
/// says), its adapter and its circuit.
pub struct NamedProvider {
    pub name: String,
    pub adapter: Arc<dyn PaymentProvider>,
    pub circuit: Circuit,
}

/// Every configured provider, in the default routing order.
pub struct Providers {
    list: Vec<NamedProvider>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error("no provider is configured")]
    Empty,
    #[error("provider name {0:?} is used twice")]
    Duplicate(String),
    #[error("provider name {0:?} must be 1–32 of a-z, 0-9, '-' and '_'")]
    BadName(String),
}

/// Whether `name` may name a provider: it appears in URLs and in stored attempts.
pub fn is_valid_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

impl Providers {
    pub fn new(
        list: Vec<(String, Arc<dyn PaymentProvider>)>,
        circuit: &CircuitSettings,
    ) -> Result<Self, RegistryError> {
        if list.is_empty() {
            return Err(RegistryError::Empty);
        }
        let mut named: Vec<NamedProvider> = Vec::with_capacity(list.len());
        for (name, adapter) in list {
            if !is_valid_name(&name) {
                return Err(RegistryError::BadName(name));
            }
            if named.iter().any(|p| p.name == name) {
                return Err(RegistryError::Duplicate(name));
            }
            named.push(NamedProvider {
                adapter: Traced::wrap(&name, adapter),
                name,
                circuit: Circuit::new(circuit.clone()),
            });
        }
        Ok(Providers { list: named })
    }

    /// One provider under its adapter's protocol name (`stripe`).
    pub fn single(adapter: Arc<dyn PaymentProvider>) -> Self {
        let name = adapter.name().to_owned();
        Providers {
            list: vec![NamedProvider {
                adapter: Traced::wrap(&name, adapter),
                name,
                circuit: Circuit::new(CircuitSettings::default()),
            }],
        }
    }

    pub fn get(&self, name: &str) -> Option<&NamedProvider> {
        self.list.iter().find(|p| p.name == name)
    }

    /// The default routing order.
    pub fn iter(&self) -> impl Iterator<Item = &NamedProvider> {
        self.list.iter()
    }

    pub fn names(&self) -> Vec<String> {
        self.list.iter().map(|p| p.name.clone()).collect()
    }

    /// The first provider: where a route with none configured goes.
    pub fn first(&self) -> &NamedProvider {
        &self.list[0]
    }

    /// The adapter of the provider named `name`; for a name this process is not configured
    /// with (an attempt made under an older configuration), one whose every answer is
    /// unknown, so what it holds stays open and is counted for a human, never guessed.
    pub fn adapter(&self, name: &str) -> Arc<dyn PaymentProvider> {
        match self.get(name) {
            Some(provider) => provider.adapter.clone(),
            None => Arc::new(Unconfigured),
        }
    }
}

/// The adapter of a provider this process does not know.
struct Unconfigured;

impl Unconfigured {
    fn unknown(&self) -> ProviderCall {
        ProviderCall::unsent_unknown("this provider is not configured in this process")
    }
}

#[async_trait]
impl PaymentProvider for Unconfigured {
    fn name(&self) -> &'static str {
        "unconfigured"
    }
    fn signature_header(&self) -> Option<&'static str> {
        None
    }
    async fn create_charge(&self, _: &ChargeRequest) -> ProviderCall {
        self.unknown()
    }
    async fn retrieve(&self, _: &str) -> ProviderCall {
        self.unknown()
    }
    /// Asked like any provider: every answer is unknown, so what it holds is counted for a
    /// human rather than canceled.
    fn lookups(&self) -> Lookups {
        Lookups::ReadAfterWrite
    }
    async fn find_by_attempt(&self, _: &str, _: SendWindow) -> ProviderCall {
        self.unknown()
    }
    async fn create_refund(&self, _: &RefundRequest) -> ProviderCall {
        self.unknown()
    }
    async fn retrieve_refund(&self, _: &str) -> ProviderCall {
        self.unknown()
    }
    async fn find_refund(&self, _: &str, _: &str) -> ProviderCall {
        self.unknown()
    }
    async fn capture(&self, _: &CaptureRequest) -> ProviderCall {
        self.unknown()
    }
    async fn cancel(&self, _: &CancelRequest) -> ProviderCall {
        self.unknown()
    }
    async fn submit_dispute_evidence(&self, _: &DisputeEvidenceRequest) -> ProviderCall {
        self.unknown()
    }
    async fn accept_dispute(&self, _: &AcceptDisputeRequest) -> ProviderCall {
        self.unknown()
    }
    async fn complete_action(&self, _: &str, _: &str, _: &[(String, String)]) -> ProviderCall {
        self.unknown()
    }
    fn verify_delivery(
        &self,
        _: &[u8],
        _: Option<&str>,
        _: DateTime<Utc>,
    ) -> Result<Vec<WebhookEvent>, WebhookError> {
        Err(WebhookError::NoMatchingSignature)
    }
}
