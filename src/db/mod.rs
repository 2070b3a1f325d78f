//! PostgreSQL: where the database is (a `DATABASE_URL` or our private cluster), the pool,
//! migrations and the schema.

pub mod advisory;
pub mod cluster;
pub mod conn;
pub mod migrations;
#[cfg(test)]
mod one_way;
pub mod partitions;
pub mod pool;
pub mod pool_metrics;
pub mod primary;
pub mod roles;
pub mod schema;
pub mod scope;
#[cfg(test)]
pub(crate) mod snapshot;
pub mod sql;
pub mod statement;
pub mod tls;
pub mod transaction;
pub mod url;

use std::path::PathBuf;

use diesel_async::RunQueryDsl;

pub use cluster::{ClusterError, ClusterOptions, PrivateCluster};
pub use conn::PgConn;
pub use pool::{build_pool, DbConn, DbPool, PoolSettings, Pooler};
pub use url::DatabaseUrl;

/// The database payorch keeps its state in, inside the private cluster.
pub const DATABASE_NAME: &str = "payorch";

#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("{0}")]
    Url(String),
    #[error("could not connect to the database: {0}")]
    Connect(#[from] diesel::ConnectionError),
    #[error("could not create the database: {0}")]
    Create(#[from] diesel::result::Error),
    #[error("could not create the runtime role: {0}")]
    Roles(#[source] diesel::result::Error),
    #[error("cluster thread: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error(
        "DATABASE_URL reaches PostgreSQL through a pooler in transaction mode \
         (--db-pooler transaction), where a migration cannot keep the session its lock and DDL \
         need: give --migration-database-url (PAYORCH_MIGRATION_DATABASE_URL), the table \
         owner's URL to PostgreSQL itself, not to the pooler (docs/operations/pooler.md)"
    )]
    MigrationsThroughPooler,
}

/// Where the database is: either given, or a private cluster this process may own.
#[derive(Debug)]
pub struct Database {
    /// The service's own: the runtime role, which owns nothing (src/db/roles.rs).
    url: String,
    /// The owner's, for migrations; the same as `url` when none was given apart.
    migration_url: String,
    /// Whether `migration_url` was given apart from `url` (`--migration-database-url`).
    migration_url_apart: bool,
    cluster: Option<PrivateCluster>,
    /// What `url` reaches, and the statement timeout its connections set.
    pooler: Pooler,
    statement_timeout: std::time::Duration,
}

impl Database {
    /// Uses `database_url` when given; otherwise starts (or joins) the private cluster under
    /// `data_dir`, makes sure its `payorch` database and its runtime login role exist, and
    /// gives the service that role's URL and the migrations the owner's.
    pub async fn open(
        database_url: Option<String>,
        data_dir: PathBuf,
        ephemeral: bool,
    ) -> Result<Self, DatabaseError> {
        if let Some(url) = database_url {
            return Ok(Database {
                migration_url: url.clone(),
                migration_url_apart: false,
                url,
                cluster: None,
                pooler: Pooler::None,
                statement_timeout: PoolSettings::default().statement_timeout,
            });
        }
        let options = ClusterOptions {
            data_dir,
            ephemeral,
        };
        let cluster =
            tokio::task::spawn_blocking(move || PrivateCluster::start(&options)).await??;
        let maintenance = cluster.database_url("postgres");
        create_database_if_missing(&maintenance, DATABASE_NAME).await?;
        let mut conn = connect(&maintenance).await?;
        roles::create_runtime_login(&mut conn, cluster::CLUSTER_RUNTIME_USER)
            .await
            .map_err(DatabaseError::Roles)?;
        Ok(Database {
            url: cluster.runtime_database_url(DATABASE_NAME),
            migration_url: cluster.database_url(DATABASE_NAME),
            migration_url_apart: true,
            cluster: Some(cluster),
            pooler: Pooler::None,
            statement_timeout: PoolSettings::default().statement_timeout,
        })
    }

    /// Migrations run as `owner_url` (`--migration-database-url`) rather than as the
    /// service's own URL; `None` leaves them as they are.
    pub fn with_migration_url(mut self, owner_url: Option<String>) -> Self {
        if let Some(owner_url) = owner_url {
            self.migration_url = owner_url;
            self.migration_url_apart = true;
        }
        self
    }

    /// `url` reaches PostgreSQL through `pooler` (`--db-pooler`); its connections set
    /// `statement_timeout`.
    pub fn with_pooler(mut self, pooler: Pooler, statement_timeout: std::time::Duration) -> Self {
        self.pooler = pooler;
        self.statement_timeout = statement_timeout;
        self
    }

    /// The service's URL: the runtime role's.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL migrations run under: the owner's. Refused when it would go through a pooler
    /// in transaction mode: the migrations' advisory lock is a session's, and a session is
    /// what such a pooler does not keep (src/db/migrations.rs).
    pub fn migration_url(&self) -> Result<&str, DatabaseError> {
        if self.pooler == Pooler::Transaction && !self.migration_url_apart {
            return Err(DatabaseError::MigrationsThroughPooler);
        }
        Ok(&self.migration_url)
    }

    /// A connection to the service's URL, sending its statements as the pooler in front of
    /// it allows (src/db/conn.rs).
    pub async fn connect(&self) -> Result<PgConn, DatabaseError> {
        let url = DatabaseUrl::parse(&self.url).map_err(DatabaseError::Url)?;
        let statements = self.pooler.statements(self.statement_timeout);
        Ok(PgConn::open(&url, url.config(), statements).await?)
    }

    pub fn pooler(&self) -> Pooler {
        self.pooler
    }

    pub fn cluster(&self) -> Option<&PrivateCluster> {
        self.cluster.as_ref()
    }

    /// Stops the private cluster if this process started it.
    pub async fn shutdown(self) -> Result<(), DatabaseError> {
        if let Some(cluster) = self.cluster.filter(|c| c.started_here()) {
            tokio::task::spawn_blocking(move || cluster.stop()).await??;
        }
        Ok(())
    }
}

/// The one row a statement returned, from its rows read to the end of the server's answer:
/// `statement.load(conn).await.and_then(one)`, never diesel-async's `get_result` or `first`.
///
/// Those two return at the first row and leave the rest of the answer unread. An autocommit
/// statement's rows come *before* its implicit commit, which happens at the protocol's Sync:
/// while the commit waits on a synchronous standby the rows are held back, but if the session
/// is then ended (the commit guard of `primary.rs`, a fast shutdown), they are sent after
/// all, followed by a warning and the end of the connection. `get_result` takes that row for
/// a success; reading to the end (to ReadyForQuery, which only a finished commit sends) sees
/// the connection lost, and the request fails as it must (docs/DESIGN.md, "Database failover").
/// `clippy.toml` refuses the two methods.
pub fn one<T>(rows: Vec<T>) -> diesel::QueryResult<T> {
    rows.into_iter()
        .next()
        .ok_or(diesel::result::Error::NotFound)
}

/// `CREATE DATABASE` has no `IF NOT EXISTS`; a replica that loses the race sees it exist.
pub async fn create_database_if_missing(
    maintenance_url: &str,
    name: &str,
) -> Result<(), DatabaseError> {
    let mut conn = connect(maintenance_url).await?;
    if database_exists(&mut conn, name).await? {
        return Ok(());
    }
    // DDL, which takes no parameters.
    let created = diesel::sql_query(format!("CREATE DATABASE \"{name}\""))
        .execute(&mut conn)
        .await;
    match created {
        Ok(_) => Ok(()),
        Err(_) if database_exists(&mut conn, name).await? => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// A connection to `url` with the TLS its `sslmode` asks for (src/db/url.rs), straight to
/// PostgreSQL (a pooler in transaction mode takes [`Database::connect`]).
pub async fn connect(url: &str) -> Result<PgConn, DatabaseError> {
    let url = DatabaseUrl::parse(url).map_err(DatabaseError::Url)?;
    Ok(PgConn::connect(&url).await?)
}

async fn database_exists(conn: &mut PgConn, name: &str) -> Result<bool, diesel::result::Error> {
    #[derive(diesel::QueryableByName)]
    struct Exists {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        exists: bool,
    }
    database_exists_statement(name)
        .load::<Exists>(conn)
        .await
        .and_then(crate::db::one)
        .map(|row| row.exists)
}

/// What a statement outside a transaction runs under behind a pooler in transaction mode,
/// where payorch can set nothing on a session: the server's (or the role's, or the
/// database's) own time zone and statement timeout.
#[derive(Debug, diesel::QueryableByName)]
pub struct SessionDefaults {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub time_zone: String,
    /// As `SHOW` says it: `0` for none.
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub statement_timeout: String,
}

/// The time zone and statement timeout a session starts with (src/commands.rs checks them
/// behind a transaction pooler: docs/operations/pooler.md).
pub async fn session_defaults(conn: &mut PgConn) -> diesel::QueryResult<SessionDefaults> {
    session_defaults_statement().load(conn).await.and_then(one)
}

/// [`session_defaults`]'s statement (whole text: `tests/sql/session_defaults.sql`).
fn session_defaults_statement() -> sql::Sql<'static> {
    let mut q = statement::Statement::new();
    q.push(format_args!(
        "SELECT current_setting('TimeZone') AS time_zone, \
         current_setting('statement_timeout') AS statement_timeout"
    ));
    q.finish()
}

/// [`database_exists`]'s statement (whole text: `tests/sql/database_exists.sql`).
fn database_exists_statement(name: &str) -> sql::Sql<'_> {
    let mut q = statement::Statement::new();
    let name = q.bind::<diesel::sql_types::Text, _>(name);
    q.push(format_args!(
        "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = {name}) AS exists"
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_catalog_statement_reads_as_its_snapshot() {
        assert_sql_snapshot("database_exists", &database_exists_statement("payorch"));
        assert_sql_snapshot("session_defaults", &session_defaults_statement());
    }
}
