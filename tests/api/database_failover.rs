//! The database's primary fails over under a running server (docs/operations/running.md, "Several database hosts:
//! failover"; docs/DESIGN.md, "Database failover"): a private cluster and its synchronous streaming standby, both
//! named in one multi-host URL, the old primary listed first. No HA manager here: the test
//! plays it, killing the primary and promoting the standby by hand. The formation with
//! pg_auto_failover is the chaos driver's `failover` scenario (docs/RELIABILITY.md).

use std::time::{Duration, Instant};

use diesel::sql_types::{BigInt, Text};
use diesel::QueryableByName;
use diesel_async::{AsyncConnection, RunQueryDsl, SimpleAsyncConnection};
use serde_json::Value;

use payorch::db::cluster::CLUSTER_RUNTIME_USER;
use payorch::db::PgConn;
use payorch::db::{create_database_if_missing, ClusterOptions, PrivateCluster};

use crate::helpers::{assert_problem, eventually, temp_dir, TestApp, TestConfig, TestDatabase};
use crate::payments::checkout_body;
use crate::pooler::Bouncer;

/// What the standby calls itself to the primary, and the primary waits for on every commit.
const STANDBY: &str = "standby_b";

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work)
        .await
        .expect("cluster thread")
}

/// A primary (fsync on: `ephemeral` would turn synchronous commit off) whose every commit
/// waits for `STANDBY`, and that standby, streaming.
async fn formation() -> (PrivateCluster, PrivateCluster) {
    let a = blocking(|| {
        PrivateCluster::start(&ClusterOptions {
            data_dir: temp_dir("primary-a"),
            ephemeral: false,
        })
    })
    .await
    .expect("start the primary");
    create_database_if_missing(&a.database_url("postgres"), "payorch")
        .await
        .unwrap();
    payorch::db::migrations::run_migrations(&a.database_url("payorch"))
        .await
        .unwrap();
    let mut conn = PgConn::establish(&a.database_url("payorch")).await.unwrap();
    // The app runs as the role that owns nothing, as in production: fencing an old primary
    // and ending stalled commits must work with that role's rights alone.
    payorch::db::roles::create_runtime_login(&mut conn, CLUSTER_RUNTIME_USER)
        .await
        .unwrap();
    for statement in [
        format!("ALTER SYSTEM SET synchronous_standby_names = '{STANDBY}'"),
        "SELECT pg_reload_conf()".into(),
    ] {
        conn.batch_execute(&statement).await.unwrap();
    }
    let a_socket = a.socket_dir();
    let (a, b) = blocking(move || {
        let b = PrivateCluster::start_standby(
            &ClusterOptions {
                data_dir: temp_dir("standby-b"),
                ephemeral: false,
            },
            &a,
            STANDBY,
        );
        (a, b)
    })
    .await;
    let b = b.expect("start the standby");
    let primary_url = a_url_of(&a_socket);
    let streaming = eventually(Duration::from_secs(30), || async {
        sync_standbys(&primary_url).await == 1
    })
    .await;
    assert!(
        streaming,
        "the standby streams synchronously from {a_socket:?}"
    );
    (a, b)
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

fn a_url_of(socket: &std::path::Path) -> String {
    format!("host='{}' user=payorch dbname=payorch", socket.display())
}

async fn sync_standbys(url: &str) -> i64 {
    let Ok(mut conn) = PgConn::establish(url).await else {
        return -1;
    };
    diesel::sql_query(
        "SELECT count(*) AS n FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'",
    )
    .get_result::<Count>(&mut conn)
    .await
    .map(|c| c.n)
    .unwrap_or(-1)
}

async fn attempts_with_id(url: &str, id: &str) -> i64 {
    let mut conn = PgConn::establish(url).await.unwrap();
    // `pay_` and the uuid's 32 hex digits.
    let hex = id.trim_start_matches("pay_");
    diesel::sql_query(
        "SELECT count(*) AS n FROM payment_attempts WHERE replace(id::text, '-', '') = $1",
    )
    .bind::<Text, _>(hex)
    .get_result::<Count>(&mut conn)
    .await
    .unwrap()
    .n
}

async fn checkout(app: &TestApp, key: &str) -> reqwest::Response {
    let body = checkout_body("pm_card_visa").to_string();
    app.post_keyed(&app.merchant_key, "/v1/checkout", Some(key), Some(body))
        .await
}

/// A checkout that must succeed: its payment's id.
async fn paid(app: &TestApp, key: &str) -> String {
    let response = checkout(app, key).await;
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["payment"]["status"], "succeeded", "{body}");
    body["payment"]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_pool_follows_the_primary_through_a_failover_and_fences_the_old_one() {
    let (a, b) = formation().await;
    let url = format!(
        "host={},{} user={CLUSTER_RUNTIME_USER} dbname=payorch target_session_attrs=read-write",
        a.socket_dir().display(),
        b.socket_dir().display()
    );
    let (a_url, b_url) = (a.database_url("payorch"), b.database_url("payorch"));
    let app = TestApp::spawn_on(TestDatabase::external(&url)).await;
    let first = paid(&app, "before-anything").await;

    // The standby stops: every commit on the primary now waits for it. The wait is ended
    // after a few seconds, well before the statement timeout would cancel it (which
    // PostgreSQL would report as a success), so the client hears 503 and retries.
    let b = blocking(move || b.stop().map(|_| b)).await.unwrap();
    let asked = Instant::now();
    let stalled = checkout(&app, "while-alone").await;
    let waited = asked.elapsed();
    assert_problem(stalled, 503, "unavailable").await;
    assert!(
        waited < Duration::from_secs(8),
        "ended before the 10 s statement timeout: {waited:?}"
    );
    let mut b = b;
    let b = blocking(move || b.restart().map(|_| b)).await.unwrap();
    let again = eventually(Duration::from_secs(30), || async {
        checkout(&app, "while-alone").await.status() == 201
    })
    .await;
    assert!(again, "the same key succeeds once the standby is back");

    // The primary's machine is lost. Until the standby is promoted there is no primary:
    // 503 at once, not a wait on a dead address.
    let a = blocking(move || a.kill().map(|_| a)).await.unwrap();
    let asked = Instant::now();
    let response = app
        .get_as(&app.merchant_key, &format!("/v1/payments/{first}"))
        .await;
    assert_eq!(response.status(), 503);
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );

    // Promoted, it is alone: like an HA manager's "wait_primary", it stops waiting for a
    // standby until the old primary rejoins as one.
    let b = blocking(move || b.promote().map(|_| b)).await.unwrap();
    let promoted = Instant::now();
    let mut conn = PgConn::establish(&b_url).await.unwrap();
    for statement in [
        "ALTER SYSTEM SET synchronous_standby_names = ''",
        "SELECT pg_reload_conf()",
    ] {
        conn.batch_execute(statement).await.unwrap();
    }
    let moved = eventually(Duration::from_secs(10), || async {
        app.get_as(&app.merchant_key, &format!("/v1/payments/{first}"))
            .await
            .status()
            == 200
    })
    .await;
    let reached = promoted.elapsed();
    assert!(
        moved,
        "payorch reaches the promoted standby without a restart"
    );
    assert!(
        reached < Duration::from_secs(3),
        "within a few probe rounds: {reached:?}"
    );
    let after_failover = paid(&app, "after-failover").await;

    // The old primary comes back writable, on its old socket, first in the URL, without
    // anything to demote it: a fenced old primary on the older timeline. payorch keeps
    // writing to the promoted one.
    let mut a = a;
    let a = blocking(move || a.restart().map(|_| a)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut ids = vec![first.clone(), after_failover];
    for i in 0..5 {
        let asked = Instant::now();
        ids.push(paid(&app, &format!("with-the-old-primary-back-{i}")).await);
        assert!(
            asked.elapsed() < Duration::from_secs(3),
            "{:?}",
            asked.elapsed()
        );
    }
    for id in &ids {
        assert_eq!(
            attempts_with_id(&b_url, id).await,
            1,
            "{id} on the new primary"
        );
    }
    for id in &ids[1..] {
        assert_eq!(
            attempts_with_id(&a_url, id).await,
            0,
            "{id} not on the old one"
        );
    }

    drop(app);
    blocking(move || {
        let _ = a.stop();
        let _ = b.stop();
    })
    .await;
}

/// With a pooler in transaction mode, the recommended formation (docs/operations/pooler.md,
/// "Failover: a pooler beside each database host"): a PgBouncer in front of each host, and
/// payorch's multi-host URL naming the poolers. The primary watch asks through each pooler
/// which database is the primary, as it asks the databases directly without one, and the pool
/// follows a promotion without a restart, writing only to the promoted host.
#[tokio::test]
async fn through_a_pooler_beside_each_host_the_pool_follows_a_promotion() {
    let (a, b) = formation().await;
    let runtime = |socket: &std::path::Path| {
        format!(
            "host='{}' user={CLUSTER_RUNTIME_USER} dbname=payorch",
            socket.display()
        )
    };
    let Some(before_a) = Bouncer::before(&runtime(&a.socket_dir())) else {
        return;
    };
    let Some(before_b) = Bouncer::before(&runtime(&b.socket_dir())) else {
        return;
    };
    let url = format!(
        "host=127.0.0.1,127.0.0.1 port={},{} user={CLUSTER_RUNTIME_USER} dbname=payorch \
         sslmode=disable target_session_attrs=read-write",
        before_a.port, before_b.port
    );
    let b_url = b.database_url("payorch");
    let mut config = TestConfig::default();
    config.settings.pool.pooler = payorch::db::Pooler::Transaction;
    let app = TestApp::spawn_configured(TestDatabase::external(&url), config).await;
    let first = paid(&app, "through-the-poolers").await;

    // The primary's machine is lost, its pooler left running. Until the standby is promoted
    // there is no primary: 503, at once or after PgBouncer's `query_wait_timeout` (3 s here)
    // for a request that took a connection before the watch saw the loss, never a hang.
    let a = blocking(move || a.kill().map(|_| a)).await.unwrap();
    let asked = Instant::now();
    let response = app
        .get_as(&app.merchant_key, &format!("/v1/payments/{first}"))
        .await;
    assert_eq!(response.status(), 503);
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    // Promoted, it stops waiting for a standby of its own.
    let b = blocking(move || b.promote().map(|_| b)).await.unwrap();
    let mut conn = PgConn::establish(&b_url).await.unwrap();
    for statement in [
        "ALTER SYSTEM SET synchronous_standby_names = ''",
        "SELECT pg_reload_conf()",
    ] {
        conn.batch_execute(statement).await.unwrap();
    }
    let moved = eventually(Duration::from_secs(10), || async {
        checkout(&app, "after-the-promotion").await.status() == 201
    })
    .await;
    assert!(
        moved,
        "payorch reaches the promoted host through its pooler"
    );
    let mut ids = vec![first];
    for i in 0..5 {
        ids.push(paid(&app, &format!("through-b-{i}")).await);
    }

    // The old primary comes back writable behind its pooler, first in the URL, on the older
    // timeline: payorch keeps writing to the promoted one.
    let a_url = a.database_url("payorch");
    let mut a = a;
    let a = blocking(move || a.restart().map(|_| a)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..3 {
        ids.push(paid(&app, &format!("with-the-old-primary-back-{i}")).await);
    }
    for id in &ids {
        assert_eq!(
            attempts_with_id(&b_url, id).await,
            1,
            "{id} on the new primary"
        );
    }
    for id in &ids[1..] {
        assert_eq!(
            attempts_with_id(&a_url, id).await,
            0,
            "{id} not on the old one"
        );
    }

    drop(app);
    drop((before_a, before_b));
    blocking(move || {
        let _ = a.stop();
        let _ = b.stop();
    })
    .await;
}
