//! Why the order cannot take a new attempt: read after a refused claim statement, which
//! recorded nothing (invariants 1, 2 and 5 of docs/DESIGN.md, "Attempts").

use diesel::prelude::*;
use diesel::result::DatabaseErrorKind;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use crate::db::schema::{orders, payment_attempts};
use crate::db::PgConn;
use crate::ids::{MerchantId, OrderId, PaymentId};
use crate::payments::status::{AttemptStatus, OrderStatus};

/// Why an attempt could not be made. Read after the refused claim statement, which recorded
/// nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The order already has a `created`, `pending` or `authorized` attempt.
    InProgress(PaymentId),
    /// The order is paid, by this attempt.
    AlreadyPaid(PaymentId),
    /// The order is canceled.
    NotPayable(OrderStatus),
    OrderNotFound,
}

/// Whether a failed insert of an attempt is the database refusing it by invariant 1, 2 or 5
/// (the order has an open or a succeeded attempt, or is not awaiting payment): the statement
/// failed whole; ask [`why_refused`] in the next one.
pub fn refuses_attempt(kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
    matches!(
        (kind, constraint),
        (
            DatabaseErrorKind::UniqueViolation,
            Some("payment_attempts_one_open" | "payment_attempts_one_succeeded")
        ) | (
            DatabaseErrorKind::CheckViolation,
            Some("payment_attempts_order_payable")
        )
    )
}

/// Why the order cannot take an attempt, as it stands now; `None` if it can after all (the
/// attempt in the way has just failed), so the caller may try once more.
pub async fn why_refused(
    conn: &mut PgConn,
    merchant_id: MerchantId,
    order_id: OrderId,
) -> QueryResult<Option<Refusal>> {
    // Read strictly (`OrderStatus`'s `FromSql`): a status the code does not know is an
    // error, not an order that is not there.
    let status: Option<OrderStatus> = orders::table
        .find((merchant_id.0, order_id.0))
        .select(orders::status)
        .limit(1)
        .load(conn)
        .await
        .and_then(crate::db::one)
        .optional()?;
    let Some(status) = status else {
        return Ok(Some(Refusal::OrderNotFound));
    };
    let in_the_way = [
        AttemptStatus::Created,
        AttemptStatus::Pending,
        AttemptStatus::Authorized,
        AttemptStatus::Succeeded,
    ]
    .map(AttemptStatus::as_str);
    let blocking: Option<(Uuid, AttemptStatus)> = payment_attempts::table
        .filter(payment_attempts::merchant_id.eq(merchant_id.0))
        .filter(payment_attempts::order_id.eq(order_id.0))
        .filter(payment_attempts::status.eq_any(in_the_way))
        .select((payment_attempts::id, payment_attempts::status))
        .order(payment_attempts::created_at.desc())
        .limit(1)
        .load(conn)
        .await
        .and_then(crate::db::one)
        .optional()?;
    Ok(match (status, blocking) {
        (_, Some((id, AttemptStatus::Succeeded))) => Some(Refusal::AlreadyPaid(PaymentId(id))),
        (_, Some((id, _))) => Some(Refusal::InProgress(PaymentId(id))),
        (OrderStatus::AwaitingPayment, None) => None,
        (other, None) => Some(Refusal::NotPayable(other)),
    })
}
