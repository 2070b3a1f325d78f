//! The two roles payorch's database is used under (docs/PRODUCTION.md, section 2): the owner,
//! which runs the migrations and owns every table, trigger and constraint; and the runtime
//! role the service connects as, a member of the group role `payorch_runtime`, which may read
//! and write rows and nothing else, so that no bug and no stolen connection of the service
//! can disable the triggers that hold the invariants.

use diesel::sql_types::{Bool, Text};
use diesel::QueryableByName;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};

use super::sql::Sql;
use super::statement::Statement;
use crate::db::PgConn;

/// The group role migration 2026-11-27-000016_runtime_role grants the service's rights to.
pub const RUNTIME_GROUP: &str = "payorch_runtime";

/// What the role a connection runs as could do beyond reading and writing rows.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct RoleReach {
    #[diesel(sql_type = Text)]
    pub role: String,
    /// A superuser passes every check, triggers and `session_replication_role` included.
    #[diesel(sql_type = Bool)]
    pub superuser: bool,
    /// It owns (or is a member of the owner of) payorch's tables: it may alter them, drop
    /// their triggers or disable them.
    #[diesel(sql_type = Bool)]
    pub owns_tables: bool,
}

impl RoleReach {
    /// Whether the role can get around an invariant the database holds.
    pub fn can_bypass_invariants(&self) -> bool {
        self.superuser || self.owns_tables
    }
}

/// The role of `conn`'s session, and whether it could bypass an invariant.
pub async fn role_reach(conn: &mut PgConn) -> Result<RoleReach, diesel::result::Error> {
    role_reach_statement()
        .load::<RoleReach>(conn)
        .await
        .and_then(crate::db::one)
}

/// [`role_reach`]'s statement (whole text: `tests/sql/role_reach.sql`).
fn role_reach_statement() -> Sql<'static> {
    let mut q = Statement::new();
    q.push(
        "SELECT current_user::text AS role,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser,
       EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = 'public'
               AND tablename = 'payment_attempts'
               AND pg_has_role(current_user, tableowner, 'MEMBER')) AS owns_tables",
    );
    q.finish()
}

/// Makes the private cluster's runtime login role `login`, a member of [`RUNTIME_GROUP`],
/// unless it exists. Run by the cluster's superuser; trust authentication over the cluster's
/// own socket means it needs no password (src/db/cluster.rs).
pub async fn create_runtime_login(
    conn: &mut PgConn,
    login: &str,
) -> Result<(), diesel::result::Error> {
    // DDL in a DO block, which takes no parameters: `login` is the cluster's own name for
    // its runtime role, never input.
    // Two processes opening one cluster at once may both find a role missing: whoever comes
    // second is told it exists, which is what it wanted.
    conn.batch_execute(&format!(
        "DO $$ BEGIN \
           IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{RUNTIME_GROUP}') THEN \
             BEGIN CREATE ROLE {RUNTIME_GROUP} NOLOGIN; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END; \
           END IF; \
           IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{login}') THEN \
             BEGIN CREATE ROLE {login} LOGIN IN ROLE {RUNTIME_GROUP}; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END; \
           END IF; \
         END $$"
    ))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_catalog_statement_reads_as_its_snapshot() {
        assert_sql_snapshot("role_reach", &role_reach_statement());
    }
}
