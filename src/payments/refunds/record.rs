//! What a provider's word does to a refund, decided as an attempt's would be
//! ([`crate::payments::attempts::transition::decide`]) and recorded with its timeline row,
//! its key and the call log: a provider's answer, or a verified refund event.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use tracing::Instrument;

use super::{Refund, RefundError, RefundRow};
use crate::db::schema::refunds;
use crate::db::sql::Sql;
use crate::db::statement::{span, Statement};
use crate::db::PgConn;
use crate::idempotency::in_flight::{Settle, Settling};
use crate::idempotency::{InFlightKey, Recorded, ResourceType};
use crate::ids::RefundId;
use crate::payments::answer::{finish, logged, unmoved, AnswerKey, Answered, CallAbout};
use crate::payments::attempts::call_log::CallRecord;
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
            decline: None,
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

/// What a provider call said about `refund`, in **one statement** (whole text:
/// `tests/sql/record_refund_answer.sql`, and `record_refund_unmoved.sql` for an answer that
/// moves nothing): the move (decided as an attempt's would be) with its timeline row, the key
/// (`key`, the request's own, consumed; or, for the reconciler, the refund's by its resource)
/// and the call's log row ([`crate::payments::answer`]). The move is conditional on the status
/// the refund was read with; if another writer moved it first, the statement writes nothing,
/// and the refund is read again and the answer judged against it (at most twice more: a
/// refund moves at most twice). The triggers of the refunds migration refuse any move the
/// state machine does not allow.
pub(super) async fn record(
    conn: &mut PgConn,
    refund: Refund,
    call: &ProviderCall,
    kind: CallKind,
    (moved_by, called_by): (Source, Source),
    next_check_at: DateTime<Utc>,
    key: Option<InFlightKey>,
) -> Result<Refund, RefundError> {
    let logged = CallRecord::of(kind, called_by, call);
    let mut current = refund;
    let mut key = key;
    for _ in 0..3 {
        let decision = decide_refund(current.status, &call.outcome);
        let by = match key.take() {
            Some(key) => AnswerKey::Request(key),
            None => AnswerKey::Resource(current.idempotency_key.as_deref()),
        };
        let (sql, settling) = statement(
            &current,
            &decision,
            moved_by,
            next_check_at,
            by,
            Some(&logged),
        );
        let row: Option<RefundRow> = sql
            .load(conn)
            .instrument(span("record_refund_answer"))
            .await
            .and_then(crate::db::one)
            .optional()?;
        match (row, settling) {
            (Some(row), settling) => {
                if let Some(settling) = settling {
                    settling.written();
                }
                return Ok(row.into());
            }
            (None, settling) => {
                key = settling.map(Settling::unwritten);
                current = refunds::table
                    .find((current.merchant_id.0, current.id.0))
                    .select(RefundRow::as_select())
                    .limit(1)
                    .load(conn)
                    .await
                    .and_then(crate::db::one)?
                    .into();
            }
        }
    }
    // Unreachable while a refund moves at most twice: a final refund's answer is the refund
    // as it is, which always reads. Said as what it is, not as diesel's rollback signal that
    // transaction wrappers act on; the key stays in flight, as after a crash (docs/DESIGN.md,
    // "The Idempotency-Key protocol").
    Err(RefundError::Inconsistent(format!(
        "refund {} moved under each of three recordings of one answer",
        current.id
    )))
}

/// The statement that makes `decision` about `current`: the move and its timeline row (or,
/// for an answer that is already so, stale, or contradicts a final refund, the refund as it
/// is), the key's completion and, for a provider call, its log row. One row, the refund
/// after it, or none if the refund was not as read.
fn statement<'f>(
    current: &'f Refund,
    decision: &'f Decision,
    moved_by: Source,
    next_check_at: DateTime<Utc>,
    key: AnswerKey<'f>,
    call: Option<&'f CallRecord>,
) -> (Sql<'f>, Option<Settling>) {
    let mut q = Statement::new();
    let ids = (current.merchant_id.0, current.id.0);
    let was = current.status.as_str();
    let change = match decision {
        Decision::Move {
            to,
            provider_payment_id,
            failure,
            detail,
            ..
        } => Some((
            *to,
            provider_payment_id,
            failure.as_ref(),
            Some(detail.as_str()),
        )),
        Decision::StayOpen {
            provider_payment_id,
            ..
        } => Some((current.status, provider_payment_id, None, None)),
        Decision::AlreadySo | Decision::Stale | Decision::Conflict => None,
    };
    match change {
        Some((to, provider_id, failure, detail)) => {
            let (merchant, id) = (q.bind::<SqlUuid, _>(ids.0), q.bind::<SqlUuid, _>(ids.1));
            let was = q.bind::<Text, _>(was);
            let next_check =
                q.bind::<Nullable<Timestamptz>, _>((!to.is_final()).then_some(next_check_at));
            let to = q.bind::<Text, _>(to.as_str());
            let provider_id = q.bind::<Nullable<Text>, _>(provider_id.as_deref());
            let code = q.bind::<Nullable<Text>, _>(failure.map(|f| f.code.as_str()));
            let message = q.bind::<Nullable<Text>, _>(failure.map(|f| f.message.as_str()));
            // A refund's statuses are an attempt's (docs/DESIGN.md, "Refunds"); an open
            // refund has no failure, so staying open writes none.
            q.push(format_args!(
                "WITH moved AS (
    UPDATE refunds SET status = {to},
        provider_refund_id = coalesce(provider_refund_id, {provider_id}),
        failure_code = {code}, failure_message = {message}, next_check_at = {next_check}
    WHERE merchant_id = {merchant} AND id = {id} AND status = {was} RETURNING *)"
            ));
            logged(
                &mut q,
                ("refund_transitions", "refund_id"),
                was,
                moved_by,
                detail,
            );
        }
        None => unmoved(&mut q, "refunds", ids, was),
    }
    let row = Answered {
        merchant_id: current.merchant_id,
        resource: (ResourceType::Refund, current.id.0),
        about: CallAbout::Refund,
        settle: Settle {
            from: "moved",
            status: 201,
            open: open_refund_statuses!(),
        },
    };
    finish(q, key, row, call)
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
    conn: &mut PgConn,
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
            // Locked by the caller's transaction: the refund is as read, and the statement
            // writes.
            let next_check = current.next_check_at.unwrap_or_else(Utc::now);
            let by = AnswerKey::Resource(current.idempotency_key.as_deref());
            let (sql, _) = statement(&current, &decision, Source::Webhook, next_check, by, None);
            let refund = sql
                .load::<RefundRow>(conn)
                .instrument(span("apply_refund_notice"))
                .await
                .and_then(crate::db::one)?
                .into();
            NoticeEffect::Applied { refund, detail }
        }
    };
    Ok(effect)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::idempotency::in_flight::tests::a_key_in_flight;
    use crate::ids::{MerchantId, OrderId, PaymentId};

    fn a_refund(status: AttemptStatus) -> Refund {
        let now = Utc::now();
        Refund {
            id: RefundId::new(),
            merchant_id: MerchantId(uuid::Uuid::nil()),
            payment_id: PaymentId::new(),
            order_id: OrderId::new(),
            status,
            amount: 500,
            currency: "EUR".into(),
            reason: None,
            provider: "stripe".into(),
            provider_idempotency_key: "payorch_r".into(),
            provider_refund_id: None,
            failure_code: None,
            failure_message: None,
            idempotency_key: Some("k".into()),
            next_check_at: Some(now),
            checks: 0,
            created_at: now,
            updated_at: now,
            finished_at: None,
        }
    }

    fn a_call(outcome: ProviderOutcome) -> ProviderCall {
        ProviderCall {
            outcome,
            http_status: Some(200),
            latency: std::time::Duration::from_millis(5),
        }
    }

    #[test]
    fn the_statements_read_as_their_snapshots() {
        let succeeded = a_call(ProviderOutcome::Succeeded {
            provider_id: "re_1".into(),
        });
        let logged = CallRecord::of(CallKind::CreateRefund, Source::Api, &succeeded);

        let created = a_refund(AttemptStatus::Created);
        let decision = decide_refund(created.status, &succeeded.outcome);
        let by = AnswerKey::Request(a_key_in_flight());
        let (sql, settling) = statement(
            &created,
            &decision,
            Source::ProviderResponse,
            Utc::now(),
            by,
            Some(&logged),
        );
        assert_sql_snapshot("record_refund_answer", &sql);
        if let Some(settling) = settling {
            settling.written();
        }

        let done = a_refund(AttemptStatus::Succeeded);
        let decision = decide_refund(done.status, &succeeded.outcome);
        let by = AnswerKey::Resource(done.idempotency_key.as_deref());
        let (sql, _) = statement(
            &done,
            &decision,
            Source::Reconciler,
            Utc::now(),
            by,
            Some(&logged),
        );
        assert_sql_snapshot("record_refund_unmoved", &sql);

        let pending = a_refund(AttemptStatus::Pending);
        let decision = decide_refund(pending.status, &succeeded.outcome);
        let by = AnswerKey::Resource(pending.idempotency_key.as_deref());
        let (sql, _) = statement(&pending, &decision, Source::Webhook, Utc::now(), by, None);
        assert_sql_snapshot("apply_refund_notice", &sql);
    }
}
