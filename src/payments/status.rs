//! The statuses of the two state machines, orders' and attempts', with their allowed moves:
//! apart from both, because each follows the other (an order moves with its attempt; an
//! attempt refused by its order says the order's status) and neither file need import the
//! other for it. The database holds the same moves again (the `orders` and
//! `payment_attempts` migrations).

use serde::{Deserialize, Serialize};

/// An attempt's status: `created → pending → succeeded | failed` for an automatic capture;
/// a hold adds `authorized → succeeded | canceled`, and a challenge abandoned or a hold voided
/// before it was authorized ends `canceled` (docs/DESIGN.md, "Holds and challenges"). Each
/// of `pending`, `authorized`, `succeeded`, `failed` and `canceled` may also be the first
/// answer to a `created` attempt.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    diesel::deserialize::FromSqlRow,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[diesel(sql_type = diesel::sql_types::Text)]
pub enum AttemptStatus {
    /// Recorded; the provider call may not have gone out yet.
    Created,
    /// The provider has or may have the charge; its outcome is not known yet.
    Pending,
    /// Money held, not taken (a manual capture): captured or voided later.
    Authorized,
    Succeeded,
    Failed,
    /// Nothing was or will be taken: a hold released, or a challenge abandoned.
    Canceled,
}

impl AttemptStatus {
    /// Every status, for the tests that hold the `attempt_status` domain to it.
    pub const ALL: [AttemptStatus; 6] = [
        AttemptStatus::Created,
        AttemptStatus::Pending,
        AttemptStatus::Authorized,
        AttemptStatus::Succeeded,
        AttemptStatus::Failed,
        AttemptStatus::Canceled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AttemptStatus::Created => "created",
            AttemptStatus::Pending => "pending",
            AttemptStatus::Authorized => "authorized",
            AttemptStatus::Succeeded => "succeeded",
            AttemptStatus::Failed => "failed",
            AttemptStatus::Canceled => "canceled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "created" => AttemptStatus::Created,
            "pending" => AttemptStatus::Pending,
            "authorized" => AttemptStatus::Authorized,
            "succeeded" => AttemptStatus::Succeeded,
            "failed" => AttemptStatus::Failed,
            "canceled" => AttemptStatus::Canceled,
            _ => return None,
        })
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            AttemptStatus::Succeeded | AttemptStatus::Failed | AttemptStatus::Canceled
        )
    }

    /// Whether the request that made it has its answer: final, or a hold (`201 authorized`;
    /// what happens to the hold later is the capture's or void's own answer). The key that
    /// made it completes then, and a resumed request sends nothing more.
    pub fn is_answered(self) -> bool {
        self.is_final() || self == AttemptStatus::Authorized
    }

    /// Whether the provider may still settle it without anyone asking: not final and not a
    /// hold (a hold waits for its capture or void).
    pub fn is_unsettled(self) -> bool {
        matches!(self, AttemptStatus::Created | AttemptStatus::Pending)
    }

    /// As an SQL literal, for a statement's text where the status is fixed (a fixed value
    /// keeps one plan; a status that varies is bound).
    pub fn sql(self) -> String {
        format!("'{}'", self.as_str())
    }

    pub fn can_become(self, next: AttemptStatus) -> bool {
        use AttemptStatus::*;
        matches!(
            (self, next),
            (
                Created,
                Pending | Authorized | Succeeded | Failed | Canceled
            ) | (Pending, Authorized | Succeeded | Failed | Canceled)
                | (Authorized, Succeeded | Canceled)
        )
    }
}

/// Read strictly: a status the code does not know is an error, never a guess.
impl diesel::deserialize::FromSql<diesel::sql_types::Text, diesel::pg::Pg> for AttemptStatus {
    fn from_sql(bytes: diesel::pg::PgValue<'_>) -> diesel::deserialize::Result<Self> {
        let text = <String as diesel::deserialize::FromSql<
            diesel::sql_types::Text,
            diesel::pg::Pg,
        >>::from_sql(bytes)?;
        AttemptStatus::parse(&text)
            .ok_or_else(|| format!("unknown payment attempt status {text:?}").into())
    }
}

/// An order's status.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    diesel::deserialize::FromSqlRow,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[diesel(sql_type = diesel::sql_types::Text)]
pub enum OrderStatus {
    AwaitingPayment,
    Processing,
    /// Its payment holds the money; a capture pays it, a void makes it payable again.
    Authorized,
    Paid,
    Canceled,
    /// Paid, and part of it given back by succeeded refunds.
    PartiallyRefunded,
    /// Paid, and all of it given back.
    Refunded,
}

impl OrderStatus {
    /// Every status, for the tests that hold the `order_status` domain to it.
    pub const ALL: [OrderStatus; 7] = [
        OrderStatus::AwaitingPayment,
        OrderStatus::Processing,
        OrderStatus::Authorized,
        OrderStatus::Paid,
        OrderStatus::Canceled,
        OrderStatus::PartiallyRefunded,
        OrderStatus::Refunded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::AwaitingPayment => "awaiting_payment",
            OrderStatus::Processing => "processing",
            OrderStatus::Authorized => "authorized",
            OrderStatus::Paid => "paid",
            OrderStatus::Canceled => "canceled",
            OrderStatus::PartiallyRefunded => "partially_refunded",
            OrderStatus::Refunded => "refunded",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "awaiting_payment" => OrderStatus::AwaitingPayment,
            "processing" => OrderStatus::Processing,
            "authorized" => OrderStatus::Authorized,
            "paid" => OrderStatus::Paid,
            "canceled" => OrderStatus::Canceled,
            "partially_refunded" => OrderStatus::PartiallyRefunded,
            "refunded" => OrderStatus::Refunded,
            _ => return None,
        })
    }

    /// As an SQL literal (see [`AttemptStatus::sql`]).
    pub fn sql(self) -> String {
        format!("'{}'", self.as_str())
    }

    pub fn can_become(self, next: OrderStatus) -> bool {
        use OrderStatus::*;
        matches!(
            (self, next),
            (AwaitingPayment, Processing)
                | (AwaitingPayment, Canceled)
                | (Processing, Authorized)
                | (Processing, Paid)
                | (Processing, AwaitingPayment)
                | (Authorized, Paid)
                | (Authorized, AwaitingPayment)
                | (Paid, PartiallyRefunded)
                | (Paid, Refunded)
                | (PartiallyRefunded, Refunded)
        )
    }
}

/// Read strictly: a status the code does not know is an error, never a guess.
impl diesel::deserialize::FromSql<diesel::sql_types::Text, diesel::pg::Pg> for OrderStatus {
    fn from_sql(bytes: diesel::pg::PgValue<'_>) -> diesel::deserialize::Result<Self> {
        let text = <String as diesel::deserialize::FromSql<
            diesel::sql_types::Text,
            diesel::pg::Pg,
        >>::from_sql(bytes)?;
        OrderStatus::parse(&text).ok_or_else(|| format!("unknown order status {text:?}").into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_reads_back_as_itself() {
        for s in AttemptStatus::ALL {
            assert_eq!(AttemptStatus::parse(s.as_str()), Some(s));
        }
        for s in OrderStatus::ALL {
            assert_eq!(OrderStatus::parse(s.as_str()), Some(s));
        }
    }
}
