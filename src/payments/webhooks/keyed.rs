//! A webhook's statement that moves an attempt (whole text: `tests/sql/webhook_apply.sql`;
//! docs/DESIGN.md, "Webhooks"): the attempt's move and its timeline row
//! ([`move_ctes`](crate::payments::attempts::transition::move_ctes)), the completion of the
//! client's key once the attempt is final (the webhook holds no key in flight: it completes
//! the key by the attempt, [`settle_by_resource`]), and the event's row, in one statement.
//!
//! What it relies on: the move is conditional on the status the attempt was read with (a
//! statement that finds it moved writes nothing, and the caller looks again);
//! `provider_webhooks (provider, provider_event_id)` is unique, so of two copies of one event
//! only one is recorded as applied (`ON CONFLICT DO NOTHING`), and the other answers
//! duplicate; `payment_attempts_provider_payment` gives a provider charge id to one attempt.

use chrono::{DateTime, Utc};
use diesel::sql_types::{Jsonb, Text, Timestamptz, Uuid as SqlUuid};

use super::outcome::EventOutcome;
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::idempotency::in_flight::{settle_by_resource, Settle};
use crate::idempotency::ResourceType;
use crate::ids::ProviderWebhookId;
use crate::payments::attempts::transition::{move_ctes, Change};
use crate::payments::attempts::{answered_statuses, open_statuses, PaymentAttempt, Source};
use crate::providers::WebhookEvent;

/// The statement applying `event` (recorded as `event_id`, from `provider`, with `detail`)
/// to `attempt` as `change`; its one row says whether the event's row was recorded.
pub(super) fn apply_to_attempt<'f>(
    attempt: &'f PaymentAttempt,
    change: Change<'f>,
    next_check_at: DateTime<Utc>,
    event_id: ProviderWebhookId,
    provider: &'f str,
    event: &'f WebhookEvent,
    detail: &'f str,
) -> Sql<'f> {
    let mut q = Statement::new();
    move_ctes(&mut q, attempt, change, Source::Webhook, next_check_at);
    q.push(",\n");
    settle_by_resource(
        &mut q,
        attempt.merchant_id,
        attempt.idempotency_key.as_deref(),
        (ResourceType::PaymentAttempt, attempt.id.0),
        Settle {
            from: "moved",
            status: 201,
            open: open_statuses!(),
        },
        Some(answered_statuses!()),
    );
    let id = q.bind::<SqlUuid, _>(event_id.0);
    let provider = q.bind::<Text, _>(provider);
    let event_key = q.bind::<Text, _>(&event.id);
    let event_type = q.bind::<Text, _>(&event.event_type);
    let detail = q.bind::<Text, _>(detail);
    let payload = q.bind::<Jsonb, _>(&event.raw);
    let created = q.bind::<Timestamptz, _>(event.created);
    q.push(format_args!(
        ",
recorded AS (
    INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, detail,
        merchant_id, attempt_id, payload, provider_created_at, payload_kept)
    SELECT {id}, {provider}, {event_key}, {event_type}, {applied}, {detail}, merchant_id, id,
        {payload}, {created}, true
    FROM moved
    ON CONFLICT (provider, provider_event_id, provider_created_at) DO NOTHING RETURNING 1)
SELECT EXISTS (SELECT 1 FROM recorded) AS recorded FROM moved",
        applied = EventOutcome::Applied.sql(),
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::payments::attempts::tests::an_attempt;
    use crate::payments::attempts::transition::{decide, move_of};
    use crate::providers::ProviderOutcome;

    #[test]
    fn the_statement_reads_as_its_snapshot() {
        let attempt = an_attempt();
        let outcome = ProviderOutcome::Succeeded {
            provider_id: "pi_1".into(),
        };
        let decision = decide(attempt.status, attempt.capture_method, &outcome);
        let change = move_of(attempt.status, &decision).expect("a move");
        let event = WebhookEvent {
            id: "evt_1".into(),
            event_type: "payment_intent.succeeded".into(),
            created: Utc::now(),
            attempt_id: Some(attempt.id.to_string()),
            provider_id: "pi_1".into(),
            acted_on: true,
            modification: false,
            outcome: Some(outcome),
            amount: Some(attempt.amount),
            currency: Some(attempt.currency.clone()),
            refund: None,
            dispute: None,
            raw: serde_json::json!({}),
        };
        let sql = apply_to_attempt(
            &attempt,
            change,
            Utc::now(),
            ProviderWebhookId::new(),
            "sandbox",
            &event,
            "created → succeeded",
        );
        assert_sql_snapshot("webhook_apply", &sql);
    }
}
