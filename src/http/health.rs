//! Liveness (the process answers) and readiness (the database answers and is migrated).

use actix_web::{web, HttpResponse};
use serde::Serialize;

use crate::db::migrations::migrations_applied;
use crate::http::errors::ApiError;
use crate::http::AppState;

#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    status: &'static str,
}

#[utoipa::path(get, path = "/health/live", tag = "operations",
    responses((status = 200, body = Health)))]
pub async fn live() -> HttpResponse {
    HttpResponse::Ok().json(Health { status: "ok" })
}

#[utoipa::path(get, path = "/health/ready", tag = "operations",
    responses(
        (status = 200, body = Health, description = "database reachable and migrations applied"),
        (status = 503, body = crate::http::errors::Problem, description = "not ready"),
    ))]
pub async fn ready(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let mut conn = state.pool.get().await?;
    match migrations_applied(&mut conn).await {
        Ok(true) => Ok(HttpResponse::Ok().json(Health { status: "ready" })),
        Ok(false) => Err(ApiError::Unavailable),
        Err(err) => Err(match ApiError::from(err) {
            // A missing migrations table is "not migrated yet", not a server fault.
            ApiError::Internal(_) => ApiError::Unavailable,
            other => other,
        }),
    }
}
