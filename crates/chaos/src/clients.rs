//! Clients that retry like real ones: each logical checkout keeps its `Idempotency-Key` and
//! asks again — after a cut connection, a `503`, a `409` in flight or a `pending` answer —
//! until it has a final answer. Every answer is kept, so the checks can see whether one
//! intent was ever told about two payments. One checkout in four holds the money instead
//! (`capture_method: manual`) and then captures all of it, or a part, or voids it, under a key
//! of its own kept across retries the same way (docs/guides/captures.md, "Authorize now, capture later").

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::pace::Pace;
use crate::strict::{self, Protocol};

/// The payment methods of the run, in turn: mostly cards that pay, and each of the sandbox's
/// faults (docs/operations/commands.md, "Commands": `payorch sandbox --help`).
pub(crate) const METHODS: [&str; 20] = [
    "pm_card_visa",
    "pm_sandbox_lost_response",
    "pm_card_visa",
    "pm_card_mastercard",
    "pm_sandbox_error_after",
    "pm_card_visa",
    "pm_card_chargeDeclined",
    "pm_sandbox_slow",
    "pm_card_visa",
    "pm_sandbox_processing",
    "pm_card_visa",
    "pm_sandbox_error_before",
    "pm_card_visa",
    "pm_card_chargeDeclinedInsufficientFunds",
    "pm_sandbox_lost_response",
    "pm_card_visa",
    "pm_sandbox_error_after",
    "pm_card_visa",
    "pm_sandbox_processing",
    "pm_card_visa",
];

/// The payment methods of the manual-capture checkouts, in turn: cards that hold, each
/// `pm_sandbox_capture_*` fault (the first capture or void of the payment meets it), charge
/// faults that leave the hold to be found by the reconciler or a webhook, and a decline.
pub(crate) const MANUAL_METHODS: [&str; 10] = [
    "pm_card_visa",
    "pm_sandbox_capture_lost_response",
    "pm_sandbox_lost_response",
    "pm_sandbox_capture_error_after",
    "pm_card_chargeDeclined",
    "pm_sandbox_capture_error_before",
    "pm_sandbox_processing",
    "pm_card_mastercard",
    "pm_sandbox_error_after",
    "pm_sandbox_capture_lost_response",
];

/// The refund faults, in turn (`reason` names the sandbox fault; docs/guides/refunds.md, "Refunds").
pub(crate) const REFUND_REASONS: [Option<&str>; 6] = [
    None,
    Some("sandbox_lost_response"),
    Some("sandbox_error_after"),
    Some("sandbox_pending"),
    Some("sandbox_error_before"),
    Some("sandbox_failure"),
];

/// How long one logical request may take before its intent counts as lost.
const DEADLINE: Duration = Duration::from_secs(120);

/// One intent in seven is abandoned after its first request, answered or not, as by a payer
/// who closes the page: whatever it left open is the reconciler's to finish.
fn abandons(i: usize) -> bool {
    i % 7 == 3
}

/// One intent in four holds the money (`capture_method: manual`) and then captures or voids
/// it. Never one of those that ask for refunds (every fourth from the first).
pub(crate) fn manual_capture(i: usize) -> bool {
    i % 4 == 2
}

/// Intent `i`'s payment method, and the refund fault its refunds meet if it asks for any
/// (every fourth from the first, with the faults in turn).
pub(crate) fn method_of(i: usize) -> (&'static str, Option<&'static str>) {
    if manual_capture(i) {
        return (MANUAL_METHODS[(i / 4) % MANUAL_METHODS.len()], None);
    }
    let refund_fault = if i.is_multiple_of(4) {
        REFUND_REASONS[(i / 4) % REFUND_REASONS.len()]
    } else {
        None
    };
    (METHODS[i % METHODS.len()], refund_fault)
}

/// A merchant the clients pay for: its API key, and the provider its routing names.
#[derive(Debug, Clone)]
pub(crate) struct Merchant {
    pub(crate) api_key: String,
    pub(crate) protocol: Protocol,
}

/// How long a client polls a payment whose hold another operation is working on
/// (`409 hold_operation_in_progress`) before it asks again.
const POLL_BUSY: Duration = Duration::from_secs(10);

/// Where the clients send their requests.
#[derive(Clone)]
pub(crate) struct Targets {
    pub(crate) urls: Vec<String>,
    /// Send each request to two replicas at the same instant.
    pub(crate) duplicate: bool,
    /// When each intent may start; without, as soon as a client is free.
    pub(crate) pace: Option<Arc<Pace>>,
    /// Every intent pays with this payment method, automatically and without refunds (the
    /// `retries` and `routing` runs' `pm_sandbox_mix`, whose answer the sandbox draws from
    /// its face's mix); without, the methods, holds and refunds of [`method_of`].
    pub(crate) only: Option<&'static str>,
}

/// What the clients saw, for the result table.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) requests: AtomicUsize,
    /// Requests sent again under the same key: after a cut connection, a `5xx`, a `409` in
    /// flight, a `429` or a `pending` answer.
    pub(crate) retries: AtomicUsize,
    pub(crate) cut: AtomicUsize,
    pub(crate) unavailable: AtomicUsize,
    pub(crate) server_errors: AtomicUsize,
    pub(crate) done: AtomicUsize,
    /// `409 hold_operation_in_progress` answers: another operation was working on the hold,
    /// and the client polled the payment.
    pub(crate) hold_busy: AtomicUsize,
    /// Answers no client should get: a `4xx` other than the expected refusals, or a body
    /// that is not the resource. At most a few kept for the report.
    pub(crate) unexpected: Mutex<Vec<String>>,
    pub(crate) unexpected_count: AtomicUsize,
}

impl Tally {
    fn unexpected(&self, what: String) {
        self.unexpected_count.fetch_add(1, Ordering::Relaxed);
        let mut kept = self
            .unexpected
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if kept.len() < 5 {
            kept.push(what);
        }
    }
}

/// One logical checkout, and the refunds asked of it, as the client saw them.
#[derive(Debug, Default, Clone)]
pub(crate) struct Intent {
    pub(crate) key: String,
    pub(crate) method: &'static str,
    /// The provider its merchant is routed to.
    pub(crate) protocol: Option<Protocol>,
    /// Sent once and never asked about again.
    pub(crate) abandoned: bool,
    /// Made with `capture_method: manual`: its final checkout answer is `authorized` (or
    /// `failed`), and then it captures or voids the hold.
    pub(crate) manual: bool,
    /// Every payment id any answer named.
    pub(crate) payment_ids: BTreeSet<String>,
    /// The payment the final answer named: with retries on another provider, one checkout's
    /// answers may name each attempt of its chain, the last one final.
    pub(crate) final_payment: Option<String>,
    /// The final status, if one came before the deadline.
    pub(crate) status: Option<String>,
    pub(crate) refunds: Vec<RefundIntent>,
    /// The capture or void of a manual payment told `authorized`.
    pub(crate) hold: Option<HoldIntent>,
}

/// What a client asks of its hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldAsk {
    /// A capture of all of it (no `amount`).
    CaptureAll,
    /// A capture of this much, less than the hold; the rest is released.
    CapturePart(i64),
    Void,
}

/// A capture or void of a hold, as the client saw it.
#[derive(Debug, Clone)]
pub(crate) struct HoldIntent {
    pub(crate) key: String,
    pub(crate) ask: HoldAsk,
    /// Every operation id any answer named.
    pub(crate) operation_ids: BTreeSet<String>,
    /// `succeeded`, `failed`, or the code of a final refusal (`payment_not_capturable`,
    /// `payment_not_cancelable`).
    pub(crate) outcome: Option<String>,
    /// What the operation took, as its `succeeded` answer said (a capture).
    pub(crate) amount: Option<i64>,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct RefundIntent {
    pub(crate) key: String,
    pub(crate) refund_ids: BTreeSet<String>,
    /// `succeeded`, `failed`, or the code of a final refusal (`refund_exceeds_payment`).
    pub(crate) outcome: Option<String>,
}

/// Runs `intents` logical checkouts on `clients` concurrent clients, each intent for one of
/// `merchants` ([`strict::merchant_of`]).
pub(crate) async fn run(
    targets: Targets,
    merchants: Vec<Merchant>,
    intents: usize,
    clients: usize,
    tally: Arc<Tally>,
) -> Vec<Intent> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .pool_idle_timeout(Duration::from_secs(5))
        .build()
        .expect("an HTTP client");
    let next = Arc::new(AtomicUsize::new(0));
    let run_id = format!("{:x}", chrono::Utc::now().timestamp_millis());
    let mut workers = Vec::new();
    let merchants = Arc::new(merchants);
    for _ in 0..clients {
        let http = http.clone();
        let targets = targets.clone();
        let tally = tally.clone();
        let merchants = merchants.clone();
        let next = next.clone();
        let run_id = run_id.clone();
        workers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= intents {
                    break mine;
                }
                if let Some(pace) = &targets.pace {
                    pace.wait(i).await;
                }
                let merchant = &merchants[strict::merchant_of(i, merchants.len())];
                let client = Client {
                    http: http.clone(),
                    targets: targets.clone(),
                    api_key: merchant.api_key.clone(),
                    // Which protocol matters only when the merchants differ in it.
                    protocol: (merchants.len() > 1).then_some(merchant.protocol),
                    tally: tally.clone(),
                };
                mine.push(client.intent(&run_id, i).await);
                tally.done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut all = Vec::new();
    for worker in workers {
        all.extend(worker.await.unwrap_or_default());
    }
    all
}

/// A client for one intent, of one merchant.
struct Client {
    http: reqwest::Client,
    targets: Targets,
    api_key: String,
    protocol: Option<Protocol>,
    tally: Arc<Tally>,
}

/// One answer, reduced to what a client acts on.
enum Answer {
    /// `2xx` with the resource.
    Resource(Value),
    /// A refusal that is final for this key (`409 refund_exceeds_payment`,
    /// `payment_not_capturable`, `payment_not_cancelable`, or an answer no client should get).
    Refused(String),
    /// Ask again with the same key.
    Again,
    /// `409 hold_operation_in_progress`: poll the payment, then ask again with the same key.
    Busy,
}

impl Client {
    async fn intent(&self, run_id: &str, i: usize) -> Intent {
        let only = self.targets.only;
        let manual = only.is_none() && manual_capture(i);
        let (method, refund_fault) = match only {
            Some(method) => (method, None),
            None => method_of(i),
        };
        let amount = 1000 + i as i64;
        let mut intent = Intent {
            key: format!("chaos-{run_id}-{i}"),
            method,
            protocol: self.protocol,
            abandoned: abandons(i),
            manual,
            ..Intent::default()
        };
        let sent_method = match (self.protocol, only) {
            (Some(protocol), _) => strict::wire_method(protocol, method, refund_fault),
            // Each checkout its own card, as payers' are: payorch caps the retries of one
            // card across payments, and one card for the whole run would reach the cap.
            (None, Some(_)) => format!("{method}.card{i}"),
            (None, None) => method.to_owned(),
        };
        let mut body = json!({"amount": amount, "currency": "usd", "payment_method": sent_method});
        if manual {
            body["capture_method"] = json!("manual");
        }
        // Through a provider without lookups, payorch ends an outcome it never heard by a
        // technical cancel: `canceled` is then where an automatic payment ends too — also
        // through a route whose attempts may go to Adyen.
        let canceled_is_final = self.protocol == Some(Protocol::Adyen) || only.is_some();
        let rounds = if intent.abandoned { 1 } else { usize::MAX };
        let payment = self
            .until_final(&intent.key, "/v1/checkout", &body, rounds, None, |answer| {
                let payment = &answer["payment"];
                if let Some(id) = payment["id"].as_str() {
                    intent.payment_ids.insert(id.to_owned());
                }
                let status = checkout_status(payment, manual, canceled_is_final);
                if status.is_some() {
                    intent.final_payment = payment["id"].as_str().map(str::to_owned);
                }
                status
            })
            .await;
        intent.status = payment.clone().and_then(|p| p.ok());
        let told = intent
            .final_payment
            .clone()
            .or_else(|| intent.payment_ids.first().cloned());
        let (Some(Ok(status)), Some(id)) = (&payment, told) else {
            return intent;
        };
        if only.is_some() {
            return intent;
        }
        // A hold is captured, in whole or in part, or voided, chosen at random.
        if manual {
            if status == "authorized" {
                let ask = match rand::random_range(0..10) {
                    0..=3 => HoldAsk::CaptureAll,
                    4..=6 => HoldAsk::CapturePart(rand::random_range(1..amount)),
                    _ => HoldAsk::Void,
                };
                intent.hold = Some(self.operate(&intent.key, &id, ask).await);
            }
            return intent;
        }
        // Every fourth paid intent asks for half back, with the refund faults in turn; every
        // eighth then asks for all of it, which is refused unless the first refund failed.
        if status != "succeeded" || !i.is_multiple_of(4) {
            return intent;
        }
        let half = json!({"amount": amount / 2, "reason": refund_fault});
        intent
            .refunds
            .push(self.refund(&intent.key, &id, "a", &half).await);
        if i.is_multiple_of(8) {
            let all = json!({ "amount": amount });
            intent
                .refunds
                .push(self.refund(&intent.key, &id, "b", &all).await);
        }
        intent
    }

    /// Captures or voids `payment`'s hold as `ask` says, under a key of its own, until the
    /// operation is final or a final refusal comes.
    async fn operate(&self, key: &str, payment: &str, ask: HoldAsk) -> HoldIntent {
        let (what, body) = match ask {
            HoldAsk::CaptureAll => ("capture", json!({})),
            HoldAsk::CapturePart(amount) => ("capture", json!({ "amount": amount })),
            HoldAsk::Void => ("cancel", json!({})),
        };
        let mut hold = HoldIntent {
            key: format!("{key}-{what}"),
            ask,
            operation_ids: BTreeSet::new(),
            outcome: None,
            amount: None,
        };
        let poll = format!("/v1/payments/{payment}");
        let outcome = self
            .until_final(
                &hold.key,
                &format!("/v1/payments/{payment}/{what}"),
                &body,
                usize::MAX,
                Some(&poll),
                |answer| {
                    let operation = &answer["operation"];
                    if let Some(id) = operation["id"].as_str() {
                        hold.operation_ids.insert(id.to_owned());
                    }
                    let status = final_status(operation);
                    if status.as_deref() == Some("succeeded") {
                        hold.amount = operation["amount"].as_i64();
                    }
                    status
                },
            )
            .await;
        hold.outcome = outcome.map(|o| o.unwrap_or_else(|refused| refused));
        hold
    }

    async fn refund(&self, key: &str, payment: &str, n: &str, body: &Value) -> RefundIntent {
        let mut refund = RefundIntent {
            key: format!("{key}-refund-{n}"),
            ..RefundIntent::default()
        };
        let outcome = self
            .until_final(
                &refund.key,
                &format!("/v1/payments/{payment}/refunds"),
                body,
                usize::MAX,
                None,
                |answer| {
                    if let Some(id) = answer["id"].as_str() {
                        refund.refund_ids.insert(id.to_owned());
                    }
                    final_status(answer)
                },
            )
            .await;
        refund.outcome = outcome.map(|o| o.unwrap_or_else(|refused| refused));
        refund
    }

    /// POSTs `body` under `key` until `judge` finds a final status in an answer, or a final
    /// refusal comes; after a `409 hold_operation_in_progress`, polls `poll` (the payment)
    /// first. `None` past the deadline or after `rounds` rounds.
    async fn until_final(
        &self,
        key: &str,
        path: &str,
        body: &Value,
        rounds: usize,
        poll: Option<&str>,
        mut judge: impl FnMut(&Value) -> Option<String>,
    ) -> Option<Result<String, String>> {
        let started = Instant::now();
        let mut round = 0usize;
        while started.elapsed() < DEADLINE && round < rounds {
            if round > 0 {
                self.tally.retries.fetch_add(1, Ordering::Relaxed);
            }
            let answers = self.send(round, key, path, body).await;
            round += 1;
            let mut verdict = None;
            let mut busy = false;
            for answer in answers {
                match answer {
                    Answer::Resource(value) => {
                        if let Some(status) = judge(&value) {
                            verdict = Some(Ok(status));
                        }
                    }
                    Answer::Refused(code) => verdict = verdict.or(Some(Err(code))),
                    Answer::Again => {}
                    Answer::Busy => busy = true,
                }
            }
            if verdict.is_some() {
                return verdict;
            }
            match poll {
                Some(payment) if busy => self.poll_held(round, payment, started).await,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        None
    }

    /// Polls `payment` every 200 ms while it is `authorized`: another operation is working on
    /// its hold. Stops when the hold is gone (the next request then tells this key's fate),
    /// after [`POLL_BUSY`] (that operation may have failed and left the hold as it was), or at
    /// the intent's deadline.
    async fn poll_held(&self, round: usize, payment: &str, started: Instant) {
        let polling = Instant::now();
        while polling.elapsed() < POLL_BUSY && started.elapsed() < DEADLINE {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let urls = &self.targets.urls;
            let base = &urls[round % urls.len()];
            self.tally.requests.fetch_add(1, Ordering::Relaxed);
            let sent = self
                .http
                .get(format!("{base}{payment}"))
                .bearer_auth(&self.api_key)
                .send()
                .await;
            let status = match sent {
                Ok(response) if response.status().as_u16() == 200 => response
                    .json::<Value>()
                    .await
                    .ok()
                    .and_then(|p| p["status"].as_str().map(str::to_owned)),
                Ok(_) => None,
                Err(_) => {
                    self.tally.cut.fetch_add(1, Ordering::Relaxed);
                    None
                }
            };
            if status.is_some_and(|s| s != "authorized") {
                return;
            }
        }
    }

    /// One round: to one replica, or the same request to two at the same instant. Sent to
    /// one, the keys' first requests are spread over the replicas, and each retry goes to the
    /// next.
    async fn send(&self, round: usize, key: &str, path: &str, body: &Value) -> Vec<Answer> {
        let urls = &self.targets.urls;
        let first = &urls[round % urls.len()];
        if !self.targets.duplicate || urls.len() < 2 {
            let lane = key.bytes().map(usize::from).sum::<usize>();
            let first = &urls[(round + lane) % urls.len()];
            return vec![self.post(first, key, path, body).await];
        }
        let second = &urls[(round + 1) % urls.len()];
        let (a, b) = tokio::join!(
            self.post(first, key, path, body),
            self.post(second, key, path, body)
        );
        vec![a, b]
    }

    async fn post(&self, base: &str, key: &str, path: &str, body: &Value) -> Answer {
        self.tally.requests.fetch_add(1, Ordering::Relaxed);
        let sent = self
            .http
            .post(format!("{base}{path}"))
            .bearer_auth(&self.api_key)
            .header("Idempotency-Key", key)
            .json(body)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(_) => {
                self.tally.cut.fetch_add(1, Ordering::Relaxed);
                return Answer::Again;
            }
        };
        let status = response.status().as_u16();
        let Ok(value) = response.json::<Value>().await else {
            // The connection was cut mid-body.
            self.tally.cut.fetch_add(1, Ordering::Relaxed);
            return Answer::Again;
        };
        let code = value["code"].as_str().unwrap_or_default();
        match status {
            200 | 201 => Answer::Resource(value),
            503 => {
                self.tally.unavailable.fetch_add(1, Ordering::Relaxed);
                Answer::Again
            }
            409 if code == "idempotency_key_in_use" => Answer::Again,
            429 => Answer::Again,
            409 if code == "hold_operation_in_progress" => {
                self.tally.hold_busy.fetch_add(1, Ordering::Relaxed);
                Answer::Busy
            }
            409 if matches!(
                code,
                "refund_exceeds_payment" | "payment_not_capturable" | "payment_not_cancelable"
            ) =>
            {
                Answer::Refused(code.to_owned())
            }
            500..=599 => {
                self.tally.server_errors.fetch_add(1, Ordering::Relaxed);
                self.tally.unexpected(format!("{status} {code} on {path}"));
                Answer::Again
            }
            // Anything else is final for this key, and a failure of the run.
            _ => {
                let what = format!("{status} {code} on {path}");
                self.tally.unexpected(what.clone());
                Answer::Refused(what)
            }
        }
    }
}

/// A checkout's final status: `succeeded` or `failed`, and for a manual capture also
/// `authorized` (the money held) or `canceled`, and `canceled` where `canceled_is_final` (a
/// technical cancel); `None` while the payment is still open.
fn checkout_status(payment: &Value, manual: bool, canceled_is_final: bool) -> Option<String> {
    match payment["status"].as_str() {
        Some(status @ ("authorized" | "canceled")) if manual => Some(status.to_owned()),
        Some(status @ "canceled") if canceled_is_final => Some(status.to_owned()),
        _ => final_status(payment),
    }
}

/// `succeeded` or `failed`; `None` while the resource is still open.
fn final_status(resource: &Value) -> Option<String> {
    match resource["status"].as_str() {
        Some(status @ ("succeeded" | "failed")) => Some(status.to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canceled_ends_a_checkout_only_where_a_cancel_may_end_it() {
        let canceled = json!({"status": "canceled"});
        let authorized = json!({"status": "authorized"});
        // An automatic payment canceled where no technical cancel is made is not an answer.
        assert_eq!(checkout_status(&canceled, false, false), None);
        assert_eq!(
            checkout_status(&canceled, false, true).as_deref(),
            Some("canceled")
        );
        assert_eq!(
            checkout_status(&canceled, true, false).as_deref(),
            Some("canceled")
        );
        // A hold is a manual checkout's answer, never an automatic one's.
        assert_eq!(checkout_status(&authorized, false, true), None);
        assert_eq!(
            checkout_status(&json!({"status": "pending"}), true, true),
            None
        );
    }
}
