//! Refunds as the API shows them (docs/guides/refunds.md, "Refunds"): `POST /v1/payments/{id}/refunds`,
//! `GET /v1/refunds/{id}`, and support's `POST /v1/support/refunds/{id}/reconcile`.

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use serde::Deserialize;

use crate::accounts::Caller;
use crate::http::errors::ApiError;
use crate::http::keyed::{respond, Keyed, KeyedBody};
use crate::http::support::{audited, operator};
use crate::http::AppState;
use crate::idempotency::Operation;
use crate::ids::{PaymentId, RefundId};
use crate::payments::money::MinorUnits;
use crate::payments::refunds::refund::{self, RefundInput};
use crate::payments::refunds::{self, RefundError};
use crate::payments::support::audit::{Action, Done};
use crate::payments::Source;
use crate::views::Refund;

/// What to give back; both optional.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRefundBody {
    /// In minor units, 1 to 10^12; default: all that is left to refund.
    #[schema(value_type = Option<i64>)]
    amount: Option<MinorUnits>,
    /// Free text for the merchant's records, up to 1000 characters.
    reason: Option<String>,
}

impl KeyedBody for CreateRefundBody {
    const OPERATION: Operation = Operation::CreateRefund;
    type Id = PaymentId;
}

fn refund_location(id: RefundId) -> String {
    format!("/v1/refunds/{id}")
}

fn problem(err: RefundError, payment_id: PaymentId) -> ApiError {
    match err {
        RefundError::Invalid(problems) => ApiError::validation_failed(problems),
        RefundError::Idempotency(err) => err.into(),
        RefundError::PaymentNotFound => ApiError::NotFound("payment"),
        RefundError::NotRefundable { status } => ApiError::PaymentNotRefundable {
            payment_id,
            status: status.as_str(),
        },
        RefundError::ExceedsPayment { refundable } => ApiError::RefundExceedsPayment {
            amount_refundable: refundable,
        },
        RefundError::Unavailable(err) => err.into(),
        RefundError::Database(err) => err.into(),
        RefundError::Inconsistent(what) => ApiError::Internal(what),
    }
}

/// Refund a payment, in whole or in part
///
/// Gives back `amount` (absent: all that is left) of a `succeeded` payment, answered `201` with the
/// refund (`succeeded`, `failed`, or `pending`: poll `Location`). Several partial refunds may
/// follow one another up to what was paid; more is `409 refund_exceeds_payment`, naming what is
/// left (docs/guides/refunds.md, "Refunds"). Send an `Idempotency-Key`: the same key and body again answers with
/// the first status, `Idempotent-Replayed: true` and the resource as it is now; the same key with
/// another request (another body or path) is `422 idempotency_key_reused` (docs/guides/idempotency.md, "Idempotency").
#[utoipa::path(post, path = "/v1/payments/{id}/refunds", tag = "refunds",
    request_body(content = CreateRefundBody, example = json!(crate::views::examples::create_refund_request())),
    params(
        ("id" = String, Path, description = "payment attempt id, `pay_…`", example = json!(crate::views::examples::PAYMENT)),
        ("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 201, body = Refund, description = "the refund, `succeeded`, `failed` or `pending` (poll `Location`); or replayed with `Idempotent-Replayed: true`", example = json!(crate::views::examples::refund())),
        (status = 404, body = crate::http::errors::Problem),
        (status = 409, body = crate::http::errors::Problem, description = "payment_not_refundable, refund_exceeds_payment (names `amount_refundable`), idempotency_key_in_use, idempotency_key_expired (the key is past its lifetime and its payment or refund final: names `resource_id`, `resource_status`, `resource_url`; nothing is done again)"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed, idempotency_key_reused"),
    ))]
pub async fn create_refund(
    state: web::Data<AppState>,
    Keyed {
        request,
        id: payment_id,
        body: fields,
    }: Keyed<CreateRefundBody>,
) -> Result<HttpResponse, ApiError> {
    let input = RefundInput {
        payment_id,
        amount: fields.amount,
        reason: fields.reason,
    };
    let refunded = refund::refund(&state.context(&request, input))
        .await
        .map_err(|err| problem(err, payment_id))?;
    let id = refunded.refund.id;
    tracing::Span::current().record("refund", tracing::field::display(id));
    let mut response = respond(
        refunded.status,
        &Refund::from(refunded.refund),
        refunded.replayed,
    );
    if let Ok(location) = header::HeaderValue::from_str(&refund_location(id)) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// Ask the provider about a refund now (support)
///
/// For a `pending` refund: asks the provider at once, and answers the refund as it is after; a
/// final refund is answered as it is, without a call. Needs no `Idempotency-Key`. A support key
/// with the `operate` role; audited.
#[utoipa::path(post, path = "/v1/support/refunds/{id}/reconcile", tag = "support",
    params(("id" = String, Path, description = "refund id, `re_…`", example = json!(crate::views::examples::REFUND))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Refund, description = "the refund as it is after the check; a final refund is answered as it is, without a call", example = json!(crate::views::examples::refund())),
        (status = 403, body = crate::http::errors::Problem, description = "not a support key, or a support key without the `operate` role"),
        (status = 404, body = crate::http::errors::Problem),
        (status = 503, body = crate::http::errors::Problem, description = "the database is unavailable; safe to press again"),
    ))]
pub async fn reconcile_refund(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let actor = operator(&state, &caller).await?;
    let id: RefundId = path.parse().map_err(|_| ApiError::NotFound("refund"))?;
    tracing::Span::current().record("refund", tracing::field::display(id));
    let refund = {
        let mut conn = state.pool.get().await?;
        refunds::find_refund(&mut conn, None, id)
            .await?
            .ok_or(ApiError::NotFound("refund"))?
    };
    let payment_id = refund.payment_id;
    tracing::info!(support_key = %actor.key_name, status = refund.status.as_str(), "support asked the provider about a refund now");
    let done = Done {
        action: Action::ReconcileRefund,
        target_id: id.0,
        merchant_id: refund.merchant_id,
        order_id: Some(refund.order_id),
        before: Some(serde_json::json!({ "status": refund.status.as_str() })),
        after: None,
    };
    // The reconciler's own check, recorded with source `support`: pressed twice at once, at
    // most two harmless calls (a retrieve, or a resend under the refund's own key), and the
    // refund's row lock lets only one of them move it.
    let check = async {
        refunds::reconcile::check(&state.pool, &state.payments, refund, Source::Support)
            .await
            .map_err(|err| problem(err, payment_id))
    };
    let refund = audited(
        &state,
        &actor,
        done,
        check,
        |r| serde_json::json!({ "status": r.status.as_str() }),
    )
    .await?;
    Ok(HttpResponse::Ok().json(Refund::from(refund)))
}

/// Retrieve a refund
///
/// The refund's status, amount, failure code and message and provider ids. Poll it while it is
/// `pending`.
#[utoipa::path(get, path = "/v1/refunds/{id}", tag = "refunds",
    params(("id" = String, Path, description = "refund id, `re_…`", example = json!(crate::views::examples::REFUND))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Refund, example = json!(crate::views::examples::refund())),
        (status = 404, body = crate::http::errors::Problem, description = "unknown, or another merchant's"),
    ))]
pub async fn get_refund(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id: RefundId = path.parse().map_err(|_| ApiError::NotFound("refund"))?;
    let mut conn = state.pool.get().await?;
    let refund = refunds::find_refund(&mut conn, caller.scope(), id)
        .await?
        .ok_or(ApiError::NotFound("refund"))?;
    Ok(HttpResponse::Ok().json(Refund::from(refund)))
}
