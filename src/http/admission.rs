//! Admission control in front of the database pool (docs/guides/api.md, "Overload").
//!
//! A request that needs the database is refused on arrival with `503 unavailable` and a
//! `Retry-After` when the pool could not serve it within its acquire timeout: when requests
//! have lately waited more than half of it for a connection (a checkout asks twice), or
//! the pool has handed none out for that long while requests queue. Queueing it would only
//! make it, and every request behind it, wait seconds for the same `503`, while its
//! connection and buffers pile up in memory. The refusal is quick, before any of the request's
//! work (its body is read, nothing else), so a retry with the same `Idempotency-Key` is
//! always safe.
//!
//! The check is made once, before the handler runs. A request admitted is never refused
//! later: the statements that finish a claimed key wait for their connection like any other,
//! and the queue they wait in is the one this check keeps short.

use std::time::Duration;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, Error, ResponseError};

use crate::db::DbPool;
use crate::http::errors::ApiError;
use crate::http::AppState;
use crate::telemetry::once_a_second::OnceASecond;

/// Refuses a request that needs the database when the pool's queue is past what it can
/// serve within its acquire timeout.
pub async fn admit(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let refused = match req.app_data::<web::Data<AppState>>() {
        Some(state) if needs_database(req.path()) => refusal(&state.pool),
        _ => None,
    };
    match refused {
        Some(error) => Ok(req
            .into_response(error.error_response())
            .map_into_right_body()),
        None => Ok(next.call(req).await?.map_into_left_body()),
    }
}

/// The API and the checkout demo's calls; not the pages, scripts, metrics or health checks,
/// which never wait for the pool (readiness asks it, and says so when it cannot answer).
fn needs_database(path: &str) -> bool {
    path.starts_with("/v1/") || path.starts_with("/checkout/demo/")
}

/// `Some` when a newcomer would wait longer than half the acquire timeout for a connection:
/// a checkout asks for one twice, before and after the provider call.
fn refusal(pool: &DbPool) -> Option<ApiError> {
    let wait = pool.expected_wait();
    if wait <= pool.acquire_timeout() / 2 {
        return None;
    }
    warn_now_and_then(wait);
    // By then the queue ahead of it has been served, if no more came.
    let retry_after = Duration::from_secs(wait.as_secs_f64().ceil().max(1.0) as u64);
    Some(ApiError::Overloaded { retry_after })
}

/// Refusals come by the thousand a second in a crowd: one warning a second says how many.
fn warn_now_and_then(wait: Duration) {
    static REFUSALS: OnceASecond = OnceASecond::new();
    if let Some(refused) = REFUSALS.count() {
        tracing::warn!(
            refused,
            expected_wait_ms = wait.as_millis() as u64,
            "requests refused: the database pool is overloaded"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_that_use_the_database_are_gated() {
        assert!(needs_database("/v1/checkout"));
        assert!(needs_database("/v1/webhooks/stripe"));
        assert!(needs_database("/checkout/demo/orders"));
        for free in [
            "/metrics",
            "/health/live",
            "/checkout",
            "/checkout/checkout.js",
        ] {
            assert!(!needs_database(free), "{free}");
        }
    }
}
