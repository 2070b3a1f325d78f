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

mod common;

use std::process::ExitCode;

use common::{drive, env_usize, report_problems, Answer, BoxError, Cleanup, Stack};

const WARMUP_REQUESTS: usize = 200;
const ORDER_BODY: &str = r#"{"amount":1000,"currency":"eur"}"#;
const ORDERS: &str = "/v1/orders";

fn main() -> ExitCode {
    common::main(run)
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
    // Order creation never calls the provider; the in-process sandbox stands by.
    let stack = Stack::start(cleanup, &common::app_settings(), concurrency).await?;
    let outcome = measure(&stack, &config).await;
    stack.stop().await;
    outcome
}

/// The order id of a `201`.
fn order_id(answer: &Answer) -> Option<&str> {
    answer.json.as_ref()?["id"].as_str()
}

async fn measure(stack: &Stack, config: &Config) -> Result<bool, BoxError> {
    let client = &stack.client;
    println!("payorch bench: orders");
    println!(
        "  database: {}; app: 2 workers, pool 16; setup {:.1} s",
        stack.where_db,
        stack.setup_time.as_secs_f64()
    );
    println!(
        "  concurrency {}, create requests {}, replays {}",
        config.concurrency, config.requests, config.replays
    );

    // Warm-up: connections, pool, caches. Answers are checked, timings discarded.
    let warmup_keys: Vec<String> = (0..WARMUP_REQUESTS.min(config.requests))
        .map(|i| client.key("warmup", i))
        .collect();
    let warm_up = || {
        drive(warmup_keys.len(), config.concurrency, |i| {
            client.post(ORDERS, &warmup_keys[i], ORDER_BODY)
        })
    };
    let warmup_failed = warm_up().await.status_problems(201);
    if !warmup_failed.is_empty() {
        println!("warm-up");
        report_problems("non-201 answers", &warmup_failed);
        return Ok(false);
    }
    warm_up().await;

    // (1) Create-order throughput: every request a new key.
    let create_keys: Vec<String> = (0..config.requests)
        .map(|i| client.key("create", i))
        .collect();
    let create = drive(config.requests, config.concurrency, |i| {
        client.post(ORDERS, &create_keys[i], ORDER_BODY)
    })
    .await;
    create.report("create order (new key each)");
    let non_201 = create.status_problems(201);
    println!("  non-201 answers: {}", non_201.len());
    let mut failures = report_problems("unexpected answers", &non_201);
    let create_problems: Vec<String> = create
        .answers
        .iter()
        .enumerate()
        .filter(|(_, a)| a.status == Some(201))
        .filter_map(|(i, a)| {
            if a.replayed {
                Some(format!("key #{i} was answered as a replay"))
            } else if order_id(a).is_none() {
                Some(format!("201 body without an id: {}", a.problem()))
            } else {
                None
            }
        })
        .collect();
    failures += report_problems("201 answers that were not fresh orders", &create_problems);

    // (2) Replay latency: the same key and body again, spread evenly over the keys used.
    let replayed_index = |r: usize| r * config.requests / config.replays;
    let replay = drive(config.replays, config.concurrency, |r| {
        client.post(ORDERS, &create_keys[replayed_index(r)], ORDER_BODY)
    })
    .await;
    replay.report("replay (same key, same body)");
    let mut replay_problems = Vec::new();
    for (r, answer) in replay.answers.iter().enumerate() {
        let index = replayed_index(r);
        let original = order_id(&create.answers[index]);
        if answer.status != Some(201) {
            replay_problems.push(answer.problem());
        } else if !answer.replayed {
            replay_problems.push(format!(
                "key #{index} replay lacks Idempotent-Replayed: true"
            ));
        } else if order_id(answer) != original || original.is_none() {
            replay_problems.push(format!(
                "key #{index}: replay gave order {:?}, first answer {original:?}",
                order_id(answer)
            ));
        }
    }
    let replayed_ok = replay.answers.len() - replay_problems.len();
    println!(
        "  replayed with header and same order id: {replayed_ok}/{}",
        replay.answers.len()
    );
    failures += report_problems("bad replays", &replay_problems);

    println!();
    println!("result: {}", if failures == 0 { "ok" } else { "FAILED" });
    Ok(failures == 0)
}
