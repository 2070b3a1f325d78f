//! Embedded migrations, applied under a PostgreSQL advisory lock so that replicas starting
//! together take turns instead of racing on the same DDL.

use diesel::prelude::*;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};

use super::advisory;
use super::sql::Sql;
use super::statement::Statement;
use super::url::DatabaseUrl;
use crate::db::PgConn;

pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// An arbitrary constant that names "payorch schema changes" among advisory locks.
const MIGRATION_LOCK_KEY: i64 = 0x7061_796f_7263_6801;

type SyncConn = AsyncConnectionWrapper<PgConn>;

#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    #[error("{0}")]
    Url(String),
    #[error("could not connect to the database: {0}")]
    Connect(#[from] diesel::ConnectionError),
    #[error("advisory lock: {0}")]
    Lock(#[from] diesel::result::Error),
    #[error("migration failed: {0}")]
    Migration(String),
    #[error("migration thread: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// Applies every pending migration; returns the versions applied (empty when up to date).
/// `database_url` is the owner's: the role that creates the tables and grants the runtime
/// role its rights on them (migration 2026-11-27-000016_runtime_role; docs/PRODUCTION.md,
/// section 2).
pub async fn run_migrations(database_url: &str) -> Result<Vec<String>, MigrationError> {
    let url = DatabaseUrl::parse(database_url).map_err(MigrationError::Url)?;
    let conn = PgConn::connect(&url).await?;
    // The harness is synchronous; it drives the async connection from a blocking thread.
    tokio::task::spawn_blocking(move || {
        let mut conn = SyncConn::from(conn);
        take_the_migration_lock(&mut conn)?;
        let applied = conn
            .run_pending_migrations(MIGRATIONS)
            .map(|versions| versions.iter().map(|v| v.to_string()).collect())
            .map_err(|err| MigrationError::Migration(err.to_string()));
        // Unlock even when a migration failed; closing the connection would too.
        advisory::unlock(MIGRATION_LOCK_KEY).execute(&mut conn)?;
        applied
    })
    .await?
}

/// Takes the advisory lock, asking again until it is free rather than waiting in
/// `pg_advisory_lock`: a waiting statement holds a snapshot, and `CREATE INDEX CONCURRENTLY`
/// (migration 2026-11-27-000020_webhook_events_age) waits for every older snapshot of the
/// database, so a replica waiting for the lock and the one holding it building the index would
/// wait for each other.
fn take_the_migration_lock(conn: &mut SyncConn) -> Result<(), diesel::result::Error> {
    #[derive(QueryableByName)]
    struct Taken {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        taken: bool,
    }
    loop {
        let Taken { taken } = advisory::try_lock(MIGRATION_LOCK_KEY).get_result(conn)?;
        if taken {
            return Ok(());
        }
        std::thread::sleep(LOCK_RETRY);
    }
}

/// How long a replica waits before asking for the migration lock again.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether every embedded migration has been applied (for readiness).
pub async fn migrations_applied(conn: &mut PgConn) -> Result<bool, diesel::result::Error> {
    #[derive(QueryableByName)]
    struct Version {
        #[diesel(sql_type = diesel::sql_types::Text)]
        version: String,
    }
    let applied: Vec<Version> =
        diesel_async::RunQueryDsl::load(applied_versions_statement(), conn).await?;
    let expected = diesel::migration::MigrationSource::<diesel::pg::Pg>::migrations(&MIGRATIONS)
        .map_err(diesel::result::Error::QueryBuilderError)?;
    Ok(expected.iter().all(|m| {
        let name = m.name().version().to_string();
        applied.iter().any(|a| a.version == name)
    }))
}

/// The versions the migration harness recorded as applied (whole text:
/// `tests/sql/applied_migrations.sql`).
fn applied_versions_statement() -> Sql<'static> {
    let mut q = Statement::new();
    q.push("SELECT version FROM __diesel_schema_migrations");
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_catalog_statement_reads_as_its_snapshot() {
        assert_sql_snapshot("applied_migrations", &applied_versions_statement());
    }
}
