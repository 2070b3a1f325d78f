use std::time::Duration;

use diesel_async::RunQueryDsl;

use crate::helpers::{assert_problem, TestApp};

#[tokio::test]
async fn a_revoked_key_stops_working_once_the_cache_time_has_passed() {
    // The test settings remember a live key for 200 ms.
    let app = TestApp::spawn().await;
    let path = format!("/v1/merchants/{}", app.merchant_id);
    assert_eq!(app.get_as(&app.merchant_key, &path).await.status(), 200);
    diesel::sql_query("UPDATE api_keys SET revoked_at = now() WHERE role = 'merchant'")
        .execute(&mut app.db.connect().await)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_problem(
        app.get_as(&app.merchant_key, &path).await,
        401,
        "unauthenticated",
    )
    .await;
    // The support key, not revoked, works on.
    let merchants = app.get_as(&app.support_key, "/v1/support/merchants").await;
    assert_eq!(merchants.status(), 200);
}

#[tokio::test]
async fn missing_key_is_401_problem() {
    let app = TestApp::spawn().await;
    let response = app.get(&format!("/v1/merchants/{}", app.merchant_id)).await;
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    assert_problem(response, 401, "unauthenticated").await;
}

#[tokio::test]
async fn unknown_key_and_wrong_scheme_are_401() {
    let app = TestApp::spawn().await;
    let path = format!("/v1/merchants/{}", app.merchant_id);
    assert_problem(
        app.get_as("sk_mer_0000", &path).await,
        401,
        "unauthenticated",
    )
    .await;
    // The right secret under another scheme is not a bearer token.
    let basic = app
        .client
        .get(app.url(&path))
        .header("Authorization", format!("Basic {}", app.merchant_key))
        .send()
        .await
        .unwrap();
    assert_problem(basic, 401, "unauthenticated").await;
}

#[tokio::test]
async fn merchant_reads_itself() {
    let app = TestApp::spawn().await;
    let response = app
        .get_as(
            &app.merchant_key,
            &format!("/v1/merchants/{}", app.merchant_id),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["id"], app.merchant_id.to_string());
    assert_eq!(body["name"], "Test merchant");
}

#[tokio::test]
async fn another_merchant_is_404_never_403() {
    let app = TestApp::spawn().await;
    let (other_id, _) = app.other_merchant().await;
    let response = app
        .get_as(&app.merchant_key, &format!("/v1/merchants/{other_id}"))
        .await;
    assert_problem(response, 404, "not_found").await;
}

#[tokio::test]
async fn support_reads_any_merchant() {
    let app = TestApp::spawn().await;
    let (other_id, _) = app.other_merchant().await;
    let response = app
        .get_as(&app.support_key, &format!("/v1/merchants/{other_id}"))
        .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn merchant_key_on_support_route_is_403() {
    let app = TestApp::spawn().await;
    let response = app.get_as(&app.merchant_key, "/v1/support/merchants").await;
    assert_problem(response, 403, "forbidden").await;
}

#[tokio::test]
async fn support_lists_merchants_with_keyset_pagination() {
    let app = TestApp::spawn().await;
    let (other_id, _) = app.other_merchant().await;
    let first: serde_json::Value = app
        .get_as(&app.support_key, "/v1/support/merchants?limit=1")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["data"][0]["id"], app.merchant_id.to_string());
    assert_eq!(first["has_more"], true);
    let second: serde_json::Value = app
        .get_as(
            &app.support_key,
            &format!(
                "/v1/support/merchants?limit=1&starting_after={}",
                app.merchant_id
            ),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(second["data"][0]["id"], other_id.to_string());
    assert_eq!(second["has_more"], false);
}

#[tokio::test]
async fn secrets_are_stored_only_as_sha256() {
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;
    use payorch::db::schema::api_keys;
    use sha2::{Digest, Sha256};

    let app = TestApp::spawn().await;
    let mut conn = app.db.connect().await;
    let stored: Vec<Vec<u8>> = api_keys::table
        .select(api_keys::secret_sha256)
        .load(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored.len(), 2);
    let merchant_hash = Sha256::digest(app.merchant_key.as_bytes()).to_vec();
    assert!(stored.contains(&merchant_hash));
    assert!(!stored.iter().any(|s| s == app.merchant_key.as_bytes()));
}
