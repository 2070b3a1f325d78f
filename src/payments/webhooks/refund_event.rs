//! A refund event, recorded and applied to its refund in one transaction: a refund of
//! payorch's `refunds`, or the refund of a late approval's undo
//! ([`late_approvals::told`](crate::payments::late_approvals::told)).

use super::event_row::{insert_once, record};
use super::outcome::{EventOutcome, ReceiveError, Received};
use crate::db::transaction::in_transaction;
use crate::db::DbPool;
use crate::ids::ProviderWebhookId;
use crate::payments::late_approvals::told::{counted, refund_told, Effect};
use crate::payments::late_approvals::undo::UndoError;
use crate::payments::refunds::record::{apply_notice, NoticeEffect};
use crate::payments::service::Payments;
use crate::providers::{RefundNotice, WebhookEvent};

/// A refund event: its row and its effect in one transaction. The row is inserted first,
/// so a second copy waits on the first (the trigger `provider_webhooks_once`) and finds it taken;
/// the refund is locked while it is judged (docs/DESIGN.md, "Refunds").
pub(super) async fn record_refund_event(
    pool: &DbPool,
    payments: &Payments,
    provider: &str,
    event: &WebhookEvent,
    notice: &RefundNotice,
) -> Result<Received, ReceiveError> {
    let id = ProviderWebhookId::new();
    let mut conn = pool.get().await?;
    let mut ended = None;
    let received = in_transaction::<_, ReceiveError>(&mut conn, async |conn| {
        if !insert_once(conn, id, provider, event).await? {
            return Ok(Received::Duplicate);
        }
        let (outcome, detail, refund) = match apply_notice(conn, provider, notice).await? {
            // Not a refund of `refunds`: perhaps a late approval's, whose reference is its id.
            NoticeEffect::NoRefund => match refund_told(conn, provider, notice).await? {
                Some(told) => {
                    let owner = (told.merchant_id, told.attempt_id);
                    let (outcome, detail) = (event_outcome(told.effect), told.detail.clone());
                    ended = Some(told);
                    record(
                        conn,
                        id,
                        outcome,
                        &format!("late approval: {detail}"),
                        Some(owner),
                    )
                    .await?;
                    return Ok(Received::Recorded { id, outcome });
                }
                None => (
                    EventOutcome::UnknownAttempt,
                    format!("no refund for {}", notice.provider_refund_id),
                    None,
                ),
            },
            NoticeEffect::Applied { refund, detail } => {
                (EventOutcome::Applied, detail, Some(refund))
            }
            NoticeEffect::Stale { refund, detail } => (EventOutcome::Stale, detail, Some(refund)),
            NoticeEffect::Conflict { refund, detail } => {
                (EventOutcome::Conflict, detail, Some(refund))
            }
        };
        let owner = refund.as_ref().map(|r| (r.merchant_id.0, r.payment_id.0));
        record(conn, id, outcome, &format!("refund: {detail}"), owner).await?;
        Ok(Received::Recorded { id, outcome })
    })
    .await?;
    // Counted once committed, and only by the word whose guarded update ended the undo.
    if let Some(told) = &ended {
        counted(payments, told);
    }
    Ok(received)
}

/// A late approval's word, as its event's row records it.
pub(super) fn event_outcome(effect: Effect) -> EventOutcome {
    match effect {
        Effect::Applied => EventOutcome::Applied,
        Effect::Stale => EventOutcome::Stale,
        Effect::Conflict => EventOutcome::Conflict,
    }
}

/// An undo asked on a provider's word fails as the word's recording does: the delivery is
/// refused and the provider sends it again.
impl From<UndoError> for ReceiveError {
    fn from(err: UndoError) -> Self {
        match err {
            UndoError::Unavailable(err) => ReceiveError::Unavailable(err),
            UndoError::Database(err) => ReceiveError::Database(err),
        }
    }
}
