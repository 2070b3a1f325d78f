//! Orders: what the payer buys. `awaiting_payment → processing → paid`,
//! `processing → awaiting_payment` (the attempt failed), `awaiting_payment → canceled`, and
//! once refunds give money back `paid → partially_refunded → refunded` (or `paid → refunded`).
//! The transitions are written once here and enforced again by a trigger in the database.

pub mod command;
pub mod keyed;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Deserialize;
use uuid::Uuid;

use crate::db::pool::PoolError;
use crate::db::schema::orders;
use crate::db::scope::find_in_scope;
use crate::db::PgConn;
use crate::fields::text;
pub use crate::fields::{FieldProblems, MAX_DESCRIPTION_LEN};
use crate::idempotency::IdempotencyError;
use crate::ids::{MerchantId, OrderId};
use crate::payments::money::{Amount, Currency, MinorUnits};
use crate::payments::status::{AttemptStatus, OrderStatus};

pub const MAX_METADATA_KEYS: usize = 50;
pub const MAX_METADATA_KEY_LEN: usize = 40;
pub const MAX_METADATA_VALUE_LEN: usize = 500;
pub const MAX_REFERENCE_LEN: usize = 255;

/// An order (the API shows it as `views::Order`).
#[derive(Debug, Clone)]
pub struct Order {
    pub id: OrderId,
    pub merchant_id: MerchantId,
    pub amount: i64,
    pub currency: String,
    pub status: OrderStatus,
    pub merchant_reference: Option<String>,
    pub description: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Made by the anonymous checkout demo, whose routes act on no other order.
    pub checkout_demo: bool,
}

/// The row as the table holds it; [`Order`] is what the code works with. Also read from `to_jsonb`
/// of a row, as the claim statement returns it.
#[derive(Queryable, Selectable, Deserialize)]
#[diesel(table_name = orders)]
pub struct OrderRow {
    merchant_id: Uuid,
    id: Uuid,
    amount: i64,
    currency: String,
    status: OrderStatus,
    merchant_reference: Option<String>,
    description: Option<String>,
    #[diesel(deserialize_as = StrictMetadata)]
    metadata: BTreeMap<String, String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    checkout_demo: bool,
}

/// An order's `metadata` column read strictly: anything but an object of strings is an
/// error, never an order shown without its metadata. (Read from `to_jsonb`, the row's
/// `BTreeMap` is strict by itself.)
#[derive(diesel::deserialize::FromSqlRow)]
pub struct StrictMetadata(BTreeMap<String, String>);

impl diesel::deserialize::FromSql<diesel::sql_types::Jsonb, diesel::pg::Pg> for StrictMetadata {
    fn from_sql(bytes: diesel::pg::PgValue<'_>) -> diesel::deserialize::Result<Self> {
        let value = <serde_json::Value as diesel::deserialize::FromSql<
            diesel::sql_types::Jsonb,
            diesel::pg::Pg,
        >>::from_sql(bytes)?;
        Ok(StrictMetadata(serde_json::from_value(value)?))
    }
}

impl From<StrictMetadata> for BTreeMap<String, String> {
    fn from(metadata: StrictMetadata) -> Self {
        metadata.0
    }
}

impl Order {
    /// The order as the database left it once its attempt made its last move, to `attempt`
    /// at `at`: the triggers of the `payment_attempts` migration move the order in the
    /// attempt's own statement (`processing` when it is made, `paid` or `awaiting_payment`
    /// when it ends, with `updated_at` the same transaction time as the attempt's), so it
    /// need not be read again.
    pub fn following(mut self, attempt: AttemptStatus, at: DateTime<Utc>) -> Self {
        let status = match attempt {
            AttemptStatus::Created | AttemptStatus::Pending => OrderStatus::Processing,
            AttemptStatus::Authorized => OrderStatus::Authorized,
            AttemptStatus::Succeeded => OrderStatus::Paid,
            AttemptStatus::Failed | AttemptStatus::Canceled => OrderStatus::AwaitingPayment,
        };
        if status != self.status {
            self.status = status;
            self.updated_at = at;
        }
        self
    }

    pub fn from_row(row: OrderRow) -> Self {
        Order {
            id: OrderId(row.id),
            merchant_id: MerchantId(row.merchant_id),
            amount: row.amount,
            currency: row.currency,
            // Read strictly already (`OrderStatus`'s `FromSql`); the `order_status` domain
            // admits the same six statuses.
            status: row.status,
            merchant_reference: row.merchant_reference,
            description: row.description,
            metadata: row.metadata,
            created_at: row.created_at,
            updated_at: row.updated_at,
            checkout_demo: row.checkout_demo,
        }
    }
}

/// A validated order to create.
#[derive(Debug, Clone)]
pub struct NewOrder {
    pub amount: Amount,
    pub currency: Currency,
    pub merchant_reference: Option<String>,
    pub description: Option<String>,
    pub metadata: BTreeMap<String, String>,
    /// Made by the anonymous checkout demo ([`OrderFields::checkout_demo`]).
    pub checkout_demo: bool,
}

impl NewOrder {
    pub fn parse(
        amount: Option<MinorUnits>,
        currency: Option<&str>,
        merchant_reference: Option<String>,
        description: Option<String>,
        metadata: Option<BTreeMap<String, String>>,
    ) -> Result<Self, FieldProblems> {
        let mut problems = FieldProblems::new();
        let mut problem = |field: &str, message: String| problems.push((field.into(), message));
        let amount = match amount.map(Amount::parse) {
            None => {
                problem("/amount", "is required".into());
                None
            }
            Some(Err(m)) => {
                problem("/amount", m);
                None
            }
            Some(Ok(a)) => Some(a),
        };
        let currency = match currency.map(Currency::parse) {
            None => {
                problem("/currency", "is required".into());
                None
            }
            Some(Err(m)) => {
                problem("/currency", m);
                None
            }
            Some(Ok(c)) => Some(c),
        };
        // One reference, however it was composed: é as one code point or as e + accent.
        let merchant_reference = merchant_reference.map(|r| text::nfc(&r));
        if let Some(reference) = &merchant_reference {
            if reference.is_empty() || reference.chars().count() > MAX_REFERENCE_LEN {
                problem(
                    "/merchant_reference",
                    format!("must be 1 to {MAX_REFERENCE_LEN} characters"),
                );
            } else if let Some(why) = text::unclear_reference(reference) {
                problem("/merchant_reference", why.into());
            }
        }
        let description = description.map(|d| text::nfc(&d));
        if let Some(description) = &description {
            if description.chars().count() > MAX_DESCRIPTION_LEN {
                problem(
                    "/description",
                    format!("must be at most {MAX_DESCRIPTION_LEN} characters"),
                );
            } else if let Some(why) = text::unclear_text(description) {
                problem("/description", why.into());
            }
        }
        let metadata = metadata.unwrap_or_default();
        if metadata.len() > MAX_METADATA_KEYS {
            problem(
                "/metadata",
                format!(
                    "has {} keys; at most {MAX_METADATA_KEYS} are allowed",
                    metadata.len()
                ),
            );
        }
        problems.extend(metadata_entry_problems(&metadata));
        match (amount, currency) {
            (Some(amount), Some(currency)) if problems.is_empty() => Ok(NewOrder {
                amount,
                currency,
                merchant_reference,
                description,
                metadata,
                checkout_demo: false,
            }),
            _ => Err(problems),
        }
    }
}

/// The problems of metadata entries, one per broken rule: keys 1 to
/// [`MAX_METADATA_KEY_LEN`] characters, values at most [`MAX_METADATA_VALUE_LEN`].
fn metadata_entry_problems(metadata: &BTreeMap<String, String>) -> FieldProblems {
    let mut problems = FieldProblems::new();
    for (key, value) in metadata {
        if key.is_empty() || key.chars().count() > MAX_METADATA_KEY_LEN {
            problems.push((
                format!("/metadata/{key}"),
                format!("keys must be 1 to {MAX_METADATA_KEY_LEN} characters"),
            ));
        }
        if value.chars().count() > MAX_METADATA_VALUE_LEN {
            problems.push((
                format!("/metadata/{key}"),
                format!("values must be at most {MAX_METADATA_VALUE_LEN} characters"),
            ));
        }
    }
    problems
}

/// A change of an order's metadata (`POST /v1/orders/{id}`), Stripe's way: a key given with
/// a value is set, a key given as `""` is removed, and every other key is kept. Metadata is
/// the merchant's own notes, so it may change in any status of the order.
#[derive(Debug, Clone)]
pub struct MetadataUpdate {
    pub set: BTreeMap<String, String>,
    pub remove: Vec<String>,
}

impl MetadataUpdate {
    /// The change, or every field problem at once. The merged map's size depends on the order
    /// as it is when the change is made, so the statement that makes it checks that
    /// ([`MetadataUpdate::too_many_keys`]).
    pub fn parse(metadata: Option<BTreeMap<String, String>>) -> Result<Self, FieldProblems> {
        let Some(metadata) = metadata else {
            return Err(vec![("/metadata".into(), "is required".into())]);
        };
        let problems = metadata_entry_problems(&metadata);
        if !problems.is_empty() {
            return Err(problems);
        }
        let (removed, set): (BTreeMap<_, _>, BTreeMap<_, _>) = metadata
            .into_iter()
            .partition(|(_, value)| value.is_empty());
        Ok(MetadataUpdate {
            set,
            remove: removed.into_keys().collect(),
        })
    }

    /// The problem of a change the order's metadata could not take.
    pub fn too_many_keys() -> FieldProblems {
        vec![(
            "/metadata".into(),
            format!("would have more than {MAX_METADATA_KEYS} keys with this change; at most {MAX_METADATA_KEYS} are allowed"),
        )]
    }
}

/// An order's fields as the client sent them, read but not yet validated
/// ([`OrderFields::validate`]).
#[derive(Debug, Clone, Default)]
pub struct OrderFields {
    pub amount: Option<MinorUnits>,
    pub currency: Option<String>,
    pub merchant_reference: Option<String>,
    pub description: Option<String>,
    pub metadata: Option<BTreeMap<String, String>>,
    /// Set by the checkout demo's route, never read from a body: the demo's anonymous routes
    /// act only on orders it made (docs/guides/checkout.md, "The checkout page").
    pub checkout_demo: bool,
}

impl OrderFields {
    /// The order to create, or every field problem at once.
    pub fn validate(&self) -> Result<NewOrder, FieldProblems> {
        NewOrder::parse(
            self.amount,
            self.currency.as_deref(),
            self.merchant_reference.clone(),
            self.description.clone(),
            self.metadata.clone(),
        )
        .map(|order| NewOrder {
            checkout_demo: self.checkout_demo,
            ..order
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OrderError {
    #[error("the request's fields do not hold: {0:?}")]
    Invalid(FieldProblems),
    #[error(transparent)]
    Idempotency(#[from] IdempotencyError),
    #[error("merchant_reference is already used by order {0}")]
    MerchantReferenceExists(OrderId),
    #[error("no such order")]
    NotFound,
    #[error("the order is {} and cannot be canceled", .0.as_str())]
    NotCancelable(OrderStatus),
    #[error(transparent)]
    Unavailable(#[from] PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
    #[error("{0}")]
    Inconsistent(String),
}

/// The order that holds `reference`, once an insert was refused for it.
pub async fn order_with_reference(
    conn: &mut PgConn,
    merchant_id: MerchantId,
    reference: &str,
) -> QueryResult<Option<OrderId>> {
    orders::table
        .filter(orders::merchant_id.eq(merchant_id.0))
        .filter(orders::merchant_reference.eq(reference))
        .select(orders::id)
        .limit(1)
        .load::<Uuid>(conn)
        .await
        .and_then(crate::db::one)
        .optional()
        .map(|id| id.map(OrderId))
}

/// The order, if `merchant` (or support, with `None`) may see it.
pub async fn find_order(
    conn: &mut PgConn,
    merchant: Option<MerchantId>,
    id: OrderId,
) -> QueryResult<Option<Order>> {
    let query = orders::table.select(OrderRow::as_select()).into_boxed();
    let id = orders::id.eq(id.0);
    let row = find_in_scope(conn, query, id, orders::merchant_id, merchant);
    Ok(row.await?.map(Order::from_row))
}

#[cfg(test)]
mod tests {
    use super::OrderStatus::*;

    #[test]
    fn order_transitions_go_one_way() {
        assert!(AwaitingPayment.can_become(Processing));
        assert!(AwaitingPayment.can_become(Canceled));
        assert!(Processing.can_become(Paid));
        assert!(Processing.can_become(AwaitingPayment));
        for terminal in [Paid, Canceled] {
            for next in [AwaitingPayment, Processing, Paid, Canceled] {
                assert!(!terminal.can_become(next));
            }
        }
        assert!(!AwaitingPayment.can_become(Paid));
    }
}
