//! How each face tells a dispute's move (`disputes`): the Stripe face as Stripe's
//! `charge.dispute.*` events carrying the whole `dispute` object (Stripe's OpenAPI `dispute`
//! schema), the Adyen face as the signed dispute notifications of Adyen's Webhooks v1.
//!
//! Stripe: `charge.dispute.created` when a dispute opens, then `charge.dispute.funds_withdrawn`
//! if it took the money; `charge.dispute.funds_withdrawn` / `funds_reinstated` whenever the
//! money moves later; `charge.dispute.closed` on entering `won`, `lost` or `warning_closed`,
//! `charge.dispute.updated` on any other move.
//!
//! Adyen (the dispute's `pspReference`, the payment's in `originalReference`, payorch's
//! attempt id in `merchantReference`): `NOTIFICATION_OF_CHARGEBACK` (or
//! `REQUEST_FOR_INFORMATION`) for an inquiry, `CHARGEBACK` for a chargeback or an escalated
//! inquiry, `INFORMATION_SUPPLIED` when an inquiry is answered, `CHARGEBACK_REVERSED` for a
//! win, `DISPUTE_DEFENSE_PERIOD_ENDED` for a chargeback lost unanswered, `CHARGEBACK` with
//! `disputeStatus` `Lost` (or `Accepted`) and `defendable` `false` for one lost after review
//! (or accepted), `SECOND_CHARGEBACK`, `PREARBITRATION_WON`, `PREARBITRATION_LOST`. Adyen
//! tells nothing of a defense submitted nor of an inquiry closed in the merchant's favour.

use chrono::{TimeZone, Utc};
use serde_json::{json, Value};

use super::adyen::delivery;
use super::config::SandboxConfig;
use super::disputes::{is_warning, Change, DisputeEntry, DisputeMoney, DisputeStatus, Move};

/// The Stripe events a move is told by, in order.
pub(crate) fn stripe_events(change: &Change) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    if change.from.is_none() {
        kinds.push("charge.dispute.created");
    }
    match change.money.as_ref().map(|m| m.kind.as_str()) {
        Some("withdrawn") => kinds.push("charge.dispute.funds_withdrawn"),
        Some(_) => kinds.push("charge.dispute.funds_reinstated"),
        None => {}
    }
    if change.from.is_some() {
        kinds.push(if change.dispute.status.is_closed() {
            "charge.dispute.closed"
        } else {
            "charge.dispute.updated"
        });
    }
    kinds
}

/// The Stripe `dispute` object, as `GET /v1/disputes/{id}` answers and events carry it.
pub(crate) fn stripe_dispute(dispute: &DisputeEntry) -> Value {
    let mut evidence = serde_json::Map::new();
    for field in EVIDENCE_FIELDS {
        let value = dispute
            .evidence
            .get(*field)
            .map_or(Value::Null, |v| json!(v));
        evidence.insert((*field).to_owned(), value);
    }
    let balance_transactions: Vec<Value> = dispute
        .money
        .iter()
        .map(|money| balance_transaction(money, &dispute.id))
        .collect();
    json!({
        "id": dispute.id,
        "object": "dispute",
        "amount": dispute.amount,
        "balance_transactions": balance_transactions,
        "charge": dispute.charge,
        "created": dispute.created,
        "currency": dispute.currency,
        "evidence": evidence,
        "evidence_details": {
            "due_by": dispute.evidence_due_by,
            "has_evidence": !dispute.evidence.is_empty(),
            "past_due": false,
            "submission_count": dispute.submission_count,
        },
        // Stripe refuses a refund while the dispute holds the money (`refunds`).
        "is_charge_refundable": !dispute.status.holds_money(),
        "livemode": false,
        "metadata": {},
        "payment_intent": dispute.payment_intent,
        "payment_method_details": {
            "type": "card",
            "card": {"brand": "visa", "network_reason_code": dispute.reason_code},
        },
        "reason": dispute.reason,
        "status": dispute.status.word(),
    })
}

/// The balance transaction of a dispute's money movement, as Stripe shows it in the
/// dispute's `balance_transactions` (and `GET /v1/balance_transactions` lists).
pub(crate) fn balance_transaction(money: &DisputeMoney, dispute: &str) -> Value {
    let (category, description) = if money.kind == "withdrawn" {
        ("dispute", "Chargeback withdrawal")
    } else {
        ("dispute_reversal", "Chargeback reversal")
    };
    json!({
        "id": money.id,
        "object": "balance_transaction",
        "amount": money.amount,
        "available_on": money.created,
        "created": money.created,
        "currency": money.currency,
        "description": format!("{description} for {dispute}"),
        "exchange_rate": null,
        "fee": 0,
        "fee_details": [],
        "net": money.amount,
        "reporting_category": category,
        "source": dispute,
        "status": "available",
        "type": "adjustment",
    })
}

/// The evidence fields of Stripe's `dispute_evidence` the sandbox takes: the text ones (the
/// file ones take a file id, which the sandbox keeps as text too).
pub(crate) const EVIDENCE_FIELDS: &[&str] = &[
    "access_activity_log",
    "billing_address",
    "cancellation_policy",
    "cancellation_policy_disclosure",
    "cancellation_rebuttal",
    "customer_communication",
    "customer_email_address",
    "customer_name",
    "customer_purchase_ip",
    "customer_signature",
    "duplicate_charge_documentation",
    "duplicate_charge_explanation",
    "duplicate_charge_id",
    "product_description",
    "receipt",
    "refund_policy",
    "refund_policy_disclosure",
    "refund_refusal_explanation",
    "service_date",
    "service_documentation",
    "shipping_address",
    "shipping_carrier",
    "shipping_date",
    "shipping_documentation",
    "shipping_tracking_number",
    "uncategorized_file",
    "uncategorized_text",
];

/// The Adyen `eventCode` a move is told by, if Adyen tells it, and the `disputeStatus` and
/// `defendable` it carries.
fn adyen_event(change: &Change) -> Option<(&'static str, &'static str, bool)> {
    let to = change.dispute.status;
    let from = change.from;
    Some(match change.the_move {
        Move::Inquiry { rfi: false } => ("NOTIFICATION_OF_CHARGEBACK", "Unresponded", true),
        Move::Inquiry { rfi: true } => ("REQUEST_FOR_INFORMATION", "Unresponded", true),
        Move::Open | Move::Escalate => ("CHARGEBACK", "Unresponded", true),
        Move::Submit if from.is_some_and(is_warning) => ("INFORMATION_SUPPLIED", "Responded", true),
        Move::Submit => return None,
        Move::Win if to == DisputeStatus::Won => ("CHARGEBACK_REVERSED", "Won", false),
        Move::Win => return None,
        Move::Lose if from == Some(DisputeStatus::NeedsResponse) => {
            ("DISPUTE_DEFENSE_PERIOD_ENDED", "Expired", false)
        }
        Move::Lose => ("CHARGEBACK", "Lost", false),
        Move::Accept if to == DisputeStatus::Lost => ("CHARGEBACK", "Accepted", false),
        Move::Accept => return None,
        Move::SecondChargeback => ("SECOND_CHARGEBACK", "Lost", true),
        Move::PrearbitrationWon => ("PREARBITRATION_WON", "Won", false),
        Move::PrearbitrationLost => ("PREARBITRATION_LOST", "Lost", false),
    })
}

/// The signed Adyen notification a move is told by, if Adyen tells it.
pub(crate) fn adyen_notification(config: &SandboxConfig, change: &Change) -> Option<Vec<u8>> {
    let (code, dispute_status, defendable) = adyen_event(change)?;
    let dispute = &change.dispute;
    let period_ends = Utc
        .timestamp_opt(dispute.evidence_due_by, 0)
        .single()
        .map(|at| at.to_rfc3339())
        .unwrap_or_default();
    let reason_field = if code == "REQUEST_FOR_INFORMATION" {
        "rfiReasonCode"
    } else {
        "chargebackReasonCode"
    };
    let mut additional = json!({
        "chargebackSchemeCode": "visa",
        "defendable": if defendable { "true" } else { "false" },
        "defensePeriodEndsAt": period_ends,
        "disputeStatus": dispute_status,
    });
    if let Some(code) = &dispute.reason_code {
        additional[reason_field] = json!(code);
    }
    let item = json!({
        "additionalData": additional,
        "amount": {"value": dispute.amount, "currency": dispute.currency.to_ascii_uppercase()},
        "eventCode": code,
        "eventDate": Utc::now().to_rfc3339(),
        "merchantAccountCode": dispute.merchant_account.clone().unwrap_or_default(),
        "merchantReference": dispute.attempt_id.clone().unwrap_or_default(),
        "originalReference": dispute.payment_intent,
        "pspReference": dispute.id,
        "paymentMethod": "visa",
        // In words, as Adyen's `reason` is ("product not received").
        "reason": dispute.reason.replace('_', " "),
        "success": "true",
    });
    delivery(config, item)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disputes::{Book, Disputed, Opening};
    use std::collections::BTreeMap;

    fn change(protocol: &str, moves: &[Move]) -> Change {
        let book = Book::new(10);
        let payment = Disputed {
            protocol: protocol.into(),
            payment_intent: "pi_1".into(),
            charge: "ch_1".into(),
            attempt_id: None,
            merchant_account: None,
            received: 500,
            currency: "usd".into(),
        };
        let mut last = book
            .open(&payment, moves[0], &Opening::default(), "du_1".into(), 1)
            .expect("opens");
        for the_move in &moves[1..] {
            last = book
                .apply("du_1", *the_move, BTreeMap::new(), 2)
                .expect("moves");
        }
        last
    }

    #[test]
    fn stripe_tells_an_opening_its_money_and_its_close() {
        assert_eq!(
            stripe_events(&change("stripe", &[Move::Open])),
            ["charge.dispute.created", "charge.dispute.funds_withdrawn"]
        );
        assert_eq!(
            stripe_events(&change("stripe", &[Move::Inquiry { rfi: false }])),
            ["charge.dispute.created"]
        );
        assert_eq!(
            stripe_events(&change("stripe", &[Move::Open, Move::Submit])),
            ["charge.dispute.updated"]
        );
        assert_eq!(
            stripe_events(&change("stripe", &[Move::Open, Move::Submit, Move::Win])),
            ["charge.dispute.funds_reinstated", "charge.dispute.closed"]
        );
        assert_eq!(
            stripe_events(&change("stripe", &[Move::Open, Move::Lose])),
            ["charge.dispute.closed"]
        );
    }

    #[test]
    fn adyen_tells_each_move_in_its_own_event() {
        let code = |moves: &[Move]| adyen_event(&change("adyen", moves)).map(|e| e.0);
        assert_eq!(code(&[Move::Open]), Some("CHARGEBACK"));
        assert_eq!(
            code(&[Move::Inquiry { rfi: false }]),
            Some("NOTIFICATION_OF_CHARGEBACK")
        );
        assert_eq!(
            code(&[Move::Inquiry { rfi: true }, Move::Submit]),
            Some("INFORMATION_SUPPLIED")
        );
        assert_eq!(code(&[Move::Open, Move::Submit]), None);
        assert_eq!(code(&[Move::Open, Move::Win]), Some("CHARGEBACK_REVERSED"));
        assert_eq!(
            code(&[Move::Open, Move::Lose]),
            Some("DISPUTE_DEFENSE_PERIOD_ENDED")
        );
        assert_eq!(
            code(&[Move::Open, Move::Win, Move::SecondChargeback]),
            Some("SECOND_CHARGEBACK")
        );
        assert_eq!(
            code(&[Move::Open, Move::Lose, Move::PrearbitrationLost]),
            Some("PREARBITRATION_LOST")
        );
    }
}
