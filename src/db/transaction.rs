//! Transactions by hand: begin, commit, and a rollback whose failure only costs the connection.
//! Every caller runs its work through [`in_transaction`]. `begin_transaction`, `commit`,
//! `rollback` and `finish_transaction` are public from when a key's claim opened a
//! transaction and handed it on to the caller's work, which diesel-async's closure-scoped
//! `transaction` cannot express; a claim is one autocommit statement now (docs/guides/idempotency.md,
//! "Idempotency"), and nothing outside this file calls them.

use diesel::QueryResult;
use diesel_async::{AsyncConnection, TransactionManager};

use crate::db::PgConn;

type Tm = <PgConn as AsyncConnection>::TransactionManager;

pub async fn begin_transaction(conn: &mut PgConn) -> QueryResult<()> {
    Tm::begin_transaction(conn).await
}

pub async fn commit(conn: &mut PgConn) -> QueryResult<()> {
    Tm::commit_transaction(conn).await
}

pub async fn rollback(conn: &mut PgConn) {
    // A failed rollback leaves the connection marked broken; the pool then discards it.
    if let Err(err) = Tm::rollback_transaction(conn).await {
        tracing::warn!(error = %err, "rollback failed");
    }
}

/// Finishes the transaction open on `conn` around `work`: committed if `work` succeeds,
/// rolled back if it or the commit fails.
pub async fn finish_transaction<T, E>(
    conn: &mut PgConn,
    work: impl AsyncFnOnce(&mut PgConn) -> Result<T, E>,
) -> Result<T, E>
where
    E: From<diesel::result::Error>,
{
    let done = match work(conn).await {
        Ok(value) => commit(conn).await.map(|()| value).map_err(E::from),
        Err(err) => Err(err),
    };
    if done.is_err() {
        rollback(conn).await;
    }
    done
}

/// Runs `work` in a transaction of its own.
pub async fn in_transaction<T, E>(
    conn: &mut PgConn,
    work: impl AsyncFnOnce(&mut PgConn) -> Result<T, E>,
) -> Result<T, E>
where
    E: From<diesel::result::Error>,
{
    begin_transaction(conn).await?;
    finish_transaction(conn, work).await
}
