//! The sandbox's HTTP endpoints: the PaymentIntents protocol (docs/DESIGN.md, "The provider
//! protocol") plus the ledger.

use std::sync::Arc;

use actix_web::http::{header, StatusCode};
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::Utc;
use serde::Serialize;
use subtle::ConstantTimeEq;

use super::behaviour::Behaviour;
use super::kept::KeptIntent;
use super::params::{parse_query, Clause, CreateParams, ParamError};
use super::store::{Begin, Cursor, Lookup, Replay, StoredResponse};
use super::webhooks::Cause;
use super::{random_id, roll, Sandbox};
use crate::providers::stripe::wire::{
    ApiError, ErrorBody, LastPaymentError, ListResult, PaymentIntent, SearchResult,
};

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    // The charge first: actix tries routes in order, and each pattern with a `{…}` in it
    // costs a regex match on the way.
    cfg.route("/v1/payment_intents", web::post().to(create_intent))
        .route("/v1/payment_intents", web::get().to(list_intents))
        // Registered before `{id}` so "search" is not taken for an id.
        .route("/v1/payment_intents/search", web::get().to(search_intents))
        .route("/v1/payment_intents/{id}", web::get().to(retrieve_intent))
        .route(
            "/v1/payment_intents/{id}/confirm",
            web::post().to(confirm_intent),
        )
        .route(
            "/v1/payment_intents/{id}/cancel",
            web::post().to(cancel_intent),
        )
        .configure(super::refunds::configure)
        .configure(super::adyen::configure)
        .route("/__sandbox/ledger", web::get().to(ledger))
        .default_service(web::to(unknown_route));
}

async fn create_intent(sb: web::Data<Sandbox>, req: HttpRequest, body: Bytes) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    // Edge failure before the API saw the request: nothing recorded, a retry runs afresh.
    if roll(sb.config.error_rate) {
        return api_error_500();
    }
    let params = match CreateParams::parse(&body) {
        Ok(params) => params,
        // Validation errors are not saved under the key (Stripe does the same).
        Err(e) => return invalid_request(e),
    };
    let behaviour = params
        .payment_method
        .as_deref()
        .and_then(Behaviour::for_payment_method);
    if behaviour == Some(Behaviour::ErrorBefore) {
        return api_error_500();
    }
    let key = match begin_keyed(&sb, &req, &params.fingerprint) {
        Ok(key) => key,
        Err(answer) => return *answer,
    };
    match charge(&sb, params, behaviour, key.clone()).await {
        Some(stored) => respond(&stored, key.as_deref(), false),
        None => api_error_500(),
    }
}

/// A confirmed create whose key (if any) was begun: the charge, then the edge faults after
/// it, as both protocols share them. `None`: answer a 500 in the protocol's own words (the
/// charge and its answer are recorded under the key, or the task failed and the key is free).
pub(super) async fn charge(
    sb: &web::Data<Sandbox>,
    params: CreateParams,
    behaviour: Option<Behaviour>,
    key: Option<String>,
) -> Option<StoredResponse> {
    // The charge runs as its own task on the sandbox's runtime, so a client that hangs up
    // (or times out) cannot leave a half-done charge or a key stuck in flight.
    let task = sb.rt.spawn(execute(
        sb.clone().into_inner(),
        params,
        behaviour,
        key.clone(),
        None,
    ));
    let stored = match task.await {
        Ok(stored) => stored,
        Err(e) => {
            tracing::error!(error = %e, "sandbox charge task failed");
            if let Some(key) = &key {
                sb.store.abandon(key);
            }
            return None;
        }
    };
    // Edge failures after the result was recorded: the charge stands and a resend with
    // the same key gets the recorded answer.
    if behaviour == Some(Behaviour::LostResponse) || roll(sb.config.lost_response_rate) {
        sb.wait_for_shutdown().await;
        return None;
    }
    if behaviour == Some(Behaviour::ErrorAfter) {
        return None;
    }
    Some(stored)
}

/// Create the intent (or confirm `base`, an intent made earlier), charge per its behaviour,
/// record the answer under the key.
async fn execute(
    sb: Arc<Sandbox>,
    params: CreateParams,
    behaviour: Option<Behaviour>,
    key: Option<String>,
    base: Option<PaymentIntent>,
) -> StoredResponse {
    let cause = Some(Cause {
        request_id: random_id("req"),
        idempotency_key: key.clone(),
    });
    // A new intent, or `base` confirmed, in its place; `fill` finishes it.
    let keep = |status: &str, confirmed: bool, fill: &dyn Fn(&mut PaymentIntent)| match &base {
        Some(base) => {
            let mut intent = new_intent(base.id.clone(), &params, status);
            intent.client_secret = base.client_secret.clone();
            intent.created = base.created;
            fill(&mut intent);
            if !sb.store.restore(&intent, key.as_deref(), confirmed) {
                tracing::warn!(id = %intent.id, "sandbox intent forgotten while being confirmed");
            }
            intent
        }
        None => sb.store.create(key.as_deref(), confirmed, |id| {
            let mut intent = new_intent(id, &params, status);
            fill(&mut intent);
            intent
        }),
    };
    let stored = match (behaviour, params.payment_method.as_deref()) {
        (None, Some(token)) => stored_error(
            StatusCode::BAD_REQUEST,
            ApiError {
                kind: "invalid_request_error".into(),
                code: Some("resource_missing".into()),
                decline_code: None,
                message: Some(format!("No such PaymentMethod: '{token}'")),
                param: Some("payment_method".into()),
                payment_intent: None,
            },
        ),
        (
            Some(Behaviour::Decline {
                decline_code,
                message,
            }),
            _,
        ) if params.confirm => {
            let intent = keep("requires_payment_method", true, &|intent| {
                intent.last_payment_error = Some(LastPaymentError {
                    kind: "card_error".into(),
                    code: Some("card_declined".into()),
                    decline_code: Some(decline_code.into()),
                    message: Some(message.into()),
                });
            });
            sb.announce("payment_intent.payment_failed", &intent, cause.clone());
            intent_answer(intent)
        }
        (Some(Behaviour::Processing), _) if params.confirm => {
            let intent = keep("processing", true, &|_| {});
            sb.announce("payment_intent.processing", &intent, cause.clone());
            schedule_settlement(&sb, intent.id.clone());
            intent_answer(intent)
        }
        (Some(behaviour), _) if params.confirm => {
            if behaviour == Behaviour::Slow {
                tokio::time::sleep(sb.config.slow()).await;
            }
            let intent = keep("succeeded", true, &|intent| {
                intent.amount_received = intent.amount;
                intent.latest_charge = Some(random_id("ch"));
            });
            sb.announce("payment_intent.succeeded", &intent, cause.clone());
            intent_answer(intent)
        }
        _ => {
            // Not confirmed: an intent that waits, nothing charged, not in the ledger.
            let status = if params.payment_method.is_some() {
                "requires_confirmation"
            } else {
                "requires_payment_method"
            };
            intent_answer(keep(status, false, &|_| {}))
        }
    };
    if let Some(key) = &key {
        sb.store.finish(key, stored.clone());
    }
    stored
}

/// What a create or confirm that made `intent` answers: the intent, or for a declined one
/// Stripe's 402 `card_error` naming it. A replay past the recorded answers is made here too,
/// so it is the same bytes while the intent has not changed.
fn intent_answer(intent: PaymentIntent) -> StoredResponse {
    match intent.last_payment_error.clone() {
        Some(declined) if intent.status == "requires_payment_method" => stored_error(
            StatusCode::PAYMENT_REQUIRED,
            ApiError {
                kind: declined.kind,
                code: declined.code,
                decline_code: declined.decline_code,
                message: declined.message,
                param: None,
                payment_intent: Some(intent),
            },
        ),
        _ => stored_json(StatusCode::OK, &intent),
    }
}

/// What a replay answers, in the Stripe face's words (the Adyen face translates).
pub(super) fn replayed(replay: Replay) -> StoredResponse {
    match replay {
        Replay::Recorded(stored) => stored,
        Replay::Intent(intent) => intent_answer(*intent),
        Replay::Refund(refund) => stored_json(StatusCode::OK, &refund),
    }
}

/// A `processing` intent succeeds after `--processing-ms`, with its webhook.
fn schedule_settlement(sb: &Arc<Sandbox>, id: String) {
    let sb_task = sb.clone();
    sb.spawn(async move {
        tokio::time::sleep(sb_task.config.processing()).await;
        if let Some(intent) = sb_task.store.transition(&id, "processing", "succeeded") {
            sb_task.announce("payment_intent.succeeded", &intent, None);
        }
    });
}

/// An intent with the store's `id` (`Store::create`).
fn new_intent(id: String, params: &CreateParams, status: &str) -> PaymentIntent {
    let client_secret = Some(format!("{id}_{}", random_id("secret")));
    PaymentIntent {
        client_secret,
        id,
        object: "payment_intent".into(),
        amount: params.amount,
        amount_received: 0,
        currency: params.currency.clone(),
        status: status.into(),
        payment_method: params.payment_method.clone(),
        metadata: params.metadata.clone(),
        last_payment_error: None,
        latest_charge: None,
        description: params.description.clone(),
        capture_method: "automatic".into(),
        confirmation_method: "automatic".into(),
        created: Utc::now().timestamp(),
        livemode: false,
        payment_method_types: vec!["card".into()],
        amount_capturable: 0,
        next_action: None,
        canceled_at: None,
        cancellation_reason: None,
    }
}

async fn retrieve_intent(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    id: web::Path<String>,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    match sb.store.get(&id) {
        Lookup::Found(intent) => json(StatusCode::OK, &intent),
        Lookup::Forgotten => forgotten(&sb, "payment_intent", &id),
        Lookup::Missing => no_such_intent(&id),
    }
}

#[derive(serde::Deserialize)]
struct SearchParams {
    query: Option<String>,
    limit: Option<usize>,
    /// The `next_page` of the page before.
    page: Option<String>,
}

/// A search page cursor: how many results came before it.
fn page_cursor(offset: usize) -> String {
    format!("page_{offset}")
}

async fn search_intents(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    params: web::Query<SearchParams>,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    let Some(query) = params.query.as_deref() else {
        return invalid_request(ParamError {
            code: "parameter_missing",
            param: Some("query".into()),
            message: "Missing required param: query.".into(),
        });
    };
    let clauses = match parse_query(query) {
        Ok(clauses) => clauses,
        Err(e) => return invalid_request(e),
    };
    let limit = params.limit.unwrap_or(10).clamp(1, 100);
    let offset = match params.page.as_deref() {
        None => 0,
        Some(page) => match page.strip_prefix("page_").and_then(|n| n.parse().ok()) {
            Some(offset) => offset,
            None => {
                return invalid_request(ParamError::new(
                    "parameter_invalid_string",
                    "page",
                    format!("Invalid page: {page}"),
                ))
            }
        },
    };
    // Stripe lists search results newest first.
    let (data, total) = sb.store.search(
        |intent| clauses.iter().all(|c| matches(c, intent)),
        offset,
        limit,
    );
    if total == 0 {
        if let Some(refused) = search_forgotten(&sb) {
            return refused;
        }
    }
    let has_more = offset + data.len() < total;
    json(
        StatusCode::OK,
        &SearchResult {
            object: "search_result".into(),
            next_page: has_more.then(|| page_cursor(offset + data.len())),
            data,
            has_more,
            url: Some("/v1/payment_intents/search".into()),
        },
    )
}

#[derive(serde::Deserialize)]
struct ListParams {
    limit: Option<usize>,
    starting_after: Option<String>,
    ending_before: Option<String>,
}

/// `GET /v1/payment_intents`: newest first, paged by `starting_after` / `ending_before` ids.
async fn list_intents(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    params: web::Query<ListParams>,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    let limit = params.limit.unwrap_or(10).clamp(1, 100);
    let (cursor, param) = match (&params.starting_after, &params.ending_before) {
        (Some(after), _) => (Cursor::After(after), "starting_after"),
        (None, Some(before)) => (Cursor::Before(before), "ending_before"),
        (None, None) => (Cursor::Newest, ""),
    };
    let (data, has_more) = match sb.store.list(cursor, limit) {
        Lookup::Found(page) => page,
        Lookup::Forgotten => return forgotten(&sb, param, page_id(&params)),
        Lookup::Missing => {
            return invalid_request(ParamError::new(
                "resource_missing",
                param,
                format!("No such payment_intent: '{}'", page_id(&params)),
            ))
        }
    };
    json(
        StatusCode::OK,
        &ListResult {
            object: "list".into(),
            data,
            has_more,
            url: "/v1/payment_intents".into(),
        },
    )
}

/// The id a page of the list starts at.
fn page_id(params: &ListParams) -> &str {
    let id = params
        .starting_after
        .as_ref()
        .or(params.ending_before.as_ref());
    id.map(String::as_str).unwrap_or_default()
}

/// `POST /v1/payment_intents/{id}/confirm`: an intent made without `confirm=true` is charged
/// now, by the same behaviour table as a confirmed create, under the request's own key.
async fn confirm_intent(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    id: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    let intent = match sb.store.get(&id) {
        Lookup::Found(intent) => intent,
        Lookup::Forgotten => return forgotten(&sb, "intent", &id),
        Lookup::Missing => return no_such_intent(&id),
    };
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let payment_method = form
        .iter()
        .find(|(name, _)| name == "payment_method")
        .map(|(_, value)| value.clone())
        .or_else(|| intent.payment_method.clone());
    let Some(payment_method) = payment_method else {
        return invalid_request(ParamError::new(
            "parameter_missing",
            "payment_method",
            "You must provide a payment_method to confirm this PaymentIntent.".into(),
        ));
    };
    let params = CreateParams {
        amount: intent.amount,
        currency: intent.currency.clone(),
        payment_method: Some(payment_method.clone()),
        confirm: true,
        description: intent.description.clone(),
        metadata: intent.metadata.clone(),
        fingerprint: format!("confirm {} payment_method={payment_method}", intent.id),
    };
    let behaviour = Behaviour::for_payment_method(&payment_method);
    let key = match begin_keyed(&sb, &req, &params.fingerprint) {
        Ok(key) => key,
        Err(answer) => return *answer,
    };
    // After the key: a replay of a confirm that charged answers what it answered then.
    if !matches!(
        intent.status.as_str(),
        "requires_payment_method" | "requires_confirmation"
    ) {
        if let Some(key) = &key {
            sb.store.abandon(key);
        }
        return unexpected_state(&intent, "confirm");
    }
    let stored = execute(
        sb.clone().into_inner(),
        params,
        behaviour,
        key.clone(),
        Some(intent),
    )
    .await;
    respond(&stored, key.as_deref(), false)
}

/// `POST /v1/payment_intents/{id}/cancel`: only before money moves, like Stripe.
async fn cancel_intent(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    id: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let reason = form
        .into_iter()
        .find(|(name, _)| name == "cancellation_reason")
        .map(|(_, value)| value);
    match sb.store.cancel(&id, reason) {
        Lookup::Missing => no_such_intent(&id),
        Lookup::Forgotten => forgotten(&sb, "intent", &id),
        Lookup::Found(Ok(intent)) => {
            sb.announce(
                "payment_intent.canceled",
                &intent,
                Some(Cause {
                    request_id: random_id("req"),
                    idempotency_key: idempotency_key(&req).ok().flatten(),
                }),
            );
            json(StatusCode::OK, &intent)
        }
        Lookup::Found(Err(intent)) => unexpected_state(&intent, "cancel"),
    }
}

/// The answer about an intent or refund the sandbox made and no longer keeps (README, "The
/// sandbox's memory"): `410`, never the `404` that would say it was never made. payorch reads
/// it, as any refused lookup, as saying nothing about the charge.
pub(super) fn forgotten(sb: &Sandbox, param: &str, id: &str) -> HttpResponse {
    let window = sb.store.window().intents;
    gone(
        format!(
            "The sandbox no longer keeps '{id}': it keeps the last {window} intents and \
             the last {window} refunds (--keep-intents); GET /__sandbox/ledger counts what \
             it forgot."
        ),
        param,
    )
}

/// `410` for a search that found nothing once intents have been forgotten: the answer could
/// have been among them, and an empty list would say there is none.
pub(super) fn search_forgotten(sb: &Sandbox) -> Option<HttpResponse> {
    let forgotten = sb.store.forgotten();
    if forgotten.intents == 0 {
        return None;
    }
    let up_to = forgotten.created_up_to.unwrap_or_default();
    Some(gone(
        format!(
            "Nothing kept matches, but the sandbox has forgotten {} intents (made up to \
             {up_to}, Unix time), any of which could have: it cannot say that none does.",
            forgotten.intents
        ),
        "query",
    ))
}

/// The `410 sandbox_forgotten` of [`forgotten`] and [`search_forgotten`], about `param`.
fn gone(message: String, param: &str) -> HttpResponse {
    error(
        StatusCode::GONE,
        ApiError {
            kind: "invalid_request_error".into(),
            code: Some(FORGOTTEN.into()),
            decline_code: None,
            message: Some(message),
            param: Some(param.to_owned()).filter(|p| !p.is_empty()),
            payment_intent: None,
        },
    )
}

/// The error code of [`forgotten`] and [`search_forgotten`].
pub(super) const FORGOTTEN: &str = "sandbox_forgotten";

fn no_such_intent(id: &str) -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        ApiError {
            kind: "invalid_request_error".into(),
            code: Some("resource_missing".into()),
            decline_code: None,
            message: Some(format!("No such payment_intent: '{id}'")),
            param: Some("intent".into()),
            payment_intent: None,
        },
    )
}

/// Stripe's answer to an action the intent's status does not allow.
fn unexpected_state(intent: &PaymentIntent, action: &str) -> HttpResponse {
    error(
        StatusCode::BAD_REQUEST,
        ApiError {
            kind: "invalid_request_error".into(),
            code: Some("payment_intent_unexpected_state".into()),
            decline_code: None,
            message: Some(format!(
                "You cannot {action} this PaymentIntent because it has a status of {}.",
                intent.status
            )),
            param: None,
            payment_intent: Some(intent.clone()),
        },
    )
}

fn matches(clause: &Clause, intent: &KeptIntent) -> bool {
    match clause {
        Clause::Metadata { key, value } => intent.metadata(key) == Some(value.as_str()),
        Clause::Field { field, value } => match field.as_str() {
            "status" => intent.status() == value,
            "currency" => intent.currency() == value,
            "amount" => intent.amount().to_string() == *value,
            _ => false,
        },
    }
}

#[derive(Serialize)]
struct LedgerList {
    object: &'static str,
    /// Every confirmed intent kept.
    data: Vec<super::LedgerEntry>,
    /// Every refund kept: with `data`, what each payment netted.
    refunds: Vec<super::RefundEntry>,
    /// How much is kept.
    window: super::Window,
    /// What is no longer kept: with `data` and `refunds`, everything there was.
    forgotten: super::Forgotten,
}

/// The ground truth for tests; unauthenticated, like any simulator back door.
async fn ledger(sb: web::Data<Sandbox>) -> HttpResponse {
    json(
        StatusCode::OK,
        &LedgerList {
            object: "list",
            data: sb.store.ledger(),
            refunds: sb.store.refund_ledger(),
            window: sb.store.window(),
            forgotten: sb.store.forgotten(),
        },
    )
}

async fn unknown_route(req: HttpRequest) -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        ApiError {
            kind: "invalid_request_error".into(),
            code: None,
            decline_code: None,
            message: Some(format!(
                "Unrecognized request URL ({}: {}).",
                req.method(),
                req.path()
            )),
            param: None,
            payment_intent: None,
        },
    )
}

/// The secret of `Authorization: Bearer <secret>`, or of `Basic base64(<secret>:)` (the secret
/// as user name, no password), both of which Stripe accepts.
fn presented_secret(value: &str) -> Option<Vec<u8>> {
    if let Some(secret) = value.strip_prefix("Bearer ") {
        return Some(secret.as_bytes().to_vec());
    }
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(value.strip_prefix("Basic ")?.trim())
        .ok()?;
    let user = match decoded.iter().position(|&b| b == b':') {
        Some(colon) => decoded[..colon].to_vec(),
        None => decoded,
    };
    Some(user)
}

/// `Some(401)` unless the request carries the secret as Bearer or Basic credentials.
pub(super) fn refuse_unauthorized(sb: &Sandbox, req: &HttpRequest) -> Option<HttpResponse> {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(presented_secret);
    let message = match presented {
        Some(key) if bool::from(key.as_slice().ct_eq(sb.config.secret.as_bytes())) => {
            return None
        }
        Some(_) => "Invalid API Key provided.",
        None => "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth.",
    };
    Some(error(
        StatusCode::UNAUTHORIZED,
        ApiError {
            kind: "invalid_request_error".into(),
            code: None,
            decline_code: None,
            message: Some(message.into()),
            param: None,
            payment_intent: None,
        },
    ))
}

/// Takes the request's key for a fresh run (`Ok(None)` without a key), or the answer Stripe
/// gives when the key was used before: the recorded response, a mismatch or in flight.
pub(super) fn begin_keyed(
    sb: &Sandbox,
    req: &HttpRequest,
    fingerprint: &str,
) -> Result<Option<String>, Box<HttpResponse>> {
    let key = idempotency_key(req).map_err(|e| Box::new(invalid_request(e)))?;
    if let Some(key) = &key {
        let refused = match sb.store.begin(key, fingerprint) {
            Begin::Fresh => None,
            Begin::Replay(replay) => Some(respond(&replayed(replay), Some(key), true)),
            Begin::Mismatch => Some(idempotency_mismatch(key)),
            Begin::InFlight => Some(idempotency_in_flight(key)),
        };
        if let Some(answer) = refused {
            return Err(Box::new(answer));
        }
    }
    Ok(key)
}

/// The `Idempotency-Key` header: absent is fine, present must be 1–255 characters.
fn idempotency_key(req: &HttpRequest) -> Result<Option<String>, ParamError> {
    let Some(value) = req.headers().get("Idempotency-Key") else {
        return Ok(None);
    };
    match value.to_str() {
        Ok(key) if !key.is_empty() && key.len() <= 255 => Ok(Some(key.to_owned())),
        _ => Err(ParamError {
            code: "idempotency_key_invalid",
            param: None,
            message: "Idempotency-Key must be 1 to 255 visible ASCII characters.".into(),
        }),
    }
}

fn idempotency_mismatch(key: &str) -> HttpResponse {
    error(
        StatusCode::BAD_REQUEST,
        ApiError {
            kind: "idempotency_error".into(),
            code: None,
            decline_code: None,
            message: Some(format!(
                "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '{key}' if you meant to execute a different request."
            )),
            param: None,
            payment_intent: None,
        },
    )
}

fn idempotency_in_flight(key: &str) -> HttpResponse {
    error(
        StatusCode::CONFLICT,
        ApiError {
            kind: "idempotency_error".into(),
            code: Some("idempotency_key_in_use".into()),
            decline_code: None,
            message: Some(format!(
                "There is currently another in-progress request using this Idempotent Key ('{key}'). Please try again later."
            )),
            param: None,
            payment_intent: None,
        },
    )
}

pub(super) fn invalid_request(e: ParamError) -> HttpResponse {
    error(
        StatusCode::BAD_REQUEST,
        ApiError {
            kind: "invalid_request_error".into(),
            code: Some(e.code.into()),
            decline_code: None,
            message: Some(e.message),
            param: e.param,
            payment_intent: None,
        },
    )
}

pub(super) fn api_error_500() -> HttpResponse {
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        ApiError {
            kind: "api_error".into(),
            code: None,
            decline_code: None,
            message: Some("An unknown error occurred (sandbox fault).".into()),
            param: None,
            payment_intent: None,
        },
    )
}

pub(super) fn stored_json<T: Serialize>(status: StatusCode, value: &T) -> StoredResponse {
    // Stripe answers pretty-printed JSON; these types always serialise.
    let body = serde_json::to_vec_pretty(value).unwrap_or_else(|_| b"{}".to_vec());
    StoredResponse {
        status: status.as_u16(),
        body: Bytes::from(body),
    }
}

pub(super) fn stored_error(status: StatusCode, error: ApiError) -> StoredResponse {
    stored_json(status, &ErrorBody { error })
}

pub(super) fn json<T: Serialize>(status: StatusCode, value: &T) -> HttpResponse {
    respond(&stored_json(status, value), None, false)
}

pub(super) fn error(status: StatusCode, error: ApiError) -> HttpResponse {
    respond(&stored_error(status, error), None, false)
}

pub(super) fn respond(stored: &StoredResponse, key: Option<&str>, replayed: bool) -> HttpResponse {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = HttpResponse::build(status);
    response
        .content_type("application/json")
        .insert_header(("Request-Id", random_id("req")));
    if let Some(key) = key {
        response.insert_header(("Idempotency-Key", key.to_owned()));
    }
    if replayed {
        response.insert_header(("Idempotent-Replayed", "true"));
    }
    response.body(stored.body.clone())
}
