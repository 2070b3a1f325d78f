//! What the sandbox's Stripe face answers in every route: JSON bodies and Stripe's errors,
//! answers recorded under an `Idempotency-Key` and replayed, the API-key check, and the
//! `410` about what it no longer keeps. Shared by the payment-intent routes and the refund
//! routes.

use actix_web::http::{header, StatusCode};
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use subtle::ConstantTimeEq;

use super::listing::Created;
use super::nulls::blank;
use super::params::ParamError;
use super::store::{Begin, Replay, StoredResponse};
use super::{random_id, Sandbox};
use payorch_wire::stripe::{ApiError, ErrorBody, PaymentIntent};

/// The answer about an intent or refund the sandbox made and no longer keeps (docs/operations/running.md, "The
/// sandbox's memory"): `410`, never the `404` that would say it was never made. payorch reads
/// it, as any refused lookup, as saying nothing about the charge.
pub(super) fn forgotten(sb: &Sandbox, param: &str, id: &str) -> HttpResponse {
    let window = sb.store.window().intents;
    gone(
        format!(
            "The sandbox no longer keeps '{id}': it keeps the last {window} intents and \
             the last {window} refunds (--keep-intents); GET /__sandbox/ledger counts what \
             it forgot."
        ),
        param,
    )
}

/// `410` for a search that found nothing once intents have been forgotten: the answer could
/// have been among them, and an empty list would say there is none.
pub(super) fn search_forgotten(sb: &Sandbox) -> Option<HttpResponse> {
    let forgotten = sb.store.forgotten();
    if forgotten.intents == 0 {
        return None;
    }
    let up_to = forgotten.created_up_to.unwrap_or_default();
    Some(gone(
        format!(
            "Nothing kept matches, but the sandbox has forgotten {} intents (made up to \
             {up_to}, Unix time), any of which could have: it cannot say that none does.",
            forgotten.intents
        ),
        "query",
    ))
}

/// `410` for a page of a list that ran to the oldest intent kept, when the sandbox has
/// forgotten intents made within the list's `created` window: they could have been on it,
/// and a short list would say they never were.
pub(super) fn list_forgotten(sb: &Sandbox, created: &Created) -> Option<HttpResponse> {
    let forgotten = sb.store.forgotten();
    let up_to = forgotten.created_up_to?;
    (created.earliest() <= up_to).then(|| {
        gone(
            format!(
                "The list reaches the oldest intent the sandbox keeps, and it has forgotten {} \
                 intents (made up to {up_to}, Unix time) that this window takes: it cannot say \
                 that none was on it (--keep-intents).",
                forgotten.intents
            ),
            "created",
        )
    })
}

/// `410` for a page of every refund that ran to the oldest refund kept, once refunds have
/// been forgotten.
pub(super) fn refund_list_forgotten(sb: &Sandbox) -> Option<HttpResponse> {
    let forgotten = sb.store.forgotten();
    (forgotten.refunds > 0).then(|| {
        gone(
            format!(
                "The list reaches the oldest refund the sandbox keeps, and it has forgotten {} \
                 refunds: it cannot say that none was on it (--keep-intents).",
                forgotten.refunds
            ),
            "",
        )
    })
}

/// The `410 sandbox_forgotten` of [`forgotten`] and [`search_forgotten`], about `param`.
fn gone(message: String, param: &str) -> HttpResponse {
    error(
        StatusCode::GONE,
        ApiError {
            kind: "invalid_request_error".into(),
            code: Some(FORGOTTEN.into()),
            decline_code: None,
            message: Some(message),
            param: Some(param.to_owned()).filter(|p| !p.is_empty()),
            payment_intent: None,
        },
    )
}

/// The error code of [`forgotten`] and [`search_forgotten`].
pub(super) const FORGOTTEN: &str = "sandbox_forgotten";

/// The secret of `Authorization: Bearer <secret>`, or of `Basic base64(<secret>:)` (the secret
/// as user name, no password), both of which Stripe accepts.
fn presented_secret(value: &str) -> Option<Vec<u8>> {
    if let Some(secret) = value.strip_prefix("Bearer ") {
        return Some(secret.as_bytes().to_vec());
    }
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(value.strip_prefix("Basic ")?.trim())
        .ok()?;
    let user = match decoded.iter().position(|&b| b == b':') {
        Some(colon) => decoded[..colon].to_vec(),
        None => decoded,
    };
    Some(user)
}

/// `Some(401)` unless the request carries the secret as Bearer or Basic credentials.
pub(super) fn refuse_unauthorized(sb: &Sandbox, req: &HttpRequest) -> Option<HttpResponse> {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(presented_secret);
    let message = match presented {
        Some(key) if bool::from(key.as_slice().ct_eq(sb.config.secret.as_bytes())) => {
            return None
        }
        Some(_) => "Invalid API Key provided.",
        None => "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth.",
    };
    Some(error(
        StatusCode::UNAUTHORIZED,
        ApiError {
            kind: "invalid_request_error".into(),
            code: None,
            decline_code: None,
            message: Some(message.into()),
            param: None,
            payment_intent: None,
        },
    ))
}

/// Takes the request's key for a fresh run (`Ok(None)` without a key), or the answer Stripe
/// gives when the key was used before: the recorded response, a mismatch or in flight.
pub(super) fn begin_keyed(
    sb: &Sandbox,
    req: &HttpRequest,
    fingerprint: &str,
) -> Result<Option<String>, Box<HttpResponse>> {
    let key = idempotency_key(req).map_err(|e| Box::new(invalid_request(e)))?;
    if let Some(key) = &key {
        let refused = match sb.store.begin(key, fingerprint) {
            Begin::Fresh => None,
            // What was recorded is replayed as it is; an answer made again from what the key
            // made is shown as any answer is.
            Begin::Replay(replay @ (Replay::Recorded(_) | Replay::Failed)) => {
                Some(respond(&replayed(replay), Some(key), true))
            }
            Begin::Replay(replay) => {
                let made = with_nulls(replayed(replay), sb.config.null_rate);
                Some(respond(&made, Some(key), true))
            }
            Begin::Mismatch => Some(idempotency_mismatch(key)),
            Begin::InFlight => Some(idempotency_in_flight(key)),
        };
        if let Some(answer) = refused {
            return Err(Box::new(answer));
        }
    }
    Ok(key)
}

/// The `Idempotency-Key` header: absent is fine, present must be 1–255 characters.
pub(super) fn idempotency_key(req: &HttpRequest) -> Result<Option<String>, ParamError> {
    let Some(value) = req.headers().get("Idempotency-Key") else {
        return Ok(None);
    };
    match value.to_str() {
        Ok(key) if !key.is_empty() && key.len() <= 255 => Ok(Some(key.to_owned())),
        _ => Err(ParamError {
            code: "idempotency_key_invalid",
            param: None,
            message: "Idempotency-Key must be 1 to 255 visible ASCII characters.".into(),
        }),
    }
}

fn idempotency_mismatch(key: &str) -> HttpResponse {
    error(
        StatusCode::BAD_REQUEST,
        ApiError {
            kind: "idempotency_error".into(),
            code: None,
            decline_code: None,
            message: Some(format!(
                "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '{key}' if you meant to execute a different request."
            )),
            param: None,
            payment_intent: None,
        },
    )
}

fn idempotency_in_flight(key: &str) -> HttpResponse {
    error(
        StatusCode::CONFLICT,
        ApiError {
            kind: "idempotency_error".into(),
            code: Some("idempotency_key_in_use".into()),
            decline_code: None,
            message: Some(format!(
                "There is currently another in-progress request using this Idempotent Key ('{key}'). Please try again later."
            )),
            param: None,
            payment_intent: None,
        },
    )
}

pub(super) fn invalid_request(e: ParamError) -> HttpResponse {
    error(
        StatusCode::BAD_REQUEST,
        ApiError {
            kind: "invalid_request_error".into(),
            code: Some(e.code.into()),
            decline_code: None,
            message: Some(e.message),
            param: e.param,
            payment_intent: None,
        },
    )
}

/// The `500 api_error` of a fault, before the API saw the request (`--error-rate`: nothing
/// is recorded) or once it had begun (then recorded under the key: [`fail_keyed`]).
pub(super) fn api_error_500() -> HttpResponse {
    respond(&api_error_500_answer(), None, false)
}

/// [`api_error_500`], as recorded: always the same bytes, so a replay of it, or one made
/// again once the recorded bytes are no longer kept (`Replay::Failed`), is that very answer.
pub(super) fn api_error_500_answer() -> StoredResponse {
    stored_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        ApiError {
            kind: "api_error".into(),
            code: None,
            decline_code: None,
            message: Some("An unknown error occurred (sandbox fault).".into()),
            param: None,
            payment_intent: None,
        },
    )
}

/// A fault that struck once the API had begun the request under `key` (begun), before it did
/// anything (`pm_sandbox_error_before` and its capture and refund kin): the `500` is the
/// key's first result, and Stripe saves that "whatever it was, including 500 errors" (Stripe's
/// docs, "Idempotent requests"), so a resend with the key gets this 500 again, never a fresh
/// try.
pub(super) fn fail_keyed(sb: &Sandbox, key: Option<&str>) -> HttpResponse {
    let stored = api_error_500_answer();
    if let Some(key) = key {
        sb.store.finish(key, stored.clone());
    }
    respond(&stored, key, false)
}

pub(super) fn stored_json<T: Serialize>(status: StatusCode, value: &T) -> StoredResponse {
    // Stripe answers pretty-printed JSON; these types always serialise.
    let body = serde_json::to_vec_pretty(value).unwrap_or_else(|_| b"{}".to_vec());
    StoredResponse {
        status: status.as_u16(),
        body: Bytes::from(body),
    }
}

pub(super) fn stored_error(status: StatusCode, error: ApiError) -> StoredResponse {
    stored_json(status, &ErrorBody { error })
}

pub(super) fn json<T: Serialize>(status: StatusCode, value: &T) -> HttpResponse {
    respond(&stored_json(status, value), None, false)
}

/// [`json`] for an answer that shows intents or refunds, their nullable fields `null` at
/// `--null-rate` (`nulls`).
pub(super) fn shown_json<T: Serialize>(
    sb: &Sandbox,
    status: StatusCode,
    value: &T,
) -> HttpResponse {
    respond(
        &with_nulls(stored_json(status, value), sb.config.null_rate),
        None,
        false,
    )
}

/// `stored` with the nullable fields of the intents and refunds it shows `null` at `rate`
/// (`nulls`): applied once, before an answer is recorded, so a replay is the same bytes.
pub(super) fn with_nulls(stored: StoredResponse, rate: f64) -> StoredResponse {
    if rate <= 0.0 {
        return stored;
    }
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&stored.body) else {
        return stored;
    };
    blank(&mut value, rate);
    let body = serde_json::to_vec_pretty(&value).unwrap_or_else(|_| stored.body.to_vec());
    StoredResponse {
        status: stored.status,
        body: Bytes::from(body),
    }
}

pub(super) fn error(status: StatusCode, error: ApiError) -> HttpResponse {
    respond(&stored_error(status, error), None, false)
}

pub(super) fn respond(stored: &StoredResponse, key: Option<&str>, replayed: bool) -> HttpResponse {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = HttpResponse::build(status);
    response
        .content_type("application/json")
        .insert_header(("Request-Id", random_id("req")));
    if let Some(key) = key {
        response.insert_header(("Idempotency-Key", key.to_owned()));
    }
    if replayed {
        response.insert_header(("Idempotent-Replayed", "true"));
    }
    response.body(stored.body.clone())
}

/// What a create or confirm that made `intent` answers: the intent, or for a declined one
/// Stripe's 402 `card_error` naming it. A replay past the recorded answers is made here too,
/// so it is the same bytes while the intent has not changed.
pub(super) fn intent_answer(intent: PaymentIntent) -> StoredResponse {
    match intent.last_payment_error.clone() {
        Some(declined) if intent.status == "requires_payment_method" => stored_error(
            StatusCode::PAYMENT_REQUIRED,
            ApiError {
                kind: declined.kind,
                code: declined.code,
                decline_code: declined.decline_code,
                message: declined.message,
                param: None,
                payment_intent: Some(intent),
            },
        ),
        _ => stored_json(StatusCode::OK, &intent),
    }
}

/// What a replay answers, in the Stripe face's words (the Adyen face translates).
pub(super) fn replayed(replay: Replay) -> StoredResponse {
    match replay {
        Replay::Recorded(stored) => stored,
        Replay::Failed => api_error_500_answer(),
        Replay::Intent(intent) => intent_answer(*intent),
        Replay::Refund(refund) => stored_json(StatusCode::OK, &refund),
    }
}

pub(super) fn no_such_intent(id: &str) -> HttpResponse {
    missing_intent(id, "intent")
}

/// Stripe's `404 resource_missing` for intent `id`, named by the request's `param`.
pub(super) fn missing_intent(id: &str, param: &str) -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        ApiError {
            kind: "invalid_request_error".into(),
            code: Some("resource_missing".into()),
            decline_code: None,
            message: Some(format!("No such payment_intent: '{id}'")),
            param: Some(param.into()),
            payment_intent: None,
        },
    )
}

/// Stripe's answer to an action the intent's status does not allow.
pub(super) fn unexpected_state(sb: &Sandbox, intent: &PaymentIntent, action: &str) -> HttpResponse {
    let answer = unexpected_state_answer(intent, action);
    respond(&with_nulls(answer, sb.config.null_rate), None, false)
}

/// [`unexpected_state`], as recorded.
pub(super) fn unexpected_state_answer(intent: &PaymentIntent, action: &str) -> StoredResponse {
    stored_error(
        StatusCode::BAD_REQUEST,
        ApiError {
            kind: "invalid_request_error".into(),
            code: Some("payment_intent_unexpected_state".into()),
            decline_code: None,
            message: Some(format!(
                "You cannot {action} this PaymentIntent because it has a status of {}.",
                intent.status
            )),
            param: None,
            payment_intent: Some(intent.clone()),
        },
    )
}
