//! The Adyen face's captures and cancels (docs/DESIGN.md, "The provider protocol"), made by
//! `modify` over the one store, as the Stripe face's are; only the words differ. Adyen
//! answers a modification before it makes it, so each request that names a payment of this
//! face is answered `201` with `status: received` and its own `pspReference`, and the outcome
//! comes as a signed notification whose `originalReference` is the payment's and whose
//! `merchantReference` is the payment's `reference`:
//!
//! - `POST /v71/payments/{paymentPspReference}/captures` (`merchantAccount`, `amount`,
//!   `reference`): `CAPTURE`, `success` `true` when the payment was held
//!   (`additionalData.manualCapture`) and the amount is within the hold, else `false`.
//! - `POST /v71/payments/{paymentPspReference}/cancels` (`merchantAccount`, `reference`):
//!   `CANCELLATION`, `true` for a payment not captured (Adyen's docs, "Cancel": authorised and
//!   held, or still waiting for its shopper's 3-D Secure challenge, or `Received`), `false`
//!   with a `reason` for one captured ("it can be refunded, not cancelled"), refused or
//!   cancelled already.
//! - `POST /v71/cancels` (`merchantAccount`, `paymentReference`, `reference`): the technical
//!   cancel, for a merchant who never got the payment's `pspReference` (a lost answer, a
//!   shopper sent to a challenge). Adyen's v71 answers it `201` with `status: received`,
//!   `pspReference` (the cancel's own), `paymentReference`, `merchantAccount` and the request's
//!   `reference` if any, before it looks for the payment, and tells the outcome in a
//!   `TECHNICAL_CANCEL` notification (Adyen's API reference, "Cancel an authorised payment"):
//!   for the payment made with that `reference` (the newest, should there be several), the
//!   same outcome as a cancel by `pspReference`, with `originalReference` the payment's
//!   `pspReference`, `amount` the payment's. When no payment was made with the reference,
//!   the cancel is taken all the same (Adyen cannot refuse what it has not looked up yet)
//!   and told `false`, "no payment was made with this reference", without an
//!   `originalReference` and with `amount` `{"value": 0, "currency": "EUR"}` (the item must
//!   carry an amount, Webhooks-v1's `NotificationRequestItem`; nothing was authorised, and the
//!   sandbox's merchant accounts are EUR accounts). That `false` says only that no payment
//!   had been made with the reference when the cancel was looked at: a `/payments` request
//!   with it that arrives later is not stopped, so a merchant sends its technical cancel
//!   once it will send no more.
//!
//! What Adyen validates before it answers is a `422`: a field the v71 schema does not define
//! (`702`), an amount whose currency is not an ISO 4217 code (`138`), a payment not made
//! through this face, another merchant account, an amount that is not positive, in another
//! currency, or above what was authorised. `Idempotency-Key` is honoured as on `/payments`;
//! `--error-rate`, `--lost-response-rate`, `--latency-ms` and the `pm_sandbox_capture_*`
//! faults apply.

use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::Utc;
use serde_json::json;

use super::adyen::{
    begin_keyed, delivery, forgotten_payment, gone, parse, payment, refuse_currency,
    refuse_unauthorized, server_error, validation, MERCHANT_ACCOUNT,
};
use super::answers::stored_json;
use super::config::SandboxConfig;
use super::kept::KeptIntent;
use super::modification::{Kind, Modification};
use super::modify::{fails_before, run, Verdict};
use super::protocol::PROTOCOL;
use super::store::{Ask, Lookup, Modified, Replay, StoredResponse, ADYEN_CANCELABLE};
use super::{random_id, roll, Sandbox};
use payorch_wire::adyen::{
    Amount, CancelRequest, CaptureRequest, ModificationResponse, StandaloneCancelRequest,
    CANCELLATION, CAPTURE, TECHNICAL_CANCEL,
};
use payorch_wire::stripe::PaymentIntent;

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v71/payments/{psp}/captures", web::post().to(capture))
        .route("/v71/payments/{psp}/cancels", web::post().to(cancel))
        .route("/v71/cancels", web::post().to(cancel_by_reference));
}

async fn capture(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    psp: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    if let Some(refused) = edge(&sb, &req).await {
        return refused;
    }
    let (request, json) = match parse::<CaptureRequest>(&body, "PaymentCaptureRequest") {
        Ok(parsed) => parsed,
        Err(refused) => return *refused,
    };
    let payment = match made_here(&sb, &psp, &request.merchant_account) {
        Ok(payment) => payment,
        Err(refused) => return *refused,
    };
    let amount = request.amount;
    if let Some(refused) = refuse_currency(&amount.currency) {
        return refused;
    }
    if amount.value < 1 || !amount.currency.eq_ignore_ascii_case(&payment.currency) {
        return validation(
            "137",
            &format!(
                "Invalid amount specified: a positive value in the payment's currency ({})",
                payment.currency.to_ascii_uppercase()
            ),
        );
    }
    if amount.value > payment.amount {
        return validation(
            "137",
            &format!(
                "Invalid amount specified: more than the {} authorised",
                payment.amount
            ),
        );
    }
    let ask = Ask {
        kind: Kind::Capture,
        amount: Some(amount.value),
        reason: None,
        psp: Some(random_id("cap")),
        key: None,
        reference: request.reference,
        keep_refused: true,
        cancelable: ADYEN_CANCELABLE,
    };
    modify(&sb, &req, &payment, format!("capture {psp} {json}"), ask).await
}

async fn cancel(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    psp: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    if let Some(refused) = edge(&sb, &req).await {
        return refused;
    }
    let (request, json) = match parse::<CancelRequest>(&body, "PaymentCancelRequest") {
        Ok(parsed) => parsed,
        Err(refused) => return *refused,
    };
    let payment = match made_here(&sb, &psp, &request.merchant_account) {
        Ok(payment) => payment,
        Err(refused) => return *refused,
    };
    let ask = cancel_ask(Kind::Cancel, request.reference);
    modify(&sb, &req, &payment, format!("cancel {psp} {json}"), ask).await
}

async fn cancel_by_reference(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    body: Bytes,
) -> HttpResponse {
    if let Some(refused) = edge(&sb, &req).await {
        return refused;
    }
    let parsed = parse::<StandaloneCancelRequest>(&body, "StandalonePaymentCancelRequest");
    let (request, json) = match parsed {
        Ok(parsed) => parsed,
        Err(refused) => return *refused,
    };
    let fingerprint = format!("technical cancel {json}");
    let made_with = |intent: &KeptIntent| {
        intent.metadata(PROTOCOL) == Some("adyen")
            && intent.metadata("attempt_id") == Some(request.payment_reference.as_str())
    };
    // Newest first: a reference names one payment, made once whatever its resends.
    let (found, _) = sb.store.search(made_with, 0, 1);
    let Some(payment) = found.into_iter().next() else {
        if sb.store.forgotten().intents > 0 {
            return gone(&format!(
                "No payment kept has reference {}, but the sandbox has forgotten some, any \
                 of which could: it cannot say that none does (--keep-intents).",
                request.payment_reference
            ));
        }
        return nothing_to_cancel(&sb, &req, request, &fingerprint);
    };
    if let Some(refused) = other_account(&payment, &request.merchant_account) {
        return refused;
    }
    let ask = cancel_ask(Kind::TechnicalCancel, request.reference);
    modify(&sb, &req, &payment, fingerprint, ask).await
}

fn cancel_ask(kind: Kind, reference: Option<String>) -> Ask {
    Ask {
        kind,
        amount: None,
        reason: None,
        psp: Some(random_id("void")),
        key: None,
        reference,
        keep_refused: true,
        cancelable: ADYEN_CANCELABLE,
    }
}

/// The API key, the latency and `--error-rate`, as every route of the face has them.
async fn edge(sb: &Sandbox, req: &HttpRequest) -> Option<HttpResponse> {
    if let Some(refused) = refuse_unauthorized(sb, req) {
        return Some(refused);
    }
    tokio::time::sleep(sb.config.latency()).await;
    // Edge failure before the API saw the request: nothing done, a retry runs afresh.
    roll(sb.config.error_rate).then(server_error)
}

/// The payment `psp` made through this face for `account`; else Adyen's refusal.
fn made_here(sb: &Sandbox, psp: &str, account: &str) -> Result<PaymentIntent, Box<HttpResponse>> {
    let payment = match payment(sb, psp) {
        Lookup::Found(payment) => payment,
        Lookup::Forgotten => {
            let message = format!("{} Nothing was done.", forgotten_payment(sb, psp));
            return Err(Box::new(validation("167", &message)));
        }
        Lookup::Missing => {
            let message = format!(
                "Original pspReference required for this operation: name a payment made \
                 through this API ({psp} is none)"
            );
            return Err(Box::new(validation("167", &message)));
        }
    };
    match other_account(&payment, account) {
        Some(refused) => Err(Box::new(refused)),
        None => Ok(payment),
    }
}

fn other_account(payment: &PaymentIntent, account: &str) -> Option<HttpResponse> {
    (payment.metadata.get(MERCHANT_ACCOUNT).map(String::as_str) != Some(account)).then(|| {
        validation(
            "901",
            "Invalid Merchant Account: modify under the account the payment was made for",
        )
    })
}

/// Takes the key, asks the store, answers `201 received` (recorded under the key), with the
/// faults around it.
async fn modify(
    sb: &web::Data<Sandbox>,
    req: &HttpRequest,
    payment: &PaymentIntent,
    fingerprint: String,
    ask: Ask,
) -> HttpResponse {
    if fails_before(sb, payment) {
        return server_error();
    }
    let replay = |replay: Replay, key: &str| replayed(sb, replay, key);
    let key = match begin_keyed(sb, req, &fingerprint, replay) {
        Ok(key) => key,
        Err(refused) => return *refused,
    };
    let ask = Ask { key, ..ask };
    match run(sb, &payment.id, ask, verdict).await {
        Some(stored) => respond(&stored),
        None => server_error(),
    }
}

/// Adyen's answer: `received`, whatever the outcome the notification will tell.
fn verdict(modified: &Lookup<Modified>) -> Verdict {
    match modified {
        Lookup::Found(m) => Verdict::Record(stored_json(
            StatusCode::CREATED,
            &response(&m.intent, &m.modification),
        )),
        // Forgotten since it was looked up a moment ago: nothing was done.
        Lookup::Forgotten | Lookup::Missing => Verdict::Refuse(stored_json(
            StatusCode::UNPROCESSABLE_ENTITY,
            &json!({
                "status": 422,
                "errorCode": "167",
                "message": "The sandbox no longer keeps this payment: nothing was done.",
                "errorType": "validation",
            }),
        )),
    }
}

/// A replay of key `key`: the answer recorded, or, once that is no longer kept, the same
/// answer made again from the capture or cancel the key made.
fn replayed(sb: &Sandbox, replay: Replay, key: &str) -> HttpResponse {
    match replay {
        Replay::Recorded(stored) => respond(&stored),
        Replay::Intent(intent) => match sb.store.modification_by_key(&intent.id, key) {
            Some(m) => HttpResponse::Created().json(response(&intent, &m)),
            None => server_error(),
        },
        Replay::Failed | Replay::Refund(_) => server_error(),
    }
}

fn respond(stored: &StoredResponse) -> HttpResponse {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    HttpResponse::build(status)
        .content_type("application/json")
        .body(stored.body.clone())
}

/// A capture's or cancel's `201` answer.
fn response(payment: &PaymentIntent, m: &Modification) -> ModificationResponse {
    let (payment_psp_reference, payment_reference) = match m.kind {
        Kind::TechnicalCancel => (None, payment.metadata.get("attempt_id").cloned()),
        Kind::Capture | Kind::Cancel => (Some(payment.id.clone()), None),
    };
    ModificationResponse {
        status: "received".into(),
        psp_reference: m.psp.clone().unwrap_or_default(),
        merchant_account: payment
            .metadata
            .get(MERCHANT_ACCOUNT)
            .cloned()
            .unwrap_or_default(),
        payment_psp_reference,
        payment_reference,
        reference: m.reference.clone(),
        amount: (m.kind == Kind::Capture).then(|| Amount {
            value: m.amount,
            currency: payment.currency.to_ascii_uppercase(),
        }),
    }
}

/// `POST /v71/cancels` for a reference no payment was made with: taken, as Adyen takes it
/// before it looks, and told `false` in its notification (the module's docs say why, and
/// what the notification carries).
fn nothing_to_cancel(
    sb: &Sandbox,
    req: &HttpRequest,
    request: StandaloneCancelRequest,
    fingerprint: &str,
) -> HttpResponse {
    let replay = |replay: Replay, _: &str| match replay {
        Replay::Recorded(stored) => respond(&stored),
        Replay::Failed | Replay::Intent(_) | Replay::Refund(_) => server_error(),
    };
    let key = match begin_keyed(sb, req, fingerprint, replay) {
        Ok(key) => key,
        Err(refused) => return *refused,
    };
    let answer = ModificationResponse {
        status: "received".into(),
        psp_reference: random_id("void"),
        merchant_account: request.merchant_account.clone(),
        payment_psp_reference: None,
        payment_reference: Some(request.payment_reference.clone()),
        reference: request.reference,
        amount: None,
    };
    let item = json!({
        "additionalData": {},
        // Required in every item (Webhooks-v1), and signed: nothing was authorised.
        "amount": {"value": 0, "currency": NO_PAYMENT_CURRENCY},
        "eventCode": TECHNICAL_CANCEL,
        "eventDate": Utc::now().to_rfc3339(),
        "merchantAccountCode": request.merchant_account,
        "merchantReference": request.payment_reference,
        "pspReference": answer.psp_reference,
        "reason": "No payment was made with this reference",
        "success": "false",
    });
    if let Some(body) = delivery(&sb.config, item) {
        sb.notifications.send(body);
    }
    let stored = stored_json(StatusCode::CREATED, &answer);
    if let Some(key) = &key {
        sb.store.finish(key, stored.clone());
    }
    respond(&stored)
}

/// The currency of the sandbox's merchant accounts: that of the zero amount a notification
/// about no payment carries.
const NO_PAYMENT_CURRENCY: &str = "EUR";

/// The signed notification of what capture or cancel `m` of `payment` came to.
pub(super) fn notification(
    config: &SandboxConfig,
    payment: &PaymentIntent,
    m: &Modification,
) -> Option<Vec<u8>> {
    let (event_code, amount) = match m.kind {
        Kind::Capture => (CAPTURE, m.amount),
        Kind::Cancel => (CANCELLATION, payment.amount),
        Kind::TechnicalCancel => (TECHNICAL_CANCEL, payment.amount),
    };
    let text = |key: &str| payment.metadata.get(key).cloned().unwrap_or_default();
    let item = json!({
        "additionalData": {},
        "amount": {"value": amount, "currency": payment.currency.to_ascii_uppercase()},
        "eventCode": event_code,
        "eventDate": Utc::now().to_rfc3339(),
        "merchantAccountCode": text(MERCHANT_ACCOUNT),
        // For a modification Adyen names the payment by the merchant's own reference.
        "merchantReference": text("attempt_id"),
        "originalReference": payment.id,
        "pspReference": m.psp.clone().unwrap_or_default(),
        "paymentMethod": "visa",
        "reason": if m.succeeded { String::new() } else { m.reason.clone().unwrap_or_default() },
        "success": if m.succeeded { "true" } else { "false" },
    });
    delivery(config, item)
}
