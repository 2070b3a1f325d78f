//! The test harness: one database server for the whole run, one migrated template database,
//! and a fresh copy of it for each test, dropped when the test ends.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use diesel_async::{AsyncConnection, RunQueryDsl};
use tokio::sync::OnceCell;

use payorch::accounts::{self, SupportRole};
use payorch::app::{AppSettings, Application};
use payorch::db::cluster::CLUSTER_RUNTIME_USER;
use payorch::db::migrations::run_migrations;
use payorch::db::PgConn;
use payorch::db::{ClusterOptions, PoolSettings, PrivateCluster};
use payorch::delivery::settings::DeliverySettings;
use payorch::events::endpoints::sealed::seal;
use payorch::events::safe_url::UrlPolicy;
use payorch::events::schedule::Schedule;
use payorch::events::signing::Secret;
use payorch::http::connections::ClientLimits;
use payorch::idempotency::IdempotencySettings;
use payorch::ids::{EndpointId, MerchantId};
use payorch::payments::reconciler::settings::ReconcilerSettings;
use payorch::providers::adyen::{AdyenConfig, AdyenProvider};
use payorch::providers::circuit::CircuitSettings;
use payorch::providers::registry::Providers;
use payorch::providers::stripe::{StripeConfig, StripeProvider};
use payorch::providers::PaymentProvider;
use payorch::sealing::MasterKeys;
use payorch::wiring::{self, Webhooks};
use payorch_sandbox::{self as sandbox, SandboxConfig, SandboxHandle};

use crate::door::Door;

/// The database server of this test run.
pub struct TestServer {
    /// A maintenance database to create and drop others from.
    admin_url: String,
    /// `url_for(name)` gives the URL of another database on the same server.
    url_template: UrlTemplate,
    /// The same as the runtime role the apps run as, which owns nothing (src/db/roles.rs);
    /// with `DATABASE_URL` given, the same role as `url_template`.
    runtime_url_template: UrlTemplate,
    template_db: String,
}

enum UrlTemplate {
    /// A libpq key-value string: `dbname=` is replaced.
    KeyValue(String),
    /// A `postgres://…/db?…` URL: the path is replaced.
    Url { before: String, after: String },
}

impl UrlTemplate {
    fn parse(url: &str) -> Self {
        if let Some(rest) = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
        {
            let scheme_len = url.len() - rest.len();
            let path_start = rest.find('/').map(|i| i + scheme_len).unwrap_or(url.len());
            let query_start = url[path_start..]
                .find('?')
                .map(|i| i + path_start)
                .unwrap_or(url.len());
            return UrlTemplate::Url {
                before: url[..path_start].to_string(),
                after: url[query_start..].to_string(),
            };
        }
        let without_db: Vec<&str> = url
            .split_whitespace()
            .filter(|part| !part.starts_with("dbname="))
            .collect();
        UrlTemplate::KeyValue(without_db.join(" "))
    }

    fn url_for(&self, database: &str) -> String {
        match self {
            UrlTemplate::KeyValue(base) => format!("{base} dbname={database}"),
            UrlTemplate::Url { before, after } => format!("{before}/{database}{after}"),
        }
    }
}

static SERVER: OnceCell<TestServer> = OnceCell::const_new();
static CLUSTER: std::sync::OnceLock<PrivateCluster> = std::sync::OnceLock::new();

/// A folder in the system temp dir: reachable by the `postgres` user even when the checkout
/// lives under a private home, and short enough for a Unix socket path.
pub fn temp_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "payorch-test-{}-{label}-{}",
        std::process::id(),
        uuid::Uuid::now_v7().simple()
    ));
    std::fs::create_dir_all(&dir).expect("create a temp dir");
    dir
}

extern "C" fn stop_test_cluster() {
    if let Some(cluster) = CLUSTER.get() {
        let _ = cluster.stop();
        if let Some(dir) = cluster.root().parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Clusters of earlier runs that died before their exit hook: stop them, remove their folders.
fn remove_abandoned_clusters() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix("payorch-test-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        if alive {
            continue;
        }
        let pid_file = entry.path().join("postgres/data/postmaster.pid");
        if let Some(postmaster) = std::fs::read_to_string(&pid_file).ok().and_then(|text| {
            text.lines()
                .next()
                .and_then(|l| l.trim().parse::<i32>().ok())
        }) {
            // SAFETY: asks that postmaster to shut down fast.
            unsafe { libc::kill(postmaster, libc::SIGINT) };
            std::thread::sleep(Duration::from_millis(500));
        }
        let _ = std::fs::remove_dir_all(entry.path());
    }
}

async fn start_server() -> TestServer {
    let (admin_url, runtime_url) = match std::env::var("DATABASE_URL") {
        Ok(url) => (url.clone(), url),
        Err(_) => {
            remove_abandoned_clusters();
            let options = ClusterOptions {
                data_dir: temp_dir("cluster"),
                ephemeral: true,
            };
            let cluster = tokio::task::spawn_blocking(move || PrivateCluster::start(&options))
                .await
                .expect("cluster thread")
                .expect("start the test cluster");
            let url = cluster.database_url("postgres");
            let runtime_url = cluster.runtime_database_url("postgres");
            CLUSTER.set(cluster).expect("one test cluster");
            // SAFETY: registers a plain function to run at process exit.
            unsafe { libc::atexit(stop_test_cluster) };
            let mut conn = PgConn::establish(&url)
                .await
                .expect("connect to the test cluster");
            payorch::db::roles::create_runtime_login(&mut conn, CLUSTER_RUNTIME_USER)
                .await
                .expect("create the runtime role");
            (url, runtime_url)
        }
    };
    let url_template = UrlTemplate::parse(&admin_url);
    let runtime_url_template = UrlTemplate::parse(&runtime_url);
    let template_db = format!("payorch_template_{}", std::process::id());
    let mut conn = PgConn::establish(&admin_url)
        .await
        .expect("connect to the test database server");
    diesel::sql_query(format!(
        "DROP DATABASE IF EXISTS {template_db} WITH (FORCE)"
    ))
    .execute(&mut conn)
    .await
    .expect("drop an old template");
    diesel::sql_query(format!("CREATE DATABASE {template_db}"))
        .execute(&mut conn)
        .await
        .expect("create the template database");
    run_migrations(&url_template.url_for(&template_db))
        .await
        .expect("migrate the template database");
    TestServer {
        admin_url,
        url_template,
        runtime_url_template,
        template_db,
    }
}

pub async fn server() -> &'static TestServer {
    SERVER.get_or_init(start_server).await
}

/// A database of its own for one test; dropped (with its connections) when this is dropped.
pub struct TestDatabase {
    pub name: String,
    /// As the owner of the tables: the tests' own setup and checks.
    pub url: String,
    /// As the runtime role, which owns nothing: the apps' pools.
    pub runtime_url: String,
    /// Set when this test created the database and so must drop it.
    admin_url: Option<String>,
}

impl TestDatabase {
    /// A copy of the migrated template.
    pub async fn migrated() -> Self {
        let server = server().await;
        Self::create(server, Some(&server.template_db)).await
    }

    /// An empty database, for tests of migrations themselves.
    pub async fn empty() -> Self {
        Self::create(server().await, None).await
    }

    async fn create(server: &TestServer, template: Option<&str>) -> Self {
        let name = format!("payorch_test_{}", uuid::Uuid::now_v7().simple());
        let sql = match template {
            Some(t) => format!("CREATE DATABASE {name} TEMPLATE {t} STRATEGY FILE_COPY"),
            None => format!("CREATE DATABASE {name}"),
        };
        let mut conn = PgConn::establish(&server.admin_url)
            .await
            .expect("connect to the test database server");
        diesel::sql_query(sql)
            .execute(&mut conn)
            .await
            .expect("create a test database");
        TestDatabase {
            url: server.url_template.url_for(&name),
            runtime_url: server.runtime_url_template.url_for(&name),
            name,
            admin_url: Some(server.admin_url.clone()),
        }
    }

    /// A database the test manages itself (not dropped here).
    pub fn external(url: &str) -> Self {
        TestDatabase {
            name: String::new(),
            url: url.to_string(),
            runtime_url: url.to_string(),
            admin_url: None,
        }
    }

    pub async fn connect(&self) -> PgConn {
        PgConn::establish(&self.url)
            .await
            .expect("connect to the test database")
    }

    /// The rows of `table` now.
    pub async fn count(&self, table: &str) -> i64 {
        #[derive(diesel::QueryableByName)]
        struct Count {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            rows: i64,
        }
        let mut conn = self.connect().await;
        diesel::sql_query(format!("SELECT count(*) AS rows FROM {table}"))
            .get_result::<Count>(&mut conn)
            .await
            .expect("count rows")
            .rows
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some(admin_url) = self.admin_url.clone() else {
            return;
        };
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // Drop runs inside the test's runtime, which cannot be blocked on: use a thread.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let mut conn = PgConn::establish(&admin_url).await.ok()?;
                diesel::sql_query(sql).execute(&mut conn).await.ok()
            })
        });
        let _ = dropped.join();
    }
}

pub fn test_settings() -> AppSettings {
    AppSettings {
        bind: "127.0.0.1:0".into(),
        workers: 1,
        pool: PoolSettings {
            max_size: 8,
            acquire_timeout: Duration::from_secs(2),
            statement_timeout: Duration::from_secs(10),
            ..PoolSettings::default()
        },
        idempotency: IdempotencySettings {
            // Longer than the test provider timeout, short enough for crash tests.
            lease: Duration::from_secs(3),
            ..IdempotencySettings::default()
        },
        reaper: Default::default(),
        event_reaper: Default::default(),
        webhook_reaper: Default::default(),
        reconciler: ReconcilerSettings {
            interval: Duration::from_millis(100),
            backoff: vec![Duration::from_millis(300), Duration::from_millis(500)],
            claim: Duration::from_secs(3),
            // The sandbox's search shows a charge at once; a margin for a loaded machine.
            settle_delay: Duration::from_secs(2),
            ..ReconcilerSettings::default()
        },
        // Off: tests/api/settlement.rs runs its rounds itself.
        settlement: Default::default(),
        delivery: test_delivery_settings(),
        // Short, so a test can watch a revoked key stop working.
        auth_cache_ttl: Duration::from_millis(200),
        key_poll: Duration::from_millis(250),
        quota_sync: Duration::from_millis(100),
        clients: ClientLimits::default(),
        limits: Default::default(),
        drain: Duration::from_secs(20),
        public_url: None,
        master_keys: Some(MasterKeys::parse(TEST_MASTER_KEY).expect("the tests' master key")),
        // Open, as the demo has them: the tests read them without a token.
        metrics: Default::default(),
    }
}

/// The master key of the tests' apps and `serve` processes (`PAYORCH_MASTER_KEY`'s form).
pub const TEST_MASTER_KEY: &str = "test:ZhWt/QtNWiPtG7TJC5QkPELULO5rilbGc2TI+zmhFbQ=";

/// `secret` as `webhook_endpoints` stores it for `endpoint`: sealed under [`TEST_MASTER_KEY`].
pub fn sealed_secret(endpoint: EndpointId, secret: &Secret) -> String {
    let keys = MasterKeys::parse(TEST_MASTER_KEY).expect("the tests' master key");
    seal(&keys, endpoint, secret).stored().to_owned()
}

/// The delivery worker of a test app: quick to poll, its retries a fraction of a second apart
/// (four attempts, then given up), sending to the tests' own receivers on loopback `http`.
pub fn test_delivery_settings() -> DeliverySettings {
    DeliverySettings {
        poll_interval: Duration::from_millis(100),
        send_timeout: Duration::from_secs(3),
        connect_timeout: Duration::from_secs(1),
        lease_margin: Duration::from_secs(2),
        schedule: Schedule {
            waits: vec![Duration::from_millis(200); 3],
            ..Schedule::default()
        },
        urls: UrlPolicy {
            allow_http: true,
            allow_private: false,
        },
        ..DeliverySettings::default()
    }
}

/// How a test app and its sandbox provider are set up.
pub struct TestConfig {
    pub settings: AppSettings,
    pub sandbox: SandboxConfig,
    pub provider_timeout: Duration,
    /// Every secret payorch accepts webhooks under (the sandbox signs with its own).
    pub webhook_secrets: Vec<String>,
    /// The checkout demo (`/checkout`) pays as the test merchant, as `serve` has it pay as
    /// its demo merchant.
    pub demo_checkout: bool,
    /// Two providers instead of the sandbox's two faces: `a`, the app's sandbox behind a
    /// door the test can shut, spoken to as Stripe, and `b`, a second sandbox spoken to as
    /// Adyen (the failover tests), with this circuit.
    pub two_providers: Option<CircuitSettings>,
    /// The secret payorch presents to `a` when it is not the sandbox's own (a key that was
    /// rotated at the provider: every call is refused `401`).
    pub provider_a_secret: Option<payorch::secret::Secret>,
}

/// The second provider of a two-provider app, and the door in front of the first.
pub struct Second {
    pub sandbox: Arc<SandboxHandle>,
    pub door: Arc<Door>,
}

impl Default for TestConfig {
    fn default() -> Self {
        TestConfig {
            settings: test_settings(),
            sandbox: SandboxConfig {
                secret: "sk_test_payorch".into(),
                webhook_secret: TEST_WEBHOOK_SECRET.into(),
                slow_ms: 1500,
                processing_ms: 300,
                // Each webhook races the answer to its charge: the hardest case.
                webhook_delay_ms: 0,
                ..SandboxConfig::default()
            },
            provider_timeout: Duration::from_millis(1000),
            webhook_secrets: vec![TEST_WEBHOOK_SECRET.into()],
            demo_checkout: true,
            two_providers: None,
            provider_a_secret: None,
        }
    }
}

pub const TEST_WEBHOOK_SECRET: &str = "whsec_test_payorch";

/// The app on `sandbox`, wired the way `serve` wires it.
async fn start_app(
    db: &TestDatabase,
    config: &TestConfig,
    sandbox: &SandboxHandle,
    second: Option<&Second>,
    merchant_key: &str,
) -> (String, actix_web::dev::ServerHandle) {
    let stripe = |url: String| StripeConfig {
        timeout: config.provider_timeout,
        ..StripeConfig::new(
            url,
            config
                .provider_a_secret
                .clone()
                .unwrap_or_else(|| config.sandbox.secret.clone()),
            config
                .webhook_secrets
                .iter()
                .map(|s| s.as_str().into())
                .collect(),
        )
    };
    let app = match (second, &config.two_providers) {
        (Some(second), Some(circuit)) => {
            // `a` speaks Stripe through the door, `b` Adyen to the second sandbox.
            let a: Arc<dyn PaymentProvider> =
                Arc::new(StripeProvider::new(stripe(second.door.url())).expect("provider a"));
            let b: Arc<dyn PaymentProvider> = Arc::new(
                AdyenProvider::new(AdyenConfig {
                    timeout: config.provider_timeout,
                    ..AdyenConfig::new(
                        second.sandbox.base_url(),
                        config.sandbox.secret.clone(),
                        wiring::SANDBOX_MERCHANT_ACCOUNT,
                        vec![second.sandbox.adyen_hmac_key()],
                    )
                })
                .expect("provider b"),
            );
            let providers = Providers::new(vec![("a".into(), a), ("b".into(), b)], circuit)
                .expect("two providers");
            let app = Application::build(&config.settings, &db.runtime_url, providers)
                .await
                .expect("build the application");
            sandbox.set_webhook_url(Some(format!("{}/v1/webhooks/a", app.base_url())));
            second
                .sandbox
                .set_notification_url(Some(format!("{}/v1/webhooks/b", app.base_url())));
            app
        }
        _ => wiring::app_on_sandbox(
            &config.settings,
            &db.runtime_url,
            sandbox,
            stripe,
            Webhooks::ToTheApp,
        )
        .await
        .expect("build the application"),
    };
    if config.demo_checkout {
        app.open_demo_checkout(merchant_key.into());
    }
    let base_url = app.base_url();
    let handle = app.handle();
    tokio::spawn(app.run_until_stopped());
    (base_url, handle)
}

/// A running payorch on its own database, with one merchant and one support key.
pub struct TestApp {
    pub base_url: String,
    pub client: reqwest::Client,
    pub merchant_id: MerchantId,
    pub merchant_key: String,
    pub support_key: String,
    pub db: TestDatabase,
    /// The in-process provider this app charges through; its ledger is the judge.
    pub sandbox: Arc<SandboxHandle>,
    /// With [`TestConfig::two_providers`]: provider `b` and the door in front of `a`.
    pub second: Option<Second>,
    pub config: TestConfig,
    handle: actix_web::dev::ServerHandle,
}

impl TestApp {
    pub async fn spawn() -> Self {
        let db = TestDatabase::migrated().await;
        Self::spawn_on(db).await
    }

    /// With settings changed by `adjust` (limits, timeouts).
    pub async fn spawn_with(adjust: impl FnOnce(&mut AppSettings)) -> Self {
        Self::spawn_config(|config| adjust(&mut config.settings)).await
    }

    /// With the app, sandbox and provider settings changed by `adjust`.
    pub async fn spawn_config(adjust: impl FnOnce(&mut TestConfig)) -> Self {
        let mut config = TestConfig::default();
        adjust(&mut config);
        Self::spawn_configured(TestDatabase::migrated().await, config).await
    }

    pub async fn spawn_on(db: TestDatabase) -> Self {
        Self::spawn_configured(db, TestConfig::default()).await
    }

    pub async fn spawn_configured(db: TestDatabase, config: TestConfig) -> Self {
        // Logs only on request: `RUST_LOG=info cargo test -- --nocapture`.
        if std::env::var_os("RUST_LOG").is_some() {
            payorch::telemetry::init(false, false);
        }
        let mut conn = db.connect().await;
        let (merchant, key) = accounts::create_merchant(&mut conn, "Test merchant")
            .await
            .expect("create a merchant");
        let support = accounts::create_support_key(&mut conn, "Test support", SupportRole::Operate)
            .await
            .expect("create a support key");
        let sandbox = Arc::new(
            sandbox::start(config.sandbox.clone())
                .await
                .expect("start the sandbox"),
        );
        let second = match config.two_providers {
            Some(_) => Some(Second {
                sandbox: Arc::new(
                    sandbox::start(config.sandbox.clone())
                        .await
                        .expect("start the second sandbox"),
                ),
                door: Door::start(sandbox.local_addr()).await,
            }),
            None => None,
        };
        let (base_url, handle) =
            start_app(&db, &config, &sandbox, second.as_ref(), &key.secret).await;
        TestApp {
            second,
            base_url,
            client: reqwest::Client::new(),
            merchant_id: merchant.id,
            merchant_key: key.secret,
            support_key: support.secret,
            db,
            sandbox,
            config,
            handle,
        }
    }

    /// Stops the server at once, as a crash would: requests in flight are dropped wherever
    /// they are, and the background workers stop.
    pub async fn crash(&self) {
        self.handle.stop(false).await;
        // A forced stop only tells the worker threads to stop; a test that restarts must not
        // race what is left of the old server. Dead means every handle on its pool dropped,
        // so every connection of it closed.
        let ours = "pg_stat_activity WHERE application_name = 'payorch' \
                    AND datname = current_database()";
        assert!(
            eventually(Duration::from_secs(30), || async {
                self.db.count(ours).await == 0
            })
            .await,
            "the crashed server's requests were dropped"
        );
    }

    /// A new server on the same database and sandbox (after [`crash`](Self::crash)).
    pub async fn restart(&mut self) {
        let (base_url, handle) = start_app(
            &self.db,
            &self.config,
            &self.sandbox,
            self.second.as_ref(),
            &self.merchant_key,
        )
        .await;
        self.base_url = base_url;
        self.handle = handle;
    }

    /// Another server on the same database and sandbox, as a second replica would be: its
    /// base URL, and the handle to stop it.
    pub async fn replica(&self) -> (String, actix_web::dev::ServerHandle) {
        start_app(
            &self.db,
            &self.config,
            &self.sandbox,
            self.second.as_ref(),
            &self.merchant_key,
        )
        .await
    }

    /// Charges in the sandbox ledger for `attempt_id` (declines are not charges).
    pub fn charges_for(&self, attempt_id: &str) -> usize {
        self.sandbox
            .ledger()
            .iter()
            .filter(|entry| entry.attempt_id.as_deref() == Some(attempt_id) && entry.is_charged())
            .count()
    }

    /// Charges in the sandbox ledger for any attempt of `order_id`.
    pub fn charges_for_order(&self, order_id: &str) -> usize {
        self.sandbox
            .ledger()
            .iter()
            .filter(|entry| entry.order_id.as_deref() == Some(order_id) && entry.is_charged())
            .count()
    }

    /// Every charge in the sandbox ledger.
    pub fn charges(&self) -> usize {
        self.sandbox
            .ledger()
            .iter()
            .filter(|e| e.is_charged())
            .count()
    }

    /// A POST with an optional Idempotency-Key and JSON body.
    pub async fn post_keyed(
        &self,
        secret: &str,
        path: &str,
        key: Option<&str>,
        body: Option<String>,
    ) -> reqwest::Response {
        let mut request = self.client.post(self.url(path)).bearer_auth(secret);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        request.send().await.expect("request sent")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Another merchant on the same instance, with its own key.
    pub async fn other_merchant(&self) -> (MerchantId, String) {
        let mut conn = self.db.connect().await;
        let (merchant, key) = accounts::create_merchant(&mut conn, "Other merchant")
            .await
            .expect("create a merchant");
        (merchant.id, key.secret)
    }

    /// An unauthenticated GET (health, metrics, OpenAPI).
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .send()
            .await
            .expect("request sent")
    }

    pub async fn get_as(&self, secret: &str, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .bearer_auth(secret)
            .send()
            .await
            .expect("request sent")
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // Stop accepting at once; the database is dropped right after (with FORCE).
        drop(self.handle.stop(false));
        self.sandbox.stop_now();
    }
}

/// Asserts a problem+json answer with `status` and `code`, and returns its body.
pub async fn assert_problem(
    response: reqwest::Response,
    status: u16,
    code: &str,
) -> serde_json::Value {
    assert_eq!(
        response.status().as_u16(),
        status,
        "status of {}",
        response.url()
    );
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert_eq!(content_type, "application/problem+json");
    let body: serde_json::Value = response.json().await.expect("a JSON problem body");
    assert_eq!(body["code"], code, "problem body: {body}");
    assert_eq!(body["status"], status);
    for member in ["type", "title", "detail"] {
        assert!(body[member].is_string(), "problem lacks `{member}`: {body}");
    }
    body
}

/// Polls `check` every 100 ms until it returns true or `limit` passes.
/// Runs hand-written `sql` and asserts the database refused it by `constraint`'s name.
pub async fn assert_refused_by(conn: &mut PgConn, sql: &str, constraint: &str) {
    match diesel_async::RunQueryDsl::execute(diesel::sql_query(sql), conn).await {
        Err(diesel::result::Error::DatabaseError(_, info)) => assert_eq!(
            info.constraint_name(),
            Some(constraint),
            "{sql}: {}",
            info.message()
        ),
        other => panic!("the database let through {sql}: {other:?}"),
    }
}

pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `payorch sandbox` on a free port as its own process, with `args`; and its URL.
pub async fn sandbox_process(args: &[&str]) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(payorch_bin())
        .args(["sandbox", "--bind", "127.0.0.1:0"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start payorch sandbox");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the sandbox says where it listens")
        .unwrap()
        .unwrap();
    let url = first.rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    (child, url)
}

pub fn payorch_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_payorch"))
}
