//! The test payment methods whose charge succeeds and is then disputed
//! (docs/guides/test-cards.md, "Disputes"): Stripe's own `pm_card_createDispute…`, and the
//! sandbox's `pm_sandbox_dispute_…` for the paths Stripe has no card for. Apart from
//! `dispute_control`, which carries them out, so that `behaviour` can know the tokens
//! without importing what tells the disputes.

use super::disputes::Move;

/// A test payment method that is disputed after its charge succeeds: its reason, and the
/// moves, one `--dispute-after-ms` after another (the first opens the dispute).
pub(crate) struct Script {
    pub token: &'static str,
    pub reason: &'static str,
    pub moves: &'static [Move],
}

pub(crate) const SCRIPTS: [Script; 8] = [
    // Stripe's own test payment methods.
    Script {
        token: "pm_card_createDispute",
        reason: "fraudulent",
        moves: &[Move::Open],
    },
    Script {
        token: "pm_card_createDisputeProductNotReceived",
        reason: "product_not_received",
        moves: &[Move::Open],
    },
    Script {
        token: "pm_card_createDisputeInquiry",
        reason: "general",
        moves: &[Move::Inquiry { rfi: false }],
    },
    // The sandbox's own, for the paths Stripe has no card for.
    Script {
        token: "pm_sandbox_dispute_won",
        reason: "fraudulent",
        moves: &[Move::Open, Move::Win],
    },
    Script {
        token: "pm_sandbox_dispute_lost",
        reason: "fraudulent",
        moves: &[Move::Open, Move::Lose],
    },
    Script {
        token: "pm_sandbox_dispute_escalated",
        reason: "general",
        moves: &[Move::Inquiry { rfi: true }, Move::Escalate],
    },
    // Adyen only: through the Stripe face the third step is refused, and the dispute stays
    // won (Stripe has no second chargeback).
    Script {
        token: "pm_sandbox_dispute_second_chargeback",
        reason: "fraudulent",
        moves: &[Move::Open, Move::Win, Move::SecondChargeback],
    },
    Script {
        token: "pm_sandbox_dispute_prearbitration_won",
        reason: "fraudulent",
        moves: &[Move::Open, Move::Lose, Move::PrearbitrationWon],
    },
];

/// The script of test payment method `token`, if it is one.
pub(crate) fn script(token: &str) -> Option<&'static Script> {
    SCRIPTS.iter().find(|s| s.token == token)
}
