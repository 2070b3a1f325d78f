//! What support sees of disputes (docs/guides/support.md, "Disputes"): each dispute of a
//! payment with its moves and the merchant's answers, told in one line; and the disputes a
//! human must look at — those returning money a refund already returned first, then those
//! whose answer is due within a week, nearest first.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use tokio::sync::watch;

use crate::db::schema::disputes;
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::DbPool;
use crate::db::PgConn;
use crate::ids::{DisputeId, MerchantId, PaymentId};
pub use crate::payments::disputes::DisputeView;
use crate::payments::disputes::{
    of_payment, transitions_of, DisputeRow, DisputeStatus, DisputeTransition,
};
use crate::payments::metrics::PaymentMetrics;

/// How soon an answer must be due for a dispute to need a human: a week is the shortest
/// window Stripe and Adyen give a merchant to answer, so a dispute listed here has been open
/// for a while and nobody answered it.
pub const DUE_WITHIN: Duration = Duration::days(7);

/// One answer the merchant sent (`POST /v1/disputes/{id}/evidence` or `…/accept`), without
/// the evidence itself: what the payer's bank is shown is the merchant's, not support's.
#[derive(Debug, Clone, QueryableByName)]
pub struct ActionLine {
    /// `evidence` or `accept`.
    #[diesel(sql_type = Text)]
    pub kind: String,
    /// `pending`, `succeeded` or `failed`.
    #[diesel(sql_type = Text)]
    pub status: String,
    #[diesel(sql_type = Nullable<Text>)]
    pub failure_code: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub failure_message: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    pub created_at: DateTime<Utc>,
    #[diesel(sql_type = Timestamptz)]
    pub updated_at: DateTime<Utc>,
}

/// A dispute of a payment as its story tells it.
#[derive(Debug, Clone)]
pub struct DisputeStory {
    pub dispute: DisputeView,
    /// Every move, oldest first, with what told it (`webhook` or `api`).
    pub moves: Vec<DisputeTransition>,
    /// The merchant's answers, oldest first. Their provider calls are not in the payment's
    /// `provider_calls`: an action's outcome is its status and failure here.
    pub actions: Vec<ActionLine>,
    /// All of it in one line, as support reads it out.
    pub told: String,
}

/// The disputes of one payment, oldest first, each with its moves and answers.
pub async fn of_attempt(
    conn: &mut PgConn,
    merchant: MerchantId,
    payment: PaymentId,
) -> QueryResult<Vec<DisputeStory>> {
    let mut stories = Vec::new();
    for dispute in of_payment(conn, merchant, payment).await? {
        let moves = transitions_of(conn, merchant, dispute.id).await?;
        let actions = actions_of(merchant, dispute.id).load(conn).await?;
        let told = told(&dispute, &moves, &actions);
        stories.push(DisputeStory {
            dispute,
            moves,
            actions,
            told,
        });
    }
    Ok(stories)
}

/// The statement of a dispute's answers (whole text: `tests/sql/dispute_actions_of.sql`).
fn actions_of(merchant: MerchantId, dispute: DisputeId) -> Sql<'static> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(merchant.0);
    let dispute = q.bind::<SqlUuid, _>(dispute.0);
    q.push(format_args!(
        "SELECT kind::text AS kind, status::text AS status, failure_code, failure_message, \
         created_at, updated_at FROM dispute_actions \
         WHERE merchant_id = {merchant} AND dispute_id = {dispute} ORDER BY id"
    ));
    q.finish()
}

/// Whether a dispute in `status` holds its amount (the payer has the money back): the
/// database's `dispute_holds`.
fn holds(status: &str) -> bool {
    DisputeStatus::parse(status).is_some_and(|s| {
        matches!(
            s,
            DisputeStatus::NeedsResponse | DisputeStatus::UnderReview | DisputeStatus::Lost
        )
    })
}

/// One line: "2026-11-20 needs_response (chargeback, fraudulent): 4200 eur withdrawn;
/// 2026-11-21 evidence submitted; 2026-11-21 under_review; 2026-11-30 won: 4200 eur
/// reinstated", each move and answer in the order it happened, and what a refund returned
/// before the dispute when it did.
pub fn told(dispute: &DisputeView, moves: &[DisputeTransition], actions: &[ActionLine]) -> String {
    let money = format!("{} {}", dispute.amount, dispute.currency);
    // Each line with its time and rank: at one instant an answer comes before the move it made.
    let mut lines: Vec<(DateTime<Utc>, u8, String)> = Vec::new();
    for m in moves {
        let mut line = format!("{} {}", day(m.created_at), m.to_status);
        match &m.from_status {
            None => line.push_str(&format!(" ({}, {})", m.stage, dispute.reason.as_str())),
            Some(from) if from == &m.to_status => line.push_str(&format!(" at {}", m.stage)),
            Some(_) => {}
        }
        let held_before = m.from_status.as_deref().is_some_and(holds);
        match (held_before, holds(&m.to_status)) {
            (false, true) => line.push_str(&format!(": {money} withdrawn")),
            (true, false) => line.push_str(&format!(": {money} reinstated")),
            _ => {}
        }
        lines.push((m.created_at, 1, line));
    }
    for a in actions {
        let what = match (a.kind.as_str(), a.status.as_str()) {
            ("evidence", "succeeded") => "evidence submitted".to_owned(),
            ("accept", "succeeded") => "accepted".to_owned(),
            (kind, "pending") => format!("{kind} sent, its answer not known yet"),
            (kind, _) => format!(
                "{kind} refused by the provider ({})",
                a.failure_code.as_deref().unwrap_or("no code")
            ),
        };
        lines.push((a.updated_at, 0, format!("{} {what}", day(a.updated_at))));
    }
    lines.sort_by_key(|(at, rank, _)| (*at, *rank));
    let mut text = lines
        .into_iter()
        .map(|(_, _, line)| line)
        .collect::<Vec<_>>()
        .join("; ");
    if dispute.overlap > 0 {
        text.push_str(&format!(
            "; {} {} refunded before it: {} {} returned twice unless won",
            dispute.refunded_before, dispute.currency, dispute.overlap, dispute.currency
        ));
    }
    text
}

fn day(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d").to_string()
}

/// The disputes that need a human, at most `limit` of each kind: first those that return
/// money a refund already returned (`overlap > 0`) and are not won, newest first — the payer
/// is paid twice unless the merchant answers with the refund, or was paid twice if lost;
/// then those awaiting an answer nobody sent, due within [`DUE_WITHIN`] or overdue, nearest
/// first. Disputes are a small share of payments: both read the table without an index of
/// their own.
pub async fn needing_a_human(conn: &mut PgConn, limit: i64) -> QueryResult<Vec<DisputeView>> {
    let returned_twice: Vec<DisputeRow> = disputes::table
        .filter(disputes::overlap.gt(0))
        .filter(disputes::status.ne(DisputeStatus::Won.as_str()))
        .order(disputes::id.desc())
        .limit(limit)
        .select(DisputeRow::as_select())
        .load(conn)
        .await?;
    let due: Vec<DisputeRow> = disputes::table
        .filter(disputes::overlap.eq(0))
        .filter(disputes::status.eq_any([
            DisputeStatus::NeedsResponse.as_str(),
            DisputeStatus::WarningNeedsResponse.as_str(),
        ]))
        .filter(disputes::evidence_submitted_at.is_null())
        .filter(disputes::evidence_due_by.le(Utc::now() + DUE_WITHIN))
        .order(disputes::evidence_due_by)
        .limit(limit)
        .select(DisputeRow::as_select())
        .load(conn)
        .await?;
    Ok(returned_twice
        .into_iter()
        .chain(due)
        .map(DisputeView::from)
        .collect())
}

/// How soon an unanswered dispute's due date raises `DisputeResponseDue`
/// (`payorch_disputes_response_due`): three days leave the merchant time to gather evidence
/// after being told.
pub const ALERT_WITHIN: Duration = Duration::hours(72);

/// How often [`run`] counts them again: a due date is days away, a minute is soon enough.
pub const GAUGE_REFRESH: std::time::Duration = std::time::Duration::from_secs(60);

/// Disputes awaiting an answer nobody sent whose `evidence_due_by` is within `within` or past.
pub async fn count_due(conn: &mut PgConn, within: Duration) -> QueryResult<i64> {
    disputes::table
        .filter(disputes::status.eq_any([
            DisputeStatus::NeedsResponse.as_str(),
            DisputeStatus::WarningNeedsResponse.as_str(),
        ]))
        .filter(disputes::evidence_submitted_at.is_null())
        .filter(disputes::evidence_due_by.le(Utc::now() + within))
        .count()
        .load(conn)
        .await
        .and_then(crate::db::one)
}

/// Sets `payorch_disputes_response_due` every [`GAUGE_REFRESH`] until `stop` turns true.
pub async fn run(pool: DbPool, metrics: Arc<PaymentMetrics>, mut stop: watch::Receiver<bool>) {
    loop {
        let counted = match pool.get().await {
            Ok(mut conn) => count_due(&mut conn, ALERT_WITHIN)
                .await
                .map_err(|e| e.to_string()),
            Err(err) => Err(err.to_string()),
        };
        match counted {
            Ok(due) => metrics.disputes_response_due.set(due),
            Err(err) => tracing::debug!(error = %err, "could not count the disputes due"),
        }
        tokio::select! {
            _ = tokio::time::sleep(GAUGE_REFRESH) => {}
            _ = stop.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::OrderId;
    use crate::payments::disputes::{DisputeReason, DisputeStage};

    fn at(day: u32, hour: u32) -> DateTime<Utc> {
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, day, hour, 0, 0).unwrap()
    }

    fn a_dispute(overlap: i64) -> DisputeView {
        DisputeView {
            id: DisputeId(uuid::Uuid::nil()),
            object: "dispute",
            payment_id: PaymentId(uuid::Uuid::nil()),
            order_id: OrderId(uuid::Uuid::nil()),
            provider: "stripe".into(),
            provider_dispute_id: "du_1".into(),
            status: DisputeStatus::Won,
            stage: DisputeStage::Chargeback,
            amount: 5000,
            currency: "eur".into(),
            reason: DisputeReason::Fraudulent,
            provider_reason: "fraudulent".into(),
            evidence_due_by: None,
            refunded_before: if overlap > 0 { 5000 } else { 0 },
            overlap,
            advice: String::new(),
            evidence_submitted_at: Some(at(21, 10)),
            opened_at: at(20, 9),
            updated_at: at(30, 9),
            closed_at: Some(at(30, 9)),
        }
    }

    fn a_move(from: Option<&str>, to: &str, stage: &str, when: DateTime<Utc>) -> DisputeTransition {
        DisputeTransition {
            from_status: from.map(Into::into),
            to_status: to.into(),
            stage: stage.into(),
            source: "webhook".into(),
            detail: None,
            created_at: when,
        }
    }

    #[test]
    fn a_won_chargeback_is_told_withdrawn_answered_and_reinstated_in_order() {
        let moves = [
            a_move(None, "needs_response", "chargeback", at(20, 9)),
            a_move(
                Some("needs_response"),
                "under_review",
                "chargeback",
                at(21, 10),
            ),
            a_move(Some("under_review"), "won", "chargeback", at(30, 9)),
        ];
        let answers = [ActionLine {
            kind: "evidence".into(),
            status: "succeeded".into(),
            failure_code: None,
            failure_message: None,
            created_at: at(21, 10),
            updated_at: at(21, 10),
        }];
        assert_eq!(
            told(&a_dispute(0), &moves, &answers),
            "2026-11-20 needs_response (chargeback, fraudulent): 5000 eur withdrawn; \
             2026-11-21 evidence submitted; 2026-11-21 under_review; \
             2026-11-30 won: 5000 eur reinstated"
        );
    }

    #[test]
    fn a_second_chargeback_and_money_returned_twice_are_told() {
        let moves = [
            a_move(None, "won", "chargeback", at(20, 9)),
            a_move(Some("won"), "lost", "second_chargeback", at(25, 9)),
            a_move(Some("lost"), "lost", "pre_arbitration", at(28, 9)),
        ];
        let refused = [ActionLine {
            kind: "accept".into(),
            status: "failed".into(),
            failure_code: Some("dispute_closed".into()),
            failure_message: None,
            created_at: at(26, 9),
            updated_at: at(26, 9),
        }];
        assert_eq!(
            told(&a_dispute(5000), &moves, &refused),
            "2026-11-20 won (chargeback, fraudulent); \
             2026-11-25 lost: 5000 eur withdrawn; \
             2026-11-26 accept refused by the provider (dispute_closed); \
             2026-11-28 lost at pre_arbitration; \
             5000 eur refunded before it: 5000 eur returned twice unless won"
        );
    }

    #[test]
    fn the_statement_reads_as_its_snapshot() {
        crate::db::snapshot::assert_sql_snapshot(
            "dispute_actions_of",
            &actions_of(MerchantId(uuid::Uuid::nil()), DisputeId(uuid::Uuid::nil())),
        );
    }
}
