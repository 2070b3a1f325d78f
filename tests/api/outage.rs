//! The database stops under a running server and comes back: 503 meanwhile, recovery after.

use std::time::Duration;

use payorch::db::{create_database_if_missing, ClusterOptions, PrivateCluster};

use crate::helpers::{assert_problem, eventually, temp_dir, TestApp, TestDatabase};

#[tokio::test]
async fn database_outage_is_503_with_retry_after_and_recovers() {
    // A cluster of its own: stopping the shared one would break the other tests.
    let data_dir = temp_dir("outage");
    let options = ClusterOptions {
        data_dir: data_dir.clone(),
        ephemeral: true,
    };
    let cluster = tokio::task::spawn_blocking(move || PrivateCluster::start(&options))
        .await
        .unwrap()
        .unwrap();
    create_database_if_missing(&cluster.database_url("postgres"), "payorch")
        .await
        .unwrap();
    let url = cluster.database_url("payorch");
    payorch::db::migrations::run_migrations(&url).await.unwrap();
    let app = TestApp::spawn_on(TestDatabase::external(&url)).await;
    let path = format!("/v1/merchants/{}", app.merchant_id);
    assert_eq!(app.get_as(&app.merchant_key, &path).await.status(), 200);

    let (cluster, stopped) = tokio::task::spawn_blocking(move || {
        let stopped = cluster.stop();
        (cluster, stopped)
    })
    .await
    .unwrap();
    stopped.unwrap();

    let response = app.get_as(&app.merchant_key, &path).await;
    let retry_after = response.headers().get("retry-after").cloned();
    assert_problem(response, 503, "unavailable").await;
    assert_eq!(retry_after.unwrap(), "2");
    let ready = app.get("/health/ready").await;
    assert_problem(ready, 503, "unavailable").await;

    let mut cluster = cluster;
    let cluster = tokio::task::spawn_blocking(move || cluster.restart().map(|_| cluster))
        .await
        .unwrap()
        .unwrap();

    let recovered = eventually(Duration::from_secs(15), || async {
        app.get_as(&app.merchant_key, &path).await.status() == 200
    })
    .await;
    assert!(
        recovered,
        "requests succeed again once the database is back"
    );
    let ready = app.get("/health/ready").await;
    assert_eq!(ready.status(), 200);

    drop(app);
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .unwrap()
        .unwrap();
    let _ = std::fs::remove_dir_all(data_dir);
}
