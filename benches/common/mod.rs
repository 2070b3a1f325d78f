//! What the benchmarks share: the database (given, or a private cluster removed at the end),
//! the app on it with one merchant and the in-process sandbox provider, a client that sends
//! keyed requests (or signed webhook events) from many tasks at once, and the latency report.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use actix_web::dev::ServerHandle;
use diesel_async::AsyncConnection;
use tokio::task::JoinHandle;

use payorch::accounts;
use payorch::app::AppSettings;
use payorch::db::migrations::run_migrations;
use payorch::db::PgConn;
use payorch::db::{Database, PoolSettings, PrivateCluster};
use payorch::idempotency::IdempotencySettings;
use payorch::ids::MerchantId;
use payorch::providers::signature;
use payorch::providers::stripe::StripeConfig;
use payorch::wiring::{self, Webhooks};
use payorch_sandbox::{self as sandbox, SandboxConfig, SandboxHandle};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the app checks webhook signatures with, and the sandbox would sign its events with:
/// a bench that plays the provider signs with it too.
const WEBHOOK_SECRET: &str = "whsec_bench_payorch";

/// Runs `run` on a two-thread runtime and turns its outcome into the exit code: `Ok(false)`
/// means some request got an unexpected answer.
#[allow(
    dead_code,
    reason = "the webhooks bench also fails on the database state"
)]
pub fn main(run: impl AsyncFnOnce(&mut Cleanup) -> Result<bool, BoxError>) -> ExitCode {
    main_failing_on("some requests got unexpected answers", run)
}

/// As `main`, for a run that can find more wrong than answers: `Ok(false)` means what
/// `failed` says.
pub fn main_failing_on(
    failed: &str,
    run: impl AsyncFnOnce(&mut Cleanup) -> Result<bool, BoxError>,
) -> ExitCode {
    if std::env::var_os("RUST_LOG").is_some() {
        payorch::telemetry::init(false, false);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("bench: cannot start the tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    // Dropped after the runtime has finished with it (also when `run` panics): stops the
    // private cluster and removes its folder.
    let mut cleanup = Cleanup::default();
    let outcome = runtime.block_on(run(&mut cleanup));
    drop(runtime);
    drop(cleanup);
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("bench: FAILED: {failed} (see above)");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("bench: error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The private cluster of this run, if any: stopped and its folder removed on drop.
#[derive(Default)]
pub struct Cleanup {
    dir: Option<PathBuf>,
    database: Option<Database>,
}

impl Cleanup {
    /// The private cluster this run started, if it uses one.
    #[allow(dead_code, reason = "only the checkout bench looks inside the cluster")]
    pub fn cluster(&self) -> Option<&PrivateCluster> {
        self.database.as_ref().and_then(Database::cluster)
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        match self.database.take() {
            Some(database) => {
                if let Some(cluster) = database.cluster() {
                    if cluster.started_here() {
                        if let Err(err) = cluster.stop() {
                            eprintln!("bench: could not stop the private cluster: {err}");
                        }
                    }
                    // The cluster may live outside the data dir (long socket path fallback).
                    if let Some(dir) = &self.dir {
                        if !cluster.root().starts_with(dir) {
                            let _ = std::fs::remove_dir_all(cluster.root());
                        }
                    }
                }
            }
            // `Database::open` failed: a server may still have been started there.
            None => {
                if let Some(dir) = &self.dir {
                    stop_by_pid_file(&dir.join("postgres/data/postmaster.pid"));
                }
            }
        }
        if let Some(dir) = self.dir.take() {
            if let Err(err) = std::fs::remove_dir_all(&dir) {
                eprintln!("bench: could not remove {}: {err}", dir.display());
            }
        }
    }
}

/// Best effort: asks a postmaster named in `pid_file` for a fast shutdown and waits briefly.
fn stop_by_pid_file(pid_file: &Path) {
    let Some(pid) = std::fs::read_to_string(pid_file).ok().and_then(|text| {
        text.lines()
            .next()
            .and_then(|line| line.trim().parse::<i32>().ok())
    }) else {
        return;
    };
    // SAFETY: sends SIGINT (fast shutdown) to the postmaster this run started.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn env_usize(name: &str, default: usize) -> Result<usize, BoxError> {
    match std::env::var(name) {
        Ok(raw) => match raw.trim().parse::<usize>() {
            Ok(value) if value > 0 => Ok(value),
            _ => Err(format!("{name} must be a positive integer, got {raw:?}").into()),
        },
        Err(_) => Ok(default),
    }
}

/// The app settings of a benchmark: two workers, a pool of 16, no rate limit in the way.
pub fn app_settings() -> AppSettings {
    AppSettings {
        bind: "127.0.0.1:0".into(),
        workers: 2,
        pool: PoolSettings {
            max_size: 16,
            ..PoolSettings::default()
        },
        idempotency: IdempotencySettings {
            max_new_keys_per_minute: 10_000_000,
            ..IdempotencySettings::default()
        },
        reaper: Default::default(),
        event_reaper: Default::default(),
        webhook_reaper: Default::default(),
        reconciler: Default::default(),
        settlement: Default::default(),
        delivery: Default::default(),
        auth_cache_ttl: std::time::Duration::from_secs(5),
        key_poll: std::time::Duration::from_millis(250),
        quota_sync: std::time::Duration::from_secs(1),
        clients: Default::default(),
        limits: Default::default(),
        drain: std::time::Duration::from_secs(20),
        public_url: None,
        master_keys: Some(payorch::sealing::MasterKeys::generate("bench").0),
        metrics: Default::default(),
    }
}

/// The app under test, the sandbox it charges through and a client with a merchant's key.
pub struct Stack {
    /// The database the app runs on.
    pub where_db: String,
    /// Where the bench can work in that database itself.
    #[allow(dead_code, reason = "only the webhooks bench uses the database itself")]
    pub database_url: String,
    /// The bench merchant.
    #[allow(dead_code, reason = "only the webhooks bench uses the database itself")]
    pub merchant: MerchantId,
    pub setup_time: Duration,
    pub client: Client,
    pub sandbox: SandboxHandle,
    handle: ServerHandle,
    server: JoinHandle<std::io::Result<()>>,
}

impl Stack {
    /// Uses `DATABASE_URL` when set (migrations are run and a merchant is created there);
    /// otherwise starts a private PostgreSQL cluster with real fsync in a fresh temp folder,
    /// which `cleanup` removes at the end.
    pub async fn start(
        cleanup: &mut Cleanup,
        settings: &AppSettings,
        concurrency: usize,
    ) -> Result<Stack, BoxError> {
        let database_url = std::env::var("DATABASE_URL").ok();
        let where_db = if database_url.is_some() {
            "DATABASE_URL".to_string()
        } else {
            let dir = std::env::temp_dir().join(format!(
                "payorch-bench-{}-{}",
                std::process::id(),
                uuid::Uuid::now_v7().simple()
            ));
            std::fs::create_dir_all(&dir)
                .map_err(|err| format!("create {}: {err}", dir.display()))?;
            cleanup.dir = Some(dir);
            "private cluster (fsync on)".to_string()
        };
        let setup_started = Instant::now();
        let data_dir = cleanup.dir.clone().unwrap_or_default();
        let database = Database::open(database_url, data_dir, false).await?;
        let url = database.url().to_string();
        // The owner migrates; the bench's app runs as the runtime role, as `serve` does.
        let owner_url = database.migration_url()?.to_string();
        cleanup.database = Some(database);

        run_migrations(&owner_url).await?;
        let (merchant, secret) = {
            let mut conn = PgConn::establish(&url).await?;
            let (merchant, key) = accounts::create_merchant(&mut conn, "Bench merchant").await?;
            (merchant.id, key.secret)
        };

        // Webhooks stay off (no URL): only the request path is measured.
        let sandbox_config = SandboxConfig {
            webhook_secret: WEBHOOK_SECRET.into(),
            // The checkout bench judges by the ledger: it must keep every charge of the run.
            keep_intents: usize::MAX,
            ..SandboxConfig::default()
        };
        let sandbox = sandbox::start(sandbox_config.clone()).await?;
        let app = wiring::app_on_sandbox(
            settings,
            &url,
            &sandbox,
            |base_url| {
                StripeConfig::new(
                    base_url,
                    sandbox_config.secret,
                    vec![sandbox_config.webhook_secret],
                )
            },
            Webhooks::Off,
        )
        .await?;
        let base_url = app.base_url();
        let handle = app.handle();
        let server = tokio::spawn(app.run_until_stopped());
        let setup_time = setup_started.elapsed();

        let client = Client {
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(concurrency)
                .timeout(Duration::from_secs(30))
                .build()?,
            base_url,
            authorization: format!("Bearer {secret}"),
            run_id: uuid::Uuid::now_v7().simple().to_string(),
        };
        Ok(Stack {
            where_db,
            database_url: url,
            merchant,
            setup_time,
            client,
            sandbox,
            handle,
            server,
        })
    }

    pub async fn stop(self) {
        self.sandbox.stop().await;
        self.handle.stop(true).await;
        match self.server.await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => eprintln!("bench: server ended with: {err}"),
            Err(err) => eprintln!("bench: server task: {err}"),
        }
    }
}

/// Sends keyed requests to the app as the bench merchant.
pub struct Client {
    client: reqwest::Client,
    base_url: String,
    authorization: String,
    run_id: String,
}

/// One answer as the client saw it.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status, or `None` when the request failed before an answer.
    pub status: Option<u16>,
    #[allow(dead_code, reason = "webhook and readiness answers are never replays")]
    pub replayed: bool,
    /// The body when it is JSON.
    pub json: Option<serde_json::Value>,
    /// The body as text, or why there is none: for the report.
    text: String,
}

impl Answer {
    /// What to show of an unexpected answer.
    pub fn problem(&self) -> String {
        match self.status {
            Some(status) => format!("status {status}: {}", self.text),
            None => self.text.clone(),
        }
    }
}

impl Client {
    /// A key no other request of this run uses.
    #[allow(dead_code, reason = "the webhooks bench sends no keyed requests")]
    pub fn key(&self, phase: &str, index: usize) -> String {
        format!("bench-{}-{phase}-{index}", self.run_id)
    }

    /// `POST {path}` with `body` under `key`.
    #[allow(dead_code, reason = "the webhooks bench sends no keyed requests")]
    pub async fn post(&self, path: &str, key: &str, body: &'static str) -> Answer {
        send(
            self.client
                .post(format!("{}{path}", self.base_url))
                .header("Authorization", &self.authorization)
                .header("Idempotency-Key", key)
                .header("Content-Type", "application/json")
                .body(body),
        )
        .await
    }

    /// `POST {path}` with `event` as the provider sends a webhook: the raw body with its
    /// `Stripe-Signature` and no merchant key. Signed just before sending, as the signature
    /// has a tolerance.
    #[allow(dead_code, reason = "only the webhooks bench plays the provider")]
    pub async fn post_webhook(&self, path: &str, event: &str) -> Answer {
        let header = signature::header_value(
            &[WEBHOOK_SECRET],
            chrono::Utc::now().timestamp(),
            event.as_bytes(),
        );
        send(
            self.client
                .post(format!("{}{path}", self.base_url))
                .header("Content-Type", "application/json")
                .header(signature::HEADER, header)
                .body(event.to_string()),
        )
        .await
    }

    /// `GET {path}` without the merchant key.
    #[allow(dead_code, reason = "only the webhooks bench checks readiness")]
    pub async fn get(&self, path: &str) -> Answer {
        send(self.client.get(format!("{}{path}", self.base_url))).await
    }
}

/// Sends `request` and reads its answer.
async fn send(request: reqwest::RequestBuilder) -> Answer {
    let response = match request.send().await {
        Ok(response) => response,
        Err(err) => {
            return Answer {
                status: None,
                replayed: false,
                json: None,
                text: format!("request failed: {err}"),
            }
        }
    };
    let status = response.status().as_u16();
    let replayed = response
        .headers()
        .get("Idempotent-Replayed")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let (json, text) = match response.text().await {
        Ok(text) => (serde_json::from_str(&text).ok(), text),
        Err(err) => (None, format!("body unreadable: {err}")),
    };
    Answer {
        status: Some(status),
        replayed,
        json,
        text,
    }
}

/// Sends `count` requests, `send(0)` to `send(count - 1)`, from `concurrency` tasks that
/// each take the next number as soon as their previous request is answered.
pub async fn drive<S, F, Fut>(count: usize, concurrency: usize, send: F) -> Phase<S>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = S>,
{
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    let clients = (0..concurrency).map(|_| async {
        let mut timed = Vec::new();
        loop {
            let slot = next.fetch_add(1, Ordering::Relaxed);
            if slot >= count {
                break;
            }
            let sent = Instant::now();
            let answer = send(slot).await;
            timed.push((slot, sent.elapsed(), answer));
        }
        timed
    });
    let per_client = futures_util::future::join_all(clients).await;
    let wall = started.elapsed();
    let mut timed: Vec<(usize, Duration, S)> = per_client.into_iter().flatten().collect();
    timed.sort_by_key(|(slot, _, _)| *slot);
    let mut latencies: Vec<Duration> = timed.iter().map(|(_, latency, _)| *latency).collect();
    latencies.sort();
    Phase {
        answers: timed.into_iter().map(|(_, _, answer)| answer).collect(),
        latencies,
        wall,
    }
}

/// The answers of one phase, in request order, and how long they took.
pub struct Phase<S> {
    pub answers: Vec<S>,
    /// Sorted.
    latencies: Vec<Duration>,
    wall: Duration,
}

impl Phase<Answer> {
    /// The answers whose status is not `want`, as problems.
    #[allow(dead_code, reason = "the checkout bench checks more than the status")]
    pub fn status_problems(&self, want: u16) -> Vec<String> {
        self.answers
            .iter()
            .filter(|a| a.status != Some(want))
            .map(Answer::problem)
            .collect()
    }
}

impl<S> Phase<S> {
    /// Prints requests, wall time, rate and latency percentiles under `title`.
    pub fn report(&self, title: &str) {
        println!();
        println!("{title}");
        println!(
            "  {} requests in {:.2} s: {:.0} req/s",
            self.answers.len(),
            self.wall.as_secs_f64(),
            self.answers.len() as f64 / self.wall.as_secs_f64()
        );
        println!(
            "  latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
            self.percentile(50.0),
            self.percentile(90.0),
            self.percentile(99.0),
            self.latencies.last().copied().map(ms).unwrap_or(0.0)
        );
    }

    /// Nearest rank, in milliseconds.
    fn percentile(&self, p: f64) -> f64 {
        let all = &self.latencies;
        if all.is_empty() {
            return 0.0;
        }
        let rank = ((p / 100.0) * all.len() as f64).ceil() as usize;
        ms(all[rank.clamp(1, all.len()) - 1])
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Prints up to a few problems of one kind and returns how many there were.
pub fn report_problems(what: &str, problems: &[String]) -> usize {
    if !problems.is_empty() {
        println!("  {what}: {}", problems.len());
        for problem in problems.iter().take(5) {
            println!("    e.g. {problem}");
        }
    }
    problems.len()
}
