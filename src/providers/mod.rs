//! Payment provider adapters.
//!
//! payorch talks to providers through [`PaymentProvider`]. Every method answers a
//! [`ProviderCall`]: a typed [`ProviderOutcome`] plus what the caller needs for its
//! provider call log (HTTP status, latency). Adapters never retry: only the code that
//! owns the provider idempotency key may resend (docs/DESIGN.md, "The reconciler").

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::words::words;
pub use dispute_actions::{AcceptDisputeRequest, DisputeEvidenceRequest};

pub mod adyen;
pub mod circuit;
pub mod decline;
pub mod dispute;
pub mod dispute_actions;
pub mod http_call;
pub mod kept;
pub mod registry;
pub mod settlement;
pub mod stripe;
pub mod traced;

// Stripe-Signature webhook signing and verification, and why a webhook is refused: shared
// with the sandbox, which signs what payorch verifies (`payorch-wire`).
pub use payorch_wire::{signature, WebhookError};

/// The failure code of a charge (or refund) the provider proves it never made
/// (docs/DESIGN.md, "No record, early" and "What proves what"). The database takes it only
/// once no send of the attempt can still be on its way (`payment_attempts_no_record_after_sending`).
pub const NO_RECORD: &str = "provider_no_record";

words! {
    /// Whether a charge takes the money at once or only holds it for a later capture.
    pub enum CaptureMethod {
        Automatic => "automatic",
        Manual => "manual",
    }
}

impl CaptureMethod {
    /// A stored value: the `capture_method` domain holds only the two words, and rows made
    /// before there was a choice were all captured automatically.
    pub fn from_column(s: &str) -> Self {
        Self::parse(s).unwrap_or(CaptureMethod::Automatic)
    }
}

words! {
    /// Whether payorch asks the provider for 3-D Secure on a charge. `Automatic` asks nothing:
    /// the provider (and the issuer) decide, as they always did. `Required` is the step-up
    /// retry's: a charge declined for want of authentication is asked again, at the same
    /// provider, with 3-D Secure requested (docs/guides/three-d-secure.md, "Requesting 3-D
    /// Secure").
    pub enum ThreeDSecure {
        Automatic => "automatic",
        Required => "required",
    }
}

impl ThreeDSecure {
    /// A stored value: attempts made before payorch could ask for 3-D Secure asked nothing.
    pub fn from_column(s: &str) -> Self {
        Self::parse(s).unwrap_or(ThreeDSecure::Automatic)
    }
}

/// One charge as payorch asks for it. `idempotency_key` is the attempt's provider key,
/// the same on every resend; so must every other field be, `capture_method`, `return_url` and
/// `three_d_secure` included, or the provider sees another request under the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChargeRequest {
    pub amount: i64,
    pub currency: String,
    pub payment_method: String,
    pub idempotency_key: String,
    pub attempt_id: String,
    pub order_id: String,
    pub merchant_id: String,
    pub capture_method: CaptureMethod,
    /// Where the provider sends the payer back after a challenge (payorch's own return
    /// route). `None`: no payer is there to follow a redirect.
    pub return_url: Option<String>,
    /// payorch's return route for this attempt, whether or not a payer is there: Adyen's v71
    /// `PaymentRequest` requires a `returnUrl` on every payment, a payer's or not.
    pub return_route: String,
    /// Whether 3-D Secure is requested on this charge (the step-up retry's attempt asks for it).
    pub three_d_secure: ThreeDSecure,
}

/// When an attempt's sends can have reached the provider: from its creation to the end of
/// its last possible send. A provider's read-after-write list of the charges made in this
/// window (with a margin for the two clocks) shows the attempt's charge if there is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWindow {
    pub from: DateTime<Utc>,
    pub until: DateTime<Utc>,
}

/// How a provider lets payorch learn an outcome it did not hear (docs/DESIGN.md, "What
/// proves what"). Only what the provider's published contract promises counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookups {
    /// A retrieve by id and the list APIs, both read-after-write (Stripe). Its search is not,
    /// and payorch never asks it.
    ReadAfterWrite,
    /// None at all (Adyen's Checkout API): the answer, a resend under the same key and the
    /// notifications tell; an outcome still unknown past a deadline is ended by a cancel by
    /// payorch's reference, whose notification settles it.
    NotificationsOnly,
}

/// A capture of (part of) a held charge. `idempotency_key` is the capture's own provider key,
/// the same on every resend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureRequest {
    pub provider_payment_id: String,
    /// At most what was authorized.
    pub amount: i64,
    /// The payment's currency (lowercase ISO 4217).
    pub currency: String,
    pub idempotency_key: String,
    pub attempt_id: String,
    pub merchant_id: String,
}

/// A release of a charge that has not taken money: a hold, or a payment waiting for its
/// payer's challenge. `idempotency_key` is the void's own provider key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelRequest {
    /// `None` when the provider never named the charge (a create whose answer was lost, an
    /// Adyen challenge): it is then canceled by the attempt's reference.
    pub provider_payment_id: Option<String>,
    pub idempotency_key: String,
    pub attempt_id: String,
    pub merchant_id: String,
}

/// A redirect the payer must follow before the provider decides (3-D Secure). Always a
/// plain GET of `url`: a redirect that needs a form posted is not offered as one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NextAction {
    pub url: String,
    /// Where the provider sends the payer back, when it says (Stripe repeats it; for Adyen
    /// it is the `returnUrl` payorch sent).
    pub return_url: Option<String>,
}

/// One refund as payorch asks for it. `idempotency_key` is the refund's provider key, the
/// same on every resend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRequest {
    /// The provider's id of the charge refunded (`pi_…`).
    pub provider_payment_id: String,
    pub amount: i64,
    /// The payment's currency (lowercase ISO 4217).
    pub currency: String,
    pub idempotency_key: String,
    pub refund_id: String,
    pub payment_id: String,
    pub merchant_id: String,
    pub reason: Option<String>,
}

/// What a provider call tells us about a charge (or, for refund calls, a refund: then
/// `provider_id` is the refund's id and `Failed` means nothing went back). For a capture or
/// a cancel it is what that call did to the charge (docs/DESIGN.md, "The provider protocol").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderOutcome {
    /// The money moved (for a capture: it was captured).
    Succeeded { provider_id: String },
    /// The money is held, not taken, until a capture or a cancel. Adyen says the same word
    /// for an automatic capture, whose authorisation is followed by its capture: where the
    /// adapter cannot tell which (a lookup, a payer's return, a notification), the attempt's
    /// capture method decides what it means.
    Authorized {
        provider_id: String,
        /// Until when the provider holds the money, if known.
        expires_at: Option<DateTime<Utc>>,
    },
    /// The payer must follow `next_action` (3-D Secure) before the provider decides. Adyen
    /// names the payment only once it is decided, so `provider_id` may be `None`.
    RequiresAction {
        provider_id: Option<String>,
        next_action: NextAction,
    },
    /// Released: nothing was or will be taken under this charge.
    Canceled { provider_id: Option<String> },
    /// Definitive: nothing was or will be charged under this request.
    Failed {
        /// For a charge, payorch's decline code (`decline.code`'s word); for a refund,
        /// capture or cancel, the failure's own code.
        code: String,
        message: String,
        provider_id: Option<String>,
        /// A charge's decline, as the provider's answer said it (docs/guides/declines.md).
        /// `None` for a refund, capture or cancel, and for payorch's own failures, whose
        /// class their code gives ([`decline::DeclineCode::class`]).
        decline: Option<decline::Decline>,
    },
    /// The provider has the charge but has not finished it (`processing`, a challenge payorch
    /// cannot send the payer to), or took a capture or cancel whose result it tells later.
    Pending { provider_id: Option<String> },
    /// We cannot tell (timeout, reset, 5xx, 429, 409, …): the charge may or may not exist.
    /// Never a reason to mark an attempt failed or to resend with a new key.
    Unknown { reason: String },
    /// The request provably never reached the provider, for a reason not the payer's (the
    /// connection was refused before anything was sent, an explicit "not processed", or
    /// payorch's circuit for the provider is open). For the first send of an attempt this
    /// proves nothing was charged, so the payment may fail over to another provider; for a
    /// resend or a lookup it proves nothing about an earlier send, and counts as `Unknown`.
    Unavailable { reason: String },
    /// Retrieve or search found no record.
    NotFound,
}

impl ProviderOutcome {
    /// A short label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            ProviderOutcome::Succeeded { .. } => "succeeded",
            ProviderOutcome::Authorized { .. } => "authorized",
            ProviderOutcome::RequiresAction { .. } => "requires_action",
            ProviderOutcome::Canceled { .. } => "canceled",
            ProviderOutcome::Failed { .. } => "failed",
            ProviderOutcome::Pending { .. } => "pending",
            ProviderOutcome::Unknown { .. } => "unknown",
            ProviderOutcome::Unavailable { .. } => "unavailable",
            ProviderOutcome::NotFound => "not_found",
        }
    }

    /// The provider's charge id, when the answer carries one.
    pub fn provider_id(&self) -> Option<&str> {
        match self {
            ProviderOutcome::Succeeded { provider_id }
            | ProviderOutcome::Authorized { provider_id, .. } => Some(provider_id),
            ProviderOutcome::Failed { provider_id, .. }
            | ProviderOutcome::RequiresAction { provider_id, .. }
            | ProviderOutcome::Canceled { provider_id }
            | ProviderOutcome::Pending { provider_id } => provider_id.as_deref(),
            ProviderOutcome::Unknown { .. }
            | ProviderOutcome::Unavailable { .. }
            | ProviderOutcome::NotFound => None,
        }
    }
}

/// One call to a provider, as the caller logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderCall {
    pub outcome: ProviderOutcome,
    /// `None` when no HTTP response arrived (timeout, connection error).
    pub http_status: Option<u16>,
    pub latency: Duration,
}

impl ProviderCall {
    /// A call that never went out (nothing to ask with, a lookup the provider lacks, an open
    /// circuit): its outcome, no HTTP status, no time spent.
    pub fn unsent(outcome: ProviderOutcome) -> Self {
        ProviderCall {
            outcome,
            http_status: None,
            latency: Duration::ZERO,
        }
    }

    /// [`unsent`](Self::unsent), unknown for `reason`.
    pub fn unsent_unknown(reason: impl Into<String>) -> Self {
        Self::unsent(ProviderOutcome::Unknown {
            reason: reason.into(),
        })
    }
}

/// A verified provider webhook event.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookEvent {
    /// The provider's event id (`evt_…`), unique per event, repeated on redelivery.
    pub id: String,
    /// e.g. `payment_intent.succeeded`.
    pub event_type: String,
    pub created: DateTime<Utc>,
    /// `data.object.metadata.attempt_id`.
    pub attempt_id: Option<String>,
    /// `data.object.id` (`pi_…`).
    pub provider_id: String,
    /// Whether the event is of a kind payorch acts on (the adapter's list); others are
    /// recorded `ignored`.
    pub acted_on: bool,
    /// Whether the event tells the result of a capture or cancel payorch asked for (Adyen's
    /// `CAPTURE`, `CANCELLATION`, `TECHNICAL_CANCEL`), not the charge's own status: a refusal
    /// ends that operation and never moves the attempt (a cancel refused because the payment
    /// was captured must not fail a charged payment).
    pub modification: bool,
    /// What an event payorch acts on says about the charge, by the adapter's same mapping as
    /// a create or retrieve answer; `None` when it says nothing (no status, or not acted on).
    pub outcome: Option<ProviderOutcome>,
    /// The charge's amount and currency: checked against the attempt before the event may
    /// change it.
    pub amount: Option<i64>,
    pub currency: Option<String>,
    /// For an event about a refund that payorch acts on: what it says about the refund.
    pub refund: Option<RefundNotice>,
    /// For an event about a dispute (Stripe `charge.dispute.*`, Adyen's chargeback
    /// notifications): what it says about the dispute. It never moves the payment.
    pub dispute: Option<DisputeNotice>,
    /// What payorch keeps of the event, as `provider_webhooks.payload` stores it: the adapter's
    /// allowlist ([`kept`]), without card or billing details.
    pub raw: serde_json::Value,
}

/// What a refund event says, by the adapter's same mapping as a refund call's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundNotice {
    /// payorch's refund id, from the refund's metadata, when it carries one.
    pub refund_id: Option<String>,
    /// The provider's refund id (`re_…`).
    pub provider_refund_id: String,
    pub outcome: ProviderOutcome,
    pub amount: i64,
}

/// What a dispute event says (docs/guides/disputes.md), by the adapter's mapping onto
/// payorch's words ([`dispute`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisputeNotice {
    /// Stripe's `du_…`; Adyen's dispute pspReference (the notification's `pspReference`).
    pub provider_dispute_id: String,
    /// The payment disputed: Stripe's `pi_…`; Adyen's pspReference (`originalReference`),
    /// which Adyen's later notifications of a dispute may leave out: the dispute is then
    /// found by `provider_dispute_id`.
    pub provider_payment_id: Option<String>,
    /// payorch's attempt id when the event names it (Adyen's `merchantReference`; Stripe's
    /// dispute carries none).
    pub attempt_id: Option<String>,
    pub status: dispute::DisputeStatus,
    pub stage: dispute::DisputeStage,
    pub amount: i64,
    /// Lowercase ISO 4217, as payorch stores it.
    pub currency: String,
    pub reason: dispute::DisputeReason,
    /// The provider's own reason (Stripe's word; Adyen's scheme code and text).
    pub provider_reason: String,
    pub evidence_due_by: Option<DateTime<Utc>>,
    /// Why this news cannot be applied and is listed for a human instead (an Adyen code whose
    /// outcome its documents leave open, `dispute::adyen_unclear`); `status` and `stage` are
    /// then only where the code places it, never written.
    pub unclear: Option<String>,
}

/// A payment provider, as payorch's payment flow and reconciler see it.
#[async_trait]
pub trait PaymentProvider: Send + Sync {
    fn name(&self) -> &'static str;

    /// The request header its webhooks carry their signature in; `None` when the signature
    /// is inside the body (Adyen signs each notification item).
    fn signature_header(&self) -> Option<&'static str>;

    /// The body of the `200` that tells the provider a delivery was taken, when the protocol
    /// asks for one (Adyen: `[accepted]`); `None`: payorch's own JSON receipt.
    fn acknowledgement(&self) -> Option<&'static str> {
        None
    }

    /// What the provider's contract offers to learn an outcome payorch did not hear.
    fn lookups(&self) -> Lookups;

    /// Create and confirm a charge under `req.idempotency_key`. Safe to resend with the
    /// same request: the provider answers the first result again.
    async fn create_charge(&self, req: &ChargeRequest) -> ProviderCall;

    /// Look a charge up by the provider's id ([`Lookups::ReadAfterWrite`] only).
    async fn retrieve(&self, provider_id: &str) -> ProviderCall;

    /// Look for the charge of payorch's attempt `attempt_id` (provider metadata) among the
    /// charges made in `window`, by a read-after-write list ([`Lookups::ReadAfterWrite`]
    /// only). `NotFound` only when the whole window was read and none names the attempt.
    async fn find_by_attempt(&self, attempt_id: &str, window: SendWindow) -> ProviderCall;

    /// Refund (part of) a charge under `req.idempotency_key`; safe to resend like a create.
    async fn create_refund(&self, req: &RefundRequest) -> ProviderCall;

    /// Look a refund up by the provider's refund id.
    async fn retrieve_refund(&self, provider_refund_id: &str) -> ProviderCall;

    /// Look for the refund payorch made as `refund_id` (provider metadata) among the
    /// refunds of charge `provider_payment_id`; `NotFound` if there is none.
    async fn find_refund(&self, provider_payment_id: &str, refund_id: &str) -> ProviderCall;

    /// Capture (part of) a held charge under `req.idempotency_key`; safe to resend. `Succeeded`:
    /// captured; `Failed`: definitively not captured; `Pending`: accepted, the provider tells
    /// the result later (Adyen's notification); `Unknown`: as for a charge.
    async fn capture(&self, req: &CaptureRequest) -> ProviderCall;

    /// Release a charge that has taken no money, under `req.idempotency_key`; safe to resend.
    /// `Canceled`: released; `Failed`: definitively not (already captured, say); `Pending`:
    /// accepted, result later; `NotFound`: no charge under the attempt (asked by reference
    /// only); `Unknown`: as for a charge.
    async fn cancel(&self, req: &CancelRequest) -> ProviderCall;

    /// Submit evidence answering a dispute under `req.idempotency_key`
    /// (docs/guides/disputes.md, "Answering a dispute"); safe to resend. `Succeeded`: the
    /// provider took it; `Failed`: nothing was done (a closed dispute, evidence this provider
    /// cannot take, sent or not); `Unknown`: as for a charge.
    async fn submit_dispute_evidence(&self, req: &DisputeEvidenceRequest) -> ProviderCall;

    /// Accept a dispute (the merchant gives the money up) under `req.idempotency_key`; safe
    /// to resend. Outcomes as for [`submit_dispute_evidence`](Self::submit_dispute_evidence).
    async fn accept_dispute(&self, req: &AcceptDisputeRequest) -> ProviderCall;

    /// The payer came back from a challenge with these query parameters: what the provider
    /// says of attempt `attempt_id`'s charge now. Stripe looks up `provider_id`; Adyen reads
    /// the payment from the `redirectResult` parameter and needs no id (it may not have named
    /// one yet), and an answer whose `merchantReference` is not `attempt_id` is `Unknown`:
    /// the browser chose what was asked about.
    async fn complete_action(
        &self,
        provider_id: &str,
        attempt_id: &str,
        params: &[(String, String)],
    ) -> ProviderCall;

    /// Check a webhook delivery's signatures and parse its events: one for Stripe, one per
    /// notification item for Adyen. Any bad signature refuses the whole delivery.
    fn verify_delivery(
        &self,
        raw_body: &[u8],
        signature_header: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<WebhookEvent>, WebhookError>;

    /// Read the provider's own record of money moved from `query`'s position on (Stripe's
    /// balance transactions, Adyen's settlement details report), for the settlement
    /// reconciliation (docs/operations/reconciliation.md). A provider without one says so.
    async fn settlement_entries(
        &self,
        _query: &settlement::SettlementQuery,
    ) -> settlement::SettlementRead {
        settlement::SettlementRead::unread("this provider publishes no record payorch reads")
    }
}

#[cfg(test)]
mod tests {
    use super::{CaptureMethod, ThreeDSecure};

    #[test]
    fn every_capture_method_reads_back_as_itself() {
        for m in CaptureMethod::ALL {
            assert_eq!(CaptureMethod::parse(m.as_str()), Some(m));
        }
    }

    #[test]
    fn every_three_d_secure_reads_back_as_itself() {
        for t in ThreeDSecure::ALL {
            assert_eq!(ThreeDSecure::from_column(t.as_str()), t);
        }
        assert_eq!(ThreeDSecure::from_column(""), ThreeDSecure::Automatic);
    }
}
