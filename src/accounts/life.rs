//! A key's life (docs/operations/commands.md, "Commands"; docs/PRODUCTION.md, section 3): made (its secret shown
//! once), listed (never its secret nor its hash), rotated — a new key made and the old one
//! given an expiry at the end of an overlap, so clients can move over without a gap — and
//! revoked. A merchant may have several live keys; a support key has a name and a role.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use serde::Serialize;

use super::{insert_key, KeyOwner, NewKey, SupportRole};
use crate::db::schema::api_keys;
use crate::db::PgConn;
use crate::ids::{ApiKeyId, MerchantId};

/// How long the old key may keep working after a rotation, at most: a rotation is a move to
/// a new key, not a second way to keep a key for ever.
pub const MAX_OVERLAP: Duration = Duration::from_secs(30 * 24 * 3600);

/// The overlap when none is given: a day, for clients deployed daily to pick up the new key.
pub const DEFAULT_OVERLAP: Duration = Duration::from_secs(24 * 3600);

/// What is shown of a key: everything but its secret and the secret's hash.
#[derive(Debug, Clone, Serialize)]
pub struct KeyInfo {
    pub id: ApiKeyId,
    /// `merchant` or `support`.
    pub role: &'static str,
    /// A support key's role: `read` or `operate`.
    pub support_role: Option<SupportRole>,
    pub merchant_id: Option<MerchantId>,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub rotated_from: Option<ApiKeyId>,
}

impl KeyInfo {
    /// Whether the key authenticates at `now`.
    pub fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|end| now < end)
    }
}

type KeyRow = (
    uuid::Uuid,
    String,
    Option<uuid::Uuid>,
    Option<String>,
    String,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    Option<uuid::Uuid>,
);

macro_rules! key_columns {
    () => {
        (
            api_keys::id,
            api_keys::role,
            api_keys::merchant_id,
            api_keys::support_role,
            api_keys::name,
            api_keys::created_at,
            api_keys::last_used_at,
            api_keys::expires_at,
            api_keys::revoked_at,
            api_keys::rotated_from,
        )
    };
}

fn key_info(row: KeyRow) -> QueryResult<KeyInfo> {
    let (
        id,
        role,
        merchant_id,
        support,
        name,
        created_at,
        last_used_at,
        expires_at,
        revoked_at,
        rotated_from,
    ) = row;
    let owner = KeyOwner::from_row(&role, merchant_id, support.as_deref()).ok_or_else(|| {
        diesel::result::Error::DeserializationError(
            format!("api key {id} has an impossible role {role:?}").into(),
        )
    })?;
    Ok(KeyInfo {
        id: ApiKeyId(id),
        role: owner.role(),
        support_role: owner.support_role(),
        merchant_id: owner.merchant_id(),
        name,
        created_at,
        last_used_at,
        expires_at,
        revoked_at,
        rotated_from: rotated_from.map(ApiKeyId),
    })
}

/// Which keys to list.
#[derive(Debug, Clone, Copy)]
pub enum KeyFilter {
    All,
    Merchant(MerchantId),
    Support,
}

/// Keys in creation order, revoked and expired ones included (they are the history).
pub async fn list_keys(conn: &mut PgConn, filter: KeyFilter) -> QueryResult<Vec<KeyInfo>> {
    let mut query = api_keys::table
        .select(key_columns!())
        .order((api_keys::created_at.asc(), api_keys::id.asc()))
        .into_boxed();
    match filter {
        KeyFilter::All => {}
        KeyFilter::Merchant(m) => query = query.filter(api_keys::merchant_id.eq(m.0)),
        KeyFilter::Support => query = query.filter(api_keys::role.eq("support")),
    }
    let rows: Vec<KeyRow> = query.load(conn).await?;
    rows.into_iter().map(key_info).collect()
}

pub async fn find_key(conn: &mut PgConn, id: ApiKeyId) -> QueryResult<Option<KeyInfo>> {
    let row: Option<KeyRow> = api_keys::table
        .find(id.0)
        .select(key_columns!())
        .limit(1)
        .load(conn)
        .await
        .and_then(crate::db::one)
        .optional()?;
    row.map(key_info).transpose()
}

#[derive(Debug, thiserror::Error)]
pub enum KeyLifeError {
    #[error("no key {0}")]
    NotFound(ApiKeyId),
    #[error("no merchant {0}")]
    NoSuchMerchant(MerchantId),
    #[error("key {0} is already revoked")]
    Revoked(ApiKeyId),
    #[error("key {0} has expired; make a new key instead of rotating it")]
    Expired(ApiKeyId),
    #[error("an overlap is at most {} days", MAX_OVERLAP.as_secs() / 86_400)]
    OverlapTooLong,
    #[error("a key's name must be 1 to 200 characters")]
    BadName,
    #[error(transparent)]
    Database(diesel::result::Error),
}

impl From<diesel::result::Error> for KeyLifeError {
    fn from(err: diesel::result::Error) -> Self {
        match &err {
            diesel::result::Error::DatabaseError(_, info)
                if info.constraint_name() == Some("api_keys_name_check") =>
            {
                KeyLifeError::BadName
            }
            _ => KeyLifeError::Database(err),
        }
    }
}

/// A new key for `owner`: a merchant's further key, or a support person's.
pub async fn create_key(
    conn: &mut PgConn,
    owner: KeyOwner,
    name: &str,
) -> Result<(KeyInfo, NewKey), KeyLifeError> {
    if let KeyOwner::Merchant(merchant) = owner {
        if super::find_merchant(conn, merchant).await?.is_none() {
            return Err(KeyLifeError::NoSuchMerchant(merchant));
        }
    }
    let new = insert_key(conn, owner, name, None).await?;
    let info = find_key(conn, new.key_id)
        .await?
        .ok_or(KeyLifeError::NotFound(new.key_id))?;
    Ok((info, new))
}

/// Revokes `id` now. Every replica stops taking it within a second ([`super::sync`]).
pub async fn revoke_key(conn: &mut PgConn, id: ApiKeyId) -> Result<KeyInfo, KeyLifeError> {
    let revoked = diesel::update(api_keys::table)
        .filter(api_keys::id.eq(id.0))
        .filter(api_keys::revoked_at.is_null())
        .set(api_keys::revoked_at.eq(diesel::dsl::now))
        .execute(conn)
        .await?;
    let key = find_key(conn, id)
        .await?
        .ok_or(KeyLifeError::NotFound(id))?;
    if revoked == 0 {
        return Err(KeyLifeError::Revoked(id));
    }
    Ok(key)
}

/// Replaces `id` by a new key of the same owner and name, and has `id` expire `overlap`
/// from now (sooner, if it was expiring already): the old and the new key both work for the
/// overlap, then only the new one. An overlap of zero ends the old key at once.
pub async fn rotate_key(
    conn: &mut PgConn,
    id: ApiKeyId,
    overlap: Duration,
) -> Result<(KeyInfo, KeyInfo, NewKey), KeyLifeError> {
    if overlap > MAX_OVERLAP {
        return Err(KeyLifeError::OverlapTooLong);
    }
    conn.transaction(async move |conn| {
        // Locked, so two rotations of one key at once make one new key, not two.
        let row: Option<KeyRow> = api_keys::table
            .find(id.0)
            .select(key_columns!())
            .for_update()
            .limit(1)
            .load(conn)
            .await
            .and_then(crate::db::one)
            .optional()?;
        let old = key_info(row.ok_or(KeyLifeError::NotFound(id))?)?;
        if old.revoked_at.is_some() {
            return Err(KeyLifeError::Revoked(id));
        }
        let now: DateTime<Utc> =
            diesel::select(diesel::dsl::now.into_sql::<diesel::sql_types::Timestamptz>())
                .load(conn)
                .await
                .and_then(crate::db::one)?;
        if !old.is_live(now) {
            return Err(KeyLifeError::Expired(id));
        }
        let owner = match (old.merchant_id, old.support_role) {
            (Some(m), _) => KeyOwner::Merchant(m),
            (None, Some(role)) => KeyOwner::Support(role),
            (None, None) => {
                return Err(KeyLifeError::Database(
                    diesel::result::Error::DeserializationError("a key with no owner".into()),
                ))
            }
        };
        let new = insert_key(conn, owner, &old.name, Some(id)).await?;
        let end = now + chrono::Duration::from_std(overlap.min(MAX_OVERLAP)).unwrap_or_default();
        let end = old.expires_at.map_or(end, |was| was.min(end));
        diesel::update(api_keys::table)
            .filter(api_keys::id.eq(id.0))
            .set(api_keys::expires_at.eq(end))
            .execute(conn)
            .await?;
        let old = find_key(conn, id)
            .await?
            .ok_or(KeyLifeError::NotFound(id))?;
        let made = find_key(conn, new.key_id)
            .await?
            .ok_or(KeyLifeError::NotFound(new.key_id))?;
        Ok((old, made, new))
    })
    .await
}
