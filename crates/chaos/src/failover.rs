//! The `failover` run's schedule of faults (docs/RELIABILITY.md, "Primary failover (#32)"): on a
//! formation of `scripts/formation`, while the clients run, the primary is
//!
//! - (a) lost with all its processes (`kill-node`), the standby promoted, the old node rejoined;
//! - (a') the same again on the new primary, so the first is promoted back;
//! - (b) its PostgreSQL killed alone (`kill-postgres`): its keeper restarts it, no failover;
//! - (c) fenced (`fence`): it comes back writable without its keeper after the monitor has
//!   started the failover, and stays so for a while after the promotion before it rejoins.
//!
//! Each step waits until the formation is healthy and writes go through payorch again on every
//! replica. A prober writes to each replica every 100 ms (src/prober.rs) and a side task asks
//! the formation for its primary every 200 ms, so that each step can say how long writes
//! stopped as clients saw it, and how long payorch took to reach the new primary once it was
//! promoted. In (c) the fenced node itself is asked whether payorch has a session there, and
//! whether any order payorch answered for since the fence is there instead of on the primary.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clients::Tally;
use crate::fence::{self, Fence};
use crate::formation::{Formation, Node};
use crate::prober::{Outcome, Probe, Prober};
use crate::world::World;

/// How long the formation may take to name a primary, or to be healthy.
const WAIT_SECS: u64 = 180;
/// How long writes may take to come back through every replica after a step.
const WRITES_BACK: Duration = Duration::from_secs(120);
/// How often the side tasks ask who is primary, and whether the new primary takes writes.
const POLL: Duration = Duration::from_millis(200);

/// The schedule's settings.
pub(crate) struct Schedule {
    /// How long the fenced old primary stays writable after the promotion, before it rejoins.
    pub(crate) fenced: Duration,
    /// Load alone before the first step, and between steps.
    pub(crate) gap: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    KillNode,
    KillPostgres,
    Fence,
}

impl Shape {
    pub(crate) fn verb(self) -> &'static str {
        match self {
            Shape::KillNode => "kill-node",
            Shape::KillPostgres => "kill-postgres",
            Shape::Fence => "fence",
        }
    }
}

/// The clients' counters, for what one step saw of them.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counts {
    pub(crate) requests: usize,
    pub(crate) unavailable: usize,
    /// Answers no client should get: those `5xx`, and a `4xx` out of place, say.
    pub(crate) unexpected: usize,
    pub(crate) cut: usize,
}

impl Counts {
    fn of(tally: &Tally) -> Counts {
        let n = |c: &AtomicUsize| c.load(Ordering::Relaxed);
        Counts {
            requests: n(&tally.requests),
            unavailable: n(&tally.unavailable),
            unexpected: n(&tally.unexpected_count),
            cut: n(&tally.cut),
        }
    }

    fn since(self, before: Counts) -> Counts {
        Counts {
            requests: self.requests - before.requests,
            unavailable: self.unavailable - before.unavailable,
            unexpected: self.unexpected - before.unexpected,
            cut: self.cut - before.cut,
        }
    }
}

/// One step as it went; times since the run's start.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) name: &'static str,
    pub(crate) shape: Shape,
    /// The primary it hit.
    pub(crate) node: Node,
    /// When the fault verb started, and when it returned.
    pub(crate) fault: Duration,
    pub(crate) verb_done: Duration,
    /// When the formation first named another primary (the side task's poll), and which.
    pub(crate) promoted: Option<(Node, Duration)>,
    /// The primary at the step's end.
    pub(crate) primary_after: Node,
    /// When that node first took a read-write session after the verb, asked directly.
    pub(crate) writable: Option<Duration>,
    pub(crate) healthy: Duration,
    /// The end of the step's window: the next step's fault, or the schedule's end.
    pub(crate) until: Duration,
    /// Writes went through every replica again within [`WRITES_BACK`].
    pub(crate) writes_back: bool,
    pub(crate) clients: Counts,
    pub(crate) fence: Option<Fence>,
}

/// What the schedule did, and what the checks made of it.
#[derive(Debug, Clone)]
pub(crate) struct Failover {
    pub(crate) steps: Vec<Step>,
    /// Every write of the prober, sorted by when it was sent.
    pub(crate) probes: Vec<Probe>,
    /// Orders the prober was answered `2xx` for that the final primary lacks (`None`: not
    /// checked yet).
    pub(crate) orders_lost: Option<usize>,
    pub(crate) replicas: usize,
}

impl Failover {
    /// Everything that fails the run: steps whose writes never came back, the fence's
    /// findings, orders lost, and prober writes answered anything but `2xx` or `503` (a `500`
    /// above all).
    pub(crate) fn findings(&self) -> usize {
        self.unexpected_answers()
            + self.steps.iter().filter(|s| !s.writes_back).count()
            + self
                .steps
                .iter()
                .filter_map(|s| s.fence.as_ref())
                .map(Fence::findings)
                .sum::<usize>()
            + self.orders_lost.unwrap_or(1)
    }

    /// Prober writes answered with a status other than `2xx` with an order, or `503`.
    pub(crate) fn unexpected_answers(&self) -> usize {
        self.probes
            .iter()
            .filter(|p| matches!(&p.outcome, Outcome::Status { status, .. } if *status != 503))
            .count()
    }

    /// Prober writes answered `5xx` other than `503`.
    pub(crate) fn server_errors(&self) -> usize {
        self.probes
            .iter()
            .filter(|p| {
                matches!(&p.outcome, Outcome::Status { status, .. } if *status >= 500 && *status != 503)
            })
            .count()
    }

    /// Checks that every order the prober was told of is on the primary `database_url`
    /// reaches now (run once the formation is healthy again).
    pub(crate) async fn check_orders(&mut self, database_url: &str) -> Result<(), String> {
        let db = crate::checks::connect(database_url).await?;
        let there = fence::order_ids(&db).await?;
        let told: HashSet<&str> = self.probes.iter().filter_map(Probe::order).collect();
        let lost: Vec<&&str> = told.iter().filter(|id| !there.contains(**id)).collect();
        if !lost.is_empty() {
            eprintln!(
                "chaos: orders told created but not on the primary: {:?}",
                lost.iter().take(20).collect::<Vec<_>>()
            );
        }
        self.orders_lost = Some(lost.len());
        Ok(())
    }
}

/// Runs the schedule on `world`'s formation, the prober writing throughout; `origin` is the
/// run's start. `Err` when a verb of the formation failed: the formation is not fit for the
/// rest then.
pub(crate) async fn run(
    schedule: &Schedule,
    world: &World,
    tally: &Tally,
    origin: Instant,
) -> Result<Failover, String> {
    let formation = world
        .formation()
        .ok_or("the failover run needs a formation")?;
    let urls: Vec<String> = world.replicas.iter().map(|r| r.url.clone()).collect();
    let prober = Prober::start(urls.clone(), world.api_key.clone(), origin);
    let ran = steps(schedule, formation, &prober, urls.len(), tally, origin).await;
    let probes = prober.stop().await;
    let steps = ran?;
    Ok(Failover {
        steps,
        probes,
        orders_lost: None,
        replicas: urls.len(),
    })
}

async fn steps(
    schedule: &Schedule,
    formation: &Formation,
    prober: &Prober,
    replicas: usize,
    tally: &Tally,
    origin: Instant,
) -> Result<Vec<Step>, String> {
    let plan = [
        ("a", Shape::KillNode),
        ("a'", Shape::KillNode),
        ("b", Shape::KillPostgres),
        ("c", Shape::Fence),
    ];
    tokio::time::sleep(schedule.gap).await;
    let mut done: Vec<Step> = Vec::new();
    for (name, shape) in plan {
        let before = Counts::of(tally);
        let mut step = step(name, shape, schedule, formation, prober, replicas, origin).await?;
        tokio::time::sleep(schedule.gap).await;
        step.until = origin.elapsed();
        step.clients = Counts::of(tally).since(before);
        eprintln!(
            "chaos: step {name} ({} {}) done at {:.1} s",
            shape.verb(),
            step.node.name(),
            step.until.as_secs_f64()
        );
        done.push(step);
    }
    Ok(done)
}

/// One fault, and everything until the formation is healthy and writes go through payorch on
/// every replica again.
async fn step(
    name: &'static str,
    shape: Shape,
    schedule: &Schedule,
    formation: &Formation,
    prober: &Prober,
    replicas: usize,
    origin: Instant,
) -> Result<Step, String> {
    let node = formation.wait("wait-healthy", WAIT_SECS).await?;
    let fault = origin.elapsed();
    formation.note(&format!("step {name}: {} {}", shape.verb(), node.name()));
    eprintln!(
        "chaos: step {name}: {} {} at {:.1} s",
        shape.verb(),
        node.name(),
        fault.as_secs_f64()
    );
    // Side tasks: who the formation names primary, asked every 200 ms from the fault on; and,
    // from the verb's return, when each node first takes a read-write session.
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let named = tokio::spawn(watch_primary(formation.clone(), node, origin, seen.clone()));
    let verb = formation.on(shape.verb(), node).await;
    let verb_done = origin.elapsed();
    let writable = tokio::spawn(watch_writable(formation.clone(), origin, seen.clone()));
    let settled = match verb {
        Ok(()) => {
            settle_step(
                shape, schedule, formation, prober, replicas, node, verb_done,
            )
            .await
        }
        Err(why) => Err(why),
    };
    named.abort();
    writable.abort();
    let mut settled = settled.map_err(|why| format!("step {name}: {why}"))?;
    let seen = lock(&seen).clone();
    if let Some(fence) = &mut settled.fence {
        fence.promoted = seen.promoted.map(|(_, at)| at);
    }
    Ok(Step {
        name,
        shape,
        node,
        fault,
        verb_done,
        promoted: seen.promoted,
        primary_after: settled.primary,
        writable: seen.writable[index(settled.primary)],
        healthy: settled.healthy,
        until: settled.healthy,
        writes_back: settled.writes_back,
        clients: Counts::default(),
        fence: settled.fence,
    })
}

/// What the side tasks saw; times since the run's start.
#[derive(Debug, Default, Clone)]
struct Seen {
    /// The first node the formation named primary other than the one the fault hit.
    promoted: Option<(Node, Duration)>,
    /// When node1 and node2 first took a read-write session after the verb.
    writable: [Option<Duration>; 2],
}

fn index(node: Node) -> usize {
    match node {
        Node::One => 0,
        Node::Two => 1,
    }
}

/// How a step ended.
struct Settled {
    /// The primary `wait-healthy` named last.
    primary: Node,
    healthy: Duration,
    writes_back: bool,
    fence: Option<Fence>,
}

/// What follows the fault verb until the formation is healthy and writes are back: the
/// promotion and the rejoin, and in (c) the fenced node watched while it is writable.
async fn settle_step(
    shape: Shape,
    schedule: &Schedule,
    formation: &Formation,
    prober: &Prober,
    replicas: usize,
    node: Node,
    verb_done: Duration,
) -> Result<Settled, String> {
    if shape == Shape::KillPostgres {
        // The monitor may not have noticed yet, and call the formation healthy at once: wait
        // for the writes first (a failover, if the monitor starts one, comes before them).
        let back = writes_back(prober, verb_done, replicas).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let primary = formation.wait("wait-healthy", WAIT_SECS).await?;
        return Ok(Settled {
            primary,
            healthy: formation.elapsed(),
            writes_back: back,
            fence: None,
        });
    }
    let new = formation.wait("wait-primary", WAIT_SECS).await?;
    if new != node.other() {
        return Err(format!(
            "`wait-primary` named {} after {} {}",
            new.name(),
            shape.verb(),
            node.name()
        ));
    }
    let fence = if shape == Shape::Fence {
        Some(fence::watch(formation, prober, node, new, verb_done, schedule.fenced).await)
    } else {
        None
    };
    formation.on("rejoin", node).await?;
    let primary = formation.wait("wait-healthy", WAIT_SECS).await?;
    let healthy = formation.elapsed();
    Ok(Settled {
        primary,
        healthy,
        writes_back: writes_back(prober, verb_done, replicas).await,
        fence,
    })
}

/// Asks `primary` every 200 ms until it names a node other than `old`.
async fn watch_primary(formation: Formation, old: Node, origin: Instant, seen: Arc<Mutex<Seen>>) {
    loop {
        let asked = Instant::now();
        if let Some(primary) = formation.primary().await {
            if primary != old {
                lock(&seen).promoted = Some((primary, origin.elapsed()));
                return;
            }
        }
        tokio::time::sleep(POLL.saturating_sub(asked.elapsed())).await;
    }
}

/// Opens a session on each node every 200 ms until each has been read-write once.
async fn watch_writable(formation: Formation, origin: Instant, seen: Arc<Mutex<Seen>>) {
    loop {
        let asked = Instant::now();
        let mut done = true;
        for node in [Node::One, Node::Two] {
            if lock(&seen).writable[index(node)].is_some() {
                continue;
            }
            done = false;
            if is_writable(&formation, node).await {
                lock(&seen).writable[index(node)] = Some(origin.elapsed());
            }
        }
        if done {
            return;
        }
        tokio::time::sleep(POLL.saturating_sub(asked.elapsed())).await;
    }
}

/// Whether a session opened on `node` now is read-write (as `target_session_attrs` asks).
async fn is_writable(formation: &Formation, node: Node) -> bool {
    let asked = async {
        let db = formation.connect(node).await.ok()?;
        let row = db
            .query_one(
                "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'",
                &[],
            )
            .await
            .ok()?;
        Some(row.get::<_, bool>(0))
    };
    tokio::time::timeout(Duration::from_secs(1), asked).await == Ok(Some(true))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits until the prober has had a `2xx` from every replica for a write sent after `after`;
/// `false` if that took longer than [`WRITES_BACK`].
async fn writes_back(prober: &Prober, after: Duration, replicas: usize) -> bool {
    let deadline = Instant::now() + WRITES_BACK;
    while Instant::now() < deadline {
        let probes = prober.so_far();
        let back = (0..replicas).all(|r| first_write(&probes, Some(r), after).is_some());
        if back {
            return true;
        }
        tokio::time::sleep(POLL).await;
    }
    false
}

/// When the first write sent at or after `after` was answered `2xx` (by `replica`, or by
/// any).
pub(crate) fn first_write(
    probes: &[Probe],
    replica: Option<usize>,
    after: Duration,
) -> Option<Duration> {
    probes
        .iter()
        .filter(|p| p.sent >= after && p.order().is_some())
        .filter(|p| replica.is_none_or(|r| p.replica == r))
        .map(|p| p.answered)
        .min()
}
