//! Verified provider events, recorded once per provider event id and applied to their
//! attempt through the same decision as every other provider answer
//! ([`transition::decide`](crate::payments::attempts::transition::decide)).
//!
//! The event row and its effect are one statement: an event that moves its attempt is
//! inserted from the conditional update that moves it. A second copy of the event, even one
//! arriving at the same instant, either finds the attempt moved already (and judges again)
//! or waits on the unique `(provider, provider_event_id)` and finds it taken, so it changes
//! nothing.

mod attempt_event;
mod dispute_event;
mod event_row;
pub mod keyed;
pub mod old_payloads;
mod outcome;
pub mod reaper;
mod refund_event;
pub mod retention;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use self::attempt_event::record_once;
use self::dispute_event::record_dispute_event;
pub use self::outcome::{EventOutcome, ReceiveError, Received};
use self::refund_event::record_refund_event;
use crate::db::schema::provider_webhooks;
use crate::db::DbPool;
use crate::db::PgConn;
use crate::payments::attempts::PaymentAttempt;
use crate::payments::service::Payments;
use crate::providers::WebhookEvent;

/// Records `event` from the provider named `provider` and applies it, once per provider
/// event id.
#[tracing::instrument(skip_all, fields(provider = provider, provider_event_id = %event.id,
    payment = event.attempt_id.as_deref().unwrap_or("unknown")))]
pub async fn receive(
    pool: &DbPool,
    payments: &Payments,
    provider: &str,
    event: &WebhookEvent,
) -> Result<Received, ReceiveError> {
    let received = match (&event.refund, &event.dispute) {
        (Some(notice), _) => record_refund_event(pool, payments, provider, event, notice).await?,
        (None, Some(notice)) => {
            let received = record_dispute_event(pool, provider, event, notice).await?;
            if let Received::Recorded {
                outcome: EventOutcome::Applied,
                ..
            } = received
            {
                payments.metrics.dispute(provider, notice.status.as_str());
            }
            received
        }
        (None, None) => record_once(pool, payments, provider, event).await?,
    };
    if received == Received::Duplicate {
        count_redelivery(pool, provider, &event.id).await?;
    }
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
            "webhook contradicts what payorch knows of the attempt; not applied, needs a human"
        );
    }
    Ok(received)
}

/// A later copy of a recorded event: counted on its row, nothing else changes.
async fn count_redelivery(
    pool: &DbPool,
    provider: &str,
    provider_event_id: &str,
) -> Result<(), ReceiveError> {
    let mut conn = pool.get().await?;
    diesel::update(provider_webhooks::table)
        .filter(provider_webhooks::provider.eq(provider))
        .filter(provider_webhooks::provider_event_id.eq(provider_event_id))
        .set(provider_webhooks::deliveries.eq(provider_webhooks::deliveries + 1))
        .execute(&mut conn)
        .await?;
    Ok(())
}

/// One recorded event, as the attempt's support view shows it.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = provider_webhooks)]
pub struct RecordedEvent {
    pub provider_event_id: String,
    pub event_type: String,
    pub outcome: String,
    pub detail: Option<String>,
    pub provider_created_at: Option<DateTime<Utc>>,
    pub received_at: DateTime<Utc>,
    /// How often the provider delivered it: the first delivery did `outcome`, each later
    /// copy was a `duplicate` that changed nothing.
    pub deliveries: i32,
}

/// The events recorded about `attempt`, in the order they arrived.
pub async fn events_of(
    conn: &mut PgConn,
    attempt: &PaymentAttempt,
) -> diesel::QueryResult<Vec<RecordedEvent>> {
    provider_webhooks::table
        .filter(provider_webhooks::merchant_id.eq(attempt.merchant_id.0))
        .filter(provider_webhooks::attempt_id.eq(attempt.id.0))
        .order(provider_webhooks::received_at)
        .select(RecordedEvent::as_select())
        .load(conn)
        .await
}
