//! Adyen notification webhooks: HMAC verification of every item and parsing into
//! [`WebhookEvent`]s (docs/DESIGN.md, "The provider protocol").
//!
//! Adyen signs each notification item, not the delivery (the scheme, shared with the sandbox
//! that signs with it, is `payorch_wire::adyen_hmac`). Any one configured key may match, so
//! keys can be rotated without downtime; one item unsigned or wrongly signed refuses the
//! whole delivery.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use chrono::{DateTime, Utc};

use super::wire::NotificationRequestItem;
use crate::providers::dispute::{self, ADYEN_DISPUTE_CODES};
use crate::providers::{
    DisputeNotice, ProviderOutcome, RefundNotice, WebhookError, WebhookEvent, NO_RECORD,
};

pub use payorch_wire::adyen::{
    AUTHORISATION, CANCELLATION, CAPTURE, REFUND, REFUND_FAILED, TECHNICAL_CANCEL,
};
pub use payorch_wire::adyen_hmac::{sign_item, signing_string, HmacKey, SIGNATURE_FIELD};

/// A capture Adyen accepted (and may have told of in a successful `CAPTURE`) that the card
/// scheme later refused: nothing was taken.
pub const CAPTURE_FAILED: &str = "CAPTURE_FAILED";

/// The id payorch records a notification item under. Adyen has no event id; its
/// documentation identifies a notification by pspReference, eventCode and success, and a
/// redelivery repeats all three, so a redelivery is recorded once.
pub fn event_id(item: &NotificationRequestItem) -> String {
    format!(
        "{}:{}:{}",
        item.psp_reference, item.event_code, item.success
    )
}

/// Check every item's signature against `keys`, then parse each into an event. Nothing is
/// returned unless every item verifies.
pub fn verify_delivery(
    raw_body: &[u8],
    keys: &[HmacKey],
    now: DateTime<Utc>,
) -> Result<Vec<WebhookEvent>, WebhookError> {
    let body: serde_json::Value =
        serde_json::from_slice(raw_body).map_err(|e| WebhookError::BadJson(e.to_string()))?;
    let items = body
        .get("notificationItems")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| WebhookError::BadJson("missing notificationItems".into()))?;
    // An empty delivery carries no signature at all: accepting it would answer anyone.
    if items.is_empty() {
        return Err(WebhookError::BadJson("no notification items".into()));
    }
    let mut parsed = Vec::with_capacity(items.len());
    for (position, wrapper) in items.iter().enumerate() {
        let raw = wrapper.get("NotificationRequestItem").ok_or_else(|| {
            WebhookError::BadJson(format!(
                "notification item {position} has no NotificationRequestItem"
            ))
        })?;
        let item = serde_json::from_value::<NotificationRequestItem>(raw.clone())
            .map_err(|e| WebhookError::BadJson(format!("notification item {position}: {e}")))?;
        verify_item(&item, keys)?;
        parsed.push((item, raw.clone()));
    }
    Ok(parsed
        .into_iter()
        .map(|(item, raw)| event_for_item(&item, raw, now))
        .collect())
}

fn verify_item(item: &NotificationRequestItem, keys: &[HmacKey]) -> Result<(), WebhookError> {
    let signature = item
        .additional_data
        .get(SIGNATURE_FIELD)
        .and_then(serde_json::Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| WebhookError::UnsignedItem(item.psp_reference.clone()))?;
    // A signature that is not base64 cannot match any key.
    let Ok(signature) = BASE64.decode(signature) else {
        return Err(WebhookError::NoMatchingSignature);
    };
    if keys.iter().any(|key| key.verifies(item, &signature)) {
        Ok(())
    } else {
        Err(WebhookError::NoMatchingSignature)
    }
}

/// One verified item as an event.
fn event_for_item(
    item: &NotificationRequestItem,
    raw: serde_json::Value,
    now: DateTime<Utc>,
) -> WebhookEvent {
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let amount = item.amount.clone().unwrap_or_default();
    let succeeded = item.success == "true";
    let created = DateTime::parse_from_rfc3339(&item.event_date)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or(now);
    let psp = item.psp_reference.clone();
    let mut event = WebhookEvent {
        id: event_id(item),
        event_type: item.event_code.clone(),
        created,
        attempt_id: None,
        // For a modification (capture, cancellation, …) the payment is the original.
        provider_id: non_empty(&item.original_reference).unwrap_or_else(|| psp.clone()),
        acted_on: false,
        modification: false,
        outcome: None,
        amount: amount.value,
        currency: amount.currency.as_deref().map(str::to_ascii_lowercase),
        refund: None,
        dispute: None,
        raw: crate::providers::kept::adyen_item(&raw),
    };
    // The payment a capture or cancellation item is about; `None` if it names none.
    let payment = non_empty(&item.original_reference);
    match item.event_code.as_str() {
        // Adyen tells of the authorisation only, whether or not it captures automatically
        // after: the attempt's capture method decides whether it took the money (an automatic
        // capture) or holds it.
        AUTHORISATION => {
            event.acted_on = true;
            event.attempt_id = non_empty(&item.merchant_reference);
            event.provider_id = psp.clone();
            event.outcome = Some(if succeeded {
                ProviderOutcome::Authorized {
                    provider_id: psp,
                    expires_at: None,
                }
            } else {
                // The item names the refusal, not its number: read back through Adyen's
                // names, so a notification declines in the words an answer would.
                let decline =
                    super::declines::decline_by_reason(&item.reason, &item.additional_data);
                ProviderOutcome::Failed {
                    code: decline.code.as_str().to_owned(),
                    message: non_empty(&item.reason)
                        .unwrap_or_else(|| "the payment was refused".to_owned()),
                    provider_id: Some(psp),
                    decline: Some(decline),
                }
            });
        }
        // A capture's (and a cancel's) reference is the attempt's id (`capture_request`), so
        // `merchantReference` names the attempt, and `provider_id` is the payment's.
        CAPTURE | CAPTURE_FAILED => {
            event.acted_on = true;
            event.modification = true;
            event.attempt_id = non_empty(&item.merchant_reference);
            // What was captured, which may be less than the charge the event's amount is
            // checked against.
            event.amount = None;
            event.outcome = if item.event_code == CAPTURE && succeeded {
                // A capture of no payment named says nothing payorch can apply.
                payment.map(|provider_id| ProviderOutcome::Succeeded { provider_id })
            } else {
                Some(ProviderOutcome::Failed {
                    code: "capture_failed".to_owned(),
                    message: non_empty(&item.reason)
                        .unwrap_or_else(|| "the provider says the capture failed".to_owned()),
                    provider_id: payment,
                    decline: None,
                })
            };
        }
        CANCELLATION | TECHNICAL_CANCEL => {
            event.acted_on = true;
            event.modification = true;
            event.attempt_id = non_empty(&item.merchant_reference);
            // A cancel moves no money: its amount (zero when no payment was found under a
            // technical cancel's reference) is nothing to check the charge against.
            event.amount = None;
            event.currency = None;
            event.outcome = Some(if succeeded {
                ProviderOutcome::Canceled {
                    provider_id: payment,
                }
            } else if item.event_code == TECHNICAL_CANCEL && payment.is_none() {
                // A cancel by payorch's reference that found no payment to name: none was
                // made under the attempt's reference, so nothing was charged. That is about
                // the charge itself, not the cancel, and ends the attempt; the database takes
                // it only once no send of the attempt can still be on its way. A refusal that
                // names a payment (captured, say) stays an operation's refusal, for a human.
                event.modification = false;
                ProviderOutcome::Failed {
                    code: NO_RECORD.to_owned(),
                    message: non_empty(&item.reason).unwrap_or_else(|| {
                        "Adyen's cancel by reference found no payment under it".to_owned()
                    }),
                    provider_id: None,
                    decline: None,
                }
            } else {
                ProviderOutcome::Failed {
                    code: "cancellation_failed".to_owned(),
                    message: non_empty(&item.reason)
                        .unwrap_or_else(|| "the provider says the cancellation failed".to_owned()),
                    provider_id: payment,
                    decline: None,
                }
            });
        }
        REFUND | REFUND_FAILED => {
            event.acted_on = true;
            // The amount is the refund's, carried by the notice; the event's amount is the
            // charge's, which a refund item does not carry.
            event.amount = None;
            event.currency = None;
            let outcome = if item.event_code == REFUND && succeeded {
                ProviderOutcome::Succeeded {
                    provider_id: psp.clone(),
                }
            } else {
                ProviderOutcome::Failed {
                    code: "refund_failed".to_owned(),
                    message: non_empty(&item.reason)
                        .unwrap_or_else(|| "the provider says the refund failed".to_owned()),
                    provider_id: Some(psp.clone()),
                    decline: None,
                }
            };
            event.refund = Some(RefundNotice {
                refund_id: non_empty(&item.merchant_reference),
                provider_refund_id: psp,
                outcome,
                amount: amount.value.unwrap_or_default(),
            });
        }
        code if ADYEN_DISPUTE_CODES.contains(&code) => {
            // About the dispute, never the charge: its amount is the dispute's, in the notice.
            // Adyen sends them with `success: "true"`; one saying otherwise tells of nothing
            // that happened, and is recorded ignored.
            event.dispute = dispute_notice(item).filter(|_| succeeded);
            event.acted_on = event.dispute.is_some();
            event.attempt_id = non_empty(&item.merchant_reference);
            event.amount = None;
            event.currency = None;
        }
        _ => {}
    }
    event
}

/// A chargeback notification in payorch's words (docs/guides/disputes.md): the dispute is the
/// item's `pspReference`, its payment the `originalReference`, and `merchantReference` the
/// payment's reference (payorch's attempt id). The pinned Webhooks-v1 does not require
/// `originalReference`, and Adyen's own examples of `CHARGEBACK_REVERSED`,
/// `SECOND_CHARGEBACK` and `PREARBITRATION_*` leave it out: such an item is kept, and applied
/// to the dispute its `pspReference` names. One with no dispute reference or no amount cannot
/// be applied: `None`, recorded ignored.
fn dispute_notice(item: &NotificationRequestItem) -> Option<DisputeNotice> {
    let additional = |key: &str| {
        item.additional_data
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let unclear = dispute::adyen_unclear(&item.event_code, &additional);
    let (status, stage) = match dispute::adyen_status(&item.event_code, &additional) {
        Some(read) => read,
        // Where the code places it; never written (`unclear`).
        None if unclear.is_some() => (
            dispute::DisputeStatus::UnderReview,
            dispute::DisputeStage::PreArbitration,
        ),
        None => return None,
    };
    let amount = item.amount.clone().unwrap_or_default();
    let code = additional("chargebackReasonCode")
        .or_else(|| additional("rfiReasonCode"))
        .or_else(|| additional("nofReasonCode"));
    // Trimmed: Adyen's parts may come with spaces around them (" 4853"), and the reason is
    // shown and compared as it is kept.
    let provider_reason = [code.as_deref().unwrap_or(""), item.reason.as_str()]
        .iter()
        .map(|part| part.trim())
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Some(DisputeNotice {
        provider_dispute_id: non_empty(&item.psp_reference)?,
        provider_payment_id: non_empty(&item.original_reference),
        attempt_id: non_empty(&item.merchant_reference),
        status,
        stage,
        amount: amount.value?,
        currency: amount.currency?.to_ascii_lowercase(),
        reason: dispute::adyen_reason(code.as_deref(), &item.reason),
        provider_reason,
        evidence_due_by: dispute::adyen_due_by(additional("defensePeriodEndsAt").as_deref()),
        unclear,
    })
}
