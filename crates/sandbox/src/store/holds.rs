//! The store's side of holds, captures, cancels and 3-D Secure challenges: each move is one
//! decision under the store's lock, so two requests racing to capture (or to capture and
//! cancel, or to pass and fail a challenge) move a payment once; and what the ledger shows of
//! them (`holds`, `captures`, `voids`).

use chrono::Utc;
use serde::{Deserialize, Serialize};

use super::{Lookup, Made, Store};
use crate::kept::{KeptIntent, AUTHENTICATED, AUTHENTICATION_FAILED, FAULT_SPENT, HELD};
use crate::modification::{Kind, Modification};
use crate::protocol::protocol_of;
use payorch_wire::stripe::{LastPaymentError, PaymentIntent};

/// A capture or cancel asked of an intent.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    pub kind: Kind,
    /// What a capture takes; `None`: the whole hold.
    pub amount: Option<i64>,
    /// The cancellation reason the merchant gave.
    pub reason: Option<String>,
    /// Its own reference (the Adyen face's `pspReference` of a capture or cancel).
    pub psp: Option<String>,
    pub key: Option<String>,
    /// The merchant's reference of it (Adyen).
    pub reference: Option<String>,
    /// Keep it when refused too: the Adyen face answers `received` before the outcome, so a
    /// refused capture or cancel is a thing that happened, with its own reference.
    pub keep_refused: bool,
    /// The statuses a cancel is allowed from: Stripe's ([`CANCELABLE`]) or Adyen's
    /// ([`ADYEN_CANCELABLE`]).
    pub cancelable: &'static [&'static str],
}

/// Why an intent refused a capture or cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Its status does not allow it (Stripe's `payment_intent_unexpected_state`).
    State,
    /// More than is held.
    TooLarge { capturable: i64 },
}

/// What a capture or cancel came to.
#[derive(Debug, Clone)]
pub(crate) struct Modified {
    /// The intent as it is after.
    pub intent: PaymentIntent,
    /// What was done, or refused.
    pub modification: Modification,
    /// `None`: done.
    pub refused: Option<Refusal>,
}

/// What a 3-D Secure challenge came to.
#[derive(Debug, Clone)]
pub(crate) struct Challenged {
    /// The intent as it is now.
    pub intent: PaymentIntent,
    /// Where the challenge sends the customer back.
    pub return_url: Option<String>,
    /// `Some(passed)` once the customer passed or failed it.
    pub authenticated: Option<bool>,
    /// Whether this request decided it (`false`: it was decided, or canceled, before).
    pub decided_now: bool,
}

/// The statuses Stripe lets a PaymentIntent be canceled from.
pub(crate) const CANCELABLE: &[&str] = &[
    "requires_payment_method",
    "requires_capture",
    "requires_confirmation",
    "requires_action",
    "processing",
];

/// The states Adyen cancels a payment in (Adyen's docs, "Cancel": a payment that "has not
/// been captured"; "after a payment has been captured, you can no longer cancel it"): one
/// authorised and held, one waiting for its shopper's 3-D Secure challenge, one still
/// `Received`. A refused payment authorised nothing and has nothing to cancel; one captured
/// is refunded instead; one cancelled is cancelled already.
pub(crate) const ADYEN_CANCELABLE: &[&str] = &["requires_capture", "requires_action", "processing"];

/// What `last_payment_error` says of a customer who failed the challenge: Stripe's
/// `payment_intent_authentication_failure`, not the `authentication_required` of a card
/// that asks for a challenge it was not given.
fn authentication_failure() -> LastPaymentError {
    crate::declines::AUTHENTICATION_FAILED.last_payment_error()
}

impl Store {
    /// Captures or cancels intent `id` as `ask` says, if its status allows.
    pub(crate) fn modify(&self, id: &str, ask: Ask) -> Lookup<Modified> {
        let mut inner = self.lock();
        let at = match inner.find_intent(id) {
            Lookup::Found(at) => at,
            Lookup::Forgotten => return Lookup::Forgotten,
            Lookup::Missing => return Lookup::Missing,
        };
        let kept = &mut inner.intents[at];
        let mut intent = kept.intent();
        let held = if intent.status == "requires_capture" {
            intent.amount_capturable
        } else {
            0
        };
        let mut modification = Modification {
            kind: ask.kind,
            psp: ask.psp,
            key: ask.key,
            reference: ask.reference,
            amount: 0,
            released: 0,
            succeeded: false,
            reason: ask.reason.clone(),
            created: Utc::now().timestamp(),
        };
        let refused = match ask.kind {
            Kind::Capture => {
                // What was asked for, kept with a refusal too.
                let amount = ask.amount.unwrap_or(held);
                modification.amount = amount;
                if intent.status != "requires_capture" {
                    Some(Refusal::State)
                } else if amount > held {
                    Some(Refusal::TooLarge { capturable: held })
                } else {
                    intent.status = "succeeded".into();
                    intent.amount_received = amount;
                    intent
                        .latest_charge
                        .get_or_insert_with(|| crate::random_id("ch"));
                    modification.released = held - amount;
                    None
                }
            }
            Kind::Cancel | Kind::TechnicalCancel
                if !ask.cancelable.contains(&intent.status.as_str()) =>
            {
                Some(Refusal::State)
            }
            Kind::Cancel | Kind::TechnicalCancel => {
                intent.status = "canceled".into();
                intent.canceled_at = Some(modification.created);
                intent.cancellation_reason = ask.reason;
                modification.released = held;
                None
            }
        };
        modification.succeeded = refused.is_none();
        if let Some(refusal) = refused {
            modification.reason = Some(refusal_reason(refusal, &intent));
        }
        if refused.is_none() || ask.keep_refused {
            if refused.is_none() {
                kept.replace(&intent);
                // As stored: what the wire intent derives (`amount_capturable`,
                // `next_action`) follows its new status.
                intent = kept.intent();
            }
            kept.add_modification(modification.clone());
            let serial = inner.first_intent + at as u64;
            inner.made_under(modification.key.as_deref(), Made::Intent(serial));
        }
        Lookup::Found(Modified {
            intent,
            modification,
            refused,
        })
    }

    /// The customer passed (`passed`) or failed the 3-D Secure challenge of intent `id`: a
    /// passed one is charged as a good card is (or only authorised, for a manual capture),
    /// a failed one declined. Only the first decision of an intent still waiting for it counts.
    pub(crate) fn settle_challenge(&self, id: &str, passed: bool) -> Lookup<Challenged> {
        let mut inner = self.lock();
        let at = match inner.find_intent(id) {
            Lookup::Found(at) => at,
            Lookup::Forgotten => return Lookup::Forgotten,
            Lookup::Missing => return Lookup::Missing,
        };
        let kept = &mut inner.intents[at];
        // Only a 3-D Secure card makes an intent wait for its customer here.
        let waiting = kept.status() == "requires_action";
        if waiting {
            let mut intent = kept.intent();
            intent.next_action = None;
            if !passed {
                intent.status = "requires_payment_method".into();
                intent.last_payment_error = Some(authentication_failure());
            } else if intent.capture_method == "manual" {
                intent.status = "requires_capture".into();
                intent.latest_charge = Some(crate::random_id("ch"));
            } else {
                intent.status = "succeeded".into();
                intent.amount_received = intent.amount;
                intent.latest_charge = Some(crate::random_id("ch"));
            }
            kept.replace(&intent);
            kept.mark(if passed {
                AUTHENTICATED
            } else {
                AUTHENTICATION_FAILED
            });
        }
        Lookup::Found(challenged(kept, waiting))
    }

    /// Intent `id` and its challenge, as they are.
    pub(crate) fn challenge(&self, id: &str) -> Lookup<Challenged> {
        let inner = self.lock();
        inner
            .find_intent(id)
            .map(|at| challenged(&inner.intents[at], false))
    }

    /// True the first time it is asked of intent `id`: its `pm_sandbox_capture_*` fault
    /// happens then, and never again.
    pub(crate) fn spend_fault(&self, id: &str) -> bool {
        let mut inner = self.lock();
        let Some(at) = inner.find_intent(id).found() else {
            return false;
        };
        let kept = &mut inner.intents[at];
        let first = !kept.has(FAULT_SPENT);
        kept.mark(FAULT_SPENT);
        first
    }

    /// The capture or cancel of intent `id` made under `key`, if it is still kept.
    pub(crate) fn modification_by_key(&self, id: &str, key: &str) -> Option<Modification> {
        let inner = self.lock();
        let at = inner.find_intent(id).found()?;
        inner.intents[at]
            .modifications()
            .iter()
            .rev()
            .find(|m| m.key.as_deref() == Some(key))
            .cloned()
    }

    /// Every hold placed on a kept intent, oldest first.
    pub(crate) fn holds(&self) -> Vec<HoldEntry> {
        let inner = self.lock();
        inner
            .intents
            .iter()
            .filter(|kept| kept.has(HELD))
            .map(hold_entry)
            .collect()
    }

    /// Every capture of a kept intent (and every one the Adyen face refused), in order.
    pub(crate) fn captures(&self) -> Vec<CaptureEntry> {
        let inner = self.lock();
        let mut captures = Vec::new();
        for kept in &inner.intents {
            let intent = kept.intent();
            for m in kept.modifications() {
                if m.kind == Kind::Capture {
                    captures.push(capture_entry(&intent, m));
                }
            }
        }
        captures
    }

    /// Every hold released by a cancel, in order.
    pub(crate) fn voids(&self) -> Vec<VoidEntry> {
        let inner = self.lock();
        let mut voids = Vec::new();
        for kept in &inner.intents {
            let intent = kept.intent();
            for m in kept.modifications().iter().filter(|m| m.is_void()) {
                voids.push(void_entry(&intent, m));
            }
        }
        voids
    }
}

fn challenged(kept: &KeptIntent, decided_now: bool) -> Challenged {
    let authenticated = if kept.has(AUTHENTICATED) {
        Some(true)
    } else if kept.has(AUTHENTICATION_FAILED) {
        Some(false)
    } else {
        None
    };
    Challenged {
        intent: kept.intent(),
        return_url: kept.return_url().map(str::to_owned),
        authenticated,
        decided_now,
    }
}

/// Why a refused capture or cancel was refused, in Adyen's notification's words.
fn refusal_reason(refusal: Refusal, intent: &PaymentIntent) -> String {
    match refusal {
        Refusal::TooLarge { capturable } => {
            format!("Insufficient balance on payment: {capturable} can be captured")
        }
        Refusal::State => match intent.status.as_str() {
            "succeeded" => "The payment was captured: it can be refunded, not cancelled".into(),
            "requires_payment_method" => "The payment was refused: nothing to cancel".into(),
            "canceled" => "The payment was cancelled already".into(),
            "requires_capture" => "The payment is authorised, not captured".into(),
            status => format!("The payment is {status}"),
        },
    }
}

/// A hold on a payment: authorised, to be captured or released, as `GET /__sandbox/ledger`
/// lists it under `holds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldEntry {
    /// The protocol the payment came through: `stripe` or `adyen`.
    pub protocol: String,
    pub provider_id: String,
    /// The key of the request that authorised it.
    pub idempotency_key: Option<String>,
    pub attempt_id: Option<String>,
    pub order_id: Option<String>,
    pub merchant_id: Option<String>,
    /// What was authorised.
    pub amount: i64,
    pub currency: String,
    /// `held` (still), `captured` or `voided`; `canceled` never: a hold ends captured or
    /// voided.
    pub status: String,
    /// What its captures took.
    pub captured: i64,
    pub created: i64,
}

/// A capture, as the ledger lists it under `captures`: money taken from a hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureEntry {
    pub protocol: String,
    /// The payment (intent) whose hold it captured.
    pub provider_id: String,
    /// The capture's own reference: the Adyen face's capture `pspReference`, or the Stripe
    /// face's charge id.
    pub capture_id: Option<String>,
    /// The `Idempotency-Key` of the capture request.
    pub idempotency_key: Option<String>,
    pub attempt_id: Option<String>,
    /// The merchant's reference of the capture (Adyen).
    pub reference: Option<String>,
    /// What it took.
    pub amount: i64,
    /// What it left of the hold, released.
    pub released: i64,
    pub currency: String,
    /// `succeeded`, or `failed` (the Adyen face took it and refused it: nothing taken).
    pub status: String,
    /// Why it failed.
    pub reason: Option<String>,
    pub created: i64,
}

impl CaptureEntry {
    /// Money was taken.
    pub fn is_captured(&self) -> bool {
        self.status == "succeeded"
    }
}

/// A hold released by a cancel, as the ledger lists it under `voids`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoidEntry {
    pub protocol: String,
    /// The payment (intent) whose hold went back.
    pub provider_id: String,
    /// The cancel's own reference on the Adyen face.
    pub void_id: Option<String>,
    /// The `Idempotency-Key` of the cancel request.
    pub idempotency_key: Option<String>,
    pub attempt_id: Option<String>,
    /// The merchant's reference of the cancel (Adyen).
    pub reference: Option<String>,
    /// `cancel`, or `technical_cancel` (Adyen's cancel by the payment's reference).
    pub kind: String,
    /// What went back.
    pub amount: i64,
    pub currency: String,
    /// The cancellation reason the merchant gave (Stripe).
    pub reason: Option<String>,
    pub created: i64,
}

fn hold_entry(kept: &KeptIntent) -> HoldEntry {
    let pi = kept.intent();
    let modifications = kept.modifications();
    let captured: i64 = modifications
        .iter()
        .filter(|m| m.is_capture())
        .map(|m| m.amount)
        .sum();
    let status = if modifications.iter().any(Modification::is_capture) {
        "captured"
    } else if modifications.iter().any(Modification::is_void) {
        "voided"
    } else {
        "held"
    };
    HoldEntry {
        protocol: protocol_of(&pi.metadata).to_owned(),
        idempotency_key: kept.ledger_key().map(str::to_owned),
        attempt_id: pi.metadata.get("attempt_id").cloned(),
        order_id: pi.metadata.get("order_id").cloned(),
        merchant_id: pi.metadata.get("merchant_id").cloned(),
        provider_id: pi.id,
        amount: pi.amount,
        currency: pi.currency,
        status: status.to_owned(),
        captured,
        created: pi.created,
    }
}

fn capture_entry(pi: &PaymentIntent, m: &Modification) -> CaptureEntry {
    CaptureEntry {
        protocol: protocol_of(&pi.metadata).to_owned(),
        provider_id: pi.id.clone(),
        capture_id: m.psp.clone().or_else(|| pi.latest_charge.clone()),
        idempotency_key: m.key.clone(),
        attempt_id: pi.metadata.get("attempt_id").cloned(),
        reference: m.reference.clone(),
        amount: m.amount,
        released: m.released,
        currency: pi.currency.clone(),
        status: if m.succeeded { "succeeded" } else { "failed" }.to_owned(),
        reason: if m.succeeded { None } else { m.reason.clone() },
        created: m.created,
    }
}

fn void_entry(pi: &PaymentIntent, m: &Modification) -> VoidEntry {
    VoidEntry {
        protocol: protocol_of(&pi.metadata).to_owned(),
        provider_id: pi.id.clone(),
        void_id: m.psp.clone(),
        idempotency_key: m.key.clone(),
        attempt_id: pi.metadata.get("attempt_id").cloned(),
        reference: m.reference.clone(),
        kind: match m.kind {
            Kind::TechnicalCancel => "technical_cancel",
            _ => "cancel",
        }
        .to_owned(),
        amount: m.released,
        currency: pi.currency.clone(),
        reason: m.reason.clone(),
        created: m.created,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Begin, RefundRefused, Replay, StoredResponse, Window};
    use super::*;

    fn held(id: String) -> PaymentIntent {
        serde_json::from_value(serde_json::json!({
            "id": id, "amount": 500, "currency": "eur", "status": "requires_capture",
            "capture_method": "manual", "created": 1, "metadata": {"attempt_id": "a"},
        }))
        .expect("an intent")
    }

    fn ask(kind: Kind, amount: Option<i64>, key: &str) -> Ask {
        Ask {
            kind,
            amount,
            reason: None,
            psp: None,
            key: Some(key.into()),
            reference: None,
            keep_refused: false,
            cancelable: CANCELABLE,
        }
    }

    fn refund(id: String, amount: i64, intent: &PaymentIntent) -> payorch_wire::stripe::Refund {
        payorch_wire::stripe::Refund {
            id,
            object: "refund".into(),
            amount,
            currency: intent.currency.clone(),
            status: "succeeded".into(),
            payment_intent: Some(intent.id.clone()),
            reason: None,
            failure_reason: None,
            metadata: Default::default(),
            created: 1,
        }
    }

    #[test]
    fn a_hold_is_captured_once_and_only_what_was_captured_can_go_back() {
        let store = Store::new(Window {
            intents: 10,
            answers: 0,
        });
        let intent = store.create(None, true, held);
        assert_eq!(store.begin("cap", "x"), Begin::Fresh);
        let Lookup::Found(captured) =
            store.modify(&intent.id, ask(Kind::Capture, Some(300), "cap"))
        else {
            panic!("kept");
        };
        assert_eq!(captured.refused, None);
        assert_eq!(
            (
                captured.intent.amount_received,
                captured.intent.amount_capturable
            ),
            (300, 0)
        );
        let Lookup::Found(again) = store.modify(&intent.id, ask(Kind::Capture, None, "other"))
        else {
            panic!("kept");
        };
        assert_eq!(again.refused, Some(Refusal::State));
        let Lookup::Found(void) = store.modify(&intent.id, ask(Kind::Cancel, None, "void")) else {
            panic!("kept");
        };
        assert_eq!(void.refused, Some(Refusal::State));
        assert_eq!(store.captures().len(), 1, "refusals are not kept here");
        assert!(store.voids().is_empty());
        assert_eq!(store.holds()[0].status, "captured");
        assert_eq!(
            store.refund(&intent.id, Some(301), refund, None),
            Err(RefundRefused::TooLarge { left: 300 })
        );
        // Past the answers kept, the capture's key replays the intent it moved.
        store.finish(
            "cap",
            StoredResponse {
                status: 200,
                body: Default::default(),
            },
        );
        assert!(matches!(
            store.begin("cap", "x"),
            Begin::Replay(Replay::Intent(now)) if now.status == "succeeded"
        ));
    }

    #[test]
    fn a_refusal_the_adyen_face_took_is_kept_and_never_moves_money() {
        let store = Store::new(Window {
            intents: 10,
            answers: 10,
        });
        let intent = store.create(None, true, held);
        let too_much = Ask {
            keep_refused: true,
            psp: Some("cap_1".into()),
            ..ask(Kind::Capture, Some(501), "k")
        };
        let Lookup::Found(refused) = store.modify(&intent.id, too_much) else {
            panic!("kept");
        };
        assert_eq!(refused.refused, Some(Refusal::TooLarge { capturable: 500 }));
        assert_eq!(refused.intent.status, "requires_capture");
        let captures = store.captures();
        assert_eq!(captures.len(), 1);
        assert!(!captures[0].is_captured());
        assert_eq!(captures[0].amount, 501, "what was asked");
        assert_eq!(store.holds()[0].status, "held");
        let Lookup::Found(voided) = store.modify(&intent.id, ask(Kind::Cancel, None, "v")) else {
            panic!("kept");
        };
        assert_eq!(voided.modification.released, 500);
        assert_eq!(store.holds()[0].status, "voided");
        assert_eq!(store.voids()[0].amount, 500);
        assert!(matches!(
            store.modify("pi_nope", ask(Kind::Cancel, None, "n")),
            Lookup::Missing
        ));
    }

    #[test]
    fn a_challenge_is_decided_once_and_a_fault_happens_once() {
        let store = Store::new(Window {
            intents: 10,
            answers: 0,
        });
        let waiting = store.create(None, true, |id| {
            let mut intent = held(id);
            intent.status = "requires_action".into();
            intent.capture_method = "automatic".into();
            intent
        });
        let Lookup::Found(passed) = store.settle_challenge(&waiting.id, true) else {
            panic!("kept");
        };
        assert!(passed.decided_now);
        assert_eq!(passed.authenticated, Some(true));
        assert_eq!(passed.intent.status, "succeeded");
        let Lookup::Found(failed) = store.settle_challenge(&waiting.id, false) else {
            panic!("kept");
        };
        assert!(!failed.decided_now);
        assert_eq!(
            failed.authenticated,
            Some(true),
            "the first decision stands"
        );
        assert_eq!(failed.intent.status, "succeeded");
        assert!(store.spend_fault(&waiting.id));
        assert!(!store.spend_fault(&waiting.id));
    }
}
