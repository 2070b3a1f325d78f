//! `POST /v1/webhook_endpoints`, `GET /v1/webhook_endpoints`, `GET …/{id}`, `DELETE …/{id}`
//! and `POST …/{id}/rotate_secret` (docs/guides/events.md, "Webhook endpoints"). The two POSTs are keyed
//! like every state-changing POST; what their replays show is said in
//! [`crate::events::endpoints::command`].

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::accounts::Caller;
use crate::events::endpoints::command::{
    self, EndpointAnswer, EndpointCommand, EndpointContext, EndpointError,
};
use crate::events::endpoints::fields::EndpointFields;
use crate::events::endpoints::store::{self, StoreError};
use crate::events::endpoints::{self as endpoints, MAX_ENDPOINTS};
use crate::http::errors::{ApiError, FieldError};
use crate::http::keyed::{respond, Keyed, KeyedBody, PathId};
use crate::http::AppState;
use crate::idempotency::Operation;
use crate::ids::{EndpointId, MerchantId};

/// A new endpoint.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEndpointBody {
    /// Where the events are sent: `https://`, a public host.
    url: Option<String>,
    /// Event types to send, or `["*"]` for every type.
    enabled_events: Option<Vec<String>>,
    /// Your own note, up to 1000 characters.
    description: Option<String>,
}

/// A webhook endpoint as shown to merchants and support. Its `secret` is shown only in the
/// answer to the request that made it (creation, rotation) and that request's replays.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookEndpoint {
    id: EndpointId,
    /// Always `webhook_endpoint`.
    object: &'static str,
    merchant_id: MerchantId,
    url: String,
    description: Option<String>,
    /// Event types, or `["*"]`.
    enabled_events: Vec<String>,
    /// `enabled`, or `disabled`: payorch sends it nothing (`disabled_reason` says why).
    status: &'static str,
    disabled_reason: Option<String>,
    /// After a rotation: until when the secret it replaced still signs beside the new one.
    previous_secret_expires_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    /// `true` only in the answer to `DELETE` (and a replay of a deleted endpoint's creation).
    deleted: bool,
    /// `whsec_…`: only on creation and rotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

impl WebhookEndpoint {
    fn new(e: endpoints::WebhookEndpoint, secret: Option<String>) -> Self {
        WebhookEndpoint {
            id: e.id,
            object: "webhook_endpoint",
            merchant_id: e.merchant_id,
            url: e.url,
            description: e.description,
            enabled_events: e.enabled_events.to_strings(),
            status: e.status.as_str(),
            disabled_reason: e.disabled_reason,
            previous_secret_expires_at: e.previous_secret_until,
            created_at: e.created_at,
            updated_at: e.updated_at,
            deleted: e.deleted_at.is_some(),
            secret,
        }
    }
}

impl From<endpoints::WebhookEndpoint> for WebhookEndpoint {
    fn from(e: endpoints::WebhookEndpoint) -> Self {
        WebhookEndpoint::new(e, None)
    }
}

/// A merchant's endpoints, newest first: all of them, so one page.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookEndpointList {
    data: Vec<WebhookEndpoint>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Whose endpoints (`mer_…`): required of a support key; a merchant key's own if given.
    merchant_id: Option<String>,
}

fn parse_endpoint_id(raw: &str) -> Result<EndpointId, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::NotFound("webhook endpoint"))
}

impl PathId for EndpointId {
    fn from_path(raw: &str) -> Result<Self, ApiError> {
        parse_endpoint_id(raw)
    }
}

impl KeyedBody for CreateEndpointBody {
    const OPERATION: Operation = Operation::CreateWebhookEndpoint;
    type Id = ();
}

/// `POST /v1/webhook_endpoints/{id}/rotate_secret` takes no body.
#[derive(Debug, Deserialize)]
pub struct RotateSecretRequest;

impl KeyedBody for RotateSecretRequest {
    const OPERATION: Operation = Operation::RotateWebhookSecret;
    type Id = EndpointId;
    const HAS_BODY: bool = false;
}

fn problem(err: EndpointError) -> ApiError {
    match err {
        EndpointError::Invalid(problems) => ApiError::validation_failed(problems),
        EndpointError::NotFound => ApiError::NotFound("webhook endpoint"),
        EndpointError::LimitReached => ApiError::WebhookEndpointLimit {
            limit: MAX_ENDPOINTS,
        },
        EndpointError::Idempotency(err) => err.into(),
        EndpointError::Unavailable(err) => err.into(),
        EndpointError::Database(err) => err.into(),
        EndpointError::Inconsistent(what) => ApiError::Internal(what),
    }
}

fn store_problem(err: StoreError) -> ApiError {
    problem(err.into())
}

/// The endpoint with the secret that signs for it, as made or, replayed, as it is now.
fn answer(done: EndpointAnswer) -> HttpResponse {
    let secret = done.secret.map(|s| s.expose().to_owned());
    let view = WebhookEndpoint::new(done.endpoint, secret);
    respond(done.status, &view, done.replayed)
}

/// Register a webhook endpoint
///
/// payorch will POST each event of the `enabled_events` types (or `["*"]`: every type) to `url`,
/// signed with the endpoint's `secret`, which this answer shows once: keep it to verify deliveries
/// (docs/guides/events.md, "Events and webhook endpoints", "Verifying a delivery"). At most 16 endpoints per
/// merchant. Send an `Idempotency-Key`: the same key and body again answers with the first status,
/// `Idempotent-Replayed: true` and the resource as it is now; the same key with another request
/// (another body or path) is `422 idempotency_key_reused` (docs/guides/idempotency.md, "Idempotency").
#[utoipa::path(post, path = "/v1/webhook_endpoints", tag = "webhook endpoints",
    request_body(content = CreateEndpointBody, example = json!(crate::views::examples::create_endpoint_request())),
    params(("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters")),
    security(("bearer" = [])),
    responses(
        (status = 201, body = WebhookEndpoint, description = "created, with its `secret`; or replayed with `Idempotent-Replayed: true`: the endpoint as it is now, with the secret that signs now", example = json!(crate::views::examples::endpoint(true))),
        (status = 409, body = crate::http::errors::Problem, description = "webhook_endpoint_limit: the merchant has 16 endpoints; delete one"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed: the URL (https, a public host), the event types"),
    ))]
pub async fn create_endpoint(
    state: web::Data<AppState>,
    Keyed { request, body, .. }: Keyed<CreateEndpointBody>,
) -> Result<HttpResponse, ApiError> {
    let fields = EndpointFields {
        url: body.url,
        enabled_events: body.enabled_events,
        description: body.description,
    };
    let command = EndpointCommand::Create {
        fields,
        policy: state.webhook_urls,
    };
    run(&state, &request, command).await
}

/// Rotate a webhook endpoint's secret
///
/// Makes a new signing `secret`, shown in this answer; for 24 hours deliveries carry two
/// signatures, one under each secret, so your receiver can switch without missing one (docs/guides/events.md,
/// "Webhook endpoints"). Send an `Idempotency-Key`: the same key and body again answers with the
/// first status, `Idempotent-Replayed: true` and the resource as it is now; the same key with
/// another request (another body or path) is `422 idempotency_key_reused` (docs/guides/idempotency.md, "Idempotency").
#[utoipa::path(post, path = "/v1/webhook_endpoints/{id}/rotate_secret", tag = "webhook endpoints",
    params(
        ("id" = String, Path, description = "webhook endpoint id, `we_…`", example = json!(crate::views::examples::ENDPOINT)),
        ("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, body = WebhookEndpoint, description = "rotated, with the new `secret` (the one it replaced signs beside it for 24 h); or replayed with `Idempotent-Replayed: true`: the endpoint as it is now, with the secret that signs now", example = json!(crate::views::examples::endpoint(true))),
        (status = 404, body = crate::http::errors::Problem, description = "unknown, deleted, or another merchant's"),
    ))]
pub async fn rotate_secret(
    state: web::Data<AppState>,
    Keyed { request, id, .. }: Keyed<RotateSecretRequest>,
) -> Result<HttpResponse, ApiError> {
    run(&state, &request, EndpointCommand::RotateSecret(id)).await
}

async fn run(
    state: &AppState,
    keyed: &crate::idempotency::KeyedRequest,
    command: EndpointCommand,
) -> Result<HttpResponse, ApiError> {
    let ctx = EndpointContext {
        pool: &state.pool,
        keys: &state.idempotency,
        master_keys: &state.master_keys,
        keyed,
        command,
    };
    Ok(answer(command::run(&ctx).await.map_err(problem)?))
}

/// List webhook endpoints
///
/// The merchant's endpoints that are not deleted, newest first, without their secrets. A support
/// key names the merchant with `merchant_id`.
#[utoipa::path(get, path = "/v1/webhook_endpoints", tag = "webhook endpoints",
    params(ListParams),
    security(("bearer" = [])),
    responses(
        (status = 200, body = WebhookEndpointList, description = "the merchant's endpoints that are not deleted, newest first; never their secrets", example = json!(crate::views::examples::endpoint_list())),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed: `merchant_id` missing (a support key) or not a merchant id"),
    ))]
pub async fn list_endpoints(
    caller: Caller,
    state: web::Data<AppState>,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let asked = match params.merchant_id.as_deref().map(str::parse::<MerchantId>) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(err)) => {
            return Err(ApiError::ValidationFailed(vec![FieldError::new(
                "merchant_id",
                err.to_string(),
            )]))
        }
    };
    let merchant = match (caller.scope(), asked) {
        (Some(own), None) => own,
        // Another merchant's endpoints look like none at all.
        (Some(own), Some(asked)) if asked != own => {
            return Ok(HttpResponse::Ok().json(WebhookEndpointList { data: Vec::new() }))
        }
        (_, Some(asked)) => asked,
        (None, None) => {
            return Err(ApiError::ValidationFailed(vec![FieldError::new(
                "merchant_id",
                "a support key lists one merchant's endpoints: give merchant_id=mer_…",
            )]))
        }
    };
    let mut conn = state.pool.get().await?;
    let found = store::list_endpoints(&mut conn, merchant)
        .await
        .map_err(store_problem)?;
    let data = found.into_iter().map(WebhookEndpoint::from).collect();
    Ok(HttpResponse::Ok().json(WebhookEndpointList { data }))
}

/// Retrieve a webhook endpoint
///
/// The endpoint's URL, event types and `status` (`disabled`, with `disabled_reason`, once its
/// deliveries failed for days or it answered `410`), never its secret.
#[utoipa::path(get, path = "/v1/webhook_endpoints/{id}", tag = "webhook endpoints",
    params(("id" = String, Path, description = "webhook endpoint id, `we_…`", example = json!(crate::views::examples::ENDPOINT))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = WebhookEndpoint, description = "the endpoint, never its secret", example = json!(crate::views::examples::endpoint(false))),
        (status = 404, body = crate::http::errors::Problem, description = "unknown, deleted, or another merchant's"),
    ))]
pub async fn get_endpoint(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_endpoint_id(&path)?;
    let mut conn = state.pool.get().await?;
    let endpoint = store::find_endpoint(&mut conn, caller.scope(), id)
        .await
        .map_err(store_problem)?
        .ok_or(ApiError::NotFound("webhook endpoint"))?;
    Ok(HttpResponse::Ok().json(WebhookEndpoint::from(endpoint)))
}

/// Delete a webhook endpoint
///
/// Stops deliveries to the endpoint: its pending deliveries are canceled and it is answered with
/// `deleted: true`. Deleting it again is `404`.
#[utoipa::path(delete, path = "/v1/webhook_endpoints/{id}", tag = "webhook endpoints",
    params(("id" = String, Path, description = "webhook endpoint id, `we_…`", example = json!(crate::views::examples::ENDPOINT))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = WebhookEndpoint, description = "deleted (`deleted: true`); its pending deliveries are canceled", example = json!(crate::views::examples::deleted_endpoint())),
        (status = 403, body = crate::http::errors::Problem, description = "forbidden: a support key; only the merchant's own key may do this"),
        (status = 404, body = crate::http::errors::Problem, description = "unknown, deleted already, or another merchant's"),
    ))]
pub async fn delete_endpoint(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let merchant_id = caller.merchant_for_write()?;
    let id = parse_endpoint_id(&path)?;
    let mut conn = state.pool.get().await?;
    let deleted = store::delete_endpoint(&mut conn, merchant_id, id)
        .await
        .map_err(store_problem)?
        .ok_or(ApiError::NotFound("webhook endpoint"))?;
    Ok(HttpResponse::Ok().json(WebhookEndpoint::from(deleted)))
}
