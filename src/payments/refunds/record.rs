//! What a provider's word does to a refund, decided as an attempt's would be
//! ([`crate::payments::attempts::transition::decide`]) and recorded with its timeline row,
//! its key and the call log: a provider's answer, or a verified refund event.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::{Refund, RefundError, RefundRow};
use crate::db::schema::refunds;
use crate::db::transaction::in_transaction;
use crate::idempotency::in_flight::complete_for_resource;
use crate::idempotency::{InFlightKey, Recorded, ResourceType};
use crate::ids::RefundId;
use crate::payments::attempts::call_log::log_refund_call;
use crate::payments::attempts::transition::{decide, Decision};
use crate::payments::attempts::{CallKind, Source};
use crate::payments::status::AttemptStatus;
use crate::providers::{CaptureMethod, ProviderCall, ProviderOutcome, RefundNotice};

/// What a provider's word does to a refund, decided as an attempt's would be. A refund has
/// no hold and no challenge: a canceled refund gave nothing back (failed), and any other word
/// that is not final leaves it open.
fn decide_refund(current: AttemptStatus, outcome: &ProviderOutcome) -> Decision {
    let outcome = match outcome {
        ProviderOutcome::Canceled { provider_id } => ProviderOutcome::Failed {
            code: "canceled".into(),
            message: "the provider canceled the refund".into(),
            provider_id: provider_id.clone(),
        },
        ProviderOutcome::Authorized { .. } | ProviderOutcome::RequiresAction { .. } => {
            ProviderOutcome::Pending {
                provider_id: outcome.provider_id().map(str::to_owned),
            }
        }
        other => other.clone(),
    };
    decide(current, CaptureMethod::Automatic, &outcome)
}

/// What a refund's key records: `201` and its refund, which a replay shows as it is then. An
/// open refund keeps its key from being reaped.
pub(super) fn recorded(refund: &Refund) -> Recorded {
    Recorded {
        status: 201,
        resource_type: ResourceType::Refund,
        resource_id: refund.id.0,
        unresolved: !refund.status.is_final(),
    }
}

/// Completes the key that made `refund`, for whoever finished it other than its request (the
/// reconciler, a refund event), once its outcome is known (or records that it is still open,
/// so the key outlives its TTL).
async fn settle_key(conn: &mut AsyncPgConnection, refund: &Refund) -> QueryResult<()> {
    match &refund.idempotency_key {
        Some(key) => complete_for_resource(conn, refund.merchant_id, key, &recorded(refund)).await,
        None => Ok(()),
    }
}

/// What a provider call said about `refund`, in one transaction: the move (decided as an
/// attempt's would be) with its timeline row, the key (`key`, the request's own, consumed; or,
/// for the reconciler, the refund's by its resource), and the call log. The refund is read
/// again under its row lock and judged as it is now; the call is logged after, because its
/// row's foreign key share-locks the refund, and two checks that each took that first would
/// deadlock on the update.
pub(super) async fn record(
    conn: &mut AsyncPgConnection,
    refund: Refund,
    call: &ProviderCall,
    kind: CallKind,
    (moved_by, called_by): (Source, Source),
    next_check_at: DateTime<Utc>,
    key: Option<InFlightKey>,
) -> Result<Refund, RefundError> {
    in_transaction(conn, async |conn| {
        if let Some(key) = &key {
            key.name_request(conn).await?;
        }
        let current: Refund = refunds::table
            .find((refund.merchant_id.0, refund.id.0))
            .select(RefundRow::as_select())
            .for_update()
            .limit(1)
            .load(conn)
            .await
            .and_then(crate::db::one)?
            .into();
        let decision = decide_refund(current.status, &call.outcome);
        let moved = apply(conn, current, decision, moved_by, next_check_at).await?;
        match key {
            Some(key) => key.complete(conn, &recorded(&moved)).await?,
            None => settle_key(conn, &moved).await?,
        }
        log_refund_call(
            conn,
            moved.merchant_id,
            moved.payment_id,
            moved.id,
            kind,
            called_by,
            call,
        )
        .await?;
        Ok::<_, RefundError>(moved)
    })
    .await
}

/// Makes `decision` about `current` (read under its row lock): the move and its timeline
/// row, or the provider id an open refund learnt; nothing for an answer that is already so,
/// stale, or contradicts a final refund.
async fn apply(
    conn: &mut AsyncPgConnection,
    current: Refund,
    decision: Decision,
    moved_by: Source,
    next_check_at: DateTime<Utc>,
) -> QueryResult<Refund> {
    Ok(match decision {
        Decision::Move {
            to,
            provider_payment_id,
            failure,
            detail,
            ..
        } => {
            let (code, message) = failure.unzip();
            // A refund's statuses are an attempt's (docs/DESIGN.md, "Refunds").
            let row: RefundRow = diesel::sql_query(concat!(
                "UPDATE refunds SET status = $3, \
                     provider_refund_id = COALESCE(provider_refund_id, $4), \
                     failure_code = $5, failure_message = $6, \
                     next_check_at = CASE WHEN $3 IN ",
                open_refund_statuses!(),
                " THEN $7 END \
                 WHERE merchant_id = $1 AND id = $2 RETURNING *"
            ))
            .bind::<SqlUuid, _>(current.merchant_id.0)
            .bind::<SqlUuid, _>(current.id.0)
            .bind::<Text, _>(to.as_str())
            .bind::<Nullable<Text>, _>(provider_payment_id)
            .bind::<Nullable<Text>, _>(code)
            .bind::<Nullable<Text>, _>(message)
            .bind::<Timestamptz, _>(next_check_at)
            .load(conn)
            .await
            .and_then(crate::db::one)?;
            diesel::sql_query(
                "INSERT INTO refund_transitions (merchant_id, refund_id, from_status, to_status, \
                     source, detail) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind::<SqlUuid, _>(current.merchant_id.0)
            .bind::<SqlUuid, _>(current.id.0)
            .bind::<Text, _>(current.status.as_str())
            .bind::<Text, _>(to.as_str())
            .bind::<Text, _>(moved_by.as_str())
            .bind::<Text, _>(detail)
            .execute(conn)
            .await?;
            Refund::from(row)
        }
        Decision::StayOpen {
            provider_payment_id,
            ..
        } => {
            let row: RefundRow = diesel::sql_query(
                "UPDATE refunds SET provider_refund_id = COALESCE(provider_refund_id, $3), \
                     next_check_at = $4 \
                 WHERE merchant_id = $1 AND id = $2 RETURNING *",
            )
            .bind::<SqlUuid, _>(current.merchant_id.0)
            .bind::<SqlUuid, _>(current.id.0)
            .bind::<Nullable<Text>, _>(provider_payment_id)
            .bind::<Timestamptz, _>(next_check_at)
            .load(conn)
            .await
            .and_then(crate::db::one)?;
            Refund::from(row)
        }
        Decision::AlreadySo | Decision::Stale | Decision::Conflict => current,
    })
}

/// What a refund event did to its refund.
#[derive(Debug)]
pub enum NoticeEffect {
    /// Names no refund payorch knows.
    NoRefund,
    /// Moved the refund, or told an open one its provider id.
    Applied { refund: Refund, detail: String },
    /// Arrived after the refund had moved to, or past, what it says.
    Stale { refund: Refund, detail: String },
    /// Contradicts the refund (another amount or refund id, or its final status).
    Conflict { refund: Refund, detail: String },
}

/// Applies a verified refund event from `provider` to its refund (found by payorch's refund
/// id, else by the provider's), locked for the caller's open transaction, through the same
/// decision as every other answer; completes the refund's key when it ends.
pub async fn apply_notice(
    conn: &mut AsyncPgConnection,
    provider: &str,
    notice: &RefundNotice,
) -> QueryResult<NoticeEffect> {
    let by_id = notice
        .refund_id
        .as_deref()
        .and_then(|id| id.parse::<RefundId>().ok());
    let found = match by_id {
        Some(id) => refunds::table
            .filter(refunds::id.eq(id.0))
            .select(RefundRow::as_select())
            .for_update()
            .limit(1)
            .load(conn)
            .await
            .and_then(crate::db::one),
        None => refunds::table
            .filter(refunds::provider.eq(provider))
            .filter(refunds::provider_refund_id.eq(&notice.provider_refund_id))
            .select(RefundRow::as_select())
            .for_update()
            .limit(1)
            .load(conn)
            .await
            .and_then(crate::db::one),
    };
    let Some(current) = found.optional()?.map(Refund::from) else {
        return Ok(NoticeEffect::NoRefund);
    };
    let other_refund = current
        .provider_refund_id
        .as_deref()
        .is_some_and(|known| known != notice.provider_refund_id);
    if notice.amount != current.amount || other_refund {
        let detail = format!(
            "says {} of {}, the refund is {} of {}",
            notice.amount,
            notice.provider_refund_id,
            current.amount,
            current
                .provider_refund_id
                .as_deref()
                .unwrap_or("an unknown refund id")
        );
        return Ok(NoticeEffect::Conflict {
            refund: current,
            detail,
        });
    }
    let was = current.status;
    let decision = decide_refund(was, &notice.outcome);
    let detail = match &decision {
        Decision::Move { to, .. } => format!("{} → {}", was.as_str(), to.as_str()),
        Decision::StayOpen { .. } => format!("still {}", was.as_str()),
        Decision::Conflict => format!(
            "says {} but the refund is {}",
            notice.outcome.label(),
            was.as_str()
        ),
        Decision::AlreadySo | Decision::Stale => format!("refund is already {}", was.as_str()),
    };
    let effect = match decision {
        Decision::Conflict => NoticeEffect::Conflict {
            refund: current,
            detail,
        },
        Decision::AlreadySo | Decision::Stale => NoticeEffect::Stale {
            refund: current,
            detail,
        },
        decision => {
            let next_check = current.next_check_at.unwrap_or_else(Utc::now);
            let refund = apply(conn, current, decision, Source::Webhook, next_check).await?;
            settle_key(conn, &refund).await?;
            NoticeEffect::Applied { refund, detail }
        }
    };
    Ok(effect)
}
