//! The Adyen face's refunds (docs/DESIGN.md, "The provider protocol"): Adyen's refund of a
//! payment over the Stripe face's refunds of the same store (`refunds::make`), so what is
//! left of a charge, the idempotency semantics, the faults and the ledger are the very same;
//! only the words differ. A refund made here is marked as made through Adyen.
//!
//! - `POST /v71/payments/{paymentPspReference}/refunds` (`X-API-Key`, `Idempotency-Key`,
//!   `{amount, reference, merchantAccount}`) → `201` with `status: received`, as Adyen
//!   answers before it knows the outcome; a replay answers the first answer again. A `422`
//!   for what Adyen validates (a payment not made through this face, another currency or
//!   merchant account than the payment's, more than is left); a `500` for the edge faults.
//! - `GET /v71/refunds/{pspReference}`, `GET /v71/payments/{paymentPspReference}/refunds
//!   ?reference=…`: the status checks payorch's adapter makes (Adyen itself offers none; see
//!   docs/DESIGN.md), answering the refund's status now: `pending`, `succeeded` or `failed`.
//! - Notifications: `REFUND`, `success` `true` once the money went back, `false` when the
//!   refund failed; nothing while it is pending, as Adyen says nothing until it knows.
//!
//! Faults: Adyen's refund request has no field for free text (`merchantRefundReason` is an
//! enum, and Adyen refuses unknown fields), so payorch's adapter sends no reason and a refund
//! cannot name its fault as it does on the Stripe face. Adyen's own test platform chooses a
//! failing refund by the payment's details instead, and so does this face: a payment whose
//! `storedPaymentMethodId` ends in `+sandbox_<fault>` (see `adyen`) gives each of its refunds
//! that fault.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;

use super::adyen::{
    begin_keyed, delivery, error, forgotten_payment, gone, parse, payment, refuse_unauthorized,
    server_error, validation, MERCHANT_ACCOUNT, REFUND_FAULT,
};
use super::answers::replayed;
use super::config::SandboxConfig;
use super::protocol::{is_marked_adyen, PROTOCOL};
use super::refunds::{make, Fault, RefundParams};
use super::store::{Lookup, Replay, StoredResponse};
use super::{roll, Sandbox};
use payorch_wire::adyen::REFUND;
use payorch_wire::adyen::{Amount, RefundList, RefundRequest, RefundResponse};
use payorch_wire::stripe::{ErrorBody, Refund};

/// The refund metadata key of payorch's refund id (the request's `reference`), which the
/// ledger reads as the Stripe face's refunds carry it.
const REFERENCE: &str = "refund_id";

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v71/payments/{psp}/refunds", web::post().to(create_refund))
        .route("/v71/payments/{psp}/refunds", web::get().to(find_refunds))
        .route("/v71/refunds/{psp}", web::get().to(get_refund));
}

async fn create_refund(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    psp: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    if roll(sb.config.error_rate) {
        return server_error();
    }
    let (request, json) = match parse::<RefundRequest>(&body, "PaymentRefundRequest") {
        Ok(parsed) => parsed,
        Err(refused) => return *refused,
    };
    let payment = match payment(&sb, &psp) {
        Lookup::Found(payment) => payment,
        // Adyen's refusal: nothing was refunded, which is true of this request.
        Lookup::Forgotten => {
            let message = format!("{} Nothing was refunded.", forgotten_payment(&sb, &psp));
            return validation("167", &message);
        }
        Lookup::Missing => {
            let message = format!(
                "Original pspReference required for this operation: refund a payment made \
                 through this API ({psp} is none)"
            );
            return validation("167", &message);
        }
    };
    let account = payment.metadata.get(MERCHANT_ACCOUNT);
    if account != Some(&request.merchant_account) {
        return validation(
            "901",
            "Invalid Merchant Account: refund under the account the payment was made for",
        );
    }
    if request.amount.value < 1
        || !request
            .amount
            .currency
            .eq_ignore_ascii_case(&payment.currency)
    {
        return validation(
            "137",
            &format!(
                "Invalid amount specified: a positive value in the payment's currency ({})",
                payment.currency.to_ascii_uppercase()
            ),
        );
    }
    let fault = payment
        .metadata
        .get(REFUND_FAULT)
        .and_then(|token| Fault::from_token(token));
    if fault == Some(Fault::ErrorBefore) {
        return server_error();
    }
    let metadata = BTreeMap::from([
        (REFERENCE.to_owned(), request.reference),
        (PROTOCOL.to_owned(), "adyen".to_owned()),
        (MERCHANT_ACCOUNT.to_owned(), request.merchant_account),
    ]);
    let params = RefundParams {
        // The payment is part of the request: the same body for another payment is another.
        fingerprint: format!("{psp} {json}"),
        payment_intent: psp.into_inner(),
        amount: Some(request.amount.value),
        reason: None,
        metadata,
        fault,
    };
    let replay = |replay: Replay, _: &str| answer(&replayed(replay));
    let key = match begin_keyed(&sb, &req, &params.fingerprint, replay) {
        Ok(key) => key,
        Err(refused) => return *refused,
    };
    match make(&sb, params, key).await {
        Some(stored) => answer(&stored),
        None => server_error(),
    }
}

/// The Adyen answer to a refund recorded in the Stripe face's words: `201 received` for a
/// refund made, whatever became of it since, as a replay must answer what the first request
/// was answered.
fn answer(stored: &StoredResponse) -> HttpResponse {
    if stored.status >= 500 {
        return server_error();
    }
    if let Ok(refund) = serde_json::from_slice::<Refund>(&stored.body) {
        return HttpResponse::Created().json(refund_response(&refund, "received"));
    }
    let refused = serde_json::from_slice::<ErrorBody>(&stored.body)
        .map(|body| body.error)
        .ok();
    let code = match refused.as_ref().and_then(|e| e.code.as_deref()) {
        Some("amount_too_large" | "charge_already_refunded") => "137",
        _ => "167",
    };
    let message = refused
        .and_then(|e| e.message)
        .unwrap_or_else(|| "the refund was refused".to_owned());
    validation(code, &message)
}

/// A refund as Adyen's refund response shows it, with `status`.
fn refund_response(refund: &Refund, status: &str) -> RefundResponse {
    RefundResponse {
        status: status.to_owned(),
        psp_reference: Some(refund.id.clone()),
        payment_psp_reference: refund.payment_intent.clone(),
        reference: refund.metadata.get(REFERENCE).cloned(),
        merchant_account: refund.metadata.get(MERCHANT_ACCOUNT).cloned(),
        amount: Some(Amount {
            value: refund.amount,
            currency: refund.currency.to_ascii_uppercase(),
        }),
    }
}

/// A refund's status now, in the words payorch's adapter reads from the status checks.
fn status_now(refund: &Refund) -> &'static str {
    match refund.status.as_str() {
        "succeeded" => "succeeded",
        "failed" | "canceled" => "failed",
        _ => "pending",
    }
}

/// The Adyen face's refund `psp`.
fn adyen_refund(sb: &Sandbox, psp: &str) -> Lookup<Refund> {
    match sb.store.get_refund(psp) {
        Lookup::Found(refund) if is_marked_adyen(&refund.metadata) => Lookup::Found(refund),
        Lookup::Found(_) | Lookup::Missing => Lookup::Missing,
        Lookup::Forgotten => Lookup::Forgotten,
    }
}

async fn get_refund(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    psp: web::Path<String>,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    match adyen_refund(&sb, &psp) {
        Lookup::Found(refund) => {
            HttpResponse::Ok().json(refund_response(&refund, status_now(&refund)))
        }
        Lookup::Forgotten => gone(&format!(
            "The sandbox no longer keeps refund {psp}: it keeps the last {} (--keep-intents).",
            sb.store.window().intents
        )),
        Lookup::Missing => error(
            StatusCode::NOT_FOUND,
            "refund_not_found",
            "no such refund",
            "validation",
        ),
    }
}

#[derive(Deserialize)]
struct FindParams {
    reference: Option<String>,
}

/// The payment's refunds (newest first) whose `reference` is the one asked for, or all of
/// them. An unknown payment is a `404`, never an empty list: the adapter reads an empty list
/// as "no such refund", which only a payment that exists can prove.
async fn find_refunds(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    psp: web::Path<String>,
    params: web::Query<FindParams>,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    let refunds = match payment(&sb, &psp) {
        Lookup::Found(_) => sb.store.refunds_of_intent(&psp),
        Lookup::Forgotten => Lookup::Forgotten,
        Lookup::Missing => Lookup::Missing,
    };
    let refunds = match refunds {
        Lookup::Found(refunds) => refunds,
        // Some of its refunds may be missing from a list now: no list rather than a short one.
        Lookup::Forgotten => return gone(&forgotten_payment(&sb, &psp)),
        Lookup::Missing => {
            return error(
                StatusCode::NOT_FOUND,
                "payment_not_found",
                "no such payment",
                "validation",
            )
        }
    };
    let data = refunds
        .iter()
        .filter(|refund| is_marked_adyen(&refund.metadata))
        .filter(|refund| {
            params.reference.is_none()
                || refund.metadata.get(REFERENCE) == params.reference.as_ref()
        })
        .map(|refund| refund_response(refund, status_now(refund)))
        .collect();
    HttpResponse::Ok().json(RefundList { data })
}

/// The signed `REFUND` notification of `refund` as it is now; `None` while it is pending.
pub(super) fn notification(config: &SandboxConfig, refund: &Refund) -> Option<Vec<u8>> {
    let success = match status_now(refund) {
        "succeeded" => "true",
        "failed" => "false",
        _ => return None,
    };
    let text = |key: &str| refund.metadata.get(key).cloned().unwrap_or_default();
    let item = json!({
        "additionalData": {},
        "amount": {"value": refund.amount, "currency": refund.currency.to_ascii_uppercase()},
        "eventCode": REFUND,
        "eventDate": Utc::now().to_rfc3339(),
        "merchantAccountCode": text(MERCHANT_ACCOUNT),
        // payorch's refund id: what payorch applies the notification to.
        "merchantReference": text(REFERENCE),
        "originalReference": refund.payment_intent.clone().unwrap_or_default(),
        "pspReference": refund.id,
        "paymentMethod": "visa",
        "reason": refund.failure_reason.clone().unwrap_or_default(),
        "success": success,
    });
    delivery(config, item)
}
