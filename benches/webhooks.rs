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
//! event would add a `provider_webhooks` row, and the run ends by checking that there are
//! exactly `BENCH_REQUESTS` of those.
//!
//! Prints a plain-text report; exits non-zero when any request gets an unexpected answer or
//! the database does not show every attempt finished once.
// A benchmark reads back counts after the run; `get_result` is refused in `src/` only
// (src/db/mod.rs, `one`).
#![allow(clippy::disallowed_methods)]

mod common;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use diesel::sql_types::{Array, BigInt, Text, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, RunQueryDsl};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use common::{drive, env_usize, report_problems, Answer, BoxError, Cleanup, Phase, Stack};
use payorch::db::PgConn;
use payorch::ids::{MerchantId, OrderId, PaymentId};

const WARMUP_REQUESTS: usize = 200;
const EVENT_TEMPLATE: &str = include_str!("../fixtures/webhooks/payment_intent.succeeded.json");
const WEBHOOKS: &str = "/v1/webhooks/stripe";
const READY: &str = "/health/ready";
const AMOUNT: i64 = 1000;
const CURRENCY: &str = "eur";

fn main() -> ExitCode {
    common::main_failing_on("unexpected answers or database state", run)
}

async fn run(cleanup: &mut Cleanup) -> Result<bool, BoxError> {
    let concurrency = env_usize("BENCH_CONCURRENCY", 16)?;
    let requests = env_usize("BENCH_REQUESTS", 3000)?;
    let mut settings = common::app_settings();
    // The reconciler looks once at start and then sleeps: only webhooks move attempts.
    settings.reconciler.interval = Duration::from_secs(24 * 3600);
    // Webhooks never call the provider; the in-process sandbox stands by, sending no events
    // of its own.
    let stack = Stack::start(cleanup, &settings, concurrency).await?;
    let outcome = bench(&stack, concurrency, requests).await;
    stack.stop().await;
    outcome
}

async fn bench(stack: &Stack, concurrency: usize, requests: usize) -> Result<bool, BoxError> {
    let mut conn = PgConn::establish(&stack.database_url).await?;
    let attempts_started = Instant::now();
    let attempts = pending_attempts(&mut conn, stack.merchant, requests).await?;
    let attempts_time = attempts_started.elapsed();
    println!("payorch bench: webhooks");
    // Setup is all that comes before the warm-up, the attempts included.
    println!(
        "  database: {}; app: 2 workers, pool 16; setup {:.1} s \
         ({requests} pending attempts by SQL in {:.1} s)",
        stack.where_db,
        (stack.setup_time + attempts_time).as_secs_f64(),
        attempts_time.as_secs_f64()
    );
    println!("  concurrency {concurrency}, events {requests}");

    let answers_ok = measure(stack, concurrency, &attempts).await;
    let outcome = verify(&mut conn, stack.merchant, &attempts)
        .await
        .map(|db_ok| answers_ok && db_ok);
    if let Ok(ok) = outcome {
        println!();
        println!("result: {}", if ok { "ok" } else { "FAILED" });
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
    conn: &mut PgConn,
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

/// A webhook receipt as the server answers it.
#[derive(Debug, Deserialize)]
struct Receipt {
    duplicate: bool,
    outcome: Option<String>,
}

/// The answers of `phase` that are not 200 receipts satisfying `expected`.
fn problems(phase: &Phase<Answer>, expected: impl Fn(&Receipt) -> bool) -> Vec<String> {
    let receipt = |answer: &Answer| match (answer.status, &answer.json) {
        (Some(200), Some(json)) => Receipt::deserialize(json)
            .map_err(|err| format!("200 body not a receipt ({err}): {}", answer.problem())),
        _ => Err(answer.problem()),
    };
    phase
        .answers
        .iter()
        .enumerate()
        .filter_map(|(index, answer)| match receipt(answer) {
            Ok(receipt) if expected(&receipt) => None,
            Ok(receipt) => Some(format!("event #{index}: {receipt:?}")),
            Err(err) => Some(format!("event #{index}: {err}")),
        })
        .collect()
}

/// Runs the warm-up and both timed phases; `false` when some answer was unexpected.
async fn measure(stack: &Stack, concurrency: usize, attempts: &[Attempt]) -> bool {
    let client = &stack.client;
    let warmup_failed = drive(WARMUP_REQUESTS, concurrency, |_| client.get(READY))
        .await
        .status_problems(200);
    if !warmup_failed.is_empty() {
        println!("warm-up");
        report_problems("failed readiness checks", &warmup_failed);
        return false;
    }
    // Each phase delivers every event once.
    let deliver = || {
        drive(attempts.len(), concurrency, |i| {
            client.post_webhook(WEBHOOKS, &attempts[i].event)
        })
    };

    // (1) Every event new: each moves its attempt pending → succeeded.
    let fresh = deliver().await;
    fresh.report("new events (payment_intent.succeeded, pending → succeeded)");
    let problems_fresh = problems(&fresh, |r| {
        !r.duplicate && r.outcome.as_deref() == Some("applied")
    });
    println!(
        "  answered applied, not duplicate: {}/{}",
        fresh.answers.len() - problems_fresh.len(),
        fresh.answers.len()
    );
    let mut failures = report_problems("unexpected answers", &problems_fresh);

    // (2) The same events again: each a recognised duplicate.
    let again = deliver().await;
    again.report("duplicates (same events again)");
    let problems_again = problems(&again, |r| r.duplicate);
    println!(
        "  answered duplicate: {}/{}",
        again.answers.len() - problems_again.len(),
        again.answers.len()
    );
    failures += report_problems("unexpected answers", &problems_again);
    failures == 0
}

/// Counts, in the database, what the events should have done exactly once.
async fn verify(
    conn: &mut PgConn,
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
           (SELECT count(*) FROM provider_webhooks WHERE provider_event_id = ANY($3)) AS events, \
           (SELECT count(*) FROM provider_webhooks \
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
        "  provider_webhooks rows {} ({} applied)",
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
