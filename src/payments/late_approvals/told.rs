//! The provider's later word about an undo it took but had not done (docs/guides/declines.md,
//! "Late approvals"): Adyen answers a cancel and a refund `received` and tells the end by a
//! `CANCELLATION` or `REFUND` notification; a Stripe refund answered `pending` ends by
//! `refund.updated` or `refund.failed`. That word finishes the row still `undoing`: a refund
//! done → `refunded`, refused → `undo_failed`; a cancel done → `voided`, refused → a refund,
//! under its own key.
//!
//! How the word finds its row: a refund's reference (Adyen's `merchantReference`, Stripe's
//! `metadata[refund_id]`) is the late approval's id, which no `refunds` row has; a cancel's
//! reference is the attempt's id, and a failed attempt's cancel is only ever a late
//! approval's void.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::undo::{ended, finish, refund_instead, UndoError};
use super::{of_attempt, ApprovedAs, LateApproval, LateStatus};
use crate::db::schema::late_approvals;
use crate::db::PgConn;
use crate::ids::LateApprovalId;
use crate::payments::attempts::{PaymentAttempt, Source};
use crate::payments::service::Payments;
use crate::payments::status::AttemptStatus;
use crate::providers::{ProviderOutcome, RefundNotice};

/// What the provider's word is to its late approval, for the word's own row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// It moved the undo on.
    Applied,
    /// It tells what the row says already.
    Stale,
    /// It contradicts how the undo ended: for a human.
    Conflict,
}

/// The word, judged.
#[derive(Debug)]
pub struct Told {
    pub effect: Effect,
    pub detail: String,
    pub merchant_id: Uuid,
    pub attempt_id: Uuid,
    /// The row as this word's guarded update wrote it, and the status it ended in: to be
    /// counted by [`counted`] once committed.
    pub ended: Option<(LateApproval, LateStatus)>,
}

impl Told {
    fn of(late: &LateApproval, effect: Effect, detail: String) -> Told {
        Told {
            effect,
            detail,
            merchant_id: late.merchant_id,
            attempt_id: late.attempt_id,
            ended: None,
        }
    }
}

/// Counts and logs the end `told` wrote, if it wrote one (after its commit).
pub fn counted(payments: &Payments, told: &Told) {
    if let Some((row, status)) = &told.ended {
        ended(payments, row, *status);
    }
}

/// A refund event from `provider` about the refund of a late approval, if `notice` is one:
/// judged and applied in the caller's transaction (the row locked while judged).
pub async fn refund_told(
    conn: &mut PgConn,
    provider: &str,
    notice: &RefundNotice,
) -> QueryResult<Option<Told>> {
    let Some(id) = notice
        .refund_id
        .as_deref()
        .and_then(|r| r.parse::<Uuid>().ok())
    else {
        return Ok(None);
    };
    let found = late_approvals::table
        .filter(late_approvals::id.eq(id))
        .filter(late_approvals::provider.eq(provider))
        .select(LateApproval::as_select())
        .for_update()
        .limit(1)
        .load(conn)
        .await
        .and_then(crate::db::one)
        .optional()?;
    let Some(late) = found else {
        return Ok(None);
    };
    let name = LateApprovalId(late.id);
    if notice.amount != late.amount {
        let detail = format!(
            "says a refund of {} of late approval {name}, whose amount is {}",
            notice.amount, late.amount
        );
        return Ok(Some(Told::of(&late, Effect::Conflict, detail)));
    }
    let status = LateStatus::parse(&late.status);
    let (to, said) = match &notice.outcome {
        ProviderOutcome::Succeeded { .. } => (
            LateStatus::Refunded,
            "the provider says the refund went through".to_owned(),
        ),
        ProviderOutcome::Failed { code, message, .. } => (
            LateStatus::UndoFailed,
            format!(
                "the provider says the refund failed ({code}: {message}): the money is still taken"
            ),
        ),
        other => {
            let detail = format!("the refund of late approval {name} is {}", other.label());
            return Ok(Some(Told::of(&late, Effect::Stale, detail)));
        }
    };
    match status {
        Some(LateStatus::Undoing) => {}
        Some(now) if now == to => {
            let detail = format!("late approval {name} is already {}", now.as_str());
            return Ok(Some(Told::of(&late, Effect::Stale, detail)));
        }
        _ => {
            let detail = format!("{said}, but late approval {name} is {}", late.status);
            return Ok(Some(Told::of(&late, Effect::Conflict, detail)));
        }
    }
    let detail = match late.detail.as_deref() {
        Some(before) => format!("{before}; {said}"),
        None => said,
    };
    let written = finish(&late, to, &detail, Some(&notice.provider_refund_id))
        .load::<LateApproval>(conn)
        .await
        .and_then(crate::db::one)?;
    let mut told = Told::of(
        &late,
        Effect::Applied,
        format!("ends late approval {name} {}", to.as_str()),
    );
    told.ended = Some((written, to));
    Ok(Some(told))
}

/// A cancel's result (`outcome`: canceled, or refused when `modification`) about `attempt`,
/// if it is the void of its late approval still `undoing`: a void done ends it `voided`, a
/// void refused is followed by the refund at once. `None` for anything else, a void done told
/// after the row ended (`webhooks::attempt_event` records it stale).
pub async fn cancel_told(
    pool: &crate::db::DbPool,
    payments: &Payments,
    attempt: &PaymentAttempt,
    outcome: &ProviderOutcome,
    modification: bool,
) -> Result<Option<Told>, UndoError> {
    let refused = match outcome {
        ProviderOutcome::Canceled { .. } => None,
        ProviderOutcome::Failed { code, message, .. } if modification => {
            Some(format!("the provider refused the void ({code}: {message})"))
        }
        _ => return Ok(None),
    };
    if attempt.status != AttemptStatus::Failed {
        return Ok(None);
    }
    let late = of_attempt(&mut *pool.get().await?, attempt).await?;
    let Some(late) = late.filter(|l| l.approved_as() == ApprovedAs::Authorized) else {
        return Ok(None);
    };
    let name = LateApprovalId(late.id);
    let undoing = late.status == LateStatus::Undoing.as_str();
    match refused {
        None if undoing => {
            let said = "the provider says the hold is released";
            let detail = match late.detail.as_deref() {
                Some(before) => format!("{before}; {said}"),
                None => said.to_owned(),
            };
            let written = finish(
                &late,
                LateStatus::Voided,
                &detail,
                Some(&late.provider_payment_id),
            )
            .load::<LateApproval>(&mut *pool.get().await?)
            .await
            .and_then(crate::db::one)
            .optional()?;
            let mut told = Told::of(
                &late,
                Effect::Applied,
                format!("ends late approval {name} voided"),
            );
            match written {
                Some(row) => ended(payments, &row, LateStatus::Voided),
                // Another writer ended it first: this word is stale to it.
                None => told.effect = Effect::Stale,
            }
            Ok(Some(told))
        }
        None => Ok(None),
        Some(why) if undoing => {
            let after = refund_instead(pool, payments, late.clone(), Source::Webhook, why).await?;
            let detail = format!(
                "the void of late approval {name} was refused: refunding instead; it is {}",
                after.status
            );
            Ok(Some(Told::of(&late, Effect::Applied, detail)))
        }
        Some(why) => {
            // A void refused after the row ended some other way: only a void that was done
            // contradicts it.
            let effect = if late.status == LateStatus::Voided.as_str() {
                Effect::Conflict
            } else {
                Effect::Stale
            };
            let detail = format!("{why}, but late approval {name} is {}", late.status);
            Ok(Some(Told::of(&late, effect, detail)))
        }
    }
}
