//! The sandbox's Adyen face (docs/DESIGN.md, "The provider protocol"): Adyen's Checkout API
//! v71 over the same charges as the Stripe face. A payment here is a confirmed intent in the
//! one store, marked as made through Adyen, so the fault tokens (as
//! `paymentMethod.storedPaymentMethodId`), the idempotency semantics and the ledger are the
//! very same; only the words differ. Its answers are made from the intent as it is, so a
//! replay under a key answers what the first request was answered.
//!
//! - `POST /v71/payments` (`X-API-Key`, `Idempotency-Key`) → `resultCode` `Authorised`,
//!   `Refused` (with `refusalReason`), `Received` (processing), `RedirectShopper` (a 3-D
//!   Secure card: its `action` sends the shopper to the challenge page, `challenge`, which
//!   sends them back to `returnUrl` with a `redirectResult` for `adyen_details`); a 500 for
//!   the edge faults. `additionalData.manualCapture: "true"` authorises only: the money is
//!   held until a capture or cancel (`adyen_modifications`). `authenticationData.
//!   attemptAuthentication: "always"` asks for 3-D Secure (`three_d_secure`).
//! - Refunds: `adyen_refunds`.
//! - Nothing to look a payment or a refund up by: Checkout API v71 has no such endpoint, and
//!   neither has this face. What a merchant learns comes from the answers, the same-key
//!   resends and the notifications; `/__sandbox/ledger` is the tests' truth. Any other
//!   `/v71/…` request is answered as Adyen answers an endpoint it does not have
//!   ([`unknown_endpoint`]).
//!
//! What Adyen validates before it does anything is a `422` in Adyen's `ServiceError` shape: a
//! field the v71 schema does not define, at any depth (`702`, `adyen_schema`); an
//! `amount.currency` that is not an ISO 4217 code (`138`, `currency`); an amount that is not
//! positive (`137`).
//! - Notifications: `AUTHORISATION` (success `true`/`false`) to `--adyen-notification-url`,
//!   each item signed with Adyen's HMAC under `--adyen-hmac-key`; a 3-D Secure payment's once
//!   the shopper passed or failed the challenge.
//!
//! A `storedPaymentMethodId` may carry a refund fault after a `+`
//! (`pm_card_visa+sandbox_lost_response`): the payment is made as its token says, and each of
//! its refunds gets that fault (`adyen_refunds` says why the payment carries it).

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use super::adyen_schema;
use super::answers::{replayed, FORGOTTEN};
use super::behaviour::Behaviour;
use super::charges::charge;
use super::config::SandboxConfig;
use super::currency::is_iso4217;
use super::declines::{by_stripe, AdyenRefusal};
use super::mix::Face;
use super::mix_control::{dropped, refused_keyed};
use super::params::{site, CreateParams};
use super::protocol::{is_marked_adyen, PROTOCOL};
use super::refunds::Fault;
use super::roll;
use super::store::{Begin, Lookup, Replay, StoredResponse};
use super::three_d_secure;
use super::Sandbox;
use payorch_wire::adyen::Action;
use payorch_wire::adyen_hmac::sign_item;
use payorch_wire::stripe::{ErrorBody, NextAction, PaymentIntent};

/// The merchant account a payment (or a refund) was made for, kept for its notifications.
pub(super) const MERCHANT_ACCOUNT: &str = "sandbox_merchant_account";
/// The refund fault a payment's `storedPaymentMethodId` named after its `+`.
pub(super) const REFUND_FAULT: &str = "sandbox_refund_fault";

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v71/payments", web::post().to(create_payment));
}

/// Whether `intent` was made through the Adyen face.
pub(super) fn is_adyen(intent: &PaymentIntent) -> bool {
    is_marked_adyen(&intent.metadata)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PaymentRequest {
    amount: AmountJson,
    reference: String,
    merchant_account: String,
    payment_method: PaymentMethodJson,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    /// `manualCapture`: `"true"` (Adyen's values are text) authorises only.
    #[serde(default)]
    additional_data: BTreeMap<String, Value>,
    /// Where the challenge sends the shopper back.
    #[serde(default)]
    return_url: Option<String>,
    /// `attemptAuthentication: "always"` asks for 3-D Secure (`three_d_secure`).
    #[serde(default)]
    authentication_data: Option<AuthenticationDataJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthenticationDataJson {
    #[serde(default)]
    attempt_authentication: Option<String>,
}

impl PaymentRequest {
    /// Whether the payment asks for 3-D Secure whatever Adyen's own rules would decide.
    fn asks_for_three_d_secure(&self) -> bool {
        self.authentication_data
            .as_ref()
            .and_then(|a| a.attempt_authentication.as_deref())
            == Some("always")
    }

    fn is_manual_capture(&self) -> bool {
        matches!(
            self.additional_data.get("manualCapture"),
            Some(Value::String(text)) if text == "true"
        ) || self.additional_data.get("manualCapture") == Some(&Value::Bool(true))
    }
}

#[derive(Deserialize)]
struct AmountJson {
    value: i64,
    currency: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PaymentMethodJson {
    #[serde(default)]
    stored_payment_method_id: Option<String>,
}

async fn create_payment(sb: web::Data<Sandbox>, req: HttpRequest, body: Bytes) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    if roll(sb.config.error_rate) {
        return server_error();
    }
    let (request, fingerprint) = match parse::<PaymentRequest>(&body, "PaymentRequest") {
        Ok(parsed) => parsed,
        Err(refused) => return *refused,
    };
    if let Some(refused) = refuse_currency(&request.amount.currency) {
        return refused;
    }
    if request.amount.value < 1 || request.merchant_account.is_empty() {
        return validation("137", "Invalid amount or merchant account");
    }
    let Some(stored_id) = request.payment_method.stored_payment_method_id.clone() else {
        return validation(
            "129",
            "paymentMethod.storedPaymentMethodId is required here",
        );
    };
    let (token, refund_fault) = match stored_id.split_once('+') {
        Some((token, fault)) => (token.to_owned(), Some(fault.to_owned())),
        None => (stored_id, None),
    };
    if let Some(fault) = refund_fault
        .as_deref()
        .filter(|f| Fault::from_token(f).is_none())
    {
        return validation(
            "803",
            &format!(
                "No such refund fault: {fault}; after the `+` name one of {}",
                Fault::tokens()
            ),
        );
    }
    let behaviour = Behaviour::for_payment_method(&token);
    let Some(behaviour) = behaviour else {
        return validation("803", &format!("No such stored payment method: {token}"));
    };
    let three_d_secure = request.asks_for_three_d_secure();
    let behaviour = three_d_secure::met(sb.mixed(Face::Adyen, &req, behaviour), three_d_secure);
    if behaviour == Behaviour::ErrorBefore {
        return server_error();
    }
    let capture_method = if request.is_manual_capture() {
        "manual"
    } else {
        "automatic"
    };
    let mut metadata = request.metadata;
    metadata.insert("attempt_id".into(), request.reference.clone());
    metadata.insert(PROTOCOL.into(), "adyen".into());
    metadata.insert(MERCHANT_ACCOUNT.into(), request.merchant_account.clone());
    if let Some(fault) = refund_fault {
        metadata.insert(REFUND_FAULT.into(), fault);
    }
    let params = CreateParams {
        amount: request.amount.value,
        currency: request.amount.currency.to_ascii_lowercase(),
        payment_method: Some(token),
        confirm: true,
        description: None,
        metadata,
        capture_method: capture_method.to_owned(),
        return_url: request.return_url,
        three_d_secure,
        site: site(&req),
        fingerprint,
    };
    let replay = |replay: Replay, _: &str| answer(&replayed(replay));
    let key = match begin_keyed(&sb, &req, &params.fingerprint, replay) {
        Ok(key) => key,
        Err(refused) => return *refused,
    };
    if behaviour == Behaviour::Refused {
        return refused_keyed(&sb, key.as_deref(), refused_adyen);
    }
    match charge(&sb, params, Some(behaviour), key, None).await {
        Some(_) if behaviour == Behaviour::DroppedResponse => dropped(),
        Some(stored) => answer(&stored),
        None => server_error(),
    }
}

/// The body as a `T`, the v71 schema `name` (`PaymentRequest`, …), and its fingerprint:
/// serde_json's maps are sorted, so the same JSON in any key order is the same request. A
/// body that is not JSON, has a field the schema does not define (`adyen_schema`), or does
/// not read as a `T` is Adyen's `702`.
pub(super) fn parse<T: serde::de::DeserializeOwned>(
    body: &[u8],
    name: &str,
) -> Result<(T, String), Box<HttpResponse>> {
    let invalid = |e: serde_json::Error| {
        Box::new(validation(
            "702",
            &format!("Structure of {name} is invalid: {e}"),
        ))
    };
    let value = serde_json::from_slice::<Value>(body).map_err(invalid)?;
    adyen_schema::check(name, &value).map_err(|message| Box::new(validation("702", &message)))?;
    let request = serde_json::from_value::<T>(value.clone()).map_err(invalid)?;
    Ok((request, value.to_string()))
}

/// Adyen's `138` for an `amount.currency` that is not an ISO 4217 code (`currency`).
pub(super) fn refuse_currency(currency: &str) -> Option<HttpResponse> {
    (!is_iso4217(currency)).then(|| {
        validation(
            "138",
            &format!("Unsupported currency specified: {currency} is not an ISO 4217 code"),
        )
    })
}

/// What Adyen answers to a request for an endpoint it does not have (a lookup of a payment
/// or a refund among them: Checkout API v71 has none): `404` in its `ServiceError` shape,
/// worded as its `401` is.
pub(super) fn unknown_endpoint(req: &HttpRequest) -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        "000",
        &format!(
            "HTTP Status Response - Not Found: Checkout API v71 has no {} {}",
            req.method(),
            req.path()
        ),
        "validation",
    )
}

/// Whether `path` is one of Adyen's (`/v71/…`, or another version's): not the Stripe face's
/// `/v1/…` nor the sandbox's own.
pub(super) fn is_adyen_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/v") else {
        return false;
    };
    let version: String = rest.chars().take_while(char::is_ascii_digit).collect();
    !version.is_empty() && version != "1" && rest[version.len()..].starts_with('/')
}

/// Takes the request's `Idempotency-Key` for a fresh run (`Ok(None)` without one), or gives
/// Adyen's answer to a key used before: the first answer again (made by `replay` from what
/// was recorded, or from what the key made once that is no longer kept), or error 704 for
/// another request under the key or one still running.
pub(super) fn begin_keyed(
    sb: &Sandbox,
    req: &HttpRequest,
    fingerprint: &str,
    replay: impl FnOnce(Replay, &str) -> HttpResponse,
) -> Result<Option<String>, Box<HttpResponse>> {
    let Some(key) = req
        .headers()
        .get("Idempotency-Key")
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(None);
    };
    let refused = match sb.store.begin(key, fingerprint) {
        Begin::Fresh => return Ok(Some(key.to_owned())),
        Begin::Replay(what) => replay(what, key),
        Begin::Mismatch => validation("704", "request already processed or in progress"),
        Begin::InFlight => error(
            StatusCode::CONFLICT,
            "704",
            "request in progress",
            "validation",
        ),
    };
    Err(Box::new(refused))
}

/// The Adyen answer to a charge recorded in the Stripe face's words.
fn answer(stored: &StoredResponse) -> HttpResponse {
    let body: Value = serde_json::from_slice(&stored.body).unwrap_or(Value::Null);
    let intent = serde_json::from_value::<PaymentIntent>(body.clone())
        .ok()
        .or_else(|| {
            serde_json::from_value::<ErrorBody>(body)
                .ok()?
                .error
                .payment_intent
        });
    match intent {
        Some(intent) => {
            let mut response = payment_response(&intent);
            // Adyen names the payment once the shopper is back (`/payments/details`), not
            // while it sends them away.
            if response["resultCode"] == "RedirectShopper" {
                if let Some(fields) = response.as_object_mut() {
                    fields.remove("pspReference");
                }
            }
            HttpResponse::Ok().json(response)
        }
        None if stored.status >= 500 => server_error(),
        None => validation("000", "the request was refused"),
    }
}

/// A payment as Adyen's payments response shows it.
fn payment_response(intent: &PaymentIntent) -> Value {
    let reference = intent
        .metadata
        .get("attempt_id")
        .cloned()
        .unwrap_or_default();
    let amount = json!({"value": intent.amount, "currency": intent.currency.to_ascii_uppercase()});
    let mut response = json!({
        "pspReference": intent.id,
        "merchantReference": reference,
        "amount": amount,
    });
    let (code, refusal) = match intent.status.as_str() {
        // Held or taken: Adyen says the same of both.
        "succeeded" | "requires_capture" => ("Authorised", None),
        "processing" => ("Received", None),
        "canceled" => ("Cancelled", None),
        "requires_payment_method" => ("Refused", Some(refusal(intent))),
        "requires_action" => ("RedirectShopper", None),
        _ => ("Pending", None),
    };
    response["resultCode"] = json!(code);
    if let Some(action) = redirect(intent) {
        response["action"] = json!(action);
    }
    if let Some(refused) = refusal {
        response["refusalReason"] = json!(refused.reason);
        response["refusalReasonCode"] = json!(refused.code);
        let extra = additional_data(&refused);
        if !extra.is_empty() {
            response["additionalData"] = json!(extra);
        }
    }
    response
}

/// What a refusal adds to `additionalData`: the acquirer's raw answer and a Mastercard
/// issuer's advice, as a merchant who enabled them in Adyen's Customer Area receives them.
fn additional_data(refused: &AdyenRefusal) -> serde_json::Map<String, Value> {
    let mut extra = serde_json::Map::new();
    if let Some(raw) = refused.raw {
        extra.insert("refusalReasonRaw".into(), json!(raw));
    }
    if let Some(advice) = refused.merchant_advice {
        extra.insert("merchantAdviceCode".into(), json!(advice));
    }
    extra
}

/// Adyen's `action` for a payment waiting for its shopper: the challenge page, by GET.
fn redirect(intent: &PaymentIntent) -> Option<Action> {
    let next: NextAction = serde_json::from_value(intent.next_action.clone()?).ok()?;
    Some(Action {
        kind: "redirect".into(),
        method: Some("GET".into()),
        url: Some(next.redirect_to_url?.url),
        payment_method_type: Some("scheme".into()),
    })
}

/// Adyen's refusal of a declined intent: the one `declines` row its Stripe words name, so a
/// decline reads the same through both faces; Adyen's plain `2` "Refused" for one no row
/// names.
pub(super) fn refusal(intent: &PaymentIntent) -> AdyenRefusal {
    let error = intent.last_payment_error.as_ref();
    let code = error.and_then(|e| e.code.as_deref());
    let decline_code = error.and_then(|e| e.decline_code.as_deref());
    by_stripe(code, decline_code).map_or(
        AdyenRefusal {
            code: "2",
            reason: "Refused",
            raw: None,
            merchant_advice: None,
            brand: "visa",
        },
        |decline| decline.adyen,
    )
}

/// The payment `psp` made through this face.
pub(super) fn payment(sb: &Sandbox, psp: &str) -> Lookup<PaymentIntent> {
    match sb.store.get(psp) {
        Lookup::Found(intent) if is_adyen(&intent) => Lookup::Found(intent),
        Lookup::Found(_) | Lookup::Missing => Lookup::Missing,
        Lookup::Forgotten => Lookup::Forgotten,
    }
}

/// Why the sandbox cannot answer about payment `psp` (docs/operations/running.md, "The sandbox's memory").
pub(super) fn forgotten_payment(sb: &Sandbox, psp: &str) -> String {
    format!(
        "The sandbox no longer keeps payment {psp}: it keeps the last {} (--keep-intents); GET \
         /__sandbox/ledger counts what it forgot.",
        sb.store.window().intents
    )
}

/// `410` for what the sandbox made and no longer keeps (a `/payments/details` of a payment
/// forgotten, a technical cancel whose payment may have been): not an answer that would say
/// it was never made.
pub(super) fn gone(message: &str) -> HttpResponse {
    error(StatusCode::GONE, FORGOTTEN, message, "validation")
}

/// The signed notification a Stripe `kind` event about `intent` stands for, if any.
pub(super) fn notification(
    config: &SandboxConfig,
    kind: &str,
    intent: &PaymentIntent,
) -> Option<Vec<u8>> {
    let (success, refused) = match kind {
        // Authorised: taken, or held for a later capture.
        "payment_intent.succeeded" | "payment_intent.amount_capturable_updated" => ("true", None),
        "payment_intent.payment_failed" => ("false", Some(refusal(intent))),
        // Adyen says nothing until the authorisation is decided.
        _ => return None,
    };
    // A refusal's notification names no code, only the reason in Adyen's words; the raw
    // answer and advice come as in the payment's answer.
    let reason = refused.map_or("", |r| r.reason);
    let extra = refused.as_ref().map(additional_data).unwrap_or_default();
    let brand = refused.map_or("visa", |r| r.brand);
    let item = json!({
        "additionalData": extra,
        "amount": {"value": intent.amount, "currency": intent.currency.to_ascii_uppercase()},
        "eventCode": "AUTHORISATION",
        "eventDate": Utc::now().to_rfc3339(),
        "merchantAccountCode": intent.metadata.get(MERCHANT_ACCOUNT).cloned().unwrap_or_default(),
        "merchantReference": intent.metadata.get("attempt_id").cloned().unwrap_or_default(),
        "pspReference": intent.id,
        "paymentMethod": brand,
        "reason": reason,
        "success": success,
    });
    delivery(config, item)
}

/// A delivery of one notification item, signed with Adyen's HMAC under `--adyen-hmac-key`.
pub(super) fn delivery(config: &SandboxConfig, mut item: Value) -> Option<Vec<u8>> {
    let signature = sign_item(&item, config.adyen_hmac_key.expose())?;
    item["additionalData"]["hmacSignature"] = json!(signature);
    serde_json::to_vec(&json!({
        "live": "false",
        "notificationItems": [{"NotificationRequestItem": item}],
    }))
    .ok()
}

/// `Some(401)` unless `X-API-Key` is the sandbox's secret.
pub(super) fn refuse_unauthorized(sb: &Sandbox, req: &HttpRequest) -> Option<HttpResponse> {
    let presented = req.headers().get("X-API-Key").map(|v| v.as_bytes());
    match presented {
        Some(key) if bool::from(key.ct_eq(sb.config.secret.as_bytes())) => None,
        _ => Some(error(
            StatusCode::UNAUTHORIZED,
            "000",
            "HTTP Status Response - Unauthorized",
            "security",
        )),
    }
}

/// Adyen's error body.
pub(super) fn error(status: StatusCode, code: &str, message: &str, kind: &str) -> HttpResponse {
    HttpResponse::build(status).json(json!({
        "status": status.as_u16(),
        "errorCode": code,
        "message": message,
        "errorType": kind,
    }))
}

pub(super) fn validation(code: &str, message: &str) -> HttpResponse {
    error(
        StatusCode::UNPROCESSABLE_ENTITY,
        code,
        message,
        "validation",
    )
}

pub(super) fn server_error() -> HttpResponse {
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "905",
        "An unknown error occurred (sandbox fault).",
        "internal",
    )
}

/// `refused` through the Adyen face: Adyen's `403`.
fn refused_adyen() -> HttpResponse {
    error(StatusCode::FORBIDDEN, "010", "Not allowed", "security")
}
