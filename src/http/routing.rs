//! `GET`/`PUT /v1/merchants/{id}/routing`: which providers a merchant's payments try, in
//! order, with per-currency orders of their own (docs/guides/routing.md, "Routing and failover").

use std::collections::BTreeMap;

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};

use crate::accounts::{self, Caller};
use crate::http::errors::{ApiError, FieldError};
use crate::http::keyed::read_body;
use crate::http::strict_json::StrictJson;
use crate::http::support::operator;
use crate::http::AppState;
use crate::ids::MerchantId;
use crate::payments::attempts::retry::{RetrySettings, MOST_ATTEMPTS};
use crate::payments::money::Currency;
use crate::payments::routing::{self, Routing};
use crate::payments::success_routing::Strategy;

/// A merchant's routing.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RoutingView {
    merchant_id: MerchantId,
    /// Provider names in the order a payment tries them.
    providers: Vec<String>,
    /// Per currency (lowercase ISO 4217), an order of its own.
    currencies: BTreeMap<String, Vec<String>>,
    /// `merchant` when set for this merchant; `default` when not set: every configured
    /// provider in the configured order.
    source: &'static str,
    /// The providers this service is configured with.
    configured: Vec<String>,
    /// `ordered`: the providers are tried in the order above; `success_rate`: the same
    /// providers, best recent approval rate in the payment's currency first
    /// (docs/guides/routing.md, "Routing by success").
    strategy: Strategy,
    retries: RetriesView,
}

/// Which declines a payment tries again (docs/guides/declines.md, "Retries").
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetriesView {
    /// Try a soft decline again at the next provider of the route. Off unless the merchant
    /// turns it on: the payer's bank sees a second authorisation request.
    #[serde(default)]
    soft_declines: bool,
    /// Allow that retry also after an attempt asked the payer for 3-D Secure.
    #[serde(default)]
    after_three_d_secure: bool,
    /// Retries stop once the request has made this many attempts, the first and any failover
    /// included: 1 to 4 (default 2). A failover alone may go past it: it never reached a bank.
    #[serde(default = "two")]
    #[schema(minimum = 1, maximum = 4, example = 2)]
    max_attempts: u8,
}

fn two() -> u8 {
    RetrySettings::default().max_attempts
}

impl From<RetrySettings> for RetriesView {
    fn from(r: RetrySettings) -> Self {
        RetriesView {
            soft_declines: r.soft_declines,
            after_three_d_secure: r.after_three_d_secure,
            max_attempts: r.max_attempts,
        }
    }
}

/// The body of a `PUT`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutingBody {
    /// 1–16 distinct configured provider names, in order.
    providers: Vec<String>,
    /// Per currency, 1–16 distinct configured provider names; default none.
    #[serde(default)]
    currencies: BTreeMap<String, Vec<String>>,
    /// `ordered` (the default) or `success_rate`.
    #[serde(default)]
    strategy: Strategy,
    /// Default: no retry of soft declines, none after 3-D Secure, 2 attempts at most.
    #[serde(default)]
    retries: Option<RetriesView>,
}

async fn merchant_in_path(
    state: &AppState,
    caller: &Caller,
    path: &str,
) -> Result<MerchantId, ApiError> {
    let not_found = || ApiError::NotFound("merchant");
    let id: MerchantId = path.parse().map_err(|_| not_found())?;
    if !caller.can_read(id) {
        return Err(not_found());
    }
    let mut conn = state.pool.get().await?;
    accounts::find_merchant(&mut conn, id)
        .await?
        .ok_or_else(not_found)?;
    Ok(id)
}

fn view(state: &AppState, merchant_id: MerchantId, stored: Option<Routing>) -> RoutingView {
    let configured = state.payments.providers.names();
    let source = if stored.is_some() {
        "merchant"
    } else {
        "default"
    };
    let routing = stored.unwrap_or_else(|| Routing {
        providers: configured.clone(),
        currencies: BTreeMap::new(),
        strategy: Strategy::Ordered,
        retries: RetrySettings::default(),
    });
    RoutingView {
        merchant_id,
        providers: routing.providers,
        currencies: routing.currencies,
        source,
        configured,
        strategy: routing.strategy,
        retries: routing.retries.into(),
    }
}

/// Retrieve a merchant's provider routing
///
/// The providers a new payment of the merchant tries, in order, and per currency: the merchant's
/// own (`source: merchant`) or every configured provider (`source: default`) (docs/guides/routing.md, "Routing and
/// failover").
#[utoipa::path(get, path = "/v1/merchants/{id}/routing", tag = "merchants",
    params(("id" = String, Path, description = "merchant id, `mer_…`", example = json!(crate::views::examples::MERCHANT))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = RoutingView, example = json!(crate::views::examples::routing())),
        (status = 404, body = crate::http::errors::Problem, description = "unknown, or another merchant's"),
    ))]
pub async fn get_routing(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let merchant_id = merchant_in_path(&state, &caller, &path).await?;
    let mut conn = state.pool.get().await?;
    let stored = routing::load(&mut conn, merchant_id).await?;
    Ok(HttpResponse::Ok().json(view(&state, merchant_id, stored)))
}

/// Set a merchant's provider routing (support)
///
/// Replaces the merchant's provider order, and per currency; every name must be a configured
/// provider. `retries` (optional, defaults when left out) says which declines a payment tries
/// again (docs/guides/declines.md, "Retries"). Applies to new payments on every replica within
/// a second; attempts under way keep their provider. A support key with the `operate` role;
/// every change is audited (docs/guides/routing.md, "Routing and failover").
#[utoipa::path(put, path = "/v1/merchants/{id}/routing", tag = "merchants",
    params(("id" = String, Path, description = "merchant id, `mer_…`", example = json!(crate::views::examples::MERCHANT))),
    request_body(content = RoutingBody, example = json!(crate::views::examples::routing_request())),
    security(("bearer" = [])),
    responses(
        (status = 200, body = RoutingView, description = "the routing now; it applies on every replica within a second", example = json!(crate::views::examples::routing())),
        (status = 403, body = crate::http::errors::Problem, description = "not a support key, or a support key without the `operate` role"),
        (status = 404, body = crate::http::errors::Problem),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed: an unknown provider, a name twice, an empty list, a bad currency, a `max_attempts` outside 1 to 4"),
    ))]
pub async fn put_routing(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<StrictJson>,
) -> Result<HttpResponse, ApiError> {
    let actor = operator(&state, &caller).await?;
    let merchant_id = merchant_in_path(&state, &caller, &path).await?;
    let fields = read_body::<RoutingBody>(&body)?;
    let configured = state.payments.providers.names();
    let mut errors = Vec::new();
    check_list(&mut errors, "/providers", &fields.providers, &configured);
    let mut currencies = BTreeMap::new();
    for (code, list) in &fields.currencies {
        let pointer = format!("/currencies/{code}");
        match Currency::parse(code) {
            Ok(currency) => {
                check_list(&mut errors, &pointer, list, &configured);
                currencies.insert(currency.as_str().to_owned(), list.clone());
            }
            Err(message) => errors.push(FieldError::new(pointer, message)),
        }
    }
    let retries = fields
        .retries
        .map_or_else(RetrySettings::default, |r| RetrySettings {
            soft_declines: r.soft_declines,
            after_three_d_secure: r.after_three_d_secure,
            max_attempts: r.max_attempts,
        });
    if !(1..=MOST_ATTEMPTS).contains(&retries.max_attempts) {
        errors.push(FieldError::new(
            "/retries/max_attempts",
            format!("must be 1 to {MOST_ATTEMPTS}"),
        ));
    }
    if !errors.is_empty() {
        return Err(ApiError::ValidationFailed(errors));
    }
    let routing = Routing {
        providers: fields.providers,
        currencies,
        strategy: fields.strategy,
        retries,
    };
    let mut conn = state.pool.get().await?;
    routing::change(&mut conn, merchant_id, &routing, &actor).await?;
    state.payments.routing.forget(merchant_id);
    tracing::info!(merchant = %merchant_id, support_key = %actor.key_name, ?routing, "routing changed");
    Ok(HttpResponse::Ok().json(view(&state, merchant_id, Some(routing))))
}

/// 1–16 distinct names, each of a configured provider.
fn check_list(errors: &mut Vec<FieldError>, pointer: &str, list: &[String], configured: &[String]) {
    if list.is_empty() || list.len() > 16 {
        errors.push(FieldError::new(pointer, "must name 1 to 16 providers"));
    }
    for (i, name) in list.iter().enumerate() {
        if !configured.contains(name) {
            errors.push(FieldError::new(
                format!("{pointer}/{i}"),
                format!(
                    "`{name}` is not a configured provider (configured: {})",
                    configured.join(", ")
                ),
            ));
        } else if list[..i].contains(name) {
            errors.push(FieldError::new(
                format!("{pointer}/{i}"),
                format!("`{name}` is named twice"),
            ));
        }
    }
}
