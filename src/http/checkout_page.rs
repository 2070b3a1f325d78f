//! `/checkout`: a checkout page done the way a careful frontend must do it (README, "The
//! checkout page"), and the demo merchant's own small backend it talks to.
//!
//! A real merchant's page talks to the merchant's server, which holds the secret key and
//! calls payorch. The `/checkout/demo/…` routes are that server for the demo merchant: they
//! keep its key here, act with it exactly as the merchant API does (same handlers, same
//! Idempotency-Key rules, the browser's key passed through), and let the browser choose only
//! what a payer chooses: the payment method. The price of a demo order is set here. The
//! routes are on only when `serve` runs with its demo merchant; otherwise they answer
//! `404 demo_checkout_off`.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::assets::{asset, HTML, SCRIPT, STYLE};
use super::auth::caller_of;
use super::errors::ApiError;
use super::strict_json::StrictJson;
use super::{orders, payments, AppState};
use crate::accounts::Caller;

/// What a demo order costs, in minor units of [`DEMO_CURRENCY`].
pub const DEMO_AMOUNT: i64 = 2500;
pub const DEMO_CURRENCY: &str = "eur";
const DEMO_DESCRIPTION: &str = "A pot of tea (payorch checkout demo)";

pub(crate) async fn page() -> HttpResponse {
    asset(HTML, include_str!("checkout_page/checkout.html"))
}

pub(crate) async fn script() -> HttpResponse {
    asset(SCRIPT, include_str!("checkout_page/checkout.js"))
}

pub(crate) async fn style() -> HttpResponse {
    asset(STYLE, include_str!("checkout_page/checkout.css"))
}

/// The demo merchant, by the key this server keeps for it.
async fn demo_merchant(state: &AppState) -> Result<Caller, ApiError> {
    let key = state.demo_checkout.get().ok_or(ApiError::DemoCheckoutOff)?;
    caller_of(state, key.expose()).await
}

/// `POST /checkout/demo/orders`: a new demo order under the browser's Idempotency-Key. The
/// body is ignored: the merchant sets the price, not the payer.
pub(crate) async fn create_order(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let merchant = demo_merchant(&state).await?;
    let order = json!({
        "amount": DEMO_AMOUNT,
        "currency": DEMO_CURRENCY,
        "description": DEMO_DESCRIPTION,
        "metadata": {"source": "checkout demo"},
    });
    orders::make_order(merchant, &state, &req, &order).await
}

/// `GET /checkout/demo/orders/{id}`: the order and its payments.
pub(crate) async fn show_order(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let merchant = demo_merchant(&state).await?;
    orders::show_order(merchant, &state, &path).await
}

/// `POST /checkout/demo/orders/{id}/payments`: `{"payment_method": …}` under the browser's
/// Idempotency-Key, answered as `POST /v1/orders/{id}/payments` answers.
pub(crate) async fn pay(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<StrictJson>,
) -> Result<HttpResponse, ApiError> {
    let merchant = demo_merchant(&state).await?;
    let body: &Value = &body;
    payments::pay_order(merchant, &state, &req, &path, body).await
}

/// `GET /checkout/demo/payments/{id}`: what the page polls while an outcome is unknown.
pub(crate) async fn show_payment(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let merchant = demo_merchant(&state).await?;
    payments::show_payment(merchant, &state, &path).await
}
