//! `POST /v1/orders/{id}/payments`, `POST /v1/checkout`, `GET /v1/payments/{id}`.

use std::collections::BTreeMap;

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};

use crate::accounts::Caller;
use crate::http::errors::ApiError;
use crate::http::keyed::{respond, Keyed, KeyedBody, PathId};
use crate::http::AppState;
use crate::idempotency::Operation;
use crate::ids::{OrderId, PaymentId};
use crate::payments::attempts::pay::{self, Paid, PayInput, PayTarget};
use crate::payments::disputes;
use crate::payments::money::MinorUnits;
use crate::payments::orders::{find_order, OrderFields};
use crate::payments::refunds::refunds_of_payment;
use crate::payments::PaymentAttempt;
use crate::views::{Order, Payment, PaymentWithRefunds};

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePaymentBody {
    /// The provider's payment method token (`pm_card_visa`, …); never card data.
    payment_method: Option<String>,
    /// `automatic` (the default) takes the money at once; `manual` holds it (`authorized`)
    /// until `POST /v1/payments/{id}/capture` or `…/cancel`.
    capture_method: Option<String>,
    /// Where the payer comes back to after a 3-D Secure challenge (absolute http(s) URL).
    return_url: Option<String>,
}

impl KeyedBody for CreatePaymentBody {
    const OPERATION: Operation = Operation::CreatePayment;
    type Id = OrderId;
}

/// Order fields and a payment method: the order is made and paid under one key.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckoutBody {
    #[schema(value_type = Option<i64>)]
    amount: Option<MinorUnits>,
    currency: Option<String>,
    merchant_reference: Option<String>,
    description: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    payment_method: Option<String>,
    /// As on `POST /v1/orders/{id}/payments`.
    capture_method: Option<String>,
    /// As on `POST /v1/orders/{id}/payments`.
    return_url: Option<String>,
}

impl KeyedBody for CheckoutBody {
    const OPERATION: Operation = Operation::Checkout;
    type Id = ();
}

/// `POST /v1/checkout`'s answer: the order and its attempt, each as it is now.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CheckoutResult {
    order: Order,
    payment: Payment,
}

/// The payment id of a path; it also goes on the request's log lines.
pub(crate) fn parse_payment_id(raw: &str) -> Result<PaymentId, ApiError> {
    let id: PaymentId = raw.parse().map_err(|_| ApiError::NotFound("payment"))?;
    tracing::Span::current().record("payment", tracing::field::display(id));
    Ok(id)
}

impl PathId for PaymentId {
    fn from_path(raw: &str) -> Result<Self, ApiError> {
        parse_payment_id(raw)
    }
}

fn payment_location(id: PaymentId) -> String {
    format!("/v1/payments/{id}")
}

/// Puts the payment's and its order's ids on the request's log lines.
fn record_ids(attempt: &PaymentAttempt) {
    let span = tracing::Span::current();
    span.record("payment", tracing::field::display(attempt.id));
    span.record("order", tracing::field::display(attempt.order_id));
}

/// `201` (or the first status, replayed) with `Location` to poll.
fn answer<T: Serialize>(paid: &Paid, body: &T) -> HttpResponse {
    record_ids(&paid.attempt);
    let mut response = respond(paid.status, body, paid.replayed);
    if let Ok(location) = header::HeaderValue::from_str(&payment_location(paid.attempt.id)) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Pay an order
///
/// Makes one attempt to pay the order with a provider's `payment_method` token (never card data),
/// answered `201` with the attempt and `Location`: `succeeded`, `failed` (a decline: `failure_code`
/// and `failure_message` say why; another attempt may follow), or `pending` (poll `Location`, or
/// follow `next_action` for 3-D Secure: docs/guides/three-d-secure.md, "3-D Secure"). `capture_method: manual` only
/// authorizes: capture or cancel the hold later (docs/guides/captures.md, "Authorize now, capture later"). At most
/// one attempt of an order runs at a time and a paid order takes no other. Send an
/// `Idempotency-Key`: the same key and body again answers with the first status,
/// `Idempotent-Replayed: true` and the resource as it is now; the same key with another request
/// (another body or path) is `422 idempotency_key_reused` (docs/guides/idempotency.md, "Idempotency").
#[utoipa::path(post, path = "/v1/orders/{id}/payments", tag = "payments",
    request_body(content = CreatePaymentBody, example = json!(crate::views::examples::create_payment_request())),
    params(
        ("id" = String, Path, description = "order id, `ord_…`", example = json!(crate::views::examples::ORDER)),
        ("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 201, body = Payment, description = "the attempt, `succeeded`, `failed` (a decline) or `pending` (poll `Location`); or replayed with `Idempotent-Replayed: true`", example = json!(crate::views::examples::payment())),
        (status = 404, body = crate::http::errors::Problem),
        (status = 409, body = crate::http::errors::Problem, description = "payment_in_progress, order_already_paid (both name `payment_id`), order_not_payable, idempotency_key_in_use, idempotency_key_expired (the key is past its lifetime and its payment or refund final: names `resource_id`, `resource_status`, `resource_url`; nothing is done again)"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed, idempotency_key_reused, raw_card_data_forbidden"),
    ))]
pub async fn create_payment(
    state: web::Data<AppState>,
    keyed: Keyed<CreatePaymentBody>,
) -> Result<HttpResponse, ApiError> {
    pay_order(&state, keyed).await
}

/// `POST …/orders/{id}/payments` read: the API's route and the checkout demo's.
pub(crate) async fn pay_order(
    state: &AppState,
    Keyed {
        request,
        id: order_id,
        body: fields,
    }: Keyed<CreatePaymentBody>,
) -> Result<HttpResponse, ApiError> {
    let input = PayInput {
        target: PayTarget::Order(order_id),
        payment_method: fields.payment_method,
        capture_method: fields.capture_method,
        return_url: fields.return_url,
    };
    let paid = pay::pay(&state.context(&request, input)).await?;
    Ok(answer(&paid, &Payment::from(paid.attempt.clone())))
}

/// Create an order and pay it, in one request
///
/// The shortest path to a payment: the order's fields and a `payment_method` token make the order
/// and its first attempt at once, answered `201` with both (`payment.status` `succeeded`, `failed`
/// for a decline, `pending` while the provider has not decided or a 3-D Secure challenge waits in
/// `next_action`) and `Location` naming the attempt. Send an `Idempotency-Key`: the same key and
/// body again answers with the first status, `Idempotent-Replayed: true` and the resource as it is
/// now; the same key with another request (another body or path) is `422 idempotency_key_reused`
/// (docs/guides/idempotency.md, "Idempotency"). Retrying with the same key never charges twice, even days later
/// (docs/guides/checkout.md, "Payments").
#[utoipa::path(post, path = "/v1/checkout", tag = "payments",
    request_body(content = CheckoutBody, example = json!(crate::views::examples::checkout_request())),
    params(("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters")),
    security(("bearer" = [])),
    responses(
        (status = 201, body = CheckoutResult, description = "the order and its attempt; replayed with `Idempotent-Replayed: true`", example = json!(crate::views::examples::checkout_result())),
        (status = 409, body = crate::http::errors::Problem, description = "merchant_reference_exists, idempotency_key_in_use, idempotency_key_expired (the key is past its lifetime and its payment or refund final: names `resource_id`, `resource_status`, `resource_url`; nothing is done again)"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed, idempotency_key_reused, raw_card_data_forbidden"),
    ))]
pub async fn checkout(
    state: web::Data<AppState>,
    Keyed {
        request,
        body: fields,
        ..
    }: Keyed<CheckoutBody>,
) -> Result<HttpResponse, ApiError> {
    // Validated by the domain: every field problem at once, order and payment method alike.
    let input = PayInput {
        target: PayTarget::NewOrder(OrderFields {
            amount: fields.amount,
            currency: fields.currency,
            merchant_reference: fields.merchant_reference,
            description: fields.description,
            metadata: fields.metadata,
            checkout_demo: false,
        }),
        payment_method: fields.payment_method,
        capture_method: fields.capture_method,
        return_url: fields.return_url,
    };
    let paid = pay::pay(&state.context(&request, input)).await?;
    let order = paid
        .order
        .clone()
        .ok_or_else(|| ApiError::Internal("a checkout's order is gone".into()))?;
    let result = CheckoutResult {
        order: order.into(),
        payment: paid.attempt.clone().into(),
    };
    Ok(answer(&paid, &result))
}

/// Retrieve a payment attempt with its refunds and disputes
///
/// The attempt's status, failure code and message, provider ids and timestamps, with its `refunds`
/// and `amount_refunded`, and its `disputes` (docs/guides/disputes.md, "Disputes"). Poll it while
/// it is `pending`: `next_check_at` says when payorch will next ask the provider itself.
#[utoipa::path(get, path = "/v1/payments/{id}", tag = "payments",
    params(("id" = String, Path, description = "payment attempt id, `pay_…`", example = json!(crate::views::examples::PAYMENT))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = PaymentWithRefunds, description = "the attempt with its refunds, `amount_refunded` and its disputes", example = json!(crate::views::examples::payment_with_refunds())),
        (status = 404, body = crate::http::errors::Problem, description = "unknown, or another merchant's"),
    ))]
pub async fn get_payment(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    show_payment(caller, &state, &path, false).await
}

/// `GET …/payments/{id}` for `caller`: the API's route and the checkout demo's.
pub(crate) async fn show_payment(
    caller: Caller,
    state: &AppState,
    id: &str,
    checkout_demo_only: bool,
) -> Result<HttpResponse, ApiError> {
    let id = parse_payment_id(id)?;
    let mut conn = state.pool.get().await?;
    let attempt = crate::payments::attempts::find_attempt(&mut conn, caller.scope(), id)
        .await?
        .ok_or(ApiError::NotFound("payment"))?;
    if checkout_demo_only {
        let order = find_order(&mut conn, Some(attempt.merchant_id), attempt.order_id).await?;
        if !order.is_some_and(|order| order.checkout_demo) {
            return Err(ApiError::NotFound("payment"));
        }
    }
    record_ids(&attempt);
    let refunds = refunds_of_payment(&mut conn, attempt.merchant_id, attempt.id).await?;
    // One probe of `disputes_attempt`, as the refunds' is one of theirs; a checkout's answer
    // is the payment alone and reads neither.
    let disputes = disputes::of_payment(&mut conn, attempt.merchant_id, attempt.id).await?;
    Ok(HttpResponse::Ok().json(PaymentWithRefunds::new(attempt, refunds, disputes)))
}
