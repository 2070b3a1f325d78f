//! The HTTP surface: routes, extractors and the problem+json rendering of every error.

pub mod admission;
pub mod api;
pub mod api_reference;
pub mod assets;
pub mod auth;
pub mod card_data;
pub mod checkout_page;
pub mod client_address;
pub mod connections;
pub mod console;
pub mod disputes;
pub mod errors;
pub mod events;
pub mod health;
pub mod holds;
pub mod keyed;
pub mod limits;
pub mod merchants;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod orders;
pub mod payer_return;
pub mod payments;
pub mod refunds;
pub mod routing;
pub mod strict_json;
pub mod support;
pub mod webhook_endpoints;
pub mod webhooks;

use std::sync::Arc;

use actix_web::{error::JsonPayloadError, web, HttpRequest};

use crate::accounts::CallerCache;
use crate::db::DbPool;
use crate::idempotency::{KeyedRequest, Keys};
use crate::payments::service::Context;
use crate::payments::Payments;
use errors::ApiError;

/// The largest request body payorch reads.
pub const BODY_LIMIT: usize = 64 * 1024;

/// What every handler may use; built once per application.
pub struct AppState {
    pub pool: DbPool,
    pub metrics: Arc<crate::telemetry::metrics::Metrics>,
    pub idempotency: Keys,
    pub payments: Arc<Payments>,
    /// Who a presented secret belongs to, remembered for a short while.
    pub callers: CallerCache,
    /// How much one client may ask, and whose forwarding headers are believed.
    pub limits: limits::Limits,
    /// Longest a request body may take to arrive once its headers have.
    pub body_timeout: std::time::Duration,
    /// The demo merchant's API key, once `serve` has its demo merchant: the checkout demo
    /// acts with it ([`checkout_page`]). Unset, the demo routes answer `demo_checkout_off`.
    pub demo_checkout: std::sync::OnceLock<crate::secret::Secret>,
    /// Which URLs a webhook endpoint may have: the delivery worker's own policy
    /// (`--allow-http-webhooks`, `--allow-private-webhook-addresses`), so that payorch
    /// registers only what it will send to.
    pub webhook_urls: crate::events::safe_url::UrlPolicy,
    /// What seals webhook-endpoint secrets at rest (docs/PRODUCTION.md, section 5).
    pub master_keys: crate::sealing::MasterKeys,
    /// Who may read `/metrics` on this port.
    pub metrics_access: metrics::MetricsAccess,
}

impl AppState {
    /// What a keyed use case (an order's command, a payment, a refund) enters the domain with:
    /// this request's key and what the client asked for, read but not validated.
    pub fn context<'a, I>(&'a self, keyed: &'a KeyedRequest, input: I) -> Context<'a, I> {
        Context {
            pool: &self.pool,
            keys: &self.idempotency,
            payments: &self.payments,
            keyed,
            input,
        }
    }
}

/// Every route payorch serves: the API's, listed once in [`api`] (served as documented),
/// then the pages the document leaves out. Each path is one resource: a method it does not
/// have answers `405` with `Allow`, and only unknown paths answer `404`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.app_data(json_config())
        .app_data(web::PayloadConfig::new(BODY_LIMIT))
        .app_data(query_config())
        .configure(api::configure_api);
    // Undocumented pages, for a person's browser rather than a client of the API: the
    // console, the API reference, the checkout page and its assets, and the checkout demo's
    // routes, which act with the demo merchant's key. No API path matches theirs, so their
    // place after the API's changes nothing but the order in which they are tried.
    cfg.service(resource("/console", "GET").route(web::get().to(console::page)))
        .service(resource("/console/console.js", "GET").route(web::get().to(console::script)))
        .service(resource("/console/console.css", "GET").route(web::get().to(console::style)))
        .service(resource("/docs", "GET").route(web::get().to(api_reference::page)))
        .service(resource("/docs/docs.js", "GET").route(web::get().to(api_reference::script)))
        // The viewer's script is 1.7 MB; gzipped, a third of that.
        .service(
            resource("/docs/assets/{path:.+}", "GET")
                .wrap(actix_web::middleware::Compress::default())
                .route(web::get().to(api_reference::file)),
        )
        .service(resource("/checkout", "GET").route(web::get().to(checkout_page::page)))
        .service(
            resource("/checkout/checkout.js", "GET").route(web::get().to(checkout_page::script)),
        )
        .service(
            resource("/checkout/checkout.css", "GET").route(web::get().to(checkout_page::style)),
        )
        .service(
            resource("/checkout/demo/orders", "POST")
                .route(web::post().to(checkout_page::create_order)),
        )
        .service(
            resource("/checkout/demo/orders/{id}", "GET")
                .route(web::get().to(checkout_page::show_order)),
        )
        .service(
            resource("/checkout/demo/orders/{id}/payments", "POST")
                .route(web::post().to(checkout_page::pay)),
        )
        .service(
            resource("/checkout/demo/payments/{id}", "GET")
                .route(web::get().to(checkout_page::show_payment)),
        );
}

/// A list's `limit`: 1–100, 20 when not given.
pub(crate) fn page_limit(raw: Option<i64>) -> Result<i64, errors::FieldError> {
    let limit = raw.unwrap_or(20);
    if (1..=100).contains(&limit) {
        Ok(limit)
    } else {
        Err(errors::FieldError::new(
            "limit",
            "must be between 1 and 100",
        ))
    }
}

/// A path whose other methods answer `405 method_not_allowed` with `Allow: allow`.
fn resource(path: &str, allow: &'static str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(move || async move {
        Err::<actix_web::HttpResponse, _>(ApiError::MethodNotAllowed { allow })
    }))
}

/// Unknown routes answer problem+json too.
pub async fn not_found() -> Result<actix_web::HttpResponse, ApiError> {
    Err(ApiError::NotFound("route"))
}

fn json_config() -> web::JsonConfig {
    web::JsonConfig::default()
        .limit(BODY_LIMIT)
        .error_handler(|err, _req: &HttpRequest| {
            match err {
                JsonPayloadError::OverflowKnownLength { .. }
                | JsonPayloadError::Overflow { .. } => {
                    ApiError::PayloadTooLarge { limit: BODY_LIMIT }
                }
                JsonPayloadError::ContentType => ApiError::InvalidRequest(
                    "send the body as JSON with `Content-Type: application/json`".into(),
                ),
                JsonPayloadError::Deserialize(err) => {
                    ApiError::InvalidRequest(format!("the JSON body does not fit: {err}"))
                }
                other => ApiError::InvalidRequest(format!("the body could not be read: {other}")),
            }
            .into()
        })
}

fn query_config() -> web::QueryConfig {
    web::QueryConfig::default().error_handler(|err, _req| {
        ApiError::InvalidRequest(format!("the query string does not fit: {err}")).into()
    })
}
