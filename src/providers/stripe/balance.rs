//! Stripe's record of money moved: `GET /v1/balance_transactions`, read for the settlement
//! reconciliation (docs/operations/reconciliation.md). Each transaction is read with its
//! source expanded (`expand[]=data.source`), since only the charge, refund or dispute names
//! the payment intent and carries payorch's metadata, and that source's intent expanded too
//! (`expand[]=data.source.payment_intent`, an expandable field of the pinned contract's
//! charge, refund and dispute): payorch writes the attempt id on the intent, and a charge
//! Stripe made for it need not carry the intent's metadata.
//!
//! The list is read over windows of `created` seconds, `[from, until)`, an hour each, every
//! page of each: Stripe's lists are read-after-write, so a window read whole holds every
//! transaction created in it, and the next read starts where the last whole window ended.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use reqwest::Method;
use serde_json::Value;

use super::{StripeProvider, API_VERSION};
use crate::providers::settlement::{
    EntryKind, SettlementEntry, SettlementPage, SettlementQuery, SettlementRead,
};
use crate::providers::ProviderOutcome;

/// At most this many pages of 100 transactions in one window (an hour): a window busier than
/// that is not read at all (its first pages would leave a hole at its old end, Stripe listing
/// newest first), and the read stops at its start.
pub(crate) const BALANCE_PAGES: usize = 1000;

/// One page of the list, read.
#[derive(Debug)]
pub(crate) struct BalancePage {
    pub entries: Vec<SettlementEntry>,
    pub has_more: bool,
    pub last_id: Option<String>,
}

/// How many seconds of `created` one window spans: a round reads its whole stretch window by
/// window, so that a busy hour is read alone and a later one that cannot be read leaves the
/// earlier ones read.
pub(crate) const WINDOW_SECS: i64 = 3600;

/// Reads every transaction created in `[from, until)`, window by window: `from` the query's
/// position (a Unix second), or its `since` before any read. A window that cannot be read
/// ends the read at its start (the windows before it count); the first one, the whole read.
pub(super) async fn read(provider: &StripeProvider, query: &SettlementQuery) -> SettlementRead {
    let from = match &query.position {
        Some(position) => match position.parse::<i64>() {
            Ok(at) => at,
            Err(_) => return SettlementRead::unread(format!("not a Stripe position: {position}")),
        },
        None => query.since.timestamp(),
    };
    let until = query.until.timestamp().max(from);
    let mut entries = Vec::new();
    let mut latency = Duration::ZERO;
    let mut http_status = None;
    let mut read_to = from;
    while read_to < until {
        let end = (read_to + WINDOW_SECS).min(until);
        let window = read_window(provider, read_to, end).await;
        latency += window.latency;
        http_status = window.http_status;
        match window.result {
            Ok(page) => {
                entries.extend(page.entries);
                read_to = end;
            }
            Err(reason) if read_to == from => {
                return SettlementRead {
                    result: Err(reason),
                    http_status,
                    latency,
                }
            }
            Err(reason) => {
                tracing::warn!(%reason, "a window of Stripe's balance transactions could not be read; next time");
                break;
            }
        }
    }
    SettlementRead {
        result: Ok(SettlementPage {
            entries,
            position: read_to.to_string(),
            read_through: Utc.timestamp_opt(read_to, 0).single(),
            dated_by_batch: false,
        }),
        http_status,
        latency,
    }
}

/// Every page of the transactions created in `[from, until)`.
async fn read_window(provider: &StripeProvider, from: i64, until: i64) -> SettlementRead {
    let mut entries = Vec::new();
    let mut latency = Duration::ZERO;
    let mut http_status = None;
    let mut starting_after: Option<String> = None;
    for _ in 0..BALANCE_PAGES {
        let mut params: Vec<(&str, String)> = vec![
            ("created[gte]", from.to_string()),
            ("created[lt]", until.to_string()),
            ("limit", "100".to_owned()),
            ("expand[]", "data.source".to_owned()),
            ("expand[]", "data.source.payment_intent".to_owned()),
        ];
        if let Some(after) = starting_after.take() {
            params.push(("starting_after", after));
        }
        let request = provider
            .client
            .request(Method::GET, provider.url(&["v1", "balance_transactions"]))
            .query(&params)
            .bearer_auth(provider.secret.expose())
            .header("Stripe-Version", API_VERSION);
        let mut page = None;
        let call = provider
            .client
            .send(
                "stripe",
                "balance_transactions",
                request,
                |status, body| match status {
                    200..=299 => match balance_page(body) {
                        Ok(read) => {
                            page = Some(read);
                            ProviderOutcome::NotFound
                        }
                        Err(reason) => ProviderOutcome::Unknown { reason },
                    },
                    _ => ProviderOutcome::Unknown {
                        reason: format!("HTTP {status}: {}", String::from_utf8_lossy(body)),
                    },
                },
            )
            .await;
        latency += call.latency;
        http_status = call.http_status;
        let Some(page) = page else {
            let reason = match call.outcome {
                ProviderOutcome::Unknown { reason } | ProviderOutcome::Unavailable { reason } => {
                    reason
                }
                other => other.label().to_owned(),
            };
            return SettlementRead {
                result: Err(reason),
                http_status,
                latency,
            };
        };
        entries.extend(page.entries);
        match (page.has_more, page.last_id) {
            (true, Some(last)) => starting_after = Some(last),
            (true, None) => {
                return SettlementRead {
                    result: Err("an empty page of balance transactions that says there are \
                                 more"
                        .into()),
                    http_status,
                    latency,
                }
            }
            (false, _) => {
                let read_through = Utc.timestamp_opt(until, 0).single();
                return SettlementRead {
                    result: Ok(SettlementPage {
                        entries,
                        position: until.to_string(),
                        read_through,
                        dated_by_batch: false,
                    }),
                    http_status,
                    latency,
                };
            }
        }
    }
    SettlementRead {
        result: Err(format!(
            "more than {BALANCE_PAGES} pages of balance transactions in one window: not read"
        )),
        http_status,
        latency,
    }
}

/// A 2xx page of balance transactions. One that cannot be read leaves the page unread.
pub(crate) fn balance_page(body: &[u8]) -> Result<BalancePage, String> {
    #[derive(serde::Deserialize)]
    struct Page {
        data: Vec<Value>,
        has_more: bool,
    }
    let page: Page = serde_json::from_slice(body)
        .map_err(|e| format!("2xx with an unreadable list of balance transactions: {e}"))?;
    let last_id = page
        .data
        .last()
        .and_then(|t| t.get("id"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let entries = page
        .data
        .iter()
        .map(entry_of)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(BalancePage {
        entries,
        has_more: page.has_more,
        last_id,
    })
}

/// One balance transaction as a [`SettlementEntry`].
pub(crate) fn entry_of(txn: &Value) -> Result<SettlementEntry, String> {
    let text = |v: &Value, field: &str| v.get(field).and_then(Value::as_str).map(str::to_owned);
    let id = text(txn, "id").ok_or("a balance transaction without an id")?;
    let unreadable = |what: &str| format!("balance transaction {id}: {what}");
    let kind_word = text(txn, "type").ok_or_else(|| unreadable("no type"))?;
    let amount = txn
        .get("amount")
        .and_then(Value::as_i64)
        .ok_or_else(|| unreadable("no amount"))?;
    let currency = text(txn, "currency")
        .ok_or_else(|| unreadable("no currency"))?
        .to_ascii_lowercase();
    let created = txn
        .get("created")
        .and_then(Value::as_i64)
        .and_then(|at| Utc.timestamp_opt(at, 0).single())
        .ok_or_else(|| unreadable("no created"))?;
    // `source` expanded; a bare id (not expanded) or null names no payment.
    let source = txn.get("source").filter(|s| s.is_object());
    let object = source.and_then(|s| text(s, "object"));
    let kind = match (kind_word.as_str(), object.as_deref()) {
        ("charge" | "payment", _) => EntryKind::Charge,
        ("refund" | "payment_refund" | "refund_failure", _) => EntryKind::Refund,
        ("adjustment", Some("dispute")) if amount < 0 => EntryKind::DisputeWithdrawal,
        ("adjustment", Some("dispute")) => EntryKind::DisputeReinstatement,
        _ => EntryKind::Other,
    };
    let id_of = |v: Option<&Value>| match v {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Object(o)) => o.get("id").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    };
    let payment = source.and_then(|s| id_of(s.get("payment_intent")));
    let metadata = |field: &str| {
        source
            .and_then(|s| s.get("metadata"))
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let intent_metadata = |field: &str| {
        source
            .and_then(|s| s.get("payment_intent"))
            .and_then(|i| i.get("metadata"))
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let reference = match kind {
        EntryKind::Charge => metadata("attempt_id").or_else(|| intent_metadata("attempt_id")),
        EntryKind::Refund => metadata("refund_id"),
        _ => None,
    };
    // The transaction's amount is in the balance's currency; a charge presented in another
    // is compared in its own, the source's, with the transaction's sign: what the charge
    // took (`amount_captured`: a hold captured in part took less than its `amount`), else
    // the source's `amount` (a refund's, a dispute's).
    let source_amount = |s: &Value| {
        let captured = (object.as_deref() == Some("charge"))
            .then(|| s.get("amount_captured").and_then(Value::as_i64))
            .flatten();
        captured.or_else(|| s.get("amount")?.as_i64())
    };
    let (amount, currency) = match source
        .and_then(|s| Some((source_amount(s)?, text(s, "currency")?.to_ascii_lowercase())))
    {
        Some((source_amount, source_currency)) if source_currency != currency => {
            (source_amount.abs() * amount.signum(), source_currency)
        }
        _ => (amount, currency),
    };
    Ok(SettlementEntry {
        provider_entry_id: id,
        kind,
        provider_payment_id: payment,
        provider_source_id: source.and_then(|s| text(s, "id")),
        amount,
        currency,
        booked_at: created,
        occurred_at: created,
        reference,
        batch: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn txn(kind: &str, amount: i64, source: Value) -> Value {
        json!({"id": "txn_1", "object": "balance_transaction", "type": kind, "amount": amount,
               "currency": "eur", "created": 1_700_000_000, "source": source})
    }

    #[test]
    fn a_charge_names_its_intent_and_attempt() {
        let e = entry_of(&txn(
            "charge",
            1500,
            json!({"id": "ch_1", "object": "charge", "payment_intent": "pi_1", "amount": 1500,
                   "currency": "eur", "metadata": {"attempt_id": "a-1"}}),
        ))
        .unwrap();
        assert_eq!(e.kind, EntryKind::Charge);
        assert_eq!(e.provider_payment_id.as_deref(), Some("pi_1"));
        assert_eq!(e.provider_source_id.as_deref(), Some("ch_1"));
        assert_eq!(e.reference.as_deref(), Some("a-1"));
        assert_eq!((e.amount, e.currency.as_str()), (1500, "eur"));
        assert_eq!(e.booked_at.timestamp(), 1_700_000_000);
    }

    #[test]
    fn a_charge_without_metadata_names_its_attempt_by_its_intent() {
        let e = entry_of(&txn(
            "charge",
            1500,
            json!({"id": "ch_1", "object": "charge", "amount": 1500, "currency": "eur",
                   "metadata": {},
                   "payment_intent": {"id": "pi_1", "object": "payment_intent",
                                      "metadata": {"attempt_id": "pay_1"}}}),
        ))
        .unwrap();
        assert_eq!(e.provider_payment_id.as_deref(), Some("pi_1"));
        assert_eq!(e.reference.as_deref(), Some("pay_1"));
    }

    #[test]
    fn refunds_disputes_and_the_rest() {
        let refund = entry_of(&txn(
            "refund",
            -500,
            json!({"id": "re_1", "object": "refund", "payment_intent": {"id": "pi_1"},
                   "amount": 500, "currency": "eur", "metadata": {"refund_id": "r-1"}}),
        ))
        .unwrap();
        assert_eq!(refund.kind, EntryKind::Refund);
        assert_eq!(refund.amount, -500);
        assert_eq!(refund.provider_payment_id.as_deref(), Some("pi_1"));
        assert_eq!(refund.reference.as_deref(), Some("r-1"));
        let dispute = json!({"id": "du_1", "object": "dispute", "payment_intent": "pi_1",
                             "amount": 700, "currency": "eur"});
        let taken = entry_of(&txn("adjustment", -700, dispute.clone())).unwrap();
        assert_eq!(taken.kind, EntryKind::DisputeWithdrawal);
        let given = entry_of(&txn("adjustment", 700, dispute)).unwrap();
        assert_eq!(given.kind, EntryKind::DisputeReinstatement);
        let payout = entry_of(&txn("payout", -9000, json!("po_1"))).unwrap();
        assert_eq!(payout.kind, EntryKind::Other);
        assert_eq!(payout.provider_payment_id, None);
    }

    #[test]
    fn a_charge_in_another_currency_is_read_in_its_own() {
        let mut t = txn(
            "charge",
            1100,
            json!({"id": "ch_1", "object": "charge", "payment_intent": "pi_1", "amount": 1000,
                   "currency": "usd"}),
        );
        t["exchange_rate"] = json!(1.1);
        let e = entry_of(&t).unwrap();
        assert_eq!((e.amount, e.currency.as_str()), (1000, "usd"));
    }

    #[test]
    fn a_foreign_charge_captured_in_part_is_what_it_took() {
        // A 100.00 usd hold captured for 60.00, booked as 55.20 eur.
        let mut t = txn(
            "charge",
            5520,
            json!({"id": "ch_1", "object": "charge", "payment_intent": "pi_1", "amount": 10000,
                   "amount_captured": 6000, "currency": "usd"}),
        );
        t["exchange_rate"] = json!(0.92);
        let e = entry_of(&t).unwrap();
        assert_eq!((e.amount, e.currency.as_str()), (6000, "usd"));
        // Its refund of 20.00: the refund's own amount.
        let refund = entry_of(&txn(
            "refund",
            -1840,
            json!({"id": "re_1", "object": "refund", "payment_intent": "pi_1", "amount": 2000,
                   "currency": "usd"}),
        ))
        .unwrap();
        assert_eq!((refund.amount, refund.currency.as_str()), (-2000, "usd"));
    }

    #[test]
    fn a_page_reads_whole_or_not_at_all() {
        let body = json!({"object": "list", "has_more": true, "data": [
            txn("charge", 1, json!(null))]});
        let page = balance_page(body.to_string().as_bytes()).unwrap();
        assert!(page.has_more);
        assert_eq!(page.last_id.as_deref(), Some("txn_1"));
        let bad = json!({"object": "list", "has_more": false, "data": [{"id": "txn_2"}]});
        assert!(balance_page(bad.to_string().as_bytes()).is_err());
    }
}
