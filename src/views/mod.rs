//! What the API shows, as types of their own: the domain structs of `payments` and
//! `accounts` (and the rows behind them) can change without changing an answer, and an
//! answer can change without touching a row. Each view is made from its domain value by
//! `From`; field documentation here is what `/openapi.json` shows.

pub mod deliveries;
pub mod disputes;
pub mod examples;
pub mod holds;
pub mod late_approvals;
pub mod settlement_findings;
pub mod support_actions;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::accounts;
use crate::events::{self, EventObject, EventRequest, EventType};
use crate::ids::{EventId, MerchantId, OrderId, PaymentId, RefundId};
use crate::payments::attempts::retry::RetryReason;
use crate::payments::attempts::{LoggedCall, TimelineEntry};
use crate::payments::disputes::DisputeView;
use crate::payments::status::OrderStatus;
use crate::payments::support::{self, Conflict, KeyState};
use crate::payments::webhooks::RecordedEvent;
use crate::payments::{orders, refunds, AttemptStatus, PaymentAttempt};
use crate::providers::decline::FailureClass;

/// A payment attempt as shown to merchants and support.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Payment {
    id: PaymentId,
    /// Always `payment`.
    object: &'static str,
    merchant_id: MerchantId,
    order_id: OrderId,
    status: AttemptStatus,
    amount: i64,
    currency: String,
    payment_method: String,
    provider: String,
    /// Sent with every create of this charge, so the provider never charges it twice.
    provider_idempotency_key: String,
    /// The provider's charge id (`pi_…`), once known.
    provider_payment_id: Option<String>,
    /// For `failed`: payorch's code, the same through every provider (docs/guides/declines.md):
    /// `invalid_number`, `expired_card`, `incorrect_cvc`, `incorrect_address`,
    /// `lost_or_stolen_card`, `restricted_card`, `invalid_account`, `authorization_revoked`,
    /// `fraudulent`, `card_not_supported`, `insufficient_funds`, `card_velocity_exceeded`,
    /// `invalid_amount`, `duplicate_transaction`, `retry_limit_exceeded`,
    /// `authentication_failed`, `payer_canceled`, `generic_decline`, `issuer_unavailable`,
    /// `processing_error`, `authentication_error`, `provider_rejected`, `declined`,
    /// `authentication_required`, `provider_no_record` or `provider_unavailable`. A string, not
    /// an enum: a payment failed before this vocabulary, or by a replica of the previous
    /// release while an upgrade rolls out, holds its provider's raw code here (`card_declined`,
    /// `2`, `refused`) and has no `failure_class`.
    #[schema(example = "insufficient_funds")]
    failure_code: Option<String>,
    /// For `failed`: what the failure allows next. `hard`: no attempt with this card for this
    /// payment; `soft`: another provider may approve; `authentication_required`: only with
    /// 3-D Secure. Never `unknown` on a failed attempt: an unknown outcome stays `pending`.
    #[schema(example = "hard")]
    failure_class: Option<FailureClass>,
    /// For `failed`: the provider's own code: Stripe's `code/decline_code`
    /// (`card_declined/insufficient_funds`), Adyen's refusal reason code (`12`). `null` with
    /// payorch's own codes `provider_no_record` and `provider_unavailable` (no provider answer
    /// named the failure), and for a payment failed before this vocabulary.
    #[schema(example = "card_declined/insufficient_funds")]
    provider_failure_code: Option<String>,
    failure_message: Option<String>,
    /// While open: when payorch next asks the provider (for `authorized`, just before the
    /// hold expires).
    next_check_at: Option<DateTime<Utc>>,
    /// `automatic` takes the money at once; `manual` holds it (`authorized`) for a capture.
    capture_method: &'static str,
    /// What a manual capture took; `null` until then, and for an automatic capture.
    amount_captured: Option<i64>,
    /// While `pending` and waiting for the payer: the redirect to follow (3-D Secure).
    next_action: Option<NextActionView>,
    /// While `authorized`: until when the provider holds the money.
    authorized_until: Option<DateTime<Utc>>,
    /// For `canceled`: `voided`, `challenge_abandoned`, `authorization_expired` or
    /// `canceled_at_provider`.
    cancellation_reason: Option<String>,
    /// The failed payment of the same request this one tried again (docs/guides/declines.md,
    /// "Retries"); `null` for a request's first payment.
    retry_of: Option<PaymentId>,
    /// Why, with `retry_of`: `soft_decline` (another provider after a soft decline),
    /// `authentication_required` (the same provider with 3-D Secure) or `provider_unreached`
    /// (failover).
    retry_reason: Option<RetryReason>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
}

/// A redirect the payer must follow before the provider can finish the payment.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NextActionView {
    /// Always `redirect_to_url`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// Where to send the payer's browser.
    url: String,
    /// Where the provider sends the payer back to afterwards.
    return_url: Option<String>,
}

impl From<PaymentAttempt> for Payment {
    fn from(a: PaymentAttempt) -> Self {
        Payment {
            id: a.id,
            object: "payment",
            merchant_id: a.merchant_id,
            order_id: a.order_id,
            status: a.status,
            amount: a.amount,
            currency: a.currency,
            payment_method: a.payment_method,
            provider: a.provider,
            provider_idempotency_key: a.provider_idempotency_key,
            provider_payment_id: a.provider_payment_id,
            failure_code: a.failure_code,
            failure_class: a.failure_class,
            provider_failure_code: a.provider_failure_code,
            failure_message: a.failure_message,
            next_check_at: a.next_check_at,
            capture_method: a.capture_method.as_str(),
            amount_captured: a.amount_captured,
            next_action: a
                .next_action
                .filter(|_| a.status == AttemptStatus::Pending)
                .map(|action| NextActionView {
                    kind: "redirect_to_url",
                    url: action.url,
                    return_url: action.return_url,
                }),
            authorized_until: a
                .authorized_until
                .filter(|_| a.status == AttemptStatus::Authorized),
            cancellation_reason: a.cancellation_reason,
            retry_of: a.retry_of,
            retry_reason: a.retry_reason,
            created_at: a.created_at,
            updated_at: a.updated_at,
            finished_at: a.finished_at,
        }
    }
}

/// Views of a list, in its order.
pub fn payments(attempts: Vec<PaymentAttempt>) -> Vec<Payment> {
    attempts.into_iter().map(Payment::from).collect()
}

/// A payment attempt with its refunds (`GET /v1/payments/{id}`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PaymentWithRefunds {
    #[serde(flatten)]
    payment: Payment,
    /// What its succeeded refunds gave back, in minor units.
    amount_refunded: i64,
    /// Its refunds, oldest first.
    refunds: Vec<Refund>,
    /// Its disputes, oldest first (docs/guides/disputes.md): what each took back is out of
    /// what is left to refund while it holds it.
    disputes: Vec<DisputeView>,
}

impl PaymentWithRefunds {
    pub fn new(
        attempt: PaymentAttempt,
        refunds: Vec<refunds::Refund>,
        disputes: Vec<DisputeView>,
    ) -> Self {
        let amount_refunded = refunds
            .iter()
            .filter(|r| r.status == AttemptStatus::Succeeded)
            .map(|r| r.amount)
            .sum();
        PaymentWithRefunds {
            payment: attempt.into(),
            amount_refunded,
            refunds: refunds.into_iter().map(Refund::from).collect(),
            disputes,
        }
    }
}

/// A refund: money given back from a succeeded payment.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Refund {
    id: RefundId,
    /// Always `refund`.
    object: &'static str,
    merchant_id: MerchantId,
    payment_id: PaymentId,
    order_id: OrderId,
    /// `created`, `pending`, `succeeded` or `failed`, one way like a payment's.
    status: AttemptStatus,
    amount: i64,
    currency: String,
    reason: Option<String>,
    provider: String,
    /// Sent with every create of this refund, so the provider never refunds it twice.
    provider_idempotency_key: String,
    /// The provider's refund id (`re_…`), once known.
    provider_refund_id: Option<String>,
    failure_code: Option<String>,
    failure_message: Option<String>,
    /// While `created` or `pending`: when payorch next asks the provider.
    next_check_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
}

impl From<refunds::Refund> for Refund {
    fn from(r: refunds::Refund) -> Self {
        Refund {
            id: r.id,
            object: "refund",
            merchant_id: r.merchant_id,
            payment_id: r.payment_id,
            order_id: r.order_id,
            status: r.status,
            amount: r.amount,
            currency: r.currency,
            reason: r.reason,
            provider: r.provider,
            provider_idempotency_key: r.provider_idempotency_key,
            provider_refund_id: r.provider_refund_id,
            failure_code: r.failure_code,
            failure_message: r.failure_message,
            next_check_at: r.next_check_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
            finished_at: r.finished_at,
        }
    }
}

/// An order as shown to merchants and support.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Order {
    id: OrderId,
    /// Always `order`.
    object: &'static str,
    merchant_id: MerchantId,
    amount: i64,
    currency: String,
    status: OrderStatus,
    merchant_reference: Option<String>,
    description: Option<String>,
    metadata: BTreeMap<String, String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<orders::Order> for Order {
    fn from(o: orders::Order) -> Self {
        Order {
            id: o.id,
            object: "order",
            merchant_id: o.merchant_id,
            amount: o.amount,
            currency: o.currency,
            status: o.status,
            merchant_reference: o.merchant_reference,
            description: o.description,
            metadata: o.metadata,
            created_at: o.created_at,
            updated_at: o.updated_at,
        }
    }
}

/// An order with its payment attempts, newest first (`GET /v1/orders/{id}`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OrderWithPayments {
    #[serde(flatten)]
    order: Order,
    payments: Vec<Payment>,
}

impl OrderWithPayments {
    pub fn new(order: orders::Order, payments: Vec<PaymentAttempt>) -> Self {
        OrderWithPayments {
            order: order.into(),
            payments: self::payments(payments),
        }
    }
}

/// A change told to the merchant (`GET /v1/events/{id}`, and the body of every delivery).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Event {
    id: EventId,
    /// Always `event`.
    object: &'static str,
    #[serde(rename = "type")]
    event_type: EventType,
    merchant_id: MerchantId,
    /// When the change was committed (its transaction's time).
    created: DateTime<Utc>,
    data: EventData,
    /// The API request that made the change; `null` when a webhook, the reconciler or
    /// support did.
    request: Option<EventRequest>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EventData {
    /// The resource as `GET` showed it at that moment.
    object: EventObjectView,
}

/// A payment (with its refunds), an order (with its payments), a refund or a late approval.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum EventObjectView {
    /// Boxed: with its refunds and disputes, far larger than the others.
    Payment(Box<PaymentWithRefunds>),
    Order(OrderWithPayments),
    Refund(Refund),
    LateApproval(late_approvals::LateApprovalView),
    Dispute(crate::payments::disputes::DisputeView),
}

impl From<events::Event> for Event {
    fn from(e: events::Event) -> Self {
        let object = match e.object {
            EventObject::Payment { payment, refunds } => {
                // A payment's events are of its own moves, each before any dispute of it (a
                // dispute is news of a charge payorch had already told of): none to show.
                EventObjectView::Payment(Box::new(PaymentWithRefunds::new(
                    *payment,
                    refunds,
                    Vec::new(),
                )))
            }
            EventObject::Order { order, payments } => {
                EventObjectView::Order(OrderWithPayments::new(*order, payments))
            }
            EventObject::Refund(refund) => EventObjectView::Refund((*refund).into()),
            EventObject::LateApproval(late) => EventObjectView::LateApproval((*late).into()),
            EventObject::Dispute(dispute) => EventObjectView::Dispute(*dispute),
        };
        Event {
            id: e.id,
            object: "event",
            event_type: e.event_type,
            merchant_id: e.merchant_id,
            created: e.created_at,
            data: EventData { object },
            request: e.request,
        }
    }
}

/// A merchant account.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Merchant {
    id: MerchantId,
    name: String,
    created_at: DateTime<Utc>,
}

impl From<accounts::Merchant> for Merchant {
    fn from(m: accounts::Merchant) -> Self {
        Merchant {
            id: m.id,
            name: m.name,
            created_at: m.created_at,
        }
    }
}

/// One line of an attempt's timeline.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TimelineLine {
    /// `null` for the line that made the attempt.
    from: Option<String>,
    to: String,
    /// Who moved it: `api`, `provider_response`, `webhook`, `reconciler` or `support`.
    source: String,
    detail: Option<String>,
    at: DateTime<Utc>,
}

impl From<TimelineEntry> for TimelineLine {
    fn from(e: TimelineEntry) -> Self {
        TimelineLine {
            from: e.from_status,
            to: e.to_status,
            source: e.source,
            detail: e.detail,
            at: e.created_at,
        }
    }
}

/// One call to the provider about an attempt.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProviderCall {
    /// `create`, `retrieve` or `search`.
    operation: String,
    source: String,
    outcome: String,
    http_status: Option<i16>,
    latency_ms: i32,
    detail: Option<String>,
    at: DateTime<Utc>,
}

impl From<LoggedCall> for ProviderCall {
    fn from(c: LoggedCall) -> Self {
        ProviderCall {
            operation: c.operation,
            source: c.source,
            outcome: c.outcome,
            http_status: c.http_status,
            latency_ms: c.latency_ms,
            detail: c.detail,
            at: c.created_at,
        }
    }
}

/// One webhook event about an attempt and what it did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookEvent {
    provider_event_id: String,
    event_type: String,
    /// `applied`, `stale`, `conflict`, `unknown_attempt` or `ignored`.
    outcome: String,
    detail: Option<String>,
    provider_created_at: Option<DateTime<Utc>>,
    received_at: DateTime<Utc>,
    /// How often the provider delivered it: the first delivery did `outcome`, each later
    /// copy was a `duplicate` that changed nothing.
    deliveries: i32,
}

impl From<RecordedEvent> for WebhookEvent {
    fn from(e: RecordedEvent) -> Self {
        WebhookEvent {
            provider_event_id: e.provider_event_id,
            event_type: e.event_type,
            outcome: e.outcome,
            detail: e.detail,
            provider_created_at: e.provider_created_at,
            received_at: e.received_at,
            deliveries: e.deliveries,
        }
    }
}

/// An Idempotency-Key as it stands.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Key {
    key: String,
    operation: String,
    /// `in_flight` or `completed`.
    state: String,
    response_status: Option<i16>,
    /// Its work is still open (a pending payment): it outlives its TTL.
    unresolved: bool,
    created_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
}

impl From<KeyState> for Key {
    fn from(k: KeyState) -> Self {
        Key {
            key: k.key,
            operation: k.operation,
            state: k.state,
            response_status: k.response_status,
            unresolved: k.unresolved,
            created_at: k.created_at,
            expires_at: k.expires_at,
        }
    }
}

/// Everything support needs to tell what happened to one attempt.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Story {
    payment: Payment,
    order: Option<Order>,
    /// The order's other attempts, newest first.
    other_attempts: Vec<Payment>,
    /// Every transition, in order, with its source.
    timeline: Vec<TimelineLine>,
    /// Every call to the provider about it.
    provider_calls: Vec<ProviderCall>,
    /// Every webhook event about it, with what each did.
    webhook_events: Vec<WebhookEvent>,
    /// The key that made it, while the key is kept (`null` once expired and reaped).
    idempotency_key: Option<Key>,
    /// The client's key string, kept on the attempt for ever.
    idempotency_key_name: Option<String>,
    /// Its refunds, oldest first; their provider calls are among `provider_calls`.
    refunds: Vec<Refund>,
    /// Every move of its refunds, in order, with its source.
    refund_timeline: Vec<RefundTimelineLine>,
    /// Its captures and voids, oldest first; their provider calls are among
    /// `provider_calls`.
    hold_operations: Vec<holds::HoldOperationView>,
    /// The events of its order, oldest first, each with its deliveries and their sends.
    events: Vec<deliveries::StoryEvent>,
    /// What support keys did to its order's payments, refunds and events, oldest first:
    /// who, what, before and after, when.
    support_actions: Vec<support_actions::SupportAction>,
    /// The provider approved it after payorch had failed it, and what payorch did to give the
    /// money back (docs/guides/declines.md, "Late approvals"); `null` for nearly every payment.
    late_approval: Option<late_approvals::LateApprovalView>,
    /// Its disputes, oldest first, each with its moves, the merchant's answers and all of it
    /// in one line (docs/guides/support.md, "Disputes").
    disputes: Vec<disputes::DisputeStoryView>,
}

/// One line of a refund's timeline.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RefundTimelineLine {
    refund_id: RefundId,
    /// `null` for the line that made the refund.
    from: Option<String>,
    to: String,
    /// Who moved it: `api`, `provider_response`, `webhook`, `reconciler` or `support`.
    source: String,
    detail: Option<String>,
    at: DateTime<Utc>,
}

impl From<refunds::RefundTimelineEntry> for RefundTimelineLine {
    fn from(e: refunds::RefundTimelineEntry) -> Self {
        RefundTimelineLine {
            refund_id: RefundId(e.refund_id),
            from: e.from_status,
            to: e.to_status,
            source: e.source,
            detail: e.detail,
            at: e.created_at,
        }
    }
}

impl Story {
    /// The attempt's story, and its order's events (`events::deliveries::story_of_order`).
    pub fn new(s: support::Story, events: Vec<events::deliveries::EventStory>) -> Self {
        Story {
            idempotency_key_name: s.payment.idempotency_key.clone(),
            payment: s.payment.into(),
            order: s.order.map(Order::from),
            other_attempts: payments(s.other_attempts),
            timeline: s.timeline.into_iter().map(Into::into).collect(),
            provider_calls: s.provider_calls.into_iter().map(Into::into).collect(),
            webhook_events: s.webhook_events.into_iter().map(Into::into).collect(),
            idempotency_key: s.idempotency_key.map(Key::from),
            refunds: s.refunds.into_iter().map(Refund::from).collect(),
            refund_timeline: s.refund_timeline.into_iter().map(Into::into).collect(),
            hold_operations: s.hold_operations.into_iter().map(Into::into).collect(),
            events: events.into_iter().map(Into::into).collect(),
            support_actions: s.support_actions.into_iter().map(Into::into).collect(),
            late_approval: s.late_approval.map(Into::into),
            disputes: s.disputes.into_iter().map(Into::into).collect(),
        }
    }
}

/// A webhook that contradicted an attempt.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookConflict {
    /// The attempt it is about, when payorch knows it.
    payment_id: Option<PaymentId>,
    provider_event_id: String,
    event_type: String,
    detail: Option<String>,
    received_at: DateTime<Utc>,
}

impl From<Conflict> for WebhookConflict {
    fn from(c: Conflict) -> Self {
        WebhookConflict {
            payment_id: c.attempt_id.map(PaymentId),
            provider_event_id: c.provider_event_id,
            event_type: c.event_type,
            detail: c.detail,
            received_at: c.received_at,
        }
    }
}

/// The attempts that need a human, newest first, at most `limit` of each kind.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NeedsAHuman {
    /// Still `created` or `pending` longer than the alert age: the reconciler has not found
    /// the truth yet.
    stuck: Vec<Payment>,
    /// Failed `provider_no_record`: the provider never had the charge (tell the payer nothing
    /// was taken).
    no_provider_record: Vec<Payment>,
    /// Open attempts a provider's answer contradicted: it named a charge another attempt
    /// holds. The answer moved nothing; the evidence is in the payment's provider calls.
    contradicted: Vec<Payment>,
    /// Refunds still `created` or `pending` longer than the alert age, holding their amount.
    stuck_refunds: Vec<Refund>,
    /// Webhooks that contradicted what payorch knows, but for the approvals listed under
    /// `late_approvals`.
    webhook_conflicts: Vec<WebhookConflict>,
    /// Merchants' webhook endpoints payorch no longer sends to, the latest disabled first.
    disabled_webhook_endpoints: Vec<deliveries::DisabledEndpoint>,
    /// Providers' approvals of payments payorch had failed, whatever became of their void or
    /// refund: a human confirms each with the provider, and acts on one whose `status` is
    /// `undo_failed` (the money is still taken). Those `undo_failed`, then those `undoing`,
    /// come first, then the rest, each newest first.
    late_approvals: Vec<late_approvals::LateApprovalView>,
    /// Differences between a provider's record of money moved and payorch's that no human
    /// has closed, newest first (docs/operations/reconciliation.md, "The findings").
    settlement_findings: Vec<settlement_findings::SettlementFindingView>,
    /// Disputes that return money a refund already returned (`overlap` above 0) and are not
    /// won, newest first; then disputes awaiting an answer nobody sent whose
    /// `evidence_due_by` is within 7 days or past, nearest first (docs/guides/support.md,
    /// "Disputes").
    disputes: Vec<DisputeView>,
}

impl NeedsAHuman {
    pub fn new(n: support::NeedsAHuman, disabled: Vec<events::disabled::DisabledEndpoint>) -> Self {
        NeedsAHuman {
            stuck: payments(n.stuck),
            no_provider_record: payments(n.no_provider_record),
            contradicted: payments(n.contradicted),
            stuck_refunds: n.stuck_refunds.into_iter().map(Refund::from).collect(),
            webhook_conflicts: n.webhook_conflicts.into_iter().map(Into::into).collect(),
            disabled_webhook_endpoints: disabled.into_iter().map(Into::into).collect(),
            late_approvals: n.late_approvals.into_iter().map(Into::into).collect(),
            settlement_findings: n.settlement_findings.into_iter().map(Into::into).collect(),
            disputes: n.disputes,
        }
    }
}
