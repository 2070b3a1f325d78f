//! Late approvals (docs/guides/declines.md, "Late approvals"): a provider says it approved a
//! charge payorch holds as failed. payorch told the merchant nothing was taken, and a retry
//! may have charged the payer elsewhere since, so the money is given back at once: the hold
//! voided, or the capture refunded, each under a provider key derived from the late
//! approval's id, so a resend never undoes twice.
//!
//! The row is written in the statement that records the news ([`detect`]), the undo is sent
//! right after it commits and again by the reconciler while the answer is unknown
//! ([`undo`]); the triggers of the `…_late_approvals` migration tell the merchant
//! (`late_approval.*` events), and support lists every one for a human to confirm.

pub mod detect;
pub mod told;
pub mod undo;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Deserialize;
use uuid::Uuid;

use crate::db::schema::late_approvals;
use crate::db::PgConn;
use crate::payments::status::AttemptStatus;
use crate::payments::PaymentAttempt;
use crate::providers::{CaptureMethod, ProviderOutcome};
use crate::words::words;

words! {
    /// What the provider said it did with the money (`late_approval_kind`).
    pub enum ApprovedAs {
        /// Holds it for a capture: a void gives it back.
        Authorized => "authorized",
        /// Took it: a refund gives it back.
        Succeeded => "succeeded",
    }
}

words! {
    /// Where a late approval is (`late_approval_status`): `undoing`, then one of the others,
    /// for good.
    pub enum LateStatus {
        /// The void or refund is asked, or about to be, or taken but not done (Adyen's
        /// `received`, a Stripe refund `pending`); the reconciler asks again until a definite
        /// answer, and the provider's later word ends it ([`told`]).
        Undoing => "undoing",
        /// The provider released the hold.
        Voided => "voided",
        /// The provider refunded the whole amount.
        Refunded => "refunded",
        /// The provider refused the refund (after the void, for a hold): the money is still
        /// taken, a human must act.
        UndoFailed => "undo_failed",
    }
}

words! {
    /// Who told payorch of the approval (`late_approval_source`): only the provider's
    /// webhook or notification. The reconciler looks only at attempts still open, and an
    /// answer to payorch's own request about an attempt already failed is dropped, so neither
    /// detects one.
    pub enum LateSource {
        Webhook => "webhook",
    }
}

/// The row as the table holds it; also read from `to_jsonb` of a row (an event's snapshot).
#[derive(Debug, Clone, Queryable, Selectable, QueryableByName, Deserialize)]
#[diesel(table_name = late_approvals)]
pub struct LateApproval {
    pub merchant_id: Uuid,
    pub id: Uuid,
    pub attempt_id: Uuid,
    pub order_id: Uuid,
    pub provider: String,
    pub provider_payment_id: String,
    pub amount: i64,
    pub currency: String,
    pub approved_as: String,
    pub source: String,
    pub status: String,
    pub detail: Option<String>,
    pub provider_undo_id: Option<String>,
    pub next_check_at: Option<DateTime<Utc>>,
    pub checks: i32,
    pub detected_at: DateTime<Utc>,
    pub undone_at: Option<DateTime<Utc>>,
}

impl LateApproval {
    /// What the provider said it did; a word this version does not know reads as a capture,
    /// whose undo (a refund) is the one that gives back money either way.
    pub fn approved_as(&self) -> ApprovedAs {
        ApprovedAs::parse(&self.approved_as).unwrap_or(ApprovedAs::Succeeded)
    }
}

/// Whether `outcome` tells of money taken for `attempt`, which payorch holds as failed: the
/// approval to undo, as held or as taken. `None` for anything else, an attempt canceled by
/// payorch's own void included (that void's notification settles it).
pub fn late_approval(attempt: &PaymentAttempt, outcome: &ProviderOutcome) -> Option<ApprovedAs> {
    if attempt.status != AttemptStatus::Failed {
        return None;
    }
    match outcome {
        ProviderOutcome::Succeeded { .. } => Some(ApprovedAs::Succeeded),
        // An automatic capture follows its authorisation at the provider: held only when the
        // attempt asked for a manual capture (as `transition::decide` reads it).
        ProviderOutcome::Authorized { .. } => Some(match attempt.capture_method {
            CaptureMethod::Manual => ApprovedAs::Authorized,
            CaptureMethod::Automatic => ApprovedAs::Succeeded,
        }),
        _ => None,
    }
}

/// The way money is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undo {
    /// Release the hold (the adapter's `cancel`).
    Void,
    /// Refund the whole amount (the adapter's `create_refund`).
    Refund,
}

impl Undo {
    /// The first way to try: a hold is voided, a capture refunded. A void refused (the
    /// charge was captured after all) is followed by a refund ([`undo::undo`]).
    pub fn first(approved_as: ApprovedAs) -> Undo {
        match approved_as {
            ApprovedAs::Authorized => Undo::Void,
            ApprovedAs::Succeeded => Undo::Refund,
        }
    }

    /// The provider key of this undo of late approval `id`: the same on every resend, and
    /// another for the void and the refund, which are two requests.
    pub fn provider_key(self, id: Uuid) -> String {
        match self {
            Undo::Void => format!("payorch_{id}_void"),
            Undo::Refund => format!("payorch_{id}_refund"),
        }
    }

    /// The status an accepted undo ends in.
    pub fn done(self) -> LateStatus {
        match self {
            Undo::Void => LateStatus::Voided,
            Undo::Refund => LateStatus::Refunded,
        }
    }
}

/// The late approval of `attempt`, if any (its story).
pub async fn of_attempt(
    conn: &mut PgConn,
    attempt: &PaymentAttempt,
) -> QueryResult<Option<LateApproval>> {
    late_approvals::table
        .filter(late_approvals::merchant_id.eq(attempt.merchant_id.0))
        .filter(late_approvals::attempt_id.eq(attempt.id.0))
        .select(LateApproval::as_select())
        .limit(1)
        .load(conn)
        .await
        .and_then(crate::db::one)
        .optional()
}

/// Every late approval, at most `limit`: each needs a human to confirm with the provider that
/// the money went back (support's "What needs a human"). Those whose money is not back
/// (`undo_failed`, then `undoing`: a refusal, or an undo still asked) come before the undone
/// ones, each newest first, so a run of newer undone ones cannot push them off the page.
/// Late approvals are rare: sorting them all is cheap.
pub async fn listed(conn: &mut PgConn, limit: i64) -> QueryResult<Vec<LateApproval>> {
    late_approvals::table
        .order((
            diesel::dsl::sql::<diesel::sql_types::Integer>(&format!(
                "CASE status WHEN '{}' THEN 0 WHEN '{}' THEN 1 ELSE 2 END",
                LateStatus::UndoFailed.as_str(),
                LateStatus::Undoing.as_str(),
            )),
            late_approvals::detected_at.desc(),
        ))
        .limit(limit)
        .select(LateApproval::as_select())
        .load(conn)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payments::attempts::tests::an_attempt;

    fn failed(capture: CaptureMethod) -> PaymentAttempt {
        let mut attempt = an_attempt();
        attempt.status = AttemptStatus::Failed;
        attempt.capture_method = capture;
        attempt
    }

    fn authorized() -> ProviderOutcome {
        ProviderOutcome::Authorized {
            provider_id: "pi_1".into(),
            expires_at: None,
        }
    }

    #[test]
    fn a_hold_is_voided_and_a_capture_refunded() {
        let succeeded = ProviderOutcome::Succeeded {
            provider_id: "pi_1".into(),
        };
        let manual = failed(CaptureMethod::Manual);
        let automatic = failed(CaptureMethod::Automatic);
        assert_eq!(
            late_approval(&manual, &authorized()),
            Some(ApprovedAs::Authorized)
        );
        assert_eq!(Undo::first(ApprovedAs::Authorized), Undo::Void);
        // Authorised under an automatic capture is captured: refunded, never voided.
        assert_eq!(
            late_approval(&automatic, &authorized()),
            Some(ApprovedAs::Succeeded)
        );
        assert_eq!(
            late_approval(&manual, &succeeded),
            Some(ApprovedAs::Succeeded)
        );
        assert_eq!(Undo::first(ApprovedAs::Succeeded), Undo::Refund);
    }

    #[test]
    fn only_an_approval_of_a_failed_attempt_is_late() {
        for status in AttemptStatus::ALL {
            let mut attempt = failed(CaptureMethod::Manual);
            attempt.status = status;
            let late = late_approval(&attempt, &authorized()).is_some();
            assert_eq!(late, status == AttemptStatus::Failed, "{status:?}");
        }
        let attempt = failed(CaptureMethod::Automatic);
        for outcome in [
            ProviderOutcome::Canceled { provider_id: None },
            ProviderOutcome::Pending { provider_id: None },
            ProviderOutcome::Unknown {
                reason: "timeout".into(),
            },
        ] {
            assert_eq!(late_approval(&attempt, &outcome), None, "{outcome:?}");
        }
    }

    #[test]
    fn every_end_of_an_undo_is_counted_from_zero() {
        use crate::payments::metrics::LATE_APPROVAL_RESULTS;
        for status in LateStatus::ALL {
            // `undoing` is counted as `detected`, when the row is written.
            let result = match status {
                LateStatus::Undoing => "detected",
                ended => ended.as_str(),
            };
            assert!(LATE_APPROVAL_RESULTS.contains(&result), "{result}");
        }
        assert_eq!(LATE_APPROVAL_RESULTS.len(), LateStatus::ALL.len());
    }

    #[test]
    fn each_undo_has_a_key_of_its_own_the_same_every_time() {
        let id = Uuid::now_v7();
        assert_eq!(Undo::Void.provider_key(id), Undo::Void.provider_key(id));
        assert_ne!(Undo::Void.provider_key(id), Undo::Refund.provider_key(id));
        assert!(Undo::Refund.provider_key(id).contains(&id.to_string()));
    }
}
