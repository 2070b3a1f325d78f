//! Which news may move a dispute: the rules of the `…_disputes` migration's
//! `disputes_guard_transition`, judged before the update so a refused move is recorded
//! `stale` with its reason instead of failing the delivery (the guard stays the backstop).
//!
//! News of the status and stage the dispute is at that changes its amount or its due date
//! (a partial chargeback corrected, a deadline moved) is applied as an update: the guard lets
//! those change at any status, and the migration's hold follows the amount. It makes no
//! `dispute.updated` event: that event names a (status, stage) the dispute reached, once.

use chrono::{DateTime, Utc};

use super::{DisputeStage, DisputeStatus};

/// Where a dispute stands, and the provider's time of the last event applied to it.
#[derive(Debug, Clone, Copy)]
pub struct Standing {
    pub status: DisputeStatus,
    pub stage: DisputeStage,
    pub at: DateTime<Utc>,
}

/// `Ok` if news of `to` at `to_stage`, told at `at`, moves a dispute standing as `from`, or
/// changes its terms (`new_terms`: another amount or due date) where it stands; otherwise
/// why not (the event is then `stale`).
pub fn judge(
    from: Standing,
    to: DisputeStatus,
    to_stage: DisputeStage,
    at: DateTime<Utc>,
    new_terms: bool,
) -> Result<(), String> {
    use DisputeStatus::*;
    if at < from.at {
        return Err(format!(
            "older than the last event applied ({} at {}): {} at {} not applied",
            from.status.as_str(),
            from.at.to_rfc3339(),
            to.as_str(),
            at.to_rfc3339()
        ));
    }
    if to_stage.rank() < from.stage.rank() {
        return Err(format!(
            "the dispute is at stage {}, past {}",
            from.stage.as_str(),
            to_stage.as_str()
        ));
    }
    if to == from.status && to_stage == from.stage {
        if new_terms {
            return Ok(());
        }
        return Err(format!("already {} at {}", to.as_str(), to_stage.as_str()));
    }
    let allowed = match (from.status, to) {
        (WarningClosed, _) => false,
        (same, next) if same == next => to_stage.rank() > from.stage.rank(),
        (WarningNeedsResponse, next) => next != WarningNeedsResponse,
        (WarningUnderReview, next) => !matches!(next, WarningNeedsResponse),
        (NeedsResponse, next) => matches!(next, UnderReview | Won | Lost),
        (UnderReview, next) => matches!(next, Won | Lost),
        // The scheme's ruling is its last word: once at arbitration, no flip.
        (Won | Lost, _) if from.stage == DisputeStage::Arbitration => false,
        (Won, Lost) => matches!(
            to_stage,
            DisputeStage::SecondChargeback | DisputeStage::Arbitration
        ),
        (Lost, Won) => matches!(
            to_stage,
            DisputeStage::PreArbitration | DisputeStage::Arbitration
        ),
        _ => false,
    };
    if allowed {
        Ok(())
    } else {
        Err(format!(
            "a dispute cannot move from {} ({}) to {} ({})",
            from.status.as_str(),
            from.stage.as_str(),
            to.as_str(),
            to_stage.as_str()
        ))
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use DisputeStage::*;
    use DisputeStatus::*;

    fn at(second: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + second, 0).unwrap()
    }

    fn standing(status: DisputeStatus, stage: DisputeStage) -> Standing {
        Standing {
            status,
            stage,
            at: at(0),
        }
    }

    #[test]
    fn every_move_of_the_migration_is_allowed_and_no_other() {
        let allowed = [
            (WarningNeedsResponse, WarningUnderReview),
            (WarningNeedsResponse, WarningClosed),
            (WarningNeedsResponse, NeedsResponse),
            (WarningNeedsResponse, UnderReview),
            (WarningNeedsResponse, Won),
            (WarningNeedsResponse, Lost),
            (WarningUnderReview, WarningClosed),
            (WarningUnderReview, NeedsResponse),
            (WarningUnderReview, UnderReview),
            (WarningUnderReview, Won),
            (WarningUnderReview, Lost),
            (NeedsResponse, UnderReview),
            (NeedsResponse, Won),
            (NeedsResponse, Lost),
            (UnderReview, Won),
            (UnderReview, Lost),
        ];
        for from in DisputeStatus::ALL {
            for to in DisputeStatus::ALL {
                let stage = if from.as_str().starts_with("warning") {
                    Inquiry
                } else {
                    Chargeback
                };
                let to_stage = if to.as_str().starts_with("warning") {
                    Inquiry
                } else {
                    Chargeback
                };
                let verdict = judge(
                    standing(from, stage),
                    to,
                    to_stage.max_rank(stage),
                    at(1),
                    false,
                );
                assert_eq!(
                    verdict.is_ok(),
                    allowed.contains(&(from, to)),
                    "{from:?} -> {to:?}: {verdict:?}"
                );
            }
        }
    }

    #[test]
    fn a_won_dispute_is_lost_only_at_a_second_chargeback_and_a_lost_one_won_only_at_pre_arbitration(
    ) {
        assert!(judge(standing(Won, Chargeback), Lost, Chargeback, at(1), false).is_err());
        assert!(judge(
            standing(Won, Chargeback),
            Lost,
            SecondChargeback,
            at(1),
            false
        )
        .is_ok());
        assert!(judge(standing(Lost, Chargeback), Won, Chargeback, at(1), false).is_err());
        assert!(judge(
            standing(Lost, SecondChargeback),
            Won,
            PreArbitration,
            at(1),
            false
        )
        .is_ok());
        assert!(judge(
            standing(Lost, Chargeback),
            Lost,
            PreArbitration,
            at(1),
            false
        )
        .is_ok());
        assert!(judge(
            standing(WarningClosed, Inquiry),
            WarningClosed,
            Chargeback,
            at(1),
            false
        )
        .is_err());
        // The scheme's ruling decides either way.
        assert!(judge(
            standing(Lost, PreArbitration),
            Won,
            Arbitration,
            at(1),
            false
        )
        .is_ok());
        assert!(judge(
            standing(Won, PreArbitration),
            Lost,
            Arbitration,
            at(1),
            false
        )
        .is_ok());
        // And it is final.
        let ruled = standing(Won, Arbitration);
        assert!(judge(ruled, Lost, Arbitration, at(1), false).is_err());
        let ruled = standing(Lost, Arbitration);
        assert!(judge(ruled, Won, Arbitration, at(1), false).is_err());
    }

    #[test]
    fn older_news_the_same_news_and_an_earlier_stage_are_refused() {
        let open = standing(NeedsResponse, Chargeback);
        assert!(judge(open, Won, Chargeback, at(-1), false)
            .unwrap_err()
            .starts_with("older"));
        assert!(judge(open, NeedsResponse, Chargeback, at(1), false)
            .unwrap_err()
            .starts_with("already"));
        // Another amount or due date where it stands is an update; older, still stale.
        assert!(judge(open, NeedsResponse, Chargeback, at(1), true).is_ok());
        assert!(judge(open, NeedsResponse, Chargeback, at(-1), true).is_err());
        let later = standing(Lost, SecondChargeback);
        assert!(judge(later, Lost, Chargeback, at(1), false)
            .unwrap_err()
            .contains("past"));
    }

    trait MaxRank {
        fn max_rank(self, other: DisputeStage) -> DisputeStage;
    }

    impl MaxRank for DisputeStage {
        fn max_rank(self, other: DisputeStage) -> DisputeStage {
            if self.rank() >= other.rank() {
                self
            } else {
                other
            }
        }
    }
}
