//! `POST /v1/orders`, `GET /v1/orders/{id}`, `POST /v1/orders/{id}/cancel`.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::accounts::Caller;
use crate::http::errors::{ApiError, FieldError};
use crate::http::keyed::{idempotency_key, keyed_request, read_body, respond};
use crate::http::strict_json::StrictJson;
use crate::http::AppState;
use diesel_async::AsyncPgConnection;

use crate::http::views::{self, Order, Payment};
use crate::idempotency::{Claimed, KeyedRequest, KeyedWork, Operation, RecordAs};
use crate::ids::OrderId;
use crate::payments::attempts::attempts_of_order;
use crate::payments::attempts::keyed::Resources;
use crate::payments::money::MinorUnits;
use crate::payments::orders::keyed::{CancelOrder, CreateOrder};
use crate::payments::orders::{self, NewOrder, OrderError};

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

impl CreateOrderBody {
    pub fn new(
        amount: Option<MinorUnits>,
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

/// The order id of a path; it also goes on the request's log lines.
pub fn parse_order_id(raw: &str) -> Result<OrderId, ApiError> {
    let id: OrderId = raw.parse().map_err(|_| ApiError::NotFound("order"))?;
    tracing::Span::current().record("order", tracing::field::display(id));
    Ok(id)
}

/// An order with its payment attempts, newest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OrderWithPayments {
    #[serde(flatten)]
    order: Order,
    payments: Vec<Payment>,
}

/// Runs a database-only order operation once per key, in one statement, and answers with
/// the order: as made, or, replayed, under the first status as it is now. `declined` says
/// why the work did nothing.
async fn keyed_order_operation(
    state: &AppState,
    keyed: &KeyedRequest,
    work: &dyn KeyedWork,
    declined: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<ApiError, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let order = |value| {
        Resources::read(value)
            .map_err(|err| ApiError::Internal(format!("an order read back does not fit: {err}")))?
            .order()
            .map(Order::from)
            .ok_or_else(|| ApiError::Internal("an order key names no order".into()))
    };
    match state.claim(keyed, work).await? {
        Claimed::Done { fresh } => {
            let status = match work.record_as() {
                RecordAs::Completed { status } => status,
                RecordAs::InFlight { .. } => 201,
            };
            Ok(respond(status, &order(fresh)?, false))
        }
        Claimed::Replay { status, current } => Ok(respond(status, &order(current)?, true)),
        Claimed::Declined { .. } => {
            let mut conn = state.pool.get().await?;
            Err(declined(&mut conn).await?)
        }
        Claimed::TakenOver { .. } => {
            Err(ApiError::Internal("an order key was left in flight".into()))
        }
    }
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
    body: web::Json<StrictJson>,
) -> Result<HttpResponse, ApiError> {
    make_order(caller, &state, &req, &body).await
}

/// `POST …/orders` for `caller`: the API's route and the checkout demo's.
pub(crate) async fn make_order(
    caller: Caller,
    state: &AppState,
    req: &HttpRequest,
    body: &Value,
) -> Result<HttpResponse, ApiError> {
    let merchant_id = caller.merchant_for_write()?;
    let key = idempotency_key(req)?;
    let new_order = read_body::<CreateOrderBody>(body)?.into_new_order()?;
    let keyed = keyed_request(req, merchant_id, key, Operation::CreateOrder, Some(body));
    keyed_order_operation(state, &keyed, &CreateOrder::new(&new_order), async |conn| {
        // Only the reference can refuse a new order: ids are fresh UUIDv7s.
        let reference = new_order.merchant_reference.as_deref().unwrap_or_default();
        Ok(
            match orders::order_with_reference(conn, merchant_id, reference).await? {
                Some(id) => OrderError::MerchantReferenceExists(id).into(),
                None => ApiError::Internal("a refused order reference has no order".into()),
            },
        )
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
    show_order(caller, &state, &path).await
}

/// `GET …/orders/{id}` for `caller`: the API's route and the checkout demo's.
pub(crate) async fn show_order(
    caller: Caller,
    state: &AppState,
    id: &str,
) -> Result<HttpResponse, ApiError> {
    let id = parse_order_id(id)?;
    let mut conn = state.pool.get().await?;
    let order = orders::find_order(&mut conn, caller.scope(), id)
        .await?
        .ok_or(ApiError::NotFound("order"))?;
    let payments = attempts_of_order(&mut conn, order.merchant_id, order.id).await?;
    Ok(HttpResponse::Ok().json(OrderWithPayments {
        order: order.into(),
        payments: views::payments(payments),
    }))
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
    keyed_order_operation(&state, &keyed, &CancelOrder { id }, async |conn| {
        Ok(
            match orders::find_order(conn, Some(merchant_id), id).await? {
                None => OrderError::NotFound.into(),
                Some(order) => OrderError::NotCancelable(order.status).into(),
            },
        )
    })
    .await
}
