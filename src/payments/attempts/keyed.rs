//! The keyed operations that make a payment attempt (pay an order, checkout) as the SQL that
//! runs inside the claim statement of [`crate::idempotency::claim()`], so that a new key, its
//! work and its record are one statement and one round trip. An order's own (create, cancel)
//! are [`crate::payments::orders::keyed`].
//!
//! Each work returns a `jsonb` object `{"order": …, "attempt": …}` of the rows it made (from
//! `RETURNING`), and each replay the same object of the rows as they are now; [`Resources`]
//! reads both. Ids are made here (UUIDv7), so the statement needs nothing back from the
//! database before it runs.

use crate::db::sql::Sql;
use chrono::{DateTime, Utc};
use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{Text, Timestamptz, Uuid as SqlUuid};
use serde::Deserialize;
use serde_json::Value;

use super::{provider_idempotency_key, refuses_attempt, AttemptRow, PaymentAttempt};
use crate::idempotency::{KeyedWork, RecordAs};
use crate::ids::{OrderId, PaymentId};
use crate::payments::orders::keyed::{is_reference_taken, CreateOrder, INSERT_ORDER};
use crate::payments::orders::{Order, OrderRow};

/// The key's recovery point once the attempt exists (recorded with it, in one statement).
pub const ATTEMPT_CREATED: &str = "attempt_created";
pub const PAYMENT_ATTEMPT: &str = "payment_attempt";

/// The attempt a key names, as it is now.
const ATTEMPT_NOW: &str = "(SELECT to_jsonb(a) FROM payment_attempts a \
     WHERE a.merchant_id = $2 AND a.id = found.resource_id)";
/// The order of the attempt a key names, as it is now.
const ATTEMPTS_ORDER_NOW: &str = "(SELECT to_jsonb(o) FROM orders o JOIN payment_attempts a \
     ON a.merchant_id = o.merchant_id AND a.order_id = o.id \
     WHERE a.merchant_id = $2 AND a.id = found.resource_id)";

/// The first timeline row of `made_attempt`, and the key's resource.
pub(super) const ATTEMPT_TIMELINE_AND_DONE: &str = "timeline AS ( \
     INSERT INTO attempt_events (merchant_id, attempt_id, from_status, to_status, source) \
     SELECT merchant_id, id, NULL, 'created', 'api' FROM made_attempt), \
     done AS (SELECT id AS resource_id FROM made_attempt)";

/// The rows a claim statement returned, made or as they are now.
#[derive(Default, Deserialize)]
pub struct Resources {
    order: Option<OrderRow>,
    attempt: Option<AttemptRow>,
}

impl Resources {
    pub fn read(value: Value) -> serde_json::Result<Self> {
        if value.is_null() {
            return Ok(Resources::default());
        }
        serde_json::from_value(value)
    }

    pub fn attempt_and_order(self) -> (Option<PaymentAttempt>, Option<Order>) {
        (
            self.attempt.map(Into::into),
            self.order.map(Order::from_row),
        )
    }
}

/// What a new attempt is made of, whichever order it pays.
pub struct NewAttempt<'a> {
    pub id: PaymentId,
    pub payment_method: &'a str,
    pub provider: &'a str,
    /// When the reconciler may first look, if the request that made it never finishes: the
    /// end of the request's key lease, so also the end of its send (`sending_until`).
    pub first_check_at: DateTime<Utc>,
    provider_key: String,
}

impl<'a> NewAttempt<'a> {
    pub fn new(payment_method: &'a str, provider: &'a str, first_check_at: DateTime<Utc>) -> Self {
        let id = PaymentId::new();
        NewAttempt {
            id,
            payment_method,
            provider,
            first_check_at,
            provider_key: provider_idempotency_key(id),
        }
    }

    /// `made_attempt` from the rows of `from`, whose `order_id` is `order_id`; parameters
    /// from `$first` on. The order's trigger copies amount and currency and moves the order to
    /// `processing` in the same statement, or refuses (invariants 1, 2 and 5).
    pub(super) fn insert(from: &str, order_id: &str, first: usize) -> String {
        let p = |i: usize| format!("${}", first + i);
        format!(
            "made_attempt AS ( \
                 INSERT INTO payment_attempts (merchant_id, id, order_id, status, payment_method, \
                     provider, provider_idempotency_key, idempotency_key, next_check_at, \
                     sending_until) \
                 SELECT $2, {id}, {order_id}, 'created', {method}, {provider}, {pkey}, $3, {check}, \
                     {check} \
                 FROM {from} RETURNING *)",
            id = p(0),
            method = p(1),
            provider = p(2),
            pkey = p(3),
            check = p(4),
        )
    }

    pub(super) fn bind<'f>(&'f self, query: Sql<'f>) -> Sql<'f> {
        query
            .bind::<SqlUuid, _>(self.id.0)
            .bind::<Text, _>(self.payment_method)
            .bind::<Text, _>(self.provider)
            .bind::<Text, _>(&self.provider_key)
            .bind::<Timestamptz, _>(self.first_check_at)
    }
}

/// `POST /v1/orders/{id}/payments`: transaction 1 for an existing order (docs/DESIGN.md,
/// "A payment: two transactions and one provider call").
pub struct PayOrder<'a> {
    pub order_id: OrderId,
    pub attempt: NewAttempt<'a>,
}

impl KeyedWork for PayOrder<'_> {
    fn resource_type(&self) -> &'static str {
        PAYMENT_ATTEMPT
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::InFlight {
            recovery_point: ATTEMPT_CREATED,
        }
    }
    fn ctes(&self) -> String {
        format!(
            "{}, {ATTEMPT_TIMELINE_AND_DONE}",
            NewAttempt::insert("go", "$14", 15)
        )
    }
    fn fresh(&self) -> String {
        "jsonb_build_object('attempt', (SELECT to_jsonb(m) FROM made_attempt m))".into()
    }
    fn replay(&self) -> String {
        format!("jsonb_build_object('attempt', {ATTEMPT_NOW})")
    }
    fn bind<'f>(&'f self, query: Sql<'f>) -> Sql<'f> {
        self.attempt.bind(query.bind::<SqlUuid, _>(self.order_id.0))
    }
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
        refuses_attempt(kind, constraint)
    }
}

/// `POST /v1/checkout`: transaction 1 for a new order, made in the same statement as its
/// first attempt.
pub struct Checkout<'a> {
    pub order: CreateOrder<'a>,
    pub attempt: NewAttempt<'a>,
}

impl KeyedWork for Checkout<'_> {
    fn resource_type(&self) -> &'static str {
        PAYMENT_ATTEMPT
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::InFlight {
            recovery_point: ATTEMPT_CREATED,
        }
    }
    fn ctes(&self) -> String {
        format!(
            "{INSERT_ORDER}, {}, {ATTEMPT_TIMELINE_AND_DONE}",
            NewAttempt::insert("made_order", "made_order.id", 20)
        )
    }
    fn fresh(&self) -> String {
        "jsonb_build_object('order', (SELECT to_jsonb(m) FROM made_order m), \
                            'attempt', (SELECT to_jsonb(m) FROM made_attempt m))"
            .into()
    }
    fn replay(&self) -> String {
        format!("jsonb_build_object('order', {ATTEMPTS_ORDER_NOW}, 'attempt', {ATTEMPT_NOW})")
    }
    fn bind<'f>(&'f self, query: Sql<'f>) -> Sql<'f> {
        self.attempt.bind(self.order.bind_order(query))
    }
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
        is_reference_taken(kind, constraint)
    }
}
