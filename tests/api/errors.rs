use crate::helpers::{assert_problem, TestApp};

#[tokio::test]
async fn unknown_route_is_problem_404_with_request_id() {
    let app = TestApp::spawn().await;
    let response = app.get("/v1/nothing-here").await;
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(request_id.len(), 36, "a UUID: {request_id}");
    assert_problem(response, 404, "not_found").await;
}

#[tokio::test]
async fn malformed_id_is_404() {
    let app = TestApp::spawn().await;
    let response = app.get_as(&app.merchant_key, "/v1/merchants/ord_123").await;
    assert_problem(response, 404, "not_found").await;
}

#[tokio::test]
async fn body_over_64_kib_is_413() {
    let app = TestApp::spawn().await;
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(70 * 1024));
    let response = app
        .client
        .post(app.url("/v1/support/merchants"))
        .bearer_auth(&app.support_key)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_problem(response, 413, "payload_too_large").await;
}

#[tokio::test]
async fn out_of_range_parameter_is_422_with_field_errors() {
    let app = TestApp::spawn().await;
    let response = app
        .get_as(
            &app.support_key,
            "/v1/support/merchants?limit=1000&starting_after=nope",
        )
        .await;
    let body = assert_problem(response, 422, "validation_failed").await;
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["limit", "starting_after"]);
}

#[tokio::test]
async fn unknown_query_parameter_is_400_invalid_request() {
    let app = TestApp::spawn().await;
    let response = app
        .get_as(&app.support_key, "/v1/support/merchants?limt=5")
        .await;
    assert_problem(response, 400, "invalid_request").await;
}

/// What the database holds is read strictly: a stored value the code cannot read is an error
/// someone must look at, never a resource shown without the part that did not fit.
#[tokio::test]
async fn stored_metadata_or_routing_that_does_not_fit_is_an_error_not_a_silent_default() {
    use diesel_async::RunQueryDsl;
    let app = TestApp::spawn().await;
    let created: serde_json::Value = app
        .post_keyed(
            &app.merchant_key,
            "/v1/orders",
            Some("strict-metadata"),
            Some(r#"{"amount": 1500, "currency": "eur", "metadata": {"size": "L"}}"#.into()),
        )
        .await
        .json()
        .await
        .unwrap();
    let order = created["id"].as_str().unwrap().to_string();
    let path = format!("/v1/orders/{order}");
    let shown: serde_json::Value = app
        .get_as(&app.merchant_key, &path)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["metadata"]["size"], "L");

    // The database admits any JSON object; the API only ever writes strings.
    let mut conn = app.db.connect().await;
    diesel::sql_query("UPDATE orders SET metadata = '{\"size\": 42}'")
        .execute(&mut conn)
        .await
        .unwrap();
    let response = app.get_as(&app.merchant_key, &path).await;
    assert_problem(response, 500, "internal_error").await;

    diesel::sql_query(format!(
        "INSERT INTO merchant_routing (merchant_id, providers, currencies, updated_by) \
         VALUES ('{}', ARRAY['stripe'], '{{\"EUR\": \"stripe\"}}', 'test')",
        app.merchant_id.0
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    let routing = format!("/v1/merchants/{}/routing", app.merchant_id);
    let response = app.get_as(&app.merchant_key, &routing).await;
    assert_problem(response, 500, "internal_error").await;
}
