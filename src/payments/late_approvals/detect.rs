//! A late approval told by a webhook: the event's row and the late approval's, in one
//! statement (whole text: `tests/sql/late_approval_detect.sql`), so nothing is half-written.
//! The trigger of `late_approvals` tells the merchant (`late_approval.detected`) in the same
//! statement.
//!
//! What it relies on: `provider_webhooks (provider, provider_event_id)` is unique, so a copy
//! of the event records nothing and makes nothing; `late_approvals_once (merchant_id,
//! attempt_id)` is unique, so another event of the same charge (Stripe's `succeeded` after its
//! `amount_capturable_updated`, a webhook after a lookup) is recorded but makes no second row,
//! and so no second undo; `late_approvals_of_a_failure` refuses a row whose attempt is not
//! failed, should it have moved since it was read (it cannot: failed is final).

use chrono::{DateTime, Utc};
use diesel::sql_types::{BigInt, Bool, Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::{ApprovedAs, LateApproval, LateSource};
use crate::db::sql::Sql;
use crate::db::statement::{span, Statement};
use crate::db::PgConn;
use crate::payments::PaymentAttempt;
use crate::providers::WebhookEvent;
use tracing::Instrument;

/// The news of one webhook, about to be recorded with its late approval.
pub struct WebhookNews<'a> {
    /// The id the event's row gets.
    pub event_row: Uuid,
    pub provider: &'a str,
    pub event: &'a WebhookEvent,
    /// The event's row's detail.
    pub detail: &'a str,
    pub attempt: &'a PaymentAttempt,
    pub approved_as: ApprovedAs,
    /// The late approval's row is claimed until then: the receiving request sends the undo
    /// at once, and the reconciler sends it only if that request did not finish.
    pub claimed_until: DateTime<Utc>,
}

/// What the statement wrote.
#[derive(Debug)]
pub struct Detected {
    /// The event's row was recorded (`false`: a copy was first, nothing was written).
    pub recorded: bool,
    /// The late approval made by it; `None` when the attempt had one already.
    pub made: Option<LateApproval>,
}

#[derive(QueryableByName)]
struct Written {
    #[diesel(sql_type = Bool)]
    recorded: bool,
    #[diesel(sql_type = Nullable<Jsonb>)]
    made: Option<serde_json::Value>,
}

/// Records the event as a conflict and its late approval, in one statement.
pub async fn record_webhook(
    conn: &mut PgConn,
    news: &WebhookNews<'_>,
) -> diesel::QueryResult<Detected> {
    let late_id = Uuid::now_v7();
    let written: Written = statement(news, late_id)
        .load(conn)
        .instrument(span("late_approval_detect"))
        .await
        .and_then(crate::db::one)?;
    let made = written
        .made
        .map(serde_json::from_value::<LateApproval>)
        .transpose()
        .map_err(|err| diesel::result::Error::DeserializationError(err.into()))?;
    Ok(Detected {
        recorded: written.recorded,
        made,
    })
}

fn statement<'f>(news: &'f WebhookNews<'f>, late_id: Uuid) -> Sql<'f> {
    let WebhookNews {
        event_row,
        provider,
        event,
        detail,
        attempt,
        approved_as,
        claimed_until,
    } = news;
    let mut q = Statement::new();
    let id = q.bind::<SqlUuid, _>(*event_row);
    let provider = q.bind::<Text, _>(*provider);
    let event_key = q.bind::<Text, _>(&event.id);
    let event_type = q.bind::<Text, _>(&event.event_type);
    let detail = q.bind::<Text, _>(*detail);
    let merchant = q.bind::<SqlUuid, _>(attempt.merchant_id.0);
    let attempt_id = q.bind::<SqlUuid, _>(attempt.id.0);
    let payload = q.bind::<Jsonb, _>(&event.raw);
    let created = q.bind::<Timestamptz, _>(event.created);
    let late = q.bind::<SqlUuid, _>(late_id);
    let order = q.bind::<SqlUuid, _>(attempt.order_id.0);
    let charge = q.bind::<Text, _>(&event.provider_id);
    let amount = q.bind::<BigInt, _>(attempt.amount);
    let currency = q.bind::<Text, _>(&attempt.currency);
    let approved = q.bind::<Text, _>(approved_as.as_str());
    let source = q.bind::<Text, _>(LateSource::Webhook.as_str());
    let until = q.bind::<Timestamptz, _>(*claimed_until);
    q.push(format_args!(
        "WITH recorded AS (
    INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, detail,
        merchant_id, attempt_id, payload, provider_created_at, payload_kept)
    VALUES ({id}, {provider}, {event_key}, {event_type}, 'conflict', {detail}, {merchant},
        {attempt_id}, {payload}, {created}, true)
    ON CONFLICT (provider, provider_event_id, provider_created_at) DO NOTHING
    RETURNING merchant_id, attempt_id),
made AS (
    INSERT INTO late_approvals (merchant_id, id, attempt_id, order_id, provider,
        provider_payment_id, amount, currency, approved_as, source, next_check_at)
    SELECT merchant_id, {late}, attempt_id, {order}, {provider}, {charge}, {amount}, {currency},
        {approved}, {source}, {until}
    FROM recorded
    ON CONFLICT (merchant_id, attempt_id) DO NOTHING RETURNING *)
SELECT EXISTS (SELECT 1 FROM recorded) AS recorded, (SELECT to_jsonb(m) FROM made m) AS made"
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::payments::attempts::tests::an_attempt;

    #[test]
    fn the_statement_reads_as_its_snapshot() {
        let attempt = an_attempt();
        let event = WebhookEvent {
            id: "evt_1".into(),
            event_type: "payment_intent.succeeded".into(),
            created: Utc::now(),
            attempt_id: Some(attempt.id.to_string()),
            provider_id: "pi_1".into(),
            acted_on: true,
            modification: false,
            outcome: None,
            amount: Some(attempt.amount),
            currency: Some(attempt.currency.clone()),
            refund: None,
            dispute: None,
            raw: serde_json::json!({}),
        };
        let news = WebhookNews {
            event_row: Uuid::now_v7(),
            provider: "sandbox",
            event: &event,
            detail: "a late approval",
            attempt: &attempt,
            approved_as: ApprovedAs::Succeeded,
            claimed_until: Utc::now(),
        };
        assert_sql_snapshot("late_approval_detect", &statement(&news, Uuid::now_v7()));
    }
}
