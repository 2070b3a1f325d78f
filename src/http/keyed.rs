//! What every keyed handler does before its work, done once by the [`Keyed`] extractor: the
//! merchant's key (a support key may not write), the `Idempotency-Key` header, the resource
//! id of the path, the JSON body read strictly (card data refused), the fingerprint; and how a
//! result is rendered, fresh or replayed. A handler names its operation by its body's type
//! ([`KeyedBody`]), so the operation is declared once per handler (docs/DESIGN.md, "Adding a
//! keyed operation").

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest, HttpResponse};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tracing_actix_web::RequestId;

use crate::accounts::Caller;
use crate::http::card_data::{contains_card_number, inspect, Finding};
use crate::http::errors::{ApiError, FieldError};
use crate::http::strict_json::StrictJson;
use crate::idempotency::{fingerprint, IdempotencyKey, KeyedRequest, Operation};
use crate::ids::MerchantId;

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// What a keyed POST carries, declared on the type its body is read as: the operation (so a
/// handler names it once, by the type it extracts), the resource its path names, and whether
/// it has a body at all.
pub trait KeyedBody: DeserializeOwned + 'static {
    const OPERATION: Operation;
    /// The resource id of the path's `{id}`; `()` for a path without one.
    type Id: PathId;
    /// `false` for a POST that takes no body (a cancel, a rotation): whatever it sends is not
    /// read and is no part of the fingerprint, and the type is read from `null` (a unit
    /// struct).
    const HAS_BODY: bool = true;
}

/// A resource id as a keyed path names it. A malformed id is `404`, as an unknown one is.
pub trait PathId: Sized {
    fn from_path(raw: &str) -> Result<Self, ApiError>;
}

/// A path without an id.
impl PathId for () {
    fn from_path(_: &str) -> Result<Self, ApiError> {
        Ok(())
    }
}

/// A keyed request, read: the [`KeyedRequest`] the claim takes, the path's id, the body.
///
/// As an extractor it does, in this order (each refusal as it always answered): the caller's
/// key (`401`; the body is not read before it), the JSON body's syntax (`400`, `413`, unless
/// the operation takes no body), a merchant key (`403` for a support key), the
/// `Idempotency-Key` (`400`, `422` with card data), the path's id (`404`), the body's fields
/// (`400`, `422`).
pub struct Keyed<B: KeyedBody> {
    pub request: KeyedRequest,
    pub id: B::Id,
    pub body: B,
}

impl<B: KeyedBody> Keyed<B> {
    /// The preamble for `caller`, whose request's body is `body` (`None`: it takes none): the
    /// extractor's, and the checkout demo's, which acts as its merchant with a body it sets.
    pub fn read(caller: Caller, req: &HttpRequest, body: Option<&Value>) -> Result<Self, ApiError> {
        let merchant_id = caller.merchant_for_write()?;
        let key = idempotency_key(req)?;
        let id = B::Id::from_path(req.match_info().get("id").unwrap_or_default())?;
        let (body, fingerprinted) = if B::HAS_BODY {
            let body = body.unwrap_or(&Value::Null);
            (read_body::<B>(body)?, Some(body))
        } else {
            let none = B::deserialize(Value::Null).map_err(|err| {
                ApiError::Internal(format!("a body-less operation's type: {err}"))
            })?;
            (none, None)
        };
        Ok(Keyed {
            request: keyed_request(req, merchant_id, key, B::OPERATION, fingerprinted),
            id,
            body,
        })
    }
}

impl<B: KeyedBody> FromRequest for Keyed<B> {
    type Error = actix_web::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self, actix_web::Error>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let req = req.clone();
        let caller = Caller::from_request(&req, payload);
        // Polled only after the caller is known, so an unauthenticated body is never read.
        let json = B::HAS_BODY.then(|| web::Json::<StrictJson>::from_request(&req, payload));
        Box::pin(async move {
            let caller = caller.await?;
            let body = match json {
                Some(json) => Some(json.await?.into_inner().0),
                None => None,
            };
            Ok(Keyed::read(caller, &req, body.as_ref())?)
        })
    }
}

/// The key of a state-changing request, in its place in the tracing span.
fn idempotency_key(req: &HttpRequest) -> Result<IdempotencyKey, ApiError> {
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

fn keyed_request(
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
