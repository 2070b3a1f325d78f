//! Merchants and the secret keys that act for them or for support staff. A secret is shown
//! once, when made; only its SHA-256 is stored, and authentication looks the hash up.
//! A key lives until it is revoked or, once rotated, until its overlap ends ([`life`]).

mod cache;
mod last_used;
pub mod life;
pub mod sync;

pub use cache::{CallerCache, Recalled};

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use rand::RngCore;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::db::schema::{api_keys, merchants};
use crate::db::PgConn;
use crate::ids::{ApiKeyId, MerchantId};
use crate::words::words;

/// Who is calling, as established by their key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Merchant {
        merchant_id: MerchantId,
        key_id: ApiKeyId,
    },
    Support {
        key_id: ApiKeyId,
        role: SupportRole,
    },
}

words! {
    /// What a support key may do (docs/guides/support.md, "Support"): read everything, or also act — void a
    /// hold, ask the provider now, redeliver an event, change a merchant's routing.
    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum SupportRole {
        Read => "read",
        Operate => "operate",
    }
}

impl std::fmt::Display for SupportRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SupportRole {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        SupportRole::parse(raw).ok_or_else(|| format!("`{raw}` is not a role: read or operate"))
    }
}

/// Whom a key acts for: one merchant, or support staff with a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOwner {
    Merchant(MerchantId),
    Support(SupportRole),
}

impl KeyOwner {
    /// The owner's kind as `api_keys.role` holds it.
    pub fn role(self) -> &'static str {
        match self {
            KeyOwner::Merchant(_) => "merchant",
            KeyOwner::Support(_) => "support",
        }
    }

    fn merchant_id(self) -> Option<MerchantId> {
        match self {
            KeyOwner::Merchant(id) => Some(id),
            KeyOwner::Support(_) => None,
        }
    }

    fn support_role(self) -> Option<SupportRole> {
        match self {
            KeyOwner::Merchant(_) => None,
            KeyOwner::Support(role) => Some(role),
        }
    }

    /// Secrets carry their role in a prefix, so a leaked one is recognisable in a log or a scan.
    fn secret_prefix(self) -> &'static str {
        match self {
            KeyOwner::Merchant(_) => "sk_mer_",
            KeyOwner::Support(_) => "sk_sup_",
        }
    }

    /// The owner as stored: role, merchant and support role; `None` for a shape the table's
    /// CHECKs make impossible.
    fn from_row(
        role: &str,
        merchant_id: Option<uuid::Uuid>,
        support: Option<&str>,
    ) -> Option<Self> {
        match (role, merchant_id, support) {
            ("merchant", Some(m), None) => Some(KeyOwner::Merchant(MerchantId(m))),
            ("support", None, Some(r)) => SupportRole::parse(r).map(KeyOwner::Support),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Merchant {
    pub id: MerchantId,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

/// A key as created: the only moment its secret exists outside the caller's hands.
#[derive(Clone, Serialize)]
pub struct NewKey {
    pub key_id: ApiKeyId,
    pub secret: String,
}

/// The id only: the secret never shows in `Debug` output.
impl std::fmt::Debug for NewKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewKey")
            .field("key_id", &self.key_id)
            .field("secret", &"[redacted]")
            .finish()
    }
}

/// 24 random bytes in hex behind a recognisable prefix (`sk_mer_`, `whsec_`, …).
pub fn random_secret(prefix: &str) -> String {
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}{}", hex::encode(bytes))
}

/// What is stored of a secret, and what authentication looks up.
pub type SecretHash = [u8; 32];

pub fn secret_hash(secret: &str) -> SecretHash {
    Sha256::digest(secret.as_bytes()).into()
}

async fn insert_key(
    conn: &mut PgConn,
    owner: KeyOwner,
    name: &str,
    rotated_from: Option<ApiKeyId>,
) -> QueryResult<NewKey> {
    let key_id = ApiKeyId::new();
    let secret = random_secret(owner.secret_prefix());
    diesel::insert_into(api_keys::table)
        .values((
            api_keys::id.eq(key_id.0),
            api_keys::secret_sha256.eq(secret_hash(&secret).as_slice()),
            api_keys::role.eq(owner.role()),
            api_keys::merchant_id.eq(owner.merchant_id().map(|m| m.0)),
            api_keys::support_role.eq(owner.support_role().map(SupportRole::as_str)),
            api_keys::name.eq(name),
            api_keys::rotated_from.eq(rotated_from.map(|k| k.0)),
        ))
        .execute(conn)
        .await?;
    Ok(NewKey { key_id, secret })
}

/// Creates a merchant and its first API key, in one transaction.
pub async fn create_merchant(conn: &mut PgConn, name: &str) -> QueryResult<(Merchant, NewKey)> {
    let name = name.to_string();
    conn.transaction(async move |conn| {
        let id = MerchantId::new();
        let created_at: DateTime<Utc> = diesel::insert_into(merchants::table)
            .values((merchants::id.eq(id.0), merchants::name.eq(&name)))
            .returning(merchants::created_at)
            .load(conn)
            .await
            .and_then(crate::db::one)?;
        let key = insert_key(conn, KeyOwner::Merchant(id), &name, None).await?;
        Ok((
            Merchant {
                id,
                name,
                created_at,
            },
            key,
        ))
    })
    .await
}

pub async fn create_support_key(
    conn: &mut PgConn,
    name: &str,
    role: SupportRole,
) -> QueryResult<NewKey> {
    insert_key(conn, KeyOwner::Support(role), name, None).await
}

/// A further API key for an existing merchant.
pub async fn create_merchant_key(
    conn: &mut PgConn,
    merchant_id: MerchantId,
    name: &str,
) -> QueryResult<NewKey> {
    insert_key(conn, KeyOwner::Merchant(merchant_id), name, None).await
}

/// The oldest merchant called `name`, if any.
pub async fn oldest_merchant_named(
    conn: &mut PgConn,
    name: &str,
) -> QueryResult<Option<MerchantId>> {
    merchants::table
        .filter(merchants::name.eq(name))
        .order((merchants::created_at.asc(), merchants::id.asc()))
        .select(merchants::id)
        .limit(1)
        .load::<uuid::Uuid>(conn)
        .await
        .and_then(crate::db::one)
        .optional()
        .map(|id| id.map(MerchantId))
}

/// A live key as authentication found it: who it is, and when it stops working if it was
/// rotated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveKey {
    pub caller: Caller,
    pub expires_at: Option<DateTime<Utc>>,
}

/// The key a presented secret belongs to (by its hash), if it is live: neither revoked nor
/// past its `expires_at`.
pub async fn authenticate(conn: &mut PgConn, hash: &SecretHash) -> QueryResult<Option<LiveKey>> {
    type Row = (
        uuid::Uuid,
        String,
        Option<uuid::Uuid>,
        Option<String>,
        Option<DateTime<Utc>>,
    );
    let row: Option<Row> = api_keys::table
        .filter(api_keys::secret_sha256.eq(hash.as_slice()))
        .filter(api_keys::revoked_at.is_null())
        .filter(
            api_keys::expires_at
                .is_null()
                .or(api_keys::expires_at.gt(diesel::dsl::now)),
        )
        .select((
            api_keys::id,
            api_keys::role,
            api_keys::merchant_id,
            api_keys::support_role,
            api_keys::expires_at,
        ))
        .limit(1)
        .load(conn)
        .await
        .and_then(crate::db::one)
        .optional()?;
    Ok(
        row.and_then(|(id, role, merchant_id, support, expires_at)| {
            let key_id = ApiKeyId(id);
            let caller = match KeyOwner::from_row(&role, merchant_id, support.as_deref())? {
                KeyOwner::Merchant(merchant_id) => Caller::Merchant {
                    merchant_id,
                    key_id,
                },
                KeyOwner::Support(role) => Caller::Support { key_id, role },
            };
            Some(LiveKey { caller, expires_at })
        }),
    )
}

pub async fn find_merchant(conn: &mut PgConn, id: MerchantId) -> QueryResult<Option<Merchant>> {
    merchants::table
        .find(id.0)
        .select((merchants::id, merchants::name, merchants::created_at))
        .limit(1)
        .load::<(uuid::Uuid, String, DateTime<Utc>)>(conn)
        .await
        .and_then(crate::db::one)
        .optional()
        .map(|row| {
            row.map(|(id, name, created_at)| Merchant {
                id: MerchantId(id),
                name,
                created_at,
            })
        })
}

/// Merchants in id (= creation) order, `limit` at most, after `starting_after` if given.
pub async fn list_merchants(
    conn: &mut PgConn,
    limit: i64,
    starting_after: Option<MerchantId>,
) -> QueryResult<Vec<Merchant>> {
    let mut query = merchants::table
        .select((merchants::id, merchants::name, merchants::created_at))
        .order(merchants::id.asc())
        .limit(limit)
        .into_boxed();
    if let Some(after) = starting_after {
        query = query.filter(merchants::id.gt(after.0));
    }
    let rows: Vec<(uuid::Uuid, String, DateTime<Utc>)> = query.load(conn).await?;
    Ok(rows
        .into_iter()
        .map(|(id, name, created_at)| Merchant {
            id: MerchantId(id),
            name,
            created_at,
        })
        .collect())
}

pub async fn any_merchant_exists(conn: &mut PgConn) -> QueryResult<bool> {
    diesel::select(diesel::dsl::exists(merchants::table.select(merchants::id)))
        .load(conn)
        .await
        .and_then(crate::db::one)
}

/// The name a key was given, for the log of what its holder did.
pub async fn key_name(conn: &mut PgConn, id: ApiKeyId) -> QueryResult<Option<String>> {
    api_keys::table
        .find(id.0)
        .select(api_keys::name)
        .limit(1)
        .load(conn)
        .await
        .and_then(crate::db::one)
        .optional()
}

#[cfg(test)]
mod tests {
    use super::SupportRole;

    #[test]
    fn every_support_role_reads_back_as_itself() {
        for r in SupportRole::ALL {
            assert_eq!(r.as_str().parse::<SupportRole>(), Ok(r));
        }
    }
}
