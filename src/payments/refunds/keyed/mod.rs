//! The keyed statements of a refund, mirroring a payment's
//! ([`crate::payments::attempts::keyed`]): [`create_refund`], the work of the claim
//! statement (whole text: `tests/sql/claim_create_refund.sql`). Its answer is recorded, and
//! its key completed, by [`super::record`], consuming the request's
//! [`InFlightKey`](crate::idempotency::InFlightKey).

pub mod create_refund;

use serde::Deserialize;

pub use create_refund::CreateRefund;

use super::{Refund, RefundRow};

/// What a refund's claim statement made, or its replay read.
#[derive(Default, Deserialize)]
pub struct RefundMade {
    refund: Option<RefundRow>,
}

impl RefundMade {
    pub fn refund(self) -> Option<Refund> {
        self.refund.map(Refund::from)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::idempotency::claim::snapshot::claim_text;
    use crate::idempotency::Operation;
    use crate::ids::PaymentId;

    #[test]
    fn the_claim_statement_of_a_refund_reads_as_its_snapshot() {
        let work = CreateRefund::new(PaymentId::new(), Some(500), Some("duplicate"), Utc::now());
        assert_sql_snapshot(
            "claim_create_refund",
            &claim_text(Operation::CreateRefund, &work),
        );
    }
}
