//! The undo's decisions and statements, without a provider or a database.

use super::*;
use crate::db::snapshot::assert_sql_snapshot;

fn failed() -> ProviderOutcome {
    ProviderOutcome::Failed {
        code: "payment_intent_unexpected_state".into(),
        message: "already captured".into(),
        provider_id: None,
        decline: None,
    }
}

#[test]
fn what_each_answer_makes_of_the_undo() {
    let refused = judge(Undo::Void, &failed(), "pi_1");
    assert!(matches!(refused, Verdict::RefundInstead { .. }));
    let refunds_refused = judge(Undo::Refund, &failed(), "pi_1");
    assert!(matches!(
        refunds_refused,
        Verdict::Done {
            status: LateStatus::UndoFailed,
            ..
        }
    ));
    let canceled = ProviderOutcome::Canceled { provider_id: None };
    assert_eq!(
        judge(Undo::Void, &canceled, "pi_1"),
        Verdict::Done {
            status: LateStatus::Voided,
            detail: "the provider released the hold".into(),
            undo_id: Some("pi_1".into()),
        }
    );
    let refunded = ProviderOutcome::Succeeded {
        provider_id: "re_1".into(),
    };
    assert!(matches!(
        judge(Undo::Refund, &refunded, "pi_1"),
        Verdict::Done { status: LateStatus::Refunded, undo_id: Some(id), .. } if id == "re_1"
    ));
    // Taken is not done: still `undoing`, never claimed voided or refunded.
    let received = ProviderOutcome::Pending {
        provider_id: Some("psp_1".into()),
    };
    for undo in [Undo::Void, Undo::Refund] {
        let verdict = judge(undo, &received, "pi_1");
        assert!(matches!(verdict, Verdict::Accepted { .. }), "{undo:?}");
    }
}

/// A hold whose void was refused later and refunded since is asked by its refund again,
/// never by the void: the refund's id on the row says so.
#[test]
fn a_refund_taken_for_a_hold_is_asked_again_as_a_refund() {
    let mut late = a_late_approval();
    late.approved_as = "authorized".into();
    assert_eq!(way_now(&late), Undo::Void);
    late.provider_undo_id = Some("pi_1".into());
    assert_eq!(way_now(&late), Undo::Void);
    late.provider_undo_id = Some("refund_psp".into());
    assert_eq!(way_now(&late), Undo::Refund);
}

/// Never a refund after a void whose answer was unknown: the void may have been done.
#[test]
fn an_unknown_answer_is_asked_again_the_same_way() {
    for undo in [Undo::Void, Undo::Refund] {
        for outcome in [
            ProviderOutcome::Unknown {
                reason: "timeout".into(),
            },
            ProviderOutcome::Unavailable {
                reason: "circuit open".into(),
            },
            ProviderOutcome::NotFound,
        ] {
            assert!(
                matches!(judge(undo, &outcome, "pi_1"), Verdict::AskAgain { .. }),
                "{undo:?} {outcome:?}"
            );
        }
    }
}

fn a_late_approval() -> LateApproval {
    LateApproval {
        merchant_id: uuid::Uuid::now_v7(),
        id: uuid::Uuid::now_v7(),
        attempt_id: uuid::Uuid::now_v7(),
        order_id: uuid::Uuid::now_v7(),
        provider: "sandbox".into(),
        provider_payment_id: "pi_1".into(),
        amount: 100,
        currency: "eur".into(),
        approved_as: "succeeded".into(),
        source: "webhook".into(),
        status: "undoing".into(),
        detail: None,
        provider_undo_id: None,
        next_check_at: Some(Utc::now()),
        checks: 0,
        detected_at: Utc::now(),
        undone_at: None,
    }
}

#[test]
fn the_statements_read_as_their_snapshots() {
    let late = a_late_approval();
    assert_sql_snapshot(
        "late_approval_finish",
        &finish(&late, LateStatus::Refunded, "done", Some("re_1")),
    );
    assert_sql_snapshot(
        "late_approval_ask_again",
        &ask_again(&late, "unknown", None, Utc::now()),
    );
    crate::payments::due::assert_claim_snapshot(DUE_LATE_APPROVALS);
}
