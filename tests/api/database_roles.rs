//! The service's database role owns nothing (docs/PRODUCTION.md, section 2): the app of every
//! API test runs as it (tests/api/helpers.rs), which proves its rights suffice; these tests
//! prove they stop there. As the runtime role, nothing gets around the triggers that hold
//! the invariants: they cannot be disabled or dropped, the tables cannot be altered, and
//! replication mode (which skips ordinary triggers) cannot be entered.

use serde_json::json;
use tokio_postgres::error::SqlState;

use payorch::db::roles::{role_reach, RUNTIME_GROUP};
use payorch::db::DatabaseUrl;
use payorch::db::PgConn;

use crate::helpers::{assert_refused_by, TestApp, TestDatabase};
use crate::payments::Route;

/// A session as the role the app runs as.
async fn runtime_session(app: &TestApp) -> tokio_postgres::Client {
    let url = DatabaseUrl::parse(&app.db.runtime_url).expect("the runtime URL");
    let (client, connection) = url
        .connect_client(url.config())
        .await
        .expect("connect as the runtime role");
    tokio::spawn(connection);
    client
}

/// Asserts PostgreSQL refused `sql` for want of privilege (not for some other reason, such
/// as a typo in a name, which would prove nothing).
async fn assert_not_permitted(client: &tokio_postgres::Client, sql: &str) {
    match client.batch_execute(sql).await {
        Err(err) => assert_eq!(
            err.code(),
            Some(&SqlState::INSUFFICIENT_PRIVILEGE),
            "{sql}: {err:?}"
        ),
        Ok(()) => panic!("the runtime role was let do {sql}"),
    }
}

/// A checkout paid with the sandbox's test card: a succeeded attempt, made by the app as the
/// runtime role. Its id without the prefix.
async fn succeeded_attempt(app: &TestApp) -> String {
    let key = uuid::Uuid::now_v7().to_string();
    let (status, attempt) = app.pay(Route::Checkout, &key, "pm_card_visa").await;
    assert_eq!(
        (status, &attempt["status"]),
        (201, &json!("succeeded")),
        "{attempt}"
    );
    attempt["id"].as_str().expect("an attempt id")[4..].to_string()
}

#[tokio::test]
async fn the_app_runs_as_a_role_that_is_no_superuser_and_owns_no_table() {
    let app = TestApp::spawn().await;
    let mut conn = payorch::db::connect(&app.db.runtime_url)
        .await
        .expect("connect as the runtime role");
    let reach = role_reach(&mut conn).await.expect("the role's reach");
    assert!(!reach.can_bypass_invariants(), "{reach:?}");
    let mut owner = app.db.connect().await;
    let owner_reach = role_reach(&mut owner).await.expect("the owner's reach");
    assert!(
        owner_reach.superuser && owner_reach.can_bypass_invariants(),
        "the tests' own connections are the owner's, which serve would warn about: {owner_reach:?}"
    );
    let client = runtime_session(&app).await;
    let member = client
        .query_one(
            "SELECT pg_has_role(current_user, $1, 'USAGE')",
            &[&RUNTIME_GROUP],
        )
        .await
        .expect("membership");
    assert!(member.get::<_, bool>(0), "a member of {RUNTIME_GROUP}");
}

#[tokio::test]
async fn the_runtime_role_cannot_disable_drop_or_skip_a_trigger_nor_alter_a_table() {
    let app = TestApp::spawn().await;
    let client = runtime_session(&app).await;
    for sql in [
        "ALTER TABLE payment_attempts DISABLE TRIGGER payment_attempts_guard_transition",
        "ALTER TABLE payment_attempts DISABLE TRIGGER ALL",
        "DROP TRIGGER payment_attempts_guard_transition ON payment_attempts",
        "ALTER TABLE payment_attempts DROP CONSTRAINT payment_attempts_pkey",
        "ALTER TABLE payment_attempts ADD COLUMN note text",
        "CREATE OR REPLACE FUNCTION payment_attempts_guard_transition() RETURNS trigger \
         LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
        "TRUNCATE payment_attempts CASCADE",
        "SET session_replication_role = replica",
        "CREATE TABLE shadow_attempts (id uuid)",
        "INSERT INTO __diesel_schema_migrations (version) VALUES ('99999999999999')",
        // The partition keeper's owner functions trust this table (docs/DESIGN.md, "History
        // partitioned by time"): which tables, where their legacy partitions end.
        "INSERT INTO history_tables (name, key_kind, legacy_until) \
         VALUES ('payment_attempts', 'time', now())",
        "UPDATE history_tables SET legacy_until = now() + interval '10 years'",
        "DELETE FROM history_tables",
        "TRUNCATE history_tables",
    ] {
        assert_not_permitted(&client, sql).await;
    }
}

#[tokio::test]
async fn the_runtime_role_cannot_rewrite_a_final_status() {
    let app = TestApp::spawn().await;
    let id = succeeded_attempt(&app).await;
    let mut conn = payorch::db::connect(&app.db.runtime_url)
        .await
        .expect("connect as the runtime role");
    assert_refused_by(
        &mut conn,
        &format!("UPDATE payment_attempts SET status = 'failed' WHERE id = '{id}'"),
        "payment_attempts_final",
    )
    .await;
    // Nor inside a transaction that first tries to step around the trigger: the attempt to
    // switch it off is refused, and the update after it meets the trigger all the same.
    let client = runtime_session(&app).await;
    assert_not_permitted(
        &client,
        &format!(
            "BEGIN; SET LOCAL session_replication_role = replica; \
             UPDATE payment_attempts SET status = 'failed' WHERE id = '{id}'; COMMIT"
        ),
    )
    .await;
    client.batch_execute("ROLLBACK").await.expect("rollback");
    let status: String = client
        .query_one(
            &format!("SELECT status FROM payment_attempts WHERE id = '{id}'"),
            &[],
        )
        .await
        .expect("the attempt")
        .get(0);
    assert_eq!(status, "succeeded");
}

#[tokio::test]
async fn readiness_says_whether_the_role_could_bypass_the_invariants() {
    let app = TestApp::spawn().await;
    let ready: serde_json::Value = app.get("/health/ready").await.json().await.unwrap();
    assert_eq!(ready["database_role"], "owns_nothing", "{ready}");

    // The same app run as the tables' owner, as an older deployment would be.
    let mut as_owner = TestDatabase::migrated().await;
    as_owner.runtime_url = as_owner.url.clone();
    let app = TestApp::spawn_on(as_owner).await;
    let response = app.get("/health/ready").await;
    assert_eq!(response.status(), 200, "still ready: it only says so");
    let ready: serde_json::Value = response.json().await.unwrap();
    assert_eq!(ready["database_role"], "can_bypass_invariants", "{ready}");
}

/// `payorch_runtime` is the server's, not the database's: another environment's runtime login
/// on the same server reaches this database's tables until CONNECT is taken from PUBLIC and
/// given to this environment's roles (docs/PRODUCTION.md, section 2).
#[tokio::test]
async fn another_environments_runtime_login_gets_in_until_connect_is_revoked_from_public() {
    use diesel_async::{AsyncConnection, SimpleAsyncConnection};

    let db = TestDatabase::migrated().await;
    let mut admin = db.connect().await;
    let other = format!("staging_app_{}", uuid::Uuid::now_v7().simple());
    admin
        .batch_execute(&format!(
            "CREATE ROLE {other} LOGIN IN ROLE {RUNTIME_GROUP}"
        ))
        .await
        .unwrap();
    let this_env = DatabaseUrl::parse(&db.runtime_url).unwrap();
    let this_login = this_env.config().get_user().unwrap().to_owned();
    let other_url = db
        .runtime_url
        .replace(&format!("user={this_login}"), &format!("user={other}"));
    assert_ne!(other_url, db.runtime_url);

    let mut intruder = PgConn::establish(&other_url)
        .await
        .expect("CONNECT is PUBLIC's by default");
    intruder
        .batch_execute("SELECT count(*) FROM merchants")
        .await
        .expect("and the group's rights reach the tables");
    drop(intruder);

    for statement in [
        format!("REVOKE CONNECT ON DATABASE {} FROM PUBLIC", db.name),
        format!("GRANT CONNECT ON DATABASE {} TO {this_login}", db.name),
    ] {
        admin.batch_execute(&statement).await.unwrap();
    }
    let refused = PgConn::establish(&other_url).await;
    assert!(refused.is_err(), "another environment's login is refused");
    PgConn::establish(&db.runtime_url)
        .await
        .expect("this environment's runtime login still connects");
    admin
        .batch_execute(&format!("DROP ROLE {other}"))
        .await
        .unwrap();
}
