//! Manual captures under chaos (docs/guides/captures.md, "Authorize now, capture later"; docs/RELIABILITY.md,
//! "Manual captures under chaos"): once the reconcilers are done, the sandbox's ledger of
//! holds, captures and voids against the database's payments and `hold_operations`, and
//! against what each client was told of the capture or void it asked for.

use std::collections::{BTreeSet, HashMap};

use payorch_sandbox::{CaptureEntry, HoldEntry};

use crate::checks::{connect, Attempt, Facts};
use crate::clients::{HoldAsk, Intent};
use crate::strict::TECHNICAL_CANCEL;

/// A capture or void as the database holds it.
#[derive(Debug, Clone)]
pub(crate) struct Operation {
    /// `hop_…`.
    pub(crate) id: String,
    /// `pay_…`.
    pub(crate) payment_id: String,
    /// `capture` or `void`.
    pub(crate) kind: String,
    pub(crate) status: String,
    pub(crate) amount: Option<i64>,
    /// The key every send of it carries to the provider.
    pub(crate) provider_key: String,
    /// The client's `Idempotency-Key` that asked for it.
    pub(crate) key: Option<String>,
    /// Why payorch made it, when no client asked (`outcome_unknown`: a technical cancel).
    pub(crate) reason: Option<String>,
}

/// What the hold checks read from the database; the ledger's side is in [`Facts`].
#[derive(Debug, Default)]
pub(crate) struct HoldFacts {
    pub(crate) operations: Vec<Operation>,
    /// Capture and cancel calls payorch logged, by operation id.
    pub(crate) calls: HashMap<String, i64>,
}

/// Counts of what went wrong with holds; all zero in a good run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct HoldFindings {
    /// Succeeded captures of a hold beyond its first.
    pub(crate) second_captures: usize,
    /// Holds both captured and voided at the provider.
    pub(crate) captures_of_voided: usize,
    /// Captures and voids at the provider that no operation of that payment in the database
    /// made (by the operation's provider key).
    pub(crate) moves_without_operation: usize,
    /// Captures a client was told `succeeded` that the ledger lacks or took another amount,
    /// or whose payment is not `succeeded` with `amount_captured` equal to it.
    pub(crate) captures_not_as_told: usize,
    /// Voids a client was told `succeeded` that the ledger lacks, or whose hold is not voided
    /// or payment not `canceled`.
    pub(crate) voids_not_as_told: usize,
    /// Payments still `authorized` whose client asked for a capture or void.
    pub(crate) holds_left_authorized: usize,
    /// Operations still `created` or `pending`.
    pub(crate) operations_left_open: usize,
    /// Holds captured beyond what was authorized, at the provider or in the database.
    pub(crate) captured_over_authorized: usize,
    /// Holds whose ledger status and payment disagree: held and `authorized`, captured and
    /// `succeeded` with the amount the provider took, voided and `canceled`; or a manual
    /// payment in one of these statuses the ledger holds nothing for.
    pub(crate) holds_disagreeing: usize,
    /// Holds captured or voided although no client asked.
    pub(crate) holds_moved_unasked: usize,
    /// Captures and voids with no final answer within the deadline, or whose operation the
    /// database lacks.
    pub(crate) hold_answers_lost: usize,
    /// A final status a client was told of its operation that the database does not hold.
    pub(crate) hold_answers_contradicted: usize,
    /// Clients told of two operations, or whose key made two.
    pub(crate) split_operations: usize,
    /// Clients told `payment_not_capturable` or `payment_not_cancelable` although no other
    /// operation finished the hold.
    pub(crate) holds_refused: usize,
}

impl HoldFindings {
    pub(crate) fn total(&self) -> usize {
        self.second_captures
            + self.captures_of_voided
            + self.moves_without_operation
            + self.captures_not_as_told
            + self.voids_not_as_told
            + self.holds_left_authorized
            + self.operations_left_open
            + self.captured_over_authorized
            + self.holds_disagreeing
            + self.holds_moved_unasked
            + self.hold_answers_lost
            + self.hold_answers_contradicted
            + self.split_operations
            + self.holds_refused
    }
}

/// What the run did with holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HoldFigures {
    /// Checkouts made with `capture_method: manual`.
    pub(crate) manual_intents: usize,
    /// Holds the provider placed.
    pub(crate) holds: usize,
    /// Succeeded captures at the provider, and how many of them took a part of the hold.
    pub(crate) captures: usize,
    pub(crate) partial_captures: usize,
    /// Holds released by a cancel at the provider.
    pub(crate) voids: usize,
    /// Holds still held: abandoned checkouts' (nobody asked for a capture or void).
    pub(crate) still_held: usize,
    /// Capture and cancel calls payorch sent again under an operation's key, beyond the
    /// first of each (as logged; a call a kill cut before it was logged is not counted).
    pub(crate) resends: usize,
}

pub(crate) fn judge(
    facts: &Facts,
    holds: &HoldFacts,
    intents: &[Intent],
) -> (HoldFindings, HoldFigures) {
    let mut found = HoldFindings::default();
    let attempts: HashMap<&str, &Attempt> =
        facts.attempts.iter().map(|a| (a.id.as_str(), a)).collect();
    let operations: HashMap<&str, &Operation> = holds
        .operations
        .iter()
        .map(|o| (o.id.as_str(), o))
        .collect();
    let by_provider_key: HashMap<&str, &Operation> = holds
        .operations
        .iter()
        .map(|o| (o.provider_key.as_str(), o))
        .collect();
    let ledger_holds: HashMap<&str, &HoldEntry> = facts
        .holds
        .iter()
        .map(|h| (h.provider_id.as_str(), h))
        .collect();
    let captured: Vec<&CaptureEntry> = facts.captures.iter().filter(|c| c.is_captured()).collect();

    // (1) At most one capture per hold, never one of a voided hold.
    let mut captures_per_hold: HashMap<&str, (usize, i64)> = HashMap::new();
    for capture in &captured {
        let per = captures_per_hold
            .entry(capture.provider_id.as_str())
            .or_default();
        per.0 += 1;
        per.1 += capture.amount;
    }
    found.second_captures = captures_per_hold.values().map(|(n, _)| n - 1).sum();
    let voided: BTreeSet<&str> = facts.voids.iter().map(|v| v.provider_id.as_str()).collect();
    found.captures_of_voided = captures_per_hold
        .keys()
        .filter(|hold| voided.contains(*hold))
        .count();
    // Each capture and void at the provider is an operation's of that very payment (under
    // its key, or a fresh key the reconciler made of it: `operation_key`).
    let made_by = |key: Option<&str>, attempt: Option<&str>, kind: &str| {
        key.and_then(|key| by_provider_key.get(operation_key(key)))
            .is_some_and(|o| o.kind == kind && Some(o.payment_id.as_str()) == attempt)
    };
    found.moves_without_operation = captured
        .iter()
        .filter(|c| {
            !made_by(
                c.idempotency_key.as_deref(),
                c.attempt_id.as_deref(),
                "capture",
            )
        })
        .count()
        + facts
            .voids
            .iter()
            .filter(|v| {
                !made_by(
                    v.idempotency_key.as_deref(),
                    v.attempt_id.as_deref(),
                    "void",
                )
            })
            .count();

    // (5) No hold captured beyond what was authorized, on either side.
    found.captured_over_authorized = captures_per_hold
        .iter()
        .filter(|(hold, (_, amount))| ledger_holds.get(*hold).is_none_or(|h| *amount > h.amount))
        .count()
        + facts.holds.iter().filter(|h| h.captured > h.amount).count()
        + facts
            .attempts
            .iter()
            .filter(|a| a.amount_captured.is_some_and(|c| c > a.amount))
            .count();

    // The ledger's holds and the database's manual payments tell one story.
    let by_attempt: HashMap<&str, &HoldEntry> = facts
        .holds
        .iter()
        .filter_map(|h| Some((h.attempt_id.as_deref()?, h)))
        .collect();
    found.holds_disagreeing = facts
        .holds
        .iter()
        .filter(|hold| {
            let attempt = hold.attempt_id.as_deref().and_then(|id| attempts.get(id));
            !attempt.is_some_and(|a| agrees(hold, a))
        })
        .count()
        + facts
            .attempts
            .iter()
            .filter(|a| a.capture_method == "manual")
            .filter(|a| matches!(a.status.as_str(), "authorized" | "succeeded" | "canceled"))
            .filter(|a| !by_attempt.contains_key(a.id.as_str()))
            .count();

    // What the clients were told, against the ledger and the database.
    let mut per_key: HashMap<&str, usize> = HashMap::new();
    for operation in &holds.operations {
        if let Some(key) = &operation.key {
            *per_key.entry(key.as_str()).or_default() += 1;
        }
    }
    let mut asked: BTreeSet<&str> = BTreeSet::new();
    for intent in intents {
        let Some(hold) = &intent.hold else { continue };
        let Some(attempt) = intent
            .payment_ids
            .first()
            .and_then(|id| attempts.get(id.as_str()))
        else {
            // The checkout's own checks find an intent whose payment the database lacks.
            continue;
        };
        asked.insert(attempt.id.as_str());
        if hold.operation_ids.len() > 1 || per_key.get(hold.key.as_str()).copied() > Some(1) {
            found.split_operations += 1;
        }
        if attempt.status == "authorized" {
            found.holds_left_authorized += 1;
        }
        let operation = hold
            .operation_ids
            .first()
            .and_then(|id| operations.get(id.as_str()));
        match (hold.outcome.as_deref(), operation) {
            (None, _) | (Some("succeeded" | "failed"), None) => found.hold_answers_lost += 1,
            (Some(told @ ("succeeded" | "failed")), Some(operation))
                if told != operation.status =>
            {
                found.hold_answers_contradicted += 1
            }
            (Some("succeeded"), Some(operation)) => {
                let hold_entry = attempt
                    .provider_payment_id
                    .as_deref()
                    .and_then(|id| ledger_holds.get(id));
                match hold.ask {
                    HoldAsk::CaptureAll | HoldAsk::CapturePart(_) => {
                        let expected = match hold.ask {
                            HoldAsk::CapturePart(amount) => amount,
                            _ => attempt.amount,
                        };
                        let in_ledger = captured.iter().any(|c| {
                            Some(c.provider_id.as_str()) == attempt.provider_payment_id.as_deref()
                                && c.idempotency_key.as_deref().map(operation_key)
                                    == Some(operation.provider_key.as_str())
                                && c.amount == expected
                        });
                        let as_told = in_ledger
                            && hold.amount == Some(expected)
                            && operation.amount == Some(expected)
                            && hold_entry.is_some_and(|h| h.captured == expected)
                            && attempt.status == "succeeded"
                            && attempt.amount_captured == Some(expected);
                        if !as_told {
                            found.captures_not_as_told += 1;
                        }
                    }
                    HoldAsk::Void => {
                        let in_ledger = facts.voids.iter().any(|v| {
                            Some(v.provider_id.as_str()) == attempt.provider_payment_id.as_deref()
                                && v.idempotency_key.as_deref().map(operation_key)
                                    == Some(operation.provider_key.as_str())
                        });
                        let as_told = in_ledger
                            && hold_entry.is_some_and(|h| h.status == "voided")
                            && attempt.status == "canceled";
                        if !as_told {
                            found.voids_not_as_told += 1;
                        }
                    }
                }
            }
            (Some("failed"), Some(_)) => {}
            // Refused: only once another operation, not this key's, finished the hold.
            (Some(_), _) => {
                let finished_by_another = holds.operations.iter().any(|o| {
                    o.payment_id == attempt.id
                        && o.status == "succeeded"
                        && o.key.as_deref() != Some(hold.key.as_str())
                });
                if !finished_by_another {
                    found.holds_refused += 1;
                }
            }
        }
    }
    // A technical cancel is asked for by the deadline of an outcome nobody heard: its hold
    // was never told to anyone, so no client could ask.
    for operation in &holds.operations {
        if operation.kind == "void" && operation.reason.as_deref() == Some(TECHNICAL_CANCEL) {
            asked.insert(operation.payment_id.as_str());
        }
    }
    found.holds_moved_unasked = facts
        .attempts
        .iter()
        .filter(|a| a.capture_method == "manual")
        .filter(|a| matches!(a.status.as_str(), "succeeded" | "canceled"))
        .filter(|a| by_attempt.contains_key(a.id.as_str()) && !asked.contains(a.id.as_str()))
        .count();
    found.operations_left_open = holds
        .operations
        .iter()
        .filter(|o| matches!(o.status.as_str(), "created" | "pending"))
        .count();

    let figures = HoldFigures {
        manual_intents: intents.iter().filter(|i| i.manual).count(),
        holds: facts.holds.len(),
        captures: captured.len(),
        partial_captures: captured.iter().filter(|c| c.released > 0).count(),
        voids: facts.voids.len(),
        still_held: facts.holds.iter().filter(|h| h.status == "held").count(),
        resends: holds.calls.values().map(|n| (*n - 1).max(0) as usize).sum(),
    };
    (found, figures)
}

/// A hold at the provider and its payment agree: held and `authorized`, captured and
/// `succeeded` with what the captures took, voided and `canceled`.
fn agrees(hold: &HoldEntry, attempt: &Attempt) -> bool {
    attempt.capture_method == "manual"
        && attempt.provider_payment_id.as_deref() == Some(hold.provider_id.as_str())
        && match hold.status.as_str() {
            "held" => attempt.status == "authorized",
            "captured" => {
                attempt.status == "succeeded" && attempt.amount_captured == Some(hold.captured)
            }
            "voided" => attempt.status == "canceled",
            _ => false,
        }
}

/// Reads the operations and how often payorch called the provider for each.
pub(crate) async fn gather(database_url: &str) -> Result<HoldFacts, String> {
    let db = connect(database_url).await?;
    let sql = |e: tokio_postgres::Error| format!("reading the database: {e}");
    let mut facts = HoldFacts::default();
    for row in db
        .query(
            "SELECT 'hop_' || replace(id::text, '-', ''), 'pay_' || replace(payment_id::text, '-', ''),
                    kind::text, status::text, amount::bigint, provider_idempotency_key,
                    idempotency_key, reason::text
               FROM hold_operations",
            &[],
        )
        .await
        .map_err(sql)?
    {
        facts.operations.push(Operation {
            id: row.get(0),
            payment_id: row.get(1),
            kind: row.get(2),
            status: row.get(3),
            amount: row.get(4),
            provider_key: row.get(5),
            key: row.get(6),
            reason: row.get(7),
        });
    }
    for row in db
        .query(
            "SELECT 'hop_' || replace(hold_operation_id::text, '-', ''), count(*)
               FROM provider_calls
              WHERE hold_operation_id IS NOT NULL AND operation IN ('capture', 'cancel')
              GROUP BY 1",
            &[],
        )
        .await
        .map_err(sql)?
    {
        facts.calls.insert(row.get(0), row.get(1));
    }
    Ok(facts)
}

/// The operation's own provider key of a key a capture or void was sent under: the key itself,
/// or the operation's key of a fresh one the reconciler made (`<key>.<check>`: at a provider
/// whose idempotency replays a saved `500` for ever: docs/DESIGN.md, "What proves what").
fn operation_key(key: &str) -> &str {
    match key.rsplit_once('.') {
        Some((operation, check))
            if !check.is_empty() && check.bytes().all(|b| b.is_ascii_digit()) =>
        {
            operation
        }
        _ => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_key_the_reconciler_made_is_its_operations() {
        assert_eq!(operation_key("payorch_hop_1"), "payorch_hop_1");
        assert_eq!(operation_key("payorch_hop_1.3"), "payorch_hop_1");
        assert_eq!(operation_key("payorch_hop_1.x"), "payorch_hop_1.x");
        assert_eq!(operation_key("payorch_hop_1."), "payorch_hop_1.");
    }
    use crate::clients::HoldIntent;
    use payorch_sandbox::{LedgerEntry, VoidEntry};

    /// A run where every hold is right: pay_1 captured whole, pay_2 captured in part (400 of
    /// 1000), pay_3 voided, pay_4 still held (its checkout abandoned).
    fn good() -> (Facts, HoldFacts, Vec<Intent>) {
        let attempt = |n: u8, status: &str, captured: Option<i64>| Attempt {
            id: format!("pay_{n}"),
            order_id: format!("ord_{n}"),
            key: Some(format!("k{n}")),
            status: status.into(),
            amount: 1000,
            provider_payment_id: Some(format!("pi_{n}")),
            capture_method: "manual".into(),
            amount_captured: captured,
        };
        let charge = |n: u8, status: &str| LedgerEntry {
            protocol: "stripe".into(),
            provider_id: format!("pi_{n}"),
            idempotency_key: None,
            attempt_id: Some(format!("pay_{n}")),
            order_id: Some(format!("ord_{n}")),
            merchant_id: None,
            amount: 1000,
            currency: "usd".into(),
            payment_method: None,
            status: status.into(),
            created: 0,
        };
        let hold = |n: u8, status: &str, captured: i64| HoldEntry {
            protocol: "stripe".into(),
            provider_id: format!("pi_{n}"),
            idempotency_key: None,
            attempt_id: Some(format!("pay_{n}")),
            order_id: Some(format!("ord_{n}")),
            merchant_id: None,
            amount: 1000,
            currency: "usd".into(),
            status: status.into(),
            captured,
            created: 0,
        };
        let capture = |n: u8, amount: i64| CaptureEntry {
            protocol: "stripe".into(),
            provider_id: format!("pi_{n}"),
            capture_id: None,
            idempotency_key: Some(format!("payorch_hop_{n}")),
            attempt_id: Some(format!("pay_{n}")),
            reference: None,
            amount,
            released: 1000 - amount,
            currency: "usd".into(),
            status: "succeeded".into(),
            reason: None,
            created: 0,
        };
        let story = |through: &[&str]| {
            let mut at: Option<String> = None;
            through
                .iter()
                .map(|to| {
                    let step = (at.clone(), (*to).to_owned());
                    at = Some((*to).to_owned());
                    step
                })
                .collect::<Vec<_>>()
        };
        let facts = Facts {
            attempts: vec![
                attempt(1, "succeeded", Some(1000)),
                attempt(2, "succeeded", Some(400)),
                attempt(3, "canceled", None),
                attempt(4, "authorized", None),
            ],
            attempt_transitions: HashMap::from([
                (
                    "pay_1".into(),
                    story(&["created", "authorized", "succeeded"]),
                ),
                (
                    "pay_2".into(),
                    story(&["created", "pending", "authorized", "succeeded"]),
                ),
                (
                    "pay_3".into(),
                    story(&["created", "authorized", "canceled"]),
                ),
                ("pay_4".into(), story(&["created", "pending", "authorized"])),
            ]),
            charges: vec![
                charge(1, "succeeded"),
                charge(2, "succeeded"),
                charge(3, "canceled"),
                charge(4, "requires_capture"),
            ],
            holds: vec![
                hold(1, "captured", 1000),
                hold(2, "captured", 400),
                hold(3, "voided", 0),
                hold(4, "held", 0),
            ],
            captures: vec![capture(1, 1000), capture(2, 400)],
            voids: vec![VoidEntry {
                protocol: "stripe".into(),
                provider_id: "pi_3".into(),
                void_id: None,
                idempotency_key: Some("payorch_hop_3".into()),
                attempt_id: Some("pay_3".into()),
                reference: None,
                kind: "cancel".into(),
                amount: 1000,
                currency: "usd".into(),
                reason: None,
                created: 0,
            }],
            ..Facts::default()
        };
        let operation = |n: u8, kind: &str, amount: Option<i64>| Operation {
            id: format!("hop_{n}"),
            payment_id: format!("pay_{n}"),
            kind: kind.into(),
            status: "succeeded".into(),
            amount,
            provider_key: format!("payorch_hop_{n}"),
            key: Some(format!("k{n}-{kind}")),
            reason: None,
        };
        let holds = HoldFacts {
            operations: vec![
                operation(1, "capture", Some(1000)),
                operation(2, "capture", Some(400)),
                operation(3, "void", None),
            ],
            calls: HashMap::from([
                ("hop_1".into(), 1),
                ("hop_2".into(), 3),
                ("hop_3".into(), 2),
            ]),
        };
        let intent = |n: u8, ask: Option<HoldAsk>, amount: Option<i64>| Intent {
            key: format!("k{n}"),
            method: "pm_card_visa",
            manual: true,
            payment_ids: BTreeSet::from([format!("pay_{n}")]),
            status: Some("authorized".into()),
            hold: ask.map(|ask| HoldIntent {
                key: format!(
                    "k{n}-{}",
                    if ask == HoldAsk::Void {
                        "void"
                    } else {
                        "capture"
                    }
                ),
                ask,
                operation_ids: BTreeSet::from([format!("hop_{n}")]),
                outcome: Some("succeeded".into()),
                amount,
            }),
            ..Intent::default()
        };
        let mut abandoned = intent(4, None, None);
        abandoned.abandoned = true;
        abandoned.status = None;
        let intents = vec![
            intent(1, Some(HoldAsk::CaptureAll), Some(1000)),
            intent(2, Some(HoldAsk::CapturePart(400)), Some(400)),
            intent(3, Some(HoldAsk::Void), None),
            abandoned,
        ];
        (facts, holds, intents)
    }

    fn found(change: impl FnOnce(&mut Facts, &mut HoldFacts, &mut Vec<Intent>)) -> HoldFindings {
        let (mut facts, mut holds, mut intents) = good();
        change(&mut facts, &mut holds, &mut intents);
        judge(&facts, &holds, &intents).0
    }

    fn hold_of(intents: &mut [Intent], n: usize) -> &mut HoldIntent {
        intents[n].hold.as_mut().expect("a hold intent")
    }

    #[test]
    fn a_good_run_finds_nothing_and_counts_what_it_did() {
        let (facts, holds, intents) = good();
        let (found, figures) = judge(&facts, &holds, &intents);
        assert_eq!(found, HoldFindings::default());
        // The run's other checks take holds too: told `authorized`, then captured or voided.
        assert_eq!(
            crate::checks::judge(&facts, &intents),
            crate::checks::Findings::default()
        );
        assert_eq!(
            figures,
            HoldFigures {
                manual_intents: 4,
                holds: 4,
                captures: 2,
                partial_captures: 1,
                voids: 1,
                still_held: 1,
                resends: 3,
            }
        );
    }

    #[test]
    fn a_second_capture_of_a_hold_is_found_and_has_no_operation() {
        let findings = found(|facts, _, _| {
            let mut again = facts.captures[0].clone();
            again.idempotency_key = Some("payorch_hop_other".into());
            facts.captures.push(again);
        });
        assert_eq!(findings.second_captures, 1);
        assert_eq!(findings.moves_without_operation, 1);
        // 2,000 taken from a hold of 1,000.
        assert_eq!(findings.captured_over_authorized, 1);
    }

    #[test]
    fn a_capture_of_a_voided_hold_is_found() {
        let findings = found(|facts, _, _| {
            let mut capture = facts.captures[0].clone();
            capture.provider_id = "pi_3".into();
            capture.attempt_id = Some("pay_3".into());
            capture.idempotency_key = Some("payorch_hop_3".into());
            facts.captures.push(capture);
        });
        assert_eq!(findings.captures_of_voided, 1);
        // hop_3 is a void, not a capture.
        assert_eq!(findings.moves_without_operation, 1);
    }

    #[test]
    fn a_capture_told_succeeded_that_the_ledger_or_the_payment_disagrees_with_is_found() {
        let findings = found(|facts, _, _| {
            facts.captures.remove(1);
        });
        assert_eq!(findings.captures_not_as_told, 1);
        let findings = found(|facts, _, _| facts.captures[1].amount = 500);
        assert_eq!(findings.captures_not_as_told, 1);
        let findings = found(|facts, _, _| facts.attempts[1].amount_captured = Some(1000));
        assert_eq!(findings.captures_not_as_told, 1);
        // The ledger's hold took 400, the database says 1,000.
        assert_eq!(findings.holds_disagreeing, 1);
        let findings = found(|_, _, intents| hold_of(intents, 0).amount = Some(999));
        assert_eq!(findings.captures_not_as_told, 1);
    }

    #[test]
    fn a_void_told_succeeded_whose_hold_or_payment_is_not_released_is_found() {
        let findings = found(|facts, _, _| {
            facts.voids.clear();
            facts.holds[2].status = "held".into();
        });
        assert_eq!(findings.voids_not_as_told, 1);
        // And the provider still holds the money of a payment the database has canceled.
        assert_eq!(findings.holds_disagreeing, 1);
        let findings = found(|facts, _, _| facts.attempts[2].status = "authorized".into());
        assert_eq!(findings.voids_not_as_told, 1);
        assert_eq!(findings.holds_left_authorized, 1);
        assert_eq!(findings.holds_disagreeing, 1);
    }

    #[test]
    fn a_hold_left_authorized_and_an_operation_left_open_are_found() {
        let findings = found(|facts, holds, intents| {
            facts.attempts[0].status = "authorized".into();
            facts.attempts[0].amount_captured = None;
            holds.operations[0].status = "pending".into();
            hold_of(intents, 0).outcome = None;
        });
        assert_eq!(findings.holds_left_authorized, 1);
        assert_eq!(findings.operations_left_open, 1);
        assert_eq!(findings.hold_answers_lost, 1);
    }

    #[test]
    fn a_capture_beyond_the_hold_is_found_on_either_side() {
        let findings = found(|facts, _, _| facts.holds[0].captured = 1200);
        assert_eq!(findings.captured_over_authorized, 1);
        let findings = found(|facts, _, _| facts.attempts[0].amount_captured = Some(1200));
        assert_eq!(findings.captured_over_authorized, 1);
    }

    #[test]
    fn holds_the_ledger_and_the_database_tell_apart_are_found() {
        // Held at the provider, failed in the database: money held for nobody.
        let findings = found(|facts, _, _| facts.attempts[3].status = "failed".into());
        assert_eq!(findings.holds_disagreeing, 1);
        // Authorized in the database, no hold at the provider.
        let findings = found(|facts, _, _| {
            facts.holds.remove(3);
        });
        assert_eq!(findings.holds_disagreeing, 1);
    }

    #[test]
    fn a_hold_moved_that_no_client_asked_to_move_is_found() {
        let findings = found(|_, _, intents| intents[0].hold = None);
        assert_eq!(findings.holds_moved_unasked, 1);
    }

    #[test]
    fn a_hold_voided_by_a_technical_cancel_was_asked_for_by_its_deadline() {
        // pay_3's void, made by payorch for an outcome it never heard: nobody was told of
        // the hold, so nobody asked.
        let findings = found(|_, holds, intents| {
            intents[2].hold = None;
            holds.operations[2].key = None;
            holds.operations[2].reason = Some(TECHNICAL_CANCEL.into());
        });
        assert_eq!(findings.holds_moved_unasked, 0);
        // The same void for another reason is a hold moved unasked.
        let findings = found(|_, holds, intents| {
            intents[2].hold = None;
            holds.operations[2].key = None;
            holds.operations[2].reason = Some("voided".into());
        });
        assert_eq!(findings.holds_moved_unasked, 1);
    }

    #[test]
    fn lost_contradicted_split_and_refused_answers_are_found() {
        let findings = found(|_, _, intents| {
            hold_of(intents, 0).outcome = None;
            hold_of(intents, 1).outcome = Some("failed".into());
            hold_of(intents, 2).operation_ids.insert("hop_9".into());
        });
        assert_eq!(findings.hold_answers_lost, 1);
        assert_eq!(findings.hold_answers_contradicted, 1);
        assert_eq!(findings.split_operations, 1);
        // A second operation under one key is split too.
        let findings = found(|_, holds, _| {
            let mut again = holds.operations[0].clone();
            again.id = "hop_9".into();
            again.status = "failed".into();
            holds.operations.push(again);
        });
        assert_eq!(findings.split_operations, 1);
        // Told the hold was gone while nothing but its own operation finished it.
        let findings = found(|_, _, intents| {
            hold_of(intents, 0).outcome = Some("payment_not_capturable".into())
        });
        assert_eq!(findings.holds_refused, 1);
        let findings = found(|_, holds, intents| {
            hold_of(intents, 0).outcome = Some("payment_not_capturable".into());
            holds.operations[0].key = Some("someone-else".into());
        });
        assert_eq!(findings.holds_refused, 0);
    }
}
