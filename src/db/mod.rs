//! PostgreSQL: where the database is (a `DATABASE_URL` or our private cluster), the pool,
//! migrations and the schema.

pub mod cluster;
pub mod migrations;
pub mod pool;
pub mod primary;
pub mod schema;
#[cfg(test)]
pub(crate) mod snapshot;
pub mod sql;
pub mod statement;
pub mod transaction;

use std::path::PathBuf;

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

pub use cluster::{ClusterError, ClusterOptions, PrivateCluster};
pub use pool::{build_pool, DbConn, DbPool, PoolSettings};

/// The database payorch keeps its state in, inside the private cluster.
pub const DATABASE_NAME: &str = "payorch";

#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("could not connect to the private cluster: {0}")]
    Connect(#[from] diesel::ConnectionError),
    #[error("could not create the database: {0}")]
    Create(#[from] diesel::result::Error),
    #[error("cluster thread: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// Where the database is: either given, or a private cluster this process may own.
#[derive(Debug)]
pub struct Database {
    url: String,
    cluster: Option<PrivateCluster>,
}

impl Database {
    /// Uses `database_url` when given; otherwise starts (or joins) the private cluster under
    /// `data_dir` and makes sure its `payorch` database exists.
    pub async fn open(
        database_url: Option<String>,
        data_dir: PathBuf,
        ephemeral: bool,
    ) -> Result<Self, DatabaseError> {
        if let Some(url) = database_url {
            return Ok(Database { url, cluster: None });
        }
        let options = ClusterOptions {
            data_dir,
            ephemeral,
        };
        let cluster =
            tokio::task::spawn_blocking(move || PrivateCluster::start(&options)).await??;
        create_database_if_missing(&cluster.database_url("postgres"), DATABASE_NAME).await?;
        Ok(Database {
            url: cluster.database_url(DATABASE_NAME),
            cluster: Some(cluster),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
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
    let mut conn = AsyncPgConnection::establish(maintenance_url).await?;
    if database_exists(&mut conn, name).await? {
        return Ok(());
    }
    let created = diesel::sql_query(format!("CREATE DATABASE \"{name}\""))
        .execute(&mut conn)
        .await;
    match created {
        Ok(_) => Ok(()),
        Err(_) if database_exists(&mut conn, name).await? => Ok(()),
        Err(err) => Err(err.into()),
    }
}

async fn database_exists(
    conn: &mut AsyncPgConnection,
    name: &str,
) -> Result<bool, diesel::result::Error> {
    use diesel::dsl::sql;
    use diesel::sql_types::{Bool, Text};
    diesel::select(
        sql::<Bool>("EXISTS (SELECT 1 FROM pg_database WHERE datname = ")
            .bind::<Text, _>(name)
            .sql(")"),
    )
    .load(conn)
    .await
    .and_then(crate::db::one)
}
