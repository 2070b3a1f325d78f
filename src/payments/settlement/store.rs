//! The settlement reconciliation's statements: each provider's cursor, the entries read and
//! the findings (the books a stretch is compared with are `books`) (migration
//! `2026-11-27-000030_settlement`).

use chrono::{DateTime, Utc};
use diesel::sql_types::{Array, BigInt, Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::compare::Found;
use crate::db::statement::Statement;
use crate::db::PgConn;
use crate::providers::settlement::SettlementEntry;

/// How far a provider's record was read and compared.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct Cursor {
    #[diesel(sql_type = Text)]
    pub position: String,
    #[diesel(sql_type = Timestamptz)]
    pub read_through: DateTime<Utc>,
    #[diesel(sql_type = Timestamptz)]
    pub checked_through: DateTime<Utc>,
}

pub async fn cursor(conn: &mut PgConn, provider: &str) -> diesel::QueryResult<Option<Cursor>> {
    let mut q = Statement::new();
    let p = q.bind::<Text, _>(provider.to_owned());
    q.push(format_args!(
        "SELECT position, read_through, checked_through FROM settlement_cursors \
         WHERE provider = {p}"
    ));
    let mut rows: Vec<Cursor> = q.finish().load(conn).await?;
    Ok(rows.pop())
}

/// Saves `cursor` unless another replica's round saved one further on: a cursor never moves
/// back.
pub async fn save_cursor(
    conn: &mut PgConn,
    provider: &str,
    cursor: &Cursor,
) -> diesel::QueryResult<()> {
    let mut q = Statement::new();
    let p = q.bind::<Text, _>(provider.to_owned());
    let position = q.bind::<Text, _>(cursor.position.clone());
    let read = q.bind::<Timestamptz, _>(cursor.read_through);
    let checked = q.bind::<Timestamptz, _>(cursor.checked_through);
    q.push(format_args!(
        "INSERT INTO settlement_cursors (provider, position, read_through, checked_through) \
         VALUES ({p}, {position}, {read}, {checked}) \
         ON CONFLICT (provider) DO UPDATE SET position = excluded.position, \
         read_through = excluded.read_through, checked_through = excluded.checked_through, \
         updated_at = now() \
         WHERE settlement_cursors.checked_through <= excluded.checked_through \
         AND settlement_cursors.read_through <= excluded.read_through"
    ));
    q.finish().execute(conn).await.map(drop)
}

/// An entry kept for the first time.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct Kept {
    #[diesel(sql_type = Text)]
    pub provider_entry_id: String,
    #[diesel(sql_type = Timestamptz)]
    pub booked_at: DateTime<Utc>,
}

/// Takes `provider`'s round lock for the calling transaction if no other round holds it:
/// rounds of one provider on two replicas do not compare and move the cursor at once. A
/// transaction's lock, released at its end, never a session's (a pooled connection in
/// PgBouncer's transaction mode is not the same session from one statement to the next).
pub async fn try_round_lock(conn: &mut PgConn, provider: &str) -> diesel::QueryResult<bool> {
    #[derive(QueryableByName)]
    struct Taken {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        taken: bool,
    }
    let mut q = Statement::new();
    let p = q.bind::<Text, _>(format!("settlement:{provider}"));
    q.push(format_args!(
        "SELECT pg_try_advisory_xact_lock({ROUND_LOCK_CLASS}, hashtext({p})) AS taken"
    ));
    let rows: Vec<Taken> = q.finish().load(conn).await?;
    Ok(rows.iter().any(|r| r.taken))
}

/// Names the settlement rounds' locks among advisory locks (the two-key form: the class,
/// then the provider's hash).
const ROUND_LOCK_CLASS: i32 = 44_030;

/// Keeps `entries`; one already kept (a page or batch read again) is left as it is. The
/// entries new to payorch.
pub async fn keep_entries(
    conn: &mut PgConn,
    provider: &str,
    entries: &[SettlementEntry],
) -> diesel::QueryResult<Vec<Kept>> {
    let mut kept = Vec::new();
    for chunk in entries.chunks(1000) {
        let mut q = Statement::new();
        let p = q.bind::<Text, _>(provider.to_owned());
        let ids = q.bind::<Array<Text>, _>(
            chunk
                .iter()
                .map(|e| e.provider_entry_id.clone())
                .collect::<Vec<_>>(),
        );
        let kinds = q.bind::<Array<Text>, _>(
            chunk
                .iter()
                .map(|e| e.kind.as_str().to_owned())
                .collect::<Vec<_>>(),
        );
        let payments = q.bind::<Array<Nullable<Text>>, _>(
            chunk
                .iter()
                .map(|e| e.provider_payment_id.clone())
                .collect::<Vec<_>>(),
        );
        let sources = q.bind::<Array<Nullable<Text>>, _>(
            chunk
                .iter()
                .map(|e| e.provider_source_id.clone())
                .collect::<Vec<_>>(),
        );
        let amounts =
            q.bind::<Array<BigInt>, _>(chunk.iter().map(|e| e.amount).collect::<Vec<_>>());
        let currencies =
            q.bind::<Array<Text>, _>(chunk.iter().map(|e| e.currency.clone()).collect::<Vec<_>>());
        let booked =
            q.bind::<Array<Timestamptz>, _>(chunk.iter().map(|e| e.booked_at).collect::<Vec<_>>());
        let occurred = q
            .bind::<Array<Timestamptz>, _>(chunk.iter().map(|e| e.occurred_at).collect::<Vec<_>>());
        let references = q.bind::<Array<Nullable<Text>>, _>(
            chunk
                .iter()
                .map(|e| e.reference.clone())
                .collect::<Vec<_>>(),
        );
        let batches =
            q.bind::<Array<Nullable<BigInt>>, _>(chunk.iter().map(|e| e.batch).collect::<Vec<_>>());
        q.push(format_args!(
            "INSERT INTO settlement_entries (provider, provider_entry_id, kind, \
             provider_payment_id, provider_source_id, amount, currency, booked_at, \
             occurred_at, reference, batch) \
             SELECT {p}, * FROM unnest({ids}::text[], {kinds}::text[], {payments}::text[], \
             {sources}::text[], {amounts}::bigint[], {currencies}::text[], \
             {booked}::timestamptz[], {occurred}::timestamptz[], {references}::text[], \
             {batches}::bigint[]) \
             ON CONFLICT (provider, provider_entry_id) DO NOTHING \
             RETURNING provider_entry_id, booked_at"
        ));
        kept.extend(q.finish().load::<Kept>(conn).await?);
    }
    Ok(kept)
}

/// Records `found` unless an open finding of the same provider, kind and subject is there;
/// whether it was new.
pub async fn record(conn: &mut PgConn, provider: &str, found: &Found) -> diesel::QueryResult<bool> {
    let mut q = Statement::new();
    let id = q.bind::<SqlUuid, _>(Uuid::now_v7());
    let p = q.bind::<Text, _>(provider.to_owned());
    let kind = q.bind::<Text, _>(found.kind.as_str().to_owned());
    let subject = q.bind::<Text, _>(found.subject.clone());
    let payment = q.bind::<Nullable<Text>, _>(found.provider_payment_id.clone());
    let merchant = q.bind::<Nullable<SqlUuid>, _>(found.merchant_id);
    let attempt = q.bind::<Nullable<SqlUuid>, _>(found.attempt_id);
    let refund = q.bind::<Nullable<SqlUuid>, _>(found.refund_id);
    let expected = q.bind::<Nullable<BigInt>, _>(found.expected);
    let booked = q.bind::<Nullable<BigInt>, _>(found.found);
    let currency = q.bind::<Nullable<Text>, _>(found.currency.clone());
    let evidence = q.bind::<Jsonb, _>(found.evidence.clone());
    q.push(format_args!(
        "INSERT INTO settlement_findings (id, provider, kind, subject, provider_payment_id, \
         merchant_id, attempt_id, refund_id, expected, found, currency, evidence) \
         VALUES ({id}, {p}, {kind}, {subject}, {payment}, {merchant}, {attempt}, {refund}, \
         {expected}, {booked}, {currency}, {evidence}) \
         ON CONFLICT (provider, kind, subject) WHERE resolved_at IS NULL DO NOTHING"
    ));
    Ok(q.finish().execute(conn).await? == 1)
}

/// An open finding, as support lists it.
#[derive(Debug, Clone, PartialEq, QueryableByName, serde::Serialize)]
pub struct OpenFinding {
    #[diesel(sql_type = SqlUuid)]
    pub id: Uuid,
    #[diesel(sql_type = Text)]
    pub provider: String,
    #[diesel(sql_type = Text)]
    pub kind: String,
    #[diesel(sql_type = Text)]
    pub subject: String,
    #[diesel(sql_type = Nullable<Text>)]
    pub provider_payment_id: Option<String>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub merchant_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub attempt_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub refund_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub expected: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub found: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    pub currency: Option<String>,
    #[diesel(sql_type = Jsonb)]
    pub evidence: serde_json::Value,
    #[diesel(sql_type = Timestamptz)]
    pub found_at: DateTime<Utc>,
}

/// The open findings, newest first, at most `limit`: of `merchant`'s payments and those of
/// no merchant payorch knows (a charge it never made may be anyone's), or all of them.
pub async fn open_findings(
    conn: &mut PgConn,
    merchant: Option<Uuid>,
    limit: i64,
) -> diesel::QueryResult<Vec<OpenFinding>> {
    let mut q = Statement::new();
    let m = q.bind::<Nullable<SqlUuid>, _>(merchant);
    let limit = q.bind::<BigInt, _>(limit);
    q.push(format_args!(
        "SELECT id, provider::text AS provider, kind::text AS kind, subject, \
         provider_payment_id, merchant_id, attempt_id, refund_id, expected, found, \
         currency::text AS currency, evidence, found_at FROM settlement_findings \
         WHERE resolved_at IS NULL AND ({m}::uuid IS NULL OR merchant_id = {m} \
         OR merchant_id IS NULL) \
         ORDER BY found_at DESC, id LIMIT {limit}"
    ));
    q.finish().load(conn).await
}

#[derive(QueryableByName)]
pub struct OpenCount {
    #[diesel(sql_type = Text)]
    pub provider: String,
    #[diesel(sql_type = Text)]
    pub kind: String,
    #[diesel(sql_type = BigInt)]
    pub open: i64,
}

/// How long ago each provider's record was last read through (`read_through`), for the
/// gauge an alert watches: a record that stops growing (an Adyen batch that never comes)
/// is no error, only silence.
#[derive(QueryableByName)]
pub struct CursorAge {
    #[diesel(sql_type = Text)]
    pub provider: String,
    #[diesel(sql_type = diesel::sql_types::Double)]
    pub seconds: f64,
}

pub async fn cursor_ages(conn: &mut PgConn) -> diesel::QueryResult<Vec<CursorAge>> {
    let mut q = Statement::new();
    q.push(
        "SELECT provider::text AS provider, \
         extract(epoch FROM now() - read_through)::float8 AS seconds FROM settlement_cursors",
    );
    q.finish().load(conn).await
}

/// The open findings by provider and kind, for the gauge.
pub async fn open_counts(conn: &mut PgConn) -> diesel::QueryResult<Vec<OpenCount>> {
    let mut q = Statement::new();
    q.push(
        "SELECT provider::text AS provider, kind::text AS kind, count(*) AS open \
         FROM settlement_findings WHERE resolved_at IS NULL GROUP BY 1, 2",
    );
    q.finish().load(conn).await
}
