//! What a delivery of a provider event did.

use serde::Serialize;

use crate::db::pool::PoolError;
use crate::ids::ProviderWebhookId;
use crate::payments::event_log::LogError;
use crate::words::words;

words! {
    /// What an event did.
    #[derive(Serialize, utoipa::ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum EventOutcome {
        /// Moved the attempt, or added to an attempt still open (its provider id).
        Applied => "applied",
        /// Arrived after the attempt had already moved to, or past, what it says.
        Stale => "stale",
        /// Contradicts the attempt's final status (`payment_failed` after `succeeded`), or what
        /// payorch asked for (another amount, currency or charge id): not applied, counted for a
        /// human to look at.
        Conflict => "conflict",
        /// Names no attempt payorch knows.
        UnknownAttempt => "unknown_attempt",
        /// A type payorch does not act on.
        Ignored => "ignored",
    }
}

impl EventOutcome {
    /// As an SQL literal, for a statement that records a fixed outcome.
    pub fn sql(self) -> String {
        format!("'{}'", self.as_str())
    }
}

/// The answer to one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// First delivery: recorded with what it did.
    Recorded {
        id: ProviderWebhookId,
        outcome: EventOutcome,
    },
    /// Delivered before: nothing changed.
    Duplicate,
}

#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    #[error(transparent)]
    Unavailable(#[from] PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
    #[error(transparent)]
    Log(#[from] LogError),
}

#[cfg(test)]
mod tests {
    use super::EventOutcome;

    /// Outcomes are written, never parsed back: the round trip is through `ALL`.
    #[test]
    fn every_outcome_has_a_word_of_its_own() {
        for outcome in EventOutcome::ALL {
            let back = EventOutcome::ALL
                .into_iter()
                .filter(|o| o.as_str() == outcome.as_str());
            assert_eq!(back.collect::<Vec<_>>(), vec![outcome]);
        }
    }
}
