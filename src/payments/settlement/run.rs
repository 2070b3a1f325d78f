//! One round of the settlement reconciliation per provider, and the loop that runs them
//! every `--settlement-interval-secs` (docs/operations/reconciliation.md, "How it runs").
//!
//! A round reads the provider's record from its cursor on, keeps what is new, and compares
//! the stretch from where the last round stopped to the record's end less the grace, and
//! every payment an entry read for the first time names. Rounds on two replicas at once do
//! no harm: the keeping, comparing and cursor's move are one transaction under the
//! provider's round lock (a replica that finds it taken leaves the round to the other), and
//! a cursor is never saved behind one already further on.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use super::books;
use super::compare::comparison;
use super::gauges::SettlementMetrics;
use super::store::{self, Cursor};
use super::SettlementSettings;
use crate::db::DbPool;
use crate::db::PgConn;
use crate::payments::service::Payments;
use crate::providers::registry::NamedProvider;
use crate::providers::settlement::SettlementQuery;

/// A record read by time (Stripe's) is read up to this long before now, and the next read
/// starts there: a transaction being written as the list is read (created a second ago) may
/// not be listed yet, and the position never goes back for it. Five minutes is far past
/// that; a grace shorter than it (a test's) bounds it, as nothing later is compared anyway.
pub const LIST_LAG: Duration = Duration::from_secs(300);

/// What one provider's round did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    pub provider: String,
    /// Entries read, and of those new to payorch.
    pub read: usize,
    pub kept: usize,
    /// The stretch compared, if the record reached far enough for one.
    pub compared: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// Findings recorded (open ones found again are not).
    pub findings: usize,
    /// Charges and refunds that are other systems' sales on the account: never findings.
    pub other: usize,
    /// Another replica's round of this provider held the lock: this one kept nothing.
    pub skipped: bool,
    /// Why the record could not be read.
    pub unread: Option<String>,
}

/// One round for `provider` at `now`.
pub async fn round(
    conn: &mut PgConn,
    provider: &NamedProvider,
    settings: &SettlementSettings,
    metrics: Option<&SettlementMetrics>,
    now: DateTime<Utc>,
) -> diesel::QueryResult<Round> {
    let name = provider.name.as_str();
    let since = now - chrono::Duration::from_std(settings.first_lookback).unwrap_or_default();
    let cursor = store::cursor(conn, name).await?;
    let query = SettlementQuery {
        position: cursor.as_ref().map(|c| c.position.clone()),
        since,
        until: now - chrono::Duration::from_std(settings.grace.min(LIST_LAG)).unwrap_or_default(),
        first_batch: settings.first_batch,
    };
    let mut done = Round {
        provider: name.to_owned(),
        read: 0,
        kept: 0,
        compared: None,
        findings: 0,
        other: 0,
        skipped: false,
        unread: None,
    };
    let page = match provider.adapter.settlement_entries(&query).await.result {
        Ok(page) => page,
        Err(reason) => {
            tracing::warn!(provider = name, %reason, "could not read the provider's settlement record");
            if let Some(m) = metrics {
                m.reads_failed.with_label_values(&[name]).inc();
            }
            done.unread = Some(reason);
            return Ok(done);
        }
    };
    done.read = page.entries.len();
    let grace = if page.dated_by_batch {
        settings.batch_grace
    } else {
        settings.grace
    };
    let grace = chrono::Duration::from_std(grace).unwrap_or_default();
    use diesel_async::AsyncConnection;
    conn.transaction::<_, diesel::result::Error, _>(async |conn| {
        if !store::try_round_lock(conn, name).await? {
            done.skipped = true;
            return Ok(());
        }
        // The cursor again, under the lock: another replica's round may have moved it since.
        let cursor = store::cursor(conn, name).await?;
        let kept = store::keep_entries(conn, name, &page.entries).await?;
        done.kept = kept.len();
        let before_read = cursor.as_ref().map_or(since, |c| c.read_through);
        let read_through = page.read_through.unwrap_or(before_read).max(before_read);
        let from = cursor.as_ref().map_or(since, |c| c.checked_through);
        let to = (read_through - grace).min(now - grace).max(from);
        // Entries read for the first time and dated before the stretch: a line settled late
        // (or planted) whose payment's stretch was compared already.
        let fresh: Vec<String> = kept
            .into_iter()
            .filter(|k| k.booked_at < from)
            .map(|k| k.provider_entry_id)
            .collect();
        if to > from || !fresh.is_empty() {
            compare_stretch(conn, name, from, to, &fresh, metrics, &mut done).await?;
        }
        let saved = Cursor {
            position: page.position.clone(),
            read_through: read_through.max(to),
            checked_through: to,
        };
        store::save_cursor(conn, name, &saved).await
    })
    .await?;
    Ok(done)
}

/// Compares `[from, to)` and the `fresh` entries, records what is new.
async fn compare_stretch(
    conn: &mut PgConn,
    name: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    fresh: &[String],
    metrics: Option<&SettlementMetrics>,
    done: &mut Round,
) -> diesel::QueryResult<()> {
    {
        let books = books::books(conn, name, from, to, fresh).await?;
        let compared = comparison(&books);
        done.other += compared.other.len();
        if let Some(m) = metrics {
            m.other
                .with_label_values(&[name])
                .inc_by(compared.other.len() as u64);
        }
        for found in compared.found {
            if store::record(conn, name, &found).await? {
                done.findings += 1;
                tracing::warn!(
                    provider = name,
                    kind = found.kind.as_str(),
                    subject = %found.subject,
                    expected = found.expected,
                    found = found.found,
                    "settlement finding: a human should look"
                );
                if let Some(m) = metrics {
                    m.findings
                        .with_label_values(&[name, found.kind.as_str()])
                        .inc();
                }
            }
        }
        done.compared = Some((from, to));
    }
    Ok(())
}

/// One round for every provider of `payments`, then the open findings' gauge.
pub async fn all(
    conn: &mut PgConn,
    payments: &Payments,
    settings: &SettlementSettings,
    metrics: Option<&SettlementMetrics>,
) -> diesel::QueryResult<Vec<Round>> {
    let mut rounds = Vec::new();
    for provider in payments.providers.iter() {
        rounds.push(round(conn, provider, settings, metrics, Utc::now()).await?);
    }
    if let Some(m) = metrics {
        m.open.reset();
        m.from_zero(payments.providers.iter().map(|p| p.name.as_str()));
        for count in store::open_counts(conn).await? {
            m.open
                .with_label_values(&[&count.provider, &count.kind])
                .set(count.open);
        }
        for age in store::cursor_ages(conn).await? {
            m.read_through_age
                .with_label_values(&[&age.provider])
                .set(age.seconds);
        }
    }
    Ok(rounds)
}

/// Until `stop`: a round for every provider every `settings.interval`; nothing when it is
/// `None`. A round that fails is logged and tried again at the next.
pub async fn run(
    pool: DbPool,
    payments: Arc<Payments>,
    settings: SettlementSettings,
    metrics: Arc<SettlementMetrics>,
    mut stop: watch::Receiver<bool>,
) {
    let Some(interval) = settings.interval else {
        return;
    };
    loop {
        match pool.get().await {
            Ok(mut conn) => {
                if let Err(err) = all(&mut conn, &payments, &settings, Some(&metrics)).await {
                    tracing::warn!(error = %err, "the settlement reconciliation failed; next round");
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "no connection for the settlement reconciliation")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(interval.max(Duration::from_secs(1))) => {}
            _ = stop.changed() => return,
        }
    }
}
