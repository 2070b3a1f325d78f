//! What a run must show, read from the database and the sandbox's ledger once the reconciler
//! has finished: the provider's money and payorch's rows agree, and nothing is left open.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use payorch_sandbox::{CaptureEntry, Forgotten, HoldEntry, LedgerEntry, RefundEntry, VoidEntry};
use serde_json::Value;

use crate::clients::Intent;
pub(crate) use crate::database::connect;

/// A payment attempt as the database holds it.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub(crate) id: String,
    pub(crate) order_id: String,
    pub(crate) key: Option<String>,
    pub(crate) status: String,
    pub(crate) amount: i64,
    pub(crate) provider_payment_id: Option<String>,
    /// `automatic` or `manual`.
    pub(crate) capture_method: String,
    /// What a manual capture took.
    pub(crate) amount_captured: Option<i64>,
}

impl Attempt {
    /// What the payment took: a manual capture's amount, or the whole of it.
    pub(crate) fn taken(&self) -> i64 {
        self.amount_captured.unwrap_or(self.amount)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Refund {
    pub(crate) id: String,
    pub(crate) payment_id: String,
    pub(crate) status: String,
    pub(crate) amount: i64,
    pub(crate) provider_refund_id: Option<String>,
    /// The provider's name in payorch's configuration (`stripe`, `adyen`).
    pub(crate) provider: String,
}

/// Everything the checks read.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    pub(crate) attempts: Vec<Attempt>,
    pub(crate) refunds: Vec<Refund>,
    /// Each attempt's timeline, oldest first: (from, to).
    pub(crate) attempt_transitions: HashMap<String, Vec<(Option<String>, String)>>,
    pub(crate) refund_transitions: HashMap<String, Vec<(Option<String>, String)>>,
    pub(crate) charges: Vec<LedgerEntry>,
    pub(crate) ledger_refunds: Vec<RefundEntry>,
    /// The ledger's holds, captures and voids (docs/guides/captures.md, "Authorize now, capture later").
    pub(crate) holds: Vec<HoldEntry>,
    pub(crate) captures: Vec<CaptureEntry>,
    pub(crate) voids: Vec<VoidEntry>,
    pub(crate) keys_in_flight: i64,
    /// Of `keys_in_flight`, those whose payment is a hold (`authorized`): a hold answers the
    /// request that made it, so whoever moved the payment there completed its key
    /// (docs/DESIGN.md, "Holds and challenges"); the report names them apart.
    pub(crate) hold_keys_in_flight: i64,
    /// How attempts were finished, by the source of their final move (`provider_response`,
    /// `webhook`, `reconciler`, …): the report shows which recovery paths the run took.
    pub(crate) finished_by: BTreeMap<String, i64>,
    /// Refunds payorch lists for a human (`GET /v1/support/needs-a-human`, `stuck_refunds`;
    /// strict runs only): through a provider with no lookups (Adyen), a refund no answer and
    /// no notification ever told stays open by design, and is counted as left for a human,
    /// not as lost, when it is of an Adyen payment.
    pub(crate) refunds_for_a_human: BTreeSet<String>,
}

/// Counts of what went wrong; all zero in a good run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Findings {
    /// Charges beyond the first of one order, or of one attempt.
    pub(crate) double_charges: usize,
    /// Charges the database has no succeeded attempt for (or names another charge or order).
    pub(crate) charges_without_attempt: usize,
    /// Succeeded attempts the provider has no charge for.
    pub(crate) paid_without_charge: usize,
    /// Refunds at the provider beyond the first of one of payorch's refunds: one refund asked,
    /// money sent back twice.
    pub(crate) double_refunds: usize,
    /// Payments refunded (or holding refunds) beyond their amount, in the database or at the
    /// provider.
    pub(crate) refunds_over_payment: usize,
    /// Succeeded refunds one side has and the other does not.
    pub(crate) refunds_disagreeing: usize,
    /// Intents (and refunds) with no final answer (unless abandoned), or whose payment the
    /// database lacks.
    pub(crate) lost_intents: usize,
    /// Intents (and refunds) told of two different payments (refunds), or with two attempts.
    pub(crate) split_intents: usize,
    /// Final answers a client got that the database contradicts.
    pub(crate) answers_contradicted: usize,
    /// Attempts and refunds still `created` or `pending` (but those left for a human).
    pub(crate) pending_left: usize,
    pub(crate) keys_in_flight: usize,
    /// Attempts and refunds whose timeline does not lead from `created` to their status.
    pub(crate) broken_timelines: usize,
    /// Not a failure: open refunds of Adyen payments payorch lists for a human (see
    /// [`Facts::refunds_for_a_human`]), neither lost nor pending left.
    pub(crate) refunds_left_for_a_human: usize,
    /// Not a failure: charges the provider made for an attempt payorch does not hold as
    /// succeeded — an approval that came after the payment was declined there and paid
    /// elsewhere — and that were undone at the provider (refunded in full, or voided), so
    /// none is kept: neither a double charge nor a charge without its attempt.
    pub(crate) approvals_undone: usize,
}

impl Findings {
    pub(crate) fn total(&self) -> usize {
        self.double_charges
            + self.charges_without_attempt
            + self.paid_without_charge
            + self.double_refunds
            + self.refunds_over_payment
            + self.refunds_disagreeing
            + self.lost_intents
            + self.split_intents
            + self.answers_contradicted
            + self.pending_left
            + self.keys_in_flight
            + self.broken_timelines
    }
}

pub(crate) fn judge(facts: &Facts, intents: &[Intent]) -> Findings {
    let mut found = Findings {
        keys_in_flight: facts.keys_in_flight.max(0) as usize,
        ..Findings::default()
    };
    let attempts: HashMap<&str, &Attempt> =
        facts.attempts.iter().map(|a| (a.id.as_str(), a)).collect();

    // The provider's side: one charge kept per order and per attempt, each one an attempt's.
    // A charge undone at the provider (given back in full, or its hold voided) is not kept.
    let mut returned: HashMap<&str, i64> = HashMap::new();
    for refund in facts.ledger_refunds.iter().filter(|r| r.is_refunded()) {
        *returned.entry(refund.payment_intent.as_str()).or_default() += refund.amount;
    }
    let voided: BTreeSet<&str> = facts.voids.iter().map(|v| v.provider_id.as_str()).collect();
    let undone = |charge: &LedgerEntry| {
        voided.contains(charge.provider_id.as_str())
            || returned
                .get(charge.provider_id.as_str())
                .is_some_and(|back| *back >= charge.amount)
    };
    let succeeded_attempt_of = |charge: &LedgerEntry| {
        charge
            .attempt_id
            .as_deref()
            .and_then(|id| attempts.get(id))
            .is_some_and(|a| {
                a.status == "succeeded"
                    && a.provider_payment_id.as_deref() == Some(&charge.provider_id)
                    && charge.order_id.as_deref() == Some(&a.order_id)
            })
    };
    let all_charged: Vec<&LedgerEntry> = facts.charges.iter().filter(|c| c.is_charged()).collect();
    let late_undone: BTreeSet<&str> = all_charged
        .iter()
        .filter(|c| undone(c) && !succeeded_attempt_of(c))
        .map(|c| c.provider_id.as_str())
        .collect();
    found.approvals_undone = late_undone.len();
    let charged: Vec<&LedgerEntry> = all_charged.iter().copied().filter(|c| !undone(c)).collect();
    let owners: [fn(&LedgerEntry) -> Option<String>; 2] =
        [|c| c.order_id.clone(), |c| c.attempt_id.clone()];
    for key in owners {
        let mut per: HashMap<Option<String>, usize> = HashMap::new();
        for charge in &charged {
            *per.entry(key(charge)).or_default() += 1;
        }
        found.double_charges += per
            .iter()
            .filter(|(owner, _)| owner.is_some())
            .map(|(_, n)| n - 1)
            .sum::<usize>();
    }
    let charge_ids: BTreeSet<&str> = all_charged.iter().map(|c| c.provider_id.as_str()).collect();
    found.charges_without_attempt = charged
        .iter()
        .filter(|charge| !succeeded_attempt_of(charge))
        .count();
    found.paid_without_charge = facts
        .attempts
        .iter()
        .filter(|a| a.status == "succeeded")
        .filter(|a| {
            !a.provider_payment_id
                .as_deref()
                .is_some_and(|id| charge_ids.contains(id))
        })
        .count();

    // Refunds: one at the provider per refund of payorch's, never past the payment, on either
    // side; the same succeeded refunds on both.
    let mut per_refund: HashMap<&str, usize> = HashMap::new();
    for refund in facts.ledger_refunds.iter().filter(|r| r.is_refunded()) {
        if let Some(id) = refund.refund_id.as_deref() {
            *per_refund.entry(id).or_default() += 1;
        }
    }
    found.double_refunds = per_refund.values().map(|n| n - 1).sum();
    let mut held: HashMap<&str, i64> = HashMap::new();
    for refund in facts.refunds.iter().filter(|r| r.status != "failed") {
        *held.entry(refund.payment_id.as_str()).or_default() += refund.amount;
    }
    found.refunds_over_payment += held
        .iter()
        .filter(|(payment, amount)| attempts.get(*payment).is_none_or(|a| **amount > a.taken()))
        .count();
    // What each charge took: a captured hold only what its captures took.
    let mut charge_amounts: HashMap<&str, i64> = all_charged
        .iter()
        .map(|c| (c.provider_id.as_str(), c.amount))
        .collect();
    for hold in &facts.holds {
        if let Some(amount) = charge_amounts.get_mut(hold.provider_id.as_str()) {
            *amount = hold.captured;
        }
    }
    let mut given_back: HashMap<&str, i64> = HashMap::new();
    for refund in facts.ledger_refunds.iter().filter(|r| r.is_refunded()) {
        *given_back
            .entry(refund.payment_intent.as_str())
            .or_default() += refund.amount;
    }
    found.refunds_over_payment += given_back
        .iter()
        .filter(|(charge, amount)| charge_amounts.get(*charge).is_none_or(|a| **amount > *a))
        .count();
    let ours: BTreeSet<&str> = facts
        .refunds
        .iter()
        .filter(|r| r.status == "succeeded")
        .filter_map(|r| r.provider_refund_id.as_deref())
        .collect();
    let theirs: BTreeSet<&str> = facts
        .ledger_refunds
        .iter()
        .filter(|r| r.status == "succeeded")
        .map(|r| r.provider_id.as_str())
        .collect();
    // What undid a late approval is the provider's and payorch's business, however payorch
    // records it: it is counted as undone above, not compared here.
    let undoing: BTreeSet<&str> = facts
        .ledger_refunds
        .iter()
        .filter(|r| late_undone.contains(r.payment_intent.as_str()))
        .map(|r| r.provider_id.as_str())
        .collect();
    found.refunds_disagreeing = ours
        .symmetric_difference(&theirs)
        .filter(|id| !undoing.contains(*id))
        .count()
        + facts
            .refunds
            .iter()
            .filter(|r| r.status == "succeeded" && r.provider_refund_id.is_none())
            .count();

    // What the clients were told, against the database. One checkout is one order: its
    // attempts (a failover's, a retry's on another provider) are one chain under its key.
    let mut per_key: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for attempt in &facts.attempts {
        if let Some(key) = &attempt.key {
            per_key
                .entry(key.as_str())
                .or_default()
                .insert(attempt.order_id.as_str());
        }
    }
    let orders_told = |intent: &Intent| -> usize {
        let orders: BTreeSet<&str> = intent
            .payment_ids
            .iter()
            .map(|id| {
                attempts
                    .get(id.as_str())
                    .map_or(id.as_str(), |a| a.order_id.as_str())
            })
            .collect();
        orders.len()
    };
    let refunds: HashMap<&str, &Refund> =
        facts.refunds.iter().map(|r| (r.id.as_str(), r)).collect();
    let for_a_human = |refund: &Refund| {
        refund.provider == "adyen"
            && matches!(refund.status.as_str(), "created" | "pending")
            && facts.refunds_for_a_human.contains(&refund.id)
    };
    for intent in intents {
        if orders_told(intent) > 1 || per_key.get(intent.key.as_str()).map_or(0, BTreeSet::len) > 1
        {
            found.split_intents += 1;
        }
        let attempt = intent
            .final_payment
            .as_ref()
            .or(intent.payment_ids.first())
            .and_then(|id| attempts.get(id.as_str()));
        match (&intent.status, attempt) {
            // A hold moves on when its client captures or voids it; the hold checks judge
            // where it went (`holds::judge`).
            (Some(told), Some(attempt))
                if told == "authorized"
                    && matches!(
                        attempt.status.as_str(),
                        "authorized" | "succeeded" | "canceled"
                    ) => {}
            (Some(told), Some(attempt)) if *told != attempt.status => {
                found.answers_contradicted += 1
            }
            (Some(_), Some(_)) => {}
            // Abandoned before a final answer: what it was told of must exist; the rest is
            // the database's to show (nothing open, one attempt per key).
            (None, found_attempt) if intent.abandoned => {
                if !intent.payment_ids.is_empty() && found_attempt.is_none() {
                    found.lost_intents += 1
                }
            }
            _ => found.lost_intents += 1,
        }
        for refund in &intent.refunds {
            if refund.refund_ids.len() > 1 {
                found.split_intents += 1;
            }
            let stored = refund
                .refund_ids
                .first()
                .and_then(|id| refunds.get(id.as_str()));
            match (refund.outcome.as_deref(), stored) {
                (None, Some(stored)) if for_a_human(stored) => found.refunds_left_for_a_human += 1,
                (None, _) => found.lost_intents += 1,
                (Some(told @ ("succeeded" | "failed")), Some(stored)) if told != stored.status => {
                    found.answers_contradicted += 1
                }
                (Some("succeeded" | "failed"), None) => found.lost_intents += 1,
                _ => {}
            }
        }
    }

    // Nothing open; every row's story leads from `created` to where it is.
    found.pending_left = facts
        .attempts
        .iter()
        .map(|a| a.status.as_str())
        .chain(
            facts
                .refunds
                .iter()
                .filter(|r| !for_a_human(r))
                .map(|r| r.status.as_str()),
        )
        .filter(|s| matches!(*s, "created" | "pending"))
        .count();
    found.broken_timelines = facts
        .attempts
        .iter()
        .filter(|a| !leads_to(facts.attempt_transitions.get(&a.id), &a.status))
        .count()
        + facts
            .refunds
            .iter()
            .filter(|r| !leads_to(facts.refund_transitions.get(&r.id), &r.status))
            .count();
    found
}

/// A timeline starts `created`, each move starts where the last one ended, and the last ends
/// at `status`.
fn leads_to(events: Option<&Vec<(Option<String>, String)>>, status: &str) -> bool {
    let Some(events) = events else { return false };
    let mut at: Option<&str> = None;
    for (from, to) in events {
        if from.as_deref() != at {
            return false;
        }
        at = Some(to);
    }
    at == Some(status) && events.first().is_some_and(|(_, to)| to == "created")
}

/// Reads the facts: the database at `database_url`, the ledger at `sandbox_url`.
pub(crate) async fn gather(database_url: &str, sandbox_url: &str) -> Result<Facts, String> {
    let db = connect(database_url).await?;
    let sql = |e: tokio_postgres::Error| format!("reading the database: {e}");
    let mut facts = Facts::default();
    for row in db
        .query(
            "SELECT 'pay_' || replace(id::text, '-', ''), 'ord_' || replace(order_id::text, '-', ''),
                    idempotency_key, status::text, amount::bigint, provider_payment_id,
                    capture_method::text, amount_captured::bigint
               FROM payment_attempts",
            &[],
        )
        .await
        .map_err(sql)?
    {
        facts.attempts.push(Attempt {
            id: row.get(0),
            order_id: row.get(1),
            key: row.get(2),
            status: row.get(3),
            amount: row.get(4),
            provider_payment_id: row.get(5),
            capture_method: row.get(6),
            amount_captured: row.get(7),
        });
    }
    for row in db
        .query(
            "SELECT 're_' || replace(id::text, '-', ''), 'pay_' || replace(payment_id::text, '-', ''),
                    status::text, amount::bigint, provider_refund_id, provider
               FROM refunds",
            &[],
        )
        .await
        .map_err(sql)?
    {
        facts.refunds.push(Refund {
            id: row.get(0),
            payment_id: row.get(1),
            status: row.get(2),
            amount: row.get(3),
            provider_refund_id: row.get(4),
            provider: row.get(5),
        });
    }
    for (prefix, table, column, into) in [
        (
            "pay_",
            "attempt_transitions",
            "attempt_id",
            &mut facts.attempt_transitions,
        ),
        (
            "re_",
            "refund_transitions",
            "refund_id",
            &mut facts.refund_transitions,
        ),
    ] {
        let query = format!(
            "SELECT '{prefix}' || replace({column}::text, '-', ''), from_status::text, to_status::text
               FROM {table} ORDER BY {column}, id"
        );
        for row in db.query(&query, &[]).await.map_err(sql)? {
            into.entry(row.get(0))
                .or_default()
                .push((row.get(1), row.get(2)));
        }
    }
    let in_flight = db
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE a.status = 'authorized')
               FROM idempotency_keys k
               LEFT JOIN payment_attempts a
                 ON k.resource_type = 'payment_attempt' AND a.merchant_id = k.merchant_id
                AND a.id = k.resource_id
              WHERE k.state = 'in_flight'",
            &[],
        )
        .await
        .map_err(sql)?;
    facts.keys_in_flight = in_flight.get(0);
    facts.hold_keys_in_flight = in_flight.get(1);
    for row in db
        .query(
            "SELECT source::text, count(*) FROM attempt_transitions
              WHERE to_status IN ('succeeded', 'failed') GROUP BY 1",
            &[],
        )
        .await
        .map_err(sql)?
    {
        facts.finished_by.insert(row.get(0), row.get(1));
    }

    let ledger: Value = reqwest::get(format!("{sandbox_url}/__sandbox/ledger"))
        .await
        .map_err(|e| format!("the ledger: {e}"))?
        .json()
        .await
        .map_err(|e| format!("the ledger: {e}"))?;
    facts.charges = serde_json::from_value(ledger["data"].clone())
        .map_err(|e| format!("the ledger's charges: {e}"))?;
    facts.ledger_refunds = serde_json::from_value(ledger["refunds"].clone())
        .map_err(|e| format!("the ledger's refunds: {e}"))?;
    facts.holds = serde_json::from_value(ledger["holds"].clone())
        .map_err(|e| format!("the ledger's holds: {e}"))?;
    facts.captures = serde_json::from_value(ledger["captures"].clone())
        .map_err(|e| format!("the ledger's captures: {e}"))?;
    facts.voids = serde_json::from_value(ledger["voids"].clone())
        .map_err(|e| format!("the ledger's voids: {e}"))?;
    // A ledger that forgot some of the run cannot judge it: what it no longer lists would
    // read as never charged (docs/operations/running.md, "The sandbox's memory").
    let forgotten: Forgotten = serde_json::from_value(ledger["forgotten"].clone())
        .map_err(|e| format!("the ledger's forgotten: {e}"))?;
    if forgotten != Forgotten::default() {
        return Err(format!(
            "the sandbox forgot {} intents and {} refunds of this run (raise its \
             --keep-intents): its ledger cannot judge it",
            forgotten.intents, forgotten.refunds
        ));
    }
    Ok(facts)
}

/// Attempts, refunds, captures and voids still open, and late approvals being undone, for
/// waiting on the reconciler. A hold (`authorized`) is not: it waits for its merchant, or for
/// the days before it expires.
pub(crate) async fn open_rows(database_url: &str) -> Result<i64, String> {
    let db = connect(database_url).await?;
    let row = db
        .query_one(
            "SELECT (SELECT count(*) FROM payment_attempts WHERE status IN ('created', 'pending'))
                  + (SELECT count(*) FROM refunds WHERE status IN ('created', 'pending'))
                  + (SELECT count(*) FROM hold_operations WHERE status IN ('created', 'pending'))",
            &[],
        )
        .await
        .map_err(|e| format!("reading the database: {e}"))?;
    let open: i64 = row.get(0);
    // Late approvals being undone (#43), where payorch keeps them.
    let late = db
        .query_one("SELECT to_regclass('late_approvals') IS NOT NULL", &[])
        .await
        .map_err(|e| format!("reading the database: {e}"))?;
    if !late.get::<_, bool>(0) {
        return Ok(open);
    }
    let undoing = db
        .query_one(
            "SELECT count(*) FROM late_approvals WHERE status = 'undoing'",
            &[],
        )
        .await
        .map_err(|e| format!("reading the database: {e}"))?;
    Ok(open + undoing.get::<_, i64>(0))
}

/// How many charges, refunds, holds, captures and voids the provider made, by status, for
/// the report.
pub(crate) fn ledger_summary(facts: &Facts) -> BTreeMap<String, usize> {
    let mut summary = BTreeMap::new();
    for charge in &facts.charges {
        *summary
            .entry(format!("charges {}", charge.status))
            .or_default() += 1;
    }
    for refund in &facts.ledger_refunds {
        *summary
            .entry(format!("refunds {}", refund.status))
            .or_default() += 1;
    }
    for hold in &facts.holds {
        *summary.entry(format!("holds {}", hold.status)).or_default() += 1;
    }
    for capture in &facts.captures {
        *summary
            .entry(format!("captures {}", capture.status))
            .or_default() += 1;
    }
    if !facts.voids.is_empty() {
        summary.insert("voids".to_owned(), facts.voids.len());
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::RefundIntent;

    /// A charge in processing that names no attempt and no order.
    fn stray_charge() -> LedgerEntry {
        LedgerEntry {
            protocol: "stripe".into(),
            provider_id: "pi_stray".into(),
            idempotency_key: None,
            attempt_id: None,
            order_id: None,
            merchant_id: None,
            amount: 1,
            currency: "usd".into(),
            payment_method: None,
            status: "processing".into(),
            created: 0,
        }
    }

    /// A run where everything is right: two paid intents, one declined, one refund.
    fn good() -> (Facts, Vec<Intent>) {
        let attempt = |n: u8, status: &str, charge: Option<&str>| Attempt {
            id: format!("pay_{n}"),
            order_id: format!("ord_{n}"),
            key: Some(format!("k{n}")),
            status: status.into(),
            amount: 1000,
            provider_payment_id: charge.map(str::to_owned),
            capture_method: "automatic".into(),
            amount_captured: None,
        };
        let charge = |n: u8, status: &str| LedgerEntry {
            provider_id: format!("pi_{n}"),
            attempt_id: Some(format!("pay_{n}")),
            order_id: Some(format!("ord_{n}")),
            amount: 1000,
            status: status.into(),
            ..stray_charge()
        };
        let story = |to: &str| {
            vec![
                (None, "created".to_owned()),
                (Some("created".to_owned()), to.to_owned()),
            ]
        };
        let facts = Facts {
            attempts: vec![
                attempt(1, "succeeded", Some("pi_1")),
                attempt(2, "succeeded", Some("pi_2")),
                attempt(3, "failed", Some("pi_3")),
            ],
            refunds: vec![Refund {
                id: "re_1".into(),
                payment_id: "pay_1".into(),
                status: "succeeded".into(),
                amount: 500,
                provider_refund_id: Some("pyr_1".into()),
                provider: "stripe".into(),
            }],
            attempt_transitions: HashMap::from([
                ("pay_1".into(), story("succeeded")),
                ("pay_2".into(), story("succeeded")),
                ("pay_3".into(), story("failed")),
            ]),
            refund_transitions: HashMap::from([("re_1".into(), story("succeeded"))]),
            charges: vec![
                charge(1, "succeeded"),
                charge(2, "succeeded"),
                charge(3, "requires_payment_method"),
            ],
            ledger_refunds: vec![RefundEntry {
                protocol: "stripe".into(),
                provider_id: "pyr_1".into(),
                payment_intent: "pi_1".into(),
                idempotency_key: None,
                refund_id: Some("re_1".into()),
                amount: 500,
                currency: "usd".into(),
                status: "succeeded".into(),
                created: 0,
            }],
            keys_in_flight: 0,
            finished_by: BTreeMap::new(),
            ..Facts::default()
        };
        let intent = |n: u8, status: &str| Intent {
            key: format!("k{n}"),
            method: "pm_card_visa",
            payment_ids: BTreeSet::from([format!("pay_{n}")]),
            status: Some(status.into()),
            ..Intent::default()
        };
        let mut intents = vec![
            intent(1, "succeeded"),
            intent(2, "succeeded"),
            intent(3, "failed"),
        ];
        intents[0].refunds.push(RefundIntent {
            key: "k1-refund".into(),
            refund_ids: BTreeSet::from(["re_1".to_owned()]),
            outcome: Some("succeeded".into()),
        });
        (facts, intents)
    }

    fn found(change: impl FnOnce(&mut Facts, &mut Vec<Intent>)) -> Findings {
        let (mut facts, mut intents) = good();
        change(&mut facts, &mut intents);
        judge(&facts, &intents)
    }

    #[test]
    fn a_good_run_finds_nothing() {
        assert_eq!(found(|_, _| {}), Findings::default());
    }

    #[test]
    fn a_second_charge_of_one_order_is_a_double_charge_and_has_no_attempt() {
        let findings = found(|facts, _| {
            let mut again = facts.charges[0].clone();
            again.provider_id = "pi_1b".into();
            facts.charges.push(again);
        });
        // Once per order and once per attempt: both saw two charges.
        assert_eq!(findings.double_charges, 2);
        assert_eq!(findings.charges_without_attempt, 1);
    }

    #[test]
    fn a_late_approval_undone_at_the_provider_is_kept_by_nobody_and_one_left_is_found() {
        // Order 1 paid by pay_1; its first attempt, declined, approved late at the other
        // provider: a second charge of the order.
        let late = |facts: &mut Facts| {
            let mut approved = facts.charges[0].clone();
            approved.provider_id = "psp_late".into();
            approved.attempt_id = Some("pay_1a".into());
            facts.charges.push(approved);
        };
        let given_back = |facts: &mut Facts, amount: i64| {
            let mut refund = facts.ledger_refunds[0].clone();
            refund.provider_id = "psp_late_back".into();
            refund.payment_intent = "psp_late".into();
            refund.refund_id = None;
            refund.amount = amount;
            facts.ledger_refunds.push(refund);
        };
        let findings = found(|facts, _| {
            late(facts);
            given_back(facts, 1000);
        });
        assert_eq!(findings.approvals_undone, 1);
        assert_eq!(findings.total(), 0, "{findings:?}");
        // Left charged, or given back only in part, it is a double charge without its attempt.
        for back in [0, 999] {
            let findings = found(|facts, _| {
                late(facts);
                given_back(facts, back);
            });
            assert_eq!(findings.approvals_undone, 0);
            assert_eq!(findings.double_charges, 1, "{back}: {findings:?}");
            assert_eq!(findings.charges_without_attempt, 1);
        }
        // A payment refunded in full by its merchant is no late approval.
        let findings = found(|facts, _| {
            facts.ledger_refunds[0].amount = 1000;
            facts.refunds[0].amount = 1000;
        });
        assert_eq!(findings.approvals_undone, 0);
        assert_eq!(findings.total(), 0, "{findings:?}");
    }

    #[test]
    fn a_chain_of_attempts_of_one_checkout_is_one_intent_told_by_its_last() {
        let findings = found(|facts, intents| {
            // pay_2 retried pay_4, declined first, under the same key and order.
            let mut first = facts.attempts[1].clone();
            first.id = "pay_4".into();
            first.status = "failed".into();
            first.provider_payment_id = None;
            facts.attempts.push(first);
            facts.attempt_transitions.insert(
                "pay_4".into(),
                vec![
                    (None, "created".into()),
                    (Some("created".into()), "failed".into()),
                ],
            );
            intents[1].payment_ids.insert("pay_4".into());
            intents[1].final_payment = Some("pay_2".into());
        });
        assert_eq!(findings.total(), 0, "{findings:?}");
        // Told of the failed one as final, it is contradicted.
        let findings = found(|facts, intents| {
            let mut first = facts.attempts[1].clone();
            first.id = "pay_4".into();
            first.status = "failed".into();
            facts.attempts.push(first);
            intents[1].payment_ids.insert("pay_4".into());
            intents[1].final_payment = Some("pay_4".into());
        });
        assert_eq!(findings.answers_contradicted, 1);
    }

    #[test]
    fn a_charge_of_a_failed_attempt_or_of_nobody_is_found() {
        let findings = found(|facts, _| {
            facts.charges[2].status = "succeeded".into();
            facts.charges.push(stray_charge());
        });
        assert_eq!(findings.charges_without_attempt, 2);
        assert_eq!(findings.double_charges, 0);
    }

    #[test]
    fn a_succeeded_attempt_without_its_charge_is_found() {
        let findings = found(|facts, _| facts.charges.remove(1).provider_id.clear());
        assert_eq!(findings.paid_without_charge, 1);
    }

    #[test]
    fn refunds_past_the_payment_are_found_on_either_side() {
        let findings = found(|facts, _| {
            facts.refunds[0].amount = 1001;
            facts.ledger_refunds[0].amount = 1001;
        });
        assert_eq!(findings.refunds_over_payment, 2);
        let findings = found(|facts, _| {
            facts.ledger_refunds[0].provider_id = "pyr_other".into();
        });
        assert_eq!(findings.refunds_disagreeing, 2);
    }

    #[test]
    fn a_second_refund_at_the_provider_of_one_refund_is_a_double_refund() {
        let findings = found(|facts, _| {
            let mut again = facts.ledger_refunds[0].clone();
            again.provider_id = "pyr_1b".into();
            again.amount = 100;
            facts.ledger_refunds.push(again.clone());
            // One that failed sent nothing back.
            again.provider_id = "pyr_1c".into();
            again.status = "failed".into();
            facts.ledger_refunds.push(again);
        });
        assert_eq!(findings.double_refunds, 1);
        // The database knows of one of the two.
        assert_eq!(findings.refunds_disagreeing, 1);
    }

    #[test]
    fn an_open_adyen_refund_listed_for_a_human_is_left_for_a_human_and_no_other() {
        let never_told = |facts: &mut Facts, intents: &mut Vec<Intent>| {
            facts.refunds[0].status = "pending".into();
            facts.refund_transitions.insert(
                "re_1".into(),
                vec![
                    (None, "created".into()),
                    (Some("created".into()), "pending".into()),
                ],
            );
            facts.ledger_refunds.clear();
            intents[0].refunds[0].outcome = None;
        };
        // Through Stripe it is lost, whatever the list says: its lookups can end it.
        let findings = found(|facts, intents| {
            never_told(facts, intents);
            facts.refunds_for_a_human.insert("re_1".into());
        });
        assert_eq!((findings.lost_intents, findings.pending_left), (1, 1));
        // Through Adyen, and listed: left for a human, neither lost nor pending left.
        let findings = found(|facts, intents| {
            never_told(facts, intents);
            facts.refunds[0].provider = "adyen".into();
            facts.refunds_for_a_human.insert("re_1".into());
        });
        assert_eq!(findings.refunds_left_for_a_human, 1);
        assert_eq!(findings.total(), 0, "{findings:?}");
        // Through Adyen but not listed: lost.
        let findings = found(|facts, intents| {
            never_told(facts, intents);
            facts.refunds[0].provider = "adyen".into();
        });
        assert_eq!((findings.lost_intents, findings.pending_left), (1, 1));
    }

    #[test]
    fn open_rows_and_keys_in_flight_are_left_pending() {
        let findings = found(|facts, _| {
            facts.refunds[0].status = "pending".into();
            facts.keys_in_flight = 1;
        });
        assert_eq!(findings.pending_left, 1);
        assert_eq!(findings.keys_in_flight, 1);
        // Its story ends at `succeeded`, not where it is.
        assert_eq!(findings.broken_timelines, 1);
    }

    #[test]
    fn a_timeline_with_a_gap_or_none_at_all_is_broken() {
        let findings = found(|facts, _| {
            facts
                .attempt_transitions
                .get_mut("pay_1")
                .unwrap()
                .insert(1, (Some("pending".into()), "pending".into()));
            facts.attempt_transitions.remove("pay_2");
        });
        assert_eq!(findings.broken_timelines, 2);
    }

    #[test]
    fn intents_told_of_two_payments_lost_or_contradicted_are_found() {
        let findings = found(|facts, intents| {
            intents[0].payment_ids.insert("pay_9".into());
            intents[1].status = None;
            intents[2].status = Some("succeeded".into());
            facts.attempts[1].key = Some("k3".into());
        });
        // Intent 1 was told of two payments; intent 3's key made two attempts.
        assert_eq!(findings.split_intents, 2);
        assert_eq!(findings.lost_intents, 1);
        assert_eq!(findings.answers_contradicted, 1);
    }

    #[test]
    fn an_abandoned_intent_is_lost_only_if_what_it_was_told_of_is_gone() {
        let findings = found(|_, intents| {
            intents[0].abandoned = true;
            intents[0].status = None;
        });
        assert_eq!(findings.lost_intents, 0);
        let findings = found(|facts, intents| {
            intents[0].abandoned = true;
            intents[0].status = None;
            facts.attempts[0].id = "pay_other".into();
        });
        assert!(findings.lost_intents >= 1, "{findings:?}");
    }

    #[test]
    fn a_refund_never_answered_or_unknown_to_the_database_is_lost() {
        let findings = found(|_, intents| {
            intents[0].refunds[0].outcome = None;
        });
        assert_eq!(findings.lost_intents, 1);
        let findings = found(|facts, _| facts.refunds[0].id = "re_other".into());
        assert_eq!(findings.lost_intents, 1);
    }
}
