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
