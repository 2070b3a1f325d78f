//! The Adyen face's refunds (docs/DESIGN.md, "The provider protocol"): Adyen's refund of a
//! payment over the Stripe face's refunds of the same store (`refunds::make`), so what is
//! left of a charge, the idempotency semantics, the faults and the ledger are the very same;
//! only the words differ. A refund made here is marked as made through Adyen.
//!
//! - `POST /v71/payments/{paymentPspReference}/refunds` (`X-API-Key`, `Idempotency-Key`,
//!   `{amount, merchantAccount, reference?}`: `reference` is optional in v71's
//!   `PaymentRefundRequest`) → `201` with `status: received`, as Adyen answers before it knows
//!   the outcome; a replay answers the first answer again. A `422` for what Adyen validates
//!   (a field v71 does not define, `702`; a currency that is not ISO 4217's, `138`; a payment
//!   not made through this face, another currency or merchant account than the payment's,
//!   more than is left); a `500` for the edge faults.
//! - No lookup: v71 has no endpoint to look a refund up by; its outcome comes in the
//!   notification (`/__sandbox/ledger` has it for tests).
//! - Notifications: `REFUND`, `success` `true` once the money went back, `false` when the
//!   refund failed; nothing while it is pending, as Adyen says nothing until it knows. Its
//!   `merchantReference` is the refund's `reference`, or, for a refund without one, the
//!   payment's.
//!
//! Faults: Adyen's refund request has no field for free text (`merchantRefundReason` is an
//! enum, and Adyen refuses unknown fields), so payorch's adapter sends no reason and a refund
//! cannot name its fault as it does on the Stripe face. Adyen's own test platform chooses a
//! failing refund by the payment's details instead, and so does this face: a payment whose
//! `storedPaymentMethodId` ends in `+sandbox_<fault>` (see `adyen`) gives each of its refunds
//! that fault.

use std::collections::BTreeMap;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;

use super::adyen::{
    begin_keyed, delivery, forgotten_payment, parse, payment, refuse_currency, refuse_unauthorized,
    server_error, validation, MERCHANT_ACCOUNT, REFUND_FAULT,
};
use super::answers::replayed;
use super::config::SandboxConfig;
use super::protocol::PROTOCOL;
use super::refunds::{make, Fault, RefundParams};
use super::store::{Lookup, Replay, StoredResponse};
use super::{roll, Sandbox};
use payorch_wire::adyen::REFUND;
use payorch_wire::adyen::{Amount, RefundResponse};
use payorch_wire::stripe::{ErrorBody, Refund};

/// The refund metadata key of payorch's refund id (the request's `reference`), which the
/// ledger reads as the Stripe face's refunds carry it.
const REFERENCE: &str = "refund_id";
/// The refund metadata key of the refunded payment's `reference`: the notification's
/// `merchantReference` for a refund that has none of its own.
const PAYMENT_REFERENCE: &str = "sandbox_payment_reference";

/// `PaymentRefundRequest` as far as the sandbox reads it (`adyen_schema` has refused any
/// field v71 does not define): `reference` is optional.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RefundRequest {
    amount: Amount,
    merchant_account: String,
    #[serde(default)]
    reference: Option<String>,
}

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v71/payments/{psp}/refunds", web::post().to(create_refund));
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
    if let Some(refused) = refuse_currency(&request.amount.currency) {
        return refused;
    }
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
    let mut metadata = BTreeMap::from([
        (PROTOCOL.to_owned(), "adyen".to_owned()),
        (MERCHANT_ACCOUNT.to_owned(), request.merchant_account),
    ]);
    if let Some(reference) = request.reference {
        metadata.insert(REFERENCE.to_owned(), reference);
    }
    if let Some(reference) = payment.metadata.get("attempt_id") {
        metadata.insert(PAYMENT_REFERENCE.to_owned(), reference.clone());
    }
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

/// A refund's outcome so far: `pending` until the notification can tell one.
fn status_now(refund: &Refund) -> &'static str {
    match refund.status.as_str() {
        "succeeded" => "succeeded",
        "failed" | "canceled" => "failed",
        _ => "pending",
    }
}

/// The signed `REFUND` notification of `refund` as it is now; `None` while it is pending.
pub(super) fn notification(config: &SandboxConfig, refund: &Refund) -> Option<Vec<u8>> {
    let success = match status_now(refund) {
        "succeeded" => "true",
        "failed" => "false",
        _ => return None,
    };
    let text = |key: &str| refund.metadata.get(key).cloned().unwrap_or_default();
    let reference = refund
        .metadata
        .get(REFERENCE)
        .or_else(|| refund.metadata.get(PAYMENT_REFERENCE))
        .cloned()
        .unwrap_or_default();
    let item = json!({
        "additionalData": {},
        "amount": {"value": refund.amount, "currency": refund.currency.to_ascii_uppercase()},
        "eventCode": REFUND,
        "eventDate": Utc::now().to_rfc3339(),
        "merchantAccountCode": text(MERCHANT_ACCOUNT),
        // payorch's refund id: what payorch applies the notification to; for a refund
        // without a reference of its own, the payment's.
        "merchantReference": reference,
        "originalReference": refund.payment_intent.clone().unwrap_or_default(),
        "pspReference": refund.id,
        "paymentMethod": "visa",
        "reason": refund.failure_reason.clone().unwrap_or_default(),
        "success": success,
    });
    delivery(config, item)
}
