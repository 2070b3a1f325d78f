//! Verified provider events, recorded once per provider event id and applied to their
//! attempt through the same decision as every other provider answer
//! ([`transition::decide`](super::transition::decide)).
//!
//! The event row and its effect are one transaction, and the row is written first: a second
//! copy of the event, even one arriving at the same instant, waits on the unique
//! `(provider, provider_event_id)` and then finds it taken, so it changes nothing.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde::Serialize;

use super::attempts::{find_attempt, find_by_provider_payment, PaymentAttempt, Source};
use super::flow::{settle_key, Payments};
use super::transition::{apply, Decision};
use crate::db::pool::PoolError;
use crate::db::schema::webhook_events;
use crate::db::transaction::in_transaction;
use crate::db::DbPool;
use crate::ids::{EventId, PaymentId};
use crate::providers::WebhookEvent;

/// The event types payorch acts on; others are recorded `ignored`.
pub const HANDLED_TYPES: [&str; 4] = [
    "payment_intent.succeeded",
    "payment_intent.payment_failed",
    "payment_intent.processing",
    "payment_intent.canceled",
];

/// What an event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventOutcome {
    /// Moved the attempt, or added to an attempt still open (its provider id).
    Applied,
    /// Arrived after the attempt had already moved to, or past, what it says.
    Stale,
    /// Contradicts the attempt's final status (`payment_failed` after `succeeded`): not
    /// applied, counted for a human to look at.
    Conflict,
    /// Names no attempt payorch knows.
    UnknownAttempt,
    /// A type payorch does not act on.
    Ignored,
}

impl EventOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            EventOutcome::Applied => "applied",
            EventOutcome::Stale => "stale",
            EventOutcome::Conflict => "conflict",
            EventOutcome::UnknownAttempt => "unknown_attempt",
            EventOutcome::Ignored => "ignored",
        }
    }
}

/// The answer to one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// First delivery: recorded with what it did.
    Recorded { id: EventId, outcome: EventOutcome },
    /// Delivered before: nothing changed.
    Duplicate,
}

#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    #[error(transparent)]
    Unavailable(#[from] PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
}

/// Records `event` from `provider` and applies it, once per provider event id.
pub async fn receive(
    pool: &DbPool,
    payments: &Payments,
    event: &WebhookEvent,
) -> Result<Received, ReceiveError> {
    let provider = payments.provider.name();
    let mut conn = pool.get().await?;
    // A duplicate's transaction wrote nothing, so committing it changes nothing either.
    let received = in_transaction(&mut conn, async |conn| {
        let Some(id) = claim(conn, provider, event).await? else {
            return Ok(Received::Duplicate);
        };
        let (outcome, detail, attempt) = effect(conn, payments, provider, event).await?;
        record(conn, id, outcome, &detail, attempt.as_ref()).await?;
        Ok::<_, ReceiveError>(Received::Recorded { id, outcome })
    })
    .await?;
    let label = match &received {
        Received::Recorded { outcome, .. } => outcome.as_str(),
        Received::Duplicate => "duplicate",
    };
    payments.metrics.webhook_event(label);
    if let Received::Recorded {
        outcome: EventOutcome::Conflict,
        ..
    } = received
    {
        tracing::warn!(
            provider_event_id = %event.id,
            event_type = %event.event_type,
            "webhook contradicts a final attempt; not applied, needs a human"
        );
    }
    Ok(received)
}

/// Inserts the event row, or learns that the event was delivered before. The outcome is
/// settled by [`record`] in the same transaction, so nobody sees this first version.
async fn claim(
    conn: &mut AsyncPgConnection,
    provider: &str,
    event: &WebhookEvent,
) -> diesel::QueryResult<Option<EventId>> {
    let id = EventId::new();
    let inserted = diesel::insert_into(webhook_events::table)
        .values((
            webhook_events::id.eq(id.0),
            webhook_events::provider.eq(provider),
            webhook_events::provider_event_id.eq(&event.id),
            webhook_events::event_type.eq(&event.event_type),
            webhook_events::outcome.eq(EventOutcome::Ignored.as_str()),
            webhook_events::payload.eq(&event.raw),
            webhook_events::provider_created_at.eq(event.created),
        ))
        .on_conflict((webhook_events::provider, webhook_events::provider_event_id))
        .do_nothing()
        .execute(conn)
        .await?;
    Ok((inserted == 1).then_some(id))
}

/// What the event does, applied: its outcome, a detail for people, and its attempt.
async fn effect(
    conn: &mut AsyncPgConnection,
    payments: &Payments,
    provider: &str,
    event: &WebhookEvent,
) -> diesel::QueryResult<(EventOutcome, String, Option<PaymentAttempt>)> {
    let Some(attempt) = attempt_of(conn, provider, event).await? else {
        return Ok((
            if HANDLED_TYPES.contains(&event.event_type.as_str()) {
                EventOutcome::UnknownAttempt
            } else {
                EventOutcome::Ignored
            },
            format!("no attempt for {}", event.provider_id),
            None,
        ));
    };
    let outcome = match event.outcome() {
        Some(outcome) if HANDLED_TYPES.contains(&event.event_type.as_str()) => outcome,
        _ => {
            let detail = format!("{} is not acted on", event.event_type);
            return Ok((EventOutcome::Ignored, detail, Some(attempt)));
        }
    };
    let was = attempt.status;
    // An open attempt keeps the reconciler's schedule; the event is one more answer.
    let next_check = attempt
        .next_check_at
        .unwrap_or_else(|| Utc::now() + payments.reconciler.first_check());
    let applied = apply(
        conn,
        &payments.metrics,
        attempt,
        &outcome,
        Source::Webhook,
        next_check,
    )
    .await?;
    let attempt = applied.attempt;
    let now = attempt.status.as_str();
    let (result, detail) = match applied.decision {
        Decision::Move { to, .. } => {
            if to.is_final() {
                settle_key(conn, &attempt).await?;
            }
            (EventOutcome::Applied, format!("{} → {now}", was.as_str()))
        }
        Decision::StayOpen { .. } => (EventOutcome::Applied, format!("still {now}")),
        Decision::AlreadySo | Decision::Stale => {
            (EventOutcome::Stale, format!("attempt is already {now}"))
        }
        Decision::Conflict => (
            EventOutcome::Conflict,
            format!("says {} but the attempt is {now}", outcome.label()),
        ),
    };
    Ok((result, detail, Some(attempt)))
}

/// The attempt an event is about: by the attempt id payorch put in the charge's metadata,
/// else by the provider's charge id.
async fn attempt_of(
    conn: &mut AsyncPgConnection,
    provider: &str,
    event: &WebhookEvent,
) -> diesel::QueryResult<Option<PaymentAttempt>> {
    let by_metadata = event
        .attempt_id
        .as_deref()
        .and_then(|id| id.parse::<PaymentId>().ok());
    if let Some(id) = by_metadata {
        if let Some(attempt) = find_attempt(conn, None, id).await? {
            return Ok(Some(attempt));
        }
    }
    find_by_provider_payment(conn, provider, &event.provider_id).await
}

async fn record(
    conn: &mut AsyncPgConnection,
    id: EventId,
    outcome: EventOutcome,
    detail: &str,
    attempt: Option<&PaymentAttempt>,
) -> diesel::QueryResult<()> {
    diesel::sql_query(
        "UPDATE webhook_events SET outcome = $2, detail = $3, merchant_id = $4, attempt_id = $5 \
         WHERE id = $1",
    )
    .bind::<SqlUuid, _>(id.0)
    .bind::<Text, _>(outcome.as_str())
    .bind::<Text, _>(detail)
    .bind::<Nullable<SqlUuid>, _>(attempt.map(|a| a.merchant_id.0))
    .bind::<Nullable<SqlUuid>, _>(attempt.map(|a| a.id.0))
    .execute(conn)
    .await
    .map(|_| ())
}

/// One recorded event, as the attempt's support view shows it.
#[derive(Debug, Clone, Serialize, Queryable, Selectable, utoipa::ToSchema)]
#[diesel(table_name = webhook_events)]
pub struct RecordedEvent {
    pub provider_event_id: String,
    pub event_type: String,
    pub outcome: String,
    pub detail: Option<String>,
    #[schema(value_type = Option<String>)]
    pub provider_created_at: Option<DateTime<Utc>>,
    pub received_at: DateTime<Utc>,
}

/// The events recorded about `attempt`, in the order they arrived.
pub async fn events_of(
    conn: &mut AsyncPgConnection,
    attempt: &PaymentAttempt,
) -> diesel::QueryResult<Vec<RecordedEvent>> {
    webhook_events::table
        .filter(webhook_events::merchant_id.eq(attempt.merchant_id.0))
        .filter(webhook_events::attempt_id.eq(attempt.id.0))
        .order(webhook_events::received_at)
        .select(RecordedEvent::as_select())
        .load(conn)
        .await
}
