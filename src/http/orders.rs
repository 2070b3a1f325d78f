//! `POST /v1/orders`, `GET /v1/orders/{id}`, `POST /v1/orders/{id}` (its metadata),
//! `POST /v1/orders/{id}/cancel`.

use std::collections::BTreeMap;

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use crate::accounts::Caller;
use crate::http::errors::ApiError;
use crate::http::keyed::{respond, Keyed, KeyedBody, PathId};
use crate::http::AppState;

use crate::idempotency::Operation;
use crate::ids::OrderId;
use crate::payments::attempts::attempts_of_order;
use crate::payments::money::MinorUnits;
use crate::payments::orders::command::{self, OrderAnswer, OrderCommand};
use crate::payments::orders::{self, OrderFields};
use crate::views::{Order, OrderWithPayments};

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOrderBody {
    /// Minor units (cents), 1 to 10^12.
    #[schema(value_type = Option<i64>)]
    amount: Option<MinorUnits>,
    /// ISO 4217, any case; stored lowercase.
    currency: Option<String>,
    /// Your own reference; unique per merchant for ever.
    merchant_reference: Option<String>,
    description: Option<String>,
    /// At most 50 string keys (≤ 40 chars) with string values (≤ 500 chars).
    metadata: Option<BTreeMap<String, String>>,
}

impl KeyedBody for CreateOrderBody {
    const OPERATION: Operation = Operation::CreateOrder;
    type Id = ();
}

/// `POST /v1/orders/{id}/cancel` takes no body.
#[derive(Debug, Deserialize)]
pub struct CancelOrderRequest;

impl KeyedBody for CancelOrderRequest {
    const OPERATION: Operation = Operation::CancelOrder;
    type Id = OrderId;
    const HAS_BODY: bool = false;
}

/// A change of the order's metadata: each key given is set, a key given as `""` is removed,
/// the others are kept.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateOrderBody {
    /// String keys (≤ 40 chars) with string values (≤ 500 chars), `""` to remove the key; the
    /// order's metadata must still hold at most 50 keys after the change.
    metadata: Option<BTreeMap<String, String>>,
}

impl KeyedBody for UpdateOrderBody {
    const OPERATION: Operation = Operation::UpdateOrder;
    type Id = OrderId;
}

impl From<CreateOrderBody> for OrderFields {
    fn from(body: CreateOrderBody) -> Self {
        OrderFields {
            amount: body.amount,
            currency: body.currency,
            merchant_reference: body.merchant_reference,
            description: body.description,
            metadata: body.metadata,
            checkout_demo: false,
        }
    }
}

/// The order id of a path; it also goes on the request's log lines.
pub fn parse_order_id(raw: &str) -> Result<OrderId, ApiError> {
    let id: OrderId = raw.parse().map_err(|_| ApiError::NotFound("order"))?;
    tracing::Span::current().record("order", tracing::field::display(id));
    Ok(id)
}

impl PathId for OrderId {
    fn from_path(raw: &str) -> Result<Self, ApiError> {
        parse_order_id(raw)
    }
}

/// The order as made, or, replayed, under the first status as it is now.
fn answer(done: OrderAnswer) -> HttpResponse {
    respond(done.status, &Order::from(done.order), done.replayed)
}

/// Create an order
///
/// An order is what the payer owes: an amount in minor units and a currency, with your own
/// `merchant_reference` (unique per merchant) and `metadata`. It starts `awaiting_payment`; pay it
/// with `POST /v1/orders/{id}/payments`, or use `POST /v1/checkout` to do both at once. Send an
/// `Idempotency-Key`: the same key and body again answers with the first status,
/// `Idempotent-Replayed: true` and the resource as it is now; the same key with another request
/// (another body or path) is `422 idempotency_key_reused` (docs/guides/idempotency.md, "Idempotency").
#[utoipa::path(post, path = "/v1/orders", tag = "orders",
    request_body(content = CreateOrderBody, example = json!(crate::views::examples::create_order_request())),
    params(("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters")),
    security(("bearer" = [])),
    responses(
        (status = 201, body = Order, description = "created, or replayed with `Idempotent-Replayed: true`", example = json!(crate::views::examples::order("awaiting_payment"))),
        (status = 400, body = crate::http::errors::Problem),
        (status = 409, body = crate::http::errors::Problem, description = "merchant_reference_exists, idempotency_key_in_use"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed, idempotency_key_reused, raw_card_data_forbidden"),
        (status = 429, body = crate::http::errors::Problem),
    ))]
pub async fn create_order(
    state: web::Data<AppState>,
    keyed: Keyed<CreateOrderBody>,
) -> Result<HttpResponse, ApiError> {
    make_order(&state, keyed, false).await
}

/// `POST …/orders` read: the API's route and the checkout demo's.
pub(crate) async fn make_order(
    state: &AppState,
    Keyed { request, body, .. }: Keyed<CreateOrderBody>,
    checkout_demo: bool,
) -> Result<HttpResponse, ApiError> {
    let fields = OrderFields {
        checkout_demo,
        ..OrderFields::from(body)
    };
    let command = OrderCommand::Create(fields);
    let done = command::run(&state.context(&request, command)).await?;
    Ok(answer(done))
}

/// Retrieve an order with its payment attempts
///
/// The order and every attempt to pay it (`payments`), newest first. A merchant key sees only its
/// own orders (another merchant's is `404`); a support key sees every merchant's.
#[utoipa::path(get, path = "/v1/orders/{id}", tag = "orders",
    params(("id" = String, Path, description = "order id, `ord_…`", example = json!(crate::views::examples::ORDER))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = OrderWithPayments, example = json!(crate::views::examples::order_with_payments())),
        (status = 404, body = crate::http::errors::Problem, description = "unknown, or another merchant's"),
    ))]
pub async fn get_order(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    show_order(caller, &state, &path, false).await
}

/// `GET …/orders/{id}` for `caller`: the API's route and, `checkout_demo_only`, the checkout
/// demo's, to which any other order does not exist.
pub(crate) async fn show_order(
    caller: Caller,
    state: &AppState,
    id: &str,
    checkout_demo_only: bool,
) -> Result<HttpResponse, ApiError> {
    let id = parse_order_id(id)?;
    let mut conn = state.pool.get().await?;
    let order = orders::find_order(&mut conn, caller.scope(), id)
        .await?
        .filter(|order| order.checkout_demo || !checkout_demo_only)
        .ok_or(ApiError::NotFound("order"))?;
    let payments = attempts_of_order(&mut conn, order.merchant_id, order.id).await?;
    Ok(HttpResponse::Ok().json(OrderWithPayments::new(order, payments)))
}

/// Change an order's metadata
///
/// Stripe's update semantics: each key given is set, a key given as `""` is removed, the other keys
/// are kept. Allowed in any status: metadata is the merchant's own notes. The merged metadata must
/// still hold at most 50 keys (docs/guides/checkout.md, "An order's metadata"). Send an `Idempotency-Key`: the same
/// key and body again answers with the first status, `Idempotent-Replayed: true` and the order as
/// it is now; the same key with another request (another body or path) is `422
/// idempotency_key_reused` (docs/guides/idempotency.md, "Idempotency").
#[utoipa::path(post, path = "/v1/orders/{id}", tag = "orders",
    request_body(content = UpdateOrderBody, example = json!(crate::views::examples::update_order_request())),
    params(
        ("id" = String, Path, description = "order id, `ord_…`", example = json!(crate::views::examples::ORDER)),
        ("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Order, description = "the order with its metadata changed, or replayed with `Idempotent-Replayed: true` (the order as it is now)", example = json!(crate::views::examples::updated_order())),
        (status = 404, body = crate::http::errors::Problem, description = "unknown, or another merchant's"),
        (status = 409, body = crate::http::errors::Problem, description = "idempotency_key_in_use"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed (a key or value too long, `metadata` missing, more than 50 keys after the change), idempotency_key_reused, raw_card_data_forbidden"),
    ))]
pub async fn update_order(
    state: web::Data<AppState>,
    Keyed { request, id, body }: Keyed<UpdateOrderBody>,
) -> Result<HttpResponse, ApiError> {
    let command = OrderCommand::Update {
        id,
        metadata: body.metadata,
    };
    let done = command::run(&state.context(&request, command)).await?;
    Ok(answer(done))
}

/// Cancel an order awaiting payment
///
/// Moves an order from `awaiting_payment` to `canceled`, so no attempt can pay it; an order with an
/// attempt under way or paid is `409 order_not_cancelable` (to give money back, refund the
/// payment). Send an `Idempotency-Key`: the same key and body again answers with the first status,
/// `Idempotent-Replayed: true` and the resource as it is now; the same key with another request
/// (another body or path) is `422 idempotency_key_reused` (docs/guides/idempotency.md, "Idempotency").
#[utoipa::path(post, path = "/v1/orders/{id}/cancel", tag = "orders",
    params(
        ("id" = String, Path, description = "order id, `ord_…`", example = json!(crate::views::examples::ORDER)),
        ("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Order, description = "canceled, or replayed with `Idempotent-Replayed: true`", example = json!(crate::views::examples::order("canceled"))),
        (status = 404, body = crate::http::errors::Problem),
        (status = 409, body = crate::http::errors::Problem, description = "order_not_cancelable: it is no longer awaiting payment"),
    ))]
pub async fn cancel_order(
    state: web::Data<AppState>,
    Keyed { request, id, .. }: Keyed<CancelOrderRequest>,
) -> Result<HttpResponse, ApiError> {
    let command = OrderCommand::Cancel(id);
    let done = command::run(&state.context(&request, command)).await?;
    Ok(answer(done))
}
