//! `/checkout`: a checkout page done the way a careful frontend must do it (docs/guides/checkout.md, "The
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
use reqwest::Url;
use serde::Deserialize;
use serde_json::json;

use super::assets::{asset, HTML, SCRIPT, STYLE};
use super::auth::caller_of;
use super::errors::ApiError;
use super::keyed::{read_body, Keyed};
use super::orders::parse_order_id;
use super::strict_json::StrictJson;
use super::{orders, payments, AppState};
use crate::accounts::Caller;
use crate::payments::orders::find_order;

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
    caller_of(state, key.expose(), None).await
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
    let keyed = Keyed::<orders::CreateOrderBody>::read(merchant, &req, Some(&order))?;
    orders::make_order(&state, keyed, true).await
}

/// `GET /checkout/demo/orders/{id}`: an order the demo made, and its payments.
pub(crate) async fn show_order(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let merchant = demo_merchant(&state).await?;
    orders::show_order(merchant, &state, &path, true).await
}

/// What a payer may choose: the payment method, and nothing else. Where the bank's check
/// sends the payer back, and whether the charge is captured, are the merchant's to say, so
/// an anonymous caller cannot make payorch's return route send a payer to a site of theirs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DemoPayBody {
    payment_method: String,
}

/// `POST /checkout/demo/orders/{id}/payments`: `{"payment_method": …}` under the browser's
/// Idempotency-Key, for an order the demo made, answered as `POST /v1/orders/{id}/payments`
/// answers. The return URL is this page's own, set here.
pub(crate) async fn pay(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<StrictJson>,
) -> Result<HttpResponse, ApiError> {
    let merchant = demo_merchant(&state).await?;
    let chosen: DemoPayBody = read_body(&body)?;
    let order_id = parse_order_id(&path)?;
    let mut conn = state.pool.get().await?;
    let made_here = find_order(&mut conn, merchant.scope(), order_id)
        .await?
        .is_some_and(|order| order.checkout_demo);
    drop(conn);
    if !made_here {
        return Err(ApiError::NotFound("order"));
    }
    let mut back = Url::parse(&format!("{}/checkout", state.payments.public_url))
        .map_err(|err| ApiError::Internal(format!("the public URL: {err}")))?;
    back.query_pairs_mut()
        .append_pair("order", &order_id.to_string())
        .append_pair("returning", "1");
    let body = json!({"payment_method": chosen.payment_method, "return_url": back.as_str()});
    let keyed = Keyed::<payments::CreatePaymentBody>::read(merchant, &req, Some(&body))?;
    payments::pay_order(&state, keyed).await
}

/// `GET /checkout/demo/payments/{id}`: what the page polls while an outcome is unknown, for a
/// payment of an order the demo made.
pub(crate) async fn show_payment(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let merchant = demo_merchant(&state).await?;
    payments::show_payment(merchant, &state, &path, true).await
}
