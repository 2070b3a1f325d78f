//! How long a provider's webhook is kept (docs/guides/provider-webhooks.md, "Webhooks"; docs/PRODUCTION.md, section 6):
//! `--provider-webhook-retention-days` (35 by default) after everything it could be about is
//! final — its payment, each of the payment's refunds and hold operations — and after it
//! arrived; a webhook about no payment payorch knows, that long after it arrived. Then it is
//! deleted by the provider webhook reaper (`reaper`), a batch at a time.
//!
//! The default outlasts the providers' redeliveries (Adyen retries for up to 30 days, Stripe
//! for 3), and a copy that comes after its row is gone is harmless all the same: it is judged
//! again against a payment that is final, changes nothing, and is answered `2xx`.

use std::time::Duration;

use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::db::sql::Sql;
use crate::db::statement::Statement;

/// Deletes up to `batch` provider webhooks past `retention`, oldest first; how many went.
/// `FOR UPDATE SKIP LOCKED` lets replicas share the work, and a row a redelivery is counting
/// on is left for the next round.
pub async fn delete_old_webhooks(
    conn: &mut AsyncPgConnection,
    batch: i64,
    retention: Duration,
) -> diesel::QueryResult<usize> {
    old_webhooks(batch, retention).execute(conn).await
}

/// The statement of [`delete_old_webhooks`] (whole text: `tests/sql/delete_old_webhooks.sql`).
fn old_webhooks(batch: i64, retention: Duration) -> Sql<'static> {
    let retention_ms = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
    let mut q = Statement::new();
    let retention = q.bind::<BigInt, _>(retention_ms);
    let batch = q.bind::<BigInt, _>(batch);
    q.push(format_args!(
        "WITH cutoff AS (SELECT now() - {retention} * interval '1 millisecond' AS at)
DELETE FROM provider_webhooks w USING (
    SELECT w.id FROM provider_webhooks w, cutoff
    WHERE w.received_at < cutoff.at
      AND (w.attempt_id IS NULL OR (
          EXISTS (SELECT 1 FROM payment_attempts a
                  WHERE a.merchant_id = w.merchant_id AND a.id = w.attempt_id
                    AND a.finished_at < cutoff.at)
          AND NOT EXISTS (SELECT 1 FROM refunds r
                  WHERE r.merchant_id = w.merchant_id AND r.payment_id = w.attempt_id
                    AND (r.finished_at IS NULL OR r.finished_at >= cutoff.at))
          AND NOT EXISTS (SELECT 1 FROM hold_operations h
                  WHERE h.merchant_id = w.merchant_id AND h.payment_id = w.attempt_id
                    AND (h.finished_at IS NULL OR h.finished_at >= cutoff.at))))
    ORDER BY w.received_at LIMIT {batch}
    FOR UPDATE OF w SKIP LOCKED) old
WHERE w.id = old.id"
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::config::{Cli, Command};

    #[test]
    fn the_statement_reads_as_its_snapshot() {
        let sql = super::old_webhooks(500, std::time::Duration::from_secs(35 * 24 * 3600));
        crate::db::snapshot::assert_sql_snapshot("delete_old_webhooks", &sql);
    }

    #[test]
    fn the_default_retention_outlasts_the_providers_redeliveries() {
        let cli = Cli::try_parse_from(["payorch", "serve"]).expect("the flags parse");
        let Command::Serve(serve) = cli.command else {
            panic!("serve");
        };
        let kept = serve.app_settings().webhook_reaper.retention;
        // Adyen retries a webhook for up to 30 days, Stripe for 3.
        assert!(
            kept > std::time::Duration::from_secs(30 * 24 * 3600),
            "{kept:?}"
        );
        let cli = Cli::try_parse_from([
            "payorch",
            "serve",
            "--provider-webhook-retention-days",
            "90",
        ])
        .expect("the flag parses");
        let Command::Serve(serve) = cli.command else {
            panic!("serve");
        };
        assert_eq!(
            serve.app_settings().webhook_reaper.retention,
            std::time::Duration::from_secs(90 * 24 * 3600)
        );
    }
}
