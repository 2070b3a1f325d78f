//! `GET /v1/support/routing/scores`: each provider's recent approval rate per currency, as
//! routing by success orders routes by it (docs/guides/routing.md, "Routing by success"). The
//! console shows it; support keys only.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};

use super::support_key_name;
use crate::accounts::Caller;
use crate::http::errors::ApiError;
use crate::http::AppState;
use crate::payments::success_routing::WINDOW;

/// The scores as this replica last read them (every replica reads the same, within a second).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SuccessScoresView {
    /// Always `success_scores`.
    object: &'static str,
    /// The most scored outcomes a score holds: a provider's last this many in a currency,
    /// within the last hour.
    window: usize,
    /// By provider, then currency.
    scores: Vec<ScoreView>,
}

/// One provider's score in one currency.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ScoreView {
    provider: String,
    /// Lowercase ISO 4217.
    currency: String,
    /// Approvals among the scored outcomes, 0 to 1; null with none.
    rate: Option<f64>,
    /// Scored outcomes in the window; below 10 the provider counts as 0.8.
    scored: usize,
    approved: usize,
    /// When the provider was left out of this currency (its fifth scored failure in a row),
    /// while it is; null when it is chosen by its rate.
    eliminated_since: Option<DateTime<Utc>>,
}

fn example() -> Value {
    json!({
        "object": "success_scores",
        "window": 20,
        "scores": [
            {"provider": "adyen", "currency": "eur", "rate": 0.85, "scored": 20, "approved": 17,
             "eliminated_since": null},
            {"provider": "stripe", "currency": "eur", "rate": 0.2, "scored": 20, "approved": 4,
             "eliminated_since": "2026-11-27T12:00:00Z"}
        ]
    })
}

/// Providers' recent approval rates (support)
///
/// Each provider's approval rate per currency over its last scored outcomes, and whether it is
/// eliminated: what routes with `"strategy": "success_rate"` order their providers by. Support
/// keys only (docs/guides/routing.md, "Routing by success").
#[utoipa::path(get, path = "/v1/support/routing/scores", tag = "support",
    security(("bearer" = [])),
    responses(
        (status = 200, body = SuccessScoresView, example = json!(example())),
        (status = 403, body = crate::http::errors::Problem, description = "not a support key"),
    ))]
pub async fn success_scores(
    caller: Caller,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    support_key_name(&state, &caller).await?;
    let snapshot = state.payments.success.snapshot();
    let mut scores: Vec<ScoreView> = snapshot
        .by
        .iter()
        .map(|((provider, currency), score)| ScoreView {
            provider: provider.clone(),
            currency: currency.clone(),
            rate: score.rate(),
            scored: score.scored,
            approved: score.approved,
            eliminated_since: score.eliminated_since,
        })
        .collect();
    scores.sort_by(|a, b| (&a.provider, &a.currency).cmp(&(&b.provider, &b.currency)));
    Ok(HttpResponse::Ok().json(SuccessScoresView {
        object: "success_scores",
        window: WINDOW,
        scores,
    }))
}
