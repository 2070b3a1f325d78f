//! What every state-changing handler does before its work: the key header, the JSON body
//! (card data refused), the fingerprint; and how a result is rendered, fresh or replayed.

use actix_web::http::StatusCode;
use actix_web::{HttpMessage, HttpRequest, HttpResponse};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tracing_actix_web::RequestId;

use crate::http::card_data::{contains_card_number, inspect, Finding};
use crate::http::errors::{ApiError, FieldError};
use crate::idempotency::{fingerprint, IdempotencyKey, KeyedRequest, Operation};
use crate::ids::MerchantId;

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The key of a state-changing request, in its place in the tracing span.
pub fn idempotency_key(req: &HttpRequest) -> Result<IdempotencyKey, ApiError> {
    let mut values = req.headers().get_all(IDEMPOTENCY_KEY);
    let first = values.next();
    if values.next().is_some() {
        return Err(ApiError::DuplicateHeader("Idempotency-Key"));
    }
    let key = IdempotencyKey::parse(first.map(|v| v.as_bytes()))?;
    // Checked before the key is recorded anywhere, the log included.
    if contains_card_number(key.as_str()) {
        return Err(ApiError::RawCardDataForbidden {
            field: "Idempotency-Key".into(),
        });
    }
    tracing::Span::current().record("idempotency_key", key.as_str());
    Ok(key)
}

/// Refuses card data and NUL characters anywhere in `body` (values and member names), then
/// reads it as `T` (unknown fields refused).
pub fn read_body<T: DeserializeOwned>(body: &Value) -> Result<T, ApiError> {
    match inspect(body) {
        None => {}
        Some(Finding::CardNumber { pointer }) => {
            return Err(ApiError::RawCardDataForbidden { field: pointer })
        }
        Some(Finding::Nul { pointer }) => {
            return Err(ApiError::ValidationFailed(vec![FieldError::new(
                pointer,
                "must not contain the NUL character (U+0000)",
            )]))
        }
    }
    if !body.is_object() {
        return Err(ApiError::InvalidRequest(
            "the body must be a JSON object".into(),
        ));
    }
    T::deserialize(body)
        .map_err(|err| ApiError::InvalidRequest(format!("the JSON body does not fit: {err}")))
}

pub fn keyed_request(
    req: &HttpRequest,
    merchant_id: MerchantId,
    key: IdempotencyKey,
    operation: Operation,
    body: Option<&Value>,
) -> KeyedRequest {
    KeyedRequest {
        merchant_id,
        key,
        operation,
        fingerprint: fingerprint(req.method().as_str(), req.path(), body),
        request_id: request_id(req),
    }
}

/// The id [`tracing_actix_web::TracingLogger`] gave the request, as its `X-Request-Id` shows
/// it.
fn request_id(req: &HttpRequest) -> String {
    req.extensions()
        .get::<RequestId>()
        .map(|id| id.to_string())
        .unwrap_or_default()
}

/// The answer to a keyed request: `replayed` adds `Idempotent-Replayed: true`.
pub fn respond<T: Serialize>(status: u16, body: &T, replayed: bool) -> HttpResponse {
    let mut response = HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK));
    if replayed {
        response.insert_header((IDEMPOTENT_REPLAYED, "true"));
    }
    response.json(body)
}
