//! An event about a payment attempt: looked at with its attempt, judged, and recorded with
//! its effect.

use chrono::Utc;
use diesel::prelude::*;
use diesel::sql_types::{Bool, Jsonb, Nullable, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;

use super::keyed::apply_to_attempt;
use super::outcome::{EventOutcome, ReceiveError, Received};
use super::refund_event::event_outcome;
use crate::db::sql::Sql;
use crate::db::statement::{span, Statement};
use crate::db::{DbPool, PgConn};
use crate::ids::{LateApprovalId, PaymentId, ProviderWebhookId};
use crate::payments::attempts::keyed::record_answer::is_contradiction;
use crate::payments::attempts::transition::{decide, move_of, Decision};
use crate::payments::attempts::{AttemptRow, PaymentAttempt, Source};
use crate::payments::event_log::{EventLog, EventRow};
use crate::payments::holds::record::refuse_live_operation;
use crate::payments::late_approvals::detect::{record_webhook, WebhookNews};
use crate::payments::late_approvals::told::cancel_told;
use crate::payments::late_approvals::undo::undo;
use crate::payments::late_approvals::{self, late_approval, ApprovedAs, LateStatus};
use crate::payments::reconciler::settings::to_chrono;
use crate::payments::service::Payments;
use crate::payments::status::AttemptStatus;
use crate::providers::{ProviderOutcome, WebhookEvent};
use tracing::Instrument;

/// Looks at the event and its attempt (one statement), judges, then writes the event row
/// with its effect (one statement). An event that moves an attempt is inserted `FROM` the
/// conditional update, so it is recorded exactly when the move happened; if the attempt
/// moved in between, nothing was written and the event is judged again.
///
/// A connection is taken only for each statement: an event on its way to the event log holds
/// none while it waits for its batch.
pub(super) async fn record_once(
    pool: &DbPool,
    payments: &Payments,
    provider: &str,
    event: &WebhookEvent,
) -> Result<Received, ReceiveError> {
    // Bounded: a round that writes nothing means another writer moved the attempt first,
    // and an attempt makes at most two moves.
    for round in 0..4 {
        // A later round means the attempt moved meanwhile: read it again.
        let seen = match (round == 0)
            .then(|| remembered(payments, provider, event))
            .flatten()
        {
            Some(seen) => seen,
            None => look(&mut *pool.get().await?, provider, event)
                .await?
                .known()?,
        };
        if seen.recorded {
            return Ok(Received::Duplicate);
        }
        let new = NewEvent {
            id: ProviderWebhookId::new(),
            provider,
            event,
        };
        let charge_owner = seen.charge_owner;
        let Some(attempt) = seen.attempt else {
            let outcome = if event.acted_on {
                EventOutcome::UnknownAttempt
            } else {
                EventOutcome::Ignored
            };
            let detail = format!("no attempt for {}", event.provider_id);
            return new
                .insert(&payments.event_log, outcome, &detail, None)
                .await;
        };
        // The adapter says what an event means only for the kinds payorch acts on.
        let outcome = match event.outcome.clone() {
            Some(outcome) => outcome,
            None => {
                let detail = format!("{} is not acted on", event.event_type);
                return new
                    .insert(
                        &payments.event_log,
                        EventOutcome::Ignored,
                        &detail,
                        Some(&attempt),
                    )
                    .await;
            }
        };
        // A signed event is still only the provider's word about *some* charge: one that
        // does not match what payorch asked for must not settle this attempt.
        if let Some(detail) = disagreement(provider, &attempt, event, charge_owner) {
            return new
                .insert(
                    &payments.event_log,
                    EventOutcome::Conflict,
                    &detail,
                    Some(&attempt),
                )
                .await;
        }
        let was = attempt.status;
        // The end of a late approval's void the provider only took (Adyen's CANCELLATION):
        // done, the row ends `voided`; refused, the refund is asked at once.
        let cancel = cancel_told(pool, payments, &attempt, &outcome, event.modification).await?;
        if let Some(told) = cancel {
            let result = event_outcome(told.effect);
            return new
                .insert(&payments.event_log, result, &told.detail, Some(&attempt))
                .await;
        }
        // A hold is never `failed`: a provider's "failed" about a held payment is about its
        // capture or void (Adyen's CAPTURE or CANCELLATION with success false), which it ends
        // as refused; the hold stays as it was. So for any refused capture or cancel: a
        // technical cancel refused because the payment was captured says nothing failed.
        if let (true, ProviderOutcome::Failed { code, message, .. }) = (
            was == AttemptStatus::Authorized || event.modification,
            &outcome,
        ) {
            let refused = {
                let mut conn = pool.get().await?;
                refuse_live_operation(&mut conn, &attempt, code, message).await?
            };
            let (result, detail) = match refused {
                Some(operation) => (
                    EventOutcome::Applied,
                    format!(
                        "the {} {} was refused: {code}",
                        operation.kind.as_str(),
                        operation.id
                    ),
                ),
                None => (
                    EventOutcome::Conflict,
                    format!("says {code} of a hold with no capture or void under way"),
                ),
            };
            return new
                .insert(&payments.event_log, result, &detail, Some(&attempt))
                .await;
        }
        let decision = decide(was, attempt.capture_method, &outcome);
        let Some(change) = move_of(was, &decision) else {
            // Money taken for an attempt payorch told the merchant failed: given back at once.
            if let Some(approved_as) = late_approval(&attempt, &outcome) {
                return record_late_approval(pool, payments, &new, &attempt, approved_as).await;
            }
            // Only a final attempt writes nothing, and a final attempt never changes: what
            // the event is to it stays true without a lock.
            let now = was.as_str();
            let voided = void_of_late_approval(pool, &attempt, &outcome).await?;
            let (result, detail) = match (decision, voided) {
                (Decision::Conflict, Some(late)) => (
                    EventOutcome::Stale,
                    format!("tells of the void of late approval {late}"),
                ),
                (Decision::Conflict, None) => (
                    EventOutcome::Conflict,
                    format!("says {} but the attempt is {now}", outcome.label()),
                ),
                _ => (EventOutcome::Stale, format!("attempt is already {now}")),
            };
            return new
                .insert(&payments.event_log, result, &detail, Some(&attempt))
                .await;
        };
        let detail = match &decision {
            Decision::Move { to, .. } => format!("{} → {}", was.as_str(), to.as_str()),
            _ => format!("still {}", was.as_str()),
        };
        // An open attempt keeps the reconciler's schedule; the event is one more answer.
        let next_check = attempt
            .next_check_at
            .unwrap_or_else(|| Utc::now() + payments.reconciler.first_check());
        let query = apply_to_attempt(
            &attempt, change, next_check, new.id, provider, event, &detail,
        );
        #[derive(QueryableByName)]
        struct Written {
            #[diesel(sql_type = Bool)]
            recorded: bool,
        }
        let mut conn = pool.get().await?;
        let written = match query
            .load::<Written>(&mut conn)
            .instrument(span("webhook_apply"))
            .await
            .and_then(crate::db::one)
            .optional()
        {
            // Another attempt took this charge id since the look: look again, and find it.
            Err(e) if is_contradiction(&e) => continue,
            other => other?,
        };
        match written {
            Some(written) if written.recorded => {
                if let Decision::Move { to, .. } = &decision {
                    payments.metrics.transition(was, *to, Source::Webhook);
                }
                if let Decision::Move {
                    failure: Some(f), ..
                } = &decision
                {
                    let decline = f.decline.as_ref();
                    payments
                        .metrics
                        .declined(&attempt.provider, &f.code, decline);
                }
                return Ok(Received::Recorded {
                    id: new.id,
                    outcome: EventOutcome::Applied,
                });
            }
            // A copy of this event was recorded first; re-applying what leaves the status
            // as it is (a provider id, the next check) changed nothing.
            Some(_) => return Ok(Received::Duplicate),
            None => continue,
        }
    }
    Err(ReceiveError::Database(
        diesel::result::Error::RollbackTransaction,
    ))
}

/// An approval of an attempt payorch holds as failed (docs/guides/declines.md, "Late
/// approvals"): the event's row (a conflict) and the late approval's in one statement, then
/// the undo asked at once. Should this replica die before the undo is answered, the row stays
/// `undoing` and the reconciler sends it, under the same keys, once its claim has passed.
async fn record_late_approval(
    pool: &DbPool,
    payments: &Payments,
    new: &NewEvent<'_>,
    attempt: &PaymentAttempt,
    approved_as: ApprovedAs,
) -> Result<Received, ReceiveError> {
    let detail = format!(
        "says {} but the attempt is failed: a late approval, undone at once",
        approved_as.as_str()
    );
    let news = WebhookNews {
        event_row: new.id.0,
        provider: new.provider,
        event: new.event,
        detail: &detail,
        attempt,
        approved_as,
        claimed_until: Utc::now() + to_chrono(payments.reconciler.claim),
    };
    let detected = record_webhook(&mut *pool.get().await?, &news).await?;
    if !detected.recorded {
        return Ok(Received::Duplicate);
    }
    if let Some(late) = detected.made {
        payments.metrics.late_approval(&late.provider, "detected");
        tracing::warn!(late_approval = %late.id, attempt = %attempt.id, provider = %late.provider,
            approved_as = approved_as.as_str(), "a failed attempt was approved; undoing it");
        let id = late.id;
        if let Err(err) = undo(pool, payments, late, Source::Webhook).await {
            tracing::warn!(late_approval = %id, error = %err,
                "undo of a late approval not recorded; the reconciler sends it again");
        }
    }
    Ok(Received::Recorded {
        id: new.id,
        outcome: EventOutcome::Conflict,
    })
}

/// The late approval whose void `outcome` tells of, if it does: a failed attempt the provider
/// says is canceled after payorch voided its late approval is no contradiction, and no human
/// need look at it twice (the late approval is listed already). Only a late approval
/// `voided`: a cancel of one still undoing, refunded or whose undo failed is not the void
/// payorch recorded, and stays a conflict for a human.
async fn void_of_late_approval(
    pool: &DbPool,
    attempt: &PaymentAttempt,
    outcome: &ProviderOutcome,
) -> Result<Option<String>, ReceiveError> {
    if attempt.status != AttemptStatus::Failed
        || !matches!(outcome, ProviderOutcome::Canceled { .. })
    {
        return Ok(None);
    }
    let late = late_approvals::of_attempt(&mut *pool.get().await?, attempt).await?;
    Ok(late
        .filter(|late| late.status == LateStatus::Voided.as_str())
        .map(|late| LateApprovalId(late.id).to_string()))
}

/// Whether the event was recorded before, and the attempt it is about: by the attempt id
/// payorch put in the charge's metadata, else by the provider's charge id.
#[derive(QueryableByName)]
struct Seen {
    #[diesel(sql_type = Bool)]
    recorded: bool,
    #[diesel(sql_type = Nullable<Jsonb>)]
    attempt: Option<serde_json::Value>,
    /// The attempt that already holds the event's charge id, if any.
    #[diesel(sql_type = Nullable<SqlUuid>)]
    charge_owner: Option<uuid::Uuid>,
}

impl Seen {
    fn known(self) -> diesel::QueryResult<Known> {
        let attempt = self
            .attempt
            .map(|value| {
                serde_json::from_value::<AttemptRow>(value)
                    .map(Into::into)
                    .map_err(|err| diesel::result::Error::DeserializationError(err.into()))
            })
            .transpose()?;
        Ok(Known {
            recorded: self.recorded,
            attempt,
            charge_owner: self.charge_owner.map(PaymentId),
        })
    }
}

/// What the event is judged against: read by [`look`], or remembered.
struct Known {
    /// Known to be recorded already (a remembered attempt says `false` and lets the insert's
    /// `ON CONFLICT` find a copy).
    recorded: bool,
    attempt: Option<PaymentAttempt>,
    charge_owner: Option<PaymentId>,
}

/// The event's attempt, when this replica saw it finish and it holds the event's charge id:
/// a final attempt never changes, and the charge id is unique per provider, so this is what
/// [`look`] would read. Anything less certain is read.
fn remembered(payments: &Payments, provider: &str, event: &WebhookEvent) -> Option<Known> {
    let id = event.attempt_id.as_deref()?.parse::<PaymentId>().ok()?;
    let attempt = payments.finals.get(id)?;
    let holds_charge = attempt.provider == provider
        && attempt.provider_payment_id.as_deref() == Some(event.provider_id.as_str());
    holds_charge.then_some(Known {
        recorded: false,
        charge_owner: Some(attempt.id),
        attempt: Some(attempt),
    })
}

async fn look(
    conn: &mut PgConn,
    provider: &str,
    event: &WebhookEvent,
) -> diesel::QueryResult<Seen> {
    look_statement(provider, event)
        .load(conn)
        .await
        .and_then(crate::db::one)
}

/// The statement of [`look`]: whether the event is recorded, its attempt (by the id in the
/// charge's metadata, else by the charge id) and the attempt holding its charge id (whole
/// text: `tests/sql/webhook_look.sql`).
fn look_statement<'f>(provider: &'f str, event: &'f WebhookEvent) -> Sql<'f> {
    let by_metadata = event
        .attempt_id
        .as_deref()
        .and_then(|id| id.parse::<PaymentId>().ok());
    let mut q = Statement::new();
    let provider = q.bind::<Text, _>(provider);
    let event_id = q.bind::<Text, _>(event.id.as_str());
    let attempt = q.bind::<Nullable<SqlUuid>, _>(by_metadata.map(|id| id.0));
    let charge = q.bind::<Text, _>(event.provider_id.as_str());
    q.push(format_args!(
        "WITH owner AS MATERIALIZED (
    SELECT a.id, to_jsonb(a) AS row FROM payment_attempts a
    WHERE a.provider = {provider} AND a.provider_payment_id = {charge})
SELECT EXISTS (SELECT 1 FROM provider_webhooks
               WHERE provider = {provider} AND provider_event_id = {event_id}) AS recorded,
       coalesce((SELECT to_jsonb(a) FROM payment_attempts a WHERE a.id = {attempt}),
                (SELECT row FROM owner)) AS attempt,
       (SELECT id FROM owner) AS charge_owner"
    ));
    q.finish()
}

/// Why `event` cannot be about `attempt`, if it cannot: another provider, another amount or
/// currency, or a charge id other than the one the attempt has (or one another attempt
/// already has).
fn disagreement(
    provider: &str,
    attempt: &PaymentAttempt,
    event: &WebhookEvent,
    charge_owner: Option<PaymentId>,
) -> Option<String> {
    if attempt.provider != provider {
        return Some(format!(
            "comes from provider {provider} but the attempt went to {}",
            attempt.provider
        ));
    }
    if let Some(amount) = event.amount.filter(|&a| a != attempt.amount) {
        return Some(format!(
            "says amount {amount} but the attempt is for {}",
            attempt.amount
        ));
    }
    if let Some(currency) = event
        .currency
        .as_deref()
        .filter(|c| !c.eq_ignore_ascii_case(&attempt.currency))
    {
        return Some(format!(
            "says currency {currency} but the attempt is in {}",
            attempt.currency
        ));
    }
    if let Some(known) = attempt
        .provider_payment_id
        .as_deref()
        .filter(|&known| known != event.provider_id)
    {
        return Some(format!(
            "names charge {} but the attempt's charge is {known}",
            event.provider_id
        ));
    }
    if charge_owner.is_some_and(|owner| owner != attempt.id) {
        return Some(format!(
            "names charge {}, which belongs to another attempt",
            event.provider_id
        ));
    }
    None
}

/// An event about to be recorded.
struct NewEvent<'a> {
    id: ProviderWebhookId,
    provider: &'a str,
    event: &'a WebhookEvent,
}

impl NewEvent<'_> {
    /// Records an event that changes no attempt, unless a copy was recorded first; in the
    /// event log's next batch.
    async fn insert(
        &self,
        log: &EventLog,
        outcome: EventOutcome,
        detail: &str,
        attempt: Option<&PaymentAttempt>,
    ) -> Result<Received, ReceiveError> {
        let recorded = log
            .record(EventRow {
                id: self.id.0,
                provider: self.provider.to_owned(),
                provider_event_id: self.event.id.clone(),
                event_type: self.event.event_type.clone(),
                outcome: outcome.as_str(),
                detail: detail.to_owned(),
                merchant_id: attempt.map(|a| a.merchant_id.0),
                attempt_id: attempt.map(|a| a.id.0),
                payload: self.event.raw.clone(),
                provider_created_at: self.event.created,
            })
            .await?;
        Ok(if recorded {
            Received::Recorded {
                id: self.id,
                outcome,
            }
        } else {
            Received::Duplicate
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_look_reads_as_its_snapshot() {
        let event = WebhookEvent {
            id: "evt_1".into(),
            event_type: "payment_intent.succeeded".into(),
            created: Utc::now(),
            attempt_id: Some(PaymentId::new().to_string()),
            provider_id: "pi_1".into(),
            acted_on: true,
            modification: false,
            outcome: None,
            amount: None,
            currency: None,
            refund: None,
            dispute: None,
            raw: serde_json::Value::Null,
        };
        let sql = look_statement("stripe", &event);
        crate::db::snapshot::assert_sql_snapshot("webhook_look", &sql);
    }
}
