//! The sandbox's HTTP endpoints: the PaymentIntents protocol of SPEC §6 plus the ledger.

use std::sync::Arc;

use actix_web::http::{header, StatusCode};
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::Utc;
use serde::Serialize;
use subtle::ConstantTimeEq;

use super::behaviour::Behaviour;
use super::params::{parse_query, Clause, CreateParams, ParamError};
use super::store::{Begin, StoredResponse};
use super::{random_id, roll, Sandbox};
use crate::providers::stripe::wire::{
    ApiError, ErrorBody, LastPaymentError, PaymentIntent, SearchResult,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/payment_intents", web::post().to(create_intent))
        // Registered before `{id}` so "search" is not taken for an id.
        .route("/v1/payment_intents/search", web::get().to(search_intents))
        .route("/v1/payment_intents/{id}", web::get().to(retrieve_intent))
        .route("/__sandbox/ledger", web::get().to(ledger))
        .default_service(web::to(unknown_route));
}

async fn create_intent(sb: web::Data<Sandbox>, req: HttpRequest, body: Bytes) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    // Edge failure before the API saw the request: nothing recorded, a retry runs afresh.
    if roll(sb.config.error_rate) {
        return api_error_500();
    }
    let params = match CreateParams::parse(&body) {
        Ok(params) => params,
        // Validation errors are not saved under the key (Stripe does the same).
        Err(e) => return invalid_request(e),
    };
    let behaviour = params
        .payment_method
        .as_deref()
        .and_then(Behaviour::for_payment_method);
    if behaviour == Some(Behaviour::ErrorBefore) {
        return api_error_500();
    }
    let key = match idempotency_key(&req) {
        Ok(key) => key,
        Err(e) => return invalid_request(e),
    };
    if let Some(key) = &key {
        match sb.store.begin(key, &params.fingerprint) {
            Begin::Fresh => {}
            Begin::Replay(stored) => return respond(&stored, Some(key), true),
            Begin::Mismatch => return idempotency_mismatch(key),
            Begin::InFlight => return idempotency_in_flight(key),
        }
    }

    // The charge runs as its own task on the sandbox's runtime, so a client that hangs up
    // (or times out) cannot leave a half-done charge or a key stuck in flight.
    let task = sb.rt.spawn(execute(
        sb.clone().into_inner(),
        params,
        behaviour,
        key.clone(),
    ));
    let stored = match task.await {
        Ok(stored) => stored,
        Err(e) => {
            tracing::error!(error = %e, "sandbox charge task failed");
            if let Some(key) = &key {
                sb.store.abandon(key);
            }
            return api_error_500();
        }
    };

    // Edge failures after the result was recorded: the charge stands and a resend with
    // the same key gets the recorded answer.
    if behaviour == Some(Behaviour::LostResponse) || roll(sb.config.lost_response_rate) {
        sb.wait_for_shutdown().await;
        return api_error_500();
    }
    if behaviour == Some(Behaviour::ErrorAfter) {
        return api_error_500();
    }
    respond(&stored, key.as_deref(), false)
}

/// Create the intent, charge per its behaviour, record the answer under the key.
async fn execute(
    sb: Arc<Sandbox>,
    params: CreateParams,
    behaviour: Option<Behaviour>,
    key: Option<String>,
) -> StoredResponse {
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
        (
            Some(Behaviour::Decline {
                decline_code,
                message,
            }),
            _,
        ) if params.confirm => {
            let mut intent = new_intent(&params, "requires_payment_method");
            intent.last_payment_error = Some(LastPaymentError {
                kind: "card_error".into(),
                code: Some("card_declined".into()),
                decline_code: Some(decline_code.into()),
                message: Some(message.into()),
            });
            sb.store.insert(intent.clone(), key.clone(), true);
            sb.webhooks.emit("payment_intent.payment_failed", &intent);
            stored_error(
                StatusCode::PAYMENT_REQUIRED,
                ApiError {
                    kind: "card_error".into(),
                    code: Some("card_declined".into()),
                    decline_code: Some(decline_code.into()),
                    message: Some(message.into()),
                    param: None,
                    payment_intent: Some(intent),
                },
            )
        }
        (Some(Behaviour::Processing), _) if params.confirm => {
            let intent = new_intent(&params, "processing");
            sb.store.insert(intent.clone(), key.clone(), true);
            sb.webhooks.emit("payment_intent.processing", &intent);
            schedule_settlement(&sb, intent.id.clone());
            stored_json(StatusCode::OK, &intent)
        }
        (Some(behaviour), _) if params.confirm => {
            if behaviour == Behaviour::Slow {
                tokio::time::sleep(sb.config.slow()).await;
            }
            let mut intent = new_intent(&params, "succeeded");
            intent.amount_received = intent.amount;
            intent.latest_charge = Some(random_id("ch"));
            sb.store.insert(intent.clone(), key.clone(), true);
            sb.webhooks.emit("payment_intent.succeeded", &intent);
            stored_json(StatusCode::OK, &intent)
        }
        _ => {
            // Not confirmed: an intent that waits, nothing charged, not in the ledger.
            let status = if params.payment_method.is_some() {
                "requires_confirmation"
            } else {
                "requires_payment_method"
            };
            let intent = new_intent(&params, status);
            sb.store.insert(intent.clone(), key.clone(), false);
            stored_json(StatusCode::OK, &intent)
        }
    };
    if let Some(key) = &key {
        sb.store.finish(key, stored.clone());
    }
    stored
}

/// A `processing` intent succeeds after `--processing-ms`, with its webhook.
fn schedule_settlement(sb: &Arc<Sandbox>, id: String) {
    let sb_task = sb.clone();
    sb.spawn(async move {
        tokio::time::sleep(sb_task.config.processing()).await;
        if let Some(mut intent) = sb_task.store.transition(&id, "processing", "succeeded") {
            intent.latest_charge = Some(random_id("ch"));
            sb_task.webhooks.emit("payment_intent.succeeded", &intent);
        }
    });
}

fn new_intent(params: &CreateParams, status: &str) -> PaymentIntent {
    PaymentIntent {
        id: random_id("pi"),
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
        capture_method: "automatic".into(),
        confirmation_method: "automatic".into(),
        created: Utc::now().timestamp(),
        livemode: false,
    }
}

async fn retrieve_intent(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    id: web::Path<String>,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    match sb.store.get(&id) {
        Some(intent) => json(StatusCode::OK, &intent),
        None => error(
            StatusCode::NOT_FOUND,
            ApiError {
                kind: "invalid_request_error".into(),
                code: Some("resource_missing".into()),
                decline_code: None,
                message: Some(format!("No such payment_intent: '{id}'")),
                param: Some("intent".into()),
                payment_intent: None,
            },
        ),
    }
}

#[derive(serde::Deserialize)]
struct SearchParams {
    query: Option<String>,
    limit: Option<usize>,
}

async fn search_intents(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    params: web::Query<SearchParams>,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    let Some(query) = params.query.as_deref() else {
        return invalid_request(ParamError {
            code: "parameter_missing",
            param: Some("query".into()),
            message: "Missing required param: query.".into(),
        });
    };
    let clauses = match parse_query(query) {
        Ok(clauses) => clauses,
        Err(e) => return invalid_request(e),
    };
    let limit = params.limit.unwrap_or(10).clamp(1, 100);
    // Stripe lists search results newest first.
    let mut data = sb
        .store
        .filter(|intent| clauses.iter().all(|c| matches(c, intent)));
    data.reverse();
    let has_more = data.len() > limit;
    data.truncate(limit);
    json(
        StatusCode::OK,
        &SearchResult {
            object: "search_result".into(),
            data,
            has_more,
            next_page: None,
            url: Some("/v1/payment_intents/search".into()),
        },
    )
}

fn matches(clause: &Clause, intent: &PaymentIntent) -> bool {
    match clause {
        Clause::Metadata { key, value } => intent.metadata.get(key) == Some(value),
        Clause::Field { field, value } => match field.as_str() {
            "status" => &intent.status == value,
            "currency" => &intent.currency == value,
            "amount" => intent.amount.to_string() == *value,
            _ => false,
        },
    }
}

#[derive(Serialize)]
struct LedgerList {
    object: &'static str,
    data: Vec<super::LedgerEntry>,
}

/// The ground truth for tests; unauthenticated, like any simulator back door.
async fn ledger(sb: web::Data<Sandbox>) -> HttpResponse {
    json(
        StatusCode::OK,
        &LedgerList {
            object: "list",
            data: sb.store.ledger(),
        },
    )
}

async fn unknown_route(req: HttpRequest) -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        ApiError {
            kind: "invalid_request_error".into(),
            code: None,
            decline_code: None,
            message: Some(format!(
                "Unrecognized request URL ({}: {}).",
                req.method(),
                req.path()
            )),
            param: None,
            payment_intent: None,
        },
    )
}

/// `Some(401)` unless the request carries `Authorization: Bearer <secret>`.
fn refuse_unauthorized(sb: &Sandbox, req: &HttpRequest) -> Option<HttpResponse> {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let message = match presented {
        Some(key) if bool::from(key.as_bytes().ct_eq(sb.config.secret.as_bytes())) => {
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

/// The `Idempotency-Key` header: absent is fine, present must be 1–255 characters.
fn idempotency_key(req: &HttpRequest) -> Result<Option<String>, ParamError> {
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

fn invalid_request(e: ParamError) -> HttpResponse {
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

fn api_error_500() -> HttpResponse {
    error(
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

fn stored_json<T: Serialize>(status: StatusCode, value: &T) -> StoredResponse {
    // Stripe answers pretty-printed JSON; these types always serialise.
    let body = serde_json::to_vec_pretty(value).unwrap_or_else(|_| b"{}".to_vec());
    StoredResponse {
        status: status.as_u16(),
        body: Bytes::from(body),
    }
}

fn stored_error(status: StatusCode, error: ApiError) -> StoredResponse {
    stored_json(status, &ErrorBody { error })
}

fn json<T: Serialize>(status: StatusCode, value: &T) -> HttpResponse {
    respond(&stored_json(status, value), None, false)
}

fn error(status: StatusCode, error: ApiError) -> HttpResponse {
    respond(&stored_error(status, error), None, false)
}

fn respond(stored: &StoredResponse, key: Option<&str>, replayed: bool) -> HttpResponse {
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
