//! A payment's dispute money, as the provider moved it and payorch's disputes hold it
//! (`compare`).

use serde_json::json;

use super::{finding, Attempt, Books, Dispute, Entry, Found};
use crate::payments::settlement::FindingKind;

/// The dispute money of `payment`: what the provider withdrew less what it gave back, against
/// what payorch's disputes hold. Looked at when either side moved within the stretch, and
/// only once both have been still since its end: a withdrawal booked, or news applied, within
/// the grace may have its other half on its way, and is looked at in the stretch it falls in.
pub(super) fn money(
    books: &Books,
    payment: &str,
    entries: &[&Entry],
    attempt: Option<&Attempt>,
    found: &mut Vec<Found>,
) {
    let ours: Vec<&Dispute> = books
        .disputes
        .iter()
        .flatten()
        .filter(|d| d.provider_payment_id == payment)
        .collect();
    let moved =
        entries.iter().any(|e| books.now(e)) || ours.iter().any(|d| books.within(d.changed_at));
    let still = entries.iter().all(|e| e.booked_at < books.to)
        && ours.iter().all(|d| d.changed_at < books.to);
    if !moved || !still {
        return;
    }
    let withdrawn: i64 = -entries.iter().map(|e| e.amount).sum::<i64>();
    let held: Option<i64> = books
        .disputes
        .as_ref()
        .map(|_| ours.iter().map(|d| d.held).sum());
    if held == Some(withdrawn) {
        return;
    }
    found.push(finding(
        FindingKind::UnexplainedDispute,
        payment,
        attempt,
        None,
        Some(held.unwrap_or(0)),
        Some(withdrawn),
        entries,
        json!({"why": match held {
            Some(_) => "the provider's dispute money differs from what payorch's disputes hold",
            None => "the provider moved dispute money; payorch keeps no disputes",
        }}),
    ));
}
