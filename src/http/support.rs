//! `/v1/support/payments…`: support staff find any payment, read its whole story, ask the
//! provider about it now, and list what needs a human (docs/guides/support.md, "Support"). Support keys only;
//! every read and action is logged with the key's name, and every action (a write) needs the
//! `operate` role and is audited ([`crate::payments::support::audit`]).

pub mod events;
pub mod scores;
pub mod stats;

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::accounts::{self, Caller};
use crate::events::deliveries::story_of_order;
use crate::events::disabled::disabled_endpoints;
use crate::http::errors::{ApiError, FieldError};
use crate::http::payments::parse_payment_id;
use crate::http::{page_limit, AppState};
use crate::ids::{MerchantId, OrderId, PaymentId};
use crate::payments::attempts::find_attempt;
use crate::payments::reconciler;
use crate::payments::support::audit::{self, Action, Actor, Done};
use crate::payments::support::{self, Search};
use crate::payments::{AttemptStatus, Source};
use crate::providers::registry::is_valid_name;
use crate::views::{self, NeedsAHuman, Payment, Story};

/// The support key's name, for the log of what its holder did; a merchant key is refused.
pub(crate) async fn support_key_name(
    state: &AppState,
    caller: &Caller,
) -> Result<String, ApiError> {
    Ok(support_actor(state, caller).await?.key_name)
}

/// The support key acting, with its name; a merchant key is refused.
async fn support_actor(state: &AppState, caller: &Caller) -> Result<Actor, ApiError> {
    let (key_id, role) = caller.require_support()?;
    let mut conn = state.pool.get().await?;
    let key_name = accounts::key_name(&mut conn, key_id)
        .await?
        .unwrap_or_else(|| "an unnamed support key".to_owned());
    Ok(Actor {
        key_id,
        key_name,
        role,
    })
}

/// The support key about to write, with its name: a merchant key and a read-only support key
/// are refused `403`, before anything is looked up or done.
pub(crate) async fn operator(state: &AppState, caller: &Caller) -> Result<Actor, ApiError> {
    caller.require_operator()?;
    support_actor(state, caller).await
}

/// Takes a provider-driven action on record (docs/guides/support.md, "Support"): its ask is written before
/// `action` runs — if it cannot be, the action is not taken, and the caller is answered `503`
/// or `500` with nothing moved (pressing again is safe) — and its outcome once it has
/// answered: `after` of what it answered, or `{"error": code}` when it failed. An outcome that
/// cannot be written is logged and leaves the ask on its own, shown as asked, outcome
/// unknown; the caller is still answered what the action did, since it was done.
pub(crate) async fn audited<T>(
    state: &AppState,
    actor: &Actor,
    done: Done,
    action: impl std::future::Future<Output = Result<T, ApiError>>,
    after: impl FnOnce(&T) -> serde_json::Value,
) -> Result<T, ApiError> {
    let asked = {
        let mut conn = state.pool.get().await?;
        audit::ask(&mut conn, actor, done).await?
    };
    let outcome = action.await;
    let after = match &outcome {
        Ok(value) => after(value),
        Err(err) => serde_json::json!({ "error": err.code() }),
    };
    let answered = match state.pool.get().await {
        Ok(mut conn) => audit::answer(&mut conn, asked, after)
            .await
            .map_err(|err| err.to_string()),
        Err(err) => Err(err.to_string()),
    };
    if let Err(err) = answered {
        tracing::error!(error = %err, support_key = %actor.key_name,
            "a support action was done but its outcome not recorded: its ask stands, outcome unknown");
    }
    outcome
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    /// `mer_…`
    merchant_id: Option<String>,
    /// `ord_…`
    order_id: Option<String>,
    /// The merchant's own reference of the order, exactly. It is unique per merchant: without
    /// `merchant_id` or `merchant_name`, each merchant's order of that reference is found.
    merchant_reference: Option<String>,
    /// Part of the merchant's name, in any case (`acme` finds "Acme Coffee"): the payments of
    /// every merchant whose name contains it.
    merchant_name: Option<String>,
    /// The attempt's status now.
    #[param(value_type = Option<AttemptStatus>)]
    status: Option<String>,
    /// The provider the attempt was sent to (`stripe`, `adyen`, …), also one since removed
    /// from the configuration.
    provider: Option<String>,
    /// The merchant's Idempotency-Key that made the attempt.
    idempotency_key: Option<String>,
    /// The provider's charge id (`pi_…`).
    provider_payment_id: Option<String>,
    /// RFC 3339; made at or after.
    created_from: Option<String>,
    /// RFC 3339; made before.
    created_to: Option<String>,
    /// 1–100, default 20.
    limit: Option<i64>,
    /// A payment id from the previous page: this page starts after it.
    starting_after: Option<String>,
}

/// A page of attempts, newest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PaymentPage {
    /// Always `list`.
    object: &'static str,
    data: Vec<Payment>,
    /// Another page exists: ask again with `starting_after` set to the last id here.
    has_more: bool,
}

/// Collects every bad parameter, so one answer names them all.
struct Checked {
    errors: Vec<FieldError>,
}

impl Checked {
    fn parse<T, E: std::fmt::Display>(
        &mut self,
        field: &str,
        raw: Option<&str>,
        parse: impl Fn(&str) -> Result<T, E>,
    ) -> Option<T> {
        match raw.map(parse) {
            None => None,
            Some(Ok(value)) => Some(value),
            Some(Err(err)) => {
                self.errors.push(FieldError::new(field, err.to_string()));
                None
            }
        }
    }
}

fn rfc3339(raw: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(raw)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| "must be an RFC 3339 time, e.g. 2026-11-22T10:00:00Z".to_owned())
}

fn status(raw: &str) -> Result<AttemptStatus, String> {
    AttemptStatus::parse(raw).ok_or_else(|| {
        let words: Vec<&str> = AttemptStatus::ALL.iter().map(|s| s.as_str()).collect();
        format!("must be one of {}", words.join(", "))
    })
}

fn provider(raw: &str) -> Result<String, String> {
    if is_valid_name(raw) {
        Ok(raw.to_owned())
    } else {
        Err("must be a provider name: 1 to 32 of a-z, 0-9, '-' and '_'".into())
    }
}

fn text(raw: &str) -> Result<String, String> {
    if raw.is_empty() || raw.len() > 255 {
        Err("must be 1 to 255 characters".into())
    } else {
        Ok(raw.to_owned())
    }
}

/// Search payment attempts (support)
///
/// Attempts across merchants, newest first, filtered by the query's parameters and paginated with
/// `starting_after` while `has_more` is true. Support keys only (docs/guides/support.md, "Support").
#[utoipa::path(get, path = "/v1/support/payments", tag = "support",
    params(SearchParams),
    security(("bearer" = [])),
    responses(
        (status = 200, body = PaymentPage, example = json!(crate::views::examples::payment_page())),
        (status = 403, body = crate::http::errors::Problem, description = "not a support key"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed: each bad parameter named"),
    ))]
pub async fn search_payments(
    caller: Caller,
    state: web::Data<AppState>,
    params: web::Query<SearchParams>,
) -> Result<HttpResponse, ApiError> {
    let key_name = support_key_name(&state, &caller).await?;
    let p = params.into_inner();
    let mut checked = Checked { errors: Vec::new() };
    let search = Search {
        merchant_id: checked.parse(
            "merchant_id",
            p.merchant_id.as_deref(),
            str::parse::<MerchantId>,
        ),
        order_id: checked.parse("order_id", p.order_id.as_deref(), str::parse::<OrderId>),
        merchant_reference: checked.parse(
            "merchant_reference",
            p.merchant_reference.as_deref(),
            text,
        ),
        merchant_name: checked.parse("merchant_name", p.merchant_name.as_deref(), text),
        status: checked.parse("status", p.status.as_deref(), status),
        provider: checked.parse("provider", p.provider.as_deref(), provider),
        idempotency_key: checked.parse("idempotency_key", p.idempotency_key.as_deref(), text),
        provider_payment_id: checked.parse(
            "provider_payment_id",
            p.provider_payment_id.as_deref(),
            text,
        ),
        created_from: checked.parse("created_from", p.created_from.as_deref(), rfc3339),
        created_to: checked.parse("created_to", p.created_to.as_deref(), rfc3339),
    };
    let starting_after = checked.parse(
        "starting_after",
        p.starting_after.as_deref(),
        str::parse::<PaymentId>,
    );
    let limit = page_limit(p.limit).unwrap_or_else(|err| {
        checked.errors.push(err);
        0
    });
    if !checked.errors.is_empty() {
        return Err(ApiError::ValidationFailed(checked.errors));
    }
    tracing::info!(support_key = %key_name, ?search, "support search");
    let mut conn = state.pool.get().await?;
    // One more than asked tells whether another page exists.
    let mut found = support::search(&mut conn, &search, limit + 1, starting_after).await?;
    let has_more = found.len() as i64 > limit;
    found.truncate(limit as usize);
    Ok(HttpResponse::Ok().json(PaymentPage {
        object: "list",
        data: views::payments(found),
        has_more,
    }))
}

/// A payment's whole story (support)
///
/// Everything support needs to answer "what happened to this payment": the attempt, its order and
/// the order's other attempts, its status timeline, each call to the provider, the provider's
/// webhooks, its refunds, captures and voids, the idempotency key that made it, the events sent to
/// the merchant with their deliveries, and what support did to it. Support keys only (docs/guides/support.md,
/// "Support").
#[utoipa::path(get, path = "/v1/support/payments/{id}", tag = "support",
    params(("id" = String, Path, description = "payment id, `pay_…`", example = json!(crate::views::examples::PAYMENT))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Story, description = "the attempt, its order and the order's other attempts, its timeline, provider calls, webhook events and key, and the order's events with their deliveries", example = json!(crate::views::examples::story())),
        (status = 403, body = crate::http::errors::Problem, description = "not a support key"),
        (status = 404, body = crate::http::errors::Problem),
    ))]
pub async fn payment_story(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let key_name = support_key_name(&state, &caller).await?;
    let id = parse_payment_id(&path)?;
    tracing::info!(support_key = %key_name, "support read a payment's story");
    let mut conn = state.pool.get().await?;
    let story = support::story(&mut conn, id)
        .await?
        .ok_or(ApiError::NotFound("payment"))?;
    let events =
        story_of_order(&mut conn, story.payment.merchant_id, story.payment.order_id).await?;
    Ok(HttpResponse::Ok().json(Story::new(story, events)))
}

/// Ask the provider about a payment now (support)
///
/// For a `pending` attempt: asks the provider at once instead of at `next_check_at`, and answers
/// the attempt as it is after. A final attempt is answered as it is, without a call. Needs no
/// `Idempotency-Key`: asking twice is harmless. A support key with the `operate` role; audited.
#[utoipa::path(post, path = "/v1/support/payments/{id}/reconcile", tag = "support",
    params(("id" = String, Path, description = "payment id, `pay_…`", example = json!(crate::views::examples::PAYMENT))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Payment, description = "the attempt as it is after the check; a final attempt is answered as it is, without a call", example = json!(crate::views::examples::payment())),
        (status = 403, body = crate::http::errors::Problem, description = "not a support key, or a support key without the `operate` role"),
        (status = 404, body = crate::http::errors::Problem),
        (status = 503, body = crate::http::errors::Problem, description = "the database is unavailable; safe to press again"),
    ))]
pub async fn reconcile_now(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let actor = operator(&state, &caller).await?;
    let key_name = &actor.key_name;
    let id = parse_payment_id(&path)?;
    let attempt = {
        let mut conn = state.pool.get().await?;
        find_attempt(&mut conn, None, id)
            .await?
            .ok_or(ApiError::NotFound("payment"))?
    };
    tracing::Span::current().record("order", tracing::field::display(attempt.order_id));
    tracing::info!(support_key = %key_name, status = attempt.status.as_str(), "support asked the provider now");
    // The reconciler's own check: a second press at the same moment makes a second harmless
    // call (a retrieve, or a resend under the attempt's own key), and only one of the two
    // can move the attempt.
    let who = format!("support key {key_name:?}");
    let done = Done {
        action: Action::ReconcilePayment,
        target_id: attempt.id.0,
        merchant_id: attempt.merchant_id,
        order_id: Some(attempt.order_id),
        before: Some(serde_json::json!({ "status": attempt.status.as_str() })),
        after: None,
    };
    let check = async {
        reconciler::check(
            &state.pool,
            &state.payments,
            attempt,
            Source::Support,
            Some(&who),
        )
        .await
        .map_err(ApiError::from)
    };
    let attempt = audited(
        &state,
        &actor,
        done,
        check,
        |a| serde_json::json!({ "status": a.status.as_str() }),
    )
    .await?;
    Ok(HttpResponse::Ok().json(Payment::from(attempt)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct AttentionParams {
    /// 1–100 of each kind, default 20.
    limit: Option<i64>,
}

/// What needs a human (support)
///
/// Up to `limit` of each kind of trouble payorch cannot settle alone: attempts stuck `pending`,
/// failures the provider has no record of, attempts the provider contradicts, stuck refunds,
/// provider webhooks in conflict, and merchants' webhook endpoints that were disabled. Support keys
/// only (docs/guides/support.md, "Support").
#[utoipa::path(get, path = "/v1/support/needs-a-human", tag = "support",
    params(AttentionParams),
    security(("bearer" = [])),
    responses(
        (status = 200, body = NeedsAHuman, example = json!(crate::views::examples::needs_a_human())),
        (status = 403, body = crate::http::errors::Problem, description = "not a support key"),
        (status = 422, body = crate::http::errors::Problem),
    ))]
pub async fn needs_a_human(
    caller: Caller,
    state: web::Data<AppState>,
    params: web::Query<AttentionParams>,
) -> Result<HttpResponse, ApiError> {
    let key_name = support_key_name(&state, &caller).await?;
    let limit = page_limit(params.limit).map_err(|err| ApiError::ValidationFailed(vec![err]))?;
    tracing::info!(support_key = %key_name, "support read what needs a human");
    let mut conn = state.pool.get().await?;
    let list =
        support::needs_a_human(&mut conn, state.payments.reconciler.alert_after, limit).await?;
    let disabled = disabled_endpoints(&mut conn, limit).await?;
    Ok(HttpResponse::Ok().json(NeedsAHuman::new(list, disabled)))
}
