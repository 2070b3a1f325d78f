//! One round of the settlement reconciliation per provider, and the loop that runs them
//! every `--settlement-interval-secs` (docs/operations/reconciliation.md, "How it runs").
//!
//! A round reads the provider's record from its cursor on, keeps what is new, and compares
//! the stretch from where the last round stopped to the record's end less the grace. Rounds
//! on two replicas at once do no harm: the entries and the open findings are each kept once
//! by their unique keys, and the later cursor written covers what both read.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel_async::AsyncPgConnection;
use tokio::sync::watch;

use super::books;
use super::compare::compare;
use super::gauges::SettlementMetrics;
use super::store::{self, Cursor};
use super::SettlementSettings;
use crate::db::DbPool;
use crate::payments::service::Payments;
use crate::providers::registry::NamedProvider;
use crate::providers::settlement::SettlementQuery;

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
    /// Why the record could not be read.
    pub unread: Option<String>,
}

/// One round for `provider` at `now`.
pub async fn round(
    conn: &mut AsyncPgConnection,
    provider: &NamedProvider,
    settings: &SettlementSettings,
    metrics: Option<&SettlementMetrics>,
    now: DateTime<Utc>,
) -> diesel::QueryResult<Round> {
    let name = provider.name.as_str();
    let since = now - chrono::Duration::from_std(settings.first_lookback).unwrap_or_default();
    let grace = chrono::Duration::from_std(settings.grace).unwrap_or_default();
    let cursor = store::cursor(conn, name).await?;
    let query = SettlementQuery {
        position: cursor.as_ref().map(|c| c.position.clone()),
        since,
        until: now,
    };
    let mut done = Round {
        provider: name.to_owned(),
        read: 0,
        kept: 0,
        compared: None,
        findings: 0,
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
    done.kept = store::keep_entries(conn, name, &page.entries).await?;
    let before_read = cursor.as_ref().map_or(since, |c| c.read_through);
    let read_through = page.read_through.unwrap_or(before_read).max(before_read);
    let from = cursor.as_ref().map_or(since, |c| c.checked_through);
    let to = (read_through - grace).min(now - grace).max(from);
    if to > from {
        let books = books::books(conn, name, from, to).await?;
        for found in compare(&books) {
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
    let saved = Cursor {
        position: page.position,
        read_through: read_through.max(to),
        checked_through: to,
    };
    store::save_cursor(conn, name, &saved).await?;
    Ok(done)
}

/// One round for every provider of `payments`, then the open findings' gauge.
pub async fn all(
    conn: &mut AsyncPgConnection,
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
