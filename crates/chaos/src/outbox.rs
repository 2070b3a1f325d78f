//! The outbox under chaos (docs/RELIABILITY.md, "Merchant events"): a receiver subscribed to every
//! event type, and the checks that every final change has exactly one event and every event
//! reached the receiver at least once, however often `serve` was killed mid-send. The
//! receiver answers after a short random pause, so some kills do land mid-send.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use payorch::events::signing::{self, Secret};

use crate::checks::connect;

/// What the receiver saw.
#[derive(Debug, Default)]
pub(crate) struct Received {
    /// Deliveries by `webhook-id`: more than one is a resend (at least once).
    by_id: Mutex<HashMap<String, usize>>,
    /// Deliveries whose signature did not verify under the endpoint's secret.
    bad_signatures: AtomicUsize,
    /// The endpoints' secrets, once they are registered: one endpoint per merchant.
    secrets: Mutex<Vec<Secret>>,
}

impl Received {
    fn counts(&self) -> HashMap<String, usize> {
        self.by_id
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// A local endpoint that verifies and counts every delivery and answers `204` at once.
pub(crate) struct Receiver {
    pub(crate) url: String,
    pub(crate) received: Arc<Received>,
    server: actix_web::dev::ServerHandle,
}

impl Receiver {
    pub(crate) async fn start() -> Result<Receiver, String> {
        let received = Arc::new(Received::default());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let data = web::Data::from(received.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/events", web::post().to(receive))
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)
        .map_err(|e| e.to_string())?
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        Ok(Receiver {
            url: format!("http://127.0.0.1:{port}/events"),
            received,
            server: handle,
        })
    }

    pub(crate) fn add_secret(&self, secret: Secret) {
        self.received
            .secrets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(secret);
    }

    pub(crate) async fn stop(&self) {
        self.server.stop(false).await;
    }
}

async fn receive(req: HttpRequest, body: web::Bytes, seen: web::Data<Received>) -> HttpResponse {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (id, timestamp, signature) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    );
    let secrets = seen
        .secrets
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    // Each merchant's endpoint signs with its own secret; a delivery must verify under one.
    let verified = !secrets.is_empty()
        && signing::verify(
            &secrets,
            &id,
            &timestamp,
            &signature,
            &body,
            chrono::Utc::now(),
        )
        .is_ok();
    if !verified {
        seen.bad_signatures.fetch_add(1, Ordering::Relaxed);
        return HttpResponse::Unauthorized().finish();
    }
    // A receiver that takes a moment, as real ones do: a kill then lands in the middle of some
    // sends, whose deliveries must be sent again (the resends the report counts).
    tokio::time::sleep(std::time::Duration::from_millis(rand::random_range(0..150))).await;
    *seen
        .by_id
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .entry(id)
        .or_default() += 1;
    HttpResponse::NoContent().finish()
}

/// Registers `receiver` for every event type through `base_url`'s API.
pub(crate) async fn subscribe(
    base_url: &str,
    api_key: &str,
    receiver: &Receiver,
) -> Result<(), String> {
    let response = reqwest::Client::new()
        .post(format!("{base_url}/v1/webhook_endpoints"))
        .bearer_auth(api_key)
        .header("Idempotency-Key", "chaos-receiver")
        .json(&serde_json::json!({"url": receiver.url, "enabled_events": ["*"]}))
        .send()
        .await
        .map_err(|e| format!("registering the receiver: {e}"))?;
    let status = response.status();
    let body: serde_json::Value = response
        .json()
        .await
        .map_err(|e| format!("registering the receiver: {e}"))?;
    let secret = body["secret"]
        .as_str()
        .filter(|_| status.as_u16() == 201)
        .ok_or_else(|| format!("registering the receiver: {status} {body}"))?;
    let secret =
        Secret::parse(secret).map_err(|e| format!("registering the receiver: the secret: {e}"))?;
    receiver.add_secret(secret);
    Ok(())
}

/// What the outbox checks read once the run is over and the deliveries are done.
#[derive(Debug, Default)]
pub(crate) struct OutboxFacts {
    /// Each final change the database shows: (resource id, the event type it must have).
    pub(crate) changes: Vec<(String, String)>,
    /// Each event: (event id `evt_…`, resource id, type).
    pub(crate) events: Vec<(String, String, String)>,
    /// Deliveries not `succeeded` (still pending, given up or canceled).
    pub(crate) deliveries_unfinished: i64,
    /// Receipts by `webhook-id`.
    pub(crate) received: HashMap<String, usize>,
    pub(crate) bad_signatures: usize,
}

/// Counts of what went wrong with the events; all zero in a good run. The figures say what
/// happened.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct OutboxFindings {
    pub(crate) changes_without_event: usize,
    pub(crate) events_without_change: usize,
    /// Two events of one change (the database's `merchant_events_once` refuses them).
    pub(crate) events_twice: usize,
    pub(crate) events_never_received: usize,
    pub(crate) deliveries_unfinished: usize,
    pub(crate) bad_signatures: usize,
}

impl OutboxFindings {
    pub(crate) fn total(&self) -> usize {
        self.changes_without_event
            + self.events_without_change
            + self.events_twice
            + self.events_never_received
            + self.deliveries_unfinished
            + self.bad_signatures
    }
}

/// The run's figures: events, receipts, and receipts beyond the first (resends).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutboxFigures {
    pub(crate) events: usize,
    pub(crate) receipts: usize,
    pub(crate) duplicates: usize,
}

pub(crate) fn judge(facts: &OutboxFacts) -> (OutboxFindings, OutboxFigures) {
    let changes: BTreeSet<(&str, &str)> = facts
        .changes
        .iter()
        .map(|(r, t)| (r.as_str(), t.as_str()))
        .collect();
    let mut told: HashMap<(&str, &str), usize> = HashMap::new();
    for (_, resource, kind) in &facts.events {
        *told.entry((resource.as_str(), kind.as_str())).or_default() += 1;
    }
    let receipts: usize = facts.received.values().sum();
    let found = OutboxFindings {
        changes_without_event: changes.iter().filter(|c| !told.contains_key(*c)).count(),
        events_without_change: told.keys().filter(|e| !changes.contains(*e)).count(),
        events_twice: told.values().map(|n| n - 1).sum(),
        events_never_received: facts
            .events
            .iter()
            .filter(|(id, _, _)| !facts.received.contains_key(id))
            .count(),
        deliveries_unfinished: facts.deliveries_unfinished.max(0) as usize,
        bad_signatures: facts.bad_signatures,
    };
    let figures = OutboxFigures {
        events: facts.events.len(),
        receipts,
        duplicates: receipts - facts.received.len(),
    };
    (found, figures)
}

/// Deliveries still `pending`, for waiting on the workers.
pub(crate) async fn pending_deliveries(database_url: &str) -> Result<i64, String> {
    let db = connect(database_url).await?;
    let row = db
        .query_one(
            "SELECT count(*) FROM event_deliveries WHERE state = 'pending'",
            &[],
        )
        .await
        .map_err(|e| format!("reading the database: {e}"))?;
    Ok(row.get(0))
}

/// The changes each resource shows, the events, the deliveries left, and what `receiver` saw.
pub(crate) async fn gather(database_url: &str, receiver: &Received) -> Result<OutboxFacts, String> {
    let db = connect(database_url).await?;
    let sql = |e: tokio_postgres::Error| format!("reading the database: {e}");
    // What each row's history says was told: a payment that was ever pending or held
    // (authorized), every final status (a hold captured is succeeded, one voided canceled),
    // an order ever paid (its refunds move it on), canceled or refunded in full.
    let mut changes = db
        .query(
            "SELECT id::text, 'payment.' || status FROM payment_attempts
              WHERE status IN ('succeeded', 'failed', 'canceled')
             UNION ALL
             SELECT DISTINCT attempt_id::text, 'payment.' || to_status FROM attempt_transitions
              WHERE to_status IN ('pending', 'authorized')
             UNION ALL
             SELECT id::text, 'refund.' || status FROM refunds
              WHERE status IN ('succeeded', 'failed')
             UNION ALL
             SELECT id::text, 'order.paid' FROM orders
              WHERE status IN ('paid', 'partially_refunded', 'refunded')
             UNION ALL
             SELECT id::text, 'order.' || status FROM orders
              WHERE status IN ('canceled', 'refunded')",
            &[],
        )
        .await
        .map_err(sql)?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect::<Vec<(String, String)>>();
    // A late approval (#43) is told when found and again when undone, or when it cannot be.
    let late = db
        .query_one("SELECT to_regclass('late_approvals') IS NOT NULL", &[])
        .await
        .map_err(sql)?;
    if late.get::<_, bool>(0) {
        let told = db
            .query(
                "SELECT id::text, 'late_approval.detected' FROM late_approvals
                 UNION ALL
                 SELECT id::text, 'late_approval.' || status FROM late_approvals
                  WHERE status IN ('voided', 'refunded', 'undo_failed')",
                &[],
            )
            .await
            .map_err(sql)?;
        changes.extend(told.iter().map(|row| (row.get(0), row.get(1))));
    }
    // A dispute (#44) is told when made, and at each change of status or stage after, an
    // update's event named by the dispute, status and stage it reached (migration 000028).
    let disputes = db
        .query_one("SELECT to_regclass('dispute_transitions') IS NOT NULL", &[])
        .await
        .map_err(sql)?;
    if disputes.get::<_, bool>(0) {
        let told = db
            .query(
                "SELECT id::text, 'dispute.created' FROM disputes
                 UNION ALL
                 SELECT md5(dispute_id::text || ':' || to_status || ':' || stage)::uuid::text,
                        CASE WHEN to_status IN ('won', 'lost', 'warning_closed')
                                  AND to_status IS DISTINCT FROM from_status
                             THEN 'dispute.closed' ELSE 'dispute.updated' END
                   FROM dispute_transitions WHERE from_status IS NOT NULL",
                &[],
            )
            .await
            .map_err(sql)?;
        changes.extend(told.iter().map(|row| (row.get(0), row.get(1))));
    }
    let events = db
        .query(
            "SELECT 'evt_' || replace(id::text, '-', ''), resource_id::text, type::text
               FROM merchant_events",
            &[],
        )
        .await
        .map_err(sql)?
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    let deliveries_unfinished = db
        .query_one(
            "SELECT count(*) FROM event_deliveries WHERE state <> 'succeeded'",
            &[],
        )
        .await
        .map_err(sql)?
        .get(0);
    Ok(OutboxFacts {
        changes,
        events,
        deliveries_unfinished,
        received: receiver.counts(),
        bad_signatures: receiver.bad_signatures.load(Ordering::Relaxed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> OutboxFacts {
        OutboxFacts {
            changes: vec![
                ("p1".into(), "payment.succeeded".into()),
                ("o1".into(), "order.paid".into()),
            ],
            events: vec![
                ("evt_1".into(), "p1".into(), "payment.succeeded".into()),
                ("evt_2".into(), "o1".into(), "order.paid".into()),
            ],
            deliveries_unfinished: 0,
            received: HashMap::from([("evt_1".into(), 1), ("evt_2".into(), 2)]),
            bad_signatures: 0,
        }
    }

    #[test]
    fn a_good_run_finds_nothing_and_counts_the_resend() {
        let (found, figures) = judge(&good());
        assert_eq!(found, OutboxFindings::default());
        assert_eq!(
            figures,
            OutboxFigures {
                events: 2,
                receipts: 3,
                duplicates: 1
            }
        );
    }

    #[test]
    fn a_change_without_its_event_an_event_without_its_change_and_one_told_twice_are_found() {
        let mut facts = good();
        facts.changes.push(("p2".into(), "payment.failed".into()));
        facts
            .events
            .push(("evt_3".into(), "p3".into(), "payment.failed".into()));
        facts
            .events
            .push(("evt_4".into(), "p1".into(), "payment.succeeded".into()));
        facts.received.insert("evt_3".into(), 1);
        facts.received.insert("evt_4".into(), 1);
        let (found, _) = judge(&facts);
        assert_eq!(found.changes_without_event, 1);
        assert_eq!(found.events_without_change, 1);
        assert_eq!(found.events_twice, 1);
        assert_eq!(found.total(), 3);
    }

    #[test]
    fn an_event_never_received_a_delivery_left_and_a_bad_signature_are_found() {
        let mut facts = good();
        facts.received.remove("evt_2");
        facts.deliveries_unfinished = 1;
        facts.bad_signatures = 2;
        let (found, _) = judge(&facts);
        assert_eq!(found.events_never_received, 1);
        assert_eq!(found.deliveries_unfinished, 1);
        assert_eq!(found.bad_signatures, 2);
    }
}
