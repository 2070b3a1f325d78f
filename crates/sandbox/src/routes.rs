//! The sandbox's HTTP endpoints: the PaymentIntents protocol (docs/DESIGN.md, "The provider
//! protocol") plus the ledger.

use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;

use super::answers::{
    api_error_500, begin_keyed, error, fail_keyed, forgotten, invalid_request, json,
    list_forgotten, no_such_intent, refuse_unauthorized, respond, search_forgotten, shown_json,
    unexpected_state,
};
use super::behaviour::Behaviour;
use super::charges::charge;
use super::kept::KeptIntent;
use super::listing::{Cursor, ListQuery};
use super::mix::Face;
use super::mix_control::{dropped as dropped_answer, refused_keyed, refused_stripe};
use super::params::{
    missing_return_url, parse_query, parse_return_url, requests_three_d_secure, site, Clause,
    CreateParams, ParamError, REQUEST_THREE_D_SECURE,
};
use super::store::Lookup;
use super::three_d_secure;
use super::{roll, Sandbox};
use payorch_wire::stripe::{ApiError, ListResult, SearchResult};

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
    let mut params = match CreateParams::parse(&body) {
        Ok(params) => params,
        // Validation errors are not saved under the key (Stripe does the same).
        Err(e) => return invalid_request(e),
    };
    params.site = site(&req);
    let behaviour = params
        .payment_method
        .as_deref()
        .and_then(Behaviour::for_payment_method)
        .map(|b| match params.confirm {
            true => three_d_secure::met(sb.mixed(Face::Stripe, &req, b), params.three_d_secure),
            false => b,
        });
    let dropped = behaviour == Some(Behaviour::DroppedResponse) && params.confirm;
    if behaviour == Some(Behaviour::ThreeDSecure) && params.confirm && params.return_url.is_none() {
        return invalid_request(missing_return_url());
    }
    let key = match begin_keyed(&sb, &req, &params.fingerprint) {
        Ok(key) => key,
        Err(answer) => return *answer,
    };
    // After the key, so a key that was answered before replays that answer; nothing is
    // recorded under it.
    if behaviour == Some(Behaviour::Refused) && params.confirm {
        return refused_keyed(&sb, key.as_deref(), refused_stripe);
    }
    // The API began the request, then failed: that 500 is the key's first result. (Without
    // `confirm` nothing is charged, and the fault waits for the confirm.)
    if behaviour == Some(Behaviour::ErrorBefore) && params.confirm {
        return fail_keyed(&sb, key.as_deref());
    }
    match charge(&sb, params, behaviour, key.clone(), None).await {
        Some(_) if dropped => dropped_answer(),
        Some(stored) => respond(&stored, key.as_deref(), false),
        None => api_error_500(),
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
        Lookup::Found(intent) => shown_json(&sb, StatusCode::OK, &intent),
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
    // Stripe's search lags: an intent shows once it has existed `--search-lag-secs`.
    let searchable = searchable_since(sb.config.search_lag());
    // Stripe lists search results newest first.
    let (data, total) = sb.store.search(
        |intent| searchable(intent.created()) && clauses.iter().all(|c| matches(c, intent)),
        offset,
        limit,
    );
    if total == 0 {
        if let Some(refused) = search_forgotten(&sb) {
            return refused;
        }
    }
    let has_more = offset + data.len() < total;
    shown_json(
        &sb,
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

/// `GET /v1/payment_intents`: newest first, paged by `starting_after` / `ending_before`
/// ids, within a `created` window (`listing`), read-after-write: an intent is listed the
/// moment it is made, unlike search.
async fn list_intents(sb: web::Data<Sandbox>, req: HttpRequest) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    let query = match ListQuery::parse(req.query_string(), &["customer"]) {
        Ok(query) => query,
        Err(e) => return invalid_request(e),
    };
    // The sandbox's intents have no customer: a list of a customer's intents is empty.
    let customer = query.filters.contains_key("customer");
    let keep = |intent: &KeptIntent| !customer && query.created.holds(intent.created());
    let (data, has_more) = match sb.store.list(&query.cursor, query.limit, keep) {
        Lookup::Found(page) => page,
        Lookup::Forgotten => return forgotten(&sb, query.cursor.param(), query.cursor.id()),
        Lookup::Missing => {
            return invalid_request(ParamError::new(
                "resource_missing",
                query.cursor.param(),
                format!("No such payment_intent: '{}'", query.cursor.id()),
            ))
        }
    };
    // Ran to the oldest intent kept: the forgotten ones could have been next.
    if !has_more && !matches!(query.cursor, Cursor::Before(_)) {
        if let Some(refused) = list_forgotten(&sb, &query.created) {
            return refused;
        }
    }
    shown_json(
        &sb,
        StatusCode::OK,
        &ListResult {
            object: "list".into(),
            data,
            has_more,
            url: "/v1/payment_intents".into(),
        },
    )
}

/// `POST /v1/payment_intents/{id}/confirm`: an intent made without `confirm=true` is charged
/// now, by the same behaviour table as a confirmed create (its faults included), under the
/// request's own key.
async fn confirm_intent(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    id: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    // Edge failure before the API saw the request, as for a create.
    if roll(sb.config.error_rate) {
        return api_error_500();
    }
    let intent = match sb.store.get(&id) {
        Lookup::Found(intent) => intent,
        Lookup::Forgotten => return forgotten(&sb, "intent", &id),
        Lookup::Missing => return no_such_intent(&id),
    };
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let value = |param: &str| {
        form.iter()
            .find(|(name, _)| name == param)
            .map(|(_, value)| value.clone())
    };
    let payment_method = value("payment_method").or_else(|| intent.payment_method.clone());
    let Some(payment_method) = payment_method else {
        return invalid_request(ParamError::new(
            "parameter_missing",
            "payment_method",
            "You must provide a payment_method to confirm this PaymentIntent.".into(),
        ));
    };
    let return_url = match value("return_url").map(|url| parse_return_url("return_url", &url)) {
        Some(Ok(url)) => Some(url),
        Some(Err(e)) => return invalid_request(e),
        None => None,
    };
    // Asked on the confirm itself: the sandbox does not keep a create's payment method
    // options on the intent (payorch confirms on the create).
    let three_d_secure = match value(REQUEST_THREE_D_SECURE).map(|v| requests_three_d_secure(&v)) {
        Some(Ok(asked)) => asked,
        Some(Err(e)) => return invalid_request(e),
        None => false,
    };
    let behaviour = Behaviour::for_payment_method(&payment_method)
        .map(|b| three_d_secure::met(sb.mixed(Face::Stripe, &req, b), three_d_secure));
    let dropped = behaviour == Some(Behaviour::DroppedResponse);
    if behaviour == Some(Behaviour::ThreeDSecure) && return_url.is_none() {
        return invalid_request(missing_return_url());
    }
    let params = CreateParams {
        amount: intent.amount,
        currency: intent.currency.clone(),
        payment_method: Some(payment_method.clone()),
        confirm: true,
        description: intent.description.clone(),
        metadata: intent.metadata.clone(),
        capture_method: intent.capture_method.clone(),
        fingerprint: format!(
            "confirm {} payment_method={payment_method} return_url={} three_d_secure={three_d_secure}",
            intent.id,
            return_url.as_deref().unwrap_or_default()
        ),
        return_url,
        three_d_secure,
        site: site(&req),
    };
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
        return unexpected_state(&sb, &intent, "confirm");
    }
    if behaviour == Some(Behaviour::Refused) {
        return refused_keyed(&sb, key.as_deref(), refused_stripe);
    }
    if behaviour == Some(Behaviour::ErrorBefore) {
        return fail_keyed(&sb, key.as_deref());
    }
    match charge(&sb, params, behaviour, key.clone(), Some(intent)).await {
        Some(_) if dropped => dropped_answer(),
        Some(stored) => respond(&stored, key.as_deref(), false),
        None => api_error_500(),
    }
}

/// Whether an intent created at a Unix time (whole seconds) has existed for `lag` by now:
/// searchable from `lag` to a second more after it was made, never sooner. No lag: at once.
fn searchable_since(lag: std::time::Duration) -> impl Fn(i64) -> bool {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let lag_ms = i64::try_from(lag.as_millis()).unwrap_or(i64::MAX);
    move |created| {
        // `created` is the second the intent was made in: it may be up to a second old.
        lag_ms == 0 || now_ms >= created.saturating_add(1).saturating_mul(1000) + lag_ms
    }
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
    /// Every hold placed (an authorisation for a later capture): `held`, `captured` or
    /// `voided`.
    holds: Vec<super::HoldEntry>,
    /// Every capture, with its key and amount: at most one `succeeded` per hold.
    captures: Vec<super::CaptureEntry>,
    /// Every hold a cancel released.
    voids: Vec<super::VoidEntry>,
    /// Every dispute kept, with its moves and the money it withdrew or reinstated: with
    /// `refunds`, all the money each payment gave back.
    disputes: Vec<super::DisputeEntry>,
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
            holds: sb.store.holds(),
            captures: sb.store.captures(),
            voids: sb.store.voids(),
            disputes: sb.disputes.all(),
            window: sb.store.window(),
            forgotten: sb.store.forgotten(),
        },
    )
}

/// A route neither face has: in the words of the face the path belongs to. Adyen's API key
/// is checked first, as a gateway checks it before it routes.
async fn unknown_route(sb: web::Data<Sandbox>, req: HttpRequest) -> HttpResponse {
    if super::adyen::is_adyen_path(req.path()) {
        if let Some(refused) = super::adyen::refuse_unauthorized(&sb, &req) {
            return refused;
        }
        return super::adyen::unknown_endpoint(&req);
    }
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
