//! The comparison of one stretch of a provider's record with payorch's books
//! (docs/operations/reconciliation.md, "The findings"), on rows already read: [`compare`]
//! decides (a payment's dispute money in `dispute`, a late approval's refund in `late`),
//! `store` reads and writes.
//!
//! A stretch is `[from, to)`, as the providers' records are read: up to a time, exclusive.
//! A payment is looked at when a charge of it was booked, or its attempt succeeded, within
//! the stretch; a refund when it was booked, or succeeded at payorch, within it; and
//! whenever an entry of it is read for the first time (`Books::fresh`), wherever it is
//! dated, so a line a provider settles late is compared when it arrives. Everything else
//! booked for the same payment, at any time, is read with it: a second capture booked a
//! day after the first is still a second capture.
//!
//! A charge or refund of a payment payorch does not know and that carries none of its
//! references (another system's sale on the same account: an invoice, a payment link, the
//! dashboard) is no finding: it is counted as `other`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use super::FindingKind;
use crate::ids::RefundId;
use crate::providers::settlement::EntryKind;

/// An entry of the provider's record, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub provider_entry_id: String,
    pub kind: EntryKind,
    pub provider_payment_id: Option<String>,
    pub provider_source_id: Option<String>,
    pub amount: i64,
    pub currency: String,
    pub booked_at: DateTime<Utc>,
    /// When the provider says the money moved (Adyen's Creation Date): evidence only.
    pub occurred_at: DateTime<Utc>,
    pub reference: Option<String>,
}

/// A payment attempt of the provider, as payorch holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub merchant_id: Uuid,
    pub id: Uuid,
    pub provider_payment_id: Option<String>,
    pub status: String,
    pub amount: i64,
    pub amount_captured: Option<i64>,
    pub currency: String,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A refund, as payorch holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refund {
    pub merchant_id: Uuid,
    pub id: Uuid,
    pub payment_id: Uuid,
    pub provider_refund_id: Option<String>,
    pub status: String,
    pub amount: i64,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A late approval (docs/guides/declines.md, "Late approvals"): a charge payorch knows it
/// did not want, and gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Late {
    pub id: Uuid,
    pub provider_payment_id: String,
    pub approved_as: String,
    pub status: String,
    pub amount: i64,
    pub provider_undo_id: Option<String>,
    /// When it was given back (`refunded`) or found not to need it.
    pub undone_at: Option<DateTime<Utc>>,
}

/// A dispute's money as payorch holds it: what it holds (the payer has it back) while its
/// status is needs_response, under_review or lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispute {
    pub provider_payment_id: String,
    pub held: i64,
    /// When payorch last changed it (its news applied).
    pub changed_at: DateTime<Utc>,
}

/// What one stretch is compared with.
#[derive(Debug, Clone, Default)]
pub struct Books {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub entries: Vec<Entry>,
    pub attempts: Vec<Attempt>,
    pub refunds: Vec<Refund>,
    pub late: Vec<Late>,
    /// `None` when payorch keeps no disputes (before the `disputes` table): every dispute
    /// entry is then unexplained.
    pub disputes: Option<Vec<Dispute>>,
    /// Entries read for the first time in this round and dated before the stretch: their
    /// payments are looked at now, as if booked in it.
    pub fresh: BTreeSet<String>,
}

/// One difference, with what it was found from.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub kind: FindingKind,
    /// One open finding per provider, kind and subject: the provider's payment id, or the
    /// refund's id.
    pub subject: String,
    pub provider_payment_id: Option<String>,
    pub merchant_id: Option<Uuid>,
    pub attempt_id: Option<Uuid>,
    pub refund_id: Option<Uuid>,
    pub expected: Option<i64>,
    pub found: Option<i64>,
    pub currency: Option<String>,
    pub evidence: Value,
}

impl Books {
    fn within(&self, at: DateTime<Utc>) -> bool {
        self.from <= at && at < self.to
    }

    /// Whether `e` is news of this stretch: booked in it, or read for the first time.
    fn now(&self, e: &Entry) -> bool {
        self.within(e.booked_at) || self.fresh.contains(&e.provider_entry_id)
    }
}

/// What one stretch's comparison found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    pub found: Vec<Found>,
    /// The entries of charges and refunds that are not payorch's (no payment it knows, none
    /// of its references): kept, counted, never a finding.
    pub other: Vec<String>,
}

/// Every difference in `books`' stretch.
pub fn compare(books: &Books) -> Vec<Found> {
    comparison(books).found
}

/// Every difference in `books`' stretch, and the entries that are other systems'.
pub fn comparison(books: &Books) -> Comparison {
    let mut found = Vec::new();
    let mut other = Vec::new();
    let by_payment: BTreeMap<&str, &Attempt> = books
        .attempts
        .iter()
        .filter_map(|a| Some((a.provider_payment_id.as_deref()?, a)))
        .collect();
    let by_id: BTreeMap<Uuid, &Attempt> = books.attempts.iter().map(|a| (a.id, a)).collect();
    // The payments looked at: a charge, refund or dispute booked in the stretch, an attempt
    // or refund finished in it.
    let mut payments: BTreeSet<&str> = BTreeSet::new();
    for e in &books.entries {
        match (&e.provider_payment_id, e.kind) {
            (_, EntryKind::Other) => {}
            (Some(p), _) if books.now(e) => {
                payments.insert(p);
            }
            (None, EntryKind::Charge) if books.now(e) && referenced(e).is_none() => {
                other.push(e.provider_entry_id.clone())
            }
            (None, EntryKind::Charge) if books.now(e) => found.push(finding(
                FindingKind::UnknownCharge,
                &e.provider_entry_id,
                None,
                None,
                None,
                Some(e.amount),
                &[e],
                json!("a charge of no payment"),
            )),
            _ => {}
        }
    }
    for a in &books.attempts {
        if a.status == "succeeded" && a.finished_at.is_some_and(|at| books.within(at)) {
            payments.extend(a.provider_payment_id.as_deref());
        }
    }
    for d in books.disputes.iter().flatten() {
        if books.within(d.changed_at) {
            payments.insert(&d.provider_payment_id);
        }
    }
    for r in &books.refunds {
        if r.finished_at.is_some_and(|at| books.within(at)) {
            let attempt = books.attempts.iter().find(|a| a.id == r.payment_id);
            payments.extend(attempt.and_then(|a| a.provider_payment_id.as_deref()));
        }
    }
    for l in &books.late {
        if l.undone_at.is_some_and(|at| books.within(at)) {
            payments.insert(&l.provider_payment_id);
        }
    }
    for payment in payments {
        let of = |kind: EntryKind| -> Vec<&Entry> {
            books
                .entries
                .iter()
                .filter(|e| e.kind == kind && e.provider_payment_id.as_deref() == Some(payment))
                .collect()
        };
        let charges = of(EntryKind::Charge);
        let attempt = by_payment.get(payment).copied().or_else(|| {
            charges
                .iter()
                .find_map(|e| by_id.get(&referenced(e)?).copied())
        });
        let late = books.late.iter().find(|l| l.provider_payment_id == payment);
        // Another system's sale on the same account: no payment payorch knows, none of its
        // references on any of the payment's entries.
        let entries: Vec<&Entry> = books
            .entries
            .iter()
            .filter(|e| e.provider_payment_id.as_deref() == Some(payment))
            .collect();
        if attempt.is_none() && late.is_none() && entries.iter().all(|e| referenced(e).is_none()) {
            other.extend(
                entries
                    .iter()
                    .filter(|e| e.kind != EntryKind::Other && books.now(e))
                    .map(|e| e.provider_entry_id.clone()),
            );
            continue;
        }
        charge(books, payment, &charges, attempt, late, &mut found);
        refunds(books, &of(EntryKind::Refund), attempt, late, &mut found);
        if let Some(l) = late {
            late::refund(books, l, &of(EntryKind::Refund), attempt, &mut found);
        }
        let mut disputed = of(EntryKind::DisputeWithdrawal);
        disputed.extend(of(EntryKind::DisputeReinstatement));
        dispute::money(books, payment, &disputed, attempt, &mut found);
    }
    Comparison { found, other }
}

/// The charge of `payment`: booked once, for what payorch took.
fn charge(
    books: &Books,
    payment: &str,
    charges: &[&Entry],
    attempt: Option<&Attempt>,
    late: Option<&Late>,
    found: &mut Vec<Found>,
) {
    let booked_now = charges.iter().any(|e| books.now(e));
    let succeeded = attempt.filter(|a| a.status == "succeeded");
    let finished_now = succeeded.is_some_and(|a| a.finished_at.is_some_and(|at| books.within(at)));
    if !booked_now && !finished_now {
        return;
    }
    // What payorch says was taken: its capture, or a late approval's charge (given back by
    // a refund, compared as a refund).
    let expected = succeeded
        .map(|a| a.amount_captured.unwrap_or(a.amount))
        .or_else(|| {
            late.filter(|l| l.approved_as == "succeeded")
                .map(|l| l.amount)
        });
    let booked: i64 = charges.iter().map(|e| e.amount).sum();
    let currency = attempt.map(|a| a.currency.as_str());
    let mut push = |kind, why: &str| {
        found.push(finding(
            kind,
            payment,
            attempt,
            None,
            expected,
            (!charges.is_empty()).then_some(booked),
            charges,
            json!({"why": why, "attempt": attempt.map(attempt_view), "late_approval": late.map(|l| l.id)}),
        ))
    };
    match (charges.len(), expected) {
        (0, Some(_)) if finished_now => push(
            FindingKind::ChargeNotBooked,
            "payorch holds the payment as succeeded; the provider booked no charge",
        ),
        (0, _) => {}
        (1, None) => push(
            FindingKind::UnknownCharge,
            match attempt {
                Some(_) => {
                    "the provider booked a charge of a payment payorch holds as not succeeded"
                }
                None => "the provider booked a charge of a payment payorch does not know",
            },
        ),
        (1, Some(amount)) => {
            let other_currency = currency.is_some_and(|c| c != charges[0].currency);
            if amount != booked || other_currency {
                push(
                    FindingKind::AmountMismatch,
                    "the charge was booked for another amount than payorch took",
                )
            }
        }
        _ => push(
            FindingKind::CapturedTwice,
            "the provider booked more than one charge of one payment",
        ),
    }
}

/// A payment's refunds: each of payorch's booked for its amount, and none booked that
/// payorch did not make.
fn refunds(
    books: &Books,
    entries: &[&Entry],
    attempt: Option<&Attempt>,
    late: Option<&Late>,
    found: &mut Vec<Found>,
) {
    let ours: Vec<&Refund> = match attempt {
        Some(a) => books
            .refunds
            .iter()
            .filter(|r| r.payment_id == a.id)
            .collect(),
        None => Vec::new(),
    };
    let is_of = |e: &Entry, r: &Refund| {
        (e.provider_source_id.is_some() && e.provider_source_id == r.provider_refund_id)
            || referenced(e) == Some(r.id)
    };
    let is_late = |e: &Entry| {
        late.is_some_and(|l| {
            (e.provider_source_id.is_some() && e.provider_source_id == l.provider_undo_id)
                || referenced(e) == Some(l.id)
        })
    };
    for r in ours.iter().filter(|r| r.status == "succeeded") {
        let of: Vec<&Entry> = entries.iter().copied().filter(|e| is_of(e, r)).collect();
        let now =
            r.finished_at.is_some_and(|at| books.within(at)) || of.iter().any(|e| books.now(e));
        if !now {
            continue;
        }
        let booked: i64 = -of.iter().map(|e| e.amount).sum::<i64>();
        let kind = if booked == 0 && r.finished_at.is_some_and(|at| at < books.to) {
            FindingKind::RefundNotBooked
        } else if booked != r.amount {
            FindingKind::AmountMismatch
        } else {
            continue;
        };
        found.push(finding(
            kind,
            &RefundId(r.id).to_string(),
            attempt,
            Some(r),
            Some(r.amount),
            (!of.is_empty()).then_some(booked),
            &of,
            json!({"why": "payorch's succeeded refund, as the provider booked it",
                   "refund": refund_view(r)}),
        ));
    }
    // The provider's refunds, each by its own id: booked in the stretch, money out in the
    // end (a refund that failed after it was booked nets to nothing), and not one of
    // payorch's succeeded refunds nor a late approval's.
    let mut by_source: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for e in entries {
        let key = e
            .provider_source_id
            .as_deref()
            .unwrap_or(&e.provider_entry_id);
        by_source.entry(key).or_default().push(e);
    }
    for (source, group) in by_source {
        let net: i64 = group.iter().map(|e| e.amount).sum();
        if net == 0 || !group.iter().any(|e| books.now(e)) {
            continue;
        }
        if group.iter().any(|e| is_late(e)) {
            continue;
        }
        let matched = ours.iter().find(|r| group.iter().any(|e| is_of(e, r)));
        // A refund payorch still waits on (pending) is compared once it succeeds; only one
        // payorch holds as failed, or none of its, is money it did not give back.
        if matched.is_some_and(|r| r.status != "failed") {
            continue;
        }
        found.push(finding(
            FindingKind::UnknownRefund,
            source,
            attempt,
            matched.copied(),
            None,
            Some(-net),
            &group,
            json!({"why": match matched {
                       Some(_) => "the provider booked a refund payorch holds as not succeeded",
                       None => "the provider booked a refund payorch did not make",
                   },
                   "refund": matched.map(|r| refund_view(r))}),
        ));
    }
}

#[allow(clippy::too_many_arguments)]
fn finding(
    kind: FindingKind,
    subject: &str,
    attempt: Option<&Attempt>,
    refund: Option<&Refund>,
    expected: Option<i64>,
    booked: Option<i64>,
    entries: &[&Entry],
    detail: Value,
) -> Found {
    let payment = entries
        .iter()
        .find_map(|e| e.provider_payment_id.clone())
        .or_else(|| attempt.and_then(|a| a.provider_payment_id.clone()));
    let currency = entries
        .first()
        .map(|e| e.currency.clone())
        .or_else(|| attempt.map(|a| a.currency.clone()));
    Found {
        kind,
        subject: subject.to_owned(),
        provider_payment_id: payment,
        merchant_id: attempt.map(|a| a.merchant_id),
        attempt_id: attempt.map(|a| a.id),
        refund_id: refund.map(|r| r.id),
        expected,
        found: booked,
        currency,
        evidence: json!({
            "detail": detail,
            "entries": entries.iter().map(|e| entry_view(e)).collect::<Vec<_>>(),
        }),
    }
}

/// The payorch id an entry's reference names (`pay_…`, `re_…`, `la_…`: the metadata or
/// reference payorch sent), as the rows hold it.
pub fn referenced(e: &Entry) -> Option<Uuid> {
    let reference = e.reference.as_deref()?;
    let hex = reference.rsplit_once('_').map_or(reference, |(_, hex)| hex);
    Uuid::try_parse(hex).ok()
}

fn entry_view(e: &Entry) -> Value {
    json!({"id": e.provider_entry_id, "kind": e.kind.as_str(), "amount": e.amount,
           "currency": e.currency, "booked_at": e.booked_at, "occurred_at": e.occurred_at,
           "source": e.provider_source_id,
           "reference": e.reference})
}

fn attempt_view(a: &Attempt) -> Value {
    json!({"id": a.id, "status": a.status, "amount": a.amount,
           "amount_captured": a.amount_captured, "currency": a.currency,
           "finished_at": a.finished_at})
}

fn refund_view(r: &Refund) -> Value {
    json!({"id": r.id, "status": r.status, "amount": r.amount,
           "provider_refund_id": r.provider_refund_id, "finished_at": r.finished_at})
}

mod dispute;
mod late;

#[cfg(test)]
mod tests;
