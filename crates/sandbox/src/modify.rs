//! A capture or a cancel, as both of the sandbox's faces make it (Stripe's
//! `/v1/payment_intents/{id}/capture` and `…/cancel`, Adyen's `/v71/payments/{psp}/captures`,
//! `…/cancels` and `/v71/cancels`): the move of the intent in the one store, its webhook or
//! notification, the answer recorded under the key, and the faults at the edge around it,
//! as a charge has them (lib.rs, "Fault model").
//!
//! Faults: `--error-rate` and a `pm_sandbox_capture_error_before` payment's first capture or
//! cancel fail before anything is done ([`fails_before`]); `--lost-response-rate` and a
//! `pm_sandbox_capture_lost_response` or `pm_sandbox_capture_error_after` payment's first
//! capture or cancel fail after it was done ([`run`]).
//!
//! What a resend with the same key gets: after a lost answer, the answer (it was recorded).
//! After the `500` of `pm_sandbox_capture_error_before` or `…_error_after` on the Stripe face,
//! that `500`: it is the key's first result, which Stripe saves "whatever it was, including
//! 500 errors" (Stripe's docs, "Idempotent requests"), so the capture or cancel made before
//! an `…_error_after` is learnt by retrieving the intent, not by resending. On the Adyen face
//! those `500`s are failures at the edge (`charges` says why): the first one records nothing,
//! and after the second a resend gets the `201 received`.

use super::answers::{api_error_500_answer, with_nulls};
use super::behaviour::{Behaviour, ModificationFault};
use super::protocol::is_marked_adyen;
use super::store::{Ask, Lookup, Modified, StoredResponse};
use super::webhooks::Cause;
use super::{random_id, roll, Sandbox};
use payorch_wire::stripe::PaymentIntent;

/// What a face answers to a capture or cancel, and whether the answer stands for what the
/// key did: `Record` is kept under the key and replayed; `Refuse` frees the key (nothing was
/// done, as Stripe saves no result for a request refused by the intent's state).
pub(super) enum Verdict {
    Record(StoredResponse),
    Refuse(StoredResponse),
}

/// The fault the first capture or cancel of `intent` meets, by its payment method.
fn fault_of(intent: &PaymentIntent) -> Option<ModificationFault> {
    intent
        .payment_method
        .as_deref()
        .and_then(Behaviour::modification_fault)
}

/// Whether this capture or cancel of `intent` fails before anything is done: the first one
/// of a `pm_sandbox_capture_error_before` payment does. (`--error-rate` is rolled by each
/// route before it reads the request, as for a charge.)
pub(super) fn fails_before(sb: &Sandbox, intent: &PaymentIntent) -> bool {
    fault_of(intent) == Some(ModificationFault::ErrorBefore) && sb.store.spend_fault(&intent.id)
}

/// Asks the store to capture or cancel intent `id` (its key, if any, begun), announces what
/// was done, records the face's answer under the key (the Stripe face's `500` for a fault
/// after it), then meets the faults after it. `None`: answer a 500 in the face's own words
/// (what was done stands, and a resend with the key gets its answer).
pub(super) async fn run(
    sb: &Sandbox,
    id: &str,
    ask: Ask,
    answer: impl FnOnce(&Lookup<Modified>) -> Verdict,
) -> Option<StoredResponse> {
    // No `.await` until the answer is recorded: a client that hangs up cannot leave the move
    // done and its key in flight.
    let done = execute(sb, id, ask, answer);
    if !done.recorded {
        return Some(done.stored);
    }
    if done.fault == Some(ModificationFault::LostResponse) || roll(sb.config.lost_response_rate) {
        sb.wait_for_shutdown().await;
        return None;
    }
    if done.fault == Some(ModificationFault::ErrorAfter) && done.adyen {
        return None;
    }
    Some(done.stored)
}

/// What [`execute`] did.
struct Done {
    stored: StoredResponse,
    /// The answer is recorded under the key: the capture or cancel was made (or, on the
    /// Adyen face, taken).
    recorded: bool,
    /// The payment's fault after it, this being its first capture or cancel made.
    fault: Option<ModificationFault>,
    /// The payment was made through the Adyen face.
    adyen: bool,
}

fn execute(
    sb: &Sandbox,
    id: &str,
    ask: Ask,
    answer: impl FnOnce(&Lookup<Modified>) -> Verdict,
) -> Done {
    let key = ask.key.clone();
    let keeps_refused = ask.keep_refused;
    let cause = Cause {
        request_id: random_id("req"),
        idempotency_key: key.clone(),
    };
    let modified = sb.store.modify(id, ask);
    if let Lookup::Found(m) = &modified {
        if m.refused.is_none() || keeps_refused {
            sb.announce_modification(&m.intent, &m.modification, cause);
        }
    }
    let (stored, recorded) = match answer(&modified) {
        Verdict::Record(stored) => (stored, true),
        Verdict::Refuse(stored) => (stored, false),
    };
    let fault = match &modified {
        Lookup::Found(m) if recorded => fault_of(&m.intent)
            .filter(|fault| *fault != ModificationFault::ErrorBefore)
            .filter(|_| sb.store.spend_fault(id)),
        _ => None,
    };
    let adyen = matches!(&modified, Lookup::Found(m) if is_marked_adyen(&m.intent.metadata));
    // Done, then a 500: on the Stripe face that 500 is what the key answers from now on.
    let stored = if fault == Some(ModificationFault::ErrorAfter) && !adyen {
        api_error_500_answer()
    } else {
        with_nulls(stored, sb.config.null_rate)
    };
    if let Some(key) = &key {
        if recorded {
            sb.store.finish(key, stored.clone());
        } else {
            sb.store.abandon(key);
        }
    }
    Done {
        stored,
        recorded,
        fault,
        adyen,
    }
}
