//! What a provider booked: its own record of money moved, as payorch reads it to check its
//! books against the provider's (docs/operations/reconciliation.md). Stripe's balance
//! transactions (`stripe/balance.rs`) and Adyen's settlement details report
//! (`adyen/settlement_report.rs`) are both read into [`SettlementEntry`].

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::words::words;

words! {
    /// What an entry moved, in payorch's words (the domain `settlement_entry_kind`).
    pub enum EntryKind {
        /// A charge's money came in (Stripe `charge`/`payment`; Adyen `Settled`).
        Charge => "charge",
        /// A refund's money went back (Stripe `refund`/`payment_refund`; Adyen `Refunded`).
        Refund => "refund",
        /// A dispute took the money (Stripe's dispute `adjustment` taking; Adyen `Chargeback`,
        /// `SecondChargeback`).
        DisputeWithdrawal => "dispute_withdrawal",
        /// A won dispute gave it back (Stripe's dispute `adjustment` giving; Adyen
        /// `ChargebackReversed`).
        DisputeReinstatement => "dispute_reinstatement",
        /// Anything else the record holds (fees, payouts, corrections): kept, not compared.
        Other => "other",
    }
}

/// One entry of a provider's record of money moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettlementEntry {
    /// Unique per provider, the same on every read (Stripe `txn_…`; Adyen the batch, the
    /// line's type and its modification reference).
    pub provider_entry_id: String,
    pub kind: EntryKind,
    /// The payment the money moved for (Stripe `pi_…`, Adyen the payment's pspReference).
    pub provider_payment_id: Option<String>,
    /// The charge's, refund's or dispute's own id at the provider.
    pub provider_source_id: Option<String>,
    /// Signed minor units: money in positive, money out negative.
    pub amount: i64,
    /// Lowercase ISO 4217.
    pub currency: String,
    /// When the entry entered the provider's record, the time the reconciliation's stretches
    /// go by: Stripe the transaction's `created`; Adyen the close of the batch it was settled
    /// in (a line settled days after it was made arrives in a batch closing days later, and
    /// must fall in a stretch not yet compared).
    pub booked_at: DateTime<Utc>,
    /// When the provider says the money moved, kept as evidence: Stripe `created`; Adyen
    /// the line's `Creation Date`.
    pub occurred_at: DateTime<Utc>,
    /// payorch's attempt or refund id, when the provider carries it.
    pub reference: Option<String>,
    /// Adyen's batch number.
    pub batch: Option<i64>,
}

/// Where to read from: the position the last read ended at (the adapter's own words: Stripe
/// the `created` second it read up to, Adyen the last batch), or, before any read, `since`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettlementQuery {
    pub position: Option<String>,
    pub since: DateTime<Utc>,
    /// Read nothing booked from here on (Stripe): what is booked now may still be written.
    pub until: DateTime<Utc>,
    /// Adyen: the batch the first read starts at (an account older than payorch's
    /// reconciliation has thousands of batches before it); later reads start after the
    /// position.
    pub first_batch: i64,
}

/// What one read brought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettlementPage {
    pub entries: Vec<SettlementEntry>,
    /// Where the next read starts.
    pub position: String,
    /// The provider's record is whole up to here: nothing booked before it can still appear.
    /// `None`: this read tells nothing new of it (no Adyen batch closed since).
    pub read_through: Option<DateTime<Utc>>,
    /// Whether entries are dated by the batch they were settled in (Adyen): such a record
    /// is compared with the longer batch grace (`SettlementSettings::batch_grace`), since a
    /// capture payorch made is settled in a batch that closes days later.
    pub dated_by_batch: bool,
}

/// A read of the record, as the caller logs it: what it brought, or why nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettlementRead {
    pub result: Result<SettlementPage, String>,
    /// The last answer's HTTP status; `None` when none came.
    pub http_status: Option<u16>,
    pub latency: Duration,
}

impl SettlementRead {
    /// A read that was not made, for `reason`.
    pub fn unread(reason: impl Into<String>) -> Self {
        SettlementRead {
            result: Err(reason.into()),
            http_status: None,
            latency: Duration::ZERO,
        }
    }
}

/// Minor units of a decimal amount in major units (`"12.50"` in eur: 1250), by ISO 4217's
/// exponent of `currency`; `None` when it is not a plain decimal or has more digits than the
/// currency has.
pub fn minor_units(major: &str, currency: &str) -> Option<i64> {
    let exponent = exponent(currency);
    let major = major.trim();
    let (whole, fraction) = major.split_once('.').unwrap_or((major, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole.chars().all(|c| c.is_ascii_digit())
        || !fraction.chars().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > exponent as usize {
        return None;
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let padded = format!("{fraction:0<width$}", width = exponent as usize);
    let fraction: i64 = if padded.is_empty() {
        0
    } else {
        padded.parse().ok()?
    };
    whole
        .checked_mul(10i64.pow(exponent))?
        .checked_add(fraction)
}

/// ISO 4217's number of decimals of `currency` (either case): 2 but for the listed ones.
pub fn exponent(currency: &str) -> u32 {
    const ZERO: [&str; 17] = [
        "bif", "clp", "djf", "gnf", "isk", "jpy", "kmf", "krw", "pyg", "rwf", "ugx", "uyi", "vnd",
        "vuv", "xaf", "xof", "xpf",
    ];
    const THREE: [&str; 7] = ["bhd", "iqd", "jod", "kwd", "lyd", "omr", "tnd"];
    let currency = currency.to_ascii_lowercase();
    if ZERO.contains(&currency.as_str()) {
        0
    } else if THREE.contains(&currency.as_str()) {
        3
    } else {
        2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_units_read_by_the_currencys_exponent() {
        assert_eq!(minor_units("12.50", "EUR"), Some(1250));
        assert_eq!(minor_units("12.5", "eur"), Some(1250));
        assert_eq!(minor_units("12", "eur"), Some(1200));
        assert_eq!(minor_units("0.07", "gbp"), Some(7));
        assert_eq!(minor_units("1500", "JPY"), Some(1500));
        assert_eq!(minor_units("1.234", "KWD"), Some(1234));
        // More digits than the currency has, or not a plain decimal.
        assert_eq!(minor_units("1.5", "jpy"), None);
        assert_eq!(minor_units("1.005", "eur"), None);
        assert_eq!(minor_units("-1.00", "eur"), None);
        assert_eq!(minor_units("", "eur"), None);
        assert_eq!(minor_units("1,00", "eur"), None);
    }

    #[test]
    fn every_entry_kind_reads_back_as_itself() {
        for k in EntryKind::ALL {
            assert_eq!(EntryKind::parse(k.as_str()), Some(k));
        }
    }
}
