//! Webhook ingestion throughput and latency, end to end over HTTP at `POST /v1/webhooks/stripe`.
//!
//! `cargo bench --bench webhooks`
//!
//! Uses `DATABASE_URL` when set (migrations are run and a merchant is created there);
//! otherwise starts a private PostgreSQL cluster with real fsync in a fresh temp folder and
//! removes it at the end. Tunables: `BENCH_CONCURRENCY` (default 16), `BENCH_REQUESTS`
//! (default 3000).
//!
//! Before the timed phases, `BENCH_REQUESTS` pending attempts (each on its own order) are
//! made directly in SQL, as a checkout answered `processing` by the provider leaves them:
//! order `processing`, attempt `pending` with a provider charge id, and its checkout key
//! completed but unresolved. Going through `POST /v1/checkout` would only be slower. The
//! reconciler sleeps, so only webhooks move attempts. Then:
//!
//! 1. new events: one signed `payment_intent.succeeded` per attempt, each moving it
//!    `pending → succeeded` (and its order to `paid`, its key to resolved);
//! 2. duplicates: the same events again, each recognised and changing nothing.
//!
//! The warm-up uses readiness checks (HTTP connections and the database pool) because any
//! event would add a `webhook_events` row, and the run ends by checking that there are
//! exactly `BENCH_REQUESTS` of those.
//!
//! Prints a plain-text report; exits non-zero when any request gets an unexpected answer or
//! the database does not show every attempt finished once.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use payorch::accounts;
use payorch::app::{AppSettings, Application};
use payorch::db::migrations::run_migrations;
use payorch::db::{Database, PoolSettings};
use payorch::ids::{MerchantId, OrderId, PaymentId};
use payorch::payments::reconciler::ReconcilerSettings;
use payorch::providers::signature;

use diesel::sql_types::{Array, BigInt, Text, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use serde_json::Value;
use uuid::Uuid;

const WARMUP_REQUESTS: usize = 200;
const WEBHOOK_SECRET: &str = "whsec_bench_payorch";
const EVENT_TEMPLATE: &str = include_str!("../fixtures/webhooks/payment_intent.succeeded.json");
const AMOUNT: i64 = 1000;
const CURRENCY: &str = "eur";

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
            eprintln!("bench: FAILED: unexpected answers or database state (see above)");
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

async fn run(cleanup: &mut Cleanup) -> Result<bool, BoxError> {
    let concurrency = env_usize("BENCH_CONCURRENCY", 16)?;
    let requests = env_usize("BENCH_REQUESTS", 3000)?;

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
    let mut conn = AsyncPgConnection::establish(&url).await?;
    let (merchant, _key) = accounts::create_merchant(&mut conn, "Bench merchant").await?;
    let attempts_started = Instant::now();
    let attempts = pending_attempts(&mut conn, merchant.id, requests).await?;
    let attempts_time = attempts_started.elapsed();

    let settings = AppSettings {
        bind: "127.0.0.1:0".into(),
        workers: 2,
        pool: PoolSettings {
            max_size: 16,
            ..PoolSettings::default()
        },
        idempotency: Default::default(),
        reaper: Default::default(),
        reconciler: ReconcilerSettings {
            interval: Duration::from_secs(24 * 3600),
            ..ReconcilerSettings::default()
        },
    };
    // Webhooks never call the provider; the in-process sandbox stands by, sending no events
    // of its own.
    let sandbox_config = payorch::sandbox::SandboxConfig::default();
    let sandbox = payorch::sandbox::start(sandbox_config.clone()).await?;
    sandbox.set_webhook_url(None);
    let provider = payorch::providers::stripe::StripeProvider::new(
        payorch::providers::stripe::StripeConfig::new(
            sandbox.base_url(),
            sandbox_config.secret,
            vec![WEBHOOK_SECRET.to_string()],
        ),
    )?;
    let app = Application::build(&settings, &url, Arc::new(provider)).await?;
    let base_url = app.base_url();
    let handle = app.handle();
    let server = tokio::spawn(app.run_until_stopped());
    let setup_time = setup_started.elapsed();

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;
    let bench = Bench {
        client,
        base_url,
        concurrency,
    };
    println!("payorch bench: webhooks");
    println!(
        "  database: {where_db}; app: 2 workers, pool 16; setup {:.1} s \
         ({requests} pending attempts by SQL in {:.1} s)",
        setup_time.as_secs_f64(),
        attempts_time.as_secs_f64()
    );
    println!("  concurrency {concurrency}, events {requests}");

    let answers_ok = measure(&bench, &attempts).await;
    let outcome = verify(&mut conn, merchant.id, &attempts)
        .await
        .map(|db_ok| answers_ok && db_ok);
    if let Ok(ok) = outcome {
        println!();
        println!("result: {}", if ok { "ok" } else { "FAILED" });
    }
    sandbox.stop().await;

    handle.stop(true).await;
    match server.await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => eprintln!("bench: server ended with: {err}"),
        Err(err) => eprintln!("bench: server task: {err}"),
    }
    outcome
}

/// A pending attempt made for the bench, and the event body that finishes it (signed when
/// sent).
struct Attempt {
    id: PaymentId,
    event_id: String,
    event: String,
}

/// Makes `count` orders, each with one pending attempt, in a few set-wide statements.
async fn pending_attempts(
    conn: &mut AsyncPgConnection,
    merchant: MerchantId,
    count: usize,
) -> Result<Vec<Attempt>, BoxError> {
    let orders: Vec<Uuid> = (0..count).map(|_| Uuid::now_v7()).collect();
    let ids: Vec<Uuid> = (0..count).map(|_| Uuid::now_v7()).collect();
    let charges: Vec<String> = ids.iter().map(|id| format!("pi_{}", id.simple())).collect();
    diesel::sql_query(
        "INSERT INTO orders (merchant_id, id, amount, currency) SELECT $1, unnest($2), $3, $4",
    )
    .bind::<SqlUuid, _>(merchant.0)
    .bind::<Array<SqlUuid>, _>(&orders)
    .bind::<BigInt, _>(AMOUNT)
    .bind::<Text, _>(CURRENCY)
    .execute(conn)
    .await?;
    // The trigger moves each order to `processing` and copies its amount and currency; the
    // far `next_check_at` keeps the reconciler away even if it ran. Keys are derived as
    // `payments::attempts::provider_idempotency_key` does.
    diesel::sql_query(
        "INSERT INTO payment_attempts (merchant_id, id, order_id, status, payment_method, \
             provider, provider_idempotency_key, idempotency_key, next_check_at) \
         SELECT $1, a.id, a.order_id, 'created', 'pm_sandbox_processing', 'stripe', \
             'payorch_pay_' || replace(a.id::text, '-', ''), \
             'bench-' || replace(a.id::text, '-', ''), now() + interval '1 day' \
         FROM unnest($2::uuid[], $3::uuid[]) AS a(id, order_id)",
    )
    .bind::<SqlUuid, _>(merchant.0)
    .bind::<Array<SqlUuid>, _>(&ids)
    .bind::<Array<SqlUuid>, _>(&orders)
    .execute(conn)
    .await?;
    diesel::sql_query(
        "UPDATE payment_attempts a SET status = 'pending', provider_payment_id = c.charge \
         FROM unnest($2::uuid[], $3::text[]) AS c(id, charge) \
         WHERE a.merchant_id = $1 AND a.id = c.id",
    )
    .bind::<SqlUuid, _>(merchant.0)
    .bind::<Array<SqlUuid>, _>(&ids)
    .bind::<Array<Text>, _>(&charges)
    .execute(conn)
    .await?;
    // The checkout's own key, answered while the attempt was open: the webhook that finishes
    // the attempt resolves it too, as in production.
    diesel::sql_query(
        "INSERT INTO idempotency_keys (merchant_id, key, operation, fingerprint, state, \
             recovery_point, resource_type, resource_id, response_status, response_body, \
             unresolved, expires_at) \
         SELECT merchant_id, idempotency_key, 'checkout', \
             sha256(convert_to(idempotency_key, 'UTF8')), 'completed', 'finished', \
             'payment_attempt', id, 201, '{}', true, now() + interval '1 day' \
         FROM payment_attempts WHERE merchant_id = $1",
    )
    .bind::<SqlUuid, _>(merchant.0)
    .execute(conn)
    .await?;

    let template: Value = serde_json::from_str(EVENT_TEMPLATE)?;
    Ok(ids
        .iter()
        .zip(&orders)
        .zip(&charges)
        .map(|((id, order), charge)| {
            let id = PaymentId(*id);
            let event_id = format!("evt_bench_{}", id.0.simple());
            let mut event = template.clone();
            event["id"] = event_id.clone().into();
            let object = &mut event["data"]["object"];
            object["id"] = charge.clone().into();
            object["amount"] = AMOUNT.into();
            object["amount_received"] = AMOUNT.into();
            object["currency"] = CURRENCY.into();
            object["metadata"]["attempt_id"] = id.to_string().into();
            object["metadata"]["order_id"] = OrderId(*order).to_string().into();
            object["metadata"]["merchant_id"] = merchant.to_string().into();
            Attempt {
                id,
                event_id,
                event: event.to_string(),
            }
        })
        .collect())
}

struct Bench {
    client: reqwest::Client,
    base_url: String,
    concurrency: usize,
}

/// A webhook receipt as the server answers it.
#[derive(Debug, serde::Deserialize)]
struct Receipt {
    duplicate: bool,
    outcome: Option<String>,
}

/// One answer as seen by the client.
struct Sample {
    latency: Duration,
    /// A 200 receipt, or what came instead.
    answer: Result<Receipt, String>,
}

impl Bench {
    async fn deliver(&self, body: &str) -> Sample {
        // Signed as the provider does, just before sending: the signature has a tolerance.
        let header = signature::header_value(
            &[WEBHOOK_SECRET],
            chrono::Utc::now().timestamp(),
            body.as_bytes(),
        );
        let started = Instant::now();
        let sent = self
            .client
            .post(format!("{}/v1/webhooks/stripe", self.base_url))
            .header("Content-Type", "application/json")
            .header(signature::HEADER, header)
            .body(body.to_string())
            .send()
            .await;
        let answer = match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                match response.text().await {
                    Ok(text) if status == 200 => serde_json::from_str::<Receipt>(&text)
                        .map_err(|err| format!("200 body not a receipt ({err}): {text}")),
                    Ok(text) => Err(format!("status {status}: {text}")),
                    Err(err) => Err(format!("status {status}, body unreadable: {err}")),
                }
            }
            Err(err) => Err(format!("request failed: {err}")),
        };
        Sample {
            latency: started.elapsed(),
            answer,
        }
    }

    async fn ready(&self) -> Result<(), String> {
        let sent = self
            .client
            .get(format!("{}/health/ready", self.base_url))
            .send()
            .await;
        match sent {
            Ok(response) if response.status() == 200 => Ok(()),
            Ok(response) => Err(format!("readiness answered {}", response.status())),
            Err(err) => Err(format!("request failed: {err}")),
        }
    }

    /// Runs `send(i)` for every `i` below `count` from `concurrency` clients; returns the
    /// results in index order.
    async fn concurrently<T, F, Fut>(&self, count: usize, send: F) -> Vec<T>
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let next = AtomicUsize::new(0);
        let clients = (0..self.concurrency).map(|_| async {
            let mut results = Vec::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= count {
                    break;
                }
                results.push((index, send(index).await));
            }
            results
        });
        let mut all: Vec<(usize, T)> = futures_util::future::join_all(clients)
            .await
            .into_iter()
            .flatten()
            .collect();
        all.sort_by_key(|(index, _)| *index);
        all.into_iter().map(|(_, result)| result).collect()
    }

    /// Delivers every event once, concurrently, and times the whole.
    async fn drive(&self, attempts: &[Attempt]) -> Phase {
        let started = Instant::now();
        let samples = self
            .concurrently(attempts.len(), |index| self.deliver(&attempts[index].event))
            .await;
        Phase {
            samples,
            wall: started.elapsed(),
        }
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

    /// Prints the phase's throughput and latency, and returns its answers that are not
    /// 200 receipts satisfying `expected`.
    fn report(&self, title: &str, expected: impl Fn(&Receipt) -> bool) -> Vec<String> {
        let lat = self.latencies();
        println!();
        println!("{title}");
        println!(
            "  {} requests in {:.2} s: {:.0} req/s",
            self.samples.len(),
            self.wall.as_secs_f64(),
            self.rate()
        );
        println!(
            "  latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
            lat.p50, lat.p90, lat.p99, lat.max
        );
        self.samples
            .iter()
            .enumerate()
            .filter_map(|(index, s)| match &s.answer {
                Ok(receipt) if expected(receipt) => None,
                Ok(receipt) => Some(format!("event #{index}: {receipt:?}")),
                Err(err) => Some(format!("event #{index}: {err}")),
            })
            .collect()
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

/// Runs the warm-up and both timed phases; `false` when some answer was unexpected.
async fn measure(bench: &Bench, attempts: &[Attempt]) -> bool {
    let warmup_failed: Vec<String> = bench
        .concurrently(WARMUP_REQUESTS, |_| bench.ready())
        .await
        .into_iter()
        .filter_map(Result::err)
        .collect();
    if !warmup_failed.is_empty() {
        println!("warm-up");
        report_problems("failed readiness checks", &warmup_failed);
        return false;
    }

    // (1) Every event new: each moves its attempt pending → succeeded.
    let fresh = bench.drive(attempts).await;
    let problems = fresh.report(
        "new events (payment_intent.succeeded, pending → succeeded)",
        |r| !r.duplicate && r.outcome.as_deref() == Some("applied"),
    );
    println!(
        "  answered applied, not duplicate: {}/{}",
        fresh.samples.len() - problems.len(),
        fresh.samples.len()
    );
    let mut failures = report_problems("unexpected answers", &problems);

    // (2) The same events again: each a recognised duplicate.
    let again = bench.drive(attempts).await;
    let problems = again.report("duplicates (same events again)", |r| r.duplicate);
    println!(
        "  answered duplicate: {}/{}",
        again.samples.len() - problems.len(),
        again.samples.len()
    );
    failures += report_problems("unexpected answers", &problems);
    failures == 0
}

/// Counts, in the database, what the events should have done exactly once.
async fn verify(
    conn: &mut AsyncPgConnection,
    merchant: MerchantId,
    attempts: &[Attempt],
) -> Result<bool, BoxError> {
    #[derive(diesel::QueryableByName)]
    struct Counts {
        #[diesel(sql_type = BigInt)]
        succeeded: i64,
        #[diesel(sql_type = BigInt)]
        paid: i64,
        #[diesel(sql_type = BigInt)]
        keys_resolved: i64,
        #[diesel(sql_type = BigInt)]
        events: i64,
        #[diesel(sql_type = BigInt)]
        events_applied: i64,
    }
    let ids: Vec<Uuid> = attempts.iter().map(|a| a.id.0).collect();
    let event_ids: Vec<&str> = attempts.iter().map(|a| a.event_id.as_str()).collect();
    let counts: Counts = diesel::sql_query(
        "SELECT \
           (SELECT count(*) FROM payment_attempts \
            WHERE merchant_id = $1 AND id = ANY($2) AND status = 'succeeded') AS succeeded, \
           (SELECT count(*) FROM orders WHERE merchant_id = $1 AND status = 'paid') AS paid, \
           (SELECT count(*) FROM idempotency_keys \
            WHERE merchant_id = $1 AND resource_id = ANY($2) AND NOT unresolved) AS keys_resolved, \
           (SELECT count(*) FROM webhook_events WHERE provider_event_id = ANY($3)) AS events, \
           (SELECT count(*) FROM webhook_events \
            WHERE provider_event_id = ANY($3) AND outcome = 'applied') AS events_applied",
    )
    .bind::<SqlUuid, _>(merchant.0)
    .bind::<Array<SqlUuid>, _>(&ids)
    .bind::<Array<Text>, _>(&event_ids)
    .get_result(conn)
    .await?;
    let want = attempts.len() as i64;
    println!();
    println!("database after the run (want {want} each)");
    println!(
        "  attempts succeeded {}, orders paid {}, checkout keys resolved {}",
        counts.succeeded, counts.paid, counts.keys_resolved
    );
    println!(
        "  webhook_events rows {} ({} applied)",
        counts.events, counts.events_applied
    );
    Ok([
        counts.succeeded,
        counts.paid,
        counts.keys_resolved,
        counts.events,
        counts.events_applied,
    ]
    .iter()
    .all(|&n| n == want))
}
