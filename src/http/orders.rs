//! `POST /v1/orders`, `GET /v1/orders/{id}`, `POST /v1/orders/{id}/cancel`.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::accounts::Caller;
use crate::http::errors::{ApiError, FieldError};
use crate::http::keyed::{idempotency_key, keyed_request, read_body, respond};
use crate::http::AppState;
use diesel_async::AsyncPgConnection;

use crate::idempotency::{store, Completion, KeyedRequest, Operation, Recorded, Replay};
use crate::ids::{MerchantId, OrderId};
use crate::payments::attempts::attempts_of_order;
use crate::payments::orders::{self, NewOrder, Order};
use crate::payments::PaymentAttempt;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOrderBody {
    /// Minor units (cents), 1 to 10^12.
    amount: Option<i64>,
    /// ISO 4217, any case; stored lowercase.
    currency: Option<String>,
    /// Your own reference; unique per merchant for ever.
    merchant_reference: Option<String>,
    description: Option<String>,
    /// At most 50 string keys (≤ 40 chars) with string values (≤ 500 chars).
    metadata: Option<BTreeMap<String, String>>,
}

impl CreateOrderBody {
    pub fn new(
        amount: Option<i64>,
        currency: Option<String>,
        merchant_reference: Option<String>,
        description: Option<String>,
        metadata: Option<BTreeMap<String, String>>,
    ) -> Self {
        CreateOrderBody {
            amount,
            currency,
            merchant_reference,
            description,
            metadata,
        }
    }

    pub fn into_new_order(self) -> Result<NewOrder, ApiError> {
        NewOrder::parse(
            self.amount,
            self.currency.as_deref(),
            self.merchant_reference,
            self.description,
            self.metadata,
        )
        .map_err(|problems| {
            ApiError::ValidationFailed(
                problems
                    .into_iter()
                    .map(|(field, message)| FieldError::new(field, message))
                    .collect(),
            )
        })
    }
}

pub fn parse_order_id(raw: &str) -> Result<OrderId, ApiError> {
    raw.parse().map_err(|_| ApiError::NotFound("order"))
}

/// An order with its payment attempts, newest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OrderWithPayments {
    #[serde(flatten)]
    order: Order,
    payments: Vec<PaymentAttempt>,
}

fn recorded(status: u16, order: &Order) -> Recorded {
    Recorded {
        status,
        resource_type: "order",
        resource_id: order.id.0,
        body: json!(order),
        unresolved: false,
    }
}

/// Runs a database-only order operation once per key and answers `status` with the order;
/// a replay answers the first status with the order as it is now.
async fn keyed_order_operation(
    state: &AppState,
    keyed: &KeyedRequest,
    status: u16,
    work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<Order, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let completion = store::run_once(
        &state.pool,
        &state.idempotency.settings,
        &state.idempotency.metrics,
        keyed,
        async |conn| {
            let order = work(conn).await?;
            let recorded = recorded(status, &order);
            Ok::<_, ApiError>((order, recorded))
        },
    )
    .await?;
    match completion {
        Completion::Fresh(order) => Ok(respond(status, &order, false)),
        Completion::Replayed(replay) => replay_order(state, keyed.merchant_id, replay).await,
    }
}

/// A replay shows the order as it is now, under the status first answered.
async fn replay_order(
    state: &AppState,
    merchant_id: MerchantId,
    replay: Replay,
) -> Result<HttpResponse, ApiError> {
    let id = replay
        .resource_id
        .ok_or_else(|| ApiError::Internal("replayed order key has no resource".into()))?;
    let mut conn = state.pool.get().await?;
    let order = orders::find_order(&mut conn, Some(merchant_id), OrderId(id))
        .await?
        .ok_or(ApiError::NotFound("order"))?;
    Ok(respond(replay.status, &order, true))
}

#[utoipa::path(post, path = "/v1/orders", tag = "orders",
    request_body = CreateOrderBody,
    params(("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters")),
    security(("bearer" = [])),
    responses(
        (status = 201, body = Order, description = "created, or replayed with `Idempotent-Replayed: true`"),
        (status = 400, body = crate::http::errors::Problem),
        (status = 409, body = crate::http::errors::Problem, description = "merchant_reference_exists, idempotency_key_in_use"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed, idempotency_key_reused, raw_card_data_forbidden"),
        (status = 429, body = crate::http::errors::Problem),
    ))]
pub async fn create_order(
    caller: Caller,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let merchant_id = caller.merchant_for_write()?;
    let key = idempotency_key(&req)?;
    let new_order = read_body::<CreateOrderBody>(&body)?.into_new_order()?;
    let keyed = keyed_request(&req, merchant_id, key, Operation::CreateOrder, Some(&body));
    keyed_order_operation(&state, &keyed, 201, async |conn| {
        Ok(orders::insert_order(conn, merchant_id, &new_order).await?)
    })
    .await
}

#[utoipa::path(get, path = "/v1/orders/{id}", tag = "orders",
    params(("id" = String, Path, description = "order id, `ord_…`")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = OrderWithPayments),
        (status = 404, body = crate::http::errors::Problem, description = "unknown, or another merchant's"),
    ))]
pub async fn get_order(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_order_id(&path)?;
    let mut conn = state.pool.get().await?;
    let order = orders::find_order(&mut conn, caller.scope(), id)
        .await?
        .ok_or(ApiError::NotFound("order"))?;
    let payments = attempts_of_order(&mut conn, order.merchant_id, order.id).await?;
    Ok(HttpResponse::Ok().json(OrderWithPayments { order, payments }))
}

#[utoipa::path(post, path = "/v1/orders/{id}/cancel", tag = "orders",
    params(
        ("id" = String, Path, description = "order id, `ord_…`"),
        ("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Order, description = "canceled, or replayed with `Idempotent-Replayed: true`"),
        (status = 404, body = crate::http::errors::Problem),
        (status = 409, body = crate::http::errors::Problem, description = "order_not_cancelable: it is no longer awaiting payment"),
    ))]
pub async fn cancel_order(
    caller: Caller,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let merchant_id = caller.merchant_for_write()?;
    let key = idempotency_key(&req)?;
    let id = parse_order_id(&path)?;
    let keyed = keyed_request(&req, merchant_id, key, Operation::CancelOrder, None);
    keyed_order_operation(&state, &keyed, 200, async |conn| {
        Ok(orders::cancel_order(conn, merchant_id, id).await?)
    })
    .await
}
