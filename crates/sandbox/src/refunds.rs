//! `POST /v1/refunds` and `GET /v1/refunds/{id}`: Stripe's Refunds protocol (docs/guides/refunds.md,
//! "Refunds"), with the same idempotency semantics as charges and the same faults, chosen
//! per refund by `metadata[sandbox_fault]`, or by a `metadata[reason]` of `sandbox_` and the
//! fault's name (what payorch sends for a refund whose `reason` names one, as a card token
//! names a charge's fault): `error_before` (a 500 before anything happens),
//! `error_after` (the refund happens, then a 500), `lost_response` (the refund
//! happens, the answer never comes), `slow` (the answer comes after `--slow-ms`), `pending`
//! (the refund is `pending`, and succeeds after `--processing-ms`) and `failure` (`pending`,
//! then `failed` with `expired_or_canceled_card` after `--processing-ms`: nothing went back).
//! Each change is also a signed webhook: `refund.created`, then `refund.updated` or
//! `refund.failed`. The Adyen face's refunds (`adyen_refunds`) are made here too, with the
//! same faults, and announced in Adyen's words.
//!
//! The `500`s of `error_before` and `error_after` are the key's first result, which Stripe
//! saves "whatever it was, including 500 errors" (Stripe's docs, "Idempotent requests"): a
//! resend with the key gets the `500` again, whether or not the refund was made. On the Adyen
//! face they stay failures at the edge, as its charges' are (`charges`).

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::Utc;

use super::answers::{
    api_error_500, api_error_500_answer, begin_keyed, error, fail_keyed, forgotten,
    invalid_request, missing_intent, refund_list_forgotten, refuse_unauthorized, respond,
    shown_json, stored_error, stored_json, with_nulls, FORGOTTEN,
};
use super::listing::{Cursor, ListQuery};
use super::params::{metadata_key, ParamError};
use super::protocol::is_marked_adyen;
use super::store::{Lookup, RefundRefused, StoredResponse};
use super::webhooks::Cause;
use super::{random_id, roll, Sandbox};
use payorch_wire::stripe::{ApiError, Refund};

/// What a refund's `metadata[sandbox_fault]` asks the sandbox to do wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    ErrorBefore,
    ErrorAfter,
    LostResponse,
    Slow,
    Pending,
    Failure,
}

impl Fault {
    /// Every fault by its name.
    const NAMED: [(&'static str, Fault); 6] = [
        ("error_before", Fault::ErrorBefore),
        ("error_after", Fault::ErrorAfter),
        ("lost_response", Fault::LostResponse),
        ("slow", Fault::Slow),
        ("pending", Fault::Pending),
        ("failure", Fault::Failure),
    ];

    fn parse(value: &str) -> Option<Fault> {
        Self::NAMED
            .iter()
            .find(|(name, _)| *name == value)
            .map(|(_, fault)| *fault)
    }

    /// The fault a token (`sandbox_` and the fault's name) names.
    pub(super) fn from_token(token: &str) -> Option<Fault> {
        token.strip_prefix("sandbox_").and_then(Fault::parse)
    }

    /// Every token [`Fault::from_token`] knows, for an error that names them.
    pub(super) fn tokens() -> String {
        let tokens: Vec<String> = Self::NAMED
            .iter()
            .map(|(name, _)| format!("sandbox_{name}"))
            .collect();
        tokens.join(", ")
    }
}

/// A refund asked for: `POST /v1/refunds` form parameters, or what the Adyen face read.
pub(super) struct RefundParams {
    pub payment_intent: String,
    pub amount: Option<i64>,
    pub reason: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub fault: Option<Fault>,
    /// Every parameter: what "the same parameters" means for idempotency.
    pub fingerprint: String,
}

impl RefundParams {
    fn parse(body: &[u8]) -> Result<Self, ParamError> {
        let mut pairs: Vec<(String, String)> =
            serde_urlencoded::from_bytes(body).map_err(|e| ParamError {
                code: "parameter_invalid",
                param: None,
                message: format!("Invalid form body: {e}"),
            })?;
        let mut payment_intent = None;
        let mut amount = None;
        let mut reason = None;
        let mut metadata = BTreeMap::new();
        for (name, value) in &pairs {
            match name.as_str() {
                "payment_intent" => payment_intent = Some(value.clone()),
                "amount" => {
                    let parsed = value.parse::<i64>().ok().filter(|a| *a >= 1);
                    amount = Some(parsed.ok_or_else(|| {
                        ParamError::new(
                            "parameter_invalid_integer",
                            "amount",
                            format!("Invalid positive integer: {value}"),
                        )
                    })?);
                }
                "reason" => reason = Some(value.clone()),
                _ => match metadata_key(name) {
                    Some(key) if !key.is_empty() => {
                        metadata.insert(key.to_owned(), value.clone());
                    }
                    _ => {
                        return Err(ParamError::new(
                            "parameter_unknown",
                            name,
                            format!("Received unknown parameter: {name}"),
                        ))
                    }
                },
            }
        }
        let payment_intent = payment_intent.ok_or_else(|| {
            ParamError::new(
                "parameter_missing",
                "payment_intent",
                "Missing required param: payment_intent.".into(),
            )
        })?;
        let fault = match metadata.get("sandbox_fault") {
            Some(name) => Fault::parse(name),
            None => metadata.get("reason").and_then(|r| Fault::from_token(r)),
        };
        pairs.sort();
        let fingerprint = serde_json::to_string(&pairs).unwrap_or_default();
        Ok(RefundParams {
            payment_intent,
            amount,
            reason,
            metadata,
            fault,
            fingerprint,
        })
    }
}

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/refunds", web::post().to(create_refund))
        .route("/v1/refunds", web::get().to(list_refunds))
        .route("/v1/refunds/{id}", web::get().to(retrieve_refund));
}

async fn create_refund(sb: web::Data<Sandbox>, req: HttpRequest, body: Bytes) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    if roll(sb.config.error_rate) {
        return api_error_500();
    }
    let params = match RefundParams::parse(&body) {
        Ok(params) => params,
        Err(e) => return invalid_request(e),
    };
    let key = match begin_keyed(&sb, &req, &params.fingerprint) {
        Ok(key) => key,
        Err(answer) => return *answer,
    };
    if params.fault == Some(Fault::ErrorBefore) {
        return fail_keyed(&sb, key.as_deref());
    }
    match make(&sb, params, key.clone()).await {
        Some(stored) => respond(&stored, key.as_deref(), false),
        None => api_error_500(),
    }
}

/// A refund whose key (if any) was begun: made, then the faults after it, as both
/// protocols share them (`charges::charge` is the same for charges). `None`: answer a 500 in
/// the protocol's own words (the refund and its answer are recorded under the key, or the
/// task failed and the key is free).
pub(super) async fn make(
    sb: &web::Data<Sandbox>,
    params: RefundParams,
    key: Option<String>,
) -> Option<StoredResponse> {
    let fault = params.fault;
    let adyen = is_marked_adyen(&params.metadata);
    let work = execute(sb.clone().into_inner(), params, key.clone());
    let stored = sb.run_whole("refund", key.as_deref(), work).await?;
    match fault {
        Some(Fault::LostResponse) => {
            sb.wait_for_shutdown().await;
            None
        }
        // The Stripe face recorded its 500 (`execute`) and answers it as recorded.
        Some(Fault::ErrorAfter) if adyen => None,
        _ => Some(stored),
    }
}

async fn execute(
    sb: std::sync::Arc<Sandbox>,
    params: RefundParams,
    key: Option<String>,
) -> StoredResponse {
    if params.fault == Some(Fault::Slow) {
        tokio::time::sleep(sb.config.slow()).await;
    }
    let first_status = match params.fault {
        Some(Fault::Pending | Fault::Failure) => "pending",
        _ => "succeeded",
    };
    // Stripe refuses to refund a charge whose dispute holds its money; Adyen refunds it (the
    // money then goes back twice, which payorch must prevent).
    let disputed = (!is_marked_adyen(&params.metadata))
        .then(|| sb.disputes.holding(&params.payment_intent))
        .flatten();
    let made = match disputed {
        Some(dispute) => Err(RefundRefused::Disputed {
            dispute: dispute.id,
        }),
        None => sb.store.refund(
            &params.payment_intent,
            params.amount,
            |id, amount, intent| Refund {
                id,
                object: "refund".into(),
                amount,
                currency: intent.currency.clone(),
                status: first_status.into(),
                payment_intent: Some(intent.id.clone()),
                reason: params.reason.clone(),
                failure_reason: None,
                metadata: params.metadata.clone(),
                created: Utc::now().timestamp(),
            },
            key.as_deref(),
        ),
    };
    let stored = match made {
        Ok(refund) => {
            let cause = Cause {
                request_id: random_id("req"),
                idempotency_key: key.clone(),
            };
            sb.announce_refund("refund.created", &refund, Some(cause));
            if refund.status == "pending" {
                let failed = params.fault == Some(Fault::Failure);
                schedule_settlement(&sb, refund.id.clone(), failed);
            }
            stored_json(StatusCode::OK, &refund)
        }
        Err(refused) => {
            let (status, error) = refusal(&sb, &params, refused);
            stored_error(status, error)
        }
    };
    // The refund was made (or refused); on the Stripe face the 500 that follows is the key's
    // first result.
    let stored = if params.fault == Some(Fault::ErrorAfter) && !is_marked_adyen(&params.metadata) {
        api_error_500_answer()
    } else {
        with_nulls(stored, sb.config.null_rate)
    };
    if let Some(key) = &key {
        sb.store.finish(key, stored.clone());
    }
    stored
}

/// A `pending` refund succeeds, or fails, after `--processing-ms`, with its webhook.
fn schedule_settlement(sb: &std::sync::Arc<Sandbox>, id: String, fails: bool) {
    let sb_task = sb.clone();
    sb.spawn(async move {
        tokio::time::sleep(sb_task.config.processing()).await;
        let (to, reason, kind) = if fails {
            ("failed", Some("expired_or_canceled_card"), "refund.failed")
        } else {
            ("succeeded", None, "refund.updated")
        };
        if let Some(refund) = sb_task.store.settle_refund(&id, "pending", to, reason) {
            sb_task.announce_refund(kind, &refund, None);
        }
    });
}

fn refusal(sb: &Sandbox, params: &RefundParams, refused: RefundRefused) -> (StatusCode, ApiError) {
    let (code, message, param) = match refused {
        RefundRefused::NoSuchIntent => (
            "resource_missing",
            format!("No such payment_intent: '{}'", params.payment_intent),
            Some("payment_intent"),
        ),
        // Nothing was refunded now, and the sandbox cannot say what the charge had left.
        RefundRefused::Forgotten => (
            FORGOTTEN,
            format!(
                "The sandbox no longer keeps payment_intent '{}' (it keeps the last {} \
                 intents, --keep-intents): nothing was refunded.",
                params.payment_intent,
                sb.store.window().intents
            ),
            Some("payment_intent"),
        ),
        RefundRefused::NotCharged { status } => (
            "charge_not_refundable",
            format!("This PaymentIntent ({status}) has no successful charge to refund."),
            None,
        ),
        RefundRefused::Disputed { dispute } => (
            "charge_disputed",
            format!(
                "This charge has been disputed ({dispute}) and its amount is held: it cannot \
                 be refunded."
            ),
            None,
        ),
        RefundRefused::TooLarge { left: 0 } => (
            "charge_already_refunded",
            "The charge has already been refunded in full.".to_owned(),
            None,
        ),
        RefundRefused::TooLarge { left } => (
            "amount_too_large",
            format!("Refund amount is greater than the unrefunded amount on the charge ({left})."),
            Some("amount"),
        ),
    };
    let status = if code == FORGOTTEN {
        StatusCode::GONE
    } else {
        StatusCode::BAD_REQUEST
    };
    let error = ApiError {
        kind: "invalid_request_error".into(),
        code: Some(code.into()),
        decline_code: None,
        message: Some(message),
        param: param.map(str::to_owned),
        payment_intent: None,
    };
    (status, error)
}

/// `GET /v1/refunds`: every refund, or `payment_intent`'s, newest first, paged and windowed
/// as `GET /v1/payment_intents` is (`listing`), read-after-write.
async fn list_refunds(sb: web::Data<Sandbox>, req: HttpRequest) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    let query = match ListQuery::parse(req.query_string(), &["payment_intent", "charge"]) {
        Ok(query) => query,
        Err(e) => return invalid_request(e),
    };
    if query.filters.contains_key("charge") {
        // Stripe takes it; the sandbox keeps no Charge objects to tell refunds by.
        return invalid_request(ParamError::new(
            "parameter_unknown",
            "charge",
            "The sandbox lists refunds by payment_intent, not by charge.".into(),
        ));
    }
    let intent = match query.filters.get("payment_intent") {
        None => None,
        Some(id) => match sb.store.refunds_listable(id) {
            Lookup::Found(serial) => Some(serial),
            // The list would miss refunds the sandbox forgot: no list rather than a short one.
            Lookup::Forgotten => return forgotten(&sb, "payment_intent", id),
            Lookup::Missing => return missing_intent(id, "payment_intent"),
        },
    };
    let keep = |refund: &Refund| query.created.holds(refund.created);
    let (data, has_more) = match sb
        .store
        .list_refunds(intent, &query.cursor, query.limit, keep)
    {
        Lookup::Found(page) => page,
        Lookup::Forgotten => return forgotten(&sb, query.cursor.param(), query.cursor.id()),
        Lookup::Missing => {
            return invalid_request(ParamError::new(
                "resource_missing",
                query.cursor.param(),
                format!("No such refund: '{}'", query.cursor.id()),
            ))
        }
    };
    // Every refund, run to the oldest kept: the forgotten ones could have been next. (One
    // intent's refunds are refused above when any of them is forgotten.)
    if intent.is_none() && !has_more && !matches!(query.cursor, Cursor::Before(_)) {
        if let Some(refused) = refund_list_forgotten(&sb) {
            return refused;
        }
    }
    shown_json(
        &sb,
        StatusCode::OK,
        &serde_json::json!({
            "object": "list", "data": data, "has_more": has_more, "url": "/v1/refunds",
        }),
    )
}

async fn retrieve_refund(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    id: web::Path<String>,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    match sb.store.get_refund(&id) {
        Lookup::Found(refund) => shown_json(&sb, StatusCode::OK, &refund),
        Lookup::Forgotten => forgotten(&sb, "id", &id),
        Lookup::Missing => error(
            StatusCode::NOT_FOUND,
            ApiError {
                kind: "invalid_request_error".into(),
                code: Some("resource_missing".into()),
                decline_code: None,
                message: Some(format!("No such refund: '{id}'")),
                param: Some("id".into()),
                payment_intent: None,
            },
        ),
    }
}
