//! The provider call log (`provider_calls`): every call to a provider about an attempt, its
//! refunds and its captures and voids, written in the transaction that records what the call
//! said, and read back for support's story.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Integer, Nullable, SmallInt, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;

use super::{PaymentAttempt, Source};
use crate::db::schema::provider_calls;
use crate::db::statement::Statement;
use crate::db::PgConn;
use crate::ids::{MerchantId, PaymentId};
use crate::providers::{ProviderCall, ProviderOutcome};
use crate::words::words;

/// One logged provider call about an attempt.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = provider_calls)]
pub struct LoggedCall {
    pub operation: String,
    pub source: String,
    pub outcome: String,
    pub http_status: Option<i16>,
    pub latency_ms: i32,
    pub detail: Option<String>,
    pub created_at: DateTime<Utc>,
}

pub async fn provider_calls_of(
    conn: &mut PgConn,
    attempt: &PaymentAttempt,
) -> QueryResult<Vec<LoggedCall>> {
    provider_calls::table
        .filter(provider_calls::merchant_id.eq(attempt.merchant_id.0))
        .filter(provider_calls::attempt_id.eq(attempt.id.0))
        .order(provider_calls::id)
        .select(LoggedCall::as_select())
        .load(conn)
        .await
}

words! {
    /// Which provider operation a call was.
    pub enum CallKind {
        Create => "create",
        Retrieve => "retrieve",
        /// A read-after-write list of the provider's charges (or a charge's refunds), looked
        /// through for payorch's own. (Rows of before #39 also say `search`: Stripe's search,
        /// which payorch no longer asks.)
        List => "list",
        /// A refund's create, or a resend of it under the refund's key.
        CreateRefund => "create_refund",
        RetrieveRefund => "retrieve_refund",
        /// A capture of a hold, or a resend of it under the operation's key.
        Capture => "capture",
        /// A void of a hold (or of a challenge), or a resend of it under the operation's key.
        Cancel => "cancel",
        /// The payer is back from a challenge: what the provider decided (Adyen's
        /// `/payments/details`, a Stripe retrieve).
        CompleteAction => "complete_action",
    }
}

/// A provider call as its log row holds it.
pub(crate) struct CallRecord {
    kind: CallKind,
    source: Source,
    outcome: &'static str,
    http_status: Option<i16>,
    latency_ms: i32,
    detail: Option<String>,
}

impl CallRecord {
    pub(crate) fn of(kind: CallKind, source: Source, call: &ProviderCall) -> Self {
        let detail = match &call.outcome {
            ProviderOutcome::Failed { code, message, .. } => Some(format!("{code}: {message}")),
            ProviderOutcome::Unknown { reason } | ProviderOutcome::Unavailable { reason } => {
                Some(reason.clone())
            }
            other => other.provider_id().map(str::to_owned),
        };
        CallRecord {
            kind,
            source,
            outcome: call.outcome.label(),
            http_status: call.http_status.map(|s| s as i16),
            latency_ms: call.latency.as_millis().min(i32::MAX as u128) as i32,
            detail,
        }
    }

    /// Binds operation, source, outcome, HTTP status, latency and detail, and gives their
    /// placeholders as the tail of a `provider_calls` row's values.
    pub(crate) fn values<'f>(&'f self, q: &mut Statement<'f>) -> String {
        let kind = q.bind::<Text, _>(self.kind.as_str());
        let source = q.bind::<Text, _>(self.source.as_str());
        let outcome = q.bind::<Text, _>(self.outcome);
        let status = q.bind::<Nullable<SmallInt>, _>(self.http_status);
        let latency = q.bind::<Integer, _>(self.latency_ms);
        let detail = q.bind::<Nullable<Text>, _>(self.detail.as_deref());
        format!("{kind}, {source}, {outcome}, {status}, {latency}, {detail}")
    }
}

/// Logs the request's own create of `attempt` (its send, answered by `call`), inside the
/// caller's transaction.
pub async fn log_create(
    conn: &mut PgConn,
    attempt: &PaymentAttempt,
    call: &ProviderCall,
) -> diesel::QueryResult<()> {
    log_call(
        conn,
        attempt.merchant_id,
        attempt.id,
        CallKind::Create,
        Source::Api,
        call,
        None,
    )
    .await
}

/// Appends a provider call to the attempt's call log, inside the caller's transaction;
/// `asked_by` (who pressed for it, for a support action) leads its detail.
pub async fn log_call(
    conn: &mut PgConn,
    merchant_id: MerchantId,
    attempt_id: PaymentId,
    kind: CallKind,
    source: Source,
    call: &ProviderCall,
    asked_by: Option<&str>,
) -> diesel::QueryResult<()> {
    let mut record = CallRecord::of(kind, source, call);
    if let Some(who) = asked_by {
        record.detail = Some(match record.detail {
            Some(detail) => format!("asked by {who}; {detail}"),
            None => format!("asked by {who}"),
        });
    }
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(merchant_id.0);
    let attempt = q.bind::<SqlUuid, _>(attempt_id.0);
    let values = record.values(&mut q);
    q.push(format_args!(
        "INSERT INTO provider_calls (merchant_id, attempt_id, operation, source, outcome,
    http_status, latency_ms, detail) VALUES ({merchant}, {attempt}, {values})"
    ));
    q.finish().execute(conn).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::CallKind;

    /// The log is written, never parsed back: the round trip is through `ALL`.
    #[test]
    fn every_call_kind_has_a_word_of_its_own() {
        for kind in CallKind::ALL {
            let back = CallKind::ALL
                .into_iter()
                .filter(|k| k.as_str() == kind.as_str());
            assert_eq!(back.collect::<Vec<_>>(), vec![kind]);
        }
    }
}
