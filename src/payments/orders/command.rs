//! An order's own use cases, behind `POST /v1/orders`, `POST /v1/orders/{id}/cancel` and
//! `POST /v1/orders/{id}` (its metadata): one
//! entry ([`run`]) taking one context ([`OrderContext`]), as a payment
//! ([`crate::payments::attempts::pay::pay`]) and a refund
//! ([`crate::payments::refunds::refund::refund`]) enter. Each command is database-only: its
//! work runs once per key, in the claim statement ([`super::keyed`]), and the answer is the
//! order as made, or, replayed, under the first status as it is now.

use std::collections::BTreeMap;

use super::keyed::{CancelOrder, CreateOrder, OrderMade, UpdateOrder};
use super::{find_order, order_with_reference, MetadataUpdate, Order, OrderError, OrderFields};
use crate::db::PgConn;
use crate::idempotency::{claim, Keyed, KeyedWork, RecordAs};
use crate::ids::OrderId;
use crate::payments::service::Context;

/// Everything one order request needs: the command is its input.
pub type OrderContext<'a> = Context<'a, OrderCommand>;

/// What to do with an order.
#[derive(Debug, Clone)]
pub enum OrderCommand {
    /// `POST /v1/orders`: make one of these fields.
    Create(OrderFields),
    /// `POST /v1/orders/{id}/cancel`.
    Cancel(OrderId),
    /// `POST /v1/orders/{id}`: change its metadata, as read from the body.
    Update {
        id: OrderId,
        metadata: Option<BTreeMap<String, String>>,
    },
}

/// The answer to an order request.
#[derive(Debug)]
pub struct OrderAnswer {
    /// The order as made, or, replayed, as it is now.
    pub order: Order,
    pub status: u16,
    pub replayed: bool,
}

/// Runs the context's command once per key.
pub async fn run(ctx: &OrderContext<'_>) -> Result<OrderAnswer, OrderError> {
    let merchant_id = ctx.keyed.merchant_id;
    match &ctx.input {
        OrderCommand::Create(fields) => {
            let new_order = fields.validate().map_err(OrderError::Invalid)?;
            keyed(ctx, &CreateOrder::new(&new_order), async |conn| {
                // Only the reference can refuse a new order: ids are fresh UUIDv7s.
                let reference = new_order.merchant_reference.as_deref().unwrap_or_default();
                Ok(
                    match order_with_reference(conn, merchant_id, reference).await? {
                        Some(id) => OrderError::MerchantReferenceExists(id),
                        None => OrderError::Inconsistent(
                            "a refused order reference has no order".into(),
                        ),
                    },
                )
            })
            .await
        }
        OrderCommand::Cancel(id) => {
            let id = *id;
            keyed(ctx, &CancelOrder { id }, async |conn| {
                Ok(match find_order(conn, Some(merchant_id), id).await? {
                    None => OrderError::NotFound,
                    Some(order) => OrderError::NotCancelable(order.status),
                })
            })
            .await
        }
        OrderCommand::Update { id, metadata } => {
            let id = *id;
            let update = MetadataUpdate::parse(metadata.clone()).map_err(OrderError::Invalid)?;
            keyed(ctx, &UpdateOrder::new(id, &update), async |conn| {
                Ok(match find_order(conn, Some(merchant_id), id).await? {
                    None => OrderError::NotFound,
                    // The statement found the order and the merged map too big for it.
                    Some(_) => OrderError::Invalid(MetadataUpdate::too_many_keys()),
                })
            })
            .await
        }
    }
}

/// Runs a database-only order operation once per key, in one statement, and answers with
/// the order: as made, or, replayed, under the first status as it is now. `declined` says
/// why the work did nothing.
async fn keyed<W: KeyedWork<Made = OrderMade>>(
    ctx: &OrderContext<'_>,
    work: &W,
    declined: impl AsyncFnOnce(&mut PgConn) -> Result<OrderError, OrderError>,
) -> Result<OrderAnswer, OrderError> {
    let order = |made: OrderMade| {
        made.order()
            .ok_or_else(|| OrderError::Inconsistent("an order key names no order".into()))
    };
    match claim(ctx.pool, ctx.keys, ctx.keyed, work).await? {
        Keyed::Made { made, key: None } => {
            let RecordAs::Completed { status } = work.record_as() else {
                return Err(OrderError::Inconsistent(
                    "an order key was left in flight".into(),
                ));
            };
            Ok(OrderAnswer {
                order: order(made)?,
                status,
                replayed: false,
            })
        }
        Keyed::Replayed { status, current } => Ok(OrderAnswer {
            order: order(current)?,
            status,
            replayed: true,
        }),
        Keyed::Declined { .. } => {
            let mut conn = ctx.pool.get().await?;
            Err(declined(&mut conn).await?)
        }
        Keyed::Made { key: Some(_), .. } | Keyed::Resumed { .. } => Err(OrderError::Inconsistent(
            "an order key was left in flight".into(),
        )),
    }
}
