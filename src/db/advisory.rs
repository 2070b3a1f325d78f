//! PostgreSQL advisory locks taken outside a keyed statement: the migrations' lock, held by
//! the session across its DDL (`db::migrations`), and the demo account's, held by the
//! transaction that creates it (`credentials`). Each statement is written once here, with its
//! snapshot in `tests/sql/`; the claim's own transaction lock is part of the claim statement
//! (`idempotency::claim`).

use diesel::sql_types::BigInt;

use super::sql::Sql;
use super::statement::Statement;

/// Waits for the transaction-scoped lock `key`; the transaction's end releases it.
pub fn xact_lock(key: i64) -> Sql<'static> {
    lock_statement("pg_advisory_xact_lock", key, "")
}

/// Takes the session lock `key` if it is free, without waiting: one row, `taken`.
pub fn try_lock(key: i64) -> Sql<'static> {
    lock_statement("pg_try_advisory_lock", key, " AS taken")
}

/// Releases the session lock `key`.
pub fn unlock(key: i64) -> Sql<'static> {
    lock_statement("pg_advisory_unlock", key, "")
}

/// `SELECT function(key)`: `function` is one of the fixed names above, never input.
fn lock_statement(function: &'static str, key: i64, alias: &'static str) -> Sql<'static> {
    let mut q = Statement::new();
    let key = q.bind::<BigInt, _>(key);
    q.push(format_args!("SELECT {function}({key}){alias}"));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_lock_statements_read_as_their_snapshots() {
        assert_sql_snapshot("advisory_xact_lock", &xact_lock(1));
        assert_sql_snapshot("advisory_try_lock", &try_lock(1));
        assert_sql_snapshot("advisory_unlock", &unlock(1));
    }
}
