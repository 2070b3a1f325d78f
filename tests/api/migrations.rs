use std::process::Stdio;

use diesel_async::RunQueryDsl;
use payorch::db::migrations::run_migrations;

use crate::helpers::{payorch_bin, TestDatabase};

fn migrate_command(url: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(payorch_bin());
    command
        .arg("migrate")
        .env("DATABASE_URL", url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

#[tokio::test]
async fn two_migrate_processes_at_once_both_succeed() {
    let db = TestDatabase::empty().await;
    let (a, b) = tokio::join!(
        migrate_command(&db.url).output(),
        migrate_command(&db.url).output()
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let outputs = [
        String::from_utf8_lossy(&a.stdout).to_string(),
        String::from_utf8_lossy(&b.stdout).to_string(),
    ];
    // The advisory lock makes them take turns: one applies, the other finds nothing to do.
    assert_eq!(
        outputs.iter().filter(|o| o.starts_with("applied")).count(),
        1,
        "{outputs:?}"
    );
    assert_eq!(
        outputs.iter().filter(|o| o.contains("up to date")).count(),
        1,
        "{outputs:?}"
    );

    let mut conn = db.connect().await;
    let tables = diesel::sql_query(
        "SELECT 1 FROM information_schema.tables WHERE table_name IN ('merchants', 'api_keys')",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    assert_eq!(tables, 2);
}

#[tokio::test]
async fn migrations_are_idempotent() {
    let db = TestDatabase::empty().await;
    let first = run_migrations(&db.url).await.unwrap();
    assert!(!first.is_empty());
    let second = run_migrations(&db.url).await.unwrap();
    assert!(second.is_empty());
}

#[tokio::test]
async fn concurrent_migrations_in_process_apply_once() {
    let db = TestDatabase::empty().await;
    let runs = futures_util::future::join_all((0..4).map(|_| run_migrations(&db.url))).await;
    let applied: Vec<usize> = runs.into_iter().map(|r| r.unwrap().len()).collect();
    assert_eq!(applied.iter().filter(|n| **n > 0).count(), 1, "{applied:?}");
}

/// An upgrade of a deployment whose owner may not create roles (managed PostgreSQL) stops at
/// the runtime-role migration until an administrator creates the group, and says the SQL.
#[tokio::test]
async fn an_owner_that_cannot_create_roles_is_told_the_sql_that_creates_the_runtime_group() {
    use diesel_async::{AsyncConnection, SimpleAsyncConnection};
    use payorch::db::cluster::CLUSTER_USER;
    use payorch::db::{ClusterOptions, PrivateCluster};

    let data_dir = crate::helpers::temp_dir("no-createrole");
    let options = ClusterOptions {
        data_dir: data_dir.clone(),
        ephemeral: true,
    };
    // A server of its own: payorch_runtime is server-wide, and the shared one has it.
    let cluster = tokio::task::spawn_blocking(move || PrivateCluster::start(&options))
        .await
        .unwrap()
        .expect("start a private cluster");
    let mut admin = payorch::db::PgConn::establish(&cluster.database_url("postgres"))
        .await
        .unwrap();
    for statement in [
        "CREATE ROLE managed_owner LOGIN NOCREATEROLE",
        "CREATE DATABASE payorch_managed OWNER managed_owner",
    ] {
        admin.batch_execute(statement).await.unwrap();
    }
    let owner_url = cluster
        .database_url("payorch_managed")
        .replace(&format!("user={CLUSTER_USER} "), "user=managed_owner ");
    assert!(owner_url.contains("user=managed_owner"), "{owner_url}");

    let refused = run_migrations(&owner_url)
        .await
        .expect_err("stops at the runtime role")
        .to_string();
    assert!(
        refused
            .contains("CREATE ROLE payorch_runtime NOLOGIN; GRANT payorch_runtime TO payorch_app;"),
        "{refused}"
    );
    // Once an administrator ran it, the upgrade goes on.
    admin
        .batch_execute("CREATE ROLE payorch_runtime NOLOGIN")
        .await
        .unwrap();
    run_migrations(&owner_url).await.expect("migrates");
    drop(admin);
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .unwrap()
        .expect("stop the private cluster");
    let _ = std::fs::remove_dir_all(data_dir);
}

/// The webhook indexes built CONCURRENTLY, outside a transaction, are there and valid.
#[tokio::test]
async fn the_webhook_indexes_built_concurrently_are_valid() {
    #[derive(diesel::QueryableByName)]
    struct Index {
        #[diesel(sql_type = diesel::sql_types::Text)]
        name: String,
        #[diesel(sql_type = diesel::sql_types::Bool)]
        valid: bool,
    }
    let db = TestDatabase::empty().await;
    run_migrations(&db.url).await.unwrap();
    let mut conn = db.connect().await;
    let mut indexes: Vec<Index> = diesel::sql_query(
        "SELECT indexrelid::regclass::text AS name, indisvalid AS valid FROM pg_index \
         WHERE indrelid = 'provider_webhooks'::regclass \
           AND indexrelid::regclass::text IN ('provider_webhooks_age', 'provider_webhooks_unkept')",
    )
    .load(&mut conn)
    .await
    .unwrap();
    indexes.sort_by(|a, b| a.name.cmp(&b.name));
    let found: Vec<(&str, bool)> = indexes.iter().map(|i| (i.name.as_str(), i.valid)).collect();
    assert_eq!(
        found,
        [
            ("provider_webhooks_age", true),
            ("provider_webhooks_unkept", true)
        ]
    );
}

/// Migration 2026-11-27-000022 renamed the four "…events" tables; the previous release's
/// replicas, still serving during a rolling deploy, name the old tables. Each old name is a
/// view of its new table, and the statements that release runs through it still work: an
/// insert with `ON CONFLICT` and `RETURNING` lands in the new table with its defaults, an
/// update and a `FOR UPDATE SKIP LOCKED` claim go through, and an insert is held to the new
/// table's constraints.
#[tokio::test]
async fn the_renamed_tables_still_answer_to_their_old_names_during_a_rolling_deploy() {
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let db = TestDatabase::empty().await;
    run_migrations(&db.url).await.unwrap();
    let mut conn = db.connect().await;
    // Since the webhooks are partitioned by the provider's time of the event, their unique key
    // holds that time (migration 2026-11-28-000032; docs/DESIGN.md, "History partitioned by
    // time"): a statement's ON CONFLICT names it, through the old name as through the new.
    let insert = "INSERT INTO webhook_events (id, provider, provider_event_id, event_type, outcome, payload, \
                      provider_created_at) \
                  VALUES (gen_random_uuid(), 'stripe', 'evt_old_release', 'charge.succeeded', 'ignored', '{}', \
                      '2026-11-27T00:00:00Z') \
                  ON CONFLICT (provider, provider_event_id, provider_created_at) DO NOTHING RETURNING id";
    diesel::sql_query(insert).execute(&mut conn).await.unwrap();
    assert_eq!(
        diesel::sql_query(insert).execute(&mut conn).await.unwrap(),
        0,
        "the second copy is a conflict, as on the table"
    );
    diesel::sql_query(
        "UPDATE webhook_events SET deliveries = deliveries + 1 WHERE provider_event_id = 'evt_old_release'",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let kept: Vec<Count> = diesel::sql_query(
        "SELECT deliveries::int8 AS n FROM provider_webhooks WHERE provider_event_id = 'evt_old_release'",
    )
    .load(&mut conn)
    .await
    .unwrap();
    assert_eq!(kept.iter().map(|c| c.n).collect::<Vec<_>>(), [2]);
    for claim in [
        "SELECT id FROM events ORDER BY created_at LIMIT 10 FOR UPDATE SKIP LOCKED",
        "SELECT id FROM attempt_events ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED",
        "SELECT id FROM refund_events ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED",
    ] {
        diesel::sql_query(claim).execute(&mut conn).await.unwrap();
    }
    let refused = diesel::sql_query(
        "INSERT INTO attempt_events (merchant_id, attempt_id, from_status, to_status, source) \
         VALUES (gen_random_uuid(), gen_random_uuid(), NULL, 'created', 'api')",
    )
    .execute(&mut conn)
    .await
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains("attempt_transitions_attempt_fkey"),
        "an insert through the old name reaches the table and its constraints: {refused}"
    );
}
