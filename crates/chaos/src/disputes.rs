//! The `disputes` run (#44; docs/RELIABILITY.md, "Disputes and settlement (#44)"): the kill
//! run's checkouts, one merchant on each face of the sandbox, while the sandbox disputes a
//! share of the charges (`--dispute-rate`) and a bank, played by this module, wins, loses and
//! on Adyen charges back a second time or decides a pre-arbitration; and while racers ask
//! for several refunds of one payment at the same instant, some before its dispute opened,
//! some after. `serve` is killed as in the kill run.
//!
//! A chargeback is the mirror of a double charge: refund a payment and then lose its dispute,
//! and the merchant pays it back twice. payorch's refund cap counts what disputes hold
//! (docs/guides/disputes.md, "Refunds and disputes"); the run checks, from the sandbox's ledger
//! and payorch's database once everything settled, that no charge gave back more than it took
//! unless payorch flagged the overlap (a dispute opened at the provider while refunds held
//! money, which only winning it undoes), that payorch never accepted a refund past its cap,
//! and that each dispute ends in payorch in the status the provider holds.
//!
//! The Stripe face refuses a refund of a charge its dispute holds (`charge_disputed`), as
//! Stripe does; the Adyen face books it, as Adyen does: the run's Adyen merchant is where a
//! cap that failed would show.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use payorch_sandbox::DisputeEntry;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::checks::Facts;
use crate::database::connect;
use crate::world::PROVIDER_SECRET;

/// The share of successful charges the sandbox disputes: high, so that a run of a few hundred
/// checkouts meets every move many times.
pub(crate) const DISPUTE_RATE: &str = "0.3";

/// How long after its charge a dispute opens unless `--dispute-after-ms` says otherwise: a
/// real dispute comes weeks after the charge, long after payorch learned the payment's
/// provider id, so the run's comes after every deadline of its reconciler for an unknown
/// outcome (10 s in `strict::SERVE_SETTINGS`), and soon enough for refunds to race it.
pub(crate) const DISPUTE_AFTER_MS: u64 = 20_000;

/// The sandbox's flags of a `disputes` run, its disputes opened `after_ms` after the charge.
pub(crate) fn sandbox_args(after_ms: u64) -> Vec<String> {
    vec![
        "--dispute-rate".into(),
        DISPUTE_RATE.into(),
        "--dispute-after-ms".into(),
        after_ms.to_string(),
    ]
}

/// How long a keyed request is asked again before it counts as unanswered.
const DEADLINE: Duration = Duration::from_secs(120);

/// What a keyed POST ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The resource, in a final status (`succeeded`, `failed`, or as `done` judged).
    Final(Value),
    /// A refusal final for the key: `409` and its code, or another `4xx`.
    Refused(String),
    /// No final answer before the deadline.
    Unanswered,
}

/// Counts of what the run's own requests met.
#[derive(Debug, Default)]
pub(crate) struct Met {
    pub(crate) requests: AtomicUsize,
    pub(crate) cut: AtomicUsize,
    pub(crate) server_errors: AtomicUsize,
}

/// Where the run's own keyed requests go, and what they met.
#[derive(Clone)]
pub(crate) struct Sender {
    pub(crate) http: reqwest::Client,
    /// The replicas, in turn.
    pub(crate) urls: Arc<Vec<String>>,
    pub(crate) met: Arc<Met>,
}

impl Sender {
    pub(crate) fn new(urls: Vec<String>) -> Sender {
        Sender {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(15))
                .build()
                .expect("an HTTP client"),
            urls: Arc::new(urls),
            met: Arc::default(),
        }
    }

    /// POSTs `body` to `path` under `key`, to the replicas in turn, asking again after a
    /// cut connection, a `5xx`, a key in flight, a `429` or an answer `done` does not find
    /// final, as the run's clients do (`clients`).
    pub(crate) async fn post(
        &self,
        api_key: &str,
        key: &str,
        path: &str,
        body: &Value,
        done: impl Fn(&Value) -> bool,
    ) -> Ended {
        keyed_post(self, api_key, key, path, body, done).await
    }
}

async fn keyed_post(
    sender: &Sender,
    api_key: &str,
    key: &str,
    path: &str,
    body: &Value,
    done: impl Fn(&Value) -> bool,
) -> Ended {
    let Sender { http, urls, met } = sender;
    let started = Instant::now();
    let mut round = 0usize;
    while started.elapsed() < DEADLINE {
        if round > 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let base = &urls[round % urls.len()];
        round += 1;
        met.requests.fetch_add(1, Ordering::Relaxed);
        let sent = http
            .post(format!("{base}{path}"))
            .bearer_auth(api_key)
            .header("Idempotency-Key", key)
            .json(body)
            .send()
            .await;
        let Ok(response) = sent else {
            met.cut.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let status = response.status().as_u16();
        let Ok(value) = response.json::<Value>().await else {
            met.cut.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let code = value["code"].as_str().unwrap_or_default().to_owned();
        match status {
            200 | 201 if done(&value) => return Ended::Final(value),
            200 | 201 | 503 | 429 => {}
            409 if code == "idempotency_key_in_use" || code == "hold_operation_in_progress" => {}
            500..=599 => {
                met.server_errors.fetch_add(1, Ordering::Relaxed);
            }
            _ => return Ended::Refused(format!("{status} {code}")),
        }
    }
    Ended::Unanswered
}

/// `succeeded` or `failed`: a refund's or operation's final status.
pub(crate) fn is_final(resource: &Value) -> bool {
    matches!(resource["status"].as_str(), Some("succeeded" | "failed"))
}

/// What the bank decides for a dispute, drawn from its id so that a run's share of each is
/// steady: most are won or lost, some left waiting for an answer (holding the money), and on
/// Adyen some won are charged back again and some lost are won at pre-arbitration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    Open,
    Win,
    Lose,
    WinThenSecondChargeback,
    LoseThenPrearbitrationWon,
}

pub(crate) fn fate(dispute: &str, adyen: bool) -> Fate {
    let draw = dispute
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b.into()))
        % 10;
    match (draw, adyen) {
        (0..=1, _) => Fate::Open,
        (2..=4, _) => Fate::Win,
        (5..=7, _) => Fate::Lose,
        (8, true) => Fate::WinThenSecondChargeback,
        (9, true) => Fate::LoseThenPrearbitrationWon,
        (8, false) => Fate::Win,
        _ => Fate::Lose,
    }
}

/// The bank's next move on `dispute` (the knob's word), if any.
pub(crate) fn next_move(dispute: &DisputeEntry) -> Option<&'static str> {
    let status = dispute.status.word();
    let stage = dispute.stage.word();
    match (fate(&dispute.id, dispute.is_adyen()), status, stage) {
        (Fate::Open, _, _) => None,
        (Fate::Win | Fate::WinThenSecondChargeback, "needs_response", _) => Some("win"),
        (Fate::Lose | Fate::LoseThenPrearbitrationWon, "needs_response", _) => Some("lose"),
        (Fate::WinThenSecondChargeback, "won", "chargeback") => Some("second_chargeback"),
        (Fate::LoseThenPrearbitrationWon, "lost", "chargeback") => Some("prearbitration_won"),
        _ => None,
    }
}

/// The bank and the racers, while the clients run.
pub(crate) struct Disputing {
    stop_bank: Arc<AtomicBool>,
    stop_racers: Arc<AtomicBool>,
    bank: JoinHandle<BTreeMap<String, usize>>,
    racers: JoinHandle<Raced>,
    pub(crate) met: Arc<Met>,
}

/// What the racers asked and were told.
#[derive(Debug, Default, Clone)]
pub(crate) struct Raced {
    /// Payments raced for.
    pub(crate) payments: usize,
    /// Their refunds by final answer (`succeeded`, `failed`, a refusal's status and code,
    /// `unanswered`).
    pub(crate) outcomes: BTreeMap<String, usize>,
}

impl Raced {
    pub(crate) fn asked(&self) -> usize {
        self.outcomes.values().sum()
    }

    pub(crate) fn count(&self, outcome: &str) -> usize {
        self.outcomes.get(outcome).copied().unwrap_or(0)
    }
}

/// The refunds one raced payment asks at the same instant, as shares of its amount in
/// tenths: two of 60 % (one at most fits) and one of all of it.
const RACE: [i64; 3] = [6, 6, 10];

/// Starts the bank (moves each open dispute as its fate says, a second at least after its last
/// move) and the racers (one succeeded payment in three gets [`RACE`]'s refunds at once, a
/// random time after it is seen of up to one and a half times `after_ms`, so that about a
/// third race a chargeback already open), for `merchants` (payorch's merchant id, its API key).
pub(crate) fn start(
    urls: Vec<String>,
    merchants: HashMap<String, String>,
    database_url: String,
    sandbox_url: String,
    after_ms: u64,
) -> Disputing {
    let stop_bank = Arc::new(AtomicBool::new(false));
    let stop_racers = Arc::new(AtomicBool::new(false));
    let sender = Sender::new(urls);
    let met = sender.met.clone();
    let bank = tokio::spawn(bank(sandbox_url, stop_bank.clone()));
    let wait = Duration::from_millis(after_ms.max(1) * 3 / 2);
    let racers = tokio::spawn(racers(
        sender,
        merchants,
        database_url,
        stop_racers.clone(),
        wait,
    ));
    Disputing {
        stop_bank,
        stop_racers,
        bank,
        racers,
        met,
    }
}

impl Disputing {
    /// Stops the racers from taking new payments and waits for every raced refund's answer,
    /// then stops the bank: the bank's moves by word, and what the racers were told.
    pub(crate) async fn finish(self) -> Result<(BTreeMap<String, usize>, Raced), String> {
        self.stop_racers.store(true, Ordering::Relaxed);
        let raced = self.racers.await.map_err(|e| e.to_string())?;
        self.stop_bank.store(true, Ordering::Relaxed);
        let moves = self.bank.await.map_err(|e| e.to_string())?;
        Ok((moves, raced))
    }
}

pub(crate) async fn bank(sandbox_url: String, stop: Arc<AtomicBool>) -> BTreeMap<String, usize> {
    let http = reqwest::Client::new();
    let mut moves = BTreeMap::new();
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Ok(disputes) = sandbox_disputes(&http, &sandbox_url).await else {
            continue;
        };
        let now = chrono::Utc::now().timestamp();
        for dispute in disputes {
            let last = dispute.transitions.last().map_or(dispute.created, |t| t.at);
            let Some(word) = next_move(&dispute).filter(|_| now - last >= 1) else {
                continue;
            };
            let moved = http
                .post(format!("{sandbox_url}/__sandbox/disputes"))
                .bearer_auth(PROVIDER_SECRET)
                .json(&json!({"dispute": dispute.id, "action": word}))
                .send()
                .await;
            if moved.is_ok_and(|r| r.status().is_success()) {
                *moves.entry(word.to_owned()).or_default() += 1;
            }
        }
    }
    moves
}

/// Every dispute the sandbox keeps.
pub(crate) async fn sandbox_disputes(
    http: &reqwest::Client,
    sandbox_url: &str,
) -> Result<Vec<DisputeEntry>, String> {
    let listed: Value = http
        .get(format!("{sandbox_url}/__sandbox/disputes"))
        .bearer_auth(PROVIDER_SECRET)
        .send()
        .await
        .map_err(|e| format!("the sandbox's disputes: {e}"))?
        .json()
        .await
        .map_err(|e| format!("the sandbox's disputes: {e}"))?;
    serde_json::from_value(listed["data"].clone())
        .map_err(|e| format!("the sandbox's disputes: {e}"))
}

async fn racers(
    sender: Sender,
    merchants: HashMap<String, String>,
    database_url: String,
    stop: Arc<AtomicBool>,
    wait: Duration,
) -> Raced {
    let mut seen = BTreeSet::new();
    let mut races: Vec<JoinHandle<Vec<String>>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        // The database may be between two connections of a killed serve: nothing lost, the
        // next look finds the same payments.
        let Ok(paid) = succeeded_payments(&database_url).await else {
            continue;
        };
        for (merchant, payment, amount) in paid {
            if !seen.insert(payment.clone()) || !raced(&payment) {
                continue;
            }
            let Some(api_key) = merchants.get(&merchant).cloned() else {
                continue;
            };
            let sender = sender.clone();
            races.push(tokio::spawn(async move {
                tokio::time::sleep(wait.mul_f64(rand::random_range(0.0..1.0))).await;
                // Each refund its own task, all started at once: they race in payorch.
                let refunds: Vec<JoinHandle<String>> = RACE
                    .iter()
                    .enumerate()
                    .map(|(n, tenths)| {
                        let (sender, api_key) = (sender.clone(), api_key.clone());
                        let key = format!("race-{payment}-{n}");
                        let path = format!("/v1/payments/{payment}/refunds");
                        let body = json!({ "amount": amount * tenths / 10 });
                        tokio::spawn(async move {
                            let ended = sender.post(&api_key, &key, &path, &body, is_final).await;
                            match ended {
                                Ended::Final(refund) => {
                                    refund["status"].as_str().unwrap_or_default().to_owned()
                                }
                                Ended::Refused(why) => why,
                                Ended::Unanswered => "unanswered".to_owned(),
                            }
                        })
                    })
                    .collect();
                let mut told = Vec::new();
                for refund in refunds {
                    told.push(refund.await.unwrap_or_else(|_| "unanswered".to_owned()));
                }
                told
            }));
        }
    }
    let mut raced = Raced {
        payments: races.len(),
        ..Raced::default()
    };
    for race in races {
        for outcome in race.await.unwrap_or_default() {
            *raced.outcomes.entry(outcome).or_default() += 1;
        }
    }
    raced
}

/// One succeeded payment in three is raced for, by its id.
fn raced(payment: &str) -> bool {
    payment.bytes().map(u64::from).sum::<u64>() % 3 == 0
}

/// Every payment taken at once (not a hold) that succeeded: (merchant id, `pay_…`, amount).
async fn succeeded_payments(database_url: &str) -> Result<Vec<(String, String, i64)>, String> {
    let db = connect(database_url).await?;
    let rows = db
        .query(
            "SELECT 'mer_' || replace(merchant_id::text, '-', ''),
                    'pay_' || replace(id::text, '-', ''), amount::bigint
               FROM payment_attempts
              WHERE status = 'succeeded' AND capture_method = 'automatic'",
            &[],
        )
        .await
        .map_err(|e| format!("reading the database: {e}"))?;
    Ok(rows
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect())
}

/// A dispute as payorch's database holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ours {
    pub(crate) provider_dispute_id: String,
    pub(crate) provider_payment_id: String,
    /// `pay_…`.
    pub(crate) attempt_id: String,
    pub(crate) status: String,
    pub(crate) stage: String,
    pub(crate) amount: i64,
    pub(crate) overlap: i64,
}

/// Whether a dispute in `status` holds its amount (the payer has it back).
pub(crate) fn holds(status: &str) -> bool {
    matches!(status, "needs_response" | "under_review" | "lost")
}

pub(crate) async fn ours(database_url: &str) -> Result<Vec<Ours>, String> {
    let db = connect(database_url).await?;
    let rows = db
        .query(
            "SELECT provider_dispute_id, provider_payment_id,
                    'pay_' || replace(attempt_id::text, '-', ''), status::text, stage::text,
                    amount::bigint, overlap::bigint
               FROM disputes",
            &[],
        )
        .await
        .map_err(|e| format!("reading payorch's disputes: {e}"))?;
    Ok(rows
        .iter()
        .map(|row| Ours {
            provider_dispute_id: row.get(0),
            provider_payment_id: row.get(1),
            attempt_id: row.get(2),
            status: row.get(3),
            stage: row.get(4),
            amount: row.get(5),
            overlap: row.get(6),
        })
        .collect())
}

/// The sandbox's disputes that payorch does not hold in the same status and stage.
pub(crate) fn disagreeing(theirs: &[DisputeEntry], ours: &[Ours]) -> usize {
    disagreements(theirs, ours).len()
}

/// Each of the sandbox's disputes payorch does not hold as it does, in words.
pub(crate) fn disagreements(theirs: &[DisputeEntry], ours: &[Ours]) -> Vec<String> {
    let ours: HashMap<&str, &Ours> = ours
        .iter()
        .map(|d| (d.provider_dispute_id.as_str(), d))
        .collect();
    theirs
        .iter()
        .filter_map(|d| {
            let held = ours.get(d.id.as_str());
            let agree =
                held.is_some_and(|o| o.status == d.status.word() && o.stage == d.stage.word());
            (!agree).then(|| {
                format!(
                    "{} {} of {}: {} at {}, payorch {}",
                    d.protocol,
                    d.id,
                    d.payment_intent,
                    d.status.word(),
                    d.stage.word(),
                    held.map_or("has none".to_owned(), |o| format!(
                        "{} at {}",
                        o.status, o.stage
                    )),
                )
            })
        })
        .collect()
}

/// Waits until every dispute of the sandbox is in payorch in its status (webhooks and
/// notifications are resent until answered); how long it took, or `None` past `limit`.
pub(crate) async fn agree(
    database_url: &str,
    sandbox_url: &str,
    limit: Duration,
) -> Option<Duration> {
    let http = reqwest::Client::new();
    let started = Instant::now();
    while started.elapsed() < limit {
        if let (Ok(theirs), Ok(ours)) = (
            sandbox_disputes(&http, sandbox_url).await,
            ours(database_url).await,
        ) {
            if disagreeing(&theirs, &ours) == 0 {
                return Some(started.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// What must be zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DisputeFindings {
    /// Charges that gave the payer back more than they took — refunds the provider booked and
    /// the money its disputes hold — past what payorch flagged as overlap.
    pub(crate) money_returned_twice: usize,
    /// Payments whose refunds payorch holds as not failed, with the money their disputes hold,
    /// are past what they took and what payorch flagged: a refund accepted past the cap.
    pub(crate) refunds_past_the_cap: usize,
    /// The sandbox's disputes payorch does not hold, or holds in another status or stage.
    pub(crate) disputes_disagreeing: usize,
}

impl DisputeFindings {
    pub(crate) fn total(&self) -> usize {
        self.money_returned_twice + self.refunds_past_the_cap + self.disputes_disagreeing
    }
}

/// What the run counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DisputeFigures {
    pub(crate) disputes: usize,
    /// The sandbox's disputes by final status and stage (`lost at second_chargeback`).
    pub(crate) ended: BTreeMap<String, usize>,
    /// Charges that gave back more than they took, each covered by payorch's flag: the
    /// provider's doing (a dispute opened on money already refunded), told to the merchant.
    pub(crate) flagged_returned_twice: usize,
    /// payorch's disputes flagged with an overlap.
    pub(crate) flagged: usize,
    /// The first few disputes payorch does not hold as the provider does, in words.
    pub(crate) disagreements: Vec<String>,
}

/// The checks, from the facts of the kill run (`checks::gather`), the sandbox's disputes and
/// payorch's.
pub(crate) fn judge(
    facts: &Facts,
    theirs: &[DisputeEntry],
    ours: &[Ours],
) -> (DisputeFindings, DisputeFigures) {
    let mut found = DisputeFindings {
        disputes_disagreeing: disagreeing(theirs, ours),
        ..DisputeFindings::default()
    };
    let mut figures = DisputeFigures {
        disagreements: disagreements(theirs, ours).into_iter().take(5).collect(),
        disputes: theirs.len(),
        flagged: ours.iter().filter(|d| d.overlap > 0).count(),
        ..DisputeFigures::default()
    };
    for dispute in theirs {
        *figures
            .ended
            .entry(format!(
                "{} at {}",
                dispute.status.word(),
                dispute.stage.word()
            ))
            .or_default() += 1;
    }
    // What payorch flagged, by the provider's payment and by its own.
    let mut flagged_at: HashMap<&str, i64> = HashMap::new();
    let mut flagged_of: HashMap<&str, i64> = HashMap::new();
    let mut held_of: HashMap<&str, i64> = HashMap::new();
    for dispute in ours {
        *flagged_at.entry(&dispute.provider_payment_id).or_default() += dispute.overlap;
        *flagged_of.entry(&dispute.attempt_id).or_default() += dispute.overlap;
        if holds(&dispute.status) {
            *held_of.entry(&dispute.attempt_id).or_default() += dispute.amount;
        }
    }

    // The provider's side: each charge's refunds booked and the money its disputes hold.
    let mut taken: HashMap<&str, i64> = facts
        .charges
        .iter()
        .filter(|c| c.is_charged())
        .map(|c| (c.provider_id.as_str(), c.amount))
        .collect();
    for hold in &facts.holds {
        if let Some(amount) = taken.get_mut(hold.provider_id.as_str()) {
            *amount = hold.captured;
        }
    }
    let mut returned: HashMap<&str, i64> = HashMap::new();
    for refund in facts.ledger_refunds.iter().filter(|r| r.is_refunded()) {
        *returned.entry(&refund.payment_intent).or_default() += refund.amount;
    }
    for dispute in theirs.iter().filter(|d| d.status.holds_money()) {
        *returned.entry(&dispute.payment_intent).or_default() += dispute.amount;
    }
    for (charge, back) in &returned {
        let excess = back - taken.get(charge).copied().unwrap_or(0);
        if excess <= 0 {
            continue;
        }
        if excess <= flagged_at.get(charge).copied().unwrap_or(0) {
            figures.flagged_returned_twice += 1;
        } else {
            found.money_returned_twice += 1;
        }
    }

    // payorch's side: its refunds not failed and what its disputes hold, against the cap.
    let mut refunded: HashMap<&str, i64> = HashMap::new();
    for refund in facts.refunds.iter().filter(|r| r.status != "failed") {
        *refunded.entry(&refund.payment_id).or_default() += refund.amount;
    }
    for attempt in &facts.attempts {
        let back = refunded.get(attempt.id.as_str()).copied().unwrap_or(0)
            + held_of.get(attempt.id.as_str()).copied().unwrap_or(0);
        let flagged = flagged_of.get(attempt.id.as_str()).copied().unwrap_or(0);
        if back > attempt.taken() + flagged {
            found.refunds_past_the_cap += 1;
        }
    }
    (found, figures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{Attempt, Refund};
    use payorch_sandbox::{DisputeStage, DisputeStatus, LedgerEntry, RefundEntry};

    fn charge(pi: &str, amount: i64) -> LedgerEntry {
        serde_json::from_value(json!({
            "protocol": "adyen", "provider_id": pi, "idempotency_key": null,
            "attempt_id": format!("pay_{pi}"), "order_id": null, "merchant_id": null,
            "amount": amount, "currency": "usd", "payment_method": "pm_card_visa",
            "status": "succeeded", "created": 1
        }))
        .expect("a ledger entry")
    }

    fn booked_refund(pi: &str, amount: i64) -> RefundEntry {
        serde_json::from_value(json!({
            "protocol": "adyen", "provider_id": format!("re_{amount}"), "payment_intent": pi,
            "idempotency_key": null, "refund_id": null, "amount": amount, "currency": "usd",
            "status": "succeeded", "created": 1
        }))
        .expect("a refund entry")
    }

    fn theirs(id: &str, pi: &str, status: DisputeStatus, amount: i64) -> DisputeEntry {
        DisputeEntry {
            protocol: "adyen".into(),
            id: id.into(),
            payment_intent: pi.into(),
            charge: "ch".into(),
            attempt_id: Some(format!("pay_{pi}")),
            merchant_account: None,
            amount,
            currency: "usd".into(),
            reason: "fraudulent".into(),
            reason_code: None,
            status,
            stage: DisputeStage::Chargeback,
            created: 1,
            evidence_due_by: 2,
            evidence: BTreeMap::new(),
            submission_count: 0,
            transitions: Vec::new(),
            money: Vec::new(),
        }
    }

    fn ours_of(d: &DisputeEntry, overlap: i64) -> Ours {
        Ours {
            provider_dispute_id: d.id.clone(),
            provider_payment_id: d.payment_intent.clone(),
            attempt_id: format!("pay_{}", d.payment_intent),
            status: d.status.word().into(),
            stage: d.stage.word().into(),
            amount: d.amount,
            overlap,
        }
    }

    fn facts(refunds: &[(&str, i64, &str)]) -> Facts {
        Facts {
            attempts: ["p1", "p2"]
                .iter()
                .map(|pi| Attempt {
                    id: format!("pay_{pi}"),
                    order_id: format!("ord_{pi}"),
                    key: None,
                    status: "succeeded".into(),
                    amount: 1000,
                    provider_payment_id: Some((*pi).into()),
                    capture_method: "automatic".into(),
                    amount_captured: None,
                })
                .collect(),
            refunds: refunds
                .iter()
                .map(|(pi, amount, status)| Refund {
                    id: format!("re_{pi}_{amount}"),
                    payment_id: format!("pay_{pi}"),
                    status: (*status).into(),
                    amount: *amount,
                    provider_refund_id: None,
                    provider: "adyen".into(),
                })
                .collect(),
            charges: vec![charge("p1", 1000), charge("p2", 1000)],
            ledger_refunds: refunds
                .iter()
                .filter(|(_, _, status)| *status == "succeeded")
                .map(|(pi, amount, _)| booked_refund(pi, *amount))
                .collect(),
            ..Facts::default()
        }
    }

    #[test]
    fn a_refund_before_a_chargeback_flagged_is_counted_apart_not_found() {
        let lost = theirs("d1", "p1", DisputeStatus::Lost, 1000);
        let (found, figures) = judge(
            &facts(&[("p1", 600, "succeeded")]),
            std::slice::from_ref(&lost),
            &[ours_of(&lost, 600)],
        );
        assert_eq!(found, DisputeFindings::default());
        assert_eq!(figures.flagged_returned_twice, 1);
        assert_eq!(figures.ended["lost at chargeback"], 1);
    }

    #[test]
    fn money_returned_twice_unflagged_is_found_on_both_sides() {
        let lost = theirs("d1", "p1", DisputeStatus::Lost, 1000);
        let (found, _) = judge(
            &facts(&[("p1", 600, "succeeded")]),
            std::slice::from_ref(&lost),
            &[ours_of(&lost, 0)],
        );
        assert_eq!(found.money_returned_twice, 1);
        assert_eq!(found.refunds_past_the_cap, 1);
        // Flagged for less than went back twice: a refund accepted after the flag.
        let (found, _) = judge(
            &facts(&[("p1", 600, "succeeded"), ("p1", 300, "succeeded")]),
            std::slice::from_ref(&lost),
            &[ours_of(&lost, 600)],
        );
        assert_eq!(
            (found.money_returned_twice, found.refunds_past_the_cap),
            (1, 1)
        );
    }

    #[test]
    fn a_won_dispute_gives_the_cap_back_and_a_failed_refund_takes_nothing() {
        let won = theirs("d1", "p1", DisputeStatus::Won, 1000);
        let open = theirs("d2", "p2", DisputeStatus::NeedsResponse, 1000);
        let (found, figures) = judge(
            &facts(&[("p1", 1000, "succeeded"), ("p2", 600, "failed")]),
            &[won.clone(), open.clone()],
            &[ours_of(&won, 0), ours_of(&open, 0)],
        );
        assert_eq!(found, DisputeFindings::default());
        assert_eq!(figures.flagged_returned_twice, 0);
    }

    #[test]
    fn a_dispute_payorch_lacks_or_holds_in_another_status_disagrees() {
        let won = theirs("d1", "p1", DisputeStatus::Won, 1000);
        let lost = theirs("d2", "p2", DisputeStatus::Lost, 1000);
        let mut stale = ours_of(&won, 0);
        stale.status = "needs_response".into();
        assert_eq!(disagreeing(&[won.clone(), lost], &[stale]), 2);
        assert_eq!(
            disagreeing(std::slice::from_ref(&won), &[ours_of(&won, 0)]),
            0
        );
    }

    #[test]
    fn the_bank_moves_each_dispute_as_its_fate_says_and_second_chargebacks_only_on_adyen() {
        let mut seen = BTreeSet::new();
        for n in 0..200 {
            let id = format!("du_{n}");
            seen.insert(format!("{:?}", fate(&id, true)));
            assert!(!matches!(
                fate(&id, false),
                Fate::WinThenSecondChargeback | Fate::LoseThenPrearbitrationWon
            ));
        }
        assert_eq!(seen.len(), 5, "{seen:?}");
        let mut dispute = theirs("x", "p1", DisputeStatus::NeedsResponse, 1);
        dispute.id = (0..200)
            .map(|n| format!("du_{n}"))
            .find(|id| fate(id, true) == Fate::WinThenSecondChargeback)
            .expect("one");
        assert_eq!(next_move(&dispute), Some("win"));
        dispute.status = DisputeStatus::Won;
        assert_eq!(next_move(&dispute), Some("second_chargeback"));
        dispute.status = DisputeStatus::Lost;
        dispute.stage = DisputeStage::SecondChargeback;
        assert_eq!(next_move(&dispute), None);
    }
}
