//! Which providers a payment tries, in order (docs/guides/routing.md, "Routing and failover"): the
//! merchant's list, or its list for the payment's currency, else every configured provider
//! in the configured order. Read through a small in-process cache, so the checkout's hot path
//! asks the database at most once per merchant per `ttl`; a change made on another replica
//! applies within that bound.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};

use crate::bounded_map::BoundedMap;
use crate::db::pool::PoolError;
use crate::db::schema::{merchant_routing, merchants};
use crate::db::DbPool;
use crate::db::PgConn;
use crate::ids::MerchantId;
use crate::payments::attempts::retry::RetrySettings;
use crate::payments::success_routing::Strategy;
use crate::payments::support::audit::{self, Action, Actor, Done};
use crate::providers::registry::{NamedProvider, Providers};

/// A merchant's routing as stored: provider names in order, and per currency (lowercase
/// ISO 4217) an order of its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Routing {
    pub providers: Vec<String>,
    pub currencies: BTreeMap<String, Vec<String>>,
    /// In the order written, or by success (docs/guides/routing.md, "Routing by success").
    pub strategy: Strategy,
    /// Which declines a payment tries again (docs/guides/declines.md, "Retries").
    pub retries: RetrySettings,
}

impl Routing {
    /// As the audit of a change keeps it.
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "providers": self.providers,
            "currencies": self.currencies,
            "strategy": self.strategy.as_str(),
            "retries": retries_json(&self.retries),
        })
    }

    /// The names to try for `currency`, in order.
    pub fn names_for(&self, currency: &str) -> &[String] {
        self.currencies
            .get(&currency.to_ascii_lowercase())
            .unwrap_or(&self.providers)
    }
}

/// The `retries` object of the routing document, as the API shows it and the audit keeps it.
pub fn retries_json(retries: &RetrySettings) -> serde_json::Value {
    serde_json::json!({
        "soft_declines": retries.soft_declines,
        "after_three_d_secure": retries.after_three_d_secure,
        "max_attempts": retries.max_attempts,
    })
}

/// The providers to try for a payment in `currency`: those of `routing` this process is
/// configured with, in order, each once; when none is left (or there is no routing), every
/// configured provider in the configured order.
pub fn route<'p>(
    providers: &'p Providers,
    routing: Option<&Routing>,
    currency: &str,
) -> Vec<&'p NamedProvider> {
    let mut chosen: Vec<&NamedProvider> = Vec::new();
    for name in routing.map(|r| r.names_for(currency)).unwrap_or_default() {
        match providers.get(name) {
            Some(p) if !chosen.iter().any(|c| c.name == p.name) => chosen.push(p),
            Some(_) => {}
            None => {
                tracing::warn!(provider = %name, "routing names a provider not configured here")
            }
        }
    }
    if chosen.is_empty() {
        chosen = providers.iter().collect();
    }
    chosen
}

/// The merchant's stored routing, if it has one.
pub async fn load(conn: &mut PgConn, merchant: MerchantId) -> QueryResult<Option<Routing>> {
    type Retries = (bool, bool, i16);
    let row: Option<(Vec<String>, serde_json::Value, String, Retries)> = merchant_routing::table
        .filter(merchant_routing::merchant_id.eq(merchant.0))
        .select((
            merchant_routing::providers,
            merchant_routing::currencies,
            merchant_routing::strategy,
            (
                merchant_routing::retry_soft_declines,
                merchant_routing::retry_after_three_d_secure,
                merchant_routing::max_attempts,
            ),
        ))
        .limit(1)
        .load(conn)
        .await
        .and_then(crate::db::one)
        .optional()?;
    let Some((providers, currencies, strategy, retries)) = row else {
        return Ok(None);
    };
    let (soft_declines, after_three_d_secure, max_attempts) = retries;
    let retries = RetrySettings {
        soft_declines,
        after_three_d_secure,
        // 1 to 4 by the table's CHECK (migration 2026-11-27-000025).
        max_attempts: u8::try_from(max_attempts).unwrap_or(1),
    };
    // Written only by `save`, from the same type: anything else is an error, never a routing
    // quietly without its currency overrides.
    let currencies = serde_json::from_value(currencies)
        .map_err(|err| diesel::result::Error::DeserializationError(Box::new(err)))?;
    let strategy = Strategy::parse(&strategy).ok_or_else(|| {
        diesel::result::Error::DeserializationError(format!("routing strategy {strategy:?}").into())
    })?;
    Ok(Some(Routing {
        providers,
        currencies,
        strategy,
        retries,
    }))
}

/// Replaces the merchant's routing for support key `actor`, and audits the change with the
/// routing before and after, in one transaction: a change is never made unaudited.
pub async fn change(
    conn: &mut PgConn,
    merchant: MerchantId,
    routing: &Routing,
    actor: &Actor,
) -> QueryResult<()> {
    conn.transaction(async |conn| {
        // Locked, so two changes at once audit each other's result as their `before`.
        let before: Option<Routing> = {
            merchants::table
                .find(merchant.0)
                .select(merchants::id)
                .for_no_key_update()
                .load::<uuid::Uuid>(conn)
                .await?;
            load(conn, merchant).await?
        };
        save(conn, merchant, routing, &actor.key_name).await?;
        audit::record(
            conn,
            actor,
            Done {
                action: Action::ChangeRouting,
                target_id: merchant.0,
                merchant_id: merchant,
                order_id: None,
                before: before.as_ref().map(Routing::to_json),
                after: Some(routing.to_json()),
            },
        )
        .await
    })
    .await
}

/// Replaces the merchant's routing; `by` is who did it (a support key's name).
async fn save(
    conn: &mut PgConn,
    merchant: MerchantId,
    routing: &Routing,
    by: &str,
) -> QueryResult<()> {
    use merchant_routing::{max_attempts, retry_after_three_d_secure, retry_soft_declines};
    let currencies = serde_json::to_value(&routing.currencies).unwrap_or_default();
    diesel::insert_into(merchant_routing::table)
        .values((
            merchant_routing::merchant_id.eq(merchant.0),
            merchant_routing::providers.eq(&routing.providers),
            merchant_routing::currencies.eq(&currencies),
            merchant_routing::strategy.eq(routing.strategy.as_str()),
            retry_soft_declines.eq(routing.retries.soft_declines),
            retry_after_three_d_secure.eq(routing.retries.after_three_d_secure),
            max_attempts.eq(i16::from(routing.retries.max_attempts)),
            merchant_routing::updated_by.eq(by),
        ))
        .on_conflict(merchant_routing::merchant_id)
        .do_update()
        .set((
            merchant_routing::providers.eq(&routing.providers),
            merchant_routing::currencies.eq(&currencies),
            merchant_routing::strategy.eq(routing.strategy.as_str()),
            retry_soft_declines.eq(routing.retries.soft_declines),
            retry_after_three_d_secure.eq(routing.retries.after_three_d_secure),
            max_attempts.eq(i16::from(routing.retries.max_attempts)),
            merchant_routing::updated_by.eq(by),
            merchant_routing::updated_at.eq(diesel::dsl::now),
        ))
        .execute(conn)
        .await
        .map(|_| ())
}

#[derive(Debug, thiserror::Error)]
pub enum RoutingError {
    #[error(transparent)]
    Unavailable(#[from] PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
}

/// A merchant's routing (or that it has none) and when it was read.
type Entry = (Instant, Option<Arc<Routing>>);

/// Merchants' routings as recently read, for at most this many merchants at once.
pub struct RoutingCache {
    ttl: Duration,
    entries: BoundedMap<MerchantId, Entry>,
}

/// Merchants whose routing one replica remembers; past it, it starts again from none.
const REMEMBERED_MERCHANTS: usize = 100_000;

impl RoutingCache {
    pub fn new(ttl: Duration) -> Self {
        RoutingCache {
            ttl,
            entries: BoundedMap::new(REMEMBERED_MERCHANTS),
        }
    }

    /// The merchant's routing, from the cache while it is fresh, else from the database.
    pub async fn get(
        &self,
        pool: &DbPool,
        merchant: MerchantId,
    ) -> Result<Option<Arc<Routing>>, RoutingError> {
        if let Some((at, routing)) = self.entries.get(&merchant) {
            if at.elapsed() < self.ttl {
                return Ok(routing);
            }
        }
        let routing = load(&mut *pool.get().await?, merchant).await?.map(Arc::new);
        self.entries
            .insert(merchant, (Instant::now(), routing.clone()));
        Ok(routing)
    }

    /// Forget the merchant's routing here (after this replica changed it).
    pub fn forget(&self, merchant: MerchantId) {
        self.entries.remove(&merchant);
    }
}
