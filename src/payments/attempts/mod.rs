//! Payment attempts: one try to charge, under one provider idempotency key.
//! `created → pending → succeeded | failed`, and `created → succeeded | failed`.
//!
//! The rules are written once in Rust ([`AttemptStatus::can_become`]) and held again by the
//! database: partial unique indexes (one open and one succeeded attempt per order), unique
//! provider keys and charge ids, and triggers that refuse any other move and keep the order
//! in step (see the `payment_attempts` migration).

pub mod call_log;
pub mod cascade;
pub mod chain;
pub mod failover;
pub mod final_attempts;
pub mod keyed;
pub mod pay;
pub mod payer_return;
mod refusal;
pub mod retry;
mod source;
pub mod transition;

pub use call_log::{provider_calls_of, CallKind, LoggedCall};
pub use refusal::{refuses_attempt, why_refused, Refusal};
pub use source::Source;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Deserialize;
use uuid::Uuid;

use crate::db::schema::{attempt_transitions, payment_attempts};
use crate::db::scope::find_in_scope;
use crate::db::PgConn;
use crate::ids::{MerchantId, OrderId, PaymentId};
use crate::payments::status::AttemptStatus;
use crate::providers::decline::FailureClass;
use crate::providers::{CaptureMethod, NextAction, ThreeDSecure};
use retry::RetryReason;

/// A payment attempt (the API shows it as `views::Payment`).
#[derive(Debug, Clone)]
pub struct PaymentAttempt {
    pub id: PaymentId,
    pub merchant_id: MerchantId,
    pub order_id: OrderId,
    pub status: AttemptStatus,
    pub amount: i64,
    pub currency: String,
    pub payment_method: String,
    pub provider: String,
    /// Sent with every create of this charge, so the provider never charges it twice.
    pub provider_idempotency_key: String,
    /// The provider's charge id (`pi_…`), once known.
    pub provider_payment_id: Option<String>,
    /// For `failed`: payorch's code (docs/guides/declines.md): a decline's, the same through
    /// every provider, or `provider_no_record`. Attempts failed before the vocabulary keep
    /// the provider's raw code here, and have no class.
    pub failure_code: Option<String>,
    pub failure_message: Option<String>,
    /// For `failed`: what the failure allows next (`hard`, `soft`, `authentication_required`).
    pub failure_class: Option<FailureClass>,
    /// For `failed`: the provider's own code (`card_declined/insufficient_funds`, `12`).
    pub provider_failure_code: Option<String>,
    /// While `created` or `pending`: when payorch next asks the provider.
    pub next_check_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The client's Idempotency-Key that made this attempt.
    pub idempotency_key: Option<String>,
    /// How many times the reconciler has asked about it.
    pub checks: i32,
    /// What its refunds hold: succeeded ones and those still open (the refunds migration).
    pub refund_held: i64,
    /// Until when a create of it may still be on its way to the provider; every sender
    /// moves it forward before sending (docs/DESIGN.md, "No record, early").
    pub sending_until: DateTime<Utc>,
    /// Whether a success takes the money at once or holds it for a capture.
    pub capture_method: CaptureMethod,
    /// What a manual capture took; `None` until then, and for an automatic capture.
    pub amount_captured: Option<i64>,
    /// The redirect the payer was asked to follow (3-D Secure), once the provider asked.
    pub next_action: Option<NextAction>,
    /// Where payorch sends the payer back after a challenge.
    pub return_url: Option<String>,
    /// Until when the provider holds the money of an `authorized` attempt.
    pub authorized_until: Option<DateTime<Utc>>,
    /// For `canceled`: why (`voided`, `challenge_abandoned`, `authorization_expired`, …).
    pub cancellation_reason: Option<String>,
    /// The attempt of the same request this one follows, and why ([`retry`]); `None` for a
    /// request's first attempt (and for failovers made before the retries' migration).
    pub retry_of: Option<PaymentId>,
    pub retry_reason: Option<RetryReason>,
    /// Whether the charge asks the provider for 3-D Secure (a step-up's does).
    pub three_d_secure: ThreeDSecure,
}

impl PaymentAttempt {
    /// What a refund may give back: the whole amount of an automatic capture, what a manual
    /// one took.
    pub fn amount_taken(&self) -> i64 {
        self.amount_captured.unwrap_or(self.amount)
    }
}

/// The row as the table holds it; [`PaymentAttempt`] is how it is shown. Also read from
/// `to_jsonb` of a row, as the claim statement returns it.
#[derive(Queryable, Selectable, QueryableByName, Deserialize)]
#[diesel(table_name = payment_attempts)]
pub struct AttemptRow {
    merchant_id: Uuid,
    id: Uuid,
    order_id: Uuid,
    status: AttemptStatus,
    amount: i64,
    currency: String,
    payment_method: String,
    provider: String,
    provider_idempotency_key: String,
    provider_payment_id: Option<String>,
    failure_code: Option<String>,
    failure_message: Option<String>,
    idempotency_key: Option<String>,
    next_check_at: Option<DateTime<Utc>>,
    checks: i32,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    refund_held: i64,
    sending_until: DateTime<Utc>,
    // The columns of the holds-and-challenges migration: absent from the snapshots of events
    // written before it, hence the defaults.
    #[serde(default = "automatic")]
    capture_method: String,
    #[serde(default)]
    amount_captured: Option<i64>,
    #[serde(default)]
    next_action: Option<serde_json::Value>,
    #[serde(default)]
    return_url: Option<String>,
    #[serde(default)]
    authorized_until: Option<DateTime<Utc>>,
    #[serde(default)]
    cancellation_reason: Option<String>,
    // The decline vocabulary's columns, absent from older snapshots.
    #[serde(default)]
    failure_class: Option<String>,
    #[serde(default)]
    provider_failure_code: Option<String>,
    // The retries' columns, absent from older snapshots.
    #[serde(default)]
    retry_of: Option<Uuid>,
    #[serde(default)]
    retry_reason: Option<String>,
    #[serde(default = "asked_nothing")]
    three_d_secure: String,
}

fn asked_nothing() -> String {
    ThreeDSecure::Automatic.as_str().to_owned()
}

fn automatic() -> String {
    CaptureMethod::Automatic.as_str().to_owned()
}

impl From<AttemptRow> for PaymentAttempt {
    fn from(row: AttemptRow) -> Self {
        PaymentAttempt {
            id: PaymentId(row.id),
            merchant_id: MerchantId(row.merchant_id),
            order_id: OrderId(row.order_id),
            status: row.status,
            amount: row.amount,
            currency: row.currency,
            payment_method: row.payment_method,
            provider: row.provider,
            provider_idempotency_key: row.provider_idempotency_key,
            provider_payment_id: row.provider_payment_id,
            failure_code: row.failure_code,
            failure_message: row.failure_message,
            failure_class: row.failure_class.as_deref().and_then(FailureClass::parse),
            provider_failure_code: row.provider_failure_code,
            next_check_at: row.next_check_at,
            created_at: row.created_at,
            updated_at: row.updated_at,
            finished_at: row.finished_at,
            idempotency_key: row.idempotency_key,
            checks: row.checks,
            refund_held: row.refund_held,
            sending_until: row.sending_until,
            capture_method: CaptureMethod::from_column(&row.capture_method),
            amount_captured: row.amount_captured,
            // Written only from a `NextAction`; a shape this code does not know is not shown.
            next_action: row.next_action.and_then(|a| serde_json::from_value(a).ok()),
            return_url: row.return_url,
            authorized_until: row.authorized_until,
            cancellation_reason: row.cancellation_reason,
            retry_of: row.retry_of.map(PaymentId),
            retry_reason: row.retry_reason.as_deref().and_then(RetryReason::parse),
            three_d_secure: ThreeDSecure::from_column(&row.three_d_secure),
        }
    }
}

/// The provider key of an attempt: derived from its id, so it is the same on every resend
/// from any replica, for ever.
pub fn provider_idempotency_key(id: PaymentId) -> String {
    format!("payorch_{id}")
}

/// The attempt, if `merchant` (or support, with `None`) may see it.
pub async fn find_attempt(
    conn: &mut PgConn,
    merchant: Option<MerchantId>,
    id: PaymentId,
) -> QueryResult<Option<PaymentAttempt>> {
    let query = payment_attempts::table
        .select(AttemptRow::as_select())
        .into_boxed();
    let id = payment_attempts::id.eq(id.0);
    let row = find_in_scope(conn, query, id, payment_attempts::merchant_id, merchant);
    Ok(row.await?.map(AttemptRow::into))
}

/// Before a create of `attempt` is sent again: moves its `sending_until` forward to `until`
/// (the latest the send can end), unless it is final by now. `None` then: send nothing.
/// The row lock this takes orders every resend against a verdict of no record
/// ([`quiet_before`]; docs/DESIGN.md, "No record, early").
pub async fn before_resend(
    conn: &mut PgConn,
    attempt: &PaymentAttempt,
    until: DateTime<Utc>,
) -> QueryResult<Option<PaymentAttempt>> {
    use diesel::dsl::sql;
    use diesel::sql_types::Timestamptz;
    let target = payment_attempts::table
        .filter(payment_attempts::merchant_id.eq(attempt.merchant_id.0))
        .filter(payment_attempts::id.eq(attempt.id.0))
        .filter(payment_attempts::status.eq_any(["created", "pending"]));
    Ok(diesel::update(target)
        .set(
            payment_attempts::sending_until.eq(sql::<Timestamptz>("greatest(sending_until, ")
                .bind::<Timestamptz, _>(until)
                .sql(")")),
        )
        .returning(AttemptRow::as_returning())
        .load::<AttemptRow>(conn)
        .await
        .and_then(crate::db::one)
        .optional()?
        .map(Into::into))
}

/// Inside a transaction: locks `attempt`'s row and tells whether every create of it that
/// may have been sent ended before `before` and no new one may start unless it moves
/// `sending_until` first, which waits for this lock ([`before_resend`]).
pub async fn quiet_before(
    conn: &mut PgConn,
    attempt: &PaymentAttempt,
    before: DateTime<Utc>,
) -> QueryResult<bool> {
    let sending_until: Option<DateTime<Utc>> = payment_attempts::table
        .filter(payment_attempts::merchant_id.eq(attempt.merchant_id.0))
        .filter(payment_attempts::id.eq(attempt.id.0))
        .select(payment_attempts::sending_until)
        .for_update()
        .limit(1)
        .load(conn)
        .await
        .and_then(crate::db::one)
        .optional()?;
    Ok(sending_until.is_some_and(|until| until < before))
}

/// An order's attempts, newest first.
pub async fn attempts_of_order(
    conn: &mut PgConn,
    merchant_id: MerchantId,
    order_id: OrderId,
) -> QueryResult<Vec<PaymentAttempt>> {
    Ok(payment_attempts::table
        .filter(payment_attempts::merchant_id.eq(merchant_id.0))
        .filter(payment_attempts::order_id.eq(order_id.0))
        .order(payment_attempts::created_at.desc())
        .select(AttemptRow::as_select())
        .load::<AttemptRow>(conn)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// One line of an attempt's timeline.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = attempt_transitions)]
pub struct TimelineEntry {
    pub from_status: Option<String>,
    pub to_status: String,
    pub source: String,
    pub detail: Option<String>,
    pub created_at: DateTime<Utc>,
}

pub async fn timeline(
    conn: &mut PgConn,
    attempt: &PaymentAttempt,
) -> QueryResult<Vec<TimelineEntry>> {
    attempt_transitions::table
        .filter(attempt_transitions::merchant_id.eq(attempt.merchant_id.0))
        .filter(attempt_transitions::attempt_id.eq(attempt.id.0))
        .order(attempt_transitions::id)
        .select(TimelineEntry::as_select())
        .load(conn)
        .await
}

/// The open statuses as an SQL list, for `status IN …` in the hand-written statements about
/// attempts (the reconciler's queue and gauges, support's searches, the settling of a key).
/// The migrations' partial indexes name the same list, and the reconciler's queue must match
/// `payment_attempts_due`'s predicate word for word for the planner to use it. Not the only
/// place the statuses are spelt out: diesel filters (`why_refused`, `before_resend` here,
/// support's open refunds) and the refunds' statements, whose statuses are the same words,
/// write them too; the test below holds only these two lists to [`AttemptStatus::is_final`].
macro_rules! open_statuses {
    () => {
        "('created', 'pending', 'authorized')"
    };
}
pub(crate) use open_statuses;

/// The open statuses but a hold, as an SQL list: attempts whose outcome nobody knows yet, as
/// the unresolved gauges and `needs-a-human` count them (a hold is known and waits for the
/// merchant, for up to its provider's lifetime of days).
macro_rules! unsettled_statuses {
    () => {
        "('created', 'pending')"
    };
}
pub(crate) use unsettled_statuses;

/// The statuses at which the request that made an attempt has its answer: the final ones and
/// a hold ([`AttemptStatus::is_answered`]); whoever moves an attempt to one completes its key.
macro_rules! answered_statuses {
    () => {
        "('authorized', 'succeeded', 'failed', 'canceled')"
    };
}
pub(crate) use answered_statuses;

#[cfg(test)]
pub(crate) mod tests {
    use crate::payments::status::AttemptStatus::*;

    /// A `created` attempt, as the claim statement makes one (for statements' snapshots).
    pub(crate) fn an_attempt() -> super::PaymentAttempt {
        let now = chrono::Utc::now();
        let id = crate::ids::PaymentId::new();
        super::PaymentAttempt {
            id,
            merchant_id: crate::ids::MerchantId(uuid::Uuid::nil()),
            order_id: crate::ids::OrderId::new(),
            status: Created,
            amount: 1999,
            currency: "EUR".into(),
            payment_method: "pm_card_visa".into(),
            provider: "sandbox".into(),
            provider_idempotency_key: super::provider_idempotency_key(id),
            provider_payment_id: None,
            failure_code: None,
            failure_message: None,
            failure_class: None,
            provider_failure_code: None,
            next_check_at: Some(now),
            created_at: now,
            updated_at: now,
            finished_at: None,
            idempotency_key: Some("k".into()),
            checks: 0,
            refund_held: 0,
            sending_until: now,
            capture_method: crate::providers::CaptureMethod::Automatic,
            amount_captured: None,
            next_action: None,
            return_url: None,
            authorized_until: None,
            cancellation_reason: None,
            retry_of: None,
            retry_reason: None,
            three_d_secure: crate::providers::ThreeDSecure::Automatic,
        }
    }

    /// Each status is in exactly one of the SQL lists, the one `is_final` says.
    #[test]
    fn the_sql_lists_of_statuses_agree_with_the_type() {
        let named = |list: &str| -> Vec<super::AttemptStatus> {
            list.trim_matches(|c| c == '(' || c == ')')
                .split(", ")
                .map(|s| super::AttemptStatus::parse(s.trim_matches('\'')).expect("a status"))
                .collect()
        };
        let open = named(open_statuses!());
        let unsettled = named(unsettled_statuses!());
        let answered = named(answered_statuses!());
        assert!(answered.iter().all(|s| s.is_answered()));
        assert!([Created, Pending, Authorized, Succeeded, Failed, Canceled]
            .iter()
            .all(|s| s.is_answered() == answered.contains(s)));
        assert_eq!(open, [Created, Pending, Authorized]);
        assert!(open.iter().all(|s| !s.is_final()));
        assert!(unsettled
            .iter()
            .all(|s| s.is_unsettled() && open.contains(s)));
        assert!(open
            .iter()
            .all(|s| s.is_unsettled() == unsettled.contains(s)));
    }

    #[test]
    fn attempts_move_one_way() {
        assert!(Created.can_become(Pending));
        assert!(Created.can_become(Succeeded));
        assert!(Created.can_become(Failed));
        assert!(Pending.can_become(Succeeded));
        assert!(Pending.can_become(Failed));
        assert!(!Pending.can_become(Created));
        assert!(!Created.can_become(Created));
        for last in [Succeeded, Failed, Canceled] {
            assert!(last.is_final());
            for next in [Created, Pending, Succeeded, Failed] {
                assert!(!last.can_become(next), "{last:?} → {next:?}");
            }
        }
    }
}
