//! `--null-rate`: the Stripe face's answers and events with nullable fields `null`.
//!
//! Stripe's OpenAPI document marks many fields of a PaymentIntent and of a Refund `nullable`,
//! and a client may rely only on what the document promises (SPEC §6). The sandbox fills those
//! fields whenever it can, which would let a client lean on them unawares; at `--null-rate`
//! each of the fields below, where it has a value, is answered `null` instead, each rolled on
//! its own, in every answer and every event that shows the object (an error's
//! `payment_intent` included). The objects the sandbox keeps, and so the ledger, are never
//! touched: only what a client is shown.
//!
//! Only fields the document marks `nullable` (spec3 at API version 2023-08-16, `payment_intent`
//! and `refund`), and of those the ones a client could lean on. Objects made through the Adyen
//! face are never touched: that face answers in its own words, from the objects as kept.

use serde_json::Value;

use super::protocol::PROTOCOL;
use super::roll;

/// A PaymentIntent's nullable fields a client could lean on.
const PAYMENT_INTENT: [&str; 6] = [
    "description",
    "latest_charge",
    "last_payment_error",
    "canceled_at",
    "cancellation_reason",
    "payment_method",
];

/// A Refund's nullable fields a client could lean on.
const REFUND: [&str; 4] = ["status", "metadata", "payment_intent", "reason"];

/// Every PaymentIntent and Refund in `value` (at any depth) with each of its nullable fields
/// that has a value made `null` with probability `rate`.
pub(super) fn blank(value: &mut Value, rate: f64) {
    if rate <= 0.0 {
        return;
    }
    match value {
        Value::Object(fields) => {
            let nullable: &[&str] = match fields.get("object").and_then(Value::as_str) {
                Some("payment_intent") => &PAYMENT_INTENT,
                Some("refund") => &REFUND,
                _ => &[],
            };
            let adyen = fields
                .get("metadata")
                .and_then(|metadata| metadata.get(PROTOCOL))
                .is_some_and(|protocol| protocol == "adyen");
            if !adyen {
                for name in nullable {
                    if let Some(field) = fields.get_mut(*name) {
                        if !field.is_null() && roll(rate) {
                            *field = Value::Null;
                        }
                    }
                }
            }
            for field in fields.values_mut() {
                blank(field, rate);
            }
        }
        Value::Array(items) => {
            for item in items {
                blank(item, rate);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn intent() -> Value {
        json!({
            "id": "pi_1", "object": "payment_intent", "amount": 500, "currency": "eur",
            "status": "canceled", "description": "d", "latest_charge": "ch_1",
            "last_payment_error": {"type": "card_error"}, "canceled_at": 1,
            "cancellation_reason": "abandoned", "payment_method": "pm_card_visa",
            "metadata": {"attempt_id": "a"}, "created": 1, "client_secret": "s",
        })
    }

    #[test]
    fn at_rate_one_every_nullable_field_is_null_and_nothing_else() {
        let refund = json!({
            "id": "re_1", "object": "refund", "amount": 100, "currency": "eur",
            "status": "succeeded", "metadata": {"refund_id": "r"}, "payment_intent": "pi_1",
            "reason": "requested_by_customer", "created": 1,
        });
        let mut answer = json!({
            "object": "list",
            "data": [intent(), refund],
            "error": {"type": "card_error", "payment_intent": intent()},
        });
        blank(&mut answer, 1.0);
        for shown in [&answer["data"][0], &answer["error"]["payment_intent"]] {
            for name in PAYMENT_INTENT {
                assert_eq!(shown[name], Value::Null, "{name}");
            }
            assert_eq!(
                shown["metadata"],
                json!({"attempt_id": "a"}),
                "not nullable"
            );
            assert_eq!(shown["client_secret"], "s");
            assert_eq!(shown["status"], "canceled");
        }
        for name in REFUND {
            assert_eq!(answer["data"][1][name], Value::Null, "{name}");
        }
        assert_eq!(answer["data"][1]["amount"], 100);
        assert_eq!(answer["error"]["type"], "card_error");
    }

    #[test]
    fn at_rate_zero_and_through_the_adyen_face_nothing_changes() {
        let mut untouched = intent();
        blank(&mut untouched, 0.0);
        assert_eq!(untouched, intent());
        let mut adyen = intent();
        adyen["metadata"][PROTOCOL] = json!("adyen");
        let before = adyen.clone();
        blank(&mut adyen, 1.0);
        assert_eq!(adyen, before);
    }
}
