//! The connection pool: payorch's own connections (src/db/conn.rs) in a deadpool, each set
//! up with our `application_name` and `statement_timeout` so a stuck query cannot hold a
//! request for ever, and, directly on PostgreSQL, with generic plans for its prepared
//! statements (behind a pooler in transaction mode, `Pooler::Transaction`, the timeout is set
//! by each transaction instead: docs/operations/pooler.md). It keeps what requests lately
//! waited for a connection, so that admission control can tell how long a newcomer would wait
//! (src/http/admission.rs), and counts every wait for the metrics (`db::pool_metrics`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool::managed::{Hook, HookError};
pub use deadpool::Status;
use diesel::ConnectionError;
pub use diesel_async::pooled_connection::deadpool::PoolError;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::SimpleAsyncConnection;
use futures_util::FutureExt;
use prometheus::{Histogram, HistogramOpts, IntCounter};

use super::conn::{PgConn, Statements};
use super::primary::{Hosts, PrimaryWatch, POOL_APPLICATION_NAME};
use super::url::DatabaseUrl;
use crate::lasting::Lasting;

pub type DbConn = Object<PgConn>;

/// The pool of database connections; cheap to clone (all clones share one pool).
#[derive(Clone)]
pub struct DbPool {
    pool: Pool<PgConn>,
    pace: Arc<Pace>,
    acquire_timeout: Duration,
    waits: Waits,
}

/// Every wait for a connection, counted where it happens. The pool's gauges show the queue
/// only at the instant of a scrape, so waits that come and go between two scrapes would show
/// nowhere; these count each one (`payorch_db_pool_acquire_wait_seconds`,
/// `payorch_db_pool_acquire_timeouts_total`; docs/operations/monitoring.md, "Alerts").
#[derive(Clone)]
pub struct Waits {
    /// How long each request waited, whether or not a connection came.
    pub waited: Histogram,
    /// Requests that waited the whole acquire timeout and got none (answered `503`).
    pub timeouts: IntCounter,
}

impl Waits {
    fn new() -> prometheus::Result<Self> {
        Ok(Waits {
            waited: Histogram::with_opts(
                HistogramOpts::new(
                    "db_pool_acquire_wait_seconds",
                    "How long requests waited for a database connection, whether or not \
                     one came in the acquire timeout",
                )
                .buckets(vec![
                    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0,
                ]),
            )?,
            timeouts: IntCounter::new(
                "db_pool_acquire_timeouts_total",
                "Requests that waited the whole acquire timeout for a database connection \
                 and got none",
            )?,
        })
    }
}

impl std::fmt::Debug for DbPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbPool")
            .field("status", &self.pool.status())
            .finish()
    }
}

impl DbPool {
    /// A connection, waiting at most the acquire timeout for one; then `PoolError::Timeout`.
    pub async fn get(&self) -> Result<DbConn, PoolError> {
        let asked = Instant::now();
        if self.pool.status().waiting == 0 {
            self.pace.no_queue();
        }
        let conn = self.pool.get().await;
        let waited = asked.elapsed();
        self.waits.waited.observe(waited.as_secs_f64());
        if let Err(PoolError::Timeout(_)) = conn {
            self.waits.timeouts.inc();
        }
        let conn = conn?;
        self.pace.handed_out(waited);
        Ok(conn)
    }

    /// The counts of every wait for a connection, for the pool's collector.
    pub fn waits(&self) -> &Waits {
        &self.waits
    }

    pub fn status(&self) -> Status {
        self.pool.status()
    }

    pub fn acquire_timeout(&self) -> Duration {
        self.acquire_timeout
    }

    /// How long a request asking for a connection now would wait for it: zero while none
    /// queues; else what the last requests waited, or how long the queue has gone without a
    /// connection handed out if that is longer (every connection held by slow statements, or
    /// the database gone: whoever is first in the queue has waited that long already).
    pub fn expected_wait(&self) -> Duration {
        if self.pool.status().waiting == 0 {
            return Duration::ZERO;
        }
        self.pace.expected_wait()
    }
}

/// What the last requests waited for a connection, averaged; when one was last handed out,
/// and when a request last found no queue; in nanoseconds (since `origin`). Atomics without
/// a lock: a lost update between two racing requests only blurs an estimate.
#[derive(Debug)]
struct Pace {
    origin: Instant,
    last_hand_out: AtomicU64,
    /// A queue is no older than this: a burst after a quiet hour, waiting while the pool
    /// opens connections, is not an hour late.
    last_no_queue: AtomicU64,
    /// Exponentially weighted, 1/16 per hand-out: at a thousand checkouts a second it
    /// follows the queue within milliseconds.
    wait: AtomicU64,
}

impl Pace {
    fn new() -> Self {
        Pace {
            origin: Instant::now(),
            last_hand_out: AtomicU64::new(0),
            last_no_queue: AtomicU64::new(0),
            wait: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// A request found nobody waiting for a connection.
    fn no_queue(&self) {
        self.last_no_queue.store(self.now(), Ordering::Relaxed);
    }

    /// A connection handed out to a request that waited `waited` for it.
    fn handed_out(&self, waited: Duration) {
        self.last_hand_out.store(self.now(), Ordering::Relaxed);
        let sample = waited.as_nanos() as u64;
        let old = self.wait.load(Ordering::Relaxed);
        self.wait
            .store(old - old / 16 + sample / 16, Ordering::Relaxed);
    }

    fn expected_wait(&self) -> Duration {
        let quiet_since = self
            .last_hand_out
            .load(Ordering::Relaxed)
            .max(self.last_no_queue.load(Ordering::Relaxed));
        let since_last = self.now().saturating_sub(quiet_since);
        let waited = self.wait.load(Ordering::Relaxed);
        Duration::from_nanos(waited.max(since_last))
    }
}

#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub max_size: usize,
    /// How long a request waits for a free connection before it is answered `503`.
    pub acquire_timeout: Duration,
    pub statement_timeout: Duration,
    pub pooler: Pooler,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max_size: 16,
            acquire_timeout: Duration::from_secs(2),
            statement_timeout: Duration::from_secs(10),
            pooler: Pooler::None,
        }
    }
}

/// What stands between payorch and PostgreSQL (`--db-pooler`; docs/operations/pooler.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Pooler {
    /// PostgreSQL itself, or a pooler in session mode, which gives each client a session of
    /// its own.
    #[default]
    None,
    /// A pooler in transaction mode, which may run each transaction on another session:
    /// unnamed statements, settings per transaction, and migrations refused through it.
    Transaction,
}

impl Pooler {
    /// How a new connection sends its statements.
    pub fn statements(self, statement_timeout: Duration) -> Statements {
        match self {
            Pooler::None => Statements::prepared(),
            Pooler::Transaction => Statements::Unnamed {
                begin: format!(
                    "BEGIN; SET LOCAL statement_timeout = {}; SET LOCAL TIME ZONE 'UTC'",
                    statement_timeout.as_millis()
                ),
            },
        }
    }
}

/// The pool for `database_url`. A URL that lists several hosts gets a [`PrimaryWatch`]: the
/// pool then connects only to the primary it has found, and drops connections opened before
/// the primary changed. Every connection has the TLS the URL's `sslmode` asks for
/// (src/db/tls.rs). Needs a Tokio runtime.
pub fn build_pool(database_url: &str, settings: &PoolSettings) -> Result<DbPool, String> {
    let statement_timeout = settings.statement_timeout;
    let statement_timeout_ms = statement_timeout.as_millis();
    let url = DatabaseUrl::parse(database_url)?;
    let watch = Hosts::of(&url)?.map(|hosts| {
        PrimaryWatch::start(
            hosts,
            PrimaryWatch::sync_wait_limit(settings.statement_timeout),
        )
    });
    let patience = settings.acquire_timeout;
    let recycle_watch = watch.clone();
    let pooler = settings.pooler;
    let mut manager_config = ManagerConfig::<PgConn>::default();
    // No `SELECT 1` each time a connection is taken (the default, "Verified", cost four round
    // trips per checkout): a connection the server closed is seen as closed without asking,
    // and one that dies in the instant before use fails its request with a `503`, nothing
    // half-written, which the client's retry with the same key settles.
    manager_config.recycling_method = RecyclingMethod::Fast;
    // Opened on the runtime current now, `serve`'s own, whichever HTTP worker asks for it:
    // a connection is driven by a task on the runtime that opened it, and a worker's runtime
    // stops before the requests of another are drained (src/lasting.rs).
    let lasting = Lasting::current();
    manager_config.custom_setup = Box::new(move |_| {
        let url = url.clone();
        let watch = watch.clone();
        let lasting = lasting.clone();
        let open = async move {
            let statements = pooler.statements(statement_timeout);
            let mut conn = match watch {
                Some(watch) => watch.connect(patience, statements).await?,
                None => {
                    // The name rides in the start-up message, which a pooler passes on to
                    // whichever session serves the client (PgBouncer tracks it).
                    let mut config = url.config().clone();
                    config.application_name(POOL_APPLICATION_NAME);
                    PgConn::open(&url, &config, statements).await?
                }
            };
            if pooler == Pooler::Transaction {
                // Nothing set on a session outlives a transaction behind the pooler: the
                // timeout is set by each transaction's `BEGIN` (src/db/conn.rs), and
                // unnamed statements are planned at each run anyway.
                return Ok(conn);
            }
            // Every statement payorch prepares finds its rows by key (merchant, id, key,
            // provider id), where one plan fits every parameter. Left to choose, PostgreSQL
            // plans the first five runs of each afresh and may keep doing so when its cost
            // estimate of the generic plan is off, which for the payment statements' CTEs it
            // is (docs/BENCHMARKS.md, "The checkout gap, second pass"). A statement whose best plan
            // depends on its parameters must be written as its own text instead.
            conn.batch_execute(&format!(
                "SET statement_timeout = {statement_timeout_ms}; \
                 SET plan_cache_mode = force_generic_plan"
            ))
            .await
            .map_err(ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        };
        async move {
            lasting.run(open).await.unwrap_or_else(|ended| {
                Err(ConnectionError::BadConnection(format!(
                    "the connection's opening ended: {ended}"
                )))
            })
        }
        .boxed()
    });
    let manager = AsyncDieselConnectionManager::new_with_config(database_url, manager_config);
    let mut pool = Pool::builder(manager).max_size(settings.max_size);
    if let Some(watch) = recycle_watch {
        pool = pool.post_recycle(Hook::sync_fn(move |_, metrics| {
            if watch.is_current(metrics.created) {
                Ok(())
            } else {
                Err(HookError::message("opened before the primary changed"))
            }
        }));
    }
    let pool = pool
        .runtime(deadpool::Runtime::Tokio1)
        .wait_timeout(Some(settings.acquire_timeout))
        .create_timeout(Some(settings.acquire_timeout))
        .recycle_timeout(Some(settings.acquire_timeout))
        .build()
        .map_err(|err| err.to_string())?;
    Ok(DbPool {
        pool,
        pace: Arc::new(Pace::new()),
        acquire_timeout: settings.acquire_timeout,
        waits: Waits::new().map_err(|err| err.to_string())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that takes the connection and never answers: the pool cannot open one within
    /// the acquire timeout, and the wait is counted, as a timeout too (DbPoolAcquireTimeouts).
    #[tokio::test]
    async fn a_wait_that_gets_no_connection_is_counted_a_timeout() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let settings = PoolSettings {
            max_size: 1,
            acquire_timeout: Duration::from_millis(50),
            statement_timeout: Duration::from_secs(1),
            pooler: Pooler::None,
        };
        let pool = build_pool(
            &format!("postgres://payorch@127.0.0.1:{port}/payorch"),
            &settings,
        )
        .unwrap();
        assert!(matches!(pool.get().await, Err(PoolError::Timeout(_))));
        let waits = pool.waits();
        assert_eq!(waits.timeouts.get(), 1);
        assert_eq!(waits.waited.get_sample_count(), 1);
        assert!(
            waits.waited.get_sample_sum() >= 0.05,
            "waited the whole timeout"
        );
    }

    #[test]
    fn the_expected_wait_is_what_requests_lately_waited_or_the_silence_since_the_last() {
        let pace = Pace::new();
        for _ in 0..200 {
            pace.handed_out(Duration::from_millis(800));
        }
        let busy = pace.expected_wait();
        assert!(
            busy > Duration::from_millis(750) && busy <= Duration::from_millis(800),
            "{busy:?}"
        );
        for _ in 0..200 {
            pace.handed_out(Duration::ZERO);
        }
        assert!(
            pace.wait.load(Ordering::Relaxed) < Duration::from_millis(1).as_nanos() as u64,
            "short waits bring it down again"
        );
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            pace.expected_wait() >= Duration::from_millis(50),
            "a pool silent for 50 ms keeps its first waiter waiting at least that long"
        );
    }

    #[test]
    fn a_burst_after_a_quiet_spell_is_not_as_late_as_the_spell_was_long() {
        // A minute, not an hour: a freshly booted machine's monotonic clock starts at zero.
        let quiet = Duration::from_secs(60);
        let pace = Pace {
            origin: Instant::now()
                .checked_sub(quiet)
                .expect("a minute of monotonic clock"),
            ..Pace::new()
        };
        pace.last_hand_out.store(1, Ordering::Relaxed);
        assert!(
            pace.expected_wait() >= quiet,
            "nothing handed out for a minute"
        );
        // A request finds no queue; the next ones queue while connections open.
        pace.no_queue();
        assert!(
            pace.expected_wait() < quiet / 2,
            "{:?}",
            pace.expected_wait()
        );
    }
}
