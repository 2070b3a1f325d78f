//! Liveness (the process answers) and readiness (the database answers and is migrated).

use actix_web::{web, HttpResponse};
use serde::Serialize;

use crate::db::migrations::migrations_applied;
use crate::db::roles::role_reach;
use crate::http::errors::ApiError;
use crate::http::AppState;

#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    status: &'static str,
    /// When ready: `owns_nothing` while payorch's database role can only read and write rows,
    /// as it should; `can_bypass_invariants` when it is a superuser or owns the tables, and so
    /// could disable the triggers that hold the invariants (docs/PRODUCTION.md, section 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    database_role: Option<&'static str>,
}

/// Liveness: the process answers
///
/// Always `200` while the process serves requests; it does not touch the database. For a liveness
/// probe.
#[utoipa::path(get, path = "/health/live", tag = "operations",
    responses((status = 200, body = Health, example = json!(crate::views::examples::health_live()))))]
pub async fn live() -> HttpResponse {
    HttpResponse::Ok().json(Health {
        status: "ok",
        database_role: None,
    })
}

/// Readiness: the database is reachable and migrated
///
/// `200` once the database answers and every migration is applied, else `503`. For a readiness
/// probe or a load balancer's health check. `database_role` says `can_bypass_invariants` when
/// payorch's database role could disable the triggers that hold its invariants
/// (docs/PRODUCTION.md).
#[utoipa::path(get, path = "/health/ready", tag = "operations",
    responses(
        (status = 200, body = Health, description = "database reachable and migrations applied", example = json!(crate::views::examples::health_ready())),
        (status = 503, body = crate::http::errors::Problem, description = "not ready"),
    ))]
pub async fn ready(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let mut conn = state.pool.get().await?;
    match migrations_applied(&mut conn).await {
        Ok(true) => Ok(HttpResponse::Ok().json(Health {
            status: "ready",
            // Where an operator's probes look: the start-up warning scrolls away.
            database_role: role_reach(&mut conn).await.ok().map(|reach| {
                if reach.can_bypass_invariants() {
                    "can_bypass_invariants"
                } else {
                    "owns_nothing"
                }
            }),
        })),
        Ok(false) => Err(ApiError::Unavailable),
        Err(err) => Err(match ApiError::from(err) {
            // A missing migrations table is "not migrated yet", not a server fault.
            ApiError::Internal(_) => ApiError::Unavailable,
            other => other,
        }),
    }
}
