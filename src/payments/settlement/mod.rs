//! Settlement reconciliation (docs/operations/reconciliation.md): on a schedule, payorch
//! reads each provider's own record of money moved (`PaymentProvider::settlement_entries`:
//! Stripe's balance transactions, Adyen's settlement details report), keeps it
//! (`settlement_entries`, a re-read inserts nothing) and compares it with its attempts,
//! refunds, late approvals and disputes. Every difference is a finding for a human
//! (`settlement_findings`, one open finding per subject), listed by support's
//! needs-a-human, counted and alerted on.
//!
//! Each round compares one stretch of time per provider: what was booked, and what payorch
//! finished, after the last stretch and up to the provider's record being whole less the
//! grace (`--settlement-grace-secs`; for Adyen, whose entries are dated by the batch they
//! were settled in, `--settlement-adyen-grace-secs`), so a capture or refund just made is
//! not yet "missing" and an attempt the reconciler is still asking about is not yet
//! "unknown". An entry read for the first time is compared whenever it comes.
//!
//! - `compare`: the comparison itself, of rows already read: no database, no provider.
//! - `store`: the statements of the cursor, the entries and the findings; `books`: the
//!   reading of what a stretch is compared with.
//! - `run`: one round per provider, and the loop.
//! - `gauges`: `payorch_settlement_findings_total` and the open findings' gauge.

use std::time::Duration;

use crate::words::words;

pub mod books;
pub mod compare;
pub mod gauges;
pub mod run;
pub mod store;

words! {
    /// What a difference between a provider's record and payorch's is (the domain
    /// `settlement_finding_kind`; docs/operations/reconciliation.md, "The findings").
    pub enum FindingKind {
        /// The provider booked a charge payorch does not know, or holds as not succeeded.
        UnknownCharge => "unknown_charge",
        /// Two charge entries (or more) for one payment: a hold captured twice, a charge
        /// booked twice.
        CapturedTwice => "captured_twice",
        /// One charge or refund, booked for another amount (or currency) than payorch's.
        AmountMismatch => "amount_mismatch",
        /// A payment payorch holds as succeeded that the provider never booked.
        ChargeNotBooked => "charge_not_booked",
        /// A refund payorch holds as succeeded that the provider never booked.
        RefundNotBooked => "refund_not_booked",
        /// A refund the provider booked that payorch did not make, or holds as not
        /// succeeded.
        UnknownRefund => "unknown_refund",
        /// Dispute money the provider moved that payorch's disputes do not explain.
        UnexplainedDispute => "unexplained_dispute",
    }
}

/// When the comparison runs, and how long it waits for payorch's books to settle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettlementSettings {
    /// How often each replica compares; `None`: never (the default).
    pub interval: Option<Duration>,
    /// How long after it was booked, or finished at payorch, a charge or refund is compared:
    /// longer than a capture's or refund's answer can take to be known (the reconciler's
    /// deadline), and for Adyen longer than a capture takes to be settled in a batch.
    pub grace: Duration,
    /// The grace of a record dated by settlement batch (Adyen): longer than a capture or
    /// refund takes to be settled in a batch and that batch to close (the account's
    /// settlement delay, days, plus its payout interval).
    pub batch_grace: Duration,
    /// How far back the first read of a provider's record reaches.
    pub first_lookback: Duration,
    /// Adyen: the first batch read (`--settlement-adyen-first-batch`).
    pub first_batch: i64,
}

/// The default grace: an hour, well past the reconciler's deadlines for an unknown answer.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3600);
/// The default batch grace: five days. Adyen settles a capture after the account's
/// settlement delay (two or three business days by default, so up to five calendar days over
/// a weekend), in the batch that then closes with the daily payout.
pub const DEFAULT_BATCH_GRACE: Duration = Duration::from_secs(5 * 24 * 3600);
/// The default first lookback: a day.
pub const DEFAULT_FIRST_LOOKBACK: Duration = Duration::from_secs(24 * 3600);

impl Default for SettlementSettings {
    fn default() -> Self {
        SettlementSettings {
            interval: None,
            grace: DEFAULT_GRACE,
            batch_grace: DEFAULT_BATCH_GRACE,
            first_lookback: DEFAULT_FIRST_LOOKBACK,
            first_batch: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FindingKind;

    #[test]
    fn every_finding_kind_reads_back_as_itself() {
        for k in FindingKind::ALL {
            assert_eq!(FindingKind::parse(k.as_str()), Some(k));
        }
    }
}
