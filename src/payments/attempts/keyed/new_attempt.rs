//! A new attempt and its first timeline row: the fragment that every statement making an
//! attempt shares (pay an order, checkout, failover and retries).
//!
//! What it relies on (docs/DESIGN.md, "Attempts"): the order's trigger
//! (`payment_attempts_claim_order`) copies amount and currency from the order and moves it to
//! `processing` in the same statement, or refuses an order that is not awaiting payment or
//! already has an open attempt (invariants 1, 2 and 5); `payment_attempts_provider_key` makes
//! the attempt's provider idempotency key its own; `payment_attempts_retry_follows_failure`
//! lets a retry follow only a failed attempt of the same order.

use chrono::{DateTime, Utc};
use diesel::sql_types::{Nullable, Text, Timestamptz, Uuid as SqlUuid};

use crate::db::statement::{Param, Statement};
use crate::ids::PaymentId;
use crate::payments::attempts::provider_idempotency_key;
use crate::payments::attempts::retry::RetryReason;
use crate::payments::attempts::Source;
use crate::payments::status::AttemptStatus;
use crate::providers::{CaptureMethod, ThreeDSecure};

/// What a new attempt is made of, whichever order it pays.
pub struct NewAttempt<'a> {
    pub id: PaymentId,
    pub payment_method: &'a str,
    pub provider: &'a str,
    /// When the reconciler may first look, if the request that made it never finishes: the
    /// end of the request's key lease, so also the end of its send (`sending_until`).
    pub first_check_at: DateTime<Utc>,
    /// Automatic unless the payment holds the money for a later capture.
    pub capture_method: CaptureMethod,
    /// Where the payer comes back to after a challenge.
    pub return_url: Option<&'a str>,
    /// For a retry: the failed attempt of the same request it follows, and why, with the
    /// words its first timeline row says it in ("retried at b after a soft decline …").
    pub retry: Option<(PaymentId, RetryReason, String)>,
    /// Whether the charge asks for 3-D Secure: `Required` for a step-up.
    pub three_d_secure: ThreeDSecure,
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
            capture_method: CaptureMethod::Automatic,
            return_url: None,
            retry: None,
            three_d_secure: ThreeDSecure::Automatic,
            provider_key: provider_idempotency_key(id),
        }
    }

    /// The same attempt, captured by `capture_method` and sending the payer back to
    /// `return_url` after a challenge.
    pub fn taken(mut self, capture_method: CaptureMethod, return_url: Option<&'a str>) -> Self {
        self.capture_method = capture_method;
        self.return_url = return_url;
        self
    }

    /// The same attempt, made after `failed` for `reason` (told as `detail`), asking for
    /// `three_d_secure`.
    pub fn retrying(
        mut self,
        failed: PaymentId,
        (reason, detail): (RetryReason, String),
        three_d_secure: ThreeDSecure,
    ) -> Self {
        self.retry = Some((failed, reason, detail));
        self.three_d_secure = three_d_secure;
        self
    }

    /// The CTEs `made_attempt` (this attempt, `created`, from the rows of `from`, paying the
    /// order `order_id`, an SQL expression), `timeline` (its first row) and `done` (its id: the
    /// key's resource). `key`: the client's Idempotency-Key the attempt records.
    pub(in crate::payments::attempts) fn insert<'f>(
        &'f self,
        q: &mut Statement<'f>,
        merchant: Param,
        key: Param,
        from: &str,
        order_id: &str,
    ) {
        let id = q.bind::<SqlUuid, _>(self.id.0);
        let method = q.bind::<Text, _>(self.payment_method);
        let provider = q.bind::<Text, _>(self.provider);
        let provider_key = q.bind::<Text, _>(&self.provider_key);
        let check = q.bind::<Timestamptz, _>(self.first_check_at);
        let capture = q.bind::<Text, _>(self.capture_method.as_str());
        let return_url = q.bind::<Nullable<Text>, _>(self.return_url);
        let retry = self.retry.as_ref();
        let retry_of = q.bind::<Nullable<SqlUuid>, _>(retry.map(|(of, ..)| of.0));
        let retry_reason = q.bind::<Nullable<Text>, _>(retry.map(|(_, why, _)| why.as_str()));
        let detail = q.bind::<Nullable<Text>, _>(retry.map(|(.., detail)| detail.as_str()));
        let three_d_secure = q.bind::<Text, _>(self.three_d_secure.as_str());
        q.push(format_args!(
            "made_attempt AS (
    INSERT INTO payment_attempts (merchant_id, id, order_id, status, payment_method,
        provider, provider_idempotency_key, idempotency_key, next_check_at, sending_until,
        capture_method, return_url, retry_of, retry_reason, three_d_secure)
    SELECT {merchant}, {id}, {order_id}, {created}, {method}, {provider}, {provider_key}, {key},
        {check}, {check}, {capture}, {return_url}, {retry_of}, {retry_reason}, {three_d_secure}
    FROM {from} RETURNING *),
timeline AS (
    INSERT INTO attempt_transitions (merchant_id, attempt_id, from_status, to_status, source,
        detail)
    SELECT merchant_id, id, NULL, status, {api}, {detail} FROM made_attempt),
done AS (SELECT id AS resource_id FROM made_attempt)",
            created = AttemptStatus::Created.sql(),
            api = Source::Api.sql(),
        ));
    }
}
