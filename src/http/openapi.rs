//! The OpenAPI 3.1 document, generated from the handlers' annotations.

use actix_web::HttpResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::http::{errors, health, merchants, metrics, orders, payments, webhooks};

#[derive(OpenApi)]
#[openapi(
    info(title = "payorch", description = "Payment orchestration: one intent of the payer, at most one charge."),
    paths(
        health::live,
        health::ready,
        metrics::metrics,
        openapi_json,
        merchants::get_merchant,
        merchants::list_merchants,
        orders::create_order,
        orders::get_order,
        orders::cancel_order,
        payments::create_payment,
        payments::checkout,
        payments::get_payment,
        webhooks::receive,
    ),
    components(schemas(errors::Problem, errors::FieldError)),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "a merchant (`sk_mer_…`) or support (`sk_sup_…`) secret",
                    ))
                    .build(),
            ),
        );
    }
}

#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "this document")))]
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().json(ApiDoc::openapi())
}
