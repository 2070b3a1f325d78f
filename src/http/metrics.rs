//! The HTTP side of the metrics: every request counted by route, and `GET /metrics`. The
//! registry itself is [`crate::telemetry::metrics::Metrics`].

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, Error, HttpRequest, HttpResponse};
use sha2::{Digest, Sha256};

use crate::http::auth::bearer_secret;
use crate::http::errors::ApiError;
use crate::http::AppState;
use crate::secret::Secret;

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

/// Who may read `/metrics` on the API's own port. Metrics name merchants' traffic, providers'
/// health and the database's state: for operators, not the internet (docs/PRODUCTION.md,
/// "Metrics and provider URLs").
#[derive(Clone, Default)]
pub enum MetricsAccess {
    /// Anyone: the demo, and tests.
    #[default]
    Open,
    /// Whoever presents this bearer token (`--metrics-token-file`).
    Token(Secret),
    /// Nobody: the metrics are on a listener of their own (`--metrics-bind`), or not served.
    Off,
}

/// The token never shows in `Debug` output.
impl std::fmt::Debug for MetricsAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MetricsAccess::Open => "Open",
            MetricsAccess::Token(_) => "Token([redacted])",
            MetricsAccess::Off => "Off",
        })
    }
}

impl MetricsAccess {
    /// Whether `req` may read the metrics; `Off` answers as an unknown route does.
    fn admit(&self, req: &HttpRequest) -> Result<(), ApiError> {
        match self {
            MetricsAccess::Open => Ok(()),
            MetricsAccess::Off => Err(ApiError::NotFound("route")),
            MetricsAccess::Token(token) => {
                // Read as every key is; two Authorization headers present no token.
                let presented = bearer_secret(req).ok().flatten().unwrap_or_default();
                // Digests compared, not the token byte by byte: how long the comparison
                // takes says nothing about the token.
                let matches =
                    Sha256::digest(presented.as_bytes()) == Sha256::digest(token.as_bytes());
                if matches {
                    Ok(())
                } else {
                    Err(ApiError::MetricsTokenRequired)
                }
            }
        }
    }
}

/// Prometheus metrics
///
/// Requests and latency by route and status, the database pool, deliveries and the reapers, in
/// Prometheus' text format. Served here unless the metrics have a listener of their own
/// (`--metrics-bind`); a bearer token when the server was given one (docs/operations/monitoring.md, "Alerts").
#[utoipa::path(get, path = "/metrics", tag = "operations",
    security((), ("metrics_token" = [])),
    responses(
        (status = 200, description = "Prometheus text format", content_type = "text/plain", body = String, example = json!(crate::views::examples::METRICS)),
        (status = 401, body = crate::http::errors::Problem, description = "unauthenticated: this server asks for its metrics token"),
        (status = 404, body = crate::http::errors::Problem, description = "not served on this port (a listener of their own, `--metrics-bind`, or none)"),
    ))]
pub async fn metrics(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    state.metrics_access.admit(&req)?;
    Ok(render(&state))
}

/// `GET /metrics` on the metrics' own listener (`--metrics-bind`): open, as that address is
/// reached only by the operator's scraper.
pub async fn metrics_on_own_listener(state: web::Data<AppState>) -> HttpResponse {
    render(&state)
}

fn render(state: &AppState) -> HttpResponse {
    state.payments.publish_circuits();
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render())
}
