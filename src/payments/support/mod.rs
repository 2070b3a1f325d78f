//! What support staff ask of payments (docs/guides/support.md, "Support"): find attempts by any id or key,
//! read one attempt's whole story, and list the attempts that need a human.
//!
//! Search results are newest first by attempt id. Attempt ids are UUIDv7: their leading 48
//! bits are the millisecond they were made, so ordering by id is ordering by age, the id is a
//! stable and unique keyset cursor, and a time range becomes an id range the primary key and
//! `payment_attempts_id` can scan.

pub mod audit;
pub mod disputes;
pub mod stats;

use chrono::{DateTime, Duration, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use crate::db::schema::{
    idempotency_keys, merchants, orders, payment_attempts, provider_calls, provider_webhooks,
    refunds,
};
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::PgConn;
use crate::ids::{MerchantId, OrderId, PaymentId};
use crate::payments::attempts::keyed::record_answer::CONTRADICTION;
use crate::payments::attempts::{
    attempts_of_order, find_attempt, open_statuses, provider_calls_of, timeline,
    unsettled_statuses, AttemptRow, LoggedCall, PaymentAttempt, TimelineEntry,
};
use crate::payments::holds::{operations_of_payment, HoldOperation};
use crate::payments::late_approvals::{self, LateApproval};
use crate::payments::orders::{find_order, Order};
use crate::payments::reconciler::settings::NO_RECORD;
use crate::payments::refunds::{
    refund_timeline, refunds_of_payment, Refund, RefundRow, RefundTimelineEntry,
};
use crate::payments::settlement::{self, store::OpenFinding};
use crate::payments::status::AttemptStatus;
use crate::payments::webhooks::{events_of, RecordedEvent};

/// The filters of a search; every one given must hold.
#[derive(Debug, Clone, Default)]
pub struct Search {
    pub merchant_id: Option<MerchantId>,
    pub order_id: Option<OrderId>,
    /// The merchant's own reference of the order, exactly: unique per merchant, so without
    /// `merchant_id` or `merchant_name` it may find one order of each merchant.
    pub merchant_reference: Option<String>,
    /// Part of the merchant's name, in any case: every merchant whose name contains it.
    pub merchant_name: Option<String>,
    pub status: Option<AttemptStatus>,
    /// The provider the attempt was sent to, configured or not any more.
    pub provider: Option<String>,
    /// The client's Idempotency-Key that made the attempt.
    pub idempotency_key: Option<String>,
    pub provider_payment_id: Option<String>,
    /// Made at or after this instant.
    pub created_from: Option<DateTime<Utc>>,
    /// Made before this instant.
    pub created_to: Option<DateTime<Utc>>,
}

/// How far apart an attempt's id time and its row's `created_at` may be: the id is taken by
/// payorch's clock just before the statement that inserts the row, `created_at` by the
/// database's. A minute covers that gap and any skew between the two clocks; the exact
/// `created_at` filter does the rest.
const ID_VERSUS_ROW: Duration = Duration::minutes(1);

/// Up to `limit` attempts matching `search`, newest first, after `starting_after` (an attempt
/// id from the previous page). A charge id is looked for among the attempts of every provider
/// an attempt names, configured or not any more.
pub async fn search(
    conn: &mut PgConn,
    search: &Search,
    limit: i64,
    starting_after: Option<PaymentId>,
) -> QueryResult<Vec<PaymentAttempt>> {
    let providers = match search.provider_payment_id {
        Some(_) => providers_of_attempts(conn).await?,
        None => Vec::new(),
    };
    let merchants = merchants_searched(conn, search).await?;
    if merchants.as_ref().is_some_and(Vec::is_empty) {
        // A name no merchant has: nothing to find.
        return Ok(Vec::new());
    }
    let mut query = payment_attempts::table
        .select(AttemptRow::as_select())
        .order(payment_attempts::id.desc())
        .limit(limit)
        .into_boxed();
    if let Some(after) = starting_after {
        query = query.filter(payment_attempts::id.lt(after.0));
    }
    match merchants.as_deref() {
        // One merchant (the usual case, also for a name): the primary key `(merchant_id, id)`
        // walks its attempts newest first.
        Some([merchant]) => query = query.filter(payment_attempts::merchant_id.eq(*merchant)),
        // A name several merchants share a part of: rare, and the id walk stops at a page.
        Some(several) => {
            query = query.filter(payment_attempts::merchant_id.eq_any(several.to_vec()))
        }
        None => {}
    }
    if let Some(order) = search.order_id {
        query = query.filter(payment_attempts::order_id.eq(order.0));
    }
    if let Some(reference) = &search.merchant_reference {
        // A reference is unique per merchant (`orders_merchant_reference_key`, on
        // `(merchant_id, merchant_reference)`): naming the merchants makes one probe of that
        // index each, where a reference alone would scan every order. Merchants are few.
        let merchants = match merchants {
            Some(some) => some,
            None => merchants::table.select(merchants::id).load(conn).await?,
        };
        let order_ids = orders::table
            .filter(orders::merchant_id.eq_any(merchants))
            .filter(orders::merchant_reference.eq(reference.clone()))
            .select(orders::id);
        query = query.filter(payment_attempts::order_id.eq_any(order_ids));
    }
    if let Some(status) = search.status {
        query = query.filter(payment_attempts::status.eq(status.as_str()));
        if !status.is_final() {
            // Open attempts are few; this predicate lets the planner find them through the
            // partial index of open attempts instead of walking every id.
            query = query.filter(diesel::dsl::sql::<diesel::sql_types::Bool>(concat!(
                "status IN ",
                open_statuses!()
            )));
        }
    }
    if let Some(provider) = &search.provider {
        // Providers are few and each takes a share of the traffic: walking ids newest first
        // meets a provider's attempts soon (a rare one is better found with another filter).
        query = query.filter(payment_attempts::provider.eq(provider.clone()));
    }
    if let Some(key) = &search.idempotency_key {
        query = query.filter(payment_attempts::idempotency_key.eq(key.clone()));
    }
    if let Some(charge) = &search.provider_payment_id {
        // A charge id is unique per provider: naming every provider lets the search use the
        // `(provider, provider_payment_id)` index instead of walking ids.
        query = query
            .filter(payment_attempts::provider.eq_any(providers))
            .filter(payment_attempts::provider_payment_id.eq(charge.clone()));
    }
    if let Some(from) = search.created_from {
        query = query
            .filter(payment_attempts::id.ge(id_floor(from - ID_VERSUS_ROW)))
            .filter(payment_attempts::created_at.ge(from));
    }
    if let Some(to) = search.created_to {
        query = query
            .filter(payment_attempts::id.lt(id_floor(to + ID_VERSUS_ROW)))
            .filter(payment_attempts::created_at.lt(to));
    }
    Ok(query
        .load::<AttemptRow>(conn)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// The merchants a search is confined to, by `merchant_id` and by `merchant_name` (both must
/// hold); `None` when it is not confined. A name is looked up in the merchants table, which
/// is small, so the attempts are then searched by merchant id.
async fn merchants_searched(conn: &mut PgConn, search: &Search) -> QueryResult<Option<Vec<Uuid>>> {
    let Some(name) = &search.merchant_name else {
        return Ok(search.merchant_id.map(|m| vec![m.0]));
    };
    let mut named = merchants::table
        .filter(merchants::name.ilike(contains(name)))
        .select(merchants::id)
        .order(merchants::id)
        .into_boxed();
    if let Some(merchant) = search.merchant_id {
        named = named.filter(merchants::id.eq(merchant.0));
    }
    Ok(Some(named.load(conn).await?))
}

/// A LIKE pattern matching any text that contains `part` as it is: its `%`, `_` and `\` are
/// escaped (`\` is LIKE's default escape).
fn contains(part: &str) -> String {
    let mut pattern = String::with_capacity(part.len() + 2);
    pattern.push('%');
    for c in part.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// Every provider some attempt names, in a few index probes however many attempts there are:
/// the `(provider, …)` index is read from one provider to the next instead of row by row.
/// Not the configured providers: a charge made through a provider since removed from the
/// configuration must still be found by its id.
async fn providers_of_attempts(conn: &mut PgConn) -> QueryResult<Vec<String>> {
    #[derive(QueryableByName)]
    struct Provider {
        #[diesel(sql_type = diesel::sql_types::Text)]
        provider: String,
    }
    let found: Vec<Provider> = each_provider().load(conn).await?;
    Ok(found.into_iter().map(|p| p.provider).collect())
}

/// The statement of [`providers_of_attempts`]: a recursive walk of the `(provider, …)` index
/// (whole text: `tests/sql/providers_of_attempts.sql`).
fn each_provider() -> Sql<'static> {
    let mut q = Statement::new();
    q.push(
        "WITH RECURSIVE named(provider) AS (
    (SELECT provider FROM payment_attempts ORDER BY provider LIMIT 1)
    UNION ALL
    SELECT (SELECT a.provider FROM payment_attempts a WHERE a.provider > named.provider
            ORDER BY a.provider LIMIT 1)
    FROM named WHERE named.provider IS NOT NULL)
SELECT provider FROM named WHERE provider IS NOT NULL",
    );
    q.finish()
}

/// The smallest UUIDv7 made at `at` (every id made then or later is at least this).
fn id_floor(at: DateTime<Utc>) -> Uuid {
    let millis = at.timestamp_millis().max(0) as u64;
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6] = 0x70;
    bytes[8] = 0x80;
    Uuid::from_bytes(bytes)
}

/// One Idempotency-Key involved in an attempt, as it stands.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = idempotency_keys)]
pub struct KeyState {
    pub key: String,
    pub operation: String,
    /// `in_flight` or `completed`.
    pub state: String,
    pub response_status: Option<i16>,
    /// Its work is still open (a pending payment): it outlives its TTL.
    pub unresolved: bool,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// Everything support needs to tell what happened to one attempt.
#[derive(Debug)]
pub struct Story {
    pub payment: PaymentAttempt,
    pub order: Option<Order>,
    /// The order's other attempts, newest first.
    pub other_attempts: Vec<PaymentAttempt>,
    /// Every transition, in order, with its source.
    pub timeline: Vec<TimelineEntry>,
    /// Every call to the provider about it.
    pub provider_calls: Vec<LoggedCall>,
    /// Every webhook event about it, with what each did.
    pub webhook_events: Vec<RecordedEvent>,
    /// The key that made it (named on the attempt for ever), while the key is kept.
    pub idempotency_key: Option<KeyState>,
    /// Its refunds, oldest first.
    pub refunds: Vec<Refund>,
    /// Every move of its refunds, in order.
    pub refund_timeline: Vec<RefundTimelineEntry>,
    /// Its captures and voids, oldest first (a manual capture's hold, a challenge canceled).
    pub hold_operations: Vec<HoldOperation>,
    /// What support keys did to its order's payments, refunds and events, oldest first.
    pub support_actions: Vec<audit::RecordedAction>,
    /// A provider's approval after payorch failed it, and its undo.
    pub late_approval: Option<LateApproval>,
    /// Its disputes, oldest first, each with its moves and the merchant's answers.
    pub disputes: Vec<disputes::DisputeStory>,
}

/// The story of attempt `id`, whichever merchant it belongs to.
pub async fn story(conn: &mut PgConn, id: PaymentId) -> QueryResult<Option<Story>> {
    let Some(payment) = find_attempt(conn, None, id).await? else {
        return Ok(None);
    };
    let order = find_order(conn, Some(payment.merchant_id), payment.order_id).await?;
    let other_attempts = attempts_of_order(conn, payment.merchant_id, payment.order_id)
        .await?
        .into_iter()
        .filter(|a| a.id != payment.id)
        .collect();
    let timeline = timeline(conn, &payment).await?;
    let provider_calls = provider_calls_of(conn, &payment).await?;
    let webhook_events = events_of(conn, &payment).await?;
    let refunds = refunds_of_payment(conn, payment.merchant_id, payment.id).await?;
    let refund_timeline = refund_timeline(conn, payment.merchant_id, payment.id).await?;
    let hold_operations = operations_of_payment(conn, payment.merchant_id, payment.id).await?;
    let support_actions =
        audit::actions_of_order(conn, payment.merchant_id, payment.order_id).await?;
    let late_approval = late_approvals::of_attempt(conn, &payment).await?;
    let disputes = disputes::of_attempt(conn, payment.merchant_id, payment.id).await?;
    let idempotency_key = match &payment.idempotency_key {
        Some(key) => idempotency_keys::table
            .find((payment.merchant_id.0, key))
            .select(KeyState::as_select())
            .limit(1)
            .load(conn)
            .await
            .and_then(crate::db::one)
            .optional()?,
        None => None,
    };
    Ok(Some(Story {
        order,
        other_attempts,
        timeline,
        provider_calls,
        webhook_events,
        idempotency_key,
        refunds,
        refund_timeline,
        hold_operations,
        support_actions,
        late_approval,
        disputes,
        payment,
    }))
}

/// A webhook that contradicted an attempt.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = provider_webhooks)]
pub struct Conflict {
    pub attempt_id: Option<Uuid>,
    pub provider_event_id: String,
    pub event_type: String,
    pub detail: Option<String>,
    pub received_at: DateTime<Utc>,
}

/// The attempts that need a human, newest first, at most `limit` of each kind.
#[derive(Debug)]
pub struct NeedsAHuman {
    /// Still `created` or `pending` longer than the alert age: the reconciler has not found
    /// the truth yet.
    pub stuck: Vec<PaymentAttempt>,
    /// Failed `provider_no_record`: the provider never had the charge (tell the payer nothing
    /// was taken).
    pub no_provider_record: Vec<PaymentAttempt>,
    /// Attempts a provider's answer contradicted (it named a charge another attempt holds):
    /// the evidence is in their provider calls.
    pub contradicted: Vec<PaymentAttempt>,
    /// Refunds still open longer than the alert age, holding their amount.
    pub stuck_refunds: Vec<Refund>,
    /// Webhooks that contradicted what payorch knows, but for the approvals listed as late
    /// approvals.
    pub webhook_conflicts: Vec<Conflict>,
    /// Every late approval, undone or not: a human confirms each with the provider. Those
    /// whose money is not back yet (`undo_failed`, `undoing`) come first.
    pub late_approvals: Vec<LateApproval>,
    /// The settlement reconciliation's open findings, newest first.
    pub settlement_findings: Vec<OpenFinding>,
    /// Disputes returning money a refund already returned, then those whose answer is due
    /// within a week ([`disputes::needing_a_human`]).
    pub disputes: Vec<disputes::DisputeView>,
}

pub async fn needs_a_human(
    conn: &mut PgConn,
    alert_after: std::time::Duration,
    limit: i64,
) -> QueryResult<NeedsAHuman> {
    let cutoff = Utc::now() - Duration::from_std(alert_after).unwrap_or(Duration::minutes(15));
    let stuck = payment_attempts::table
        .filter(diesel::dsl::sql::<diesel::sql_types::Bool>(concat!(
            "status IN ",
            unsettled_statuses!()
        )))
        .filter(payment_attempts::created_at.lt(cutoff))
        .order(payment_attempts::created_at)
        .limit(limit)
        .select(AttemptRow::as_select())
        .load::<AttemptRow>(conn)
        .await?;
    let no_record = payment_attempts::table
        .filter(payment_attempts::failure_code.eq(NO_RECORD))
        .order(payment_attempts::id.desc())
        .limit(limit)
        .select(AttemptRow::as_select())
        .load::<AttemptRow>(conn)
        .await?;
    let contradicted_ids: Vec<(Uuid, Uuid)> = provider_calls::table
        .filter(provider_calls::detail.like(format!("{CONTRADICTION}%")))
        .order(provider_calls::id.desc())
        .limit(limit)
        .select((provider_calls::merchant_id, provider_calls::attempt_id))
        .load(conn)
        .await?;
    let mut contradicted = Vec::new();
    for (merchant_id, id) in contradicted_ids {
        if contradicted
            .iter()
            .any(|a: &PaymentAttempt| a.id.0 == id && a.merchant_id.0 == merchant_id)
        {
            continue;
        }
        let found = find_attempt(conn, Some(MerchantId(merchant_id)), PaymentId(id)).await?;
        contradicted.extend(found.filter(|a| !a.status.is_final()));
    }
    // The statuses and the outcome written in the text, as the attempts' above: a generic
    // plan uses a partial index (`refunds_due`, `provider_webhooks_conflicts`) only for the
    // literal its predicate names, and scans the table for a bound value.
    let stuck_refunds = refunds::table
        .filter(diesel::dsl::sql::<diesel::sql_types::Bool>(concat!(
            "status IN ",
            crate::payments::refunds::open_refund_statuses!()
        )))
        .filter(refunds::created_at.lt(cutoff))
        .order(refunds::created_at)
        .limit(limit)
        .select(RefundRow::as_select())
        .load::<RefundRow>(conn)
        .await?;
    // A conflict that made a late approval is listed once, as the late approval below (which
    // says what payorch did about it), not a second time here; `late_approvals_once` finds it.
    let webhook_conflicts = provider_webhooks::table
        .filter(diesel::dsl::sql::<diesel::sql_types::Bool>(
            "outcome = 'conflict'",
        ))
        .filter(diesel::dsl::sql::<diesel::sql_types::Bool>(
            "NOT EXISTS (SELECT 1 FROM late_approvals \
             WHERE late_approvals.merchant_id = provider_webhooks.merchant_id \
             AND late_approvals.attempt_id = provider_webhooks.attempt_id)",
        ))
        .order(provider_webhooks::received_at.desc())
        .limit(limit)
        .select(Conflict::as_select())
        .load(conn)
        .await?;
    let late_approvals = late_approvals::listed(conn, limit).await?;
    let settlement_findings = settlement::store::open_findings(conn, None, limit).await?;
    let disputes = disputes::needing_a_human(conn, limit).await?;
    Ok(NeedsAHuman {
        stuck: stuck.into_iter().map(Into::into).collect(),
        no_provider_record: no_record.into_iter().map(Into::into).collect(),
        contradicted,
        stuck_refunds: stuck_refunds.into_iter().map(Into::into).collect(),
        webhook_conflicts,
        late_approvals,
        settlement_findings,
        disputes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statement_reads_as_its_snapshot() {
        crate::db::snapshot::assert_sql_snapshot("providers_of_attempts", &each_provider());
    }

    #[test]
    fn a_name_s_part_is_matched_as_it_is() {
        assert_eq!(contains("Acme"), "%Acme%");
        assert_eq!(contains("100%_a\\b"), "%100\\%\\_a\\\\b%");
    }

    #[test]
    fn the_id_floor_is_below_every_id_made_at_or_after_its_instant() {
        let at = Utc::now();
        let floor = id_floor(at);
        let later = Uuid::now_v7();
        assert!(floor <= later, "{floor} > {later}");
        assert!(id_floor(at + Duration::seconds(1)) > later);
        assert_eq!(floor.get_version_num(), 7);
    }
}
