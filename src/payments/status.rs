//! The statuses of the two state machines, orders' and attempts', with their allowed moves:
//! apart from both, because each follows the other (an order moves with its attempt; an
//! attempt refused by its order says the order's status) and neither file need import the
//! other for it. The database holds the same moves again (the `orders` and
//! `payment_attempts` migrations).

use serde::{Deserialize, Serialize};

use crate::words::words;

words! {
    /// An attempt's status: `created → pending → succeeded | failed` for an automatic capture;
    /// a hold adds `authorized → succeeded | canceled`, and a challenge abandoned or a hold voided
    /// before it was authorized ends `canceled` (docs/DESIGN.md, "Holds and challenges"). Each
    /// of `pending`, `authorized`, `succeeded`, `failed` and `canceled` may also be the first
    /// answer to a `created` attempt.
    #[derive(Serialize, Deserialize, diesel::deserialize::FromSqlRow, utoipa::ToSchema)]
    #[serde(rename_all = "snake_case")]
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub enum AttemptStatus {
        /// Recorded; the provider call may not have gone out yet.
        Created => "created",
        /// The provider has or may have the charge; its outcome is not known yet.
        Pending => "pending",
        /// Money held, not taken (a manual capture): captured or voided later.
        Authorized => "authorized",
        Succeeded => "succeeded",
        Failed => "failed",
        /// Nothing was or will be taken: a hold released, or a challenge abandoned.
        Canceled => "canceled",
    }
}

impl AttemptStatus {
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

words! {
    /// An order's status.
    #[derive(Serialize, Deserialize, diesel::deserialize::FromSqlRow, utoipa::ToSchema)]
    #[serde(rename_all = "snake_case")]
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub enum OrderStatus {
        AwaitingPayment => "awaiting_payment",
        Processing => "processing",
        /// Its payment holds the money; a capture pays it, a void makes it payable again.
        Authorized => "authorized",
        Paid => "paid",
        Canceled => "canceled",
        /// Paid, and part of it given back by succeeded refunds.
        PartiallyRefunded => "partially_refunded",
        /// Paid, and all of it given back.
        Refunded => "refunded",
    }
}

impl OrderStatus {
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
