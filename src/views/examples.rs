//! Examples for the API reference (`/openapi.json`): one story told throughout — a merchant's
//! order of 25.00 EUR, paid by card at the sandbox's Stripe, half refunded — so that the ids an
//! answer names are those the next request uses. The handlers' annotations name these
//! (`example = json!(examples::payment())`); tests/api/openapi.rs holds each one to the schema
//! its operation documents, so an example that drifts from the views fails there.

use serde_json::{json, Value};

pub const MERCHANT: &str = "mer_0193a1f0c4e87d2b9c1a5e6f7a8b9c01";
pub const ORDER: &str = "ord_0193a1f0c4e87d2b9c1a5e6f7a8b9c02";
pub const PAYMENT: &str = "pay_0193a1f0c4e87d2b9c1a5e6f7a8b9c03";
pub const REFUND: &str = "re_0193a1f0c4e87d2b9c1a5e6f7a8b9c04";
pub const ENDPOINT: &str = "we_0193a1f0c4e87d2b9c1a5e6f7a8b9c05";
pub const EVENT: &str = "evt_0193a1f0c4e87d2b9c1a5e6f7a8b9c06";
pub const HOLD_OPERATION: &str = "hop_0193a1f0c4e87d2b9c1a5e6f7a8b9c07";
pub const SUPPORT_KEY: &str = "key_0193a1f0c4e87d2b9c1a5e6f7a8b9c08";
const DECLINED_PAYMENT: &str = "pay_0193a1f0c4e87d2b9c1a5e6f7a8b9c09";

const CREATED: &str = "2026-11-27T12:00:00.120000Z";
const PAID: &str = "2026-11-27T12:00:00.480000Z";
const REFUNDED: &str = "2026-11-27T12:30:00.350000Z";

// Requests.

pub fn create_order_request() -> Value {
    json!({
        "amount": 2500,
        "currency": "eur",
        "merchant_reference": "order-1042",
        "description": "Two tickets, Saturday 20:00",
        "metadata": {"customer": "c_381"}
    })
}

pub fn checkout_request() -> Value {
    let mut body = create_order_request();
    body["payment_method"] = json!("pm_card_visa");
    body
}

pub fn create_payment_request() -> Value {
    json!({"payment_method": "pm_card_visa"})
}

pub fn update_order_request() -> Value {
    json!({"metadata": {"shipping": "express", "customer": ""}})
}

pub fn create_refund_request() -> Value {
    json!({"amount": 1000, "reason": "one ticket returned"})
}

pub fn capture_request() -> Value {
    json!({"amount": 2000})
}

pub fn cancel_request() -> Value {
    json!({})
}

pub fn routing_request() -> Value {
    json!({
        "providers": ["stripe", "adyen"],
        "currencies": {"eur": ["adyen", "stripe"]},
        "strategy": "success_rate",
        "retries": retries()
    })
}

/// A routing's retries: soft declines tried at the next provider, two attempts at most
/// (docs/guides/declines.md, "Retries").
fn retries() -> Value {
    json!({"soft_declines": true, "after_three_d_secure": false, "max_attempts": 2})
}

pub fn create_endpoint_request() -> Value {
    json!({
        "url": "https://shop.example.com/payorch/events",
        "enabled_events": ["payment.succeeded", "payment.failed", "refund.succeeded"],
        "description": "order fulfilment"
    })
}

/// A Stripe event as the provider signs and sends it (docs/guides/provider-webhooks.md, "Webhooks").
pub fn stripe_event() -> Value {
    json!({
        "id": "evt_3QkX2aLkdIwHu7ix0a1b2c3d",
        "object": "event",
        "type": "payment_intent.succeeded",
        "created": 1764244800,
        "data": {"object": {
            "id": "pi_3QkX2aLkdIwHu7ix1e2f3g4h",
            "object": "payment_intent",
            "amount": 2500,
            "currency": "eur",
            "status": "succeeded",
            "metadata": {"payorch_attempt_id": PAYMENT}
        }}
    })
}

// Answers.

pub fn health_live() -> Value {
    json!({"status": "ok"})
}

pub fn health_ready() -> Value {
    json!({"status": "ready", "database_role": "owns_nothing"})
}

pub fn order(status: &str) -> Value {
    json!({
        "id": ORDER,
        "object": "order",
        "merchant_id": MERCHANT,
        "amount": 2500,
        "currency": "eur",
        "status": status,
        "merchant_reference": "order-1042",
        "description": "Two tickets, Saturday 20:00",
        "metadata": {"customer": "c_381"},
        "created_at": CREATED,
        "updated_at": if status == "awaiting_payment" { CREATED } else { PAID }
    })
}

/// The order as `POST /v1/orders/{id}` with [`update_order_request`] leaves it.
pub fn updated_order() -> Value {
    let mut order = order("paid");
    order["metadata"] = json!({"shipping": "express"});
    order["updated_at"] = json!(REFUNDED);
    order
}

pub fn payment() -> Value {
    json!({
        "id": PAYMENT,
        "object": "payment",
        "merchant_id": MERCHANT,
        "order_id": ORDER,
        "status": "succeeded",
        "amount": 2500,
        "currency": "eur",
        "payment_method": "pm_card_visa",
        "provider": "stripe",
        "provider_payment_id": "pi_3QkX2aLkdIwHu7ix1e2f3g4h",
        "provider_idempotency_key": format!("payorch_{PAYMENT}"),
        "capture_method": "automatic",
        "failure_code": null,
        "failure_class": null,
        "provider_failure_code": null,
        "failure_message": null,
        "next_action": null,
        "next_check_at": null,
        "retry_of": null,
        "retry_reason": null,
        "created_at": CREATED,
        "updated_at": PAID,
        "finished_at": PAID
    })
}

/// An attempt authorized with `capture_method: manual`: the hold waits for a capture or a void.
pub fn authorized_payment() -> Value {
    let mut payment = payment();
    payment["status"] = json!("authorized");
    payment["capture_method"] = json!("manual");
    payment["authorized_until"] = json!("2026-12-04T12:00:00.480000Z");
    payment["finished_at"] = Value::Null;
    payment
}

pub fn checkout_result() -> Value {
    json!({"order": order("paid"), "payment": payment()})
}

/// The order's first attempt, declined (docs/guides/declines.md): the payer then paid with
/// another card.
pub fn declined_payment() -> Value {
    let mut payment = payment();
    payment["id"] = json!(DECLINED_PAYMENT);
    payment["status"] = json!("failed");
    payment["payment_method"] = json!("pm_card_chargeDeclinedInsufficientFunds");
    payment["provider_payment_id"] = json!("pi_3QkX2aLkdIwHu7ix0a1b2c3d");
    payment["provider_idempotency_key"] = json!(format!("payorch_{DECLINED_PAYMENT}"));
    payment["failure_code"] = json!("insufficient_funds");
    payment["failure_class"] = json!("hard");
    payment["provider_failure_code"] = json!("card_declined/insufficient_funds");
    payment["failure_message"] = json!("Your card has insufficient funds.");
    payment["updated_at"] = json!(CREATED);
    payment["finished_at"] = json!(CREATED);
    payment
}

pub fn order_with_payments() -> Value {
    let mut order = order("paid");
    order["payments"] = json!([declined_payment(), payment()]);
    order
}

pub fn refund() -> Value {
    json!({
        "id": REFUND,
        "object": "refund",
        "merchant_id": MERCHANT,
        "payment_id": PAYMENT,
        "order_id": ORDER,
        "status": "succeeded",
        "amount": 1000,
        "currency": "eur",
        "reason": "one ticket returned",
        "provider": "stripe",
        "provider_refund_id": "re_3QkX2aLkdIwHu7ix5i6j7k8l",
        "provider_idempotency_key": format!("payorch_{REFUND}"),
        "failure_code": null,
        "failure_message": null,
        "next_check_at": null,
        "created_at": REFUNDED,
        "updated_at": REFUNDED,
        "finished_at": REFUNDED
    })
}

pub fn payment_with_refunds() -> Value {
    let mut payment = payment();
    payment["refunds"] = json!([refund()]);
    payment["amount_refunded"] = json!(1000);
    payment["disputes"] = json!([dispute()]);
    payment
}

/// A capture (`kind` `capture`) or a void (`cancel`) of [`authorized_payment`], done.
pub fn operated(kind: &str) -> Value {
    let mut payment = authorized_payment();
    let (status, amount, reason) = if kind == "capture" {
        payment["status"] = json!("succeeded");
        payment["amount_captured"] = json!(2000);
        ("succeeded", json!(2000), Value::Null)
    } else {
        payment["status"] = json!("canceled");
        payment["cancellation_reason"] = json!("voided");
        ("succeeded", Value::Null, json!("voided"))
    };
    payment["authorized_until"] = Value::Null;
    payment["finished_at"] = json!(REFUNDED);
    payment["updated_at"] = json!(REFUNDED);
    json!({
        "operation": {
            "id": HOLD_OPERATION,
            "object": if kind == "capture" { "capture" } else { "void" },
            "payment_id": PAYMENT,
            "status": status,
            "amount": amount,
            "currency": "eur",
            "reason": reason,
            "source": "api",
            "provider_idempotency_key": format!("payorch_{HOLD_OPERATION}"),
            "failure_code": null,
            "failure_message": null,
            "created_at": REFUNDED,
            "finished_at": REFUNDED
        },
        "payment": payment
    })
}

pub fn merchant() -> Value {
    json!({"id": MERCHANT, "name": "Example Tickets", "created_at": "2026-11-01T09:00:00Z"})
}

pub fn merchant_list() -> Value {
    json!({"data": [merchant()], "has_more": false})
}

pub fn routing() -> Value {
    json!({
        "merchant_id": MERCHANT,
        "providers": ["stripe", "adyen"],
        "currencies": {"eur": ["adyen", "stripe"]},
        "source": "merchant",
        "configured": ["stripe", "adyen"],
        "strategy": "success_rate",
        "retries": retries()
    })
}

/// A webhook endpoint; `secret` only in the answers that show it (create, rotate).
pub fn endpoint(secret: bool) -> Value {
    json!({
        "id": ENDPOINT,
        "object": "webhook_endpoint",
        "merchant_id": MERCHANT,
        "url": "https://shop.example.com/payorch/events",
        "enabled_events": ["payment.succeeded", "payment.failed", "refund.succeeded"],
        "description": "order fulfilment",
        "status": "enabled",
        "disabled_reason": null,
        "secret": if secret { json!("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") } else { Value::Null },
        "previous_secret_expires_at": null,
        "created_at": CREATED,
        "updated_at": CREATED,
        "deleted": false
    })
}

pub fn deleted_endpoint() -> Value {
    let mut endpoint = endpoint(false);
    endpoint["deleted"] = json!(true);
    endpoint["updated_at"] = json!(REFUNDED);
    endpoint
}

pub fn endpoint_list() -> Value {
    json!({"data": [endpoint(false)]})
}

pub fn event() -> Value {
    json!({
        "id": EVENT,
        "object": "event",
        "type": "payment.succeeded",
        "merchant_id": MERCHANT,
        "created": PAID,
        "request": {"id": "req_5b7c0e2a", "idempotency_key": "checkout-order-1042"},
        "data": {"object": payment_with_no_refunds()}
    })
}

fn payment_with_no_refunds() -> Value {
    let mut payment = payment();
    payment["refunds"] = json!([]);
    payment["amount_refunded"] = json!(0);
    payment["disputes"] = json!([]);
    payment
}

pub fn event_page() -> Value {
    json!({"object": "list", "data": [event()], "has_more": false})
}

pub fn webhook_receipt() -> Value {
    json!({"received": true, "duplicate": false, "outcome": "applied"})
}

fn delivery(state: &str) -> Value {
    json!({
        "endpoint_id": ENDPOINT,
        "url": "https://shop.example.com/payorch/events",
        "state": state,
        "attempts": 1,
        "next_attempt_at": REFUNDED,
        "created_at": PAID,
        "updated_at": REFUNDED
    })
}

pub fn redelivered() -> Value {
    json!({"event_id": EVENT, "deliveries": [delivery("pending")]})
}

pub fn payment_page() -> Value {
    json!({"object": "list", "data": [payment()], "has_more": false})
}

pub fn payment_stats() -> Value {
    let count = |provider: &str, status: &str, count: i64| json!({"provider": provider, "status": status, "count": count});
    json!({
        "object": "payment_stats",
        "window_seconds": 3600,
        "bucket_seconds": 300,
        "from": "2026-11-27T11:05:00Z",
        "to": "2026-11-27T12:05:00Z",
        "providers": ["stripe"],
        "buckets": [
            {"start": "2026-11-27T11:55:00Z", "counts": [count("stripe", "succeeded", 41), count("stripe", "failed", 3)]},
            {"start": "2026-11-27T12:00:00Z", "counts": [count("stripe", "succeeded", 17)]}
        ],
        "totals": [count("stripe", "succeeded", 58), count("stripe", "failed", 3)]
    })
}

pub fn story() -> Value {
    json!({
        "payment": payment(),
        "order": order("partially_refunded"),
        "other_attempts": [],
        "timeline": [
            {"from": null, "to": "created", "source": "api", "detail": null, "at": CREATED},
            {"from": "created", "to": "succeeded", "source": "provider_response", "detail": null, "at": PAID}
        ],
        "provider_calls": [
            {"operation": "create", "source": "api", "outcome": "succeeded", "http_status": 200,
             "latency_ms": 212, "detail": null, "at": PAID}
        ],
        "webhook_events": [
            {"provider_event_id": "evt_3QkX2aLkdIwHu7ix0a1b2c3d", "event_type": "payment_intent.succeeded",
             "outcome": "stale", "detail": null, "provider_created_at": "2026-11-27T12:00:00Z",
             "received_at": "2026-11-27T12:00:01.020000Z", "deliveries": 1}
        ],
        "refunds": [refund()],
        "refund_timeline": [
            {"refund_id": REFUND, "from": null, "to": "created", "source": "api", "detail": null, "at": REFUNDED},
            {"refund_id": REFUND, "from": "created", "to": "succeeded", "source": "api", "detail": null, "at": REFUNDED}
        ],
        "hold_operations": [],
        "idempotency_key": {
            "key": "checkout-order-1042", "operation": "checkout", "state": "completed",
            "unresolved": false, "response_status": 201, "created_at": CREATED,
            "expires_at": "2026-11-30T12:00:00.120000Z"
        },
        "idempotency_key_name": "shop backend",
        "events": [
            {"id": EVENT, "type": "payment.succeeded", "created": PAID,
             "request": {"id": "req_5b7c0e2a", "idempotency_key": "checkout-order-1042"},
             "deliveries": [delivery("succeeded")],
             "delivery_attempts": [
                {"endpoint_id": ENDPOINT, "at": "2026-11-27T12:00:00.610000Z", "http_status": 200,
                 "latency_ms": 84, "error": null}
             ]}
        ],
        "support_actions": [
            {"key_id": SUPPORT_KEY, "key_name": "alice (support)", "role": "operate",
             "action": "reconcile_payment", "target_kind": "payment", "target_id": PAYMENT,
             "before": {"status": "succeeded"}, "after": {"status": "succeeded"},
             "at": "2026-11-27T12:10:00Z", "answered_at": "2026-11-27T12:10:00.300000Z",
             "outcome": "done"}
        ],
        "late_approval": null,
        "disputes": [dispute_story()]
    })
}

pub fn needs_a_human() -> Value {
    let mut stuck = payment();
    stuck["status"] = json!("pending");
    stuck["provider_payment_id"] = Value::Null;
    stuck["finished_at"] = Value::Null;
    stuck["next_check_at"] = json!("2026-11-27T12:05:00Z");
    json!({
        "stuck": [stuck],
        "no_provider_record": [],
        "contradicted": [],
        "stuck_refunds": [],
        "webhook_conflicts": [],
        "disabled_webhook_endpoints": [
            {"id": ENDPOINT, "merchant_id": MERCHANT, "url": "https://shop.example.com/payorch/events",
             "disabled_reason": "answered 410 Gone", "failing_since": "2026-11-26T08:00:00Z",
             "updated_at": "2026-11-27T08:00:00Z"}
        ],
        "late_approvals": [late_approval()],
        "settlement_findings": [settlement_finding()],
        "disputes": [dispute()]
    })
}

/// A second capture of one payment, as the settlement reconciliation finds it
/// (docs/operations/reconciliation.md, "The findings").
pub fn settlement_finding() -> Value {
    json!({
        "id": "0193a1f0-c4e8-7d2b-9c1a-5e6f7a8b9c0d", "object": "settlement_finding",
        "provider": "stripe", "kind": "captured_twice", "subject": "pi_3OqA1b2C3d4E5f6G",
        "provider_payment_id": "pi_3OqA1b2C3d4E5f6G", "merchant_id": MERCHANT,
        "payment_id": PAYMENT, "refund_id": null, "expected": 4990, "found": 9980,
        "currency": "eur",
        "evidence": {"detail": {"why": "the provider booked more than one charge of one payment"},
                     "entries": [
                         {"id": "txn_1", "kind": "charge", "amount": 4990, "currency": "eur",
                          "booked_at": "2026-11-27T12:00:03Z",
                          "occurred_at": "2026-11-27T12:00:03Z", "source": "ch_1", "reference": null},
                         {"id": "txn_2", "kind": "charge", "amount": 4990, "currency": "eur",
                          "booked_at": "2026-11-27T12:00:09Z",
                          "occurred_at": "2026-11-27T12:00:09Z", "source": "ch_2", "reference": null}]},
        "found_at": "2026-11-27T13:05:00Z"
    })
}

/// A late approval undone by a refund (docs/guides/declines.md, "Late approvals").
pub fn late_approval() -> Value {
    json!({
        "id": "la_0193a1f0c4e87d2b9c1a5e6f7a8b9c0a", "object": "late_approval",
        "payment_id": DECLINED_PAYMENT, "order_id": ORDER, "provider": "stripe",
        "provider_payment_id": "pi_3QLateApproval", "amount": 4990, "currency": "eur",
        "approved_as": "succeeded", "source": "webhook", "status": "refunded",
        "detail": "the provider refunded the whole amount",
        "provider_undo_id": "re_3QLateApproval",
        "detected_at": "2026-11-27T12:00:02.200000Z",
        "undone_at": "2026-11-27T12:00:02.650000Z"
    })
}

/// The start of the document this operation serves.
pub fn openapi_document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {"title": "payorch", "version": env!("CARGO_PKG_VERSION")},
        "servers": [{"url": "/"}],
        "paths": {}
    })
}

pub const METRICS: &str = "# TYPE http_requests_total counter\n\
http_requests_total{method=\"POST\",route=\"/v1/checkout\",status=\"201\"} 58\n";

pub const RETURN_PAGE: &str =
    "<!doctype html><title>Payment succeeded</title><p>Your payment succeeded.</p>";

/// A dispute's id, as the disputes' examples name it.
pub const DISPUTE: &str = "dp_0193a1f0c4e87d2b9c1a5e6f7a8b9c31";
/// The payer's bank took back what the refund of [`refund`] had left.
const DISPUTED: &str = "2026-11-28T10:00:00Z";
/// The merchant answered it.
const ANSWERED: &str = "2026-11-29T10:00:00Z";

/// The dispute as `GET /v1/disputes/{id}` shows it: a chargeback of the 3200 eur the refund
/// left of [`payment`], awaiting an answer.
pub fn dispute() -> Value {
    let mut open = dispute_after("", "needs_response");
    open["updated_at"] = json!(DISPUTED);
    open["advice"] = json!(crate::payments::disputes::advice::advice(
        crate::payments::disputes::DisputeStatus::NeedsResponse,
        0,
        false,
    ));
    open
}

/// The dispute after an action of `kind` (`""`: none) moved it to `status`.
pub fn dispute_after(kind: &str, status: &str) -> Value {
    json!({
        "id": DISPUTE,
        "object": "dispute",
        "payment_id": PAYMENT,
        "order_id": ORDER,
        "provider": "stripe",
        "provider_dispute_id": "du_1OaBcD2eZvKYlo2C",
        "status": status,
        "stage": "chargeback",
        "amount": 3200,
        "currency": "eur",
        "reason": "fraudulent",
        "provider_reason": "fraudulent",
        "evidence_due_by": "2026-12-05T10:00:00Z",
        "refunded_before": 1000,
        "overlap": 0,
        "advice": "",
        "evidence_submitted_at": if kind == "evidence" { json!(ANSWERED) } else { Value::Null },
        "opened_at": DISPUTED,
        "updated_at": ANSWERED,
        "closed_at": if status == "lost" { json!(ANSWERED) } else { Value::Null },
    })
}

/// [`dispute`] as the payment's support story tells it.
pub fn dispute_story() -> Value {
    json!({
        "dispute": dispute(),
        "told": "2026-11-28 needs_response (chargeback, fraudulent): 3200 eur withdrawn",
        "moves": [
            {"from": null, "to": "needs_response", "stage": "chargeback", "source": "webhook",
             "detail": null, "at": DISPUTED}
        ],
        "answers": []
    })
}
