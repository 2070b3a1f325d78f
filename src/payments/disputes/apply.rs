//! A provider's dispute notice applied (docs/guides/disputes.md): the dispute created, or
//! moved, in the caller's transaction (the one that records the event), never the payment.
//!
//! A dispute payorch knows is found by its own id at the provider, and its payment is the
//! dispute's: Adyen's later notifications (`CHARGEBACK_REVERSED`, `SECOND_CHARGEBACK`, the
//! pre-arbitration's) may leave out `originalReference`, and dropping one would leave a
//! dispute won with nothing held while the payer has the money. A new dispute's payment is
//! found by the provider's payment id (Adyen's `merchantReference`, payorch's attempt id,
//! when that finds none). The payment's row is locked before the dispute is looked up:
//! two first news of one dispute (Stripe sends `charge.dispute.created` and
//! `.funds_withdrawn` together) then take turns, and the second finds the first's row and is
//! judged as a move. Without that lock there is no row to lock yet, and both would insert;
//! the unique `(provider, provider_dispute_id)` keeps one row, and the migration's hold is
//! written only for the row kept, whoever calls.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::moves::{judge, Standing};
use super::{DisputeRow, DisputeStage, DisputeStatus};
use crate::db::schema::{
    dispute_transitions as t, disputes as d, late_approvals as l, payment_attempts as a,
};
use crate::db::PgConn;
use crate::ids::{DisputeId, PaymentId};
use crate::providers::DisputeNotice;

/// What the notice did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Created the dispute, or moved it.
    Applied,
    /// A move the dispute's state machine refuses, or news older than the last applied.
    Stale,
    /// Contradicts what payorch knows: another payment or currency than the dispute's or
    /// the payment's.
    Conflict,
    /// Names no payment payorch made at that provider.
    UnknownPayment,
}

/// What the notice did, why, and the payment it is about (the event's row names it).
#[derive(Debug, Clone)]
pub struct Told {
    pub effect: Effect,
    pub detail: String,
    /// `(merchant_id, attempt_id)`.
    pub owner: Option<(Uuid, Uuid)>,
    /// The dispute as it is after the notice; `None` when none was found or made.
    pub dispute: Option<DisputeRow>,
}

/// The payment a dispute is about, as the dispute copies it.
#[derive(Debug, Clone, Queryable)]
struct Payment {
    merchant_id: Uuid,
    id: Uuid,
    order_id: Uuid,
    currency: String,
    provider_payment_id: Option<String>,
}

/// The columns of [`Payment`].
type PaymentColumns = (
    a::merchant_id,
    a::id,
    a::order_id,
    a::currency,
    a::provider_payment_id,
);
const PAYMENT: PaymentColumns = (
    a::merchant_id,
    a::id,
    a::order_id,
    a::currency,
    a::provider_payment_id,
);

/// Applies `notice` from `provider`, told at `at` (the provider's event time), with `event`
/// (its type) written on the dispute's timeline. Call inside the event's transaction.
pub async fn apply_notice(
    conn: &mut PgConn,
    provider: &str,
    notice: &DisputeNotice,
    event: &str,
    at: DateTime<Utc>,
) -> QueryResult<Told> {
    let told = |effect, detail: String, owner, dispute| Told {
        effect,
        detail,
        owner,
        dispute,
    };
    let known = dispute_of(conn, provider, &notice.provider_dispute_id).await?;
    let payment = match &known {
        Some(dispute) => payment_by_id(conn, dispute.merchant_id, dispute.attempt_id).await?,
        None => payment_of(conn, provider, notice).await?,
    };
    let Some(payment) = payment else {
        let named = notice
            .provider_payment_id
            .as_deref()
            .or(notice.attempt_id.as_deref())
            .unwrap_or("named");
        return Ok(told(
            Effect::UnknownPayment,
            format!("no payment {named} at {provider}"),
            None,
            None,
        ));
    };
    let owner = Some((payment.merchant_id, payment.id));
    if let Some(why) = &notice.unclear {
        // Recorded `conflict` with the payment it names: needs-a-human lists it.
        return Ok(told(
            Effect::Conflict,
            format!("{why}: dispute {} for a human", notice.provider_dispute_id),
            owner,
            known,
        ));
    }
    if payment.currency != notice.currency || notice.amount <= 0 {
        return Ok(told(
            Effect::Conflict,
            format!(
                "dispute {} of {} {} on a payment in {}",
                notice.provider_dispute_id, notice.amount, notice.currency, payment.currency
            ),
            owner,
            None,
        ));
    }
    let Some(provider_payment_id) = notice
        .provider_payment_id
        .as_deref()
        .or(payment.provider_payment_id.as_deref())
    else {
        // Found by payorch's reference, and neither the news nor the payment names the
        // provider's payment: nothing to keep the dispute under. For a human.
        return Ok(told(
            Effect::Conflict,
            format!(
                "dispute {} names no payment at {provider}, and payment {} has no provider id",
                notice.provider_dispute_id,
                PaymentId(payment.id)
            ),
            owner,
            None,
        ));
    };
    let provider_payment_id = provider_payment_id.to_owned();
    lock_payment(conn, &payment).await?;
    let existing = match locked(conn, provider, &notice.provider_dispute_id).await? {
        Some(row) => row,
        None => match create(conn, provider, notice, &payment, &provider_payment_id, at).await? {
            Some(row) => {
                transition(conn, &row, None, event).await?;
                let detail = format!(
                    "opened {} at {}",
                    notice.status.as_str(),
                    notice.stage.as_str()
                );
                return Ok(told(Effect::Applied, detail, owner, Some(row)));
            }
            // Another news of it came first: judged as a move of the row it made.
            None => locked(conn, provider, &notice.provider_dispute_id)
                .await?
                .ok_or(diesel::result::Error::NotFound)?,
        },
    };
    let other_payment = notice
        .provider_payment_id
        .as_ref()
        .is_some_and(|named| *named != existing.provider_payment_id);
    if existing.attempt_id != payment.id || other_payment {
        return Ok(told(
            Effect::Conflict,
            format!(
                "dispute {} is of payment {}, not {}",
                notice.provider_dispute_id,
                existing.provider_payment_id,
                notice.provider_payment_id.as_deref().unwrap_or("this one")
            ),
            owner,
            Some(existing),
        ));
    }
    let from = Standing {
        // The domains hold the stored words to these.
        status: DisputeStatus::parse(&existing.status).unwrap_or(DisputeStatus::UnderReview),
        stage: DisputeStage::parse(&existing.stage).unwrap_or(DisputeStage::Chargeback),
        at: existing.provider_updated_at,
    };
    let new_terms = notice.amount != existing.amount
        || notice
            .evidence_due_by
            .is_some_and(|due| Some(due) != existing.evidence_due_by);
    if let Err(why) = judge(from, notice.status, notice.stage, at, new_terms) {
        return Ok(told(Effect::Stale, why, owner, Some(existing)));
    }
    let moved: DisputeRow = diesel::update(d::table.find((existing.merchant_id, existing.id)))
        .set((
            d::status.eq(notice.status.as_str()),
            d::stage.eq(notice.stage.as_str()),
            d::amount.eq(notice.amount),
            d::reason.eq(notice.reason.as_str()),
            d::provider_reason.eq(&notice.provider_reason),
            d::evidence_due_by.eq(notice.evidence_due_by.or(existing.evidence_due_by)),
            d::provider_updated_at.eq(at),
        ))
        .returning(DisputeRow::as_returning())
        .load(conn)
        .await
        .and_then(crate::db::one)?;
    transition(conn, &moved, Some(from.status), event).await?;
    let detail = if (from.status, from.stage) == (notice.status, notice.stage) {
        format!(
            "{} ({}): amount {} -> {}, evidence due {:?} -> {:?}",
            from.status.as_str(),
            from.stage.as_str(),
            existing.amount,
            moved.amount,
            existing.evidence_due_by,
            moved.evidence_due_by
        )
    } else {
        format!(
            "{} ({}) -> {} ({})",
            from.status.as_str(),
            from.stage.as_str(),
            notice.status.as_str(),
            notice.stage.as_str()
        )
    };
    Ok(told(Effect::Applied, detail, owner, Some(moved)))
}

/// The payment by the provider's id; for a notice naming payorch's attempt id (Adyen's
/// merchant reference), by that when the provider's id finds none (a payment whose answer
/// payorch never read has no provider id yet).
async fn payment_of(
    conn: &mut PgConn,
    provider: &str,
    notice: &DisputeNotice,
) -> QueryResult<Option<Payment>> {
    if let Some(provider_payment_id) = &notice.provider_payment_id {
        let by_provider_id = a::table
            .filter(a::provider.eq(provider))
            .filter(a::provider_payment_id.eq(provider_payment_id))
            .select(PAYMENT)
            .limit(1)
            .load::<Payment>(conn)
            .await
            .map(|rows| rows.into_iter().next())?;
        if by_provider_id.is_some() {
            return Ok(by_provider_id);
        }
        // A charge payorch failed and the provider approved late (`late_approvals`): the
        // failed attempt may not carry the charge's id, the late approval does.
        let late = l::table
            .filter(l::provider.eq(provider))
            .filter(l::provider_payment_id.eq(provider_payment_id))
            .select((l::merchant_id, l::attempt_id))
            .limit(1)
            .load::<(Uuid, Uuid)>(conn)
            .await
            .map(|rows| rows.into_iter().next())?;
        if let Some((merchant_id, attempt_id)) = late {
            return payment_by_id(conn, merchant_id, attempt_id).await;
        }
    }
    let Some(attempt) = notice
        .attempt_id
        .as_deref()
        .and_then(|id| id.parse::<PaymentId>().ok())
    else {
        return Ok(None);
    };
    a::table
        .filter(a::id.eq(attempt.0))
        .filter(a::provider.eq(provider))
        .select(PAYMENT)
        .limit(1)
        .load::<Payment>(conn)
        .await
        .map(|rows| rows.into_iter().next())
}

/// The payment a known dispute is of.
async fn payment_by_id(
    conn: &mut PgConn,
    merchant_id: Uuid,
    attempt_id: Uuid,
) -> QueryResult<Option<Payment>> {
    a::table
        .find((merchant_id, attempt_id))
        .select(PAYMENT)
        .load::<Payment>(conn)
        .await
        .map(|rows| rows.into_iter().next())
}

/// The dispute as it stands, not locked: only to find its payment, whose row is locked
/// before the dispute is read again ([`locked`]).
async fn dispute_of(
    conn: &mut PgConn,
    provider: &str,
    provider_dispute_id: &str,
) -> QueryResult<Option<DisputeRow>> {
    d::table
        .filter(d::provider.eq(provider))
        .filter(d::provider_dispute_id.eq(provider_dispute_id))
        .select(DisputeRow::as_select())
        .limit(1)
        .load(conn)
        .await
        .map(|rows| rows.into_iter().next())
}

/// The payment's row, locked until the transaction ends: the lock the migration's
/// `disputes_overlap_flag` and a refund's insert take, so taking it first serialises all
/// news of the payment's disputes and its refunds in one order.
async fn lock_payment(conn: &mut PgConn, payment: &Payment) -> QueryResult<()> {
    a::table
        .find((payment.merchant_id, payment.id))
        .select(a::id)
        .for_no_key_update()
        .load::<Uuid>(conn)
        .await
        .map(drop)
}

/// The dispute, locked until the transaction ends.
async fn locked(
    conn: &mut PgConn,
    provider: &str,
    provider_dispute_id: &str,
) -> QueryResult<Option<DisputeRow>> {
    d::table
        .filter(d::provider.eq(provider))
        .filter(d::provider_dispute_id.eq(provider_dispute_id))
        .select(DisputeRow::as_select())
        .for_update()
        .limit(1)
        .load(conn)
        .await
        .map(|rows| rows.into_iter().next())
}

/// A new dispute in the notice's status; `None` if another transaction made it first. The
/// provider's payment id is the notice's, or the payment's when the notice names none.
async fn create(
    conn: &mut PgConn,
    provider: &str,
    notice: &DisputeNotice,
    payment: &Payment,
    provider_payment_id: &str,
    at: DateTime<Utc>,
) -> QueryResult<Option<DisputeRow>> {
    diesel::insert_into(d::table)
        .values((
            d::merchant_id.eq(payment.merchant_id),
            d::id.eq(DisputeId::new().0),
            d::attempt_id.eq(payment.id),
            d::order_id.eq(payment.order_id),
            d::provider.eq(provider),
            d::provider_dispute_id.eq(&notice.provider_dispute_id),
            d::provider_payment_id.eq(provider_payment_id),
            d::status.eq(notice.status.as_str()),
            d::stage.eq(notice.stage.as_str()),
            d::amount.eq(notice.amount),
            d::currency.eq(&notice.currency),
            d::reason.eq(notice.reason.as_str()),
            d::provider_reason.eq(&notice.provider_reason),
            d::evidence_due_by.eq(notice.evidence_due_by),
            d::provider_updated_at.eq(at),
        ))
        .on_conflict((d::provider, d::provider_dispute_id))
        .do_nothing()
        .returning(DisputeRow::as_returning())
        .load(conn)
        .await
        .map(|rows| rows.into_iter().next())
}

/// One line of the dispute's timeline: what the provider's event moved.
async fn transition(
    conn: &mut PgConn,
    row: &DisputeRow,
    from: Option<DisputeStatus>,
    event: &str,
) -> QueryResult<usize> {
    diesel::insert_into(t::table)
        .values((
            t::merchant_id.eq(row.merchant_id),
            t::dispute_id.eq(row.id),
            t::from_status.eq(from.map(DisputeStatus::as_str)),
            t::to_status.eq(&row.status),
            t::stage.eq(&row.stage),
            t::source.eq("webhook"),
            t::detail.eq(event),
        ))
        .execute(conn)
        .await
}
