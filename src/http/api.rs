//! The API's routes, listed once: the list makes both what is served ([`configure_api`]) and
//! what is documented ([`ApiDoc`], served completed at `/openapi.json`), so a route cannot be
//! one without the other. A new route is one line here and its handler's `utoipa::path`; the
//! tests below hold the annotations' paths to this list and the keyed operations' registry
//! (`idempotency::operation`) to its POSTs (docs/DESIGN.md, "Adding a keyed operation").

use std::sync::OnceLock;

use actix_web::http::Method;
use actix_web::{web, HttpResponse};
use serde_json::Value;
use utoipa::OpenApi;

use super::openapi::{self, BearerAuth};
use super::{
    disputes, errors, events, health, holds, merchants, metrics, orders, payer_return, payments,
    refunds, resource, routing, support, webhook_endpoints, webhooks,
};

/// Declares [`ApiDoc`] and [`configure_api`] from one line per path:
/// `"path" => [METHOD handler, …]`, methods as `http::Method` names them. Each path is one
/// resource whose other methods answer `405` with `Allow` listing these, in this order.
macro_rules! api {
    ( $( $path:literal => [
        $method:ident $($handler:ident)::+ $(, $methods:ident $($handlers:ident)::+ )* $(,)?
    ] ),+ $(,)? ) => {
        /// What the handlers' annotations say, for the paths of the list.
        #[derive(OpenApi)]
        #[openapi(
            info(title = "payorch", description = "Payment orchestration: one intent of the payer, at most one charge."),
            paths( $( $($handler)::+ $(, $($handlers)::+ )* ),+ ),
            components(schemas(errors::Problem, errors::FieldError)),
            modifiers(&BearerAuth),
        )]
        pub struct ApiDoc;

        /// Serves every path of the list, in its order.
        pub fn configure_api(cfg: &mut web::ServiceConfig) {
            $(
                cfg.service(
                    resource($path, concat!(stringify!($method) $(, ", ", stringify!($methods))*))
                        .route(web::method(Method::$method).to($($handler)::+))
                        $( .route(web::method(Method::$methods).to($($handlers)::+)) )*
                );
            )+
        }

        /// The list as data, for the tests: each path with its methods.
        #[cfg(test)]
        const ROUTES: &[(&str, &[&str])] = &[
            $( ($path, &[stringify!($method) $(, stringify!($methods))*]) ),+
        ];
    };
}

// In routing order: actix tries routes in order (for routing, the root span's route and the
// metrics' label), and each pattern with a `{…}` costs a regex match, so the hot path first.
api! {
    "/v1/checkout" => [POST payments::checkout],
    "/v1/orders" => [POST orders::create_order],
    "/v1/webhooks/{provider}" => [POST webhooks::receive],
    "/health/live" => [GET health::live],
    "/health/ready" => [GET health::ready],
    "/metrics" => [GET metrics::metrics],
    "/openapi.json" => [GET openapi_json],
    "/v1/merchants/{id}" => [GET merchants::get_merchant],
    "/v1/merchants/{id}/routing" => [GET routing::get_routing, PUT routing::put_routing],
    "/v1/orders/{id}" => [GET orders::get_order, POST orders::update_order],
    "/v1/orders/{id}/cancel" => [POST orders::cancel_order],
    "/v1/orders/{id}/payments" => [POST payments::create_payment],
    "/v1/payments/{id}" => [GET payments::get_payment],
    // No API key: the payer's browser comes here from the provider (docs/guides/three-d-secure.md, "3-D Secure").
    "/v1/payments/{id}/return" => [GET payer_return::payer_returned],
    "/v1/payments/{id}/refunds" => [POST refunds::create_refund],
    "/v1/payments/{id}/capture" => [POST holds::capture],
    "/v1/payments/{id}/cancel" => [POST holds::cancel],
    "/v1/refunds/{id}" => [GET refunds::get_refund],
    "/v1/disputes" => [GET disputes::list],
    "/v1/disputes/{id}" => [GET disputes::get],
    "/v1/disputes/{id}/evidence" => [POST disputes::submit_evidence],
    "/v1/disputes/{id}/accept" => [POST disputes::accept],
    "/v1/webhook_endpoints" => [
        GET webhook_endpoints::list_endpoints,
        POST webhook_endpoints::create_endpoint,
    ],
    "/v1/webhook_endpoints/{id}" => [
        GET webhook_endpoints::get_endpoint,
        DELETE webhook_endpoints::delete_endpoint,
    ],
    "/v1/webhook_endpoints/{id}/rotate_secret" => [POST webhook_endpoints::rotate_secret],
    "/v1/events" => [GET events::list],
    "/v1/events/{id}" => [GET events::get],
    "/v1/support/merchants" => [GET merchants::list_merchants],
    "/v1/support/payments" => [GET support::search_payments],
    // Before `{id}`, which would take `stats` for a payment id.
    "/v1/support/payments/stats" => [GET support::stats::payment_stats],
    "/v1/support/payments/{id}" => [GET support::payment_story],
    "/v1/support/payments/{id}/reconcile" => [POST support::reconcile_now],
    "/v1/support/payments/{id}/void" => [POST holds::support_void],
    "/v1/support/refunds/{id}/reconcile" => [POST refunds::reconcile_refund],
    "/v1/support/events/{id}/redeliver" => [POST support::events::redeliver_event],
    "/v1/support/needs-a-human" => [GET support::needs_a_human],
    "/v1/support/routing/scores" => [GET support::scores::success_scores],
}

// The document, completed once (`openapi::document`) and served as it is from then on. The doc
// comment below is the operation's summary and description in the document.
/// This document: the API's OpenAPI 3.1 description
///
/// Generated from the code that serves the routes, so it lists exactly what is served. Feed it to a
/// client generator, or browse it as the API reference.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, body = Object, description = "this document", example = json!(crate::views::examples::openapi_document()))))]
pub async fn openapi_json() -> HttpResponse {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    HttpResponse::Ok().json(DOCUMENT.get_or_init(|| openapi::document(ApiDoc::openapi())))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use actix_web::dev::ResourceDef;

    use super::{ApiDoc, ROUTES};
    use crate::idempotency::Operation;
    use utoipa::OpenApi;

    /// Every (method, path) the list serves, methods lowercase as the document writes them.
    fn served() -> BTreeSet<(String, String)> {
        ROUTES
            .iter()
            .flat_map(|(path, methods)| {
                methods.iter().map(|m| (m.to_lowercase(), path.to_string()))
            })
            .collect()
    }

    /// A handler annotated with another path or method than its line in the list would be
    /// served at one and documented at the other.
    #[test]
    fn the_document_has_exactly_the_routes_served() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let documented: BTreeSet<(String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .keys()
                    .map(move |method| (method.clone(), path.clone()))
            })
            .collect();
        let served = served();
        let unserved: Vec<_> = documented.difference(&served).collect();
        let undocumented: Vec<_> = served.difference(&documented).collect();
        assert!(unserved.is_empty(), "documented, not in api!: {unserved:?}");
        assert!(
            undocumented.is_empty(),
            "in api!, not documented: {undocumented:?}"
        );
        let handlers: usize = ROUTES.iter().map(|(_, methods)| methods.len()).sum();
        assert_eq!(handlers, documented.len(), "one handler per (method, path)");
    }

    /// The keyed operations' registry names each operation's route (its metrics' label): each
    /// is a documented POST of the list.
    #[test]
    fn every_keyed_operation_is_a_post_of_the_list() {
        let served = served();
        for op in Operation::ALL {
            assert!(
                served.contains(&("post".to_string(), op.route().to_string())),
                "{op:?}: POST {} is not in api!",
                op.route()
            );
        }
    }

    /// actix takes the first route that matches: a pattern listed before another that it
    /// also matches (`/v1/support/payments/{id}` before `…/stats`) would take its requests.
    #[test]
    fn no_route_is_hidden_by_one_before_it() {
        for (i, (later, _)) in ROUTES.iter().enumerate() {
            for (earlier, _) in &ROUTES[..i] {
                assert!(
                    !ResourceDef::new(*earlier).is_match(later),
                    "{earlier} is listed before {later} and takes its requests"
                );
            }
            let paths = ROUTES.iter().filter(|(path, _)| path == later).count();
            assert_eq!(paths, 1, "{later} is listed once");
        }
    }
}
