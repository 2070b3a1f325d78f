//! The Stripe face's captures and cancels (docs/operations/running.md, "The sandbox's memory";
//! docs/guides/test-cards.md, "The sandbox";
//! docs/DESIGN.md, "The provider protocol"), made by `modify`:
//!
//! - `POST /v1/payment_intents/{id}/capture` (`amount_to_capture`, at most
//!   `amount_capturable`; default all of it): `requires_capture` → `succeeded` with
//!   `amount_received` what was captured, the rest released; webhook
//!   `payment_intent.succeeded`.
//! - `POST /v1/payment_intents/{id}/cancel` (`cancellation_reason`): from
//!   `requires_payment_method`, `requires_capture`, `requires_confirmation`,
//!   `requires_action` or `processing` → `canceled`, a hold released; webhook
//!   `payment_intent.canceled`.
//!
//! Both honour `Idempotency-Key` as a create does (a replay answers the first answer, a `500`
//! included, another request under the key is a `400 idempotency_error`, one still running a
//! `409`); any other status is `400 payment_intent_unexpected_state`, which Stripe does not
//! save under the key.

use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};

use super::answers::{
    api_error_500, begin_keyed, fail_keyed, forgotten, invalid_request, no_such_intent,
    refuse_unauthorized, respond, stored_error, stored_json, unexpected_state_answer, FORGOTTEN,
};
use super::modification::Kind;
use super::modify::{fails_before, run, Verdict};
use super::params::ParamError;
use super::store::{Ask, Lookup, Modified, Refusal, CANCELABLE};
use super::{roll, Sandbox};
use payorch_wire::stripe::ApiError;

/// Stripe's cancellation reasons.
const CANCELLATION_REASONS: [&str; 4] = [
    "duplicate",
    "fraudulent",
    "requested_by_customer",
    "abandoned",
];

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/v1/payment_intents/{id}/capture",
        web::post().to(capture_intent),
    )
    .route(
        "/v1/payment_intents/{id}/cancel",
        web::post().to(cancel_intent),
    );
}

/// A capture's or cancel's form: its one parameter, and its fingerprint.
struct Form {
    value: Option<String>,
    fingerprint: String,
}

/// The form of a request to `action` intent `id`, whose one parameter is `param`.
fn parse_form(body: &[u8], action: &str, id: &str, param: &str) -> Result<Form, ParamError> {
    let mut pairs: Vec<(String, String)> =
        serde_urlencoded::from_bytes(body).map_err(|e| ParamError {
            code: "parameter_invalid",
            param: None,
            message: format!("Invalid form body: {e}"),
        })?;
    let mut value = None;
    for (name, given) in &pairs {
        if name != param {
            return Err(ParamError::new(
                "parameter_unknown",
                name,
                format!("Received unknown parameter: {name}"),
            ));
        }
        value = Some(given.clone());
    }
    pairs.sort();
    let fingerprint = format!(
        "{action} {id} {}",
        serde_json::to_string(&pairs).unwrap_or_default()
    );
    Ok(Form { value, fingerprint })
}

/// `amount_to_capture`: a positive whole number.
fn amount_to_capture(form: &Form) -> Result<Option<i64>, ParamError> {
    let Some(value) = &form.value else {
        return Ok(None);
    };
    match value.parse::<i64>() {
        Ok(amount) if amount >= 1 => Ok(Some(amount)),
        _ => Err(ParamError::new(
            "parameter_invalid_integer",
            "amount_to_capture",
            format!("Invalid positive integer: {value}"),
        )),
    }
}

/// `cancellation_reason`: one of Stripe's.
fn cancellation_reason(form: &Form) -> Result<Option<String>, ParamError> {
    match &form.value {
        Some(reason) if !CANCELLATION_REASONS.contains(&reason.as_str()) => Err(ParamError::new(
            "parameter_invalid_string",
            "cancellation_reason",
            format!(
                "Invalid cancellation_reason: must be one of {}",
                CANCELLATION_REASONS.join(", ")
            ),
        )),
        reason => Ok(reason.clone()),
    }
}

async fn capture_intent(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    id: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    let form = parse_form(&body, "capture", &id, "amount_to_capture");
    let amount = form.and_then(|form| Ok((amount_to_capture(&form)?, form.fingerprint)));
    modify(&sb, &req, &id, amount, |amount| Ask {
        kind: Kind::Capture,
        amount,
        reason: None,
        psp: None,
        key: None,
        reference: None,
        keep_refused: false,
        cancelable: CANCELABLE,
    })
    .await
}

async fn cancel_intent(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    id: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    let form = parse_form(&body, "cancel", &id, "cancellation_reason");
    let reason = form.and_then(|form| Ok((cancellation_reason(&form)?, form.fingerprint)));
    modify(&sb, &req, &id, reason, |reason| Ask {
        kind: Kind::Cancel,
        amount: None,
        reason,
        psp: None,
        key: None,
        reference: None,
        keep_refused: false,
        cancelable: CANCELABLE,
    })
    .await
}

/// A capture or cancel of intent `id` whose form read as `parsed` (its parameter and
/// fingerprint), asked of the store as `ask` makes it.
async fn modify<P>(
    sb: &web::Data<Sandbox>,
    req: &HttpRequest,
    id: &str,
    parsed: Result<(P, String), ParamError>,
    ask: impl FnOnce(P) -> Ask,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(sb, req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    // Edge failure before the API saw the request: nothing done, a retry runs afresh.
    if roll(sb.config.error_rate) {
        return api_error_500();
    }
    let (param, fingerprint) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => return invalid_request(e),
    };
    let intent = match sb.store.get(id) {
        Lookup::Found(intent) => intent,
        Lookup::Forgotten => return forgotten(sb, "intent", id),
        Lookup::Missing => return no_such_intent(id),
    };
    let key = match begin_keyed(sb, req, &fingerprint) {
        Ok(key) => key,
        Err(answer) => return *answer,
    };
    // The API began the request, then failed: that 500 is the key's first result.
    if fails_before(sb, &intent) {
        return fail_keyed(sb, key.as_deref());
    }
    let ask = Ask {
        key: key.clone(),
        ..ask(param)
    };
    match run(sb, id, ask, verdict).await {
        Some(stored) => respond(&stored, key.as_deref(), false),
        None => api_error_500(),
    }
}

/// Stripe's answer: the intent as it is after, or why not.
fn verdict(modified: &Lookup<Modified>) -> Verdict {
    let m = match modified {
        Lookup::Found(m) => m,
        // Forgotten since it was looked up a moment ago: nothing was done.
        Lookup::Forgotten | Lookup::Missing => {
            return Verdict::Refuse(stored_error(
                StatusCode::GONE,
                ApiError {
                    kind: "invalid_request_error".into(),
                    code: Some(FORGOTTEN.into()),
                    decline_code: None,
                    message: Some("The sandbox no longer keeps this intent.".into()),
                    param: Some("intent".into()),
                    payment_intent: None,
                },
            ))
        }
    };
    let action = match m.modification.kind {
        Kind::Capture => "capture",
        Kind::Cancel | Kind::TechnicalCancel => "cancel",
    };
    match m.refused {
        None => Verdict::Record(stored_json(StatusCode::OK, &m.intent)),
        Some(Refusal::State) => Verdict::Refuse(unexpected_state_answer(&m.intent, action)),
        Some(Refusal::TooLarge { capturable }) => Verdict::Refuse(stored_error(
            StatusCode::BAD_REQUEST,
            ApiError {
                kind: "invalid_request_error".into(),
                code: Some("amount_too_large".into()),
                decline_code: None,
                message: Some(format!(
                    "The amount to capture ({}) is greater than the amount capturable on \
                     this PaymentIntent ({capturable}).",
                    m.modification.amount
                )),
                param: Some("amount_to_capture".into()),
                payment_intent: None,
            },
        )),
    }
}
