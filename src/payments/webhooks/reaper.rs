//! The provider webhook reaper: a worker in every replica that drops the months of the
//! providers' webhooks past their retention (`--provider-webhook-retention-days`;
//! [`super::retention`], `db::partitions`), makes the months ahead, and rewrites the ones an
//! older version stored whole through the allowlist of what is kept
//! ([`super::old_payloads`]), each a batch at a time. Here rather than at `serve`'s start: a
//! big table does not hold the start back, and rows an older replica writes while an upgrade
//! rolls are found on a later round. A worker of payments' own, beside the event reaper
//! (`events::reaper`), because these rows are payments': `events` reads nothing of payments
//! but the snapshot an event keeps (docs/DESIGN.md, "Modules and their dependencies").

use std::time::Duration;

use tokio::sync::watch;

use super::old_payloads::strip_old_payloads;
use super::retention::drop_old_webhooks;
use crate::db::partitions::{Expired, Family, PartitionGauges};
use crate::db::DbPool;
use crate::db::PgConn;

#[derive(Debug, Clone)]
pub struct WebhookReaperSettings {
    /// How often it looks (the key reaper's `--reaper-interval-secs`).
    pub interval: Duration,
    /// How long a provider's webhook is kept after its payment is final (or, about no
    /// payment, after it arrived).
    pub retention: Duration,
    /// Rows rewritten per statement: each batch is one short transaction.
    pub batch: i64,
}

impl Default for WebhookReaperSettings {
    fn default() -> Self {
        WebhookReaperSettings {
            interval: Duration::from_secs(60),
            retention: Duration::from_secs(35 * 24 * 3600),
            batch: 500,
        }
    }
}

/// Runs until `stop` turns true; each round ends setting the partitions' `gauges`.
pub async fn run(
    pool: DbPool,
    settings: WebhookReaperSettings,
    gauges: PartitionGauges,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let reaped = match pool.get().await {
            Ok(mut conn) => match reap_provider_webhooks(&mut conn, &settings).await {
                Ok(_) => gauges
                    .observe(&mut conn, Family::ProviderWebhooks)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            Err(err) => Err(err.to_string()),
        };
        match reaped {
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(error = %err, "provider webhook reaper failed; retrying later")
            }
        }
        let stripped = match pool.get().await {
            Ok(mut conn) => strip_stored_webhooks(&mut conn, &settings)
                .await
                .map_err(|e| e.to_string()),
            Err(err) => Err(err.to_string()),
        };
        match stripped {
            Ok(0) => {}
            Ok(rewritten) => tracing::info!(
                rewritten,
                "provider webhooks stored whole by an older version rewritten without card data"
            ),
            Err(err) => {
                tracing::warn!(
                    error = %err,
                    "rewriting old provider webhooks failed; retrying later"
                )
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.interval) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Drops the months of provider webhooks past their retention, their payments final, after
/// making the months ahead: one row per month past the retention, dropped or kept and why.
pub async fn reap_provider_webhooks(
    conn: &mut PgConn,
    settings: &WebhookReaperSettings,
) -> diesel::QueryResult<Vec<Expired>> {
    drop_old_webhooks(conn, settings.retention).await
}

/// Rewrites every provider webhook stored whole into what is kept of it, a batch at a time;
/// how many.
pub async fn strip_stored_webhooks(
    conn: &mut PgConn,
    settings: &WebhookReaperSettings,
) -> diesel::QueryResult<usize> {
    let mut rewritten = 0;
    loop {
        let batch = strip_old_payloads(conn, settings.batch).await?;
        rewritten += batch;
        if (batch as i64) < settings.batch {
            return Ok(rewritten);
        }
    }
}
