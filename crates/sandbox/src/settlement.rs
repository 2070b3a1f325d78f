//! The providers' own record of money moved, as the sandbox keeps it (docs/guides/test-cards.md,
//! "Settlement records"): made from its ledger — a charge's money in when it was taken (at
//! once, or by each capture of a hold), a refund's out, each dispute's withdrawal and
//! reinstatement — and served as each provider serves it (`settlement_routes`): Stripe's
//! balance transactions and Adyen's settlement details report by batch.
//!
//! So that payorch's reconciliation can be proven to find what it must, the record can be
//! told to forget an entry (a charge or refund the provider "never booked") or to invent one
//! (a charge payorch never made, a second capture, another amount, a refund payorch never
//! asked for).
//!
//! Adyen's batches close every [`DEFAULT_BATCH_SECS`] (or as told) and on demand. A batch
//! holds what was booked before its close, by the whole second: whatever is booked in the
//! second it closes goes to the next, so a batch once served never gains an entry. Told to
//! settle `late_batches` late, batch `n` holds instead what was booked in batch `n - k`'s
//! time, with its `Creation Date`: as Adyen settles a capture days after it received it.

use std::collections::BTreeSet;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{random_id, Sandbox};

/// How often an Adyen batch closes unless told.
pub(crate) const DEFAULT_BATCH_SECS: i64 = 60;

/// One entry of the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Booked {
    /// Stripe's balance transaction id (`txn_…`).
    pub id: String,
    /// `stripe` or `adyen`: the face whose record lists it.
    pub protocol: String,
    /// `charge`, `refund`, `dispute_withdrawal` or `dispute_reinstatement`.
    pub kind: String,
    /// The payment (the intent; Adyen's payment pspReference).
    pub payment: String,
    /// The charge's, capture's, refund's or dispute's own id.
    pub source: String,
    /// Signed minor units: money in positive.
    pub amount: i64,
    pub currency: String,
    /// Unix seconds.
    pub created: i64,
    /// payorch's attempt id (a charge) or refund id (a refund), as its metadata or reference
    /// carried it.
    pub reference: Option<String>,
}

/// Which entries to forget: every entry of a payment of a kind, or one entry by id or source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Forget {
    pub id: Option<String>,
    pub source: Option<String>,
    pub payment: Option<String>,
    pub kind: Option<String>,
}

impl Forget {
    fn matches(&self, b: &Booked) -> bool {
        (self.id.is_some() || self.source.is_some() || self.payment.is_some())
            && self.id.as_ref().is_none_or(|id| *id == b.id)
            && self.source.as_ref().is_none_or(|s| *s == b.source)
            && self.payment.as_ref().is_none_or(|p| *p == b.payment)
            && self.kind.as_ref().is_none_or(|k| *k == b.kind)
    }
}

/// An entry to add: of `payment` (a new one, that payorch never made, when absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Invent {
    pub protocol: String,
    pub kind: String,
    pub payment: Option<String>,
    /// Minor units, positive: the sign is the kind's.
    pub amount: i64,
    pub currency: String,
    pub reference: Option<String>,
}

/// The forgotten and invented entries, and Adyen's batch closes.
pub(crate) struct Settlement {
    edits: Mutex<Edits>,
}

struct Edits {
    forgotten: Vec<Forget>,
    invented: Vec<Booked>,
    /// Each closed batch's end (Unix seconds, exclusive), oldest first: batch `n` is the
    /// `n`-th.
    closes: Vec<i64>,
    opened: i64,
    every_secs: i64,
    /// How many batches after the one covering its creation a line is settled in.
    late_batches: usize,
}

impl Settlement {
    pub(crate) fn new(now: i64) -> Self {
        Settlement {
            edits: Mutex::new(Edits {
                forgotten: Vec::new(),
                invented: Vec::new(),
                closes: Vec::new(),
                opened: now,
                every_secs: DEFAULT_BATCH_SECS,
                late_batches: 0,
            }),
        }
    }

    fn edits(&self) -> std::sync::MutexGuard<'_, Edits> {
        self.edits.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn forget(&self, forget: Forget) {
        self.edits().forgotten.push(forget);
    }

    /// Adds the entry; what it became.
    pub(crate) fn invent(&self, invent: Invent, now: i64) -> Booked {
        let sign = match invent.kind.as_str() {
            "refund" | "dispute_withdrawal" => -1,
            _ => 1,
        };
        let source_prefix = match invent.kind.as_str() {
            "refund" => "re",
            "charge" => "ch",
            _ => "du",
        };
        let booked = Booked {
            id: random_id("txn"),
            protocol: invent.protocol,
            kind: invent.kind,
            payment: invent.payment.unwrap_or_else(|| random_id("pi")),
            source: random_id(source_prefix),
            amount: sign * invent.amount.abs(),
            currency: invent.currency.to_ascii_lowercase(),
            created: now,
            reference: invent.reference,
        };
        self.edits().invented.push(booked.clone());
        booked
    }

    /// Closes the open batch now (and from now on every `every_secs`, if given); the number
    /// of the batch closed.
    pub(crate) fn close(&self, now: i64, every_secs: Option<i64>) -> usize {
        let mut edits = self.edits();
        edits.close_due(now);
        if let Some(every) = every_secs {
            edits.every_secs = every.max(1);
        }
        if edits.closes.last().is_none_or(|last| *last < now) {
            edits.closes.push(now);
        }
        edits.opened = now;
        edits.closes.len()
    }

    /// From now on, settles each line `late` batches after the one its creation falls in.
    pub(crate) fn settle_late(&self, late: usize) {
        self.edits().late_batches = late;
    }

    /// Batch `n` (1-based), if it has closed by `now`: the creation times of the lines it
    /// holds (`[start, end)`; empty while lines are settled later than `n` batches), and its
    /// close.
    pub(crate) fn batch(&self, n: usize, now: i64) -> Option<((i64, i64), i64)> {
        let close = self.batch_end(n, now)?.1;
        let late = self.edits().late_batches;
        let lines = match n.checked_sub(late) {
            Some(m) if m >= 1 => self.batch_end(m, now)?,
            _ => (0, 0),
        };
        Some((lines, close))
    }

    /// The end of batch `n` (1-based), if it has closed by `now`.
    pub(crate) fn batch_end(&self, n: usize, now: i64) -> Option<(i64, i64)> {
        let mut edits = self.edits();
        edits.close_due(now);
        let end = *edits.closes.get(n.checked_sub(1)?)?;
        let start = if n >= 2 {
            edits.closes[n - 2]
        } else {
            i64::MIN
        };
        Some((start, end))
    }
}

impl Edits {
    /// The batches whose time is up.
    fn close_due(&mut self, now: i64) {
        while self.opened + self.every_secs <= now {
            self.opened += self.every_secs;
            let end = self.opened;
            if self.closes.last().is_none_or(|last| *last < end) {
                self.closes.push(end);
            }
        }
    }
}

/// The whole record of both faces, oldest first: the ledger's money less what was forgotten,
/// with what was invented.
pub(crate) fn record(sb: &Sandbox) -> Vec<Booked> {
    let holds: BTreeSet<String> = sb
        .store
        .holds()
        .into_iter()
        .map(|h| h.provider_id)
        .collect();
    let mut booked = Vec::new();
    for charge in sb.store.ledger() {
        if charge.status != "succeeded" || holds.contains(&charge.provider_id) {
            continue;
        }
        let source = format!("ch_{}", charge.provider_id.trim_start_matches("pi_"));
        booked.push(Booked {
            id: format!("txn_{source}"),
            protocol: charge.protocol,
            kind: "charge".into(),
            payment: charge.provider_id,
            source,
            amount: charge.amount,
            currency: charge.currency,
            created: charge.created,
            reference: charge.attempt_id,
        });
    }
    for capture in sb.store.captures() {
        if capture.status != "succeeded" || capture.amount <= 0 {
            continue;
        }
        let source = capture
            .capture_id
            .clone()
            .unwrap_or_else(|| format!("ch_{}", capture.provider_id.trim_start_matches("pi_")));
        booked.push(Booked {
            id: format!("txn_{source}"),
            protocol: capture.protocol,
            kind: "charge".into(),
            payment: capture.provider_id,
            source,
            amount: capture.amount,
            currency: capture.currency,
            created: capture.created,
            reference: capture.attempt_id,
        });
    }
    for refund in sb.store.refund_ledger() {
        if refund.status != "succeeded" {
            continue;
        }
        booked.push(Booked {
            id: format!("txn_{}", refund.provider_id),
            protocol: refund.protocol,
            kind: "refund".into(),
            payment: refund.payment_intent,
            source: refund.provider_id,
            amount: -refund.amount,
            currency: refund.currency,
            created: refund.created,
            reference: refund.refund_id,
        });
    }
    for dispute in sb.disputes.all() {
        for money in dispute.money {
            booked.push(Booked {
                id: money.id,
                protocol: money.protocol,
                kind: if money.amount < 0 {
                    "dispute_withdrawal".into()
                } else {
                    "dispute_reinstatement".into()
                },
                payment: money.payment_intent,
                source: money.dispute,
                amount: money.amount,
                currency: money.currency,
                created: money.created,
                reference: None,
            });
        }
    }
    let edits = sb.settlement.edits();
    booked.retain(|b| !edits.forgotten.iter().any(|f| f.matches(b)));
    booked.extend(edits.invented.iter().cloned());
    booked.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
    booked
}

/// Major units of `amount` in `currency` (`1250` eur: `"12.50"`), as Adyen's reports write
/// them.
pub(crate) fn major_units(amount: i64, currency: &str) -> String {
    const ZERO: [&str; 17] = [
        "bif", "clp", "djf", "gnf", "isk", "jpy", "kmf", "krw", "pyg", "rwf", "ugx", "uyi", "vnd",
        "vuv", "xaf", "xof", "xpf",
    ];
    const THREE: [&str; 7] = ["bhd", "iqd", "jod", "kwd", "lyd", "omr", "tnd"];
    let currency = currency.to_ascii_lowercase();
    let exponent = if ZERO.contains(&currency.as_str()) {
        0
    } else if THREE.contains(&currency.as_str()) {
        3
    } else {
        2
    };
    let amount = amount.unsigned_abs();
    if exponent == 0 {
        return amount.to_string();
    }
    let unit = 10u64.pow(exponent);
    format!(
        "{}.{:0width$}",
        amount / unit,
        amount % unit,
        width = exponent as usize
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_close_by_the_clock_and_when_told() {
        let s = Settlement::new(1000);
        assert_eq!(s.batch_end(1, 1059), None);
        assert_eq!(s.batch_end(1, 1060), Some((i64::MIN, 1060)));
        assert_eq!(s.close(1070, Some(3600)), 2);
        assert_eq!(s.batch_end(2, 1070), Some((1060, 1070)));
        // Told again in the same second: the batch is that one.
        assert_eq!(s.close(1070, None), 2);
        assert_eq!(s.batch_end(3, 4000), None);
        assert_eq!(s.batch_end(3, 4670), Some((1070, 4670)));
    }

    #[test]
    fn lines_settled_late_come_in_a_later_batch() {
        let s = Settlement::new(1000);
        s.settle_late(1);
        s.close(1010, Some(3600));
        s.close(1020, None);
        // Batch 1 holds nothing; batch 2 what was created in batch 1's time, closing at 1020.
        assert_eq!(s.batch(1, 1020), Some(((0, 0), 1010)));
        assert_eq!(s.batch(2, 1020), Some(((i64::MIN, 1010), 1020)));
        assert_eq!(s.batch(3, 1020), None);
    }

    #[test]
    fn amounts_in_major_units() {
        assert_eq!(major_units(1250, "eur"), "12.50");
        assert_eq!(major_units(-7, "EUR"), "0.07");
        assert_eq!(major_units(1500, "jpy"), "1500");
        assert_eq!(major_units(1234, "kwd"), "1.234");
    }

    #[test]
    fn a_forget_names_something() {
        let b = Booked {
            id: "txn_1".into(),
            protocol: "stripe".into(),
            kind: "charge".into(),
            payment: "pi_1".into(),
            source: "ch_1".into(),
            amount: 1,
            currency: "eur".into(),
            created: 1,
            reference: None,
        };
        assert!(!Forget::default().matches(&b));
        let of_payment = Forget {
            payment: Some("pi_1".into()),
            kind: Some("charge".into()),
            ..Forget::default()
        };
        assert!(of_payment.matches(&b));
        let refunds = Forget {
            kind: Some("refund".into()),
            ..of_payment
        };
        assert!(!refunds.matches(&b));
    }
}
