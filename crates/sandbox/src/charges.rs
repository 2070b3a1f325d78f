//! The charge both of the sandbox's faces make (Stripe's payment intents and Adyen's
//! payments): the intent, the outcome its payment method asks for, the webhook, the answer
//! recorded under the key, and the faults after it.
//!
//! `pm_sandbox_error_after` charges, then answers a `500`. On the Stripe face that `500` is
//! the key's first result, and Stripe saves a key's first result "whatever it was, including
//! 500 errors" (Stripe's docs, "Idempotent requests"): it is what is recorded under the key,
//! so a resend with the key gets the `500` again and learns nothing of the charge (the ledger
//! has it). Adyen's docs ("API idempotency") promise only that a request the platform already
//! processed is answered with the first attempt's response; the Adyen face's `500` stays a
//! failure at the edge, after the payment's answer was recorded, which a resend gets.

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::web;
use chrono::Utc;

use super::answers::{api_error_500_answer, intent_answer, stored_error, with_nulls};
use super::behaviour::Behaviour;
use super::declines::by_token;
use super::params::CreateParams;
use super::protocol::is_marked_adyen;
use super::store::StoredResponse;
use super::webhooks::Cause;
use super::{random_id, roll, Sandbox};
use payorch_wire::stripe::{ApiError, NextAction, PaymentIntent, RedirectToUrl};

/// A create (or a confirm of `base`, an intent made earlier) whose key (if any) was begun:
/// the charge, then the faults after it, as both protocols share them. `None`: answer a 500
/// in the protocol's own words (the charge and its answer are recorded under the key, or the
/// task failed and the key is free).
pub(super) async fn charge(
    sb: &web::Data<Sandbox>,
    params: CreateParams,
    behaviour: Option<Behaviour>,
    key: Option<String>,
    base: Option<PaymentIntent>,
) -> Option<StoredResponse> {
    let adyen = is_marked_adyen(&params.metadata);
    // A payment method's fault strikes its charge: an intent made without `confirm` is not
    // charged, so its fault waits for the confirm.
    let fault = behaviour.filter(|_| params.confirm);
    let work = execute(
        sb.clone().into_inner(),
        params,
        behaviour,
        key.clone(),
        base,
    );
    let stored = sb.run_whole("charge", key.as_deref(), work).await?;
    // Edge failures after the result was recorded: the charge stands and a resend with
    // the same key gets the recorded answer.
    if fault == Some(Behaviour::LostResponse) || roll(sb.config.lost_response_rate) {
        sb.wait_for_shutdown().await;
        return None;
    }
    // The Stripe face recorded its 500 (`execute`) and answers it as recorded.
    if fault == Some(Behaviour::ErrorAfter) && adyen {
        return None;
    }
    Some(stored)
}

/// Create the intent (or confirm `base`, an intent made earlier), charge per its behaviour,
/// record the answer under the key: on the Stripe face, the `500` of
/// `pm_sandbox_error_after`, which is the key's first result.
async fn execute(
    sb: Arc<Sandbox>,
    params: CreateParams,
    behaviour: Option<Behaviour>,
    key: Option<String>,
    base: Option<PaymentIntent>,
) -> StoredResponse {
    let cause = Some(Cause {
        request_id: random_id("req"),
        idempotency_key: key.clone(),
    });
    // A new intent, or `base` confirmed, in its place; `fill` finishes it.
    let keep = |status: &str, confirmed: bool, fill: &dyn Fn(&mut PaymentIntent)| match &base {
        Some(base) => {
            let mut intent = new_intent(base.id.clone(), &params, status);
            intent.client_secret = base.client_secret.clone();
            intent.created = base.created;
            fill(&mut intent);
            if !sb.store.restore(&intent, key.as_deref(), confirmed) {
                tracing::warn!(id = %intent.id, "sandbox intent forgotten while being confirmed");
            }
            intent
        }
        None => sb.store.create(key.as_deref(), confirmed, |id| {
            let mut intent = new_intent(id, &params, status);
            fill(&mut intent);
            intent
        }),
    };
    let stored = match (behaviour, params.payment_method.as_deref()) {
        (None, Some(token)) => stored_error(
            StatusCode::BAD_REQUEST,
            ApiError {
                kind: "invalid_request_error".into(),
                code: Some("resource_missing".into()),
                decline_code: None,
                message: Some(format!("No such PaymentMethod: '{token}'")),
                param: Some("payment_method".into()),
                payment_intent: None,
            },
        ),
        (Some(Behaviour::Decline(decline)), _) if params.confirm => {
            let intent = keep("requires_payment_method", true, &|intent| {
                intent.last_payment_error = Some(decline.last_payment_error());
            });
            sb.announce("payment_intent.payment_failed", &intent, cause.clone());
            intent_answer(intent)
        }
        (Some(Behaviour::LateApproval), _) if params.confirm => {
            // The ledger's truth: charged (or held). The answer: a soft decline.
            let manual = params.is_manual_capture();
            let booked = keep(
                if manual {
                    "requires_capture"
                } else {
                    "succeeded"
                },
                true,
                &|intent| {
                    if manual {
                        intent.amount_capturable = intent.amount;
                    } else {
                        intent.amount_received = intent.amount;
                    }
                    intent.latest_charge = Some(random_id("ch"));
                },
            );
            let said = declined_in_words(&booked);
            sb.announce("payment_intent.payment_failed", &said, cause.clone());
            schedule_late_approval(&sb, booked.id.clone());
            intent_answer(said)
        }
        (Some(Behaviour::Processing), _) if params.confirm => {
            let intent = keep("processing", true, &|_| {});
            sb.announce("payment_intent.processing", &intent, cause.clone());
            schedule_settlement(&sb, intent.id.clone());
            intent_answer(intent)
        }
        (Some(Behaviour::ThreeDSecure), _) if params.confirm => {
            // Nothing is charged until the customer passes the challenge (`challenge`).
            let intent = keep("requires_action", true, &|intent| {
                intent.next_action = challenge_action(&params, &intent.id);
            });
            sb.announce("payment_intent.requires_action", &intent, cause.clone());
            intent_answer(intent)
        }
        (Some(behaviour), _) if params.confirm => {
            if behaviour == Behaviour::Slow {
                tokio::time::sleep(sb.config.slow()).await;
            }
            let intent = if params.is_manual_capture() {
                // Authorised only: the card's money is held for the merchant to capture.
                let intent = keep("requires_capture", true, &|intent| {
                    intent.amount_capturable = intent.amount;
                    intent.latest_charge = Some(random_id("ch"));
                });
                sb.announce(
                    "payment_intent.amount_capturable_updated",
                    &intent,
                    cause.clone(),
                );
                intent
            } else {
                let intent = keep("succeeded", true, &|intent| {
                    intent.amount_received = intent.amount;
                    intent.latest_charge = Some(random_id("ch"));
                });
                sb.announce("payment_intent.succeeded", &intent, cause.clone());
                intent
            };
            intent_answer(intent)
        }
        _ => {
            // Not confirmed: an intent that waits, nothing charged, not in the ledger.
            let status = if params.payment_method.is_some() {
                "requires_confirmation"
            } else {
                "requires_payment_method"
            };
            intent_answer(keep(status, false, &|_| {}))
        }
    };
    let stored = if behaviour == Some(Behaviour::ErrorAfter)
        && params.confirm
        && !is_marked_adyen(&params.metadata)
    {
        api_error_500_answer()
    } else {
        with_nulls(stored, sb.config.null_rate)
    };
    if let Some(key) = &key {
        sb.store.finish(key, stored.clone());
    }
    stored
}

/// A `processing` intent succeeds after `--processing-ms` (or, for a manual capture, is
/// authorised), with its webhook.
fn schedule_settlement(sb: &Arc<Sandbox>, id: String) {
    let sb_task = sb.clone();
    sb.spawn(async move {
        tokio::time::sleep(sb_task.config.processing()).await;
        let manual = sb_task
            .store
            .get(&id)
            .found()
            .is_some_and(|intent| intent.capture_method == "manual");
        let (to, kind) = if manual {
            (
                "requires_capture",
                "payment_intent.amount_capturable_updated",
            )
        } else {
            ("succeeded", "payment_intent.succeeded")
        };
        if let Some(intent) = sb_task.store.transition(&id, "processing", to) {
            sb_task.announce(kind, &intent, None);
        }
    });
}

/// The decline a late approval answers, the generic soft one (Stripe `card_declined` /
/// `generic_decline`, Adyen `Refused`), about the charge the ledger books as approved.
fn declined_in_words(booked: &PaymentIntent) -> PaymentIntent {
    let decline = by_token(LATE_DECLINE).expect("the generic decline is a row of DECLINES");
    let mut said = booked.clone();
    said.status = "requires_payment_method".into();
    said.amount_received = 0;
    said.amount_capturable = 0;
    said.latest_charge = None;
    said.last_payment_error = Some(decline.last_payment_error());
    said
}

/// The token whose decline a late approval answers with.
const LATE_DECLINE: &str = "pm_card_chargeDeclined";

/// A late approval tells, after `--late-approval-ms`, what its ledger booked: the charge's
/// success (or hold) webhook, as the provider sends it when it approves after all.
fn schedule_late_approval(sb: &Arc<Sandbox>, id: String) {
    let sb_task = sb.clone();
    sb.spawn(async move {
        tokio::time::sleep(sb_task.config.late_approval()).await;
        let Some(intent) = sb_task.store.get(&id).found() else {
            return;
        };
        let kind = match intent.status.as_str() {
            "requires_capture" => "payment_intent.amount_capturable_updated",
            "succeeded" => "payment_intent.succeeded",
            // Voided or refunded before it was told: the ledger's truth is told as it is.
            _ => return,
        };
        sb_task.announce(kind, &intent, None);
    });
}

/// Stripe's `next_action` for a 3-D Secure card: the challenge page the sandbox serves at
/// the address the request reached it at, and the customer's way back.
fn challenge_action(params: &CreateParams, id: &str) -> Option<serde_json::Value> {
    let action = NextAction {
        kind: "redirect_to_url".into(),
        redirect_to_url: Some(RedirectToUrl {
            url: format!("{}{}", params.site, challenge_path(id)),
            return_url: params.return_url.clone(),
        }),
    };
    serde_json::to_value(action).ok()
}

/// The path of intent `id`'s challenge page (served by `challenge`).
pub(super) fn challenge_path(id: &str) -> String {
    format!("/__sandbox/3ds/{id}")
}

/// An intent with the store's `id` (`Store::create`).
fn new_intent(id: String, params: &CreateParams, status: &str) -> PaymentIntent {
    let client_secret = Some(format!("{id}_{}", random_id("secret")));
    PaymentIntent {
        client_secret,
        id,
        object: "payment_intent".into(),
        amount: params.amount,
        amount_received: 0,
        currency: params.currency.clone(),
        status: status.into(),
        payment_method: params.payment_method.clone(),
        metadata: params.metadata.clone(),
        last_payment_error: None,
        latest_charge: None,
        description: params.description.clone(),
        capture_method: params.capture_method.clone(),
        confirmation_method: "automatic".into(),
        created: Utc::now().timestamp(),
        livemode: false,
        payment_method_types: vec!["card".into()],
        amount_capturable: 0,
        next_action: None,
        canceled_at: None,
        cancellation_reason: None,
    }
}
