//! Checkout throughput and replay latency, end to end over HTTP, and what one checkout, one
//! replay and one new order cost the database.
//!
//! `cargo bench --bench checkout`
//!
//! Every request is `POST /v1/checkout` under a fresh `Idempotency-Key`; the app charges
//! through the in-process sandbox provider at zero latency with webhooks off, so the numbers
//! are payorch's and PostgreSQL's own. Every answer must be `201` with a `succeeded`
//! payment; the replay phase sends keys of the first phase again and wants `201`,
//! `Idempotent-Replayed: true` and the same payment. At the end the sandbox's ledger must
//! hold exactly one charge per successful checkout.
//!
//! The database is found as in the orders bench (`DATABASE_URL`, else a private cluster with
//! real fsync, removed at the end). Tunables: `BENCH_CONCURRENCY` (default 16),
//! `BENCH_REQUESTS` (default 3000), `BENCH_REPLAYS` (default and at most `BENCH_REQUESTS`),
//! `BENCH_SQL_CHECKOUTS` (default 100).
//!
//! SQL per request (a checkout, its replay, a new order), with the private cluster only (it needs a superuser and the server's
//! log file): `BENCH_SQL_CHECKOUTS` checkouts are sent one after another with nothing else
//! running, and the totals are divided by their number (a remainder is reported, as it
//! means something else ran).
//! - Statements: `log_statement = 'all'`, set by `ALTER SYSTEM` and a reload so that the
//!   pool's open connections take it too, logs every top-level statement; the bench
//!   database's lines are counted by kind. (`pg_stat_statements` would need
//!   `shared_preload_libraries`, so a restart; statements run by triggers are not counted
//!   either way.)
//! - Transactions: `xact_commit + xact_rollback` of the bench database in
//!   `pg_stat_database`, read from a connection to another database so the reads do not
//!   count, each time after 11 s of quiet, since an idle backend may hold its counts back
//!   for up to 10 s. Autovacuum is off meanwhile, as its transactions count there too. The
//!   log gives the same number (each `BEGIN`…`COMMIT`, and each statement outside one) as
//!   a check.
//!
//! The reaper, the reconciler and the quota sync run at start and then hourly, so the counts
//! are the requests' own; at their default pace their few queries a second would not move the throughput.
//!
//! Prints a plain-text report; exits non-zero when any request gets an unexpected answer or
//! the ledger disagrees.
// A benchmark reads back counts after the run; `get_result` is refused in `src/` only
// (src/db/mod.rs, `one`).
#![allow(clippy::disallowed_methods)]

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use diesel::sql_types::BigInt;
use diesel::QueryableByName;
use diesel_async::{AsyncConnection, RunQueryDsl};

use common::{drive, env_usize, report_problems, Answer, BoxError, Cleanup, Phase, Stack};
use payorch::db::PgConn;
use payorch::db::{PrivateCluster, DATABASE_NAME};

const WARMUP_REQUESTS: usize = 200;
const CHECKOUT_BODY: &str = r#"{"amount":1000,"currency":"eur","payment_method":"pm_card_visa"}"#;
const CHECKOUT: &str = "/v1/checkout";
const ORDER_BODY: &str = r#"{"amount":1000,"currency":"eur"}"#;
const ORDERS: &str = "/v1/orders";
/// Longer than the 10 s an idle backend may keep its statistics before flushing them.
const STATS_FLUSH_WAIT: Duration = Duration::from_secs(11);
/// The settings of the SQL count, undone after it.
const COUNT_SETTINGS: [(&str, &str); 3] = [
    ("log_statement", "'all'"),
    // Which backend and database each line is from.
    ("log_line_prefix", "'%p %d '"),
    ("autovacuum", "off"),
];

fn main() -> ExitCode {
    common::main(run)
}

struct Config {
    concurrency: usize,
    requests: usize,
    replays: usize,
    sql_checkouts: usize,
}

async fn run(cleanup: &mut Cleanup) -> Result<bool, BoxError> {
    let concurrency = env_usize("BENCH_CONCURRENCY", 16)?;
    let requests = env_usize("BENCH_REQUESTS", 3000)?;
    let config = Config {
        concurrency,
        requests,
        replays: env_usize("BENCH_REPLAYS", requests)?.min(requests),
        sql_checkouts: env_usize("BENCH_SQL_CHECKOUTS", 100)?,
    };
    let mut settings = common::app_settings();
    settings.reaper.interval = Duration::from_secs(3600);
    settings.reconciler.interval = Duration::from_secs(3600);
    settings.quota_sync = Duration::from_secs(3600);
    // The merchant's key stays remembered across the counts' quiet waits.
    settings.auth_cache_ttl = Duration::from_secs(3600);
    let stack = Stack::start(cleanup, &settings, concurrency).await?;
    let outcome = measure(&stack, cleanup.cluster(), &config).await;
    stack.stop().await;
    outcome
}

/// What a checkout answered, when it is a fresh or replayed `201` with a succeeded payment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Paid {
    payment_id: String,
    order_id: String,
}

/// The payment of a `201` with a `succeeded` payment and the `Idempotent-Replayed` header
/// as `replay` says; otherwise what is wrong.
fn paid(answer: &Answer, replay: bool) -> Result<Paid, String> {
    if answer.status != Some(201) {
        return Err(answer.problem());
    }
    if answer.replayed != replay {
        return Err(format!(
            "Idempotent-Replayed {}, expected {replay}",
            answer.replayed
        ));
    }
    let json = answer.json.as_ref();
    let field = |path: &[&str]| {
        path.iter()
            .try_fold(json?, |value, name| value.get(name))?
            .as_str()
    };
    match (
        field(&["payment", "status"]),
        field(&["payment", "id"]),
        field(&["order", "id"]),
    ) {
        (Some("succeeded"), Some(payment_id), Some(order_id)) => Ok(Paid {
            payment_id: payment_id.to_string(),
            order_id: order_id.to_string(),
        }),
        _ => Err(format!("not a succeeded payment: {}", answer.problem())),
    }
}

/// The payments of the fresh checkouts of `phase`, in request order (`None` for a failed
/// one), and the problems.
fn check_fresh(phase: &Phase<Answer>) -> (Vec<Option<Paid>>, Vec<String>) {
    let mut payments = Vec::new();
    let mut problems = Vec::new();
    for (i, answer) in phase.answers.iter().enumerate() {
        match paid(answer, false) {
            Ok(payment) => payments.push(Some(payment)),
            Err(problem) => {
                payments.push(None);
                problems.push(format!("key #{i}: {problem}"));
            }
        }
    }
    (payments, problems)
}

async fn measure(
    stack: &Stack,
    cluster: Option<&PrivateCluster>,
    config: &Config,
) -> Result<bool, BoxError> {
    let client = &stack.client;
    println!("payorch bench: checkout");
    println!(
        "  database: {}; app: 2 workers, pool 16; sandbox provider, no latency; setup {:.1} s",
        stack.where_db,
        stack.setup_time.as_secs_f64()
    );
    println!(
        "  concurrency {}, checkouts {}, replays {}, sequential checkouts for the SQL count {}",
        config.concurrency, config.requests, config.replays, config.sql_checkouts
    );
    // Every payment made, for the ledger check.
    let mut payments: Vec<Paid> = Vec::new();

    // Warm-up: connections, pool, caches, both paths. Answers are checked, timings discarded.
    let warmup_keys: Vec<String> = (0..WARMUP_REQUESTS.min(config.requests))
        .map(|i| client.key("warmup", i))
        .collect();
    let warm_up = || {
        drive(warmup_keys.len(), config.concurrency, |i| {
            client.post(CHECKOUT, &warmup_keys[i], CHECKOUT_BODY)
        })
    };
    let (warmed, warmup_problems) = check_fresh(&warm_up().await);
    if !warmup_problems.is_empty() {
        println!("warm-up");
        report_problems("unexpected answers", &warmup_problems);
        return Ok(false);
    }
    payments.extend(warmed.into_iter().flatten());
    warm_up().await;

    // (1) Checkout throughput: every request a new key.
    let keys: Vec<String> = (0..config.requests)
        .map(|i| client.key("checkout", i))
        .collect();
    let checkout = drive(config.requests, config.concurrency, |i| {
        client.post(CHECKOUT, &keys[i], CHECKOUT_BODY)
    })
    .await;
    checkout.report("checkout (new key each)");
    let (first, problems) = check_fresh(&checkout);
    println!(
        "  201 with a succeeded payment: {}/{}",
        checkout.answers.len() - problems.len(),
        checkout.answers.len()
    );
    let mut failures = report_problems("unexpected answers", &problems);
    payments.extend(first.iter().flatten().cloned());

    // (2) Replay: the same key and body again, spread evenly over the keys used.
    let replayed_index = |r: usize| r * config.requests / config.replays;
    let replay = drive(config.replays, config.concurrency, |r| {
        client.post(CHECKOUT, &keys[replayed_index(r)], CHECKOUT_BODY)
    })
    .await;
    replay.report("replay (same key, same body)");
    let mut replay_problems = Vec::new();
    for (r, answer) in replay.answers.iter().enumerate() {
        let index = replayed_index(r);
        match (paid(answer, true), &first[index]) {
            (Ok(again), Some(original)) if again == *original => {}
            (Ok(again), original) => replay_problems.push(format!(
                "key #{index}: replay gave {again:?}, first answer {original:?}"
            )),
            (Err(problem), _) => replay_problems.push(format!("key #{index}: {problem}")),
        }
    }
    println!(
        "  replayed with header and the same payment: {}/{}",
        replay.answers.len() - replay_problems.len(),
        replay.answers.len()
    );
    failures += report_problems("bad replays", &replay_problems);

    // (3) What one checkout, one replay and one new order cost the database.
    match cluster {
        None => {
            println!();
            println!("SQL per request: skipped, it needs the private cluster (unset DATABASE_URL)");
        }
        Some(cluster) => {
            let n = config.sql_checkouts;
            let keys: Vec<String> = (0..n).map(|i| client.key("sql", i)).collect();
            println!();
            println!("SQL per checkout ({n} sent one at a time, nothing else running)");
            let (phase, counted) = count_sql(cluster, || {
                drive(n, 1, |i| client.post(CHECKOUT, &keys[i], CHECKOUT_BODY))
            })
            .await?;
            let (made, problems) = check_fresh(&phase);
            failures += report_problems("unexpected answers", &problems);
            payments.extend(made.iter().flatten().cloned());
            counted.report(phase.answers.len());

            println!();
            println!("SQL per replay (the same {n} keys again, one at a time)");
            let (phase, counted) = count_sql(cluster, || {
                drive(n, 1, |i| client.post(CHECKOUT, &keys[i], CHECKOUT_BODY))
            })
            .await?;
            let bad = phase
                .answers
                .iter()
                .zip(&made)
                .filter(|(answer, first)| paid(answer, true).ok().as_ref() != first.as_ref())
                .count();
            failures += bad;
            counted.report(phase.answers.len());

            println!();
            println!("SQL per new order (POST /v1/orders, {n} new keys, one at a time)");
            // Every pooled connection prepares the statement first: a prepare is a
            // transaction of its own in `pg_stat_database`, once per connection.
            let warm_keys: Vec<String> = (0..64).map(|i| client.key("warm-order", i)).collect();
            drive(warm_keys.len(), config.concurrency, |i| {
                client.post(ORDERS, &warm_keys[i], ORDER_BODY)
            })
            .await;
            let order_keys: Vec<String> = (0..n).map(|i| client.key("sql-order", i)).collect();
            let (phase, counted) = count_sql(cluster, || {
                drive(n, 1, |i| client.post(ORDERS, &order_keys[i], ORDER_BODY))
            })
            .await?;
            failures += phase.status_problems(201).len();
            counted.report(phase.answers.len());
        }
    }

    // (4) The provider's ledger: one charge per successful checkout, none for a replay.
    let mut charges: HashMap<String, usize> = HashMap::new();
    for entry in stack.sandbox.ledger().iter().filter(|e| e.is_charged()) {
        *charges
            .entry(entry.attempt_id.clone().unwrap_or_default())
            .or_default() += 1;
    }
    let total: usize = charges.values().sum();
    let charged_once = payments
        .iter()
        .filter(|p| charges.get(&p.payment_id) == Some(&1))
        .count();
    let ledger_ok = charged_once == payments.len() && total == payments.len();
    println!();
    println!("sandbox ledger");
    println!(
        "  {total} charges for {} successful checkouts; charged exactly once: {charged_once}: {}",
        payments.len(),
        if ledger_ok { "ok" } else { "MISMATCH" }
    );
    if !ledger_ok {
        failures += 1;
    }

    println!();
    println!("result: {}", if failures == 0 { "ok" } else { "FAILED" });
    Ok(failures == 0)
}

/// What the server did while `work` ran, as the module docs describe.
struct SqlCount {
    /// Each kind of statement with how often it ran, in order of first appearance.
    kinds: Vec<(String, usize)>,
    /// From the log: `BEGIN`…`COMMIT` blocks and statements outside any block.
    blocks: usize,
    single: usize,
    /// From `pg_stat_database`.
    transactions: i64,
}

/// Runs `work` with statement logging on and autovacuum off, and counts what the bench
/// database did meanwhile.
async fn count_sql<W, Fut>(
    cluster: &PrivateCluster,
    work: W,
) -> Result<(Phase<Answer>, SqlCount), BoxError>
where
    W: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Phase<Answer>>,
{
    let mut admin = PgConn::establish(&cluster.database_url("postgres")).await?;
    let log = cluster.root().join("server.log");
    for (name, value) in COUNT_SETTINGS {
        diesel::sql_query(format!("ALTER SYSTEM SET {name} = {value}"))
            .execute(&mut admin)
            .await?;
    }
    reload(&mut admin).await?;
    let counted = async {
        // Also lets every backend see the reload before the count begins.
        tokio::time::sleep(STATS_FLUSH_WAIT).await;
        let before = transactions(&mut admin).await?;
        let log_start = std::fs::metadata(&log)?.len();
        let phase = work().await;
        tokio::time::sleep(STATS_FLUSH_WAIT).await;
        let after = transactions(&mut admin).await?;
        let mut count = count_log(&read_from(&log, log_start)?);
        count.transactions = after - before;
        Ok::<_, BoxError>((phase, count))
    }
    .await;
    for (name, _) in COUNT_SETTINGS {
        diesel::sql_query(format!("ALTER SYSTEM RESET {name}"))
            .execute(&mut admin)
            .await?;
    }
    reload(&mut admin).await?;
    counted
}

async fn reload(admin: &mut PgConn) -> Result<(), BoxError> {
    diesel::sql_query("SELECT pg_reload_conf()")
        .execute(admin)
        .await?;
    Ok(())
}

/// Transactions the bench database has ended so far, as far as the statistics know.
async fn transactions(admin: &mut PgConn) -> Result<i64, BoxError> {
    #[derive(QueryableByName)]
    struct Ended {
        #[diesel(sql_type = BigInt)]
        ended: i64,
    }
    let row: Ended = diesel::sql_query(
        "SELECT (xact_commit + xact_rollback)::bigint AS ended FROM pg_stat_database \
         WHERE datname = $1",
    )
    .bind::<diesel::sql_types::Text, _>(DATABASE_NAME)
    .get_result(admin)
    .await?;
    Ok(row.ended)
}

fn read_from(path: &Path, offset: u64) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Counts the bench database's statements in a log written with `log_line_prefix = '%p %d '`
/// and `log_statement = 'all'`: simple-protocol statements are logged as `statement: SQL`,
/// prepared ones as `execute NAME: SQL`.
fn count_log(log: &str) -> SqlCount {
    let mut kinds: Vec<(String, usize)> = Vec::new();
    let mut in_block: HashSet<&str> = HashSet::new();
    let (mut blocks, mut single) = (0, 0);
    for line in log.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let Some(logged) = rest
            .strip_prefix(DATABASE_NAME)
            .and_then(|rest| rest.strip_prefix(" LOG:  "))
        else {
            continue;
        };
        let sql = match logged.strip_prefix("statement: ") {
            Some(sql) => sql,
            None => match logged
                .strip_prefix("execute ")
                .and_then(|named| named.split_once(": "))
            {
                Some((_, sql)) => sql,
                None => continue,
            },
        };
        match sql.trim().to_ascii_uppercase().as_str() {
            "BEGIN" => {
                in_block.insert(pid);
            }
            "COMMIT" | "ROLLBACK" => {
                in_block.remove(pid);
                blocks += 1;
            }
            _ if !in_block.contains(pid) => single += 1,
            _ => {}
        }
        let kind = kind(sql);
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind, 1)),
        }
    }
    SqlCount {
        kinds,
        blocks,
        single,
        transactions: 0,
    }
}

/// The statement, quotes dropped and cut short: enough to tell the kinds apart.
fn kind(sql: &str) -> String {
    let plain: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    let plain = plain.replace('"', "");
    match plain.char_indices().nth(90) {
        Some((cut, _)) => format!("{}…", &plain[..cut]),
        None => plain,
    }
}

impl SqlCount {
    fn report(&self, requests: usize) {
        let per = |total: usize| per_request(total, requests);
        let statements: usize = self.kinds.iter().map(|(_, n)| n).sum();
        let logged = self.blocks + self.single;
        println!(
            "  per request: {} statements, {} transactions",
            per(statements),
            per_request(self.transactions.max(0) as usize, requests)
        );
        println!("  statements by kind (per request, in order of first appearance):");
        for (kind, n) in &self.kinds {
            println!("    {:>5}  {kind}", per(*n));
        }
        println!(
            "  transactions: pg_stat_database {} in all; the log {} ({} BEGIN…COMMIT, {} single \
             statements): {}",
            self.transactions,
            logged,
            per(self.blocks),
            per(self.single),
            if self.transactions == logged as i64 {
                "agree"
            } else {
                "DISAGREE"
            }
        );
    }
}

/// `total / requests`, flagged when it is not a whole number.
fn per_request(total: usize, requests: usize) -> String {
    if total.is_multiple_of(requests) {
        (total / requests).to_string()
    } else {
        format!("{:.2} (not whole)", total as f64 / requests as f64)
    }
}
