//! The books one stretch of a provider's record is compared with (`compare::Books`): the
//! payments booked or finished in the stretch, every entry of theirs, their attempts,
//! refunds, late approvals and disputes.

use chrono::{DateTime, Utc};
use diesel::sql_types::{Array, BigInt, Bool, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::compare::{referenced, Attempt, Books, Dispute, Entry, Late, Refund};
use crate::db::statement::Statement;
use crate::db::PgConn;
use crate::providers::settlement::EntryKind;

#[derive(QueryableByName)]
struct PaymentRow {
    #[diesel(sql_type = Text)]
    p: String,
}

#[derive(QueryableByName)]
struct EntryRow {
    #[diesel(sql_type = Text)]
    provider_entry_id: String,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Nullable<Text>)]
    provider_payment_id: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    provider_source_id: Option<String>,
    #[diesel(sql_type = BigInt)]
    amount: i64,
    #[diesel(sql_type = Text)]
    currency: String,
    #[diesel(sql_type = Timestamptz)]
    booked_at: DateTime<Utc>,
    #[diesel(sql_type = Timestamptz)]
    occurred_at: DateTime<Utc>,
    #[diesel(sql_type = Nullable<Text>)]
    reference: Option<String>,
}

#[derive(QueryableByName)]
struct AttemptRow {
    #[diesel(sql_type = SqlUuid)]
    merchant_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = Nullable<Text>)]
    provider_payment_id: Option<String>,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = BigInt)]
    amount: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    amount_captured: Option<i64>,
    #[diesel(sql_type = Text)]
    currency: String,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    finished_at: Option<DateTime<Utc>>,
}

#[derive(QueryableByName)]
struct RefundRow {
    #[diesel(sql_type = SqlUuid)]
    merchant_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    payment_id: Uuid,
    #[diesel(sql_type = Nullable<Text>)]
    provider_refund_id: Option<String>,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = BigInt)]
    amount: i64,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    finished_at: Option<DateTime<Utc>>,
}

#[derive(QueryableByName)]
struct LateRow {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    provider_payment_id: String,
    #[diesel(sql_type = Text)]
    approved_as: String,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = BigInt)]
    amount: i64,
    #[diesel(sql_type = Nullable<Text>)]
    provider_undo_id: Option<String>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    undone_at: Option<DateTime<Utc>>,
}

#[derive(QueryableByName)]
struct DisputeRow {
    #[diesel(sql_type = Text)]
    provider_payment_id: String,
    #[diesel(sql_type = BigInt)]
    held: i64,
    #[diesel(sql_type = Timestamptz)]
    changed_at: DateTime<Utc>,
}

#[derive(QueryableByName)]
struct Exists {
    #[diesel(sql_type = Bool)]
    exists: bool,
}

/// Everything the stretch `[from, to)` of `provider` is compared with, and the entries
/// `fresh` (read for the first time in this round, dated before it).
pub async fn books(
    conn: &mut PgConn,
    provider: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    fresh: &[String],
) -> diesel::QueryResult<Books> {
    // The payments looked at: booked, or finished at payorch, in the stretch; of an entry
    // read for the first time; of a late approval given back in the stretch.
    let mut q = Statement::new();
    let p = q.bind::<Text, _>(provider.to_owned());
    let f = q.bind::<Timestamptz, _>(from);
    let t = q.bind::<Timestamptz, _>(to);
    let fr = q.bind::<Array<Text>, _>(fresh.to_vec());
    q.push(format_args!(
        "SELECT provider_payment_id AS p FROM settlement_entries \
         WHERE provider = {p} AND ((booked_at >= {f} AND booked_at < {t}) \
         OR provider_entry_id = ANY({fr})) AND kind <> 'other' \
         AND provider_payment_id IS NOT NULL \
         UNION SELECT provider_payment_id FROM late_approvals \
         WHERE provider = {p} AND status = 'refunded' AND undone_at >= {f} \
         AND undone_at < {t} \
         UNION SELECT provider_payment_id FROM payment_attempts \
         WHERE provider = {p} AND status = 'succeeded' AND finished_at >= {f} \
         AND finished_at < {t} AND provider_payment_id IS NOT NULL \
         UNION SELECT a.provider_payment_id FROM refunds r JOIN payment_attempts a \
         ON a.merchant_id = r.merchant_id AND a.id = r.payment_id \
         WHERE r.provider = {p} AND r.finished_at IS NOT NULL AND r.finished_at >= {f} \
         AND r.finished_at < {t} \
         AND a.provider_payment_id IS NOT NULL"
    ));
    let mut payments: Vec<String> = q
        .finish()
        .load::<PaymentRow>(conn)
        .await?
        .into_iter()
        .map(|r| r.p)
        .collect();
    // And those whose dispute payorch changed in the stretch.
    let disputes = disputes(conn, provider, &payments, from, to).await?;
    for d in disputes.iter().flatten() {
        if !payments.contains(&d.provider_payment_id) {
            payments.push(d.provider_payment_id.clone());
        }
    }

    let mut q = Statement::new();
    let p = q.bind::<Text, _>(provider.to_owned());
    let ps = q.bind::<Array<Text>, _>(payments.clone());
    let f = q.bind::<Timestamptz, _>(from);
    let t = q.bind::<Timestamptz, _>(to);
    let fr = q.bind::<Array<Text>, _>(fresh.to_vec());
    q.push(format_args!(
        "SELECT provider_entry_id, kind::text AS kind, provider_payment_id, provider_source_id, \
         amount, currency::text AS currency, booked_at, occurred_at, reference \
         FROM settlement_entries \
         WHERE provider = {p} AND (provider_payment_id = ANY({ps}) \
         OR (provider_payment_id IS NULL AND kind = 'charge' AND ((booked_at >= {f} \
         AND booked_at < {t}) OR provider_entry_id = ANY({fr})))) \
         ORDER BY booked_at, provider_entry_id"
    ));
    let entries: Vec<Entry> = q
        .finish()
        .load::<EntryRow>(conn)
        .await?
        .into_iter()
        .map(|r| Entry {
            provider_entry_id: r.provider_entry_id,
            kind: EntryKind::parse(&r.kind).unwrap_or(EntryKind::Other),
            provider_payment_id: r.provider_payment_id,
            provider_source_id: r.provider_source_id,
            amount: r.amount,
            currency: r.currency,
            booked_at: r.booked_at,
            occurred_at: r.occurred_at,
            reference: r.reference,
        })
        .collect();

    // The attempts: by the provider's payment id, or by the attempt id a charge carries.
    let referenced: Vec<Uuid> = entries
        .iter()
        .filter(|e| e.kind == EntryKind::Charge)
        .filter_map(referenced)
        .collect();
    let mut q = Statement::new();
    let p = q.bind::<Text, _>(provider.to_owned());
    let ps = q.bind::<Array<Text>, _>(payments.clone());
    let ids = q.bind::<Array<SqlUuid>, _>(referenced);
    q.push(format_args!(
        "SELECT merchant_id, id, provider_payment_id, status::text AS status, \
         amount::bigint AS amount, amount_captured::bigint AS amount_captured, \
         currency::text AS currency, finished_at FROM payment_attempts \
         WHERE provider = {p} AND (provider_payment_id = ANY({ps}) OR id = ANY({ids}))"
    ));
    let attempts: Vec<Attempt> = q
        .finish()
        .load::<AttemptRow>(conn)
        .await?
        .into_iter()
        .map(|r| Attempt {
            merchant_id: r.merchant_id,
            id: r.id,
            provider_payment_id: r.provider_payment_id,
            status: r.status,
            amount: r.amount,
            amount_captured: r.amount_captured,
            currency: r.currency,
            finished_at: r.finished_at,
        })
        .collect();

    let mut q = Statement::new();
    let merchants =
        q.bind::<Array<SqlUuid>, _>(attempts.iter().map(|a| a.merchant_id).collect::<Vec<_>>());
    let ids = q.bind::<Array<SqlUuid>, _>(attempts.iter().map(|a| a.id).collect::<Vec<_>>());
    q.push(format_args!(
        "SELECT merchant_id, id, payment_id, provider_refund_id, status::text AS status, \
         amount::bigint AS amount, finished_at FROM refunds \
         WHERE (merchant_id, payment_id) IN (SELECT * FROM unnest({merchants}::uuid[], \
         {ids}::uuid[]))"
    ));
    let refunds: Vec<Refund> = q
        .finish()
        .load::<RefundRow>(conn)
        .await?
        .into_iter()
        .map(|r| Refund {
            merchant_id: r.merchant_id,
            id: r.id,
            payment_id: r.payment_id,
            provider_refund_id: r.provider_refund_id,
            status: r.status,
            amount: r.amount,
            finished_at: r.finished_at,
        })
        .collect();

    let mut q = Statement::new();
    let p = q.bind::<Text, _>(provider.to_owned());
    let ps = q.bind::<Array<Text>, _>(payments.clone());
    q.push(format_args!(
        "SELECT id, provider_payment_id, approved_as::text AS approved_as, \
         status::text AS status, amount::bigint AS amount, provider_undo_id, undone_at \
         FROM late_approvals WHERE provider = {p} AND provider_payment_id = ANY({ps})"
    ));
    let late: Vec<Late> = q
        .finish()
        .load::<LateRow>(conn)
        .await?
        .into_iter()
        .map(|r| Late {
            id: r.id,
            provider_payment_id: r.provider_payment_id,
            approved_as: r.approved_as,
            status: r.status,
            amount: r.amount,
            provider_undo_id: r.provider_undo_id,
            undone_at: r.undone_at,
        })
        .collect();

    Ok(Books {
        from,
        to,
        entries,
        attempts,
        refunds,
        late,
        disputes,
        fresh: fresh.iter().cloned().collect(),
    })
}

/// What payorch's disputes of `payments`, and those it changed in `[from, to)`, hold;
/// `None` when payorch keeps no disputes (the `disputes` table is not there: migration
/// `2026-11-27-000028_disputes` not run).
async fn disputes(
    conn: &mut PgConn,
    provider: &str,
    payments: &[String],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> diesel::QueryResult<Option<Vec<Dispute>>> {
    let mut q = Statement::new();
    q.push("SELECT to_regclass('public.disputes') IS NOT NULL AS exists");
    let exists: Vec<Exists> = q.finish().load(conn).await?;
    if !exists.iter().any(|e| e.exists) {
        return Ok(None);
    }
    let mut q = Statement::new();
    let p = q.bind::<Text, _>(provider.to_owned());
    let ps = q.bind::<Array<Text>, _>(payments.to_vec());
    let f = q.bind::<Timestamptz, _>(from);
    let t = q.bind::<Timestamptz, _>(to);
    q.push(format_args!(
        "SELECT provider_payment_id, CASE WHEN status IN ('needs_response', 'under_review', \
         'lost') THEN amount::bigint ELSE 0 END AS held, updated_at AS changed_at \
         FROM disputes WHERE provider = {p} AND (provider_payment_id = ANY({ps}) \
         OR (updated_at >= {f} AND updated_at < {t}))"
    ));
    let rows: Vec<DisputeRow> = q.finish().load(conn).await?;
    Ok(Some(
        rows.into_iter()
            .map(|r| Dispute {
                provider_payment_id: r.provider_payment_id,
                held: r.held,
                changed_at: r.changed_at,
            })
            .collect(),
    ))
}
