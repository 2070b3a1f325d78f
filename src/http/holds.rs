//! Captures and voids as the API shows them (docs/guides/captures.md, "Authorize now, capture later"):
//! `POST /v1/payments/{id}/capture` and `POST /v1/payments/{id}/cancel`, keyed like every
//! POST; and support's `POST /v1/support/payments/{id}/void` (the console's "Void the hold").

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use crate::accounts::Caller;
use crate::http::errors::ApiError;
use crate::http::keyed::{respond, Keyed, KeyedBody};
use crate::http::payments::parse_payment_id;
use crate::http::support::{audited, operator};
use crate::http::AppState;
use crate::idempotency::{KeyedRequest, Operation};
use crate::ids::PaymentId;
use crate::payments::attempts::find_attempt;
use crate::payments::holds::operate::{operate, void_without_key, why_refused, HoldInput};
use crate::payments::holds::{reason, HoldError, HoldKind};
use crate::payments::money::MinorUnits;
use crate::payments::support::audit::{Action, Done};
use crate::payments::Source;
use crate::views::holds::OperatedView;

/// What to take of the hold.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CaptureBody {
    /// In minor units, at most what was authorized; default: all of it. The rest of the hold
    /// is released.
    #[schema(value_type = Option<i64>)]
    amount: Option<MinorUnits>,
}

/// A void takes no fields.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelBody {}

impl KeyedBody for CaptureBody {
    const OPERATION: Operation = Operation::CapturePayment;
    type Id = PaymentId;
}

impl KeyedBody for CancelBody {
    const OPERATION: Operation = Operation::CancelPayment;
    type Id = PaymentId;
}

pub(crate) fn problem(err: HoldError, payment_id: PaymentId) -> ApiError {
    match err {
        HoldError::Invalid(problems) => ApiError::validation_failed(problems),
        HoldError::Idempotency(err) => err.into(),
        HoldError::PaymentNotFound => ApiError::NotFound("payment"),
        HoldError::NotHeld { kind, status } => ApiError::PaymentNotHeld {
            payment_id,
            status: status.as_str(),
            capture: kind == HoldKind::Capture,
        },
        HoldError::InProgress { operation } => ApiError::HoldOperationInProgress {
            payment_id,
            operation_id: operation,
        },
        HoldError::ExceedsHold { capturable } => ApiError::CaptureExceedsAuthorization {
            amount_capturable: capturable,
        },
        HoldError::Unavailable(err) => err.into(),
        HoldError::Database(err) => err.into(),
        HoldError::Inconsistent(what) => ApiError::Internal(what),
    }
}

/// Capture an authorized payment
///
/// Takes `amount` (absent: all of it) of what a payment made with `capture_method: manual` holds;
/// the rest of the hold is released. Answered with the capture and the payment as it is after it
/// (docs/guides/captures.md, "Authorize now, capture later"). Send an `Idempotency-Key`: the same key and body again
/// answers with the first status, `Idempotent-Replayed: true` and the resource as it is now; the
/// same key with another request (another body or path) is `422 idempotency_key_reused` (docs/guides/idempotency.md,
/// "Idempotency").
#[utoipa::path(post, path = "/v1/payments/{id}/capture", tag = "payments",
    request_body(content = CaptureBody, example = json!(crate::views::examples::capture_request())),
    params(
        ("id" = String, Path, description = "payment attempt id, `pay_…`, `authorized` with `capture_method: manual`", example = json!(crate::views::examples::PAYMENT)),
        ("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, body = OperatedView, description = "the capture (`succeeded`, `failed` if the provider refused it, or `pending`: payorch asks again under the same key) and the payment as it is now; or replayed with `Idempotent-Replayed: true`", example = json!(crate::views::examples::operated("capture"))),
        (status = 404, body = crate::http::errors::Problem),
        (status = 409, body = crate::http::errors::Problem, description = "payment_not_capturable (names `payment_status`), capture_exceeds_authorization (names `amount_capturable`), hold_operation_in_progress (names `operation_id`), idempotency_key_in_use, idempotency_key_expired"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed, idempotency_key_reused"),
    ))]
pub async fn capture(
    state: web::Data<AppState>,
    keyed: Keyed<CaptureBody>,
) -> Result<HttpResponse, ApiError> {
    let amount = keyed.body.amount;
    operate_on(&state, keyed.request, keyed.id, HoldKind::Capture, amount).await
}

/// Void an authorized payment (release the hold)
///
/// Releases what an `authorized` payment holds, or abandons one whose 3-D Secure challenge still
/// waits; the payment ends `canceled` with `cancellation_reason` `voided` (docs/guides/captures.md, "Authorize now,
/// capture later"). The body is an empty object. Send an `Idempotency-Key`: the same key and body
/// again answers with the first status, `Idempotent-Replayed: true` and the resource as it is now;
/// the same key with another request (another body or path) is `422 idempotency_key_reused`
/// (docs/guides/idempotency.md, "Idempotency").
#[utoipa::path(post, path = "/v1/payments/{id}/cancel", tag = "payments",
    request_body(content = CancelBody, example = json!(crate::views::examples::cancel_request())),
    params(
        ("id" = String, Path, description = "payment attempt id, `pay_…`, `authorized`, or `pending` while a challenge waits", example = json!(crate::views::examples::PAYMENT)),
        ("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, body = OperatedView, description = "the void (`succeeded`: the hold is released and the payment `canceled`; `failed`; or `pending`) and the payment as it is now; or replayed with `Idempotent-Replayed: true`", example = json!(crate::views::examples::operated("void"))),
        (status = 404, body = crate::http::errors::Problem),
        (status = 409, body = crate::http::errors::Problem, description = "payment_not_cancelable (names `payment_status`), hold_operation_in_progress (names `operation_id`), idempotency_key_in_use, idempotency_key_expired"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed, idempotency_key_reused"),
    ))]
pub async fn cancel(
    state: web::Data<AppState>,
    keyed: Keyed<CancelBody>,
) -> Result<HttpResponse, ApiError> {
    operate_on(&state, keyed.request, keyed.id, HoldKind::Void, None).await
}

async fn operate_on(
    state: &AppState,
    request: KeyedRequest,
    payment_id: PaymentId,
    kind: HoldKind,
    amount: Option<MinorUnits>,
) -> Result<HttpResponse, ApiError> {
    let input = HoldInput {
        payment_id,
        kind,
        amount,
        source: Source::Api,
    };
    let operated = operate(&state.context(&request, input))
        .await
        .map_err(|err| problem(err, payment_id))?;
    tracing::Span::current().record("order", tracing::field::display(operated.payment.order_id));
    let (status, replayed) = (operated.status, operated.replayed);
    Ok(respond(status, &OperatedView::from(operated), replayed))
}

/// Void a payment's hold on the merchant's behalf (support)
///
/// Releases what an `authorized` payment holds (or abandons a challenge that still waits), as the
/// merchant's `POST /v1/payments/{id}/cancel` does. Needs no `Idempotency-Key`: pressing twice
/// finds the hold released or the void under way. A support key with the `operate` role; audited.
#[utoipa::path(post, path = "/v1/support/payments/{id}/void", tag = "support",
    params(("id" = String, Path, description = "payment id, `pay_…`, `authorized`, or `pending` while a challenge waits", example = json!(crate::views::examples::PAYMENT))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = OperatedView, description = "the void and the payment as it is now; safe to press twice (the second finds the hold released, or the void under way)", example = json!(crate::views::examples::operated("void"))),
        (status = 403, body = crate::http::errors::Problem, description = "not a support key, or a support key without the `operate` role"),
        (status = 404, body = crate::http::errors::Problem),
        (status = 409, body = crate::http::errors::Problem, description = "payment_not_cancelable (names `payment_status`), hold_operation_in_progress (names `operation_id`)"),
        (status = 503, body = crate::http::errors::Problem, description = "the database is unavailable: nothing is done unless it is on record in the audit first; safe to press again"),
    ))]
pub async fn support_void(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let actor = operator(&state, &caller).await?;
    let payment_id = parse_payment_id(&path)?;
    let payment = {
        let mut conn = state.pool.get().await?;
        find_attempt(&mut conn, None, payment_id)
            .await?
            .ok_or(ApiError::NotFound("payment"))?
    };
    tracing::info!(support_key = %actor.key_name, status = payment.status.as_str(), "support voids a hold");
    let merchant_id = payment.merchant_id;
    let done = Done {
        action: Action::VoidPayment,
        target_id: payment_id.0,
        merchant_id,
        order_id: Some(payment.order_id),
        before: Some(serde_json::json!({ "status": payment.status.as_str() })),
        after: None,
    };
    let void = async {
        match void_without_key(
            &state.pool,
            &state.payments,
            payment,
            (Source::Support, reason::VOIDED),
        )
        .await
        {
            Ok(Some(operated)) => Ok(operated),
            Ok(None) => {
                let mut conn = state.pool.get().await?;
                let err = why_refused(&mut conn, merchant_id, payment_id, HoldKind::Void, None)
                    .await
                    .unwrap_or_else(|err| err);
                Err(problem(err, payment_id))
            }
            Err(err) => Err(problem(err, payment_id)),
        }
    };
    let operated = audited(&state, &actor, done, void, |o| {
        serde_json::json!({
            "status": o.payment.status.as_str(),
            "void": o.operation.status.as_str(),
        })
    })
    .await?;
    Ok(HttpResponse::Ok().json(OperatedView::from(operated)))
}
