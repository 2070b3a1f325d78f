//! How Stripe's answers map to a [`ProviderOutcome`] (docs/DESIGN.md, "The provider
//! protocol").
//!
//! The rule of thumb: only an answer that proves nothing was charged is `Failed`;
//! anything that leaves doubt is `Unknown`, so the caller asks again with the same key.

use chrono::{DateTime, Duration, TimeZone, Utc};
use reqwest::Url;
use serde::Deserialize;

use super::declines::{advice_of, decline};
use super::wire::{ApiError, ErrorBody, PaymentIntent};
use super::IntentStatus;
use crate::providers::decline::Advice;
use crate::providers::{NextAction, ProviderOutcome};

/// How long Stripe holds a card payment's authorisation when the payer was present: the
/// intent says nothing of it, so the hold is counted from the intent's creation.
pub const CARD_HOLD: Duration = Duration::days(7);

/// The error code of a capture or cancel the intent's status does not allow.
pub const UNEXPECTED_STATE: &str = "payment_intent_unexpected_state";

/// What of a PaymentIntent its outcome is read from: a whole intent from an answer, or the
/// fields an event's object carries.
#[derive(Debug, Clone)]
pub struct IntentView<'a> {
    pub id: &'a str,
    pub status: &'a str,
    /// Seconds since the epoch.
    pub created: Option<i64>,
    /// `last_payment_error`'s `type`, `code`, `decline_code`, message and advice.
    pub failure_kind: Option<&'a str>,
    pub failure_code: Option<&'a str>,
    pub decline_code: Option<&'a str>,
    pub failure_message: Option<&'a str>,
    pub advice: Advice,
    pub next_action: Option<&'a serde_json::Value>,
}

impl<'a> IntentView<'a> {
    pub fn of(intent: &'a PaymentIntent) -> Self {
        let error = intent.last_payment_error.as_ref();
        IntentView {
            id: &intent.id,
            status: &intent.status,
            created: Some(intent.created),
            failure_kind: error.map(|e| e.kind.as_str()),
            failure_code: error.and_then(|e| e.code.as_deref()),
            decline_code: error.and_then(|e| e.decline_code.as_deref()),
            failure_message: error.and_then(|e| e.message.as_deref()),
            // The typed intent has no advice fields; [`outcome_for_intent_body`] reads them.
            advice: Advice::default(),
            next_action: intent.next_action.as_ref(),
        }
    }
}

/// The outcome a PaymentIntent stands for.
pub fn outcome_for_view(intent: &IntentView) -> ProviderOutcome {
    let provider_id = intent.id.to_owned();
    let status = IntentStatus::parse(intent.status);
    match status {
        IntentStatus::Succeeded => ProviderOutcome::Succeeded { provider_id },
        IntentStatus::RequiresCapture => ProviderOutcome::Authorized {
            provider_id,
            expires_at: intent.created.and_then(hold_expiry),
        },
        // Only a redirect can be handed to the payer; `use_stripe_sdk` and the like need
        // Stripe's own scripts in the payer's browser, which payorch does not run.
        IntentStatus::RequiresAction => match intent.next_action.and_then(redirect_of) {
            Some(next_action) => ProviderOutcome::RequiresAction {
                provider_id: Some(provider_id),
                next_action,
            },
            None => ProviderOutcome::Pending {
                provider_id: Some(provider_id),
            },
        },
        IntentStatus::Canceled => ProviderOutcome::Canceled {
            provider_id: Some(provider_id),
        },
        IntentStatus::RequiresPaymentMethod => {
            // With no last_payment_error the status itself is the most precise code we have.
            let no_error = intent.failure_code.is_none() && intent.decline_code.is_none();
            let decline = decline(
                intent.failure_kind.unwrap_or(if no_error {
                    status.as_str()
                } else {
                    "card_error"
                }),
                intent.failure_code,
                intent.decline_code,
                intent.advice.clone(),
            );
            ProviderOutcome::Failed {
                code: decline.code.as_str().to_owned(),
                message: intent
                    .failure_message
                    .unwrap_or("the payment intent did not succeed")
                    .to_owned(),
                provider_id: Some(provider_id),
                decline: Some(decline),
            }
        }
        // processing, requires_confirmation and statuses we do not know: the provider holds
        // the charge, the outcome is not final.
        _ => ProviderOutcome::Pending {
            provider_id: Some(provider_id),
        },
    }
}

/// The outcome of a PaymentIntent object.
pub fn outcome_for_intent(intent: &PaymentIntent) -> ProviderOutcome {
    outcome_for_view(&IntentView::of(intent))
}

/// The outcome of a PaymentIntent read from `body`, with the advice of its
/// `last_payment_error`, which the typed intent does not hold.
fn outcome_for_intent_body(intent: &PaymentIntent, body: &[u8]) -> ProviderOutcome {
    let object = serde_json::from_slice::<serde_json::Value>(body).unwrap_or_default();
    outcome_for_intent_object(intent, &object)
}

/// The outcome of `intent`, read from its JSON `object`, with the advice of its
/// `last_payment_error`.
fn outcome_for_intent_object(
    intent: &PaymentIntent,
    object: &serde_json::Value,
) -> ProviderOutcome {
    let advice = object
        .get("last_payment_error")
        .map(advice_of)
        .unwrap_or_default();
    outcome_for_view(&IntentView {
        advice,
        ..IntentView::of(intent)
    })
}

fn hold_expiry(created: i64) -> Option<DateTime<Utc>> {
    Some(Utc.timestamp_opt(created, 0).single()? + CARD_HOLD)
}

/// `next_action` of type `redirect_to_url`, when its URL is one a browser may be sent to.
fn redirect_of(next_action: &serde_json::Value) -> Option<NextAction> {
    if next_action.get("type")?.as_str()? != "redirect_to_url" {
        return None;
    }
    let redirect = next_action.get("redirect_to_url")?;
    let url = redirect.get("url")?.as_str()?;
    Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "https" | "http"))?;
    Some(NextAction {
        url: url.to_owned(),
        return_url: redirect
            .get("return_url")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
    })
}

/// Which call an answer belongs to; a 404 means different things to each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Create,
    Retrieve,
    /// `GET /v1/payment_intents` over a creation window.
    List,
    CreateRefund,
    RetrieveRefund,
    ListRefunds,
    Capture,
    Cancel,
}

/// One page of `GET /v1/payment_intents`, as read for one attempt.
#[derive(Debug)]
pub(crate) struct IntentPage {
    /// The intents whose metadata names the attempt, with their outcomes.
    pub matches: Vec<(i64, ProviderOutcome)>,
    pub has_more: bool,
    /// The page's last intent: where the next page starts.
    pub last_id: Option<String>,
}

/// A 2xx page of intents: those of `attempt_id`, and where the list goes on. An intent that
/// cannot be read leaves the page unread (`Err`): it might be the attempt's.
pub(crate) fn intent_page(body: &[u8], attempt_id: &str) -> Result<IntentPage, String> {
    #[derive(serde::Deserialize)]
    struct Page {
        // Each intent is kept as JSON too, for the advice the typed intent does not hold.
        data: Vec<serde_json::Value>,
        has_more: bool,
    }
    let unreadable = |e: serde_json::Error| format!("2xx with an unreadable list of intents: {e}");
    let page: Page = serde_json::from_slice(body).map_err(unreadable)?;
    let intents = page
        .data
        .iter()
        .map(|object| {
            Ok((
                PaymentIntent::deserialize(object).map_err(unreadable)?,
                object,
            ))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let matches = intents
        .iter()
        .filter(|(intent, _)| {
            intent.metadata.get("attempt_id").map(String::as_str) == Some(attempt_id)
        })
        .map(|(intent, object)| (intent.created, outcome_for_intent_object(intent, object)))
        .collect();
    Ok(IntentPage {
        matches,
        has_more: page.has_more,
        last_id: intents.last().map(|(intent, _)| intent.id.clone()),
    })
}

/// What a Refund object says, read field by field: Stripe's document makes `status` and
/// `metadata` nullable, and a refund that names itself is a refund even when they are null.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefundView {
    pub id: String,
    pub amount: i64,
    /// `pending`, `requires_action`, `succeeded`, `failed`, `canceled`, or null.
    pub status: Option<String>,
    pub failure_reason: Option<String>,
    /// `None` when the field came null: then it cannot tell whose refund this is.
    pub metadata: Option<std::collections::BTreeMap<String, String>>,
}

impl RefundView {
    /// `None` unless the object has an id and an amount.
    pub(crate) fn read(object: &serde_json::Value) -> Option<Self> {
        let text = |field: &str| object.get(field)?.as_str().map(str::to_owned);
        Some(RefundView {
            id: text("id")?,
            amount: object.get("amount")?.as_i64()?,
            status: text("status"),
            failure_reason: text("failure_reason"),
            metadata: object
                .get("metadata")
                .and_then(|m| serde_json::from_value(m.clone()).ok()),
        })
    }

    /// payorch's refund id, from the metadata.
    pub(crate) fn refund_id(&self) -> Option<&str> {
        self.metadata.as_ref()?.get("refund_id").map(String::as_str)
    }
}

/// A 2xx answer to `GET /v1/refunds?payment_intent=…` (read-after-write, newest first): the
/// refund whose metadata names `refund_id`; `NotFound` only when every refund of the charge
/// was read and each could say whose it is. A null `metadata` or a further page leaves doubt.
pub(crate) fn refund_in_list(body: &[u8], refund_id: &str) -> ProviderOutcome {
    let Ok(list) = serde_json::from_slice::<serde_json::Value>(body) else {
        return unknown(format!(
            "2xx with an unreadable refund list: {}",
            summary(body)
        ));
    };
    let Some(data) = list.get("data").and_then(serde_json::Value::as_array) else {
        return unknown(format!("2xx refund list without data: {}", summary(body)));
    };
    let mut doubt = list.get("has_more").and_then(serde_json::Value::as_bool) != Some(false);
    for object in data {
        match RefundView::read(object) {
            Some(refund) if refund.refund_id() == Some(refund_id) => {
                return outcome_for_refund(&refund)
            }
            Some(refund) if refund.metadata.is_some() => {}
            _ => doubt = true,
        }
    }
    if doubt {
        unknown(
            "the charge's refunds could not all be told apart (null metadata, or more pages)"
                .into(),
        )
    } else {
        ProviderOutcome::NotFound
    }
}

/// The outcome a Refund object stands for: only `failed` or `canceled` proves nothing went
/// back; `pending`, `requires_action` and a null status are not final.
pub(crate) fn outcome_for_refund(refund: &RefundView) -> ProviderOutcome {
    let provider_id = refund.id.clone();
    match refund.status.as_deref() {
        Some("succeeded") => ProviderOutcome::Succeeded { provider_id },
        Some(status @ ("failed" | "canceled")) => ProviderOutcome::Failed {
            code: refund
                .failure_reason
                .clone()
                .unwrap_or_else(|| format!("refund_{status}")),
            message: format!("the provider says the refund {status}"),
            provider_id: Some(provider_id),
            decline: None,
        },
        _ => ProviderOutcome::Pending {
            provider_id: Some(provider_id),
        },
    }
}

/// Map one HTTP answer (status and body) to an outcome.
pub fn outcome_for_response(call: Call, status: u16, body: &[u8]) -> ProviderOutcome {
    match status {
        200..=299 => outcome_for_success(call, body),
        // Definitive decline: the card was refused, nothing charged.
        402 => failed_from_error(call, status, body),
        // Stripe's "a request with this key is in flight": the first may still charge.
        409 => unknown(format!(
            "HTTP 409 (idempotency key in use): {}",
            summary(body)
        )),
        429 => unknown(format!("HTTP 429 (rate limited): {}", summary(body))),
        // Credentials or permissions: the provider refused *this* request before processing
        // it, for a reason of our configuration, not the payer's. For a charge's first send
        // that is the explicit "not processed" that lets a payment fail over (docs/DESIGN.md,
        // "Failover"); for a resend it proves nothing about an earlier send, which the flow
        // and the reconciler read as unknown. A lookup or a refund so answered stays unknown.
        401 | 403 if matches!(call, Call::Create) => ProviderOutcome::Unavailable {
            reason: format!(
                "HTTP {status} (not authorised, not processed): {}",
                summary(body)
            ),
        },
        401 | 403 => unknown(format!("HTTP {status} (not authorised): {}", summary(body))),
        408 => unknown(format!("HTTP 408 (request timeout): {}", summary(body))),
        404 if matches!(call, Call::Retrieve | Call::RetrieveRefund)
            && is_resource_missing(body) =>
        {
            ProviderOutcome::NotFound
        }
        // A 404 on create or search means a wrong URL, not a missing charge.
        404 => unknown(format!("HTTP 404: {}", summary(body))),
        400..=499 => match parse_error(body) {
            // The key already holds a different request's result; which one we cannot see.
            Some(e) if e.error.kind == "idempotency_error" => unknown(format!(
                "HTTP {status} idempotency_error: {}",
                e.error.message.unwrap_or_default()
            )),
            Some(e)
                if matches!(call, Call::Capture | Call::Cancel)
                    && e.error.code.as_deref() == Some(UNEXPECTED_STATE) =>
            {
                after_unexpected_state(call, e.error)
            }
            // A refused create (a decline's siblings; for a refund, more than is left or a
            // charge that cannot be refunded; for a capture, more than is held) did nothing.
            _ if matches!(
                call,
                Call::Create | Call::CreateRefund | Call::Capture | Call::Cancel
            ) =>
            {
                failed_from_error(call, status, body)
            }
            // A refused lookup says nothing about the charge.
            _ => unknown(format!("HTTP {status}: {}", summary(body))),
        },
        _ => unknown(format!("HTTP {status}: {}", summary(body))),
    }
}

fn outcome_for_success(call: Call, body: &[u8]) -> ProviderOutcome {
    match call {
        Call::Create | Call::Retrieve | Call::Capture | Call::Cancel => {
            match serde_json::from_slice::<PaymentIntent>(body) {
                Ok(intent) => outcome_for_intent_body(&intent, body),
                Err(e) => unknown(format!("2xx with an unreadable payment intent: {e}")),
            }
        }
        // A list is read by the caller, who knows what it looks for.
        Call::List | Call::ListRefunds => {
            unknown("a list read without what it is looked through for".into())
        }
        Call::CreateRefund | Call::RetrieveRefund => {
            let refund = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|object| RefundView::read(&object));
            match refund {
                Some(refund) => outcome_for_refund(&refund),
                None => unknown(format!("2xx with an unreadable refund: {}", summary(body))),
            }
        }
    }
}

/// A capture or cancel the intent's status did not allow; the error shows the intent, whose
/// status says what is true now. A capture refused because the intent is `succeeded` was
/// captured before (a resend after Stripe forgot its key, or a capture made elsewhere), and a
/// cancel refused because it is `canceled` was released before: reading those as failures
/// would undo what happened.
fn after_unexpected_state(call: Call, error: ApiError) -> ProviderOutcome {
    let message = error
        .message
        .unwrap_or_else(|| "the payment intent's status does not allow this".to_owned());
    let Some(intent) = error.payment_intent else {
        return ProviderOutcome::Failed {
            code: UNEXPECTED_STATE.to_owned(),
            message,
            provider_id: None,
            decline: None,
        };
    };
    let provider_id = intent.id;
    match (call, IntentStatus::parse(&intent.status)) {
        (Call::Capture, IntentStatus::Succeeded) => ProviderOutcome::Succeeded { provider_id },
        (Call::Capture, IntentStatus::Processing) => ProviderOutcome::Pending {
            provider_id: Some(provider_id),
        },
        (Call::Cancel, IntentStatus::Canceled) => ProviderOutcome::Canceled {
            provider_id: Some(provider_id),
        },
        (_, status) => ProviderOutcome::Failed {
            code: UNEXPECTED_STATE.to_owned(),
            message: format!("{message} (status {status})"),
            provider_id: Some(provider_id),
            decline: None,
        },
    }
}

/// One attempt has one idempotency key, so at most one intent should match. Should there
/// be more, a succeeded one wins (money moved), then one holding money, then one still
/// going, then the newest. None: `NotFound`.
pub(crate) fn outcome_for_matches(outcomes: &[(i64, ProviderOutcome)]) -> ProviderOutcome {
    let outcomes = outcomes.iter().cloned();
    let rank = |o: &ProviderOutcome| match o {
        ProviderOutcome::Succeeded { .. } => 4,
        ProviderOutcome::Authorized { .. } => 3,
        ProviderOutcome::Pending { .. } | ProviderOutcome::RequiresAction { .. } => 2,
        _ => 1,
    };
    outcomes
        .into_iter()
        .max_by_key(|(created, outcome)| (rank(outcome), *created))
        .map(|(_, outcome)| outcome)
        .unwrap_or(ProviderOutcome::NotFound)
}

/// A refused request: for a charge, a decline in payorch's words (docs/guides/declines.md);
/// for a refund, capture or cancel, the error's own code.
fn failed_from_error(call: Call, status: u16, body: &[u8]) -> ProviderOutcome {
    match parse_error(body) {
        Some(ErrorBody { error }) => {
            let decline = matches!(call, Call::Create).then(|| {
                let advice = serde_json::from_slice::<serde_json::Value>(body)
                    .ok()
                    .and_then(|v| v.get("error").map(advice_of))
                    .unwrap_or_default();
                decline(
                    &error.kind,
                    error.code.as_deref(),
                    error.decline_code.as_deref(),
                    advice,
                )
            });
            ProviderOutcome::Failed {
                code: match &decline {
                    Some(decline) => decline.code.as_str().to_owned(),
                    None => error
                        .code
                        .or_else(|| error.decline_code.clone())
                        .unwrap_or_else(|| error.kind.clone()),
                },
                message: error
                    .message
                    .unwrap_or_else(|| format!("HTTP {status} {}", error.kind)),
                provider_id: error.payment_intent.map(|pi| pi.id),
                decline,
            }
        }
        // Not Stripe's error object (a proxy's page, a cut body): payorch cannot read what
        // the provider decided, so it decided nothing here.
        None => unknown(format!(
            "HTTP {status} without a readable error: {}",
            summary(body)
        )),
    }
}

fn parse_error(body: &[u8]) -> Option<ErrorBody> {
    serde_json::from_slice(body).ok()
}

fn is_resource_missing(body: &[u8]) -> bool {
    parse_error(body).is_some_and(|e| e.error.code.as_deref() == Some("resource_missing"))
}

fn unknown(reason: String) -> ProviderOutcome {
    ProviderOutcome::Unknown { reason }
}

/// A short, log-safe excerpt of a body.
fn summary(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::decline::{DeclineCode, FailureClass};

    #[test]
    fn a_listed_or_fetched_intent_declines_with_its_advice() {
        let intent = serde_json::json!({
            "id": "pi_1", "object": "payment_intent", "amount": 100, "amount_received": 0,
            "currency": "eur", "status": "requires_payment_method", "created": 1,
            "livemode": false, "metadata": {"attempt_id": "pay_1"},
            "last_payment_error": {
                "type": "card_error", "code": "card_declined", "decline_code": "generic_decline",
                "message": "Your card was declined.", "advice_code": "do_not_try_again"
            }
        });
        let hard = |outcome: &ProviderOutcome| match outcome {
            ProviderOutcome::Failed {
                code,
                decline: Some(d),
                ..
            } => {
                assert_eq!(code, "generic_decline");
                assert_eq!(d.code, DeclineCode::GenericDecline);
                assert_eq!(
                    d.provider_code.as_deref(),
                    Some("card_declined/generic_decline")
                );
                d.class == FailureClass::Hard
            }
            other => panic!("{other:?}"),
        };
        let body = intent.to_string();
        assert!(hard(&outcome_for_response(
            Call::Retrieve,
            200,
            body.as_bytes()
        )));
        let list = serde_json::json!({"data": [intent], "has_more": false}).to_string();
        let page = intent_page(list.as_bytes(), "pay_1").unwrap();
        assert!(hard(&page.matches[0].1));
        assert_eq!(page.last_id.as_deref(), Some("pi_1"));
    }

    #[test]
    fn matches_prefer_a_succeeded_intent_and_none_is_not_found() {
        let intent = |id: &str, status: &str, created| PaymentIntent {
            id: id.into(),
            object: "payment_intent".into(),
            amount: 100,
            amount_received: 0,
            currency: "eur".into(),
            status: status.into(),
            payment_method: None,
            metadata: Default::default(),
            last_payment_error: None,
            latest_charge: None,
            description: None,
            capture_method: "automatic".into(),
            confirmation_method: "automatic".into(),
            created,
            livemode: false,
            client_secret: None,
            payment_method_types: vec!["card".into()],
            amount_capturable: 0,
            next_action: None,
            canceled_at: None,
            cancellation_reason: None,
        };
        assert_eq!(outcome_for_matches(&[]), ProviderOutcome::NotFound);
        let data = [
            intent("pi_new", "requires_payment_method", 2),
            intent("pi_old", "succeeded", 1),
        ]
        .map(|intent| (intent.created, outcome_for_intent(&intent)));
        assert_eq!(
            outcome_for_matches(&data),
            ProviderOutcome::Succeeded {
                provider_id: "pi_old".into()
            }
        );
    }
}
