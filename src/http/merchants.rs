//! Merchant accounts as the API shows them.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};

use crate::accounts::{self, Caller};
use crate::http::errors::{ApiError, FieldError};
use crate::http::{page_limit, AppState};
use crate::ids::MerchantId;
use crate::views::Merchant;

/// Retrieve a merchant
///
/// The merchant's id, name and creation time. A merchant key sees only its own merchant.
#[utoipa::path(get, path = "/v1/merchants/{id}", tag = "merchants",
    params(("id" = String, Path, description = "merchant id, `mer_…`", example = json!(crate::views::examples::MERCHANT))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Merchant, example = json!(crate::views::examples::merchant())),
        (status = 401, body = crate::http::errors::Problem),
        (status = 404, body = crate::http::errors::Problem, description = "unknown, or another merchant's"),
    ))]
pub async fn get_merchant(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let not_found = ApiError::NotFound("merchant");
    let id: MerchantId = path.parse().map_err(|_| ApiError::NotFound("merchant"))?;
    if !caller.can_read(id) {
        return Err(not_found);
    }
    let mut conn = state.pool.get().await?;
    let merchant = accounts::find_merchant(&mut conn, id)
        .await?
        .ok_or(not_found)?;
    Ok(HttpResponse::Ok().json(Merchant::from(merchant)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// 1–100, default 20.
    limit: Option<i64>,
    /// A merchant id: the page starts after it.
    starting_after: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct MerchantList {
    data: Vec<Merchant>,
    has_more: bool,
}

/// List merchants (support)
///
/// Every merchant, oldest first, `limit` at a time; pass the last one's id as `starting_after` for
/// the next page while `has_more` is true. Support keys only.
#[utoipa::path(get, path = "/v1/support/merchants", tag = "support",
    params(ListParams),
    security(("bearer" = [])),
    responses(
        (status = 200, body = MerchantList, example = json!(crate::views::examples::merchant_list())),
        (status = 403, body = crate::http::errors::Problem, description = "not a support key"),
    ))]
pub async fn list_merchants(
    caller: Caller,
    state: web::Data<AppState>,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    caller.require_support()?;
    let mut errors = Vec::new();
    let limit = page_limit(params.limit).unwrap_or_else(|err| {
        errors.push(err);
        0
    });
    let starting_after = match params
        .starting_after
        .as_deref()
        .map(str::parse::<MerchantId>)
    {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(err)) => {
            errors.push(FieldError::new("starting_after", err.to_string()));
            None
        }
    };
    if !errors.is_empty() {
        return Err(ApiError::ValidationFailed(errors));
    }
    let mut conn = state.pool.get().await?;
    // One more than asked tells whether another page exists.
    let mut found = accounts::list_merchants(&mut conn, limit + 1, starting_after).await?;
    let has_more = found.len() as i64 > limit;
    found.truncate(limit as usize);
    let data = found.into_iter().map(Merchant::from).collect();
    Ok(HttpResponse::Ok().json(MerchantList { data, has_more }))
}
