//! The `settlement` run (#44; docs/RELIABILITY.md, "Disputes and settlement (#44)"): the
//! settlement reconciliation (docs/operations/reconciliation.md) proven both ways. A merchant
//! on each face of the sandbox makes checkouts — taken at once, held and captured in whole or
//! in part, voided, refunded in part or in full — while the sandbox disputes a share of the
//! charges and the bank of the `disputes` run wins and loses them. Once everything settled and
//! `serve`'s rounds compared the whole load, no finding may exist. Then one of each
//! difference is planted in each provider's record (`POST /__sandbox/settlement/forget` and
//! `/invent`): a charge payorch never made, a second charge of one payment, a charge booked
//! for another amount, a capture never booked, a refund payorch holds succeeded that the
//! provider never booked, a refund payorch never asked for, and dispute money no dispute
//! explains. Each must be found, on its payment, and nothing else.
//!
//! The run is clean on purpose: no kills and no faulty payment methods, so that a finding
//! on the load can only be a difference the comparison invented.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::database::connect;
use crate::disputes::{self, Ended, Sender};
use crate::world::{World, PROVIDER_SECRET};
use crate::Run;

/// The share of charges the sandbox disputes in this run: enough for a few hundred disputes
/// in 10,000 checkouts, each withdrawal (and a won one's reinstatement) in the record.
pub(crate) const DISPUTE_RATE: &str = "0.05";

/// How long after it was booked or finished an entry is compared (`--settlement-grace-secs`):
/// the run has no faults, so its answers are known at once; Adyen's captures are told by
/// notification within a second or two.
pub(crate) const GRACE_SECS: u64 = 10;

/// How often `serve` compares (`--settlement-interval-secs`), and how often the Adyen face's
/// settlement batches close.
pub(crate) const EVERY_SECS: u64 = 2;

/// How long after its charge a dispute opens: the run has no faults, so payorch knows every
/// payment's provider id when its answer comes, and a short wait keeps the run short.
pub(crate) const DISPUTE_AFTER_MS: u64 = 300;

pub(crate) fn sandbox_args() -> Vec<String> {
    vec![
        "--dispute-rate".into(),
        DISPUTE_RATE.into(),
        "--dispute-after-ms".into(),
        DISPUTE_AFTER_MS.to_string(),
    ]
}

pub(crate) fn serve_args() -> Vec<String> {
    vec![
        "--settlement-interval-secs".into(),
        EVERY_SECS.to_string(),
        "--settlement-grace-secs".into(),
        GRACE_SECS.to_string(),
        // The Adyen face's batches close every EVERY_SECS and hold what was made before.
        "--settlement-adyen-grace-secs".into(),
        GRACE_SECS.to_string(),
    ]
}

/// What checkout `i` does: its share of ten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checkout {
    Paid,
    RefundedInPart,
    RefundedInFull,
    CapturedInFull,
    CapturedInPart,
    Voided,
}

pub(crate) fn checkout(i: usize) -> Checkout {
    match i % 10 {
        0..=3 => Checkout::Paid,
        4 => Checkout::RefundedInPart,
        5 => Checkout::RefundedInFull,
        6 | 7 => Checkout::CapturedInFull,
        8 => Checkout::CapturedInPart,
        _ => Checkout::Voided,
    }
}

/// One of each difference, as planted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Plant {
    /// A charge payorch never made.
    UnknownCharge,
    /// A second charge entry of one payment.
    CapturedTwice,
    /// The payment's one charge entry, for another amount.
    AmountMismatch,
    /// A capture payorch holds succeeded, never booked.
    ChargeNotBooked,
    /// A refund payorch holds succeeded, never booked.
    RefundNotBooked,
    /// A refund payorch never asked for.
    UnknownRefund,
    /// Dispute money with no dispute.
    UnexplainedDispute,
}

impl Plant {
    pub(crate) const ALL: [Plant; 7] = [
        Plant::UnknownCharge,
        Plant::CapturedTwice,
        Plant::AmountMismatch,
        Plant::ChargeNotBooked,
        Plant::RefundNotBooked,
        Plant::UnknownRefund,
        Plant::UnexplainedDispute,
    ];

    /// The finding's kind (`settlement_finding_kind`).
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Plant::UnknownCharge => "unknown_charge",
            Plant::CapturedTwice => "captured_twice",
            Plant::AmountMismatch => "amount_mismatch",
            Plant::ChargeNotBooked => "charge_not_booked",
            Plant::RefundNotBooked => "refund_not_booked",
            Plant::UnknownRefund => "unknown_refund",
            Plant::UnexplainedDispute => "unexplained_dispute",
        }
    }
}

/// A finding as payorch recorded it: (provider, kind, the provider's payment).
pub(crate) type Finding = (String, String, Option<String>);

/// The planted differences found, missed, and the findings nothing planted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Proof {
    pub(crate) found: usize,
    pub(crate) missed: Vec<Finding>,
    pub(crate) extra: Vec<Finding>,
}

/// Each planted difference must be among `findings` on its payment, and every finding one
/// planted.
pub(crate) fn prove(planted: &[Finding], findings: &[Finding]) -> Proof {
    let planted: BTreeSet<&Finding> = planted.iter().collect();
    let findings: BTreeSet<&Finding> = findings.iter().collect();
    Proof {
        found: planted.intersection(&findings).count(),
        missed: planted
            .difference(&findings)
            .map(|f| (*f).clone())
            .collect(),
        extra: findings
            .difference(&planted)
            .map(|f| (*f).clone())
            .collect(),
    }
}

/// The run's merchants, by protocol: (`stripe`|`adyen`, API key).
fn merchants(world: &World) -> Vec<(&'static str, String)> {
    world
        .merchants
        .iter()
        .map(|m| (m.protocol.name(), m.api_key.clone()))
        .collect()
}

/// The load, the clean comparison, the planted differences and their finding.
pub(crate) async fn exercise(intents: usize, clients: usize, world: &World) -> Result<Run, String> {
    let sandbox = Control::new(&world.sandbox_url);
    // Adyen's batches close every few seconds, as the rounds run, rather than every minute.
    sandbox
        .post(
            "/__sandbox/settlement/close",
            &json!({ "every_secs": EVERY_SECS }),
        )
        .await?;
    let sender = Sender::new(world.replicas.iter().map(|r| r.url.clone()).collect());
    let merchants = merchants(world);
    let stop_bank = Arc::new(AtomicBool::new(false));
    let bank = tokio::spawn(disputes::bank(world.sandbox_url.clone(), stop_bank.clone()));

    let started = Instant::now();
    let outcomes = load(&sender, &merchants, intents, clients).await;
    let load_secs = started.elapsed().as_secs_f64();
    let settled = crate::settle(&world.database_url, Duration::from_secs(300), None).await;
    stop_bank.store(true, Ordering::Relaxed);
    let moves = bank.await.map_err(|e| e.to_string())?;
    let agreed = disputes::agree(
        &world.database_url,
        &world.sandbox_url,
        Duration::from_secs(120),
    )
    .await;

    // The clean comparison: every round past the load's end, nothing found.
    let clean_started = Instant::now();
    let compared = compared_through_now(world, &sandbox).await?;
    let clean_secs = clean_started.elapsed().as_secs_f64();
    let clean = findings(&world.database_url).await?;
    let entries = entries(&world.database_url).await?;

    // The plants, then the rounds past them.
    let planted = plant(&sender, &sandbox, &merchants, &world.database_url).await?;
    let plant_started = Instant::now();
    let compared_planted = compared_through_now(world, &sandbox).await?;
    let find_secs = plant_started.elapsed().as_secs_f64();
    let all = findings(&world.database_url).await?;
    let after: Vec<Finding> = all.iter().filter(|f| !clean.contains(f)).cloned().collect();
    let proof = prove(&planted, &after);
    let server_errors = sender.met.server_errors.load(Ordering::Relaxed);
    let unanswered = outcomes.get("unanswered").copied().unwrap_or(0);

    let good = clean.is_empty()
        && proof.missed.is_empty()
        && proof.extra.is_empty()
        && proof.found == Plant::ALL.len() * merchants.len()
        && settled.is_some()
        && agreed.is_some()
        && compared
        && compared_planted
        && server_errors == 0
        && unanswered == 0;
    let mut out = String::new();
    let secs = |d: Option<Duration>| d.map_or("-".into(), |d| format!("{:.1} s", d.as_secs_f64()));
    let row: Vec<(&str, String)> = vec![
        ("scenario", "Settlement".into()),
        ("checkouts", intents.to_string()),
        ("clients", clients.to_string()),
        (
            "entries compared",
            entries.values().sum::<i64>().to_string(),
        ),
        (
            "disputes",
            disputes::sandbox_disputes(&reqwest::Client::new(), &world.sandbox_url)
                .await
                .map_or("-".into(), |d| d.len().to_string()),
        ),
        ("findings on the clean run", clean.len().to_string()),
        ("planted", planted.len().to_string()),
        ("found", proof.found.to_string()),
        ("missed", proof.missed.len().to_string()),
        ("found besides", proof.extra.len().to_string()),
        ("500s", server_errors.to_string()),
        ("load", format!("{load_secs:.0} s")),
        ("clean comparison", format!("{clean_secs:.1} s")),
        ("planted found in", format!("{find_secs:.1} s")),
    ];
    let _ = writeln!(
        out,
        "| {} |",
        row.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(out, "|{}", "---|".repeat(row.len()));
    let _ = writeln!(
        out,
        "| {} |",
        row.iter()
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "checkouts by what was asked and its final answer: {outcomes:?}"
    );
    let _ = writeln!(
        out,
        "the bank's moves: {moves:?}; the reconcilers settled in {}, payorch held every dispute as the provider does {} later",
        secs(settled),
        secs(agreed)
    );
    let _ = writeln!(
        out,
        "entries payorch read, by provider and kind: {entries:?}; serve compares every {EVERY_SECS} s with a grace of {GRACE_SECS} s"
    );
    let _ = writeln!(out, "findings on the clean run (must be none): {clean:?}");
    let _ = writeln!(out, "planted: {planted:?}");
    let _ = writeln!(out, "missed (must be none): {:?}", proof.missed);
    let _ = writeln!(
        out,
        "found besides the planted (must be none): {:?}",
        proof.extra
    );
    if !compared || !compared_planted {
        let _ = writeln!(
            out,
            "the rounds did not compare past the load or the plants within the limit"
        );
    }
    Ok(Run { good, report: out })
}

/// The load: `intents` checkouts on `clients` at once, each merchant in turn; each final
/// answer counted by what was asked (`captured in part succeeded`, `refunded in full 409
/// refund_exceeds_payment`, …).
async fn load(
    sender: &Sender,
    merchants: &[(&'static str, String)],
    intents: usize,
    clients: usize,
) -> BTreeMap<String, usize> {
    let next = Arc::new(AtomicUsize::new(0));
    let outcomes = Arc::new(Mutex::new(BTreeMap::<String, usize>::new()));
    let run_id = format!("{:x}", chrono::Utc::now().timestamp_millis());
    let mut workers = Vec::new();
    for _ in 0..clients.max(1) {
        let (sender, next, outcomes, run_id) = (
            sender.clone(),
            next.clone(),
            outcomes.clone(),
            run_id.clone(),
        );
        let merchants = merchants.to_vec();
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= intents {
                    break;
                }
                let (_, api_key) = &merchants[i % merchants.len()];
                let told = one(&sender, api_key, &format!("settle-{run_id}-{i}"), i).await;
                *outcomes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(told)
                    .or_default() += 1;
            }
        }));
    }
    for worker in workers {
        let _ = worker.await;
    }
    let outcomes = outcomes.lock().unwrap_or_else(|p| p.into_inner()).clone();
    outcomes
}

/// Checkout `i` and what follows it; its outcome in words.
async fn one(sender: &Sender, api_key: &str, key: &str, i: usize) -> String {
    let what = checkout(i);
    let amount = 1000 + (i % 997) as i64;
    let manual = matches!(
        what,
        Checkout::CapturedInFull | Checkout::CapturedInPart | Checkout::Voided
    );
    let Some(payment) = pay(sender, api_key, key, amount, manual).await else {
        return "checkout unanswered".into();
    };
    let id = payment["id"].as_str().unwrap_or_default().to_owned();
    let status = payment["status"].as_str().unwrap_or_default();
    let then = match what {
        Checkout::Paid => return format!("paid {status}"),
        _ if status != "succeeded" && status != "authorized" => {
            return format!("{what:?} checkout {status}")
        }
        Checkout::RefundedInPart => refund(sender, api_key, key, &id, amount / 3).await,
        Checkout::RefundedInFull => refund(sender, api_key, key, &id, amount).await,
        Checkout::CapturedInFull => operate(sender, api_key, key, &id, "capture", None).await,
        Checkout::CapturedInPart => {
            operate(sender, api_key, key, &id, "capture", Some(amount * 2 / 3)).await
        }
        Checkout::Voided => operate(sender, api_key, key, &id, "cancel", None).await,
    };
    format!("{what:?} {then}")
}

/// A checkout of `amount` with a card that pays, held with `manual`; the payment once final.
async fn pay(
    sender: &Sender,
    api_key: &str,
    key: &str,
    amount: i64,
    manual: bool,
) -> Option<Value> {
    let mut body = json!({"amount": amount, "currency": "usd", "payment_method": "pm_card_visa"});
    if manual {
        body["capture_method"] = json!("manual");
    }
    let done = |answer: &Value| {
        matches!(
            answer["payment"]["status"].as_str(),
            Some("succeeded" | "failed" | "authorized" | "canceled")
        )
    };
    match sender.post(api_key, key, "/v1/checkout", &body, done).await {
        Ended::Final(answer) => Some(answer["payment"].clone()),
        _ => None,
    }
}

async fn refund(sender: &Sender, api_key: &str, key: &str, payment: &str, amount: i64) -> String {
    let ended = sender
        .post(
            api_key,
            &format!("{key}-refund"),
            &format!("/v1/payments/{payment}/refunds"),
            &json!({ "amount": amount }),
            disputes::is_final,
        )
        .await;
    said(ended, |refund| refund)
}

async fn operate(
    sender: &Sender,
    api_key: &str,
    key: &str,
    payment: &str,
    what: &str,
    amount: Option<i64>,
) -> String {
    let body = amount.map_or(json!({}), |amount| json!({ "amount": amount }));
    let ended = sender
        .post(
            api_key,
            &format!("{key}-{what}"),
            &format!("/v1/payments/{payment}/{what}"),
            &body,
            |answer| disputes::is_final(&answer["operation"]),
        )
        .await;
    said(ended, |answer| &answer["operation"])
}

/// A final answer in words: the resource's status, or the refusal.
fn said(ended: Ended, resource: impl Fn(&Value) -> &Value) -> String {
    match ended {
        Ended::Final(answer) => resource(&answer)["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        Ended::Refused(why) => why,
        Ended::Unanswered => "unanswered".into(),
    }
}

/// The sandbox's back door, with the provider secret.
struct Control {
    http: reqwest::Client,
    url: String,
}

impl Control {
    fn new(url: &str) -> Control {
        Control {
            http: reqwest::Client::new(),
            url: url.to_owned(),
        }
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value, String> {
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(PROVIDER_SECRET)
            .json(body)
            .send()
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        let status = response.status();
        let answer: Value = response.json().await.map_err(|e| format!("{path}: {e}"))?;
        if !status.is_success() {
            return Err(format!("{path} {body}: {status} {answer}"));
        }
        Ok(answer)
    }

    /// Whether the sandbox opened a dispute on `provider_payment_id`.
    async fn disputed(&self, provider_payment_id: &str) -> Result<bool, String> {
        let listed: Value = self
            .http
            .get(format!("{}/__sandbox/disputes", self.url))
            .query(&[("payment", provider_payment_id)])
            .bearer_auth(PROVIDER_SECRET)
            .send()
            .await
            .map_err(|e| format!("the sandbox's disputes: {e}"))?
            .json()
            .await
            .map_err(|e| format!("the sandbox's disputes: {e}"))?;
        Ok(listed["data"].as_array().is_some_and(|d| !d.is_empty()))
    }
}

/// Waits until every provider's comparison has passed the database's now (Adyen's batch
/// closed first, so its record reaches it); `false` past the limit.
async fn compared_through_now(world: &World, sandbox: &Control) -> Result<bool, String> {
    let db = connect(&world.database_url).await?;
    let mark: String = db
        .query_one("SELECT now()::text", &[])
        .await
        .map_err(|e| format!("reading the database: {e}"))?
        .get(0);
    // What is booked in the second the batch closes goes to the next batch.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    sandbox
        .post("/__sandbox/settlement/close", &json!({}))
        .await?;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(180) {
        let behind = db
            .query_one(
                "SELECT count(*) FROM unnest(ARRAY['stripe', 'adyen']) AS p(name)
                  WHERE NOT EXISTS (SELECT 1 FROM settlement_cursors c
                                     WHERE c.provider = p.name AND c.checked_through > $1::text::timestamptz)",
                &[&mark],
            )
            .await
            .map_err(|e| format!("reading the cursors: {e}"))?
            .get::<_, i64>(0);
        if behind == 0 {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(false)
}

/// Every finding recorded, open or not.
async fn findings(database_url: &str) -> Result<Vec<Finding>, String> {
    let db = connect(database_url).await?;
    let rows = db
        .query(
            "SELECT provider::text, kind::text, provider_payment_id FROM settlement_findings
              ORDER BY found_at",
            &[],
        )
        .await
        .map_err(|e| format!("reading the findings: {e}"))?;
    Ok(rows
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect())
}

/// The entries payorch keeps, by provider and kind.
async fn entries(database_url: &str) -> Result<BTreeMap<String, i64>, String> {
    let db = connect(database_url).await?;
    let rows = db
        .query(
            "SELECT provider || ' ' || kind, count(*) FROM settlement_entries GROUP BY 1",
            &[],
        )
        .await
        .map_err(|e| format!("reading the entries: {e}"))?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

/// The provider's id of payorch's payment `pay_…`.
async fn provider_payment_id(database_url: &str, payment: &str) -> Result<String, String> {
    let db = connect(database_url).await?;
    db.query_one(
        "SELECT provider_payment_id FROM payment_attempts
          WHERE 'pay_' || replace(id::text, '-', '') = $1",
        &[&payment],
    )
    .await
    .map_err(|e| format!("reading {payment}: {e}"))?
    .get::<_, Option<String>>(0)
    .ok_or_else(|| format!("{payment} has no provider payment id"))
}

/// A fresh payment of `merchant` (taken at once, or held with `manual`) that the sandbox did
/// not dispute: (`pay_…`, the provider's id, amount).
async fn fresh(
    sender: &Sender,
    sandbox: &Control,
    api_key: &str,
    database_url: &str,
    key: &str,
    manual: bool,
) -> Result<(String, String, i64), String> {
    for attempt in 0..5 {
        let key = format!("{key}-{attempt}");
        let amount = 5000;
        let payment = pay(sender, api_key, &key, amount, manual)
            .await
            .ok_or_else(|| format!("{key}: no answer"))?;
        let id = payment["id"].as_str().unwrap_or_default().to_owned();
        let ppid = provider_payment_id(database_url, &id).await?;
        if manual {
            return Ok((id, ppid, amount));
        }
        // A dispute would add money of its own to the payment's record.
        tokio::time::sleep(Duration::from_millis(DISPUTE_AFTER_MS * 3)).await;
        if !sandbox.disputed(&ppid).await? {
            return Ok((id, ppid, amount));
        }
    }
    Err("five fresh payments in a row disputed".into())
}

/// One of each difference in each provider's record; the findings they must make.
async fn plant(
    sender: &Sender,
    sandbox: &Control,
    merchants: &[(&'static str, String)],
    database_url: &str,
) -> Result<Vec<Finding>, String> {
    let run_id = format!("{:x}", chrono::Utc::now().timestamp_millis());
    let mut planted = Vec::new();
    for (protocol, api_key) in merchants {
        for what in Plant::ALL {
            let key = format!("plant-{run_id}-{protocol}-{}", what.kind());
            let invent = |kind: &str, payment: Option<&str>, amount: i64| {
                json!({"protocol": protocol, "kind": kind, "payment": payment,
                       "amount": amount, "currency": "usd"})
            };
            let forget = |payment: &str, kind: &str| json!({"payment": payment, "kind": kind});
            let fresh = |manual: bool| fresh(sender, sandbox, api_key, database_url, &key, manual);
            let payment = match what {
                Plant::UnknownCharge => {
                    // A charge carrying an attempt id of payorch's shape that payorch never
                    // made: one without any is another system's sale, never a finding.
                    let mut charge = invent("charge", None, 4242);
                    charge["reference"] = json!(format!("pay_{run_id:0>32}"));
                    let made = sandbox
                        .post("/__sandbox/settlement/invent", &charge)
                        .await?;
                    made["payment"].as_str().unwrap_or_default().to_owned()
                }
                Plant::CapturedTwice => {
                    let (_, ppid, amount) = fresh(false).await?;
                    sandbox
                        .post(
                            "/__sandbox/settlement/invent",
                            &invent("charge", Some(&ppid), amount),
                        )
                        .await?;
                    ppid
                }
                Plant::AmountMismatch | Plant::ChargeNotBooked => {
                    // A hold's charge is booked when it is captured: forgotten before.
                    let (id, ppid, amount) = fresh(true).await?;
                    sandbox
                        .post("/__sandbox/settlement/forget", &forget(&ppid, "charge"))
                        .await?;
                    let captured = operate(sender, api_key, &key, &id, "capture", None).await;
                    if captured != "succeeded" {
                        return Err(format!("{key}: the capture ended {captured}"));
                    }
                    if what == Plant::AmountMismatch {
                        sandbox
                            .post(
                                "/__sandbox/settlement/invent",
                                &invent("charge", Some(&ppid), amount + 100),
                            )
                            .await?;
                    }
                    ppid
                }
                Plant::RefundNotBooked => {
                    let (id, ppid, amount) = fresh(false).await?;
                    sandbox
                        .post("/__sandbox/settlement/forget", &forget(&ppid, "refund"))
                        .await?;
                    let refunded = refund(sender, api_key, &key, &id, amount / 2).await;
                    if refunded != "succeeded" {
                        return Err(format!("{key}: the refund ended {refunded}"));
                    }
                    ppid
                }
                Plant::UnknownRefund => {
                    let (_, ppid, _) = fresh(false).await?;
                    sandbox
                        .post(
                            "/__sandbox/settlement/invent",
                            &invent("refund", Some(&ppid), 100),
                        )
                        .await?;
                    ppid
                }
                Plant::UnexplainedDispute => {
                    let (_, ppid, amount) = fresh(false).await?;
                    sandbox
                        .post(
                            "/__sandbox/settlement/invent",
                            &invent("dispute_withdrawal", Some(&ppid), amount),
                        )
                        .await?;
                    ppid
                }
            };
            planted.push((protocol.to_string(), what.kind().to_owned(), Some(payment)));
        }
    }
    Ok(planted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(provider: &str, kind: &str, payment: &str) -> Finding {
        (provider.into(), kind.into(), Some(payment.into()))
    }

    #[test]
    fn every_planted_difference_must_be_found_on_its_payment_and_nothing_else() {
        let planted = vec![
            finding("stripe", "unknown_charge", "pi_1"),
            finding("adyen", "refund_not_booked", "P2"),
        ];
        assert_eq!(
            prove(&planted, &planted),
            Proof {
                found: 2,
                missed: vec![],
                extra: vec![]
            }
        );
        // Found on another payment: missed, and one besides.
        let elsewhere = vec![
            planted[0].clone(),
            finding("adyen", "refund_not_booked", "P3"),
        ];
        let proof = prove(&planted, &elsewhere);
        assert_eq!(
            (proof.found, proof.missed.len(), proof.extra.len()),
            (1, 1, 1)
        );
    }

    #[test]
    fn the_load_asks_for_every_kind_of_money_moved() {
        let kinds: BTreeSet<String> = (0..10).map(|i| format!("{:?}", checkout(i))).collect();
        assert_eq!(kinds.len(), 6);
        let kinds: BTreeSet<&str> = Plant::ALL.iter().map(|p| p.kind()).collect();
        assert_eq!(kinds.len(), 7);
    }
}
