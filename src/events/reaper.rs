//! The event reaper: a worker in every replica that keeps the merchant events' monthly
//! partitions (`db::partitions`; docs/DESIGN.md, "History partitioned by time"). Each round
//! it creates the months ahead, and drops each month of events — with its deliveries and
//! their attempts, partitioned by the same event id — once all of it is older than the
//! retention (`--event-retention-days`, 30 by default; docs/guides/events.md, "Events and
//! webhook endpoints") and every payment its events are about has been final as long. So an
//! event is kept at least the retention and at most a month more: a whole month goes in one
//! `DROP TABLE`, where deleting its rows 500 at a time was the write load itself at volume
//! (docs/SCALING.md, "History partitioned by time").
//!
//! The providers' webhooks have a reaper of their own (`payments::webhooks::reaper`), which
//! `app` runs beside this one: they are payments' rows.

use std::time::Duration;

use tokio::sync::watch;

use crate::db::partitions::{self, Expired, Family, PartitionGauges};
use crate::db::DbPool;
use crate::db::PgConn;

#[derive(Debug, Clone)]
pub struct EventReaperSettings {
    /// How often it looks (the key reaper's `--reaper-interval-secs`).
    pub interval: Duration,
    /// How long an event is kept after it was written, at least (a month more at most).
    pub retention: Duration,
}

impl Default for EventReaperSettings {
    fn default() -> Self {
        EventReaperSettings {
            interval: Duration::from_secs(60),
            retention: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// Runs until `stop` turns true; each round ends setting the partitions' `gauges`.
pub async fn run(
    pool: DbPool,
    settings: EventReaperSettings,
    gauges: PartitionGauges,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let reaped = match pool.get().await {
            Ok(mut conn) => match reap_once(&mut conn, &settings).await {
                Ok(_) => gauges
                    .observe(&mut conn, Family::Events)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            Err(err) => Err(err.to_string()),
        };
        if let Err(err) = reaped {
            tracing::warn!(error = %err, "event reaper failed; retrying later");
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.interval) => {}
            _ = stop.changed() => return,
        }
    }
}

/// One round: the months ahead made, the months past the retention dropped or, a payment of
/// theirs still open, kept and said (`db::partitions::keep` logs each).
pub async fn reap_once(
    conn: &mut PgConn,
    settings: &EventReaperSettings,
) -> diesel::QueryResult<Vec<Expired>> {
    partitions::keep(conn, Family::Events, settings.retention).await
}
