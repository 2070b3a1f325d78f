//! The `failover` run's prober: a cheap keyed write (`POST /v1/orders` under a fresh
//! `Idempotency-Key`) to each replica every 100 ms, each answer kept with the time it was sent
//! and answered, so the run can tell when writes stopped and when they came back, and check
//! afterwards that every order it was told of is still there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::task::{JoinHandle, JoinSet};

/// How often each replica is sent a write.
const EVERY: Duration = Duration::from_millis(100);
/// How long one write may take before it counts as failed.
const TIMEOUT: Duration = Duration::from_secs(20);

/// One write and its answer; times since the run's start.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub(crate) replica: usize,
    pub(crate) sent: Duration,
    pub(crate) answered: Duration,
    pub(crate) outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// `2xx`: the order made (`ord_…`).
    Created(String),
    /// Any other status (or a `2xx` without an order), with the error's `code` and the
    /// answer's `X-Request-Id`, to find it in the replica's log.
    Status {
        status: u16,
        code: String,
        request_id: String,
    },
    /// No answer: the connection was cut, or the write took longer than [`TIMEOUT`].
    Failed,
}

impl Probe {
    pub(crate) fn order(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Created(id) => Some(id),
            _ => None,
        }
    }
}

pub(crate) struct Prober {
    records: Arc<Mutex<Vec<Probe>>>,
    stop: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Prober {
    /// Starts writing to every one of `urls`; times are measured from `origin`.
    pub(crate) fn start(urls: Vec<String>, api_key: String, origin: Instant) -> Prober {
        let records: Arc<Mutex<Vec<Probe>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .expect("an HTTP client");
        let run_id = format!("{:x}", chrono::Utc::now().timestamp_millis());
        let task = tokio::spawn({
            let records = records.clone();
            let stop = stop.clone();
            async move {
                let mut sends = JoinSet::new();
                let mut ticks = tokio::time::interval(EVERY);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    ticks.tick().await;
                    for (replica, url) in urls.iter().enumerate() {
                        let send = write(
                            http.clone(),
                            format!("{url}/v1/orders"),
                            api_key.clone(),
                            format!("probe-{run_id}-{n}-{replica}"),
                        );
                        let records = records.clone();
                        let sent = origin.elapsed();
                        sends.spawn(async move {
                            let outcome = send.await;
                            lock(&records).push(Probe {
                                replica,
                                sent,
                                answered: origin.elapsed(),
                                outcome,
                            });
                        });
                    }
                    n += 1;
                    // Reap what is done, so the set stays small.
                    while sends.try_join_next().is_some() {}
                }
                while sends.join_next().await.is_some() {}
            }
        });
        Prober {
            records,
            stop,
            task,
        }
    }

    /// The answers so far, in the order they came.
    pub(crate) fn so_far(&self) -> Vec<Probe> {
        lock(&self.records).clone()
    }

    /// Stops, waits for the writes in flight, and hands back every answer, sorted by the time
    /// each write was sent.
    pub(crate) async fn stop(self) -> Vec<Probe> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        let mut all = lock(&self.records).clone();
        all.sort_by_key(|p| p.sent);
        all
    }
}

async fn write(http: reqwest::Client, url: String, api_key: String, key: String) -> Outcome {
    let sent = http
        .post(url)
        .bearer_auth(api_key)
        .header("Idempotency-Key", key)
        .json(&json!({"amount": 100, "currency": "usd", "description": "failover probe"}))
        .send()
        .await;
    let Ok(response) = sent else {
        return Outcome::Failed;
    };
    let status = response.status().as_u16();
    let request_id = response
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let Ok(body) = response.json::<Value>().await else {
        return Outcome::Failed;
    };
    match (status, body["id"].as_str()) {
        (200..=299, Some(id)) => Outcome::Created(id.to_owned()),
        _ => Outcome::Status {
            status,
            code: body["code"].as_str().unwrap_or_default().to_owned(),
            request_id,
        },
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
