//! The undo of a late approval: a void of the hold or a refund of the whole capture, asked of
//! the provider that approved, under the undo's own provider key (`payorch_<id>_void`,
//! `payorch_<id>_refund`), then its answer recorded on the row by a guarded update (`status =
//! 'undoing'`), so two senders never record twice.
//!
//! Sent at once by the request that recorded the late approval, and by the reconciler for any
//! row left `undoing` past its `next_check_at` (a crash between the commit and the call, or an
//! answer that told nothing): the same keys, so a resend is the provider's replay, never a
//! second void or refund (nor can a whole refund be made twice: the provider refuses it).
//!
//! What each answer does (docs/guides/declines.md, "Late approvals"):
//! - a void answered canceled: `voided`;
//! - a void refused (the charge was captured after all, or never held): a refund;
//! - a refund answered succeeded: `refunded`;
//! - a refund refused: `undo_failed`, the money still taken, for a human;
//! - a void or refund only taken (Adyen's `received`, Stripe's `pending`): still `undoing`,
//!   as either may still fail; the provider's later word ends it ([`super::told`]), and a
//!   Stripe refund is also read back (`retrieve_refund`) on the reconciler's pass;
//! - anything unknown (a timeout, a 5xx, a closed connection): still `undoing`, asked again.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;

use super::{LateApproval, LateStatus, Undo};
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::DbPool;
use crate::ids::{MerchantId, PaymentId};
use crate::payments::attempts::call_log::log_call;
use crate::payments::attempts::{CallKind, Source};
use crate::payments::due::{self, DueQueue};
use crate::payments::service::Payments;
use crate::providers::{CancelRequest, Lookups, ProviderCall, ProviderOutcome, RefundRequest};

/// The late approvals' due queue: those still `undoing`.
const DUE_LATE_APPROVALS: DueQueue = DueQueue {
    table: "late_approvals",
    open: "('undoing')",
};

/// Why the money is given back: the refund's reason (in a Stripe refund's metadata).
const REASON: &str = "late_approval";

#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error(transparent)]
    Unavailable(#[from] crate::db::pool::PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
}

/// What one answer makes of the undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Done: the status, what the provider said, and its id of the void or refund.
    Done {
        status: LateStatus,
        detail: String,
        undo_id: Option<String>,
    },
    /// The void was refused: refund instead.
    RefundInstead { detail: String },
    /// Taken, not done: still `undoing` until the provider's word; the id it gave, if any.
    Accepted {
        detail: String,
        undo_id: Option<String>,
    },
    /// Nothing is known yet: ask again later, under the same key.
    AskAgain { detail: String },
}

/// What `outcome`, the answer to `undo`, makes of it.
pub fn judge(undo: Undo, outcome: &ProviderOutcome, charge: &str) -> Verdict {
    use ProviderOutcome as O;
    match (undo, outcome) {
        (Undo::Void, O::Canceled { .. }) => Verdict::Done {
            status: LateStatus::Voided,
            detail: "the provider released the hold".into(),
            undo_id: Some(charge.to_owned()),
        },
        // Adyen takes a cancel (`received`) and tells its end by notification, which may be
        // a refusal (the payment was captured meanwhile): not done yet.
        (Undo::Void, O::Pending { .. }) => Verdict::Accepted {
            detail: "the provider accepted the void; awaiting its word of the end".into(),
            undo_id: Some(charge.to_owned()),
        },
        (Undo::Void, O::Failed { code, message, .. }) => Verdict::RefundInstead {
            detail: format!("the void was refused ({code}: {message})"),
        },
        (Undo::Refund, O::Succeeded { provider_id }) => Verdict::Done {
            status: LateStatus::Refunded,
            detail: "the provider refunded the whole amount".into(),
            undo_id: Some(provider_id.clone()),
        },
        // Adyen's `received`, Stripe's `pending`: either may still fail.
        (Undo::Refund, O::Pending { provider_id }) => Verdict::Accepted {
            detail: "the provider accepted the refund; awaiting its word of the end".into(),
            undo_id: provider_id.clone(),
        },
        (Undo::Refund, O::Failed { code, message, .. }) => Verdict::Done {
            status: LateStatus::UndoFailed,
            detail: format!("the refund was refused ({code}: {message}): the money is still taken"),
            undo_id: None,
        },
        (_, other) => Verdict::AskAgain {
            detail: format!(
                "the {} told nothing ({}); asked again under the same key",
                undo.word(),
                other.label()
            ),
        },
    }
}

impl Undo {
    fn word(self) -> &'static str {
        match self {
            Undo::Void => "void",
            Undo::Refund => "refund",
        }
    }
}

/// Sends the undo of `late` and records its answer (`source`: a webhook's request, or the
/// reconciler); the row after.
pub async fn undo(
    pool: &DbPool,
    payments: &Payments,
    late: LateApproval,
    source: Source,
) -> Result<LateApproval, UndoError> {
    let mut way = way_now(&late);
    if way == Undo::Void && refund_asked(pool, &late).await? {
        way = Undo::Refund;
    }
    undo_from(pool, payments, late, source, way, Vec::new()).await
}

/// The provider refused the void of `late` later (`why`): the refund, under its own key.
pub async fn refund_instead(
    pool: &DbPool,
    payments: &Payments,
    late: LateApproval,
    source: Source,
    why: String,
) -> Result<LateApproval, UndoError> {
    undo_from(pool, payments, late, source, Undo::Refund, vec![why]).await
}

/// The first way, but a refund once one was taken for a hold (its id, not the charge's, is
/// `provider_undo_id`): a void refused by notification was followed by a refund.
fn way_now(late: &LateApproval) -> Undo {
    match late.provider_undo_id.as_deref() {
        Some(id) if id != late.provider_payment_id => Undo::Refund,
        _ => Undo::first(late.approved_as()),
    }
}

/// Whether a refund of `late` was asked before (its call is logged, whatever its answer): a
/// hold whose void the provider refused later, and whose refund's answer told nothing, is
/// asked by its refund again, never by the void, whose resend would only replay `received`.
async fn refund_asked(pool: &DbPool, late: &LateApproval) -> Result<bool, UndoError> {
    use crate::db::schema::provider_calls as calls;
    let asked = calls::table
        .filter(calls::merchant_id.eq(late.merchant_id))
        .filter(calls::attempt_id.eq(late.attempt_id))
        .filter(calls::operation.eq(CallKind::CreateRefund.as_str()))
        .filter(calls::detail.like(format!("asked by late approval {}%", late.id)));
    let mut conn = pool.get().await?;
    diesel::select(diesel::dsl::exists(asked))
        .load::<bool>(&mut conn)
        .await
        .and_then(crate::db::one)
        .map_err(Into::into)
}

async fn undo_from(
    pool: &DbPool,
    payments: &Payments,
    late: LateApproval,
    source: Source,
    mut way: Undo,
    mut said: Vec<String>,
) -> Result<LateApproval, UndoError> {
    if late.status != LateStatus::Undoing.as_str() {
        return Ok(late);
    }
    // A webhook's request calls as payorch's own (`provider_call_source` has no `webhook`).
    let source = match source {
        Source::Webhook => Source::Api,
        other => other,
    };
    let verdict = loop {
        let (kind, call) = send(payments, &late, way).await;
        {
            let mut conn = pool.get().await?;
            let asked_by = format!("late approval {}", late.id);
            log_call(
                &mut conn,
                MerchantId(late.merchant_id),
                PaymentId(late.attempt_id),
                kind,
                source,
                &call,
                Some(&asked_by),
            )
            .await?;
        }
        match judge(way, &call.outcome, &late.provider_payment_id) {
            Verdict::RefundInstead { detail } if way == Undo::Void => {
                said.push(detail);
                way = Undo::Refund;
            }
            verdict => break verdict,
        }
    };
    let (done, undo_id) = match verdict {
        Verdict::Done {
            status,
            detail,
            undo_id,
        } => {
            said.push(detail);
            (Some(status), undo_id)
        }
        Verdict::Accepted { detail, undo_id } => {
            said.push(detail);
            (None, undo_id)
        }
        Verdict::AskAgain { detail } | Verdict::RefundInstead { detail } => {
            said.push(detail);
            (None, None)
        }
    };
    let detail = said.join("; ");
    let statement = match done {
        Some(status) => finish(&late, status, &detail, undo_id.as_deref()),
        None => {
            let next = Utc::now() + payments.reconciler.next_check(late.checks);
            ask_again(&late, &detail, undo_id.as_deref(), next)
        }
    };
    let mut conn = pool.get().await?;
    let recorded = statement
        .load::<LateApproval>(&mut conn)
        .await
        .and_then(crate::db::one)
        .optional()?;
    match recorded {
        Some(row) => {
            if let Some(status) = done {
                ended(payments, &row, status);
            }
            Ok(row)
        }
        // Another sender (or the provider's later word) recorded first, and counted it.
        None => Ok(late),
    }
}

/// Counts and logs the end of `row`, by the writer whose guarded update wrote it alone.
pub(super) fn ended(payments: &Payments, row: &LateApproval, status: LateStatus) {
    payments
        .metrics
        .late_approval(&row.provider, status.as_str());
    tracing::warn!(late_approval = %row.id, attempt = %row.attempt_id,
        provider = %row.provider, status = status.as_str(), "late approval undone");
}

/// The provider call of `way` for `late`, under its own key; a refund taken already (its id
/// known) is read back where the provider has a lookup: a resend only replays its answer.
async fn send(payments: &Payments, late: &LateApproval, way: Undo) -> (CallKind, ProviderCall) {
    let provider = payments.adapter(&late.provider);
    let key = way.provider_key(late.id);
    let taken = late
        .provider_undo_id
        .as_deref()
        .filter(|id| *id != late.provider_payment_id);
    let (kind, call) = match (way, taken) {
        (Undo::Void, _) => (
            CallKind::Cancel,
            provider
                .cancel(&CancelRequest {
                    provider_payment_id: Some(late.provider_payment_id.clone()),
                    idempotency_key: key,
                    attempt_id: late.attempt_id.to_string(),
                    merchant_id: late.merchant_id.to_string(),
                })
                .await,
        ),
        (Undo::Refund, Some(refund)) if provider.lookups() == Lookups::ReadAfterWrite => (
            CallKind::RetrieveRefund,
            provider.retrieve_refund(refund).await,
        ),
        (Undo::Refund, _) => (
            CallKind::CreateRefund,
            provider
                .create_refund(&RefundRequest {
                    provider_payment_id: late.provider_payment_id.clone(),
                    amount: late.amount,
                    currency: late.currency.clone(),
                    idempotency_key: key,
                    refund_id: late.id.to_string(),
                    payment_id: late.attempt_id.to_string(),
                    merchant_id: late.merchant_id.to_string(),
                    reason: Some(REASON.to_owned()),
                })
                .await,
        ),
    };
    payments.metrics.provider_call(&late.provider, kind, &call);
    (kind, call)
}

/// The guarded update that ends the undo (whole text: `tests/sql/late_approval_finish.sql`).
pub(super) fn finish<'f>(
    late: &'f LateApproval,
    status: LateStatus,
    detail: &'f str,
    undo_id: Option<&'f str>,
) -> Sql<'f> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(late.merchant_id);
    let id = q.bind::<SqlUuid, _>(late.id);
    let status = q.bind::<Text, _>(status.as_str());
    let detail = q.bind::<Text, _>(detail);
    let undo_id = q.bind::<Nullable<Text>, _>(undo_id);
    q.push(format_args!(
        "UPDATE late_approvals SET status = {status}, detail = {detail}, provider_undo_id = {undo_id}
WHERE merchant_id = {merchant} AND id = {id} AND status = 'undoing' RETURNING *"
    ));
    q.finish()
}

/// The guarded update that leaves it `undoing`, asked again at `next`, keeping the provider's
/// id of a void or refund it took (`undo_id`) once one is known.
fn ask_again<'f>(
    late: &'f LateApproval,
    detail: &'f str,
    undo_id: Option<&'f str>,
    next: DateTime<Utc>,
) -> Sql<'f> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(late.merchant_id);
    let id = q.bind::<SqlUuid, _>(late.id);
    let detail = q.bind::<Text, _>(detail);
    let undo_id = q.bind::<Nullable<Text>, _>(undo_id);
    let next = q.bind::<Timestamptz, _>(next);
    q.push(format_args!(
        "UPDATE late_approvals SET detail = {detail},
    provider_undo_id = coalesce({undo_id}, provider_undo_id), next_check_at = {next}
WHERE merchant_id = {merchant} AND id = {id} AND status = 'undoing' RETURNING *"
    ));
    q.finish()
}

/// The reconciler's round: claims the late approvals left `undoing` whose check is due (a
/// crash after the commit, an answer that told nothing) and sends each undo again,
/// concurrently. Returns how many were claimed.
pub async fn undo_due(pool: &DbPool, payments: &Arc<Payments>) -> usize {
    let settings = &payments.reconciler;
    let due: Vec<LateApproval> = match pool.get().await {
        Ok(mut conn) => {
            match due::claim_due(DUE_LATE_APPROVALS, settings.batch, settings.claim)
                .load(&mut conn)
                .await
            {
                Ok(due) => due,
                Err(err) => {
                    tracing::warn!(error = %err, "reconciler round of late approvals failed");
                    return 0;
                }
            }
        }
        Err(err) => {
            tracing::warn!(error = %err, "reconciler round of late approvals failed");
            return 0;
        }
    };
    let claimed = due.len();
    let mut undos = tokio::task::JoinSet::new();
    for late in due {
        let pool = pool.clone();
        let payments = payments.clone();
        undos.spawn(async move {
            let id = late.id;
            if let Err(err) = undo(&pool, &payments, late, Source::Reconciler).await {
                tracing::warn!(late_approval = %id, error = %err, "undo of a late approval failed");
            }
        });
    }
    while undos.join_next().await.is_some() {}
    claimed
}

#[cfg(test)]
mod tests;
