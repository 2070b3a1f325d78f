//! payorch behind PgBouncer in transaction mode (docs/operations/pooler.md): Debian's PgBouncer
//! 1.18, which keeps no prepared statement of a client's, in front of the test cluster with
//! fewer server sessions than payorch opens, so that every transaction may run on another one.
//! `serve` runs through it with `--db-pooler transaction` and migrates straight to PostgreSQL.
//!
//! Before `--db-pooler`, this broke as an operator saw it: `prepared statement "s10" does not
//! exist` at start-up, `500`s to checkouts, and the background workers failing round after round.
//!
//! PgBouncer is a package of the machine (`.ci/run` installs it); without it these tests say so
//! and pass, unless `PAYORCH_REQUIRE_PGBOUNCER=1` (set by `.ci/run`) makes that a failure.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::str::FromStr;
use std::time::Duration;

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, RunQueryDsl};
use futures_util::future::join_all;
use serde_json::{json, Value};
use tokio_postgres::config::Host;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use payorch::credentials::Credentials;
use payorch::db::{build_pool, PoolSettings, Pooler};

use crate::helpers::{eventually, payorch_bin, temp_dir, TestDatabase};
use crate::payments::checkout_body;
use crate::serve::{terminate, wait_ready};

/// A PgBouncer of a test's own, in transaction mode, in front of one database.
pub struct Bouncer {
    child: std::process::Child,
    dir: PathBuf,
    pub port: u16,
}

/// Where the machine's PgBouncer is: `None` skips the test, unless CI requires it.
fn pgbouncer_binary() -> Option<PathBuf> {
    let found = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("PAYORCH_REQUIRE_PGBOUNCER").is_none(),
            "PgBouncer is required here: apt-get install pgbouncer"
        );
        eprintln!("skipped: no PgBouncer on this machine (apt-get install pgbouncer)");
    }
    found
}

impl Bouncer {
    /// PgBouncer 1.18 in transaction mode before `db`, with two server sessions only.
    fn start(db: &TestDatabase) -> Option<Bouncer> {
        Self::before(&db.runtime_url)
    }

    /// PgBouncer before the server and database of the libpq URL `url` (key/value form), its
    /// one user the URL's, with two server sessions only.
    pub fn before(url: &str) -> Option<Bouncer> {
        let binary = pgbouncer_binary()?;
        let config = tokio_postgres::Config::from_str(url).expect("a libpq URL");
        let host = match config.get_hosts().first().expect("a host") {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let user = config.get_user().expect("a user");
        let name = config.get_dbname().expect("a database");
        let password = config
            .get_password()
            .map(|p| format!(" password={}", String::from_utf8_lossy(p)))
            .unwrap_or_default();
        let listen = free_port();
        let dir = temp_dir("pgbouncer");
        std::fs::write(dir.join("users.txt"), format!("\"{user}\" \"\"\n")).unwrap();
        std::fs::write(
            dir.join("pgbouncer.ini"),
            format!(
                "[databases]\n{name} = host={host} port={port} dbname={name} user={user}{password}\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n\
                 auth_type = trust\nauth_file = {dir}/users.txt\npool_mode = transaction\n\
                 default_pool_size = 2\nmax_client_conn = 500\nquery_wait_timeout = 3\n\
                 logfile = {dir}/pgbouncer.log\n\
                 pidfile = {dir}/pgbouncer.pid\n",
                dir = dir.display(),
            ),
        )
        .unwrap();
        let mut command = std::process::Command::new(binary);
        // PgBouncer refuses to run as root; the test cluster runs as `postgres` then too.
        // SAFETY: reads the effective user id.
        if unsafe { libc::geteuid() } == 0 {
            let chowned = std::process::Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&dir)
                .status()
                .expect("chown");
            assert!(chowned.success());
            command.args(["-u", "postgres"]);
        }
        let child = command
            .arg(dir.join("pgbouncer.ini"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pgbouncer");
        let bouncer = Bouncer {
            child,
            dir,
            port: listen,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", listen)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "pgbouncer listens within 10 s: {}",
                std::fs::read_to_string(bouncer.dir.join("pgbouncer.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(bouncer)
    }

    /// The runtime role's URL through the pooler.
    fn url(&self, db: &TestDatabase) -> String {
        let config = tokio_postgres::Config::from_str(&db.runtime_url).unwrap();
        format!(
            "postgres://{}@127.0.0.1:{}/{}?sslmode=disable",
            config.get_user().unwrap(),
            self.port,
            db.name
        )
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `payorch serve` through the pooler, its log (warnings and errors) written to `log`.
fn serve_through(
    pooled_url: &str,
    owner_url: Option<&str>,
    data_dir: &Path,
    log: &Path,
) -> tokio::process::Child {
    let mut command = tokio::process::Command::new(payorch_bin());
    command
        .args(["serve", "--bind", "127.0.0.1:0", "--workers", "2"])
        .args(["--reconciler-interval-ms", "200", "--quota-sync-ms", "200"])
        .args(["--reaper-interval-secs", "1"])
        .arg("--data-dir")
        .arg(data_dir)
        .env("DATABASE_URL", pooled_url)
        .env("PAYORCH_DB_POOLER", "transaction")
        .env("PAYORCH_DB_POOL_SIZE", "12")
        .env("RUST_LOG", "warn")
        .env_remove("PAYORCH_MIGRATION_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .kill_on_drop(true);
    if let Some(owner_url) = owner_url {
        command.env("PAYORCH_MIGRATION_DATABASE_URL", owner_url);
    }
    command.spawn().expect("start payorch serve")
}

async fn post(creds: &Credentials, path: &str, key: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", creds.base_url))
        .bearer_auth(&creds.api_key)
        .header("Idempotency-Key", key)
        .json(&body)
        .send()
        .await
        .expect("payorch answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn payment_status(creds: &Credentials, id: &str) -> String {
    let payment: Value = reqwest::Client::new()
        .get(format!("{}/v1/payments/{id}", creds.base_url))
        .bearer_auth(&creds.api_key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    payment["status"].as_str().unwrap_or_default().to_owned()
}

/// Checkouts, replays, refunds, payments the reconciler settles, event deliveries, the quota
/// sync and the reapers, all through two server sessions that twelve pool connections share:
/// every answer as directly on PostgreSQL, and not one warning logged.
#[tokio::test]
async fn serve_through_pgbouncer_in_transaction_mode_pays_refunds_reconciles_and_delivers() {
    let db = TestDatabase::migrated().await;
    let Some(bouncer) = Bouncer::start(&db) else {
        return;
    };
    // As docs/operations/pooler.md asks of an operator: the runtime role's own time zone and
    // statement timeout, for statements outside a transaction.
    runtime_role_sets(&db, "timezone", "UTC").await;
    runtime_role_sets(&db, "statement_timeout", "10s").await;
    let data_dir = temp_dir("pooler-serve");
    let log = data_dir.join("serve.log");
    let serve = serve_through(&bouncer.url(&db), Some(&db.url), &data_dir, &log);
    let creds = wait_ready(&data_dir, "").await;

    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&receiver)
        .await;
    let (status, _) = post(
        &creds,
        "/v1/webhook_endpoints",
        "endpoint",
        json!({"url": receiver.uri(), "enabled_events": ["*"]}),
    )
    .await;
    assert_eq!(status, 201);

    // A route of the merchant's own: read by every checkout (a `text[]` of provider names).
    let routed = reqwest::Client::new()
        .put(format!(
            "{}/v1/merchants/{}/routing",
            creds.base_url, creds.merchant_id
        ))
        .bearer_auth(&creds.support_key)
        .json(&json!({"providers": ["stripe", "adyen"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(routed.status(), 200);

    // Thirty paid at once, five whose answer the sandbox loses: pending until reconciled.
    let checkouts = (0..35).map(|n| {
        let method = if n < 30 {
            "pm_card_visa"
        } else {
            "pm_sandbox_lost_response"
        };
        let creds = creds.clone();
        async move {
            post(
                &creds,
                "/v1/checkout",
                &format!("c-{n}"),
                checkout_body(method),
            )
            .await
        }
    });
    let answers = join_all(checkouts).await;
    let mut paid = Vec::new();
    let mut lost = Vec::new();
    for (n, (status, body)) in answers.iter().enumerate() {
        assert_eq!(
            *status,
            201,
            "checkout {n}: {body}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let id = body["payment"]["id"].as_str().unwrap().to_owned();
        if n < 30 {
            assert_eq!(body["payment"]["status"], "succeeded", "{body}");
            paid.push(id);
        } else {
            lost.push(id);
        }
    }
    // A retry with the same key is the same answer.
    let (status, replay) = post(&creds, "/v1/checkout", "c-0", checkout_body("pm_card_visa")).await;
    assert_eq!((status, &replay["payment"]["id"]), (201, &json!(paid[0])));

    let refunds = paid.iter().take(10).enumerate().map(|(n, payment)| {
        let creds = creds.clone();
        async move {
            post(
                &creds,
                &format!("/v1/payments/{payment}/refunds"),
                &format!("r-{n}"),
                json!({"amount": 1000}),
            )
            .await
        }
    });
    let mut refund_ids = Vec::new();
    for (status, body) in join_all(refunds).await {
        assert_eq!(status, 201, "{body}");
        refund_ids.push(body["id"].as_str().unwrap().to_owned());
    }

    // Every read a merchant and support make, through the pooler: each answers 200.
    let order = replay["order"]["id"].as_str().unwrap();
    let reads = [
        (&creds.api_key, format!("/v1/payments/{}", paid[0])),
        (&creds.api_key, format!("/v1/orders/{order}")),
        (&creds.api_key, format!("/v1/refunds/{}", refund_ids[0])),
        (&creds.api_key, "/v1/events".to_owned()),
        (&creds.api_key, "/v1/disputes".to_owned()),
        (&creds.api_key, "/v1/webhook_endpoints".to_owned()),
        (
            &creds.api_key,
            format!("/v1/merchants/{}", creds.merchant_id),
        ),
        (
            &creds.api_key,
            format!("/v1/merchants/{}/routing", creds.merchant_id),
        ),
        (
            &creds.support_key,
            format!("/v1/support/payments/{}", paid[0]),
        ),
        (
            &creds.support_key,
            "/v1/support/payments?status=succeeded".to_owned(),
        ),
        (&creds.support_key, "/v1/support/payments/stats".to_owned()),
        (&creds.support_key, "/v1/support/merchants".to_owned()),
        (&creds.support_key, "/v1/support/routing/scores".to_owned()),
    ];
    for (secret, path) in reads {
        let response = reqwest::Client::new()
            .get(format!("{}{path}", creds.base_url))
            .bearer_auth(secret)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            200,
            "{path}: {}",
            response.text().await.unwrap()
        );
    }

    for id in &lost {
        assert!(
            eventually(Duration::from_secs(30), || async {
                payment_status(&creds, id).await == "succeeded"
            })
            .await,
            "the reconciler settled {id} through the pooler"
        );
    }
    assert!(
        eventually(Duration::from_secs(30), || async {
            receiver.received_requests().await.unwrap_or_default().len() >= 45
        })
        .await,
        "every payment's and refund's event delivered through the pooler"
    );
    // A few rounds of the quota sync and the reapers more.
    tokio::time::sleep(Duration::from_secs(2)).await;

    terminate(serve).await;
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.trim().is_empty(),
        "nothing went wrong through the pooler:\n{logged}"
    );
    let _ = std::fs::remove_dir_all(&data_dir);
}

/// `ALTER ROLE <the runtime role> IN DATABASE <the test's> SET <setting> = '<value>'`, as the
/// owner: what sessions of the runtime role start with, on this database only.
async fn runtime_role_sets(db: &TestDatabase, setting: &str, value: &str) {
    use diesel_async::SimpleAsyncConnection;
    let config = tokio_postgres::Config::from_str(&db.runtime_url).unwrap();
    let role = config.get_user().unwrap();
    db.connect()
        .await
        .batch_execute(&format!(
            "ALTER ROLE \"{role}\" IN DATABASE \"{}\" SET {setting} = '{value}'",
            db.name
        ))
        .await
        .expect("set the runtime role's default");
}

/// Behind a transaction pooler payorch cannot set a session's time zone, and it reckons days
/// and months in UTC: `serve` refuses a server whose sessions start in another zone, and says
/// what to set.
#[tokio::test]
async fn serve_through_a_transaction_pooler_refuses_sessions_outside_utc() {
    let db = TestDatabase::migrated().await;
    let Some(bouncer) = Bouncer::start(&db) else {
        return;
    };
    runtime_role_sets(&db, "timezone", "Europe/Berlin").await;
    let logged = refused_start(&bouncer.url(&db), Some(&db.url)).await;
    assert!(
        logged.contains("Europe/Berlin") && logged.contains("SET timezone = 'UTC'"),
        "{logged}"
    );
}

/// What `serve` through the pooler logged as it refused to start.
async fn refused_start(pooled_url: &str, owner_url: Option<&str>) -> String {
    let data_dir = temp_dir("pooler-refused");
    let log = data_dir.join("serve.log");
    let mut serve = serve_through(pooled_url, owner_url, &data_dir, &log);
    let exit = tokio::time::timeout(Duration::from_secs(30), serve.wait())
        .await
        .expect("serve stops at once")
        .unwrap();
    assert!(!exit.success());
    let logged = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&data_dir);
    logged
}

/// Through a transaction pooler a migration would lose its session, its lock and its DDL
/// between statements: `serve` refuses to start without an owner's URL of its own, and says
/// which setting to give.
#[tokio::test]
async fn serve_through_a_transaction_pooler_will_not_migrate_through_it() {
    let db = TestDatabase::migrated().await;
    let Some(bouncer) = Bouncer::start(&db) else {
        return;
    };
    let logged = refused_start(&bouncer.url(&db), None).await;
    assert!(
        logged.contains("--migration-database-url") && logged.contains("transaction mode"),
        "{logged}"
    );
}

/// Nothing set on a session outlives a transaction behind the pooler: each transaction of the
/// pool runs under the configured statement timeout, and under payorch's name, whichever
/// server session it lands on.
#[tokio::test]
async fn each_transaction_through_the_pooler_has_the_timeout_and_the_name() {
    let db = TestDatabase::migrated().await;
    let Some(bouncer) = Bouncer::start(&db) else {
        return;
    };
    let settings = PoolSettings {
        max_size: 6,
        statement_timeout: Duration::from_millis(4321),
        pooler: Pooler::Transaction,
        ..PoolSettings::default()
    };
    let pool = build_pool(&bouncer.url(&db), &settings).unwrap();
    #[derive(diesel::QueryableByName)]
    struct Settings {
        #[diesel(sql_type = Text)]
        timeout: String,
        #[diesel(sql_type = Text)]
        name: String,
    }
    let checks = (0..12).map(|_| {
        let pool = pool.clone();
        async move {
            let mut conn = pool.get().await.expect("a connection through the pooler");
            conn.transaction(async |conn| {
                diesel::sql_query(
                    "SELECT current_setting('statement_timeout') AS timeout, \
                     current_setting('application_name') AS name, pg_sleep(0.05)::text",
                )
                .load::<Settings>(conn)
                .await
            })
            .await
            .expect("a transaction through the pooler")
        }
    });
    for rows in join_all(checks).await {
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].timeout.as_str(), rows[0].name.as_str()),
            ("4321ms", "payorch")
        );
    }
}

/// Behind the pooler every answer comes from an unnamed statement, and tokio-postgres must
/// know each column's type without asking: a type it does not know it looks up with a
/// statement prepared under a name, which the next server session does not have. PostgreSQL
/// reports a domain as its base type, so domains over built-in types are fine; an array of a
/// domain, an enum or a composite type of payorch's own would not be (migration
/// 2026-11-28-000036_routing_providers_text). Needs no PgBouncer: it reads the schema. It sees
/// columns only: an expression or function of such a type in a statement would still fail
/// behind the pooler, which the end-to-end test above, reading every page, would show.
#[tokio::test]
async fn no_column_of_the_schema_has_a_type_an_unnamed_answer_would_look_up() {
    let db = TestDatabase::migrated().await;
    #[derive(diesel::QueryableByName)]
    struct Column {
        #[diesel(sql_type = Text)]
        column: String,
    }
    let mut conn = db.connect().await;
    let unknown: Vec<String> = diesel::sql_query(
        "SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) \
             AS column \
         FROM pg_attribute a \
         JOIN pg_class c ON c.oid = a.attrelid \
         JOIN pg_type t ON t.oid = a.atttypid \
         LEFT JOIN pg_type base ON base.oid = t.typbasetype \
         WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm') \
           AND a.attnum > 0 AND NOT a.attisdropped \
           AND (CASE WHEN t.typtype = 'd' THEN base.oid ELSE t.oid END) >= 16384 \
         ORDER BY 1",
    )
    .load::<Column>(&mut conn)
    .await
    .expect("the schema's columns")
    .into_iter()
    .map(|c| c.column)
    .collect();
    assert!(unknown.is_empty(), "{unknown:?}");
}

/// Directly on PostgreSQL each statement is prepared once per connection and then run by
/// name; behind a transaction pooler none is ever prepared, however often it runs
/// (src/db/conn.rs). Read from the session's own `pg_prepared_statements`: needs no PgBouncer.
#[tokio::test]
async fn directly_a_statement_is_prepared_once_behind_the_pooler_never() {
    use diesel::QueryDsl;
    use payorch::db::schema::merchants;
    use payorch::db::{DatabaseUrl, PgConn};

    #[derive(diesel::QueryableByName)]
    struct Prepared {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let db = TestDatabase::migrated().await;
    let url = DatabaseUrl::parse(&db.url).unwrap();
    let timeout = Duration::from_secs(5);
    for (pooler, expected) in [(Pooler::None, 1), (Pooler::Transaction, 0)] {
        let mut conn = PgConn::open(&url, url.config(), pooler.statements(timeout))
            .await
            .unwrap();
        for _ in 0..3 {
            let merchants: Vec<i64> = merchants::table.count().load(&mut conn).await.unwrap();
            assert_eq!(merchants, [0]);
        }
        let prepared = diesel::sql_query("SELECT count(*) AS n FROM pg_prepared_statements")
            .load::<Prepared>(&mut conn)
            .await
            .unwrap();
        assert_eq!(prepared[0].n, expected, "{pooler:?}");
    }
}
