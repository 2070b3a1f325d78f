//! What a merchant should do about a dispute now, in a sentence (docs/guides/disputes.md,
//! "Answering a dispute"). Shown on the dispute and in its events.

use super::DisputeStatus;

/// The advice for a dispute in `status`, whose `overlap` is the money it returns a second
/// time (a refund returned it first), and whether evidence was sent.
pub fn advice(status: DisputeStatus, overlap: i64, evidence_sent: bool) -> &'static str {
    use DisputeStatus::*;
    match status {
        NeedsResponse | WarningNeedsResponse if overlap > 0 => {
            "The payment was refunded before this dispute: answer before evidence_due_by with the \
             refund as evidence (its id and date), or the payer is paid back twice."
        }
        WarningNeedsResponse => {
            "An inquiry, no money taken yet: answer before evidence_due_by with what shows the \
             payment was authorised and delivered, or it may become a chargeback."
        }
        NeedsResponse if evidence_sent => {
            "Evidence was sent; the provider has not told of its review yet."
        }
        NeedsResponse => {
            "The money is taken back: submit evidence before evidence_due_by, or accept the \
             dispute if the payer is right. Do not refund it: the chargeback already returned it."
        }
        WarningUnderReview | UnderReview => {
            "The evidence is with the bank: nothing to do until it decides. Do not refund meanwhile."
        }
        WarningClosed => "The inquiry closed without a chargeback: nothing to do.",
        Won => "Won: the money came back to you. Nothing to do.",
        Lost if overlap > 0 => {
            "Lost after a refund: the payer was paid back twice. Ask the payer for the refund back, \
             or ask the provider to reverse it."
        }
        Lost => "Lost: the payer keeps the money. Nothing more can be refunded for this amount.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dispute_on_refunded_money_says_to_answer_with_the_refund() {
        assert!(advice(DisputeStatus::NeedsResponse, 500, false).contains("refund as evidence"));
        assert!(advice(DisputeStatus::Lost, 500, false).contains("paid back twice"));
        for status in DisputeStatus::ALL {
            assert!(!advice(status, 0, false).is_empty());
        }
    }
}
