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

/// Receive a provider's webhook
///
/// For the provider, not for merchants: a signed event of the provider named in the path
/// (`stripe`), checked against its signature on the raw bytes, recorded once (a redelivery is a
/// `duplicate` that changes nothing) and applied to the attempt or refund it names (docs/guides/provider-webhooks.md,
/// "Webhooks").
#[utoipa::path(post, path = "/v1/webhooks/{provider}", tag = "webhooks",
    params(
        ("provider" = String, Path, description = "`stripe`", example = "stripe"),
        ("Stripe-Signature" = String, Header, description = "`t=<unix>,v1=<hex HMAC-SHA256 of \"{t}.{raw body}\">[,v1=…]`"),
    ),
    request_body(content = Object, content_type = "application/json", description = "a Stripe event, signed byte for byte", example = json!(crate::views::examples::stripe_event())),
    responses(
        (status = 200, body = WebhookReceipt, description = "recorded, or a duplicate that changed nothing", example = json!(crate::views::examples::webhook_receipt())),
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
    let Some(provider) = payments.providers.get(path.as_str()) else {
        return Err(ApiError::NotFound("webhook provider"));
    };
    let adapter = &provider.adapter;
    let signature = adapter
        .signature_header()
        .and_then(|name| req.headers().get(name))
        .and_then(|value| value.to_str().ok());
    let events = adapter
        .verify_delivery(&body, signature, Utc::now())
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
    // Each event on its own: an error leaves those before it recorded, and the provider's
    // redelivery of the whole finds them duplicates.
    let mut receipt = None;
    for event in &events {
        let received = webhooks::receive(&state.pool, payments, &provider.name, event).await?;
        receipt.get_or_insert(match received {
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
        });
    }
    Ok(match adapter.acknowledgement() {
        Some(text) => HttpResponse::Ok().content_type("text/plain").body(text),
        None => HttpResponse::Ok().json(receipt.unwrap_or(WebhookReceipt {
            received: true,
            duplicate: false,
            outcome: None,
        })),
    })
}
