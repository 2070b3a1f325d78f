//! The connection pool: diesel-async connections in a deadpool, each set up with our
//! `application_name` and `statement_timeout` so a stuck query cannot hold a request for ever,
//! and with generic plans for prepared statements.

use std::time::Duration;

use diesel::ConnectionError;
pub use diesel_async::pooled_connection::deadpool::PoolError;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures_util::FutureExt;

pub type DbPool = Pool<AsyncPgConnection>;
pub type DbConn = Object<AsyncPgConnection>;

#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub max_size: usize,
    /// How long a request waits for a free connection before it is answered `503`.
    pub acquire_timeout: Duration,
    pub statement_timeout: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max_size: 16,
            acquire_timeout: Duration::from_secs(2),
            statement_timeout: Duration::from_secs(10),
        }
    }
}

pub fn build_pool(database_url: &str, settings: &PoolSettings) -> Result<DbPool, String> {
    let statement_timeout_ms = settings.statement_timeout.as_millis();
    let mut manager_config = ManagerConfig::<AsyncPgConnection>::default();
    // No `SELECT 1` each time a connection is taken (the default, "Verified", cost four round
    // trips per checkout): a connection the server closed is seen as closed without asking,
    // and one that dies in the instant before use fails its request with a `503`, nothing
    // half-written, which the client's retry with the same key settles.
    manager_config.recycling_method = RecyclingMethod::Fast;
    manager_config.custom_setup = Box::new(move |url| {
        let url = url.to_string();
        async move {
            let mut conn = AsyncPgConnection::establish(&url).await?;
            // Every statement payorch prepares finds its rows by key (merchant, id, key,
            // provider id), where one plan fits every parameter. Left to choose, PostgreSQL
            // plans the first five runs of each afresh and may keep doing so when its cost
            // estimate of the generic plan is off, which for the payment statements' CTEs it
            // is (BENCHMARKS.md, "Generic plans"). A statement whose best plan depends on its
            // parameters must be written as its own text instead.
            conn.batch_execute(&format!(
                "SET application_name = 'payorch'; SET statement_timeout = {statement_timeout_ms}; \
                 SET plan_cache_mode = force_generic_plan"
            ))
            .await
            .map_err(ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        }
        .boxed()
    });
    let manager = AsyncDieselConnectionManager::new_with_config(database_url, manager_config);
    Pool::builder(manager)
        .max_size(settings.max_size)
        .runtime(deadpool::Runtime::Tokio1)
        .wait_timeout(Some(settings.acquire_timeout))
        .create_timeout(Some(settings.acquire_timeout))
        .recycle_timeout(Some(settings.acquire_timeout))
        .build()
        .map_err(|err| err.to_string())
}
