#![warn(unreachable_pub)]
//! The chaos runs behind docs/RELIABILITY.md: payorch's promise — one intent, at most one charge —
//! checked for the whole system while `serve` is killed with SIGKILL, while replicas race
//! each other for the same request, and while the database restarts; and for holds, at most
//! one capture each, or a void, as the clients were told; and while the primary of a
//! PostgreSQL formation fails over (#32).
//!
//! ```text
//! cargo build --release --bins
//! cargo run --release --bin chaos -- kill        # one serve, killed every few seconds
//! cargo run --release --bin chaos -- kill --strict-providers
//!                                                # the same, against providers as strict as
//!                                                # their contracts, Stripe and Adyen (#39)
//! cargo run --release --bin chaos -- replicas    # three serves, duplicates, a database restart
//! cargo run --release --bin chaos -- failover    # two serves on scripts/formation: the primary
//!                                                # lost twice, its postmaster killed, fenced
//! cargo run --release --bin chaos -- retries --retry off
//! cargo run --release --bin chaos -- retries     # two providers, seeded declines and outages,
//!                                                # serve killed; without and with retrying a
//!                                                # soft decline elsewhere (#43)
//! cargo run --release --bin chaos -- routing     # routing by success rate: one provider's
//!                                                # approvals fall and recover mid-run (#43)
//! cargo run --release --bin chaos -- disputes    # the kill run with chargebacks won, lost and
//!                                                # charged back again, and racing refunds (#44)
//! cargo run --release --bin chaos -- settlement  # checkouts, captures, refunds and disputes,
//!                                                # then the providers' books compared: nothing
//!                                                # found, then every planted difference (#44)
//! ```
//!
//! A run that finds something wrong keeps its folder (logs, database) for a look. The `chaos`
//! binary prints what [`run`] reports and exits 1 when a check failed; payorch's tests/chaos.rs
//! calls [`run`] in-process, with the `payorch` binary Cargo built for its tests.

mod by_success;
mod checks;
mod clients;
mod database;
mod disputes;
mod failover;
mod failover_report;
mod fence;
mod formation;
mod holds;
mod outbox;
mod pace;
mod prober;
mod retries;
mod settlement;
mod strict;
mod world;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use tokio::task::JoinHandle;

use clients::{Intent, Tally, Targets};
use failover::Failover;
use holds::{HoldFigures, HoldFindings};
use outbox::{OutboxFigures, OutboxFindings, Receiver};
use pace::Pace;
use world::{Providers, World};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Scenario {
    /// One `serve`, killed with SIGKILL every few seconds and started again.
    Kill,
    /// Three `serve` replicas on one database, each request sent to two of them at the same
    /// instant, every reconciler running; PostgreSQL restarted once mid-run.
    Replicas,
    /// Two `serve` replicas on a pg_auto_failover formation (`scripts/formation`) whose primary
    /// is lost twice, has its PostgreSQL killed once, and is fenced once, with the intents
    /// paced to last through the schedule (several minutes: a failover takes ~52 s).
    Failover,
    /// One `serve` killed as in `kill`, one merchant routed to both faces of the sandbox,
    /// each approving, declining and failing as its seeded mix says; a soft decline retried
    /// on the other provider or not (`--retry`).
    Retries,
    /// One `serve`, one merchant routed by success rate between both faces, checkouts paced;
    /// the first's approvals fall from 90 % to 30 % a quarter of the way through and recover
    /// half way through.
    Routing,
    /// One `serve` killed as in `kill`, a merchant on each face, the sandbox disputing a
    /// share of the charges and the run's bank winning, losing and charging back again,
    /// while several refunds of one payment race each other and the chargeback.
    Disputes,
    /// One `serve`, a merchant on each face, checkouts with captures, refunds and disputes,
    /// then the settlement reconciliation: nothing found; then one of each difference
    /// planted in the providers' records, each found and nothing else.
    Settlement,
}

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Switch {
    On,
    Off,
}

/// What to run: the `chaos` binary's command line.
#[derive(Debug, Parser)]
#[command(
    name = "chaos",
    about = "Chaos runs: payorch under kills, racing replicas, a database restart and failovers"
)]
pub struct Args {
    #[arg(value_enum)]
    scenario: Scenario,
    /// Logical checkouts, each retried under its own key until it has a final answer.
    #[arg(long, default_value_t = 1000)]
    intents: usize,
    /// Clients sending at the same time.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// `kill`: the mean time between two kills, in ms (each pause is 0.5× to 1.5× of it).
    #[arg(long, default_value_t = 3000)]
    kill_every_ms: u64,
    /// `replicas`: how long PostgreSQL stays down, in ms.
    #[arg(long, default_value_t = 3000)]
    database_down_ms: u64,
    /// `failover`: the formation script (default: the repository's scripts/formation).
    #[arg(long)]
    formation: Option<PathBuf>,
    /// `failover`: the intents' starts are spread over this many seconds (the schedule's
    /// expected length); the last 2 % wait until the schedule is over.
    #[arg(long, default_value_t = 270)]
    load_secs: u64,
    /// `failover`: how long the fenced old primary stays writable after the promotion.
    #[arg(long, default_value_t = 20)]
    fenced_secs: u64,
    /// `failover`: load alone before the first fault, and between faults, in seconds.
    #[arg(long, default_value_t = 10)]
    step_gap_secs: u64,
    /// `kill`: a sandbox as strict as the providers' contracts — Stripe's search lagging an
    /// hour, its nullable fields null at random, a key's first 500 replayed; Adyen with no
    /// lookups — with half the merchants routed to each protocol; the run also counts the
    /// technical cancels and what was left for a human.
    #[arg(long)]
    strict_providers: bool,
    /// `retries`: whether the merchant's route retries a soft decline on its next provider.
    #[arg(long, value_enum, default_value_t = Switch::On)]
    retry: Switch,
    /// `retries`: the most attempts one checkout may make, with retries on.
    #[arg(long, default_value_t = 2)]
    max_attempts: u32,
    /// `retries`, `routing`: the Stripe face's mix (the sandbox's `--stripe-mix`; default:
    /// the run's own, docs/RELIABILITY.md and docs/BENCHMARKS.md).
    #[arg(long)]
    stripe_mix: Option<String>,
    /// `retries`, `routing`: the Adyen face's mix.
    #[arg(long)]
    adyen_mix: Option<String>,
    /// `retries`, `routing`: the seed of the mixes' draws.
    #[arg(long, default_value_t = retries::SEED)]
    mix_seed: u64,
    /// `routing`: the payments of one block of the report.
    #[arg(long, default_value_t = 50)]
    block: usize,
    /// `routing`: checkouts started per second. payorch reads the scores again every second,
    /// so how many payments a move takes depends on the rate as well as on the scores.
    #[arg(long, default_value_t = 10.0)]
    per_second: f64,
    /// `disputes`: how long after its charge the sandbox opens a dispute, in ms (the
    /// sandbox's `--dispute-after-ms`).
    #[arg(long, default_value_t = disputes::DISPUTE_AFTER_MS)]
    dispute_after_ms: u64,
    /// The `payorch` binary (default: the one next to this program).
    #[arg(long)]
    payorch: Option<PathBuf>,
}

/// How the run ended: its length, what the clients left open, how long the reconcilers took
/// to close it and the workers to deliver every event, what the event checks found, and the
/// largest `serve` process.
#[derive(Debug, Clone)]
struct Ending {
    load_secs: f64,
    /// Attempts, refunds, captures and voids open when the clients were done (-1: unknown).
    open_after_load: i64,
    settled: Option<Duration>,
    /// How long the delivery workers then took to deliver every event.
    delivered: Option<Duration>,
    events_found: OutboxFindings,
    events: OutboxFigures,
    holds_found: HoldFindings,
    holds: HoldFigures,
    rss_mib: f64,
    /// A strict run's technical cancels and what it left for a human.
    strictly: Option<Strictly>,
    /// A `retries` run's checks and figures.
    retried: Option<Retried>,
    /// A `routing` run's moves.
    routed: Option<by_success::Moves>,
    /// A `disputes` run's checks and figures.
    disputed: Option<Disputed>,
}

/// What a `disputes` run found.
#[derive(Debug, Clone)]
struct Disputed {
    found: disputes::DisputeFindings,
    figures: disputes::DisputeFigures,
    /// The bank's moves by the knob's word.
    moves: std::collections::BTreeMap<String, usize>,
    raced: disputes::Raced,
    /// How long payorch took to hold every dispute as the provider does, once settled.
    agreed: Option<Duration>,
    /// `5xx` answers the racers got.
    server_errors: usize,
}

/// What a `retries` run found.
#[derive(Debug, Clone)]
struct Retried {
    found: retries::RetryFindings,
    figures: retries::RetryFigures,
    /// payorch names the attempt a retry retried (`retry_of`).
    retry_column: bool,
    late_approvals: Option<std::collections::BTreeMap<String, i64>>,
    /// The mixes the sandbox drew from.
    mixes: [String; 2],
}

/// What the run did to the system.
#[derive(Debug, Default)]
struct Disturbed {
    kills: usize,
    database_restarts: usize,
    /// The `failover` run's schedule, as it went.
    failover: Option<Failover>,
    /// The `routing` run's changes of the first provider's mix, by the database's clock.
    changes: Vec<f64>,
}

/// What a strict run (`--strict-providers`) counts once every attempt is final.
#[derive(Debug, Clone)]
struct Strictly {
    /// Attempts payorch canceled by reference, their outcome unknown at its deadline, by the
    /// status each ended in.
    technical_cancels: std::collections::BTreeMap<String, i64>,
    /// What `GET /v1/support/needs-a-human` lists.
    for_a_human: strict::ForAHuman,
}

/// A finished run: whether every check held, and what the run found, as the `chaos` binary
/// prints it (a table of one row, then the details).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub good: bool,
    pub report: String,
}

/// Runs `args`' scenario end to end; `Err` when the run itself could not be made (no
/// `payorch` binary, a process that would not start).
pub async fn run(args: &Args) -> Result<Run, String> {
    let payorch = match &args.payorch {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("payorch"),
    };
    if !payorch.exists() {
        return Err(format!(
            "no payorch binary at {}: run `cargo build --release --bins` first",
            payorch.display()
        ));
    }
    if args.strict_providers && !matches!(args.scenario, Scenario::Kill) {
        return Err("--strict-providers is a mode of the kill run".into());
    }
    let started = Instant::now();
    let mut world = match args.scenario {
        Scenario::Kill if args.strict_providers => {
            World::start(&payorch, 1, &Providers::Strict).await?
        }
        Scenario::Kill => World::start(&payorch, 1, &Providers::One).await?,
        Scenario::Replicas => World::start(&payorch, 3, &Providers::One).await?,
        Scenario::Retries | Scenario::Routing => {
            let [stripe, adyen] = mixes(args);
            let sandbox = retries::sandbox_args(&stripe, &adyen, args.mix_seed);
            World::start(&payorch, 1, &Providers::Mixed(sandbox)).await?
        }
        Scenario::Disputes => {
            let both = Providers::Both {
                sandbox: disputes::sandbox_args(args.dispute_after_ms),
                serve: Vec::new(),
            };
            World::start(&payorch, 1, &both).await?
        }
        Scenario::Settlement => {
            let both = Providers::Both {
                sandbox: settlement::sandbox_args(),
                serve: settlement::serve_args(),
            };
            World::start(&payorch, 1, &both).await?
        }
        Scenario::Failover => {
            let script = args.formation.clone().unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/formation")
            });
            World::start_on_formation(&payorch, &script, 2, started).await?
        }
    };
    eprintln!("chaos: run folder {}", world.root.display());
    if let Err(why) = route(args, &world).await {
        world.stop(true).await;
        return Err(why);
    }
    let receiver = match Receiver::start().await {
        Ok(receiver) => receiver,
        Err(why) => {
            world.stop(true).await;
            return Err(format!("the receiver: {why}"));
        }
    };
    let subscribed = subscribe_all(&world, &receiver).await;
    let outcome = match subscribed {
        // A failover run is minutes long, and its formation outlives the driver unless it is
        // stopped: on Ctrl-C it is, and kept for a look.
        Ok(()) if matches!(args.scenario, Scenario::Failover) => tokio::select! {
            outcome = exercise(args, &mut world, &receiver, started) => outcome,
            _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
        },
        Ok(()) if matches!(args.scenario, Scenario::Settlement) => {
            settlement::exercise(args.intents, args.clients, &world).await
        }
        Ok(()) => exercise(args, &mut world, &receiver, started).await,
        Err(why) => Err(why),
    };
    receiver.stop().await;
    // The processes and the cluster go in every case; the folder stays for a look unless
    // the run was good.
    let good = matches!(outcome, Ok(Run { good: true, .. }));
    if !good {
        eprintln!(
            "chaos: FAILED; logs and database kept in {}",
            world.root.display()
        );
    }
    world.stop(!good).await;
    outcome
}

/// The faces' mixes of a `retries` or `routing` run: the flags', else the run's own (a
/// `retries` run's with the late approval among its outages where the sandbox knows it).
fn mixes(args: &Args) -> [String; 2] {
    let [stripe, adyen] = match args.scenario {
        Scenario::Routing => [by_success::STRIPE_MIX, by_success::ADYEN_MIX].map(str::to_owned),
        _ => [retries::STRIPE_MIX, retries::ADYEN_MIX].map(retries::with_late_approvals),
    };
    [
        args.stripe_mix.clone().unwrap_or(stripe),
        args.adyen_mix.clone().unwrap_or(adyen),
    ]
}

/// A `retries` or `routing` run's merchant routed to both faces as the run says, then the
/// second a replica may keep its old routing waited out.
async fn route(args: &Args, world: &World) -> Result<(), String> {
    let routing = match args.scenario {
        Scenario::Retries => retries::routing(args.retry == Switch::On, args.max_attempts),
        Scenario::Routing => by_success::routing(),
        _ => return Ok(()),
    };
    world
        .put_routing(&world.merchant_ids[0], &routing)
        .await
        .map_err(|why| format!("payorch refused the run's routing: {why}"))?;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    Ok(())
}

/// Subscribes `receiver` to every merchant's events.
async fn subscribe_all(world: &World, receiver: &Receiver) -> Result<(), String> {
    for merchant in &world.merchants {
        outbox::subscribe(&world.replicas[0].url, &merchant.api_key, receiver).await?;
    }
    Ok(())
}

/// The clients and the disturbance, then the reconcilers, then the checks and the report.
async fn exercise(
    args: &Args,
    world: &mut World,
    receiver: &Receiver,
    origin: Instant,
) -> Result<Run, String> {
    let started = Instant::now();
    let pace = match args.scenario {
        Scenario::Failover => Some(Arc::new(Pace::new(
            args.intents,
            Duration::from_secs(args.load_secs),
            args.intents / 50,
        ))),
        Scenario::Routing => Some(Arc::new(Pace::new(
            args.intents,
            Duration::from_secs_f64(args.intents as f64 / args.per_second.max(0.1)),
            0,
        ))),
        _ => None,
    };
    let targets = Targets {
        urls: world.replicas.iter().map(|r| r.url.clone()).collect(),
        duplicate: matches!(args.scenario, Scenario::Replicas),
        pace: pace.clone(),
        only: matches!(args.scenario, Scenario::Retries | Scenario::Routing)
            .then_some(retries::METHOD),
    };
    let tally = Arc::new(Tally::default());
    let disputing = matches!(args.scenario, Scenario::Disputes).then(|| {
        disputes::start(
            targets.urls.clone(),
            world
                .merchant_ids
                .iter()
                .cloned()
                .zip(world.merchants.iter().map(|m| m.api_key.clone()))
                .collect(),
            world.database_url.clone(),
            world.sandbox_url.clone(),
            args.dispute_after_ms,
        )
    });
    let clients = tokio::spawn(clients::run(
        targets,
        world.merchants.clone(),
        args.intents,
        args.clients,
        tally.clone(),
    ));
    let disturbed = disturb(args, world, &clients, &tally, origin).await;
    if let Some(pace) = &pace {
        pace.release();
    }
    let mut disturbed = match disturbed {
        Ok(disturbed) => disturbed,
        Err(why) => {
            clients.abort();
            if let Some(disputing) = disputing {
                let _ = disputing.finish().await;
            }
            return Err(why);
        }
    };
    let intents: Vec<Intent> = clients.await.map_err(|e| e.to_string())?;
    let load_secs = started.elapsed().as_secs_f64();
    let open_after_load = checks::open_rows(&world.database_url).await.unwrap_or(-1);

    // Every replica up, then the reconcilers finish what the clients left open.
    for n in 0..world.replicas.len() {
        if !world.is_running(n) {
            world.start_replica(n).await?;
        }
    }
    // The racers' refunds are answered now that serve stays up.
    let bank_and_racers = match disputing {
        Some(disputing) => {
            let met = disputing.met.clone();
            let (moves, raced) = disputing.finish().await?;
            let server_errors = met.server_errors.load(Ordering::Relaxed);
            Some((moves, raced, server_errors))
        }
        None => None,
    };
    // A strict run's refunds that no answer or notification ever told stay open, listed for
    // a human: the wait is over once nothing else is open. So are a `disputes` run's, which
    // pays through Adyen too.
    let support = (args.strict_providers || matches!(args.scenario, Scenario::Disputes))
        .then(|| (world.replicas[0].url.as_str(), world.support_key.as_str()));
    let settled = settle(&world.database_url, Duration::from_secs(300), support).await;
    // Then the delivery workers send what is left: a send cut by a kill is due again once
    // its lease is over.
    let delivered = deliver(&world.database_url, Duration::from_secs(300)).await;
    let mut facts = checks::gather(&world.database_url, &world.sandbox_url).await?;
    let for_a_human = match support {
        Some((url, key)) => Some(strict::for_a_human(url, key).await?),
        None => None,
    };
    if let Some(listed) = &for_a_human {
        facts.refunds_for_a_human = listed.stuck_refund_ids.clone();
    }
    let found = checks::judge(&facts, &intents);
    let (holds_found, holds) =
        holds::judge(&facts, &holds::gather(&world.database_url).await?, &intents);
    let (events_found, events) =
        outbox::judge(&outbox::gather(&world.database_url, &receiver.received).await?);
    if let Some(failover) = &mut disturbed.failover {
        failover.check_orders(&world.database_url).await?;
    }
    let strictly = match for_a_human {
        Some(for_a_human) => Some(Strictly {
            technical_cancels: strict::technical_cancels(&world.database_url).await?,
            for_a_human,
        }),
        None => None,
    };
    let retried = match args.scenario {
        Scenario::Retries => {
            let chains = retries::gather(&world.database_url).await?;
            let (found, figures) = retries::judge(&chains);
            Some(Retried {
                found,
                figures,
                retry_column: chains.retry_column,
                late_approvals: chains.late_approvals,
                mixes: mixes(args),
            })
        }
        _ => None,
    };
    let routed = match (args.scenario, disturbed.changes.as_slice()) {
        (Scenario::Routing, [dropped, recovered]) => {
            let firsts = by_success::first_attempts(&world.database_url).await?;
            let before = |at: f64| firsts.iter().filter(|(when, _)| *when < at).count();
            let to_a: Vec<bool> = firsts.iter().map(|(_, a)| *a).collect();
            Some(by_success::moves(
                &to_a,
                before(*dropped),
                before(*recovered),
                args.block,
            ))
        }
        (Scenario::Routing, changes) => {
            return Err(format!(
                "the routing run made {} of its 2 changes: too few intents?",
                changes.len()
            ))
        }
        _ => None,
    };
    let disputed = match bank_and_racers {
        Some((moves, raced, server_errors)) => {
            let agreed = disputes::agree(
                &world.database_url,
                &world.sandbox_url,
                Duration::from_secs(120),
            )
            .await;
            let theirs =
                disputes::sandbox_disputes(&reqwest::Client::new(), &world.sandbox_url).await?;
            let ours = disputes::ours(&world.database_url).await?;
            let (found, figures) = disputes::judge(&facts, &theirs, &ours);
            Some(Disputed {
                found,
                figures,
                moves,
                raced,
                agreed,
                server_errors,
            })
        }
        None => None,
    };
    let dispute_findings = disputed.as_ref().map_or(0, |d| {
        d.found.total() + d.server_errors + d.raced.count("unanswered")
    });
    let retry_findings = retried.as_ref().map_or(0, |r| r.found.total());
    let routed_well = routed.as_ref().is_none_or(by_success::Moves::good);
    let rss = world.peak_rss_mib();
    let mut report = report(
        args,
        &disturbed,
        &tally,
        &intents,
        &found,
        &facts,
        &Ending {
            load_secs,
            open_after_load,
            settled,
            delivered,
            events_found: events_found.clone(),
            events,
            holds_found: holds_found.clone(),
            holds,
            rss_mib: rss,
            strictly,
            retried,
            routed,
            disputed,
        },
    );
    let server_errors = tally.server_errors.load(Ordering::Relaxed);
    let unexpected = tally.unexpected_count.load(Ordering::Relaxed);
    let failover_findings = disturbed.failover.as_ref().map_or(0, Failover::findings);
    if let Some(failover) = &disturbed.failover {
        report.push_str(&failover_report::report(failover));
    }
    Ok(Run {
        good: found.total() == 0
            && events_found.total() == 0
            && holds_found.total() == 0
            && failover_findings == 0
            && retry_findings == 0
            && dispute_findings == 0
            && routed_well
            && server_errors == 0
            && unexpected == 0
            && settled.is_some()
            && delivered.is_some(),
        report,
    })
}

/// The scenario's disturbance, for as long as the clients run.
async fn disturb(
    args: &Args,
    world: &mut World,
    clients: &JoinHandle<Vec<Intent>>,
    tally: &Tally,
    origin: Instant,
) -> Result<Disturbed, String> {
    let mut disturbed = Disturbed::default();
    match args.scenario {
        Scenario::Kill | Scenario::Retries | Scenario::Disputes => loop {
            let mean = args.kill_every_ms.max(100);
            let pause = rand::random_range(mean / 2..=mean * 3 / 2);
            if !pause_while(clients, Duration::from_millis(pause)).await {
                break;
            }
            world.kill_replica(0).await;
            disturbed.kills += 1;
            let down = rand::random_range(100..=800);
            tokio::time::sleep(Duration::from_millis(down)).await;
            world.start_replica(0).await?;
        },
        Scenario::Replicas => {
            // Once a third of the intents is done, so requests are in flight on every side.
            while tally.done.load(Ordering::Relaxed) < args.intents / 3 {
                if !pause_while(clients, Duration::from_millis(50)).await {
                    return Ok(disturbed);
                }
            }
            world
                .restart_database(Duration::from_millis(args.database_down_ms))
                .await?;
            disturbed.database_restarts += 1;
        }
        Scenario::Failover => {
            let schedule = failover::Schedule {
                fenced: Duration::from_secs(args.fenced_secs),
                gap: Duration::from_secs(args.step_gap_secs),
            };
            let failover = failover::run(&schedule, world, tally, origin).await?;
            // The prober's 500s count in the run's table with the clients'.
            tally
                .server_errors
                .fetch_add(failover.server_errors(), Ordering::Relaxed);
            disturbed.failover = Some(failover);
        }
        // Its own load and checks (`settlement::exercise`), undisturbed.
        Scenario::Settlement => {}
        Scenario::Routing => {
            // A quarter of the way through A falls, half way through it is back: the second
            // half is as long as the first, since coming back waits for a probe and for
            // exploration to show A better again.
            for (quarters, mix) in [(1, by_success::DROPPED), (2, by_success::RECOVERED)] {
                while tally.done.load(Ordering::Relaxed) < args.intents * quarters / 4 {
                    if !pause_while(clients, Duration::from_millis(20)).await {
                        return Ok(disturbed);
                    }
                }
                let at = by_success::change_a(
                    &world.sandbox_url,
                    world::PROVIDER_SECRET,
                    mix,
                    &world.database_url,
                )
                .await?;
                disturbed.changes.push(at);
            }
        }
    }
    Ok(disturbed)
}

/// Sleeps `pause`; `false` as soon as the clients are done.
async fn pause_while(clients: &JoinHandle<Vec<Intent>>, pause: Duration) -> bool {
    let until = Instant::now() + pause;
    while Instant::now() < until {
        if clients.is_finished() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    !clients.is_finished()
}

/// Waits until no attempt, refund, capture or void is open — or, given `support` (a
/// replica's URL and a support key), until every one still open is a refund payorch lists
/// for a human; how long that took, or `None` past `limit`.
async fn settle(
    database_url: &str,
    limit: Duration,
    support: Option<(&str, &str)>,
) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        match (checks::open_rows(database_url).await, support) {
            (Ok(0), _) => return Some(started.elapsed()),
            (Ok(open), Some((url, key))) => {
                // Listed refunds are open ones: as many listed as open means nothing else is.
                let listed = strict::for_a_human(url, key).await;
                if listed.is_ok_and(|l| {
                    let refunds = l.count("stuck_refunds");
                    refunds as i64 == open && refunds < strict::LIST_LIMIT
                }) {
                    return Some(started.elapsed());
                }
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// Waits until no delivery is pending; how long that took, or `None` past `limit`.
async fn deliver(database_url: &str, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if outbox::pending_deliveries(database_url).await == Ok(0) {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

fn report(
    args: &Args,
    disturbed: &Disturbed,
    tally: &Tally,
    intents: &[Intent],
    found: &checks::Findings,
    facts: &checks::Facts,
    ending: &Ending,
) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    macro_rules! say {
        ($($arg:tt)*) => {
            let _ = writeln!(out, $($arg)*);
        };
    }
    let Ending {
        load_secs,
        open_after_load,
        settled,
        delivered,
        ref events_found,
        events,
        ref holds_found,
        holds,
        rss_mib,
        ref strictly,
        ref retried,
        ref routed,
        ref disputed,
    } = *ending;
    let n = |counter: &std::sync::atomic::AtomicUsize| counter.load(Ordering::Relaxed);
    let refunds: usize = intents.iter().map(|i| i.refunds.len()).sum();
    let scenario = if args.strict_providers {
        format!("{:?} (strict providers)", args.scenario)
    } else {
        format!("{:?}", args.scenario)
    };
    let mut row: Vec<(&str, String)> = vec![
        ("scenario", scenario),
        ("intents", intents.len().to_string()),
        (
            "abandoned",
            intents.iter().filter(|i| i.abandoned).count().to_string(),
        ),
        ("refunds asked", refunds.to_string()),
        ("clients", args.clients.to_string()),
        ("kills", disturbed.kills.to_string()),
        ("database restarts", disturbed.database_restarts.to_string()),
        ("requests", n(&tally.requests).to_string()),
        ("retries", n(&tally.retries).to_string()),
        ("cut connections", n(&tally.cut).to_string()),
        ("503s", n(&tally.unavailable).to_string()),
        ("500s", n(&tally.server_errors).to_string()),
        ("double charges", found.double_charges.to_string()),
        ("lost intents", found.lost_intents.to_string()),
        ("pending left", found.pending_left.to_string()),
        ("events", events.events.to_string()),
        (
            "events unreceived",
            events_found.events_never_received.to_string(),
        ),
        ("event resends", events.duplicates.to_string()),
        ("manual intents", holds.manual_intents.to_string()),
        ("manual captures", holds.captures.to_string()),
        ("voids", holds.voids.to_string()),
        ("capture resends", holds.resends.to_string()),
        ("hold violations", holds_found.total().to_string()),
    ];
    if let Some(strictly) = strictly {
        let open = |status: &str| matches!(status, "created" | "pending");
        let finished = facts.attempts.iter().filter(|a| !open(&a.status)).count();
        row.push(("double refunds", found.double_refunds.to_string()));
        row.push((
            "attempts final",
            format!("{finished} of {}", facts.attempts.len()),
        ));
        let canceled: i64 = strictly.technical_cancels.values().sum();
        row.push(("technical cancels", canceled.to_string()));
        row.push(("left for a human", strictly.for_a_human.total().to_string()));
    }
    if let Some(retried) = retried {
        let figures = &retried.figures;
        let soft = if args.retry == Switch::On {
            "on"
        } else {
            "off"
        };
        row.push(("soft retries", soft.to_owned()));
        row.push(("approval", retries::approval(figures.paid, intents.len())));
        row.push(("paid by a retry", figures.paid_by_retry.to_string()));
        row.push((
            "retries after an unknown",
            retried.found.retries_after_unknown.to_string(),
        ));
        row.push(("paid twice", retried.found.orders_paid_twice.to_string()));
        row.push(("late approvals undone", found.approvals_undone.to_string()));
    }
    if let Some(moves) = routed {
        let pct = |share: f64| format!("{:.0} %", share * 100.0);
        row.push(("A before", pct(moves.phases[0])));
        row.push(("A after the drop", pct(moves.phases[1])));
        row.push(("A after the recovery", pct(moves.phases[2])));
        row.push(("A left after", by_success::after(moves.left_after)));
        row.push(("A back after", by_success::after(moves.back_after)));
    }
    if let Some(disputed) = disputed {
        let figures = &disputed.figures;
        let ended = |status: &str| -> usize {
            figures
                .ended
                .iter()
                .filter(|(word, _)| word.starts_with(status))
                .map(|(_, n)| n)
                .sum()
        };
        row.push(("disputes", figures.disputes.to_string()));
        row.push(("won", ended("won ").to_string()));
        row.push(("lost", ended("lost ").to_string()));
        row.push((
            "second chargebacks",
            disputed
                .moves
                .get("second_chargeback")
                .copied()
                .unwrap_or(0)
                .to_string(),
        ));
        row.push(("racing refunds", disputed.raced.asked().to_string()));
        row.push((
            "refused at the cap",
            disputed
                .raced
                .count("409 refund_exceeds_payment")
                .to_string(),
        ));
        row.push((
            "returned twice, flagged",
            figures.flagged_returned_twice.to_string(),
        ));
        row.push((
            "money returned twice",
            disputed.found.money_returned_twice.to_string(),
        ));
        row.push((
            "refunds past the cap",
            disputed.found.refunds_past_the_cap.to_string(),
        ));
        row.push((
            "disputes disagreeing",
            disputed.found.disputes_disagreeing.to_string(),
        ));
    }
    row.push(("peak RSS", format!("{rss_mib:.0} MiB")));
    say!(
        "| {} |",
        row.iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    say!("|{}", "---|".repeat(row.len()));
    say!(
        "| {} |",
        row.iter()
            .map(|(_, value)| value.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    say!();
    say!("checks (each must be 0): {found:?}");
    if let Some(strictly) = strictly {
        let human = &strictly.for_a_human;
        say!(
            "strict providers: attempts canceled by reference past the deadline, by how they ended: {:?}; needs a human, by list (at most {} of each): {:?}; of the stuck refunds, {} are of Adyen payments no answer or notification told, counted there and not as lost",
            strictly.technical_cancels,
            strict::LIST_LIMIT,
            human.lists,
            found.refunds_left_for_a_human,
        );
    }
    if let Some(retried) = retried {
        say!(
            "retries (each must be 0): {:?}; mixes: stripe {:?}, adyen {:?}, seed {}; {} checkouts made an order, {} paid ({} through a retry), paid at {:?}; attempts that retried another, by reason: {:?}",
            retried.found,
            retried.mixes[0],
            retried.mixes[1],
            args.mix_seed,
            retried.figures.orders,
            retried.figures.paid,
            retried.figures.paid_by_retry,
            retried.figures.paid_at,
            retried.figures.retries,
        );
        if !retried.retry_column {
            say!("payorch names no attempt's retry_of: no retry can be told from a first attempt, so \"paid by a retry\" and \"retries after an unknown\" read 0 by default");
        }
        say!(
            "late approvals: the sandbox {} them; {} charges undone at the provider for an attempt payorch does not hold as paid; payorch's late_approvals by status: {}",
            if retries::late_approvals_known() { "draws" } else { "does not know" },
            found.approvals_undone,
            retried
                .late_approvals
                .as_ref()
                .map_or("(no such table)".to_owned(), |n| format!("{n:?}")),
        );
    }
    if let Some(moves) = routed {
        say!(
            "routing: A's share per block of {} payments (| a change between blocks, * one inside): {}; the drop came after payment {}, the recovery after {}; A is left once fewer than {:.0} % of the last {} payments go to it, back once more than {:.0} % do",
            moves.block,
            moves.blocks(),
            moves.drop_at,
            moves.recover_at,
            by_success::LEFT_BELOW * 100.0,
            by_success::WINDOW,
            by_success::BACK_ABOVE * 100.0,
        );
    }
    if let Some(disputed) = disputed {
        say!(
            "disputes (each must be 0, and no racing refund unanswered nor answered 5xx): {:?}; the sandbox's disputes by how they ended: {:?}; the bank's moves: {:?}; {} payments raced for, their refunds by answer: {:?}, {} answers 5xx; payorch flagged {} disputes with an overlap; every dispute held as the provider holds it {}",
            disputed.found,
            disputed.figures.ended,
            disputed.moves,
            disputed.raced.payments,
            disputed.raced.outcomes,
            disputed.server_errors,
            disputed.figures.flagged,
            disputed.agreed.map_or("(not within the limit)".into(), |d| format!(
                "{:.1} s after the rest settled",
                d.as_secs_f64()
            )),
        );
        for disagreement in &disputed.figures.disagreements {
            say!("dispute held otherwise: {disagreement}");
        }
    }
    say!("event checks (each must be 0): {events_found:?}");
    say!("hold checks (each must be 0): {holds_found:?}");
    say!(
        "holds: {} manual-capture checkouts; the provider placed {} holds: {} captured ({} of them in part), {} voided, {} still held (abandoned checkouts'); {} capture and cancel calls sent again under their operation's key; {} answers of 409 hold_operation_in_progress",
        holds.manual_intents,
        holds.holds,
        holds.captures,
        holds.partial_captures,
        holds.voids,
        holds.still_held,
        holds.resends,
        n(&tally.hold_busy),
    );
    let mut asked = std::collections::BTreeMap::<String, usize>::new();
    for hold in intents.iter().filter_map(|i| i.hold.as_ref()) {
        let what = match hold.ask {
            clients::HoldAsk::CaptureAll => "capture all",
            clients::HoldAsk::CapturePart(_) => "capture part",
            clients::HoldAsk::Void => "void",
        };
        let outcome = hold.outcome.as_deref().unwrap_or("no answer");
        *asked.entry(format!("{what} {outcome}")).or_default() += 1;
    }
    say!("captures and voids asked, by final answer: {asked:?}");
    say!(
        "of the keys in flight, those of holds (must be 0 too: a hold answers its request): {}",
        facts.hold_keys_in_flight
    );
    say!(
        "events: {} written, {} deliveries received by the subscribed receiver, {} of them resends; the workers delivered the rest in {}",
        events.events,
        events.receipts,
        events.duplicates,
        delivered.map_or("(not within the limit)".into(), |d| format!(
            "{:.1} s",
            d.as_secs_f64()
        ))
    );
    let mut statuses = std::collections::BTreeMap::<String, usize>::new();
    for intent in intents {
        let status = intent.status.as_deref().unwrap_or("no answer");
        let through = intent
            .protocol
            .map_or(String::new(), |p| format!("{} ", p.name()));
        *statuses
            .entry(format!("{through}{} {status}", intent.method))
            .or_default() += 1;
    }
    say!("intents by payment method and final status: {statuses:?}");
    say!("provider ledger: {:?}", checks::ledger_summary(facts));
    say!("attempts finished by: {:?}", facts.finished_by);
    say!(
        "load {load_secs:.0} s; after it {open_after_load} attempts, refunds, captures and voids were open, and the reconcilers closed them in {}",
        settled.map_or("(not within the limit)".into(), |d| format!(
            "{:.1} s",
            d.as_secs_f64()
        ))
    );
    for what in tally
        .unexpected
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .iter()
    {
        say!("unexpected answer: {what}");
    }
    out
}
