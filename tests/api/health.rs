use crate::helpers::TestApp;

#[tokio::test]
async fn live_and_ready_answer_200_on_a_migrated_database() {
    let app = TestApp::spawn().await;
    let live = app.get("/health/live").await;
    assert_eq!(live.status(), 200);
    let ready = app.get("/health/ready").await;
    assert_eq!(ready.status(), 200);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["status"], "ready");
}

#[tokio::test]
async fn ready_is_503_on_a_database_without_migrations() {
    let db = crate::helpers::TestDatabase::empty().await;
    // The app does not migrate by itself (serve does, before building it).
    // No payment is made here; the provider is never called.
    let provider = payorch::providers::stripe::StripeProvider::new(
        payorch::providers::stripe::StripeConfig::new(
            "http://127.0.0.1:9",
            "sk_test_unused",
            vec!["whsec_unused".into()],
        ),
    )
    .unwrap();
    let app = payorch::app::Application::build(
        &crate::helpers::test_settings(),
        &db.url,
        payorch::providers::registry::Providers::single(std::sync::Arc::new(provider)),
    )
    .await
    .unwrap();
    let base = app.base_url();
    let handle = app.handle();
    tokio::spawn(app.run_until_stopped());
    let ready = reqwest::get(format!("{base}/health/ready")).await.unwrap();
    crate::helpers::assert_problem(ready, 503, "unavailable").await;
    handle.stop(false).await;
}

#[tokio::test]
async fn metrics_count_requests_by_route_pattern_and_status() {
    let app = TestApp::spawn().await;
    let path = format!("/v1/merchants/{}", app.merchant_id);
    assert_eq!(app.get_as(&app.merchant_key, &path).await.status(), 200);
    assert_eq!(app.get_as("sk_mer_nope", &path).await.status(), 401);
    let text = app.get("/metrics").await.text().await.unwrap();
    assert!(
        text.contains(
            r#"payorch_http_requests_total{method="GET",route="/v1/merchants/{id}",status="200"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(
            r#"payorch_http_requests_total{method="GET",route="/v1/merchants/{id}",status="401"} 1"#
        ),
        "{text}"
    );
    assert!(text.contains("payorch_http_request_duration_seconds_bucket"));
    assert!(text.contains("payorch_db_pool_max 8"), "{text}");
}

#[tokio::test]
async fn openapi_documents_every_route() {
    let app = TestApp::spawn().await;
    let doc: serde_json::Value = app.get("/openapi.json").await.json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let paths = doc["paths"].as_object().unwrap();
    for route in [
        "/health/live",
        "/health/ready",
        "/metrics",
        "/openapi.json",
        "/v1/merchants/{id}",
        "/v1/support/merchants",
    ] {
        assert!(
            paths.contains_key(route),
            "{route} missing from {:?}",
            paths.keys()
        );
    }
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
}
