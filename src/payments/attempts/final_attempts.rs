//! Attempts this replica has seen become final, remembered so that a webhook about one of
//! them is judged without reading the attempt first (docs/DESIGN.md, "Webhooks").
//!
//! A final attempt never changes again: the database refuses any update of a `succeeded`,
//! `failed` or `canceled` row (`payment_attempts_guard_transition`). So a remembered final attempt is
//! exactly what a read would return, for as long as it is remembered. Open attempts are never
//! remembered.

use super::PaymentAttempt;
use crate::bounded_map::BoundedMap;
use crate::ids::PaymentId;

/// Past this many attempts the map is emptied and starts again: a bound on memory (a few MB),
/// not a cache policy worth more (a forgotten attempt costs one read).
const CAPACITY: usize = 20_000;

pub struct FinalAttempts {
    entries: BoundedMap<PaymentId, PaymentAttempt>,
}

impl Default for FinalAttempts {
    fn default() -> Self {
        FinalAttempts {
            entries: BoundedMap::new(CAPACITY),
        }
    }
}

impl FinalAttempts {
    /// Remembers `attempt` if it is final.
    pub fn remember(&self, attempt: &PaymentAttempt) {
        if !attempt.status.is_final() {
            return;
        }
        self.entries.insert(attempt.id, attempt.clone());
    }

    /// The final attempt `id`, if remembered.
    pub fn get(&self, id: PaymentId) -> Option<PaymentAttempt> {
        self.entries.get(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payments::AttemptStatus;

    #[test]
    fn only_final_attempts_are_remembered() {
        let finals = FinalAttempts::default();
        let mut attempt = crate::payments::attempts::tests::an_attempt();
        attempt.status = AttemptStatus::Pending;
        finals.remember(&attempt);
        assert!(finals.get(attempt.id).is_none());
        attempt.status = AttemptStatus::Succeeded;
        finals.remember(&attempt);
        assert_eq!(
            finals.get(attempt.id).map(|a| a.status),
            Some(AttemptStatus::Succeeded)
        );
    }
}
