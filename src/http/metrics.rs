//! The HTTP side of the metrics: every request counted by route, and `GET /metrics`. The
//! registry itself is [`crate::telemetry::metrics::Metrics`].

use std::time::Instant;

use crate::http::AppState;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, Error, HttpResponse};

/// Counts every request by its route pattern (not its path, which would explode the labels).
pub async fn record_request(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let method = req.method().to_string();
    let response = next.call(req).await?;
    if let Some(state) = state {
        let route = response
            .request()
            .match_pattern()
            .unwrap_or_else(|| "unmatched".into());
        state
            .metrics
            .observe(&method, &route, response.status().as_u16(), started);
    }
    Ok(response)
}

#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    state.payments.publish_circuits();
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render(&state.pool))
}
