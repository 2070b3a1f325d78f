//! Webhook-endpoint secrets sealed at rest under the master key (docs/PRODUCTION.md, section
//! 5): the database never holds one in clear, deliveries still verify with the secret the
//! merchant was shown, a sealed secret moved to another endpoint does not open, and the
//! master key rotates with `payorch secrets reencrypt`.

use std::time::Duration;

use diesel::sql_types::{Nullable, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use serde_json::{json, Value};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use payorch::db::PgConn;
use payorch::events::signing::{verify, Secret};
use payorch::ids::EndpointId;
use payorch::sealing::{MasterKeys, OpenError};

use crate::helpers::{assert_refused_by, payorch_bin, TestApp, TEST_MASTER_KEY};
use crate::payments::checkout_body;

const PATIENCE: Duration = Duration::from_secs(30);

/// An endpoint made through the API, receiving `order.paid` at `receiver`: its id and the
/// secret its answer showed.
async fn endpoint(app: &TestApp, receiver: &MockServer, key: &str) -> (EndpointId, Secret) {
    let body = json!({"url": format!("{}/hook", receiver.uri()), "enabled_events": ["order.paid"]});
    let response = app
        .post_keyed(
            &app.merchant_key,
            "/v1/webhook_endpoints",
            Some(key),
            Some(body.to_string()),
        )
        .await;
    assert_eq!(response.status(), 201);
    let made: Value = response.json().await.unwrap();
    endpoint_and_secret(&made)
}

fn endpoint_and_secret(answer: &Value) -> (EndpointId, Secret) {
    let id = answer["id"].as_str().unwrap().strip_prefix("we_").unwrap();
    let secret = Secret::parse(answer["secret"].as_str().unwrap()).expect("a secret");
    (EndpointId(id.parse().unwrap()), secret)
}

async fn receiver() -> MockServer {
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&receiver)
        .await;
    receiver
}

#[derive(diesel::QueryableByName)]
struct Stored {
    #[diesel(sql_type = Text)]
    secret: String,
    #[diesel(sql_type = Nullable<Text>)]
    previous_secret: Option<String>,
}

async fn stored(conn: &mut PgConn, endpoint: EndpointId) -> Stored {
    diesel::sql_query("SELECT secret, previous_secret FROM webhook_endpoints WHERE id = $1")
        .bind::<SqlUuid, _>(endpoint.0)
        .get_result(conn)
        .await
        .expect("the endpoint's row")
}

/// The errors of the attempts to deliver to `endpoint` (`None` for one that was answered
/// 2xx), once `done` holds of them (or the patience is out).
async fn attempt_errors(
    app: &TestApp,
    endpoint: EndpointId,
    done: impl Fn(&[Option<String>]) -> bool,
) -> Vec<Option<String>> {
    #[derive(diesel::QueryableByName)]
    struct Attempt {
        #[diesel(sql_type = Nullable<Text>)]
        error: Option<String>,
    }
    let mut conn = app.db.connect().await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let rows: Vec<Attempt> = diesel::sql_query(
            "SELECT error FROM delivery_attempts WHERE endpoint_id = $1 ORDER BY id",
        )
        .bind::<SqlUuid, _>(endpoint.0)
        .load(&mut conn)
        .await
        .unwrap();
        let errors: Vec<Option<String>> = rows.into_iter().map(|r| r.error).collect();
        if done(&errors) || tokio::time::Instant::now() > deadline {
            return errors;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn verifies(secret: &Secret, post: &Request) -> bool {
    let header = |name: &str| post.headers.get(name).unwrap().to_str().unwrap().to_owned();
    verify(
        std::slice::from_ref(secret),
        &header("webhook-id"),
        &header("webhook-timestamp"),
        &header("webhook-signature"),
        &post.body,
        chrono::Utc::now(),
    )
    .is_ok()
}

async fn posts(receiver: &MockServer, count: usize) -> Vec<Request> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let posts = receiver.received_requests().await.unwrap();
        if posts.len() >= count || tokio::time::Instant::now() > deadline {
            return posts;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn paid_order(app: &TestApp, key: &str) {
    let response = app.checkout(key, &checkout_body("pm_card_visa")).await;
    assert_eq!(response.status(), 201);
}

#[tokio::test]
async fn an_endpoint_secret_is_stored_sealed_and_deliveries_verify_with_the_secret_shown() {
    let app = TestApp::spawn().await;
    let receiver = receiver().await;
    let (id, secret) = endpoint(&app, &receiver, "sealed-1").await;
    let key_text = secret.expose();

    // Read as SQL, neither the row nor the key that made it holds the secret.
    let mut conn = app.db.connect().await;
    let row = stored(&mut conn, id).await;
    assert!(row.secret.starts_with("v1:test:"), "{}", row.secret);
    #[derive(diesel::QueryableByName)]
    struct Whole {
        #[diesel(sql_type = Text)]
        text: String,
    }
    for table in ["webhook_endpoints", "idempotency_keys"] {
        let rows: Vec<Whole> =
            diesel::sql_query(format!("SELECT to_jsonb(t)::text AS text FROM {table} t"))
                .load(&mut conn)
                .await
                .unwrap();
        assert!(!rows.is_empty(), "{table}");
        for row in rows {
            assert!(!row.text.contains(&key_text[6..]), "{table}: {}", row.text);
        }
    }

    // A delivery is signed with the very secret the merchant was shown.
    paid_order(&app, "sealed-order-1").await;
    let posts = posts(&receiver, 1).await;
    assert_eq!(posts.len(), 1);
    assert!(verifies(&secret, &posts[0]));
    assert!(!verifies(&Secret::generate(), &posts[0]));
}

#[tokio::test]
async fn the_database_refuses_a_secret_in_clear() {
    let app = TestApp::spawn().await;
    let receiver = receiver().await;
    let (id, secret) = endpoint(&app, &receiver, "clear-1").await;
    let mut conn = app.db.connect().await;
    assert_refused_by(
        &mut conn,
        &format!(
            "INSERT INTO webhook_endpoints (merchant_id, id, url, enabled_events, secret) \
             VALUES ('{}', gen_random_uuid(), 'https://shop.example/hook', ARRAY['*'], '{}')",
            app.merchant_id.0,
            secret.expose()
        ),
        "webhook_endpoints_secret_sealed",
    )
    .await;
    assert_refused_by(
        &mut conn,
        &format!(
            "UPDATE webhook_endpoints SET previous_secret = '{}', \
                 previous_secret_until = now() + interval '1 hour' WHERE id = '{}'",
            secret.expose(),
            id.0
        ),
        "webhook_endpoints_previous_secret_sealed",
    )
    .await;
}

#[tokio::test]
async fn a_sealed_secret_moved_to_another_endpoint_does_not_open() {
    let app = TestApp::spawn().await;
    let (mine, theirs) = (receiver().await, receiver().await);
    let (my_id, my_secret) = endpoint(&app, &mine, "moved-1").await;
    let (their_id, _) = endpoint(&app, &theirs, "moved-2").await;
    // Someone with write access to the table copies my sealed secret onto their endpoint.
    let mut conn = app.db.connect().await;
    diesel::sql_query(
        "UPDATE webhook_endpoints SET secret = (SELECT secret FROM webhook_endpoints WHERE id = $1) \
         WHERE id = $2",
    )
    .bind::<SqlUuid, _>(my_id.0)
    .bind::<SqlUuid, _>(their_id.0)
    .execute(&mut conn)
    .await
    .unwrap();
    paid_order(&app, "moved-order").await;

    let errors = attempt_errors(&app, their_id, |e| !e.is_empty()).await;
    let error = errors.iter().flatten().next().cloned().unwrap_or_default();
    assert!(error.contains("does not open"), "{errors:?}");
    assert!(theirs.received_requests().await.unwrap().is_empty());
    // Mine is delivered as ever.
    let posts = posts(&mine, 1).await;
    assert!(verifies(&my_secret, &posts[0]));
}

/// `payorch secrets reencrypt` on `database_url` under `keys` (`PAYORCH_MASTER_KEY`'s form).
fn reencrypt(database_url: &str, keys: &str) -> std::process::Output {
    std::process::Command::new(payorch_bin())
        .args(["secrets", "reencrypt"])
        .env("DATABASE_URL", database_url)
        .env("PAYORCH_MASTER_KEY", keys)
        .env_remove("PAYORCH_MASTER_KEY_FILE")
        .output()
        .expect("payorch runs")
}

#[tokio::test]
async fn the_master_key_rotates_old_values_open_until_reencrypted_and_then_only_the_new_key_works()
{
    let old_text = TEST_MASTER_KEY;
    let (new_keys, new_text) = MasterKeys::generate("new");
    let mut app = TestApp::spawn().await;
    let receiver = receiver().await;
    let (id, first) = endpoint(&app, &receiver, "rotate-1").await;
    // A rotation too, so that both columns are rewritten.
    let rotated = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/webhook_endpoints/we_{}/rotate_secret", id.0),
            Some("rotate-2"),
            None,
        )
        .await;
    assert_eq!(rotated.status(), 200);
    let (_, second) = endpoint_and_secret(&rotated.json().await.unwrap());

    // The new key first, the old one still configured: old values open, new ones are sealed
    // under the new key.
    app.crash().await;
    let both = format!("{new_text},{old_text}");
    app.config.settings.master_keys = Some(MasterKeys::parse(&both).unwrap());
    app.restart().await;
    paid_order(&app, "rotate-order-1").await;
    let delivered = posts(&receiver, 1).await;
    assert!(verifies(&second, &delivered[0]));
    assert!(
        verifies(&first, &delivered[0]),
        "the previous secret signs too"
    );

    // Rewritten under the new key, by the command an operator runs.
    let out = reencrypt(&app.db.runtime_url, &both);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 webhook endpoint(s) rewritten"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("master key `new`: the other keys"),
        "one line, one space between its parts: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let mut conn = app.db.connect().await;
    let row = stored(&mut conn, id).await;
    let previous = row.previous_secret.clone().expect("the previous secret");
    for value in [&row.secret, &previous] {
        assert!(value.starts_with("v1:new:"), "{value}");
    }
    // The old key alone no longer opens anything: its values are gone.
    let old_alone = MasterKeys::parse(old_text).unwrap();
    assert_eq!(
        old_alone.open(&row.secret, &format!("webhook_endpoints:{}", id.0)),
        Err(OpenError::UnknownKey("new".into()))
    );

    // The new key alone delivers, signed as the merchant was told.
    app.crash().await;
    app.config.settings.master_keys = Some(new_keys);
    app.restart().await;
    paid_order(&app, "rotate-order-2").await;
    let delivered = posts(&receiver, 2).await;
    let last = delivered.last().unwrap();
    assert!(verifies(&second, last));

    // A replica with only the old key says which key it lacks, and sends nothing.
    app.crash().await;
    app.config.settings.master_keys = Some(old_alone);
    app.restart().await;
    paid_order(&app, "rotate-order-3").await;
    let errors = attempt_errors(&app, id, |e| e.iter().any(Option::is_some)).await;
    let refused = errors.iter().flatten().next().expect("a refused attempt");
    assert!(
        refused.contains("sealed under master key `new`, which is not configured"),
        "{refused}"
    );
    assert_eq!(receiver.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn reencrypt_without_a_key_says_how_to_make_one() {
    let app = TestApp::spawn().await;
    let out = std::process::Command::new(payorch_bin())
        .args(["secrets", "reencrypt", "--data-dir"])
        .arg(crate::helpers::temp_dir("reencrypt-no-key"))
        .env("DATABASE_URL", &app.db.runtime_url)
        .env_remove("PAYORCH_MASTER_KEY")
        .env_remove("PAYORCH_MASTER_KEY_FILE")
        .output()
        .expect("payorch runs");
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("head -c 32 /dev/urandom | base64"), "{said}");
}

/// `payorch serve` on `database_url` with `args`, its environment without master keys but
/// `master_key`; its stdout and stderr piped.
fn serve_process(
    data_dir: &std::path::Path,
    database_url: &str,
    args: &[&str],
    master_key: Option<&str>,
) -> tokio::process::Child {
    let mut command = tokio::process::Command::new(payorch_bin());
    command
        .args(["serve", "--bind", "127.0.0.1:0", "--workers", "1"])
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env("DATABASE_URL", database_url)
        .env_remove("PAYORCH_MASTER_KEY")
        .env_remove("PAYORCH_MASTER_KEY_FILE")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    if let Some(key) = master_key {
        command.env("PAYORCH_MASTER_KEY", key);
    }
    command.spawn().expect("start payorch serve")
}

#[tokio::test]
async fn serve_with_a_real_provider_and_no_master_key_refuses_to_start_and_says_how() {
    let db = crate::helpers::TestDatabase::migrated().await;
    let data_dir = crate::helpers::temp_dir("no-master-key");
    let child = serve_process(
        &data_dir,
        &db.url,
        &["--provider-url", "https://127.0.0.1:9"],
        None,
    );
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("serve exits")
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("head -c 32 /dev/urandom | base64"), "{said}");
    assert!(said.contains("PAYORCH_MASTER_KEY"), "{said}");
    assert!(!data_dir.join("master_key").exists(), "no key made for it");
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[tokio::test]
async fn serve_seals_the_secrets_an_older_version_kept_in_clear_before_it_answers() {
    let db = crate::helpers::TestDatabase::migrated().await;
    let mut conn = db.connect().await;
    let (merchant, _) = payorch::accounts::create_merchant(&mut conn, "Older merchant")
        .await
        .unwrap();
    let (current, previous) = (Secret::generate(), Secret::generate());
    let endpoint = EndpointId::new();
    // The table as an older version left it: secrets in clear, under the CHECKs the migration
    // adds NOT VALID (they hold for what is written after it, not for these rows).
    diesel::sql_query(format!(
        "DO $$ DECLARE secret_def text; previous_def text; BEGIN
             SELECT pg_get_constraintdef(oid) INTO secret_def FROM pg_constraint
                 WHERE conname = 'webhook_endpoints_secret_sealed';
             SELECT pg_get_constraintdef(oid) INTO previous_def FROM pg_constraint
                 WHERE conname = 'webhook_endpoints_previous_secret_sealed';
             ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_secret_sealed,
                 DROP CONSTRAINT webhook_endpoints_previous_secret_sealed;
             INSERT INTO webhook_endpoints (merchant_id, id, url, enabled_events, secret,
                 previous_secret, previous_secret_until)
             VALUES ('{m}', '{e}', 'https://shop.example/hook', ARRAY['*'], '{current}',
                 '{previous}', now() + interval '1 hour');
             EXECUTE 'ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_secret_sealed '
                 || secret_def;
             EXECUTE 'ALTER TABLE webhook_endpoints ADD CONSTRAINT '
                 || 'webhook_endpoints_previous_secret_sealed ' || previous_def;
         END $$",
        m = merchant.id.0,
        e = endpoint.0,
        current = current.expose(),
        previous = previous.expose(),
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    let validate =
        "ALTER TABLE webhook_endpoints VALIDATE CONSTRAINT webhook_endpoints_secret_sealed";
    assert!(diesel::sql_query(validate)
        .execute(&mut conn)
        .await
        .is_err());

    let data_dir = crate::helpers::temp_dir("seal-at-start");
    // The database has a merchant the demo's credentials do not name: new demo keys.
    let mut child = serve_process(
        &data_dir,
        &db.url,
        &["--new-demo-keys"],
        Some(TEST_MASTER_KEY),
    );
    crate::serve::wait_ready(&data_dir, "").await;
    let row = stored(&mut conn, endpoint).await;
    let keys = MasterKeys::parse(TEST_MASTER_KEY).unwrap();
    let open = |stored: &str| {
        payorch::events::endpoints::sealed::SealedSecret::from(stored.to_owned())
            .open(&keys, endpoint)
            .expect("sealed under the master key")
    };
    assert!(row.secret.starts_with("v1:test:"), "{}", row.secret);
    assert_eq!(open(&row.secret), current);
    assert_eq!(open(row.previous_secret.as_deref().unwrap()), previous);
    // Nothing in clear is left, and serve had the database prove it: the CHECKs are valid,
    // so they hold for every row.
    #[derive(diesel::QueryableByName)]
    struct Validated {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        convalidated: bool,
    }
    let checks: Vec<Validated> = diesel::sql_query(
        "SELECT convalidated FROM pg_constraint \
         WHERE conname IN ('webhook_endpoints_secret_sealed', \
                           'webhook_endpoints_previous_secret_sealed')",
    )
    .load(&mut conn)
    .await
    .unwrap();
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(|c| c.convalidated));
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[tokio::test]
async fn serve_starts_with_a_warning_when_the_owner_cannot_connect_to_validate_the_checks() {
    let db = crate::helpers::TestDatabase::migrated().await;
    let mut holder = db.connect().await;
    let mut admin = db.connect().await;
    // The start is held at sealing (as the runtime role), after it migrated as the owner...
    diesel::sql_query("BEGIN")
        .execute(&mut holder)
        .await
        .unwrap();
    diesel::sql_query("LOCK TABLE webhook_endpoints IN ACCESS EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .unwrap();
    let data_dir = crate::helpers::temp_dir("owner-gone");
    let mut command = tokio::process::Command::new(payorch_bin());
    command
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--data-dir",
        ])
        .arg(&data_dir)
        .env("DATABASE_URL", &db.runtime_url)
        .env("PAYORCH_MIGRATION_DATABASE_URL", &db.url)
        .env_remove("PAYORCH_MIGRATION_DATABASE_URL_FILE")
        .env("PAYORCH_MASTER_KEY", TEST_MASTER_KEY)
        .env_remove("PAYORCH_MASTER_KEY_FILE")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("start payorch serve");
    #[derive(diesel::QueryableByName)]
    struct Waiting {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        waiting: i64,
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let Waiting { waiting } = diesel::sql_query(
            "SELECT count(*) AS waiting FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock' \
               AND query LIKE '%webhook_endpoints%'",
        )
        .get_result(&mut admin)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "serve never reached sealing"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // ...and then the owner can no longer log in to this database.
    diesel::sql_query(format!(
        "ALTER ROLE CURRENT_USER IN DATABASE {} SET session_preload_libraries = \
         'payorch_no_such_library'",
        db.name
    ))
    .execute(&mut admin)
    .await
    .unwrap();
    diesel::sql_query("COMMIT")
        .execute(&mut holder)
        .await
        .unwrap();

    crate::serve::wait_ready(&data_dir, "").await;
    let mut child = child;
    child.start_kill().unwrap();
    let out = child.wait_with_output().await.unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("could not validate the CHECKs against secrets in clear"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&data_dir);
}
