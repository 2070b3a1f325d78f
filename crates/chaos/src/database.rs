//! The run's own connections to the database payorch writes, for the checks that read it
//! afterwards (the kill run's, the strict mode's, the failover run's).

use tokio_postgres::NoTls;

/// A connection to the run's database, its driver spawned (a fresh one each time: the database
/// may have restarted since the last).
pub(crate) async fn connect(database_url: &str) -> Result<tokio_postgres::Client, String> {
    let (db, connection) = tokio_postgres::connect(database_url, NoTls)
        .await
        .map_err(|e| format!("the database: {e}"))?;
    tokio::spawn(connection);
    Ok(db)
}
