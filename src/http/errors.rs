//! The closed set of problems the API answers with, rendered as RFC 9457
//! `application/problem+json` with a stable machine `code`.

use std::collections::BTreeMap;

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use std::time::Duration;

use crate::db::pool::PoolError;
use crate::http::limits::exceeded::LimitExceeded;
use crate::idempotency::{ExpiredKey, IdempotencyError, KeyError};
use crate::ids::{DisputeActionId, DisputeId, HoldOperationId, OrderId, PaymentId, RefundId};
use crate::payments::attempts::pay::PayError;
use crate::payments::attempts::Refusal;
use crate::payments::event_log::LogError;
use crate::payments::orders::{FieldProblems, OrderError};
use crate::payments::reconciler::ReconcileError;
use crate::payments::webhooks::ReceiveError;

/// A problem with one field of the request, for `validation_failed`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct FieldError {
    /// The field, as a JSON pointer into the request body (`/amount`, `/metadata/size`).
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl ApiError {
    /// `validation_failed` with the field problems the domain found, in its order.
    pub fn validation_failed(problems: FieldProblems) -> Self {
        ApiError::ValidationFailed(
            problems
                .into_iter()
                .map(|(field, message)| FieldError::new(field, message))
                .collect(),
        )
    }
}

/// Seconds a client should wait before retrying after a `503`.
const UNAVAILABLE_RETRY_AFTER_SECS: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("missing or unknown API key")]
    Unauthenticated,
    /// `/metrics` on the API's port asks for the metrics token (`--metrics-token-file`).
    #[error("missing or wrong metrics token")]
    MetricsTokenRequired,
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("no such {0}")]
    NotFound(&'static str),
    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("the request has invalid fields")]
    ValidationFailed(Vec<FieldError>),
    #[error("the database is unavailable")]
    Unavailable,
    /// More requests than the database pool can serve within its acquire timeout: refused
    /// on arrival, before anything was read or written (src/http/admission.rs).
    #[error("overloaded: answering more requests than the database can serve in time")]
    Overloaded { retry_after: Duration },
    #[error("this request needs an Idempotency-Key header")]
    IdempotencyKeyMissing,
    #[error(
        "the Idempotency-Key must be 1–255 visible ASCII characters, bare or as a quoted string"
    )]
    IdempotencyKeyInvalid,
    #[error("another request with this Idempotency-Key is still in progress; retry after Retry-After seconds to get its result")]
    IdempotencyKeyInUse { retry_after: Duration },
    #[error("this Idempotency-Key was already used with another request (other body or endpoint); use a new key for a new request")]
    IdempotencyKeyReused,
    #[error("{}", expired_detail(.0))]
    IdempotencyKeyExpired(Box<ExpiredKey>),
    #[error("too many new Idempotency-Keys this minute; retry after Retry-After seconds")]
    RateLimited { retry_after: Duration },
    /// Over one of the request limits (src/http/limits.rs): refused before anything was done.
    #[error("{}", .0.detail())]
    RateLimitExceeded(Box<LimitExceeded>),
    #[error("`{field}` looks like a card number; payorch never accepts card data, send a provider payment method token instead")]
    RawCardDataForbidden { field: String },
    #[error("merchant_reference is already used by order {order_id}")]
    MerchantReferenceExists { order_id: OrderId },
    #[error("the order is {status} and cannot be canceled")]
    OrderNotCancelable { status: &'static str },
    #[error("the order already has payment attempt {payment_id} in progress; poll GET /v1/payments/{payment_id} for its result instead of paying again")]
    PaymentInProgress { payment_id: PaymentId },
    #[error(
        "the order is already paid by payment attempt {payment_id}; do not charge the payer again"
    )]
    OrderAlreadyPaid { payment_id: PaymentId },
    #[error("the order is {status} and cannot be paid; create a new order")]
    OrderNotPayable { status: &'static str },
    #[error("the webhook signature does not verify ({0}); check the webhook secret and the clock, and send the body exactly as signed")]
    WebhookSignatureInvalid(String),
    /// Anything we did not expect: logged with its cause, shown to nobody.
    #[error("internal error: {0}")]
    Internal(String),
    #[error("this path takes {allow} only")]
    MethodNotAllowed { allow: &'static str },
    #[error("the request target is longer than {limit} bytes; send long data in the body")]
    UriTooLong { limit: usize },
    #[error("the request has more than one {0} header; send it once")]
    DuplicateHeader(&'static str),
    #[error("payment {payment_id} is {status}; only a succeeded payment can be refunded")]
    PaymentNotRefundable {
        payment_id: PaymentId,
        status: &'static str,
    },
    #[error("payment {payment_id} is {status}; {}", if *capture {
        "only an `authorized` payment made with `capture_method: manual` can be captured"
    } else {
        "only an `authorized` payment, or one `pending` while a challenge waits, can be canceled"
    })]
    PaymentNotHeld {
        payment_id: PaymentId,
        status: &'static str,
        /// Asked to capture (else to cancel).
        capture: bool,
    },
    #[error("a capture or void of payment {payment_id} is already under way ({operation_id}); poll GET /v1/payments/{payment_id} for its outcome")]
    HoldOperationInProgress {
        payment_id: PaymentId,
        operation_id: HoldOperationId,
    },
    #[error("the capture is more than the {amount_capturable} authorized; ask for at most that, or leave `amount` out to capture all of it")]
    CaptureExceedsAuthorization { amount_capturable: i64 },
    #[error("the refund is more than the {amount_refundable} left to refund of this payment; ask for at most that, or leave `amount` out to refund what is left")]
    RefundExceedsPayment { amount_refundable: i64 },
    #[error("the checkout demo is off: `payorch serve` turns it on for its demo merchant (docs/guides/checkout.md, \"The checkout page\"); this server has none")]
    DemoCheckoutOff,
    #[error("the request body did not arrive within {} ms of its headers; nothing was done, send it again in one go", limit.as_millis())]
    BodyTimeout { limit: Duration },
    #[error("the merchant has {limit} webhook endpoints, the most it may have; delete one (DELETE /v1/webhook_endpoints/{{id}}) before adding another")]
    WebhookEndpointLimit { limit: i64 },
    /// A dispute that awaits no answer (closed, accepted, evidence taken): `detail` says
    /// which and what to do (docs/guides/disputes.md, "Answering a dispute").
    #[error("{detail}")]
    DisputeNotAnswerable {
        dispute_id: DisputeId,
        status: &'static str,
        detail: String,
    },
    #[error("an action on dispute {dispute_id} is already under way ({action_id}); retry its request with the same Idempotency-Key for its outcome")]
    DisputeActionInProgress {
        dispute_id: DisputeId,
        action_id: DisputeActionId,
    },
}

/// The public name of what an expired key made: its object, its id and where to read it.
fn expired_resource(expired: &ExpiredKey) -> (&'static str, String, String) {
    if expired.resource_type == "refund" {
        let id = RefundId(expired.resource_id).to_string();
        ("refund", id.clone(), format!("/v1/refunds/{id}"))
    } else if expired.resource_type == "dispute_action" {
        // An answer to a dispute shows on its dispute, which the key does not name.
        let id = DisputeActionId(expired.resource_id).to_string();
        ("dispute action", id, "/v1/disputes".to_owned())
    } else if let (Some(payment), "hold_operation") =
        (expired.payment_id, expired.resource_type.as_str())
    {
        // A capture or void is read through its payment.
        let id = PaymentId(payment).to_string();
        ("payment", id.clone(), format!("/v1/payments/{id}"))
    } else {
        let id = PaymentId(expired.resource_id).to_string();
        ("payment", id.clone(), format!("/v1/payments/{id}"))
    }
}

fn expired_detail(expired: &ExpiredKey) -> String {
    let (object, id, path) = expired_resource(expired);
    let status = expired
        .status
        .as_deref()
        .map_or_else(String::new, |status| format!(", now {status},"));
    format!(
        "this Idempotency-Key is past its lifetime; it made {object} {id}{status} and nothing was \
         done again: read its outcome with GET {path}, and send a new key only for a new {object}"
    )
}

/// The problem+json body. Extra members (`errors`, resource ids) are flattened in.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    #[serde(rename = "type")]
    pub problem_type: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Stable, machine-readable; branch on this, not on `title` or `detail`.
    pub code: String,
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl ApiError {
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "invalid_request",
            ApiError::Unauthenticated | ApiError::MetricsTokenRequired => "unauthenticated",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::ValidationFailed(_) => "validation_failed",
            ApiError::Unavailable | ApiError::Overloaded { .. } => "unavailable",
            ApiError::IdempotencyKeyMissing => "idempotency_key_missing",
            ApiError::IdempotencyKeyInvalid => "idempotency_key_invalid",
            ApiError::IdempotencyKeyInUse { .. } => "idempotency_key_in_use",
            ApiError::IdempotencyKeyReused => "idempotency_key_reused",
            ApiError::IdempotencyKeyExpired(_) => "idempotency_key_expired",
            ApiError::RateLimited { .. } | ApiError::RateLimitExceeded(_) => "rate_limited",
            ApiError::RawCardDataForbidden { .. } => "raw_card_data_forbidden",
            ApiError::MerchantReferenceExists { .. } => "merchant_reference_exists",
            ApiError::OrderNotCancelable { .. } => "order_not_cancelable",
            ApiError::PaymentInProgress { .. } => "payment_in_progress",
            ApiError::OrderAlreadyPaid { .. } => "order_already_paid",
            ApiError::OrderNotPayable { .. } => "order_not_payable",
            ApiError::WebhookSignatureInvalid(_) => "webhook_signature_invalid",
            ApiError::Internal(_) => "internal_error",
            ApiError::BodyTimeout { .. } => "request_timeout",
            ApiError::DuplicateHeader(_) => "duplicate_header",
            ApiError::MethodNotAllowed { .. } => "method_not_allowed",
            ApiError::UriTooLong { .. } => "uri_too_long",
            ApiError::DemoCheckoutOff => "demo_checkout_off",
            ApiError::PaymentNotRefundable { .. } => "payment_not_refundable",
            ApiError::RefundExceedsPayment { .. } => "refund_exceeds_payment",
            ApiError::PaymentNotHeld { capture: true, .. } => "payment_not_capturable",
            ApiError::PaymentNotHeld { capture: false, .. } => "payment_not_cancelable",
            ApiError::HoldOperationInProgress { .. } => "hold_operation_in_progress",
            ApiError::DisputeNotAnswerable { .. } => "dispute_not_answerable",
            ApiError::DisputeActionInProgress { .. } => "dispute_action_in_progress",
            ApiError::CaptureExceedsAuthorization { .. } => "capture_exceeds_authorization",
            ApiError::WebhookEndpointLimit { .. } => "webhook_endpoint_limit",
        }
    }

    /// Every `code` an answer may carry, with its HTTP status, in [`ApiError::code`]'s order:
    /// what a client branches on, as a list the documentation can be held to (the error
    /// table of docs/guides/errors.md, tests/docs_truth). `codes_tests` below holds it to `code` and
    /// `status_code`, both ways.
    pub const CODES: [(&'static str, u16); 35] = [
        ("invalid_request", 400),
        ("unauthenticated", 401),
        ("forbidden", 403),
        ("not_found", 404),
        ("payload_too_large", 413),
        ("validation_failed", 422),
        ("unavailable", 503),
        ("idempotency_key_missing", 400),
        ("idempotency_key_invalid", 400),
        ("idempotency_key_in_use", 409),
        ("idempotency_key_reused", 422),
        ("idempotency_key_expired", 409),
        ("rate_limited", 429),
        ("raw_card_data_forbidden", 422),
        ("merchant_reference_exists", 409),
        ("order_not_cancelable", 409),
        ("payment_in_progress", 409),
        ("order_already_paid", 409),
        ("order_not_payable", 409),
        ("webhook_signature_invalid", 400),
        ("internal_error", 500),
        ("request_timeout", 408),
        ("duplicate_header", 400),
        ("method_not_allowed", 405),
        ("uri_too_long", 414),
        ("demo_checkout_off", 404),
        ("payment_not_refundable", 409),
        ("refund_exceeds_payment", 409),
        ("payment_not_capturable", 409),
        ("payment_not_cancelable", 409),
        ("hold_operation_in_progress", 409),
        ("capture_exceeds_authorization", 409),
        ("webhook_endpoint_limit", 409),
        ("dispute_not_answerable", 409),
        ("dispute_action_in_progress", 409),
    ];

    fn title(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "The request is malformed",
            ApiError::Unauthenticated | ApiError::MetricsTokenRequired => "Authentication required",
            ApiError::Forbidden(_) => "This key may not do that",
            ApiError::NotFound(_) => "Not found",
            ApiError::PayloadTooLarge { .. } => "Request body too large",
            ApiError::ValidationFailed(_) => "Validation failed",
            ApiError::Unavailable | ApiError::Overloaded { .. } => "Temporarily unavailable",
            ApiError::IdempotencyKeyMissing => "Idempotency-Key missing",
            ApiError::IdempotencyKeyInvalid => "Idempotency-Key invalid",
            ApiError::IdempotencyKeyInUse { .. } => "Idempotency-Key in use",
            ApiError::IdempotencyKeyReused => "Idempotency-Key reused",
            ApiError::IdempotencyKeyExpired(_) => "Idempotency-Key expired",
            ApiError::RateLimited { .. } | ApiError::RateLimitExceeded(_) => "Rate limited",
            ApiError::RawCardDataForbidden { .. } => "Raw card data forbidden",
            ApiError::MerchantReferenceExists { .. } => "Merchant reference exists",
            ApiError::OrderNotCancelable { .. } => "Order cannot be canceled",
            ApiError::PaymentInProgress { .. } => "Payment in progress",
            ApiError::OrderAlreadyPaid { .. } => "Order already paid",
            ApiError::OrderNotPayable { .. } => "Order cannot be paid",
            ApiError::WebhookSignatureInvalid(_) => "Webhook signature invalid",
            ApiError::Internal(_) => "Internal error",
            ApiError::BodyTimeout { .. } => "Request body too slow",
            ApiError::DuplicateHeader(_) => "Header sent twice",
            ApiError::MethodNotAllowed { .. } => "Method not allowed",
            ApiError::UriTooLong { .. } => "Request target too long",
            ApiError::DemoCheckoutOff => "Checkout demo off",
            ApiError::PaymentNotRefundable { .. } => "Payment not refundable",
            ApiError::RefundExceedsPayment { .. } => "Refund exceeds payment",
            ApiError::PaymentNotHeld { capture: true, .. } => "Payment not capturable",
            ApiError::PaymentNotHeld { capture: false, .. } => "Payment not cancelable",
            ApiError::HoldOperationInProgress { .. } => "Capture or void in progress",
            ApiError::DisputeNotAnswerable { .. } => "Dispute takes no answer",
            ApiError::DisputeActionInProgress { .. } => "Dispute action in progress",
            ApiError::CaptureExceedsAuthorization { .. } => "Capture exceeds authorization",
            ApiError::WebhookEndpointLimit { .. } => "Webhook endpoint limit reached",
        }
    }

    /// What the caller should do next, in words.
    fn detail(&self) -> String {
        match self {
            ApiError::Unauthenticated => {
                "send `Authorization: Bearer <secret>` with a live merchant or support key".into()
            }
            ApiError::MetricsTokenRequired => {
                "send `Authorization: Bearer <token>` with the metrics token this server was \
                 given (--metrics-token-file)"
                    .into()
            }
            ApiError::Unavailable => format!(
                "the database cannot be reached; nothing was changed, retry after {UNAVAILABLE_RETRY_AFTER_SECS} s"
            ),
            ApiError::Overloaded { retry_after } => format!(
                "payorch has more requests in hand than its database can serve in time; \
                 nothing was done, retry after {} s with the same Idempotency-Key",
                retry_after.as_secs().max(1)
            ),
            ApiError::Internal(_) => {
                "an unexpected error happened; it is logged with this response's X-Request-Id".into()
            }
            ApiError::ValidationFailed(_) => "see `errors` for each field to fix".into(),
            other => other.to_string(),
        }
    }

    fn extra(&self) -> BTreeMap<String, serde_json::Value> {
        let mut extra = BTreeMap::new();
        match self {
            ApiError::ValidationFailed(errors) => {
                extra.insert("errors".into(), serde_json::json!(errors));
            }
            ApiError::MerchantReferenceExists { order_id } => {
                extra.insert("order_id".into(), serde_json::json!(order_id));
            }
            ApiError::RawCardDataForbidden { field } => {
                extra.insert("field".into(), serde_json::json!(field));
            }
            ApiError::DuplicateHeader(header) => {
                extra.insert("header".into(), serde_json::json!(header));
            }
            ApiError::OrderNotCancelable { status } | ApiError::OrderNotPayable { status } => {
                extra.insert("order_status".into(), serde_json::json!(status));
            }
            ApiError::PaymentInProgress { payment_id }
            | ApiError::OrderAlreadyPaid { payment_id } => {
                extra.insert("payment_id".into(), serde_json::json!(payment_id));
            }
            ApiError::PaymentNotRefundable { payment_id, status } => {
                extra.insert("payment_id".into(), serde_json::json!(payment_id));
                extra.insert("payment_status".into(), serde_json::json!(status));
            }
            ApiError::WebhookEndpointLimit { limit } => {
                extra.insert("limit".into(), serde_json::json!(limit));
            }
            ApiError::RateLimitExceeded(exceeded) => {
                extra.insert("policy".into(), serde_json::json!(exceeded.policy.name()));
            }
            ApiError::PaymentNotHeld {
                payment_id, status, ..
            } => {
                extra.insert("payment_id".into(), serde_json::json!(payment_id));
                extra.insert("payment_status".into(), serde_json::json!(status));
            }
            ApiError::HoldOperationInProgress {
                payment_id,
                operation_id,
            } => {
                extra.insert("payment_id".into(), serde_json::json!(payment_id));
                extra.insert("operation_id".into(), serde_json::json!(operation_id));
            }
            ApiError::DisputeNotAnswerable {
                dispute_id, status, ..
            } => {
                extra.insert("dispute_id".into(), serde_json::json!(dispute_id));
                extra.insert("dispute_status".into(), serde_json::json!(status));
            }
            ApiError::DisputeActionInProgress {
                dispute_id,
                action_id,
            } => {
                extra.insert("dispute_id".into(), serde_json::json!(dispute_id));
                extra.insert("action_id".into(), serde_json::json!(action_id));
            }
            ApiError::CaptureExceedsAuthorization { amount_capturable } => {
                extra.insert(
                    "amount_capturable".into(),
                    serde_json::json!(amount_capturable),
                );
            }
            ApiError::RefundExceedsPayment { amount_refundable } => {
                extra.insert(
                    "amount_refundable".into(),
                    serde_json::json!(amount_refundable),
                );
            }
            ApiError::IdempotencyKeyExpired(expired) => {
                let (object, id, path) = expired_resource(expired);
                extra.insert("resource_type".into(), serde_json::json!(object));
                extra.insert("resource_id".into(), serde_json::json!(id));
                extra.insert("resource_status".into(), serde_json::json!(expired.status));
                extra.insert("resource_url".into(), serde_json::json!(path));
                if let Some(order_id) = expired.order_id {
                    extra.insert("order_id".into(), serde_json::json!(OrderId(order_id)));
                }
                if let Some(payment_id) = expired.payment_id {
                    extra.insert(
                        "payment_id".into(),
                        serde_json::json!(PaymentId(payment_id)),
                    );
                }
            }
            _ => {}
        }
        extra
    }

    pub fn problem(&self) -> Problem {
        Problem {
            problem_type: format!("https://payorch.dev/problems/{}", self.code()),
            title: self.title().into(),
            status: self.status_code().as_u16(),
            detail: self.detail(),
            code: self.code().into(),
            extra: self.extra(),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthenticated | ApiError::MetricsTokenRequired => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) | ApiError::DemoCheckoutOff => StatusCode::NOT_FOUND,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::ValidationFailed(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unavailable | ApiError::Overloaded { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::IdempotencyKeyMissing
            | ApiError::IdempotencyKeyInvalid
            | ApiError::WebhookSignatureInvalid(_) => StatusCode::BAD_REQUEST,
            ApiError::IdempotencyKeyInUse { .. }
            | ApiError::IdempotencyKeyExpired(_)
            | ApiError::MerchantReferenceExists { .. }
            | ApiError::OrderNotCancelable { .. }
            | ApiError::PaymentInProgress { .. }
            | ApiError::OrderAlreadyPaid { .. }
            | ApiError::OrderNotPayable { .. }
            | ApiError::PaymentNotRefundable { .. }
            | ApiError::RefundExceedsPayment { .. }
            | ApiError::PaymentNotHeld { .. }
            | ApiError::HoldOperationInProgress { .. }
            | ApiError::CaptureExceedsAuthorization { .. }
            | ApiError::DisputeNotAnswerable { .. }
            | ApiError::DisputeActionInProgress { .. }
            | ApiError::WebhookEndpointLimit { .. } => StatusCode::CONFLICT,
            ApiError::IdempotencyKeyReused | ApiError::RawCardDataForbidden { .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ApiError::RateLimited { .. } | ApiError::RateLimitExceeded(_) => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            ApiError::DuplicateHeader(_) => StatusCode::BAD_REQUEST,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::UriTooLong { .. } => StatusCode::URI_TOO_LONG,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            ApiError::Internal(cause) => tracing::error!(%cause, "internal error"),
            ApiError::Unavailable => tracing::warn!("database unavailable"),
            _ => {}
        }
        let mut response = HttpResponse::build(self.status_code());
        response.insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        ));
        match self {
            ApiError::Unavailable => {
                response.insert_header((header::RETRY_AFTER, UNAVAILABLE_RETRY_AFTER_SECS as u64));
            }
            ApiError::IdempotencyKeyInUse { retry_after }
            | ApiError::RateLimited { retry_after }
            | ApiError::Overloaded { retry_after } => {
                response.insert_header((header::RETRY_AFTER, retry_after.as_secs().max(1)));
            }
            ApiError::RateLimitExceeded(exceeded) => {
                for header in exceeded.headers() {
                    response.insert_header(header);
                }
            }
            _ => {}
        }
        if let ApiError::Unauthenticated | ApiError::MetricsTokenRequired = self {
            response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
        }
        if let ApiError::MethodNotAllowed { allow } = self {
            response.insert_header((header::ALLOW, *allow));
        }
        if let ApiError::BodyTimeout { .. } | ApiError::PayloadTooLarge { .. } = self {
            // The rest of the body may never come, or is not wanted: end the connection
            // rather than read on.
            response.force_close();
        }
        response.json(self.problem())
    }
}

impl From<PoolError> for ApiError {
    fn from(err: PoolError) -> Self {
        tracing::warn!(error = %err, "no database connection");
        ApiError::Unavailable
    }
}

impl From<diesel::result::Error> for ApiError {
    fn from(err: diesel::result::Error) -> Self {
        use diesel::result::{DatabaseErrorKind, Error};
        match &err {
            // The server went away under us (stopped, restarted, network): nothing committed.
            Error::DatabaseError(
                DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand,
                _,
            )
            | Error::BrokenTransactionManager => {
                tracing::warn!(error = %err, "database connection lost");
                ApiError::Unavailable
            }
            Error::DatabaseError(_, info) if is_connection_failure(info.message()) => {
                tracing::warn!(error = %err, "database connection lost");
                ApiError::Unavailable
            }
            _ => ApiError::Internal(err.to_string()),
        }
    }
}

/// A server shutting down ends sessions with SQLSTATE 57P01/57P03 (and a demoted one refuses
/// writes with 25006), which diesel passes on as
/// `Unknown` without the code; its fixed server messages are all that is left to tell them by.
fn is_connection_failure(message: &str) -> bool {
    const SIGNS: [&str; 8] = [
        "terminating connection due to administrator command",
        "the database system is shutting down",
        "the database system is starting up",
        // The postmaster killed (its sessions end with it), or a sibling crashed and every
        // session is ended for crash recovery, which the server then runs.
        "terminating connection due to unexpected postmaster exit",
        "terminating connection because of crash of another server process",
        "the database system is in recovery mode",
        "the database system is not yet accepting connections",
        // A primary demoted under an open session (a failover): the write goes elsewhere now.
        "in a read-only transaction",
    ];
    SIGNS.iter().any(|sign| message.contains(sign))
}

impl From<KeyError> for ApiError {
    fn from(err: KeyError) -> Self {
        match err {
            KeyError::Missing => ApiError::IdempotencyKeyMissing,
            KeyError::Invalid => ApiError::IdempotencyKeyInvalid,
        }
    }
}

impl From<IdempotencyError> for ApiError {
    fn from(err: IdempotencyError) -> Self {
        match err {
            IdempotencyError::InUse { retry_after } => {
                ApiError::IdempotencyKeyInUse { retry_after }
            }
            IdempotencyError::Reused => ApiError::IdempotencyKeyReused,
            IdempotencyError::Expired(expired) => ApiError::IdempotencyKeyExpired(expired),
            IdempotencyError::RateLimited { retry_after } => ApiError::RateLimited { retry_after },
            IdempotencyError::Database(err) => err.into(),
            IdempotencyError::Unavailable(err) => err.into(),
        }
    }
}

impl From<OrderError> for ApiError {
    fn from(err: OrderError) -> Self {
        match err {
            OrderError::Invalid(problems) => ApiError::validation_failed(problems),
            OrderError::Idempotency(err) => err.into(),
            OrderError::MerchantReferenceExists(order_id) => {
                ApiError::MerchantReferenceExists { order_id }
            }
            OrderError::NotFound => ApiError::NotFound("order"),
            OrderError::NotCancelable(status) => ApiError::OrderNotCancelable {
                status: status.as_str(),
            },
            OrderError::Unavailable(err) => err.into(),
            OrderError::Database(err) => err.into(),
            OrderError::Inconsistent(what) => ApiError::Internal(what),
        }
    }
}

impl From<PayError> for ApiError {
    fn from(err: PayError) -> Self {
        match err {
            PayError::Invalid(problems) => ApiError::validation_failed(problems),
            PayError::Idempotency(err) => err.into(),
            PayError::Refused(Refusal::InProgress(payment_id)) => {
                ApiError::PaymentInProgress { payment_id }
            }
            PayError::Refused(Refusal::AlreadyPaid(payment_id)) => {
                ApiError::OrderAlreadyPaid { payment_id }
            }
            PayError::Refused(Refusal::NotPayable(status)) => ApiError::OrderNotPayable {
                status: status.as_str(),
            },
            PayError::Refused(Refusal::OrderNotFound) => ApiError::NotFound("order"),
            PayError::Order(err) => err.into(),
            PayError::Unavailable(err) => err.into(),
            PayError::Database(err) => err.into(),
            PayError::Inconsistent(what) => ApiError::Internal(what),
        }
    }
}

impl From<ReconcileError> for ApiError {
    fn from(err: ReconcileError) -> Self {
        match err {
            ReconcileError::Unavailable(err) => err.into(),
            ReconcileError::Database(err) => err.into(),
        }
    }
}

impl From<ReceiveError> for ApiError {
    fn from(err: ReceiveError) -> Self {
        match err {
            ReceiveError::Unavailable(err) => err.into(),
            ReceiveError::Database(err) | ReceiveError::Log(LogError::Database(err)) => err.into(),
            // No connection, or the server is shutting down: the provider redelivers.
            ReceiveError::Log(err @ (LogError::Unavailable(_) | LogError::Stopped)) => {
                tracing::warn!(error = %err, "webhook event not recorded");
                ApiError::Unavailable
            }
        }
    }
}

#[cfg(test)]
mod connection_failure_tests {
    use super::*;

    #[test]
    fn a_server_that_died_or_recovers_is_unavailable_not_an_internal_error() {
        // Seen in the chaos failover run: the postmaster SIGKILLed while its keeper lived.
        for message in [
            "terminating connection due to unexpected postmaster exit",
            "terminating connection because of crash of another server process",
            "FATAL: the database system is in recovery mode",
            "cannot execute INSERT in a read-only transaction",
        ] {
            let err = diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::Unknown,
                Box::new(message.to_string()),
            );
            assert!(
                matches!(ApiError::from(err), ApiError::Unavailable),
                "{message}"
            );
        }
        let other = diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::Unknown,
            Box::new("division by zero".to_string()),
        );
        assert!(matches!(ApiError::from(other), ApiError::Internal(_)));
    }
}

#[cfg(test)]
mod codes_tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use uuid::Uuid;

    use super::*;
    use crate::http::limits::exceeded::Policy;
    use crate::rate_limit::Quota;

    /// One error of every variant (both of `PaymentNotHeld`'s codes). The match below names
    /// every variant without a wildcard, so a new one fails to compile here until it is
    /// added to this list, and then to `ApiError::CODES` if its code is new.
    fn one_of_each() -> Vec<ApiError> {
        let expired = ExpiredKey {
            resource_type: "refund".into(),
            resource_id: Uuid::nil(),
            status: None,
            order_id: None,
            payment_id: None,
        };
        let exceeded = LimitExceeded {
            policy: Policy::ReadsPerKey,
            quota: Quota::per_minute(1),
            retry_after: Duration::from_secs(1),
        };
        let (payment_id, second) = (PaymentId(Uuid::nil()), Duration::from_secs(1));
        let all = vec![
            ApiError::InvalidRequest(String::new()),
            ApiError::Unauthenticated,
            ApiError::MetricsTokenRequired,
            ApiError::Forbidden(""),
            ApiError::NotFound(""),
            ApiError::PayloadTooLarge { limit: 1 },
            ApiError::ValidationFailed(Vec::new()),
            ApiError::Unavailable,
            ApiError::Overloaded {
                retry_after: second,
            },
            ApiError::IdempotencyKeyMissing,
            ApiError::IdempotencyKeyInvalid,
            ApiError::IdempotencyKeyInUse {
                retry_after: second,
            },
            ApiError::IdempotencyKeyReused,
            ApiError::IdempotencyKeyExpired(Box::new(expired)),
            ApiError::RateLimited {
                retry_after: second,
            },
            ApiError::RateLimitExceeded(Box::new(exceeded)),
            ApiError::RawCardDataForbidden {
                field: String::new(),
            },
            ApiError::MerchantReferenceExists {
                order_id: OrderId(Uuid::nil()),
            },
            ApiError::OrderNotCancelable { status: "paid" },
            ApiError::PaymentInProgress { payment_id },
            ApiError::OrderAlreadyPaid { payment_id },
            ApiError::OrderNotPayable { status: "paid" },
            ApiError::WebhookSignatureInvalid(String::new()),
            ApiError::Internal(String::new()),
            ApiError::MethodNotAllowed { allow: "GET" },
            ApiError::UriTooLong { limit: 1 },
            ApiError::DuplicateHeader("Idempotency-Key"),
            ApiError::PaymentNotRefundable {
                payment_id,
                status: "failed",
            },
            ApiError::PaymentNotHeld {
                payment_id,
                status: "failed",
                capture: true,
            },
            ApiError::PaymentNotHeld {
                payment_id,
                status: "failed",
                capture: false,
            },
            ApiError::HoldOperationInProgress {
                payment_id,
                operation_id: HoldOperationId(Uuid::nil()),
            },
            ApiError::CaptureExceedsAuthorization {
                amount_capturable: 1,
            },
            ApiError::RefundExceedsPayment {
                amount_refundable: 1,
            },
            ApiError::DemoCheckoutOff,
            ApiError::BodyTimeout { limit: second },
            ApiError::WebhookEndpointLimit { limit: 1 },
            ApiError::DisputeNotAnswerable {
                dispute_id: DisputeId(Uuid::nil()),
                status: "lost",
                detail: String::new(),
            },
            ApiError::DisputeActionInProgress {
                dispute_id: DisputeId(Uuid::nil()),
                action_id: DisputeActionId(Uuid::nil()),
            },
        ];
        for error in &all {
            match error {
                ApiError::InvalidRequest(_)
                | ApiError::Unauthenticated
                | ApiError::MetricsTokenRequired
                | ApiError::Forbidden(_)
                | ApiError::NotFound(_)
                | ApiError::PayloadTooLarge { .. }
                | ApiError::ValidationFailed(_)
                | ApiError::Unavailable
                | ApiError::Overloaded { .. }
                | ApiError::IdempotencyKeyMissing
                | ApiError::IdempotencyKeyInvalid
                | ApiError::IdempotencyKeyInUse { .. }
                | ApiError::IdempotencyKeyReused
                | ApiError::IdempotencyKeyExpired(_)
                | ApiError::RateLimited { .. }
                | ApiError::RateLimitExceeded(_)
                | ApiError::RawCardDataForbidden { .. }
                | ApiError::MerchantReferenceExists { .. }
                | ApiError::OrderNotCancelable { .. }
                | ApiError::PaymentInProgress { .. }
                | ApiError::OrderAlreadyPaid { .. }
                | ApiError::OrderNotPayable { .. }
                | ApiError::WebhookSignatureInvalid(_)
                | ApiError::Internal(_)
                | ApiError::MethodNotAllowed { .. }
                | ApiError::UriTooLong { .. }
                | ApiError::DuplicateHeader(_)
                | ApiError::PaymentNotRefundable { .. }
                | ApiError::PaymentNotHeld { .. }
                | ApiError::HoldOperationInProgress { .. }
                | ApiError::CaptureExceedsAuthorization { .. }
                | ApiError::RefundExceedsPayment { .. }
                | ApiError::DemoCheckoutOff
                | ApiError::BodyTimeout { .. }
                | ApiError::WebhookEndpointLimit { .. }
                | ApiError::DisputeNotAnswerable { .. }
                | ApiError::DisputeActionInProgress { .. } => {}
            }
        }
        all
    }

    #[test]
    fn codes_lists_every_code_answered_with_its_status_and_nothing_else() {
        let answered: BTreeSet<(&str, u16)> = one_of_each()
            .iter()
            .map(|e| (e.code(), e.status_code().as_u16()))
            .collect();
        let listed: BTreeSet<(&str, u16)> = ApiError::CODES.into_iter().collect();
        assert_eq!(listed.len(), ApiError::CODES.len(), "a code listed twice");
        let unlisted: Vec<_> = answered.difference(&listed).collect();
        let never_answered: Vec<_> = listed.difference(&answered).collect();
        assert!(
            unlisted.is_empty(),
            "add to ApiError::CODES (and to docs/guides/errors.md's table): {unlisted:?}"
        );
        assert!(
            never_answered.is_empty(),
            "no variant answers these; remove them from ApiError::CODES: {never_answered:?}"
        );
    }
}
