//! A late approval's refund, as the provider booked it (`compare`).

use serde_json::json;

use super::{finding, referenced, Attempt, Books, Entry, Found, Late};
use crate::payments::settlement::FindingKind;

/// A late approval payorch gave back (`refunded`): its refund booked for its whole amount.
/// Looked at when the approval was undone within the stretch (the grace has passed), or a
/// refund of it arrived.
pub(super) fn refund(
    books: &Books,
    late: &Late,
    entries: &[&Entry],
    attempt: Option<&Attempt>,
    found: &mut Vec<Found>,
) {
    if late.status != "refunded" {
        return;
    }
    let of: Vec<&Entry> = entries
        .iter()
        .copied()
        .filter(|e| {
            (e.provider_source_id.is_some() && e.provider_source_id == late.provider_undo_id)
                || referenced(e) == Some(late.id)
        })
        .collect();
    let now = late.undone_at.is_some_and(|at| books.within(at)) || of.iter().any(|e| books.now(e));
    if !now || late.undone_at.is_none_or(|at| at >= books.to) {
        return;
    }
    let booked: i64 = -of.iter().map(|e| e.amount).sum::<i64>();
    let kind = if booked == 0 {
        FindingKind::RefundNotBooked
    } else if booked != late.amount {
        FindingKind::AmountMismatch
    } else {
        return;
    };
    found.push(finding(
        kind,
        &crate::ids::LateApprovalId(late.id).to_string(),
        attempt,
        None,
        Some(late.amount),
        (!of.is_empty()).then_some(booked),
        &of,
        json!({"why": "payorch gave a late approval back; the provider booked its refund so",
               "late_approval": late.id, "provider_undo_id": late.provider_undo_id}),
    ));
}
