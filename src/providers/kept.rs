//! What payorch keeps of a provider's webhook (docs/guides/provider-webhooks.md, "Webhooks"; docs/PRODUCTION.md,
//! section 6): `provider_webhooks.payload` holds the event through an allowlist, per provider,
//! of what payorch and support read — the event's id, type and time, the object's id,
//! status, amount and currency, the metadata payorch set, the failure's code and message,
//! the references to the payment, charge or refund — and nothing else.
//!
//! An allowlist, not a blocklist: providers add fields to their payloads without notice, and
//! real payloads carry card and billing data in many places (Stripe's
//! `payment_method_details.card`, `billing_details`, `last_payment_error.payment_method`,
//! `shipping`, `receipt_email`; Adyen's `additionalData` card fields and `paymentMethod`), so a
//! list of what to drop would keep whatever appears next. A field the list names whose value
//! is not of the expected shape (an object where a scalar was expected) is dropped too.

use serde_json::{Map, Value};

/// What to keep of one value.
#[derive(Debug, Clone, Copy)]
pub enum Keep {
    /// A string, number, boolean or null; an object or array here is dropped.
    Scalar,
    /// An object: only these fields, each by its own rule. An array: each element so. A
    /// scalar (an id where the provider can also expand the object) is kept.
    Fields(&'static [(&'static str, Keep)]),
}

/// `value` as `keep` allows it; `None` when nothing of it is kept.
pub fn kept(value: &Value, keep: Keep) -> Option<Value> {
    match (keep, value) {
        (_, Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_)) => {
            Some(value.clone())
        }
        (Keep::Scalar, _) => None,
        (Keep::Fields(fields), Value::Object(object)) => {
            let mut out = Map::new();
            for (name, rule) in fields {
                if let Some(kept) = object.get(*name).and_then(|v| kept(v, *rule)) {
                    out.insert((*name).to_owned(), kept);
                }
            }
            Some(Value::Object(out))
        }
        (Keep::Fields(_), Value::Array(items)) => Some(Value::Array(
            items.iter().filter_map(|item| kept(item, keep)).collect(),
        )),
    }
}

use Keep::{Fields, Scalar};

/// The metadata payorch sets on what it sends Stripe (`stripe::create_form`, the refund's).
const STRIPE_METADATA: Keep = Fields(&[
    ("attempt_id", Scalar),
    ("order_id", Scalar),
    ("merchant_id", Scalar),
    ("refund_id", Scalar),
    ("payment_id", Scalar),
    ("reason", Scalar),
]);

/// A failure as Stripe tells it, without the payment method it carries.
const STRIPE_ERROR: Keep = Fields(&[
    ("type", Scalar),
    ("code", Scalar),
    ("decline_code", Scalar),
    ("message", Scalar),
    ("charge", Scalar),
]);

/// A charge, expanded or named: its references, status and money, never its
/// `payment_method_details` or `billing_details`.
const STRIPE_CHARGE: Keep = Fields(&[
    ("id", Scalar),
    ("object", Scalar),
    ("status", Scalar),
    ("amount", Scalar),
    ("amount_captured", Scalar),
    ("amount_refunded", Scalar),
    ("currency", Scalar),
    ("created", Scalar),
    ("paid", Scalar),
    ("captured", Scalar),
    ("refunded", Scalar),
    ("payment_intent", Scalar),
    ("failure_code", Scalar),
    ("failure_message", Scalar),
    ("metadata", STRIPE_METADATA),
]);

/// The object of an event payorch reads: a PaymentIntent, a charge or a refund.
const STRIPE_OBJECT: Keep = Fields(&[
    ("id", Scalar),
    ("object", Scalar),
    ("status", Scalar),
    ("amount", Scalar),
    ("amount_received", Scalar),
    ("amount_capturable", Scalar),
    ("amount_captured", Scalar),
    ("amount_refunded", Scalar),
    ("currency", Scalar),
    ("created", Scalar),
    ("capture_method", Scalar),
    ("captured", Scalar),
    ("paid", Scalar),
    ("refunded", Scalar),
    ("canceled_at", Scalar),
    ("cancellation_reason", Scalar),
    ("payment_intent", Scalar),
    ("charge", Scalar),
    ("latest_charge", STRIPE_CHARGE),
    ("failure_code", Scalar),
    ("failure_message", Scalar),
    ("failure_reason", Scalar),
    ("reason", Scalar),
    ("last_payment_error", STRIPE_ERROR),
    // A dispute's (docs/guides/disputes.md): when its evidence is due.
    ("evidence_details", Fields(&[("due_by", Scalar)])),
    ("is_charge_refundable", Scalar),
    (
        "next_action",
        Fields(&[
            ("type", Scalar),
            (
                "redirect_to_url",
                Fields(&[("url", Scalar), ("return_url", Scalar)]),
            ),
        ]),
    ),
    ("metadata", STRIPE_METADATA),
]);

/// A Stripe event (`evt_…`).
const STRIPE_EVENT: Keep = Fields(&[
    ("id", Scalar),
    ("object", Scalar),
    ("type", Scalar),
    ("created", Scalar),
    ("api_version", Scalar),
    ("livemode", Scalar),
    (
        "request",
        Fields(&[("id", Scalar), ("idempotency_key", Scalar)]),
    ),
    ("data", Fields(&[("object", STRIPE_OBJECT)])),
]);

/// An Adyen notification item (`NotificationRequestItem`). `additionalData` keeps only the
/// raw refusal reason; its card fields (`cardSummary`, `expiryDate`, `cardHolderName`,
/// `issuerCountry`, `cardBin`, …), its signature (which no longer verifies what is kept) and
/// `paymentMethod` (the card's brand) go.
const ADYEN_ITEM: Keep = Fields(&[
    ("pspReference", Scalar),
    ("originalReference", Scalar),
    ("merchantReference", Scalar),
    ("merchantAccountCode", Scalar),
    ("eventCode", Scalar),
    ("eventDate", Scalar),
    ("success", Scalar),
    ("reason", Scalar),
    ("amount", Fields(&[("value", Scalar), ("currency", Scalar)])),
    ("operations", Fields(&[])),
    (
        "additionalData",
        Fields(&[
            ("refusalReasonRaw", Scalar),
            // A dispute's (docs/guides/disputes.md): its reason, defence period and state.
            ("chargebackReasonCode", Scalar),
            ("chargebackSchemeCode", Scalar),
            ("rfiReasonCode", Scalar),
            ("nofReasonCode", Scalar),
            ("defensePeriodEndsAt", Scalar),
            ("defendable", Scalar),
            ("disputeStatus", Scalar),
            ("autoDefended", Scalar),
        ]),
    ),
]);

/// What payorch keeps of a Stripe event.
pub fn stripe_event(event: &Value) -> Value {
    kept(event, STRIPE_EVENT).unwrap_or(Value::Null)
}

/// What payorch keeps of one Adyen notification item. A successful item's `reason` is the
/// authorisation code, the card's last four digits and its expiry (`874574:1111:03/2030`), so
/// it is kept only for a refusal, where it says why.
pub fn adyen_item(item: &Value) -> Value {
    let mut kept_item = kept(item, ADYEN_ITEM).unwrap_or(Value::Null);
    let refused = item.get("success").and_then(Value::as_str) == Some("false");
    // A dispute's reason is the payer's complaint (`Fraud`, `Goods not received`), no card data.
    let disputed = item
        .get("eventCode")
        .and_then(Value::as_str)
        .is_some_and(|code| crate::providers::dispute::ADYEN_DISPUTE_CODES.contains(&code));
    if let (false, Some(object)) = (refused || disputed, kept_item.as_object_mut()) {
        object.remove("reason");
    }
    kept_item
}

/// What payorch keeps of a payload stored as `provider` names it (`provider_webhooks.provider`),
/// for rows an older version stored whole. A provider payorch has no allowlist for keeps
/// nothing: an allowlist that does not know the shape cannot tell card data from the rest.
pub fn of_provider(provider: &str, payload: &Value) -> Value {
    match provider {
        "stripe" => stripe_event(payload),
        "adyen" => adyen_item(payload),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_what_the_list_names_is_kept_at_any_depth() {
        const LIST: Keep = Fields(&[
            ("id", Scalar),
            ("inner", Fields(&[("status", Scalar)])),
            ("flat", Scalar),
        ]);
        let value = json!({
            "id": "x", "secret": "s",
            "inner": [{"status": "ok", "card": {"last4": "4242"}}, "ref_1"],
            "flat": {"nested": "dropped"}
        });
        assert_eq!(
            kept(&value, LIST),
            Some(json!({"id": "x", "inner": [{"status": "ok"}, "ref_1"]}))
        );
    }

    #[test]
    fn a_stored_payload_is_kept_by_its_providers_list_and_keeping_it_again_changes_nothing() {
        let stripe = json!({"id": "evt_1", "data": {"object": {"id": "pi_1",
            "payment_method_details": {"card": {"last4": "4242"}}}}});
        let kept_once = of_provider("stripe", &stripe);
        assert_eq!(
            kept_once,
            json!({"id": "evt_1", "data": {"object": {"id": "pi_1"}}})
        );
        assert_eq!(of_provider("stripe", &kept_once), kept_once);
        let adyen = json!({"pspReference": "P", "success": "true", "reason": "874574:1111:03/2030",
            "additionalData": {"cardSummary": "1111"}});
        assert_eq!(
            of_provider("adyen", &adyen),
            json!({"pspReference": "P", "success": "true", "additionalData": {}})
        );
        assert_eq!(of_provider("paypal", &stripe), Value::Null);
    }

    #[test]
    fn a_refusal_keeps_its_reason_and_a_success_does_not() {
        let item = |success: &str, reason: &str| json!({"pspReference": "P", "success": success, "reason": reason});
        assert_eq!(
            adyen_item(&item("true", "874574:1111:03/2030")),
            json!({"pspReference": "P", "success": "true"})
        );
        assert_eq!(
            adyen_item(&item("false", "Refused")),
            json!({"pspReference": "P", "success": "false", "reason": "Refused"})
        );
    }
}
