//! `POST /v1/webhooks/{provider}`: signed provider events.

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::Utc;
use serde::Serialize;

use crate::http::errors::ApiError;
use crate::http::AppState;
use crate::payments::webhooks::{self, EventOutcome, Received};
use crate::providers::WebhookError;

/// What payorch tells the provider: received (so it stops redelivering) and what it did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookReceipt {
    received: bool,
    /// `true` when this event was delivered before; nothing changed this time.
    duplicate: bool,
    /// What the first delivery did.
    outcome: Option<EventOutcome>,
}

#[utoipa::path(post, path = "/v1/webhooks/{provider}", tag = "webhooks",
    params(
        ("provider" = String, Path, description = "`stripe`"),
        ("Stripe-Signature" = String, Header, description = "`t=<unix>,v1=<hex HMAC-SHA256 of \"{t}.{raw body}\">[,v1=…]`"),
    ),
    request_body(content = String, content_type = "application/json", description = "a Stripe event, signed byte for byte"),
    responses(
        (status = 200, body = WebhookReceipt, description = "recorded, or a duplicate that changed nothing"),
        (status = 400, body = crate::http::errors::Problem, description = "webhook_signature_invalid (missing, malformed, stale or wrong signature) or invalid_request (not an event); nothing stored"),
        (status = 404, body = crate::http::errors::Problem, description = "no such provider"),
    ))]
pub async fn receive(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let payments = &state.payments;
    if path.as_str() != payments.provider.name() {
        return Err(ApiError::NotFound("webhook provider"));
    }
    let signature = req
        .headers()
        .get(payments.provider.signature_header())
        .and_then(|value| value.to_str().ok());
    let event = payments
        .provider
        .verify_webhook(&body, signature, Utc::now())
        .map_err(|err| {
            payments.metrics.webhook_event("rejected");
            // The reason only: never the secret, the header or the body.
            tracing::warn!(reason = %err, "webhook refused");
            match err {
                WebhookError::BadJson(why) => {
                    ApiError::InvalidRequest(format!("the body is not a provider event: {why}"))
                }
                other => ApiError::WebhookSignatureInvalid(other.to_string()),
            }
        })?;
    let receipt = match webhooks::receive(&state.pool, payments, &event).await? {
        Received::Recorded { outcome, .. } => WebhookReceipt {
            received: true,
            duplicate: false,
            outcome: Some(outcome),
        },
        Received::Duplicate => WebhookReceipt {
            received: true,
            duplicate: true,
            outcome: None,
        },
    };
    Ok(HttpResponse::Ok().json(receipt))
}
