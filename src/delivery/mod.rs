//! The delivery worker (docs/DESIGN.md, "Delivering events"): every replica runs one; it
//! takes due deliveries ([`take`]), sends each to its endpoint signed ([`send`]) and records
//! the attempt and what follows from it ([`record`]), on the schedule of
//! [`crate::events::schedule`]. Delivery is at least once: a delivery is due until an attempt
//! is recorded, and a worker that dies holding one leaves it due again when its lease ends.

pub mod body;
pub mod metrics;
pub mod record;
pub mod resolver;
pub mod send;
pub mod settings;
pub mod take;

use std::sync::Arc;

use chrono::Utc;
use tokio::sync::watch;
use tokio::task::JoinSet;

use self::body::event_body;
use self::metrics::{AttemptOutcome, DeliveryMetrics};
use self::record::{record, Attempt};
use self::send::{Sender, Signed};
use self::settings::DeliverySettings;
use self::take::{take_due, Taken};
use crate::db::DbPool;
use crate::events::endpoints::sealed::UnsealError;
use crate::events::schedule::{Answer, Verdict};
use crate::events::signing::SigningSecrets;
use crate::sealing::MasterKeys;

/// What every send of one worker shares.
pub struct Deliverer {
    pub pool: DbPool,
    pub settings: DeliverySettings,
    pub sender: Sender,
    pub metrics: Arc<DeliveryMetrics>,
    /// What opens the endpoints' sealed secrets (docs/PRODUCTION.md, section 5).
    pub master_keys: MasterKeys,
}

#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error(transparent)]
    Unavailable(#[from] crate::db::pool::PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
}

/// Runs until `stop` turns true, then waits for the sends in flight to be recorded (each
/// ends within the send timeout).
pub async fn run(deliverer: Arc<Deliverer>, mut stop: watch::Receiver<bool>) {
    let settings = &deliverer.settings;
    let concurrency = settings.concurrency.max(1);
    let mut in_flight: JoinSet<()> = JoinSet::new();
    loop {
        while in_flight.try_join_next().is_some() {}
        if *stop.borrow() {
            break;
        }
        let free = concurrency.saturating_sub(in_flight.len());
        if free == 0 {
            tokio::select! {
                _ = stop.wait_for(|stopped| *stopped) => break,
                _ = in_flight.join_next() => continue,
            }
        }
        let asked = settings.batch.clamp(1, free as i64);
        let taken = match take(&deliverer, asked).await {
            Ok(taken) => taken,
            Err(err) => {
                tracing::warn!(error = %err, "could not take due event deliveries");
                Vec::new()
            }
        };
        let full = taken.len() as i64 >= asked;
        for delivery in taken {
            let deliverer = deliverer.clone();
            in_flight.spawn(async move { deliver(&deliverer, delivery).await });
        }
        // A full batch means more may be due: go on at once (as far as the free sends allow).
        if full {
            continue;
        }
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => break,
            () = tokio::time::sleep(settings.poll_interval) => {}
        }
    }
    // Stopping: what was taken is sent and recorded, so nothing waits out a lease for it.
    while in_flight.join_next().await.is_some() {}
}

/// Takes up to `batch` due deliveries; counts those canceled instead. Returns those to send.
async fn take(deliverer: &Deliverer, batch: i64) -> Result<Vec<Taken>, DeliveryError> {
    let mut conn = deliverer.pool.get().await?;
    let (canceled, taken): (Vec<Taken>, Vec<Taken>) =
        take_due(&mut conn, deliverer.settings.lease(), batch)
            .await?
            .into_iter()
            .partition(Taken::canceled);
    if !canceled.is_empty() {
        deliverer
            .metrics
            .finished("canceled", canceled.len() as u64);
    }
    Ok(taken)
}

/// Sends one taken delivery and records the attempt. A failure to record leaves the delivery
/// due again when its lease ends (at least once).
#[tracing::instrument(skip_all, fields(event = %taken.event_id(), endpoint = %taken.endpoint_id(),
    merchant = %taken.merchant_id(), attempt = taken.attempts + 1))]
async fn deliver(deliverer: &Deliverer, taken: Taken) {
    if let Err(err) = try_deliver(deliverer, &taken).await {
        tracing::warn!(error = %err, "event delivery not recorded; due again after its lease");
    }
}

async fn try_deliver(deliverer: &Deliverer, taken: &Taken) -> Result<(), DeliveryError> {
    let body = event_body(taken.event.clone());
    let secrets = signing_secrets(taken, &deliverer.master_keys);
    let (attempt, answer) = match (body, secrets) {
        (Ok(body), Ok(secrets)) => {
            let now = Utc::now();
            let id = taken.event_id().to_string();
            let timestamp = now.timestamp();
            let signed = Signed {
                signature: secrets.header(&id, timestamp, &body, now),
                id,
                timestamp,
            };
            let sent = deliverer.sender.send(&taken.url, &signed, body).await;
            let http_status = match &sent.answer {
                Answer::Status { status, .. } => Some(*status),
                Answer::NoAnswer => None,
            };
            let attempt = Attempt {
                http_status,
                latency: sent.latency,
                error: sent.error,
            };
            (attempt, sent.answer)
        }
        // Not sendable as it stands (an event this version cannot read, a secret that does
        // not open under this replica's master keys or does not parse): a failed attempt,
        // retried on the schedule, so a newer replica, a replica with the key or a rotated
        // secret can still deliver it.
        (Err(err), _) => (not_sent(format!("not sent: {err}")), Answer::NoAnswer),
        (Ok(_), Err(err)) => (not_sent(format!("not sent: {err}")), Answer::NoAnswer),
    };
    let verdict = deliverer.settings.schedule.judge(
        u32::try_from(taken.attempts + 1).unwrap_or(u32::MAX),
        &answer,
    );
    let mut conn = deliverer.pool.get().await?;
    let recorded = record(&mut conn, taken, &attempt, verdict).await?;
    deliverer.metrics.attempt(match verdict {
        Verdict::Delivered => AttemptOutcome::Succeeded,
        _ => AttemptOutcome::Failed,
    });
    if let Some(state) = recorded.finished {
        deliverer.metrics.finished(state, 1);
    }
    if let Some(reason) = recorded.disabled {
        deliverer.metrics.disabled(reason);
        tracing::warn!(reason, url = %taken.url, "webhook endpoint disabled");
    }
    if recorded.canceled > 0 {
        deliverer.metrics.finished("canceled", recorded.canceled);
    }
    match verdict {
        Verdict::Delivered => tracing::debug!("event delivered"),
        _ => tracing::info!(
            error = attempt.error.as_deref().unwrap_or(""),
            ?verdict,
            "event delivery failed"
        ),
    }
    Ok(())
}

fn not_sent(error: String) -> Attempt {
    Attempt {
        http_status: None,
        latency: std::time::Duration::ZERO,
        error: Some(error),
    }
}

/// The secrets that sign a delivery of `taken`'s endpoint now, opened under `keys`.
fn signing_secrets(taken: &Taken, keys: &MasterKeys) -> Result<SigningSecrets, UnsealError> {
    let endpoint = taken.endpoint_id();
    let previous = match (taken.previous_secret(), taken.previous_secret_until) {
        (Some(secret), Some(until)) => Some((secret.open(keys, endpoint)?, until)),
        _ => None,
    };
    Ok(SigningSecrets {
        current: taken.secret.open(keys, endpoint)?,
        previous,
    })
}
