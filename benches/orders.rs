//! Create-order throughput and replay latency, end to end over HTTP.
//!
//! `cargo bench --bench orders`
//!
//! Uses `DATABASE_URL` when set (migrations are run and a merchant is created there);
//! otherwise starts a private PostgreSQL cluster with real fsync in a fresh temp folder and
//! removes it at the end. Tunables: `BENCH_CONCURRENCY` (default 16), `BENCH_REQUESTS`
//! (default 5000), `BENCH_REPLAYS` (default 2000, at most `BENCH_REQUESTS`).
//!
//! Prints a plain-text report; exits non-zero when any request gets an unexpected answer.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use payorch::accounts;
use payorch::app::{AppSettings, Application};
use payorch::db::migrations::run_migrations;
use payorch::db::{Database, PoolSettings};
use payorch::idempotency::IdempotencySettings;

use diesel_async::{AsyncConnection, AsyncPgConnection};

const WARMUP_REQUESTS: usize = 200;
const ORDER_BODY: &str = r#"{"amount":1000,"currency":"eur"}"#;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    if std::env::var_os("RUST_LOG").is_some() {
        payorch::telemetry::init(false);
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
            eprintln!("bench: FAILED: some requests got unexpected answers (see above)");
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
struct Cleanup {
    dir: Option<PathBuf>,
    database: Option<Database>,
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

fn env_usize(name: &str, default: usize) -> Result<usize, BoxError> {
    match std::env::var(name) {
        Ok(raw) => match raw.trim().parse::<usize>() {
            Ok(value) if value > 0 => Ok(value),
            _ => Err(format!("{name} must be a positive integer, got {raw:?}").into()),
        },
        Err(_) => Ok(default),
    }
}

struct Config {
    concurrency: usize,
    requests: usize,
    replays: usize,
}

async fn run(cleanup: &mut Cleanup) -> Result<bool, BoxError> {
    let concurrency = env_usize("BENCH_CONCURRENCY", 16)?;
    let requests = env_usize("BENCH_REQUESTS", 5000)?;
    let replays = env_usize("BENCH_REPLAYS", 2000)?.min(requests);
    let config = Config {
        concurrency,
        requests,
        replays,
    };

    let database_url = std::env::var("DATABASE_URL").ok();
    let where_db = if database_url.is_some() {
        "DATABASE_URL".to_string()
    } else {
        let dir = std::env::temp_dir().join(format!(
            "payorch-bench-{}-{}",
            std::process::id(),
            uuid::Uuid::now_v7().simple()
        ));
        std::fs::create_dir_all(&dir).map_err(|err| format!("create {}: {err}", dir.display()))?;
        cleanup.dir = Some(dir);
        "private cluster (fsync on)".to_string()
    };
    let setup_started = Instant::now();
    let data_dir = cleanup.dir.clone().unwrap_or_default();
    let database = Database::open(database_url, data_dir, false).await?;
    let url = database.url().to_string();
    cleanup.database = Some(database);

    run_migrations(&url).await?;
    let secret = {
        let mut conn = AsyncPgConnection::establish(&url).await?;
        let (_merchant, key) = accounts::create_merchant(&mut conn, "Bench merchant").await?;
        key.secret
    };

    let settings = AppSettings {
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
        reconciler: Default::default(),
    };
    // Order creation never calls the provider; the in-process sandbox stands by.
    let sandbox = payorch::sandbox::start(payorch::sandbox::SandboxConfig::default()).await?;
    let provider = payorch::providers::stripe::StripeProvider::new(
        payorch::providers::stripe::StripeConfig::new(
            sandbox.base_url(),
            payorch::sandbox::SandboxConfig::default().secret,
            vec![payorch::sandbox::SandboxConfig::default().webhook_secret],
        ),
    )?;
    let app = Application::build(&settings, &url, Arc::new(provider)).await?;
    let base_url = app.base_url();
    let handle = app.handle();
    let server = tokio::spawn(app.run_until_stopped());
    let setup_time = setup_started.elapsed();

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(config.concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;
    let bench = Bench {
        client,
        orders_url: format!("{base_url}/v1/orders"),
        authorization: format!("Bearer {secret}"),
        run_id: uuid::Uuid::now_v7().simple().to_string(),
    };

    let outcome = measure(&bench, &config, &where_db, setup_time).await;
    sandbox.stop().await;

    handle.stop(true).await;
    match server.await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => eprintln!("bench: server ended with: {err}"),
        Err(err) => eprintln!("bench: server task: {err}"),
    }
    outcome
}

struct Bench {
    client: reqwest::Client,
    orders_url: String,
    authorization: String,
    run_id: String,
}

/// One answer as seen by the client.
#[derive(Debug, Clone)]
struct Sample {
    index: usize,
    latency: Duration,
    /// The HTTP status, or `None` when the request failed before an answer.
    status: Option<u16>,
    replayed: bool,
    order_id: Option<String>,
    error: Option<String>,
}

impl Bench {
    fn key(&self, phase: &str, index: usize) -> String {
        format!("bench-{}-{phase}-{index}", self.run_id)
    }

    async fn post_order(&self, key: String, index: usize) -> Sample {
        let started = Instant::now();
        let sent = self
            .client
            .post(&self.orders_url)
            .header("Authorization", &self.authorization)
            .header("Idempotency-Key", key)
            .header("Content-Type", "application/json")
            .body(ORDER_BODY)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(err) => {
                return Sample {
                    index,
                    latency: started.elapsed(),
                    status: None,
                    replayed: false,
                    order_id: None,
                    error: Some(format!("request failed: {err}")),
                }
            }
        };
        let status = response.status().as_u16();
        let replayed = response
            .headers()
            .get("Idempotent-Replayed")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let body = response.text().await;
        let latency = started.elapsed();
        let (order_id, error) = match body {
            Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(json) if status == 201 => match json["id"].as_str() {
                    Some(id) => (Some(id.to_string()), None),
                    None => (None, Some(format!("201 body without an id: {text}"))),
                },
                _ => (None, Some(format!("status {status}: {text}"))),
            },
            Err(err) => (
                None,
                Some(format!("status {status}, body unreadable: {err}")),
            ),
        };
        Sample {
            index,
            latency,
            status: Some(status),
            replayed,
            order_id,
            error,
        }
    }

    /// Sends `keys.len()` requests from `concurrency` clients; returns the samples in key
    /// order and the wall time.
    async fn drive(&self, keys: Arc<Vec<(usize, String)>>, concurrency: usize) -> Phase {
        let next = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let clients = (0..concurrency).map(|_| {
            let keys = keys.clone();
            let next = next.clone();
            async move {
                let mut samples = Vec::new();
                loop {
                    let slot = next.fetch_add(1, Ordering::Relaxed);
                    let Some((index, key)) = keys.get(slot) else {
                        break;
                    };
                    samples.push(self.post_order(key.clone(), *index).await);
                }
                samples
            }
        });
        let per_client = futures_util::future::join_all(clients).await;
        let wall = started.elapsed();
        let mut samples: Vec<Sample> = per_client.into_iter().flatten().collect();
        samples.sort_by_key(|s| s.index);
        Phase { samples, wall }
    }
}

struct Phase {
    samples: Vec<Sample>,
    wall: Duration,
}

impl Phase {
    fn rate(&self) -> f64 {
        self.samples.len() as f64 / self.wall.as_secs_f64()
    }

    fn latencies(&self) -> Latencies {
        let mut all: Vec<Duration> = self.samples.iter().map(|s| s.latency).collect();
        all.sort();
        let at = |p: f64| -> f64 {
            if all.is_empty() {
                return 0.0;
            }
            // Nearest rank.
            let rank = ((p / 100.0) * all.len() as f64).ceil() as usize;
            ms(all[rank.clamp(1, all.len()) - 1])
        };
        Latencies {
            p50: at(50.0),
            p90: at(90.0),
            p99: at(99.0),
            max: all.last().copied().map(ms).unwrap_or(0.0),
        }
    }
}

struct Latencies {
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Prints up to a few problems of one kind and returns how many there were.
fn report_problems(what: &str, problems: &[String]) -> usize {
    if !problems.is_empty() {
        println!("  {what}: {}", problems.len());
        for problem in problems.iter().take(5) {
            println!("    e.g. {problem}");
        }
    }
    problems.len()
}

async fn measure(
    bench: &Bench,
    config: &Config,
    where_db: &str,
    setup_time: Duration,
) -> Result<bool, BoxError> {
    println!("payorch bench: orders");
    println!(
        "  database: {where_db}; app: 2 workers, pool 16; setup {:.1} s",
        setup_time.as_secs_f64()
    );
    println!(
        "  concurrency {}, create requests {}, replays {}",
        config.concurrency, config.requests, config.replays
    );

    // Warm-up: connections, pool, caches. Answers are checked, timings discarded.
    let warmup_keys: Vec<(usize, String)> = (0..WARMUP_REQUESTS.min(config.requests))
        .map(|i| (i, bench.key("warmup", i)))
        .collect();
    let warmup = bench
        .drive(Arc::new(warmup_keys.clone()), config.concurrency)
        .await;
    let warmup_failed: Vec<String> = warmup
        .samples
        .iter()
        .filter(|s| s.status != Some(201))
        .map(|s| s.error.clone().unwrap_or_default())
        .collect();
    if !warmup_failed.is_empty() {
        println!("warm-up");
        report_problems("non-201 answers", &warmup_failed);
        return Ok(false);
    }
    bench.drive(Arc::new(warmup_keys), config.concurrency).await;

    // (1) Create-order throughput: every request a new key.
    let create_keys: Vec<(usize, String)> = (0..config.requests)
        .map(|i| (i, bench.key("create", i)))
        .collect();
    let create_keys = Arc::new(create_keys);
    let create = bench.drive(create_keys.clone(), config.concurrency).await;
    let lat = create.latencies();
    println!();
    println!("create order (new key each)");
    println!(
        "  {} requests in {:.2} s: {:.0} req/s",
        create.samples.len(),
        create.wall.as_secs_f64(),
        create.rate()
    );
    println!(
        "  latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        lat.p50, lat.p90, lat.p99, lat.max
    );
    let non_201: Vec<String> = create
        .samples
        .iter()
        .filter(|s| s.status != Some(201))
        .map(|s| s.error.clone().unwrap_or_default())
        .collect();
    println!("  non-201 answers: {}", non_201.len());
    let mut failures = report_problems("unexpected answers", &non_201);
    let create_problems: Vec<String> = create
        .samples
        .iter()
        .filter(|s| s.status == Some(201))
        .filter_map(|s| {
            if s.replayed {
                Some(format!("key #{} was answered as a replay", s.index))
            } else {
                s.error.clone()
            }
        })
        .collect();
    failures += report_problems("201 answers that were not fresh orders", &create_problems);

    // (2) Replay latency: the same key and body again, spread evenly over the keys used.
    let replay_keys: Vec<(usize, String)> = (0..config.replays)
        .map(|i| i * config.requests / config.replays)
        .map(|i| (i, create_keys[i].1.clone()))
        .collect();
    let replay = bench.drive(Arc::new(replay_keys), config.concurrency).await;
    let lat = replay.latencies();
    println!();
    println!("replay (same key, same body)");
    println!(
        "  {} requests in {:.2} s: {:.0} req/s",
        replay.samples.len(),
        replay.wall.as_secs_f64(),
        replay.rate()
    );
    println!(
        "  latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        lat.p50, lat.p90, lat.p99, lat.max
    );
    let mut replay_problems = Vec::new();
    for sample in &replay.samples {
        let original = create.samples[sample.index].order_id.as_deref();
        if sample.status != Some(201) {
            replay_problems.push(sample.error.clone().unwrap_or_default());
        } else if !sample.replayed {
            replay_problems.push(format!(
                "key #{} replay lacks Idempotent-Replayed: true",
                sample.index
            ));
        } else if sample.order_id.as_deref() != original || original.is_none() {
            replay_problems.push(format!(
                "key #{}: replay gave order {:?}, first answer {:?}",
                sample.index, sample.order_id, original
            ));
        }
    }
    let replayed_ok = replay.samples.len() - replay_problems.len();
    println!(
        "  replayed with header and same order id: {replayed_ok}/{}",
        replay.samples.len()
    );
    failures += report_problems("bad replays", &replay_problems);

    println!();
    println!("result: {}", if failures == 0 { "ok" } else { "FAILED" });
    Ok(failures == 0)
}
