//! How the delivery worker runs (`serve`'s `--delivery-…` flags and `--allow-…-webhook…`:
//! docs/operations/configuration.md, "Configuration reference"; and docs/DESIGN.md,
//! "Delivering events").

use std::time::Duration;

use crate::events::safe_url::UrlPolicy;
use crate::events::schedule::Schedule;

/// The longest an endpoint may take to answer before the attempt counts as failed (docs/guides/events.md,
/// "Answering, and retries").
pub const SEND_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub struct DeliverySettings {
    /// How often an idle worker looks for due deliveries (at once again after a full batch).
    pub poll_interval: Duration,
    /// Deliveries taken per statement.
    pub batch: i64,
    /// Sends in flight at once, per replica.
    pub concurrency: usize,
    /// Longest a send may take, connecting included.
    pub send_timeout: Duration,
    /// Longest a connection may take to open (inside `send_timeout`).
    pub connect_timeout: Duration,
    /// Beyond `send_timeout`, how long a taken delivery stays hidden from other workers: the
    /// time to read the event and record the attempt. A worker that dies mid-send leaves its
    /// delivery due again after `send_timeout + lease_margin`.
    pub lease_margin: Duration,
    /// When a failed delivery is tried again, and given up.
    pub schedule: Schedule,
    /// Which addresses may be sent to.
    pub urls: UrlPolicy,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        DeliverySettings {
            poll_interval: Duration::from_secs(1),
            batch: 32,
            concurrency: 32,
            send_timeout: SEND_TIMEOUT,
            connect_timeout: Duration::from_secs(5),
            lease_margin: Duration::from_secs(30),
            schedule: Schedule::default(),
            urls: UrlPolicy::default(),
        }
    }
}

impl DeliverySettings {
    /// How long a taken delivery is hidden from other workers.
    pub fn lease(&self) -> Duration {
        self.send_timeout + self.lease_margin
    }
}
