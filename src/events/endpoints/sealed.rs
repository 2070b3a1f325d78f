//! An endpoint's signing secrets as stored: sealed under the master key
//! ([`crate::sealing`]; docs/PRODUCTION.md, section 5), bound to the endpoint's id, so a
//! value copied to another endpoint's row does not open. `secret` and `previous_secret`
//! share that binding: a rotation moves the sealed value from one to the other in its own
//! statement, without the clear secret, and swapping the two in a row gives nothing the
//! merchant does not hold already.
//!
//! Also what turns the rows of an older version, which kept secrets in clear, into sealed
//! ones ([`seal_clear_secrets`], at every start) and what rewrites every secret under the
//! first master key ([`reseal_all`], `payorch secrets reencrypt`).

use std::fmt;

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Nullable, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;

use crate::db::schema::webhook_endpoints;
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::PgConn;

use crate::events::signing::{Secret, SecretError};
use crate::ids::EndpointId;
use crate::sealing::{MasterKeys, OpenError};

/// A secret as `webhook_endpoints` holds it. `Debug` shows no part of it.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct SealedSecret(String);

impl From<String> for SealedSecret {
    fn from(stored: String) -> Self {
        SealedSecret(stored)
    }
}

impl fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealedSecret([redacted])")
    }
}

/// Why a stored secret cannot sign.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnsealError {
    #[error("webhook endpoint {endpoint}'s secret: {source}")]
    Open {
        endpoint: EndpointId,
        #[source]
        source: OpenError,
    },
    #[error("webhook endpoint {endpoint}'s secret opens to no secret: {source}")]
    Secret {
        endpoint: EndpointId,
        #[source]
        source: SecretError,
    },
}

/// The associated data of `endpoint`'s secrets.
fn context(endpoint: EndpointId) -> String {
    format!("webhook_endpoints:{}", endpoint.0)
}

/// `secret` sealed for `endpoint`, as the statements store it.
pub fn seal(keys: &MasterKeys, endpoint: EndpointId, secret: &Secret) -> SealedSecret {
    SealedSecret(keys.seal(secret.expose(), &context(endpoint)))
}

impl SealedSecret {
    /// The stored text, for a statement's bind.
    pub fn stored(&self) -> &str {
        &self.0
    }

    /// The secret that signs, opened under any of `keys`.
    pub fn open(&self, keys: &MasterKeys, endpoint: EndpointId) -> Result<Secret, UnsealError> {
        let clear = keys
            .open(&self.0, &context(endpoint))
            .map_err(|source| UnsealError::Open { endpoint, source })?;
        Secret::parse(&clear).map_err(|source| UnsealError::Secret { endpoint, source })
    }
}

/// The CHECKs that refuse a secret in clear (the `…_secrets_at_rest_…` migration), added
/// `NOT VALID` because a migration cannot seal the rows an older version wrote.
pub const SEALED_CHECKS: [&str; 2] = [
    "webhook_endpoints_secret_sealed",
    "webhook_endpoints_previous_secret_sealed",
];

/// Once every secret is sealed: has the database check its CHECKs against every row, so that
/// they hold for the whole table from then on (`pg_constraint.convalidated`). Only the
/// table's owner may; a CHECK already valid is left alone. How many it validated.
pub async fn validate_sealed_checks(conn: &mut PgConn) -> diesel::QueryResult<usize> {
    #[derive(QueryableByName)]
    struct Unvalidated {
        #[diesel(sql_type = Text)]
        conname: String,
    }
    let unvalidated: Vec<Unvalidated> = unvalidated_checks_statement().load(conn).await?;
    for check in &unvalidated {
        // DDL, which takes no parameters. A name from the list above, not from input: safe
        // to put in the statement.
        diesel::sql_query(format!(
            "ALTER TABLE webhook_endpoints VALIDATE CONSTRAINT {}",
            check.conname
        ))
        .execute(conn)
        .await?;
    }
    Ok(unvalidated.len())
}

/// The CHECKs of [`SEALED_CHECKS`] not validated yet (whole text:
/// `tests/sql/unvalidated_sealed_checks.sql`).
fn unvalidated_checks_statement() -> Sql<'static> {
    let mut q = Statement::new();
    let checks = q.bind::<Array<Text>, _>(SEALED_CHECKS.to_vec());
    q.push(format_args!(
        "SELECT conname::text AS conname FROM pg_constraint
WHERE conrelid = 'webhook_endpoints'::regclass AND conname = ANY({checks})
  AND NOT convalidated"
    ));
    q.finish()
}

/// The next batch of rows whose secret or previous secret does not start with
/// `sealed_prefix` (whole text: `tests/sql/secrets_to_reseal.sql`).
fn to_reseal_statement(sealed_prefix: &str) -> Sql<'_> {
    let mut q = Statement::new();
    let prefix = q.bind::<Text, _>(sealed_prefix);
    let batch = q.bind::<BigInt, _>(BATCH);
    q.push(format_args!(
        "SELECT merchant_id, id, secret, previous_secret FROM webhook_endpoints
WHERE NOT starts_with(secret, {prefix})
   OR NOT starts_with(COALESCE(previous_secret, {prefix}), {prefix})
ORDER BY merchant_id, id LIMIT {batch}"
    ));
    q.finish()
}

/// Rows rewritten per statement.
const BATCH: i64 = 100;

#[derive(Debug, thiserror::Error)]
pub enum ResealError {
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
    #[error(transparent)]
    Unseal(#[from] UnsealError),
}

#[derive(QueryableByName)]
struct StoredSecrets {
    #[diesel(sql_type = SqlUuid)]
    merchant_id: uuid::Uuid,
    #[diesel(sql_type = SqlUuid)]
    id: uuid::Uuid,
    #[diesel(sql_type = Text)]
    secret: String,
    #[diesel(sql_type = Nullable<Text>)]
    previous_secret: Option<String>,
}

/// Seals every secret still in clear (written by a version before secrets were sealed); how
/// many endpoints it rewrote. Run at every start, before the server answers: the database
/// refuses any write of such a row until it is sealed (the `…_secrets_at_rest_…` migration).
pub async fn seal_clear_secrets(
    conn: &mut PgConn,
    keys: &MasterKeys,
) -> Result<usize, ResealError> {
    reseal(conn, keys, None).await
}

/// Rewrites every secret not sealed under the first of `keys` (in clear, or under an older
/// key) under the first; how many endpoints it rewrote. After it, the older keys can be
/// dropped (docs/PRODUCTION.md, section 5). A secret that opens under none of `keys` stops it
/// with an error naming the endpoint and the key it needs.
pub async fn reseal_all(conn: &mut PgConn, keys: &MasterKeys) -> Result<usize, ResealError> {
    reseal(conn, keys, Some(keys.sealing_id())).await
}

/// Rewrites the rows with a clear secret, and with `current` those with a secret not under
/// `current` either, a batch at a time. Each row is rewritten only if it still holds what
/// was read: a rotation in between wins, and the row is read again in a later batch.
async fn reseal(
    conn: &mut PgConn,
    keys: &MasterKeys,
    current: Option<&str>,
) -> Result<usize, ResealError> {
    // What the statements call sealed under the current key; with none, anything sealed.
    let sealed_prefix = format!(
        "v1:{}",
        current.map(|id| format!("{id}:")).unwrap_or_default()
    );
    let mut rewritten = 0;
    loop {
        let rows: Vec<StoredSecrets> = to_reseal_statement(&sealed_prefix).load(conn).await?;
        if rows.is_empty() {
            return Ok(rewritten);
        }
        for row in rows {
            let endpoint = EndpointId(row.id);
            let reseal = |stored: &str| -> Result<SealedSecret, UnsealError> {
                let clear = if stored.starts_with("v1:") {
                    SealedSecret(stored.to_owned()).open(keys, endpoint)?
                } else {
                    Secret::parse(stored)
                        .map_err(|source| UnsealError::Secret { endpoint, source })?
                };
                Ok(seal(keys, endpoint, &clear))
            };
            let secret = reseal(&row.secret)?;
            let previous = row.previous_secret.as_deref().map(reseal).transpose()?;
            rewritten += diesel::update(
                webhook_endpoints::table
                    .filter(webhook_endpoints::merchant_id.eq(row.merchant_id))
                    .filter(webhook_endpoints::id.eq(row.id))
                    .filter(webhook_endpoints::secret.eq(&row.secret))
                    .filter(
                        webhook_endpoints::previous_secret
                            .is_not_distinct_from(row.previous_secret.as_deref()),
                    ),
            )
            .set((
                webhook_endpoints::secret.eq(secret.stored()),
                webhook_endpoints::previous_secret.eq(previous.as_ref().map(SealedSecret::stored)),
            ))
            .execute(conn)
            .await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_sealed_for_one_endpoint_opens_for_it_only() {
        let (keys, _) = MasterKeys::generate("k1");
        let secret = Secret::generate();
        let mine = EndpointId::new();
        let sealed = seal(&keys, mine, &secret);
        assert!(!sealed.stored().contains(&secret.expose()[6..]));
        assert_eq!(sealed.open(&keys, mine), Ok(secret.clone()));
        let other = EndpointId::new();
        assert!(matches!(
            sealed.open(&keys, other),
            Err(UnsealError::Open {
                source: OpenError::Refused(_),
                ..
            })
        ));
        assert_eq!(format!("{sealed:?}"), "SealedSecret([redacted])");
    }

    #[test]
    fn the_sealing_statements_read_as_their_snapshots() {
        use crate::db::snapshot::assert_sql_snapshot;
        assert_sql_snapshot("unvalidated_sealed_checks", &unvalidated_checks_statement());
        assert_sql_snapshot("secrets_to_reseal", &to_reseal_statement("v1:"));
    }
}
