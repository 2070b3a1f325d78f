//! Signed webhook delivery (docs/DESIGN.md, "Webhooks"), with the sandbox's fault knobs
//! (duplication, reordering, delay) and retries with jittered exponential backoff on non-2xx
//! or transport errors.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use actix_web::web::Bytes;
use chrono::Utc;
use serde::Serialize;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::time::Instant;

use super::config::SandboxConfig;
use super::nulls::blank;
use super::{random_id, roll, until_shutdown};
use payorch_wire::secret::Secret;
use payorch_wire::signature;
use payorch_wire::stripe::{Event, EventData, EventRequest, PaymentIntent, Refund};

/// The API request that caused an event.
#[derive(Debug, Clone)]
pub(super) struct Cause {
    pub request_id: String,
    pub idempotency_key: Option<String>,
}

/// Most deliveries in flight at once, as a provider's sender pool has: past it, events wait
/// their turn in the sandbox's memory (their body, about a kilobyte), not as connections and
/// requests at the receiver. Without it, a receiver slower than the charges it is told about
/// gets one more connection per waiting event, thousands under load (docs/BENCHMARKS.md, "Load
/// curve").
const MAX_DELIVERIES_IN_FLIGHT: usize = 32;

/// How long an idle connection to the receiver is kept for the next delivery: under the
/// 5 s after which actix-web closes an idle keep-alive connection, so a delivery does not
/// start on a connection the receiver is closing.
const IDLE_CONNECTION: Duration = Duration::from_secs(4);

/// The API version the sandbox claims in events, a real Stripe version.
const API_VERSION: &str = "2024-06-20";

/// How a delivery is signed.
#[derive(Debug, Clone)]
pub(super) enum Signing {
    /// Stripe: a `Stripe-Signature` header over the timestamped body, made afresh per try.
    Header(Secret),
    /// Adyen: each notification item carries its own signature, made when it is queued.
    InBody,
}

struct Target {
    /// Where deliveries go, each try to the next in turn: one receiver, or the replicas
    /// behind a load balancer, where a retry may reach another replica than the first try.
    /// Empty: events are not delivered.
    urls: RwLock<Vec<String>>,
    next: AtomicUsize,
    signing: Signing,
    client: reqwest::Client,
    /// [`MAX_DELIVERIES_IN_FLIGHT`] permits; a try holds one.
    in_flight: Semaphore,
    delay: Duration,
    max_attempts: u32,
    retry: Duration,
    duplicate_rate: f64,
    reorder: bool,
    reorder_window: Duration,
}

impl Target {
    /// The URL for the next try, taking the configured ones in turn.
    fn url(&self) -> Option<String> {
        let urls = self
            .urls
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if urls.is_empty() {
            return None;
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        Some(urls[turn % urls.len()].clone())
    }

    fn delivers(&self) -> bool {
        !self
            .urls
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .is_empty()
    }
}

/// `url`, or several comma-separated.
fn urls(url: Option<&str>) -> Vec<String> {
    url.into_iter()
        .flat_map(|urls| urls.split(','))
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The sending side, held by the request handlers.
pub(super) struct Webhooks {
    tx: mpsc::UnboundedSender<Bytes>,
    target: Arc<Target>,
    /// `--null-rate`: a Stripe event shows its object as an answer would (`nulls`).
    null_rate: f64,
}

impl Webhooks {
    /// Spawn the dispatcher on `rt`; it ends at shutdown.
    pub(super) fn start(
        config: &SandboxConfig,
        url: Option<String>,
        signing: Signing,
        rt: &tokio::runtime::Handle,
        shutdown: watch::Receiver<bool>,
    ) -> std::io::Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(10))
            .user_agent("Stripe/1.0 (+https://stripe.com/docs/webhooks)")
            .pool_max_idle_per_host(MAX_DELIVERIES_IN_FLIGHT)
            .pool_idle_timeout(IDLE_CONNECTION)
            .build()
            .map_err(std::io::Error::other)?;
        let target = Arc::new(Target {
            urls: RwLock::new(urls(url.as_deref())),
            next: AtomicUsize::new(0),
            signing,
            client,
            in_flight: Semaphore::new(MAX_DELIVERIES_IN_FLIGHT),
            delay: Duration::from_millis(config.webhook_delay_ms),
            max_attempts: config.webhook_max_attempts.max(1),
            retry: Duration::from_millis(config.webhook_retry_ms),
            duplicate_rate: config.webhook_duplicate_rate,
            reorder: config.webhook_reorder,
            reorder_window: Duration::from_millis(config.webhook_reorder_window_ms),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        rt.spawn(until_shutdown(
            shutdown.clone(),
            dispatch(rx, target.clone(), shutdown),
        ));
        Ok(Self {
            tx,
            target,
            null_rate: config.null_rate,
        })
    }

    /// Where deliveries go from now on: one URL, several comma-separated, or none.
    pub(super) fn set_url(&self, url: Option<String>) {
        *self
            .target
            .urls
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = urls(url.as_deref());
    }

    /// Queue a `kind` event (`refund.created`, `refund.updated`, `refund.failed`) about
    /// `refund` as it is now, in the same envelope as intent events.
    pub(super) fn emit_refund(&self, kind: &str, refund: &Refund, cause: Option<Cause>) {
        self.enqueue(kind, refund.clone(), cause);
    }

    /// Queue a `kind` event about `intent` as it is now, caused by the API request with
    /// `idempotency_key` (`None`: an event the sandbox makes on its own).
    pub(super) fn emit(&self, kind: &str, intent: &PaymentIntent, cause: Option<Cause>) {
        self.enqueue(kind, intent.clone(), cause);
    }

    /// Queue a `kind` event about `object` (a dispute, as `dispute_news` shows it) as it is
    /// now.
    pub(super) fn emit_object(&self, kind: &str, object: &serde_json::Value, cause: Option<Cause>) {
        self.enqueue(kind, object.clone(), cause);
    }

    /// Queue a body made and signed by the caller (an Adyen notification).
    pub(super) fn send(&self, body: Vec<u8>) {
        // The dispatcher only goes away at shutdown, when losing events is expected.
        let _ = self.tx.send(Bytes::from(body));
    }

    /// Queue a `kind` event about `object` in Stripe's event envelope.
    fn enqueue<O: Serialize>(&self, kind: &str, object: O, cause: Option<Cause>) {
        let delivered = self.target.delivers();
        let event = Event {
            pending_webhooks: i64::from(delivered),
            request: Some(match cause {
                Some(cause) => EventRequest {
                    id: Some(cause.request_id),
                    idempotency_key: cause.idempotency_key,
                },
                None => EventRequest {
                    id: None,
                    idempotency_key: None,
                },
            }),
            id: random_id("evt"),
            object: "event".to_owned(),
            kind: kind.to_owned(),
            created: Utc::now().timestamp(),
            livemode: false,
            api_version: Some(API_VERSION.to_owned()),
            data: EventData { object },
        };
        let body = if self.null_rate > 0.0 {
            serde_json::to_value(&event).and_then(|mut shown| {
                blank(&mut shown, self.null_rate);
                serde_json::to_vec(&shown)
            })
        } else {
            serde_json::to_vec(&event)
        };
        match body {
            // The dispatcher only goes away at shutdown, when losing events is expected.
            Ok(body) => {
                let _ = self.tx.send(Bytes::from(body));
            }
            Err(e) => tracing::error!(error = %e, "could not serialise a sandbox event"),
        }
    }
}

/// Hold each event for the configured delay, then queue it for the senders; or, when
/// reordering, collect events for a window and deliver the batch newest first.
async fn dispatch(
    mut rx: mpsc::UnboundedReceiver<Bytes>,
    target: Arc<Target>,
    shutdown: watch::Receiver<bool>,
) {
    // A fixed crew of senders rather than a task per event: an event waiting its turn is
    // then only its body in this queue (docs/BENCHMARKS.md, "Load curve").
    let (ready_tx, ready_rx) = mpsc::unbounded_channel::<Bytes>();
    let ready_rx = Arc::new(tokio::sync::Mutex::new(ready_rx));
    for _ in 0..MAX_DELIVERIES_IN_FLIGHT {
        tokio::spawn(until_shutdown(
            shutdown.clone(),
            send_ready(target.clone(), ready_rx.clone(), shutdown.clone()),
        ));
    }
    // Events in the order they came, each with the moment its delay is over: one delay for
    // all, so the earliest is always first.
    let mut delayed: VecDeque<(Instant, Bytes)> = VecDeque::new();
    let mut held: Vec<Bytes> = Vec::new();
    let mut flush_at: Option<Instant> = None;
    loop {
        let flush = sleep_until_or_never(flush_at);
        let next_due = sleep_until_or_never(delayed.front().map(|(at, _)| *at));
        tokio::select! {
            () = next_due => {
                let now = Instant::now();
                while delayed.front().is_some_and(|(at, _)| *at <= now) {
                    if let Some((_, body)) = delayed.pop_front() {
                        // The senders live as long as this loop.
                        let _ = ready_tx.send(body);
                    }
                }
            }
            () = flush => {
                let batch: Vec<Bytes> = held.drain(..).rev().collect();
                tokio::spawn(until_shutdown(
                    shutdown.clone(),
                    deliver_in_order(target.clone(), batch, shutdown.clone()),
                ));
                flush_at = None;
            }
            event = rx.recv() => {
                let Some(body) = event else { break };
                if target.reorder {
                    held.push(body);
                    flush_at.get_or_insert_with(|| Instant::now() + target.reorder_window);
                } else {
                    let at = Instant::now() + target.delay;
                    for _ in 0..target.copies() {
                        delayed.push_back((at, body.clone()));
                    }
                }
            }
        }
    }
}

impl Target {
    /// 2 when this event is to be duplicated, else 1.
    fn copies(&self) -> usize {
        if roll(self.duplicate_rate) {
            2
        } else {
            1
        }
    }
}

/// `at`, or never.
async fn sleep_until_or_never(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One of the senders: tries the next event whose delay is over; a refused event retries on
/// its own task, so the queue behind it keeps moving.
async fn send_ready(
    target: Arc<Target>,
    queue: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Bytes>>>,
    shutdown: watch::Receiver<bool>,
) {
    loop {
        let next = queue.lock().await.recv().await;
        let Some(body) = next else { return };
        if !try_once(&target, &body, 1).await {
            tokio::spawn(until_shutdown(
                shutdown.clone(),
                retry(target.clone(), body),
            ));
        }
    }
}

/// First tries of a batch strictly one after another, so the receiver sees the batch
/// order; a refused event retries on its own task without holding the rest back.
async fn deliver_in_order(target: Arc<Target>, batch: Vec<Bytes>, shutdown: watch::Receiver<bool>) {
    tokio::time::sleep(target.delay).await;
    for body in batch {
        for _ in 0..target.copies() {
            if !try_once(&target, &body, 1).await {
                tokio::spawn(until_shutdown(
                    shutdown.clone(),
                    retry(target.clone(), body.clone()),
                ));
            }
        }
    }
}

/// Tries 2..=max_attempts with doubling, jittered backoff, until one is accepted.
async fn retry(target: Arc<Target>, body: Bytes) {
    for (attempt, wait) in (2..=target.max_attempts).zip(retry_waits(target.retry)) {
        tokio::time::sleep(wait).await;
        if try_once(&target, &body, attempt).await {
            return;
        }
    }
    tracing::warn!("webhook given up after {} attempts", target.max_attempts);
}

/// The waits before the second, third, … try: `first`, doubling each time, each drawn from
/// 0.8–1.2 × its nominal value (`payorch_wire::jitter`). Events refused together — every
/// event of a receiver's outage — then come back spread out, as from a real provider, instead
/// of as one burst per round; the doubling stays in order, and no retry is immediate.
fn retry_waits(first: Duration) -> impl Iterator<Item = Duration> {
    std::iter::successors(Some(first), |nominal| Some(nominal.saturating_mul(2)))
        .map(payorch_wire::jitter::jittered)
}

/// One signed POST; true when the receiver answered 2xx, or when there is nowhere to send.
/// Each try is signed afresh, as Stripe does, so a late retry is not refused for its age.
async fn try_once(target: &Target, body: &Bytes, attempt: u32) -> bool {
    // Never closed, so a permit always comes; dropped with the try.
    let Ok(_permit) = target.in_flight.acquire().await else {
        return false;
    };
    let Some(url) = target.url() else {
        tracing::debug!("no webhook URL configured; event dropped");
        return true;
    };
    let mut request = target.client.post(&url).header(
        reqwest::header::CONTENT_TYPE,
        "application/json; charset=utf-8",
    );
    if let Signing::Header(secret) = &target.signing {
        let header = signature::header_value(&[secret], Utc::now().timestamp(), body);
        request = request.header(signature::HEADER, header);
    }
    let result = request.body(body.clone()).send().await;
    match result {
        Ok(response) if response.status().is_success() => true,
        Ok(response) => {
            let status = response.status().as_u16();
            tracing::warn!(%url, attempt, status, "webhook refused");
            false
        }
        Err(e) => {
            tracing::warn!(%url, attempt, error = %e, "webhook delivery failed");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_waits_double_within_their_bounds() {
        let first = Duration::from_millis(1000);
        for _ in 0..50 {
            let waits: Vec<Duration> = retry_waits(first).take(6).collect();
            for (n, wait) in waits.iter().enumerate() {
                let nominal = first * 2u32.pow(n as u32);
                assert!(
                    nominal.mul_f64(0.8) <= *wait && *wait <= nominal.mul_f64(1.2),
                    "wait {n}: {wait:?} is not within 0.8–1.2 × {nominal:?}"
                );
            }
            assert!(waits.windows(2).all(|pair| pair[0] < pair[1]), "{waits:?}");
        }
    }

    #[test]
    fn events_refused_together_do_not_retry_together() {
        let firsts: Vec<Duration> = (0..100)
            .map(|_| {
                retry_waits(Duration::from_millis(1000))
                    .next()
                    .unwrap_or_default()
            })
            .collect();
        assert!(
            firsts.iter().any(|wait| *wait != firsts[0]),
            "100 events all wait {:?} before their first retry",
            firsts[0]
        );
    }
}
