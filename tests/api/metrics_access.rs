//! Who reads `/metrics` (docs/PRODUCTION.md, "Metrics and provider URLs"): on the API's port
//! only with the metrics token, or on a listener of their own; never the internet at large.

use payorch::app::MetricsSettings;
use payorch::http::metrics::MetricsAccess;

use crate::helpers::{assert_problem, TestApp};

#[tokio::test]
async fn behind_a_token_the_api_port_serves_metrics_only_to_its_holder() {
    let app = TestApp::spawn_with(|settings| {
        settings.metrics = MetricsSettings {
            on_api_port: MetricsAccess::Token("metrics-token-1".into()),
            bind: None,
        };
    })
    .await;
    assert_problem(app.get("/metrics").await, 401, "unauthenticated").await;
    assert_problem(
        app.get_as("metrics-token-2", "/metrics").await,
        401,
        "unauthenticated",
    )
    .await;
    // A merchant's key is no metrics token.
    assert_problem(
        app.get_as(&app.merchant_key, "/metrics").await,
        401,
        "unauthenticated",
    )
    .await;
    let scraped = app.get_as("metrics-token-1", "/metrics").await;
    assert_eq!(scraped.status(), 200);
    assert!(scraped
        .text()
        .await
        .unwrap()
        .contains("payorch_http_requests_total"));
}

#[tokio::test]
async fn on_a_listener_of_their_own_the_api_port_does_not_serve_them() {
    // A free port, found by binding and letting go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let app = TestApp::spawn_with(|settings| {
        settings.metrics = MetricsSettings {
            on_api_port: MetricsAccess::Off,
            bind: Some(format!("127.0.0.1:{port}")),
        };
    })
    .await;
    assert_problem(app.get("/metrics").await, 404, "not_found").await;
    let own = format!("http://127.0.0.1:{port}");
    let scraped = app
        .client
        .get(format!("{own}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(scraped.status(), 200);
    assert!(scraped
        .text()
        .await
        .unwrap()
        .contains("payorch_http_requests_total"));
    // That listener serves the metrics and nothing else.
    for path in ["/v1/orders", "/health/live", "/openapi.json"] {
        let other = app.client.get(format!("{own}{path}")).send().await.unwrap();
        assert_eq!(other.status(), 404, "{path}");
    }
}
