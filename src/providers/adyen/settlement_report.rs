//! Adyen's record of money moved: the settlement details report, one CSV per payable batch
//! (`settlement_detail_report_batch_{n}.csv`, downloaded from
//! `/reports/download/MerchantAccount/{account}/` of the Customer Area host), read for the
//! settlement reconciliation (docs/operations/reconciliation.md). Batches are numbered from 1 and a batch's report
//! exists once the batch has closed: each read asks for the batches after the last one read
//! until one is not there yet (`404`).
//!
//! The columns are found by their names in the header line (Adyen lets an account add
//! columns and change their order): `Psp Reference` (the payment), `Merchant Reference`
//! (payorch's attempt id), `Modification Reference`, `Modification Merchant Reference` when
//! the account has it (payorch's refund id), `Type`, `Gross Currency`, `Gross Debit (GC)`,
//! `Gross Credit (GC)` (major units), `Creation Date` and `TimeZone`, and `Booking Date`
//! when the account has it. The `MerchantPayout` line closing a batch says when it closed:
//! the record is whole up to then.
//!
//! A line's `Creation Date` is when Adyen received the capture or refund, days before the
//! batch it is settled in closes. Entries are dated by when they entered the record (their
//! `Booking Date`, else the batch's close) so that a line settled late falls in a stretch
//! not yet compared; the creation date is kept beside as evidence (`occurred_at`).

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};

use super::AdyenProvider;
use crate::providers::http_call;
use crate::providers::settlement::{
    minor_units, EntryKind, SettlementEntry, SettlementPage, SettlementQuery, SettlementRead,
};
use crate::providers::ProviderOutcome;

/// At most this many batches in one read; the rest are read next time.
pub(crate) const BATCHES_PER_READ: i64 = 20;

/// The report's path of batch `n` under the base URL.
pub(crate) fn report_path(merchant_account: &str, batch: i64) -> Vec<String> {
    vec![
        "reports".into(),
        "download".into(),
        "MerchantAccount".into(),
        merchant_account.into(),
        format!("settlement_detail_report_batch_{batch}.csv"),
    ]
}

/// Where the reports are downloaded from: Adyen's Customer Area host (`ca-test.adyen.com`,
/// `ca-live.adyen.com`), the one its Disputes API is on (`with_disputes_host`); unset, the
/// provider's own URL, as the sandbox serves both.
fn report_host(provider: &AdyenProvider) -> reqwest::Url {
    let mut host = provider.disputes_url.clone();
    if let Ok(mut path) = host.path_segments_mut() {
        for _ in super::disputes::DISPUTES_PATH {
            path.pop();
        }
    }
    host
}

/// Reads the batches after the query's position (the last batch read), or from its first
/// batch before any read.
pub(super) async fn read(provider: &AdyenProvider, query: &SettlementQuery) -> SettlementRead {
    let last = match query.position.as_deref().map(str::parse::<i64>) {
        None => query.first_batch.max(1) - 1,
        Some(Ok(n)) if n >= 0 => n,
        Some(_) => return SettlementRead::unread("not an Adyen batch position"),
    };
    let mut entries = Vec::new();
    let mut read_through = None;
    let mut latency = Duration::ZERO;
    let mut http_status = None;
    let mut position = last;
    for batch in last + 1..=last + BATCHES_PER_READ {
        let segments = report_path(&provider.merchant_account, batch);
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let request = provider
            .client
            .get(http_call::join(&report_host(provider), &segments))
            .header("X-API-Key", provider.api_key.expose());
        let mut report = None;
        let mut closed = true;
        let call = provider
            .client
            .send(
                "adyen",
                "settlement_report",
                request,
                |status, body| match status {
                    200..=299 => match parse_report(body, batch) {
                        Ok(read) => {
                            report = Some(read);
                            ProviderOutcome::NotFound
                        }
                        Err(reason) => ProviderOutcome::Unknown { reason },
                    },
                    404 => {
                        closed = false;
                        ProviderOutcome::NotFound
                    }
                    _ => ProviderOutcome::Unknown {
                        reason: format!("HTTP {status}"),
                    },
                },
            )
            .await;
        latency += call.latency;
        http_status = call.http_status;
        if !closed {
            break;
        }
        let Some(report) = report else {
            let reason = match call.outcome {
                ProviderOutcome::Unknown { reason } | ProviderOutcome::Unavailable { reason } => {
                    reason
                }
                other => other.label().to_owned(),
            };
            // The batches read before this one still count.
            if position == last {
                return SettlementRead {
                    result: Err(format!("batch {batch}: {reason}")),
                    http_status,
                    latency,
                };
            }
            tracing::warn!(batch, %reason, "an Adyen settlement batch could not be read; next time");
            break;
        };
        entries.extend(report.entries);
        // Whole through the close itself: the batch's entries are dated by it, and the next
        // batch's by a later one.
        read_through = report
            .closed_at
            .map(|at| at + chrono::Duration::seconds(1))
            .or(read_through);
        position = batch;
    }
    SettlementRead {
        result: Ok(SettlementPage {
            entries,
            position: position.to_string(),
            read_through,
            dated_by_batch: true,
        }),
        http_status,
        latency,
    }
}

/// One batch's report, read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Report {
    pub entries: Vec<SettlementEntry>,
    /// When the batch closed: its `MerchantPayout` line's date, else its latest line's.
    pub closed_at: Option<DateTime<Utc>>,
}

/// Batch `batch`'s CSV. Lines of a payment whose type payorch compares become entries; fees,
/// payouts and corrections are not kept. A line that cannot be read leaves the batch unread.
pub(crate) fn parse_report(body: &[u8], batch: i64) -> Result<Report, String> {
    let text = std::str::from_utf8(body).map_err(|_| "a report that is not UTF-8".to_owned())?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = split_csv(lines.next().ok_or("an empty report")?);
    let column = |name: &str| header.iter().position(|h| h.trim() == name);
    let required = |name: &str| column(name).ok_or_else(|| format!("no column {name:?}"));
    let psp = required("Psp Reference")?;
    let merchant_ref = required("Merchant Reference")?;
    let kind_col = required("Type")?;
    let modification = required("Modification Reference")?;
    let currency_col = required("Gross Currency")?;
    let debit_col = required("Gross Debit (GC)")?;
    let credit_col = required("Gross Credit (GC)")?;
    let date_col = required("Creation Date")?;
    let booking_col = column("Booking Date");
    let zone_col = column("TimeZone");
    let modification_ref = column("Modification Merchant Reference");
    let mut report = Report {
        entries: Vec::new(),
        closed_at: None,
    };
    // The lines' own booking dates, by entry; the rest are dated by the batch's close.
    let mut booked: Vec<Option<DateTime<Utc>>> = Vec::new();
    let mut latest: Option<DateTime<Utc>> = None;
    // Two identical lines in one batch (two partial captures Adyen settles under one
    // modification reference) are two entries: the second and later get their count.
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (index, line) in lines.enumerate() {
        let cells = split_csv(line);
        let cell = |i: usize| cells.get(i).map(|c| c.trim()).unwrap_or("");
        let unreadable = |what: &str| format!("line {}: {what}", index + 2);
        let kind_word = cell(kind_col);
        let zone = zone_col.map(cell).unwrap_or("UTC");
        let created_at = || {
            booked_at(cell(date_col), zone)
                .ok_or_else(|| unreadable("an unreadable Creation Date or TimeZone"))
        };
        if kind_word == "MerchantPayout" {
            report.closed_at = Some(created_at()?);
            continue;
        }
        let kind = match kind_word {
            "Settled" => EntryKind::Charge,
            "Refunded" | "RefundedReversed" => EntryKind::Refund,
            "Chargeback" | "SecondChargeback" => EntryKind::DisputeWithdrawal,
            "ChargebackReversed" => EntryKind::DisputeReinstatement,
            _ => continue,
        };
        let currency = cell(currency_col).to_ascii_lowercase();
        if currency.len() != 3 {
            return Err(unreadable("no Gross Currency"));
        }
        let amount_of = |i: usize| match cell(i) {
            "" => Some(0),
            value => minor_units(value, &currency),
        };
        let (Some(debit), Some(credit)) = (amount_of(debit_col), amount_of(credit_col)) else {
            return Err(unreadable("an unreadable gross amount"));
        };
        let payment = cell(psp);
        let modification_reference = cell(modification);
        let reference = match kind {
            EntryKind::Charge => Some(cell(merchant_ref)),
            EntryKind::Refund => modification_ref.map(cell),
            _ => None,
        }
        .filter(|r| !r.is_empty())
        .map(str::to_owned);
        let subject = if modification_reference.is_empty() {
            format!("line_{}", index + 2)
        } else {
            modification_reference.to_owned()
        };
        let mut entry_id = format!("batch_{batch}:{kind_word}:{subject}");
        let count = seen.entry(entry_id.clone()).or_default();
        *count += 1;
        if *count > 1 {
            entry_id = format!("{entry_id}:{count}");
        }
        let occurred_at = created_at()?;
        let booking = match booking_col.map(cell) {
            None | Some("") => None,
            Some(date) => Some(
                booked_at(date, zone).ok_or_else(|| unreadable("an unreadable Booking Date"))?,
            ),
        };
        latest = latest.max(Some(booking.unwrap_or(occurred_at)));
        booked.push(booking);
        report.entries.push(SettlementEntry {
            provider_entry_id: entry_id,
            kind,
            provider_payment_id: (!payment.is_empty()).then(|| payment.to_owned()),
            provider_source_id: (!modification_reference.is_empty())
                .then(|| modification_reference.to_owned()),
            amount: credit - debit,
            currency,
            booked_at: occurred_at,
            occurred_at,
            reference,
            batch: Some(batch),
        });
    }
    report.closed_at = report.closed_at.or(latest);
    if let Some(closed_at) = report.closed_at {
        for (entry, booking) in report.entries.iter_mut().zip(booked) {
            entry.booked_at = booking.unwrap_or(closed_at).max(entry.occurred_at);
        }
    }
    Ok(report)
}

/// `Creation Date` (`YYYY-MM-DD HH:MM:SS`) in the account's time zone as the report names
/// it. Only zones whose offset the name fixes are read: an abbreviation several zones share
/// (`IST`: India +5:30, Ireland +1, Israel +2; `CST`: China +8 or US Central -6) is refused,
/// and an account whose reports use one is told to set its report time zone to UTC
/// (docs/operations/reconciliation.md).
fn booked_at(date: &str, zone: &str) -> Option<DateTime<Utc>> {
    let offset_minutes = match zone {
        "UTC" | "GMT" | "WET" | "" => 0,
        "CET" | "BST" | "WEST" => 60,
        "CEST" | "EET" => 120,
        "EEST" | "MSK" => 180,
        "EDT" => -240,
        "EST" | "CDT" => -300,
        "MDT" => -360,
        "MST" | "PDT" => -420,
        "PST" => -480,
        _ => return None,
    };
    let local = NaiveDateTime::parse_from_str(date, "%Y-%m-%d %H:%M:%S").ok()?;
    let utc = local - chrono::Duration::minutes(offset_minutes);
    Some(Utc.from_utc_datetime(&utc))
}

/// One CSV line's cells: commas split, double quotes group (a doubled quote is one).
fn split_csv(line: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => cells.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    cells.push(cell);
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "Company Account,Merchant Account,Psp Reference,Merchant Reference,\
        Payment Method,Creation Date,TimeZone,Type,Modification Reference,Gross Currency,\
        Gross Debit (GC),Gross Credit (GC),Exchange Rate,Net Currency,Net Debit (NC),\
        Net Credit (NC),Commission (NC),Markup (NC),Scheme Fees (NC),Interchange (NC),\
        Payment Method Variant,Modification Merchant Reference,Batch Number";

    fn report(lines: &[&str]) -> Vec<u8> {
        std::iter::once(HEADER)
            .chain(lines.iter().copied())
            .collect::<Vec<_>>()
            .join("\n")
            .into_bytes()
    }

    #[test]
    fn a_batch_reads_into_entries_in_minor_units() {
        let body = report(&[
            "Co,Acc,PSP0001,att-1,visa,2026-11-27 11:26:49,CET,Settled,PSP0002,EUR,,15.00,1,EUR,,14.80,,,,,visa,,4",
            "Co,Acc,PSP0001,att-1,visa,2026-11-27 12:00:00,UTC,Refunded,PSP0003,EUR,5.00,,1,EUR,5.00,,,,,,visa,ref-1,4",
            "Co,Acc,PSP0001,att-1,visa,2026-11-27 12:00:00,UTC,Chargeback,PSP0004,EUR,10.00,,1,EUR,10.00,,,,,,visa,,4",
            "Co,Acc,PSP0001,att-1,visa,2026-11-27 12:30:00,UTC,ChargebackReversed,PSP0005,EUR,,10.00,1,EUR,,10.00,,,,,visa,,4",
            "Co,Acc,,,,2026-11-27 13:00:00,UTC,Fee,\"Transaction Fees, November\",,,,,EUR,0.20,,,,,,,,4",
            "Co,Acc,,,,2026-11-27 14:00:00,UTC,MerchantPayout,,,,,,EUR,19.80,,,,,,,,4",
        ]);
        let read = parse_report(&body, 4).unwrap();
        assert_eq!(read.entries.len(), 4);
        let settled = &read.entries[0];
        assert_eq!(settled.kind, EntryKind::Charge);
        assert_eq!(settled.amount, 1500);
        assert_eq!(settled.currency, "eur");
        assert_eq!(settled.provider_payment_id.as_deref(), Some("PSP0001"));
        assert_eq!(settled.reference.as_deref(), Some("att-1"));
        assert_eq!(settled.provider_entry_id, "batch_4:Settled:PSP0002");
        // Dated by the batch's close; its creation kept beside.
        assert_eq!(
            settled.occurred_at.to_rfc3339(),
            "2026-11-27T10:26:49+00:00"
        );
        assert_eq!(settled.booked_at.to_rfc3339(), "2026-11-27T14:00:00+00:00");
        assert_eq!(settled.batch, Some(4));
        let refunded = &read.entries[1];
        assert_eq!((refunded.kind, refunded.amount), (EntryKind::Refund, -500));
        assert_eq!(refunded.reference.as_deref(), Some("ref-1"));
        assert_eq!(read.entries[2].kind, EntryKind::DisputeWithdrawal);
        assert_eq!(read.entries[2].amount, -1000);
        assert_eq!(read.entries[3].kind, EntryKind::DisputeReinstatement);
        assert_eq!(read.entries[3].amount, 1000);
        assert_eq!(
            read.closed_at.unwrap().to_rfc3339(),
            "2026-11-27T14:00:00+00:00"
        );
    }

    #[test]
    fn an_unreadable_line_leaves_the_batch_unread() {
        let bad_amount = report(&[
            "Co,Acc,P1,a,visa,2026-11-27 11:00:00,UTC,Settled,P2,EUR,,15.005,,,,,,,,,,,1",
        ]);
        assert!(parse_report(&bad_amount, 1).is_err());
        let bad_zone =
            report(&["Co,Acc,P1,a,visa,2026-11-27 11:00:00,XYZ,Settled,P2,EUR,,15.00,,,,,,,,,,,1"]);
        assert!(parse_report(&bad_zone, 1).is_err());
        assert!(parse_report(b"Psp Reference,Type\n", 1).is_err());
    }

    #[test]
    fn a_line_settled_batches_later_is_dated_by_its_batch() {
        // Captured on the 20th, settled in the batch closing on the 27th.
        let body = report(&[
            "Co,Acc,P1,a,visa,2026-11-20 09:00:00,UTC,Settled,P2,EUR,,15.00,,,,,,,,,,,9",
            "Co,Acc,,,,2026-11-27 02:00:00,UTC,MerchantPayout,,,,,,EUR,15.00,,,,,,,,9",
        ]);
        let read = parse_report(&body, 9).unwrap();
        assert_eq!(
            read.entries[0].booked_at.to_rfc3339(),
            "2026-11-27T02:00:00+00:00"
        );
        assert_eq!(
            read.entries[0].occurred_at.to_rfc3339(),
            "2026-11-20T09:00:00+00:00"
        );
        // A Booking Date, when the account's report has one, dates each line.
        let header = format!("{HEADER},Booking Date");
        let body = format!(
            "{header}\nCo,Acc,P1,a,visa,2026-11-20 09:00:00,UTC,Settled,P2,EUR,,15.00,,,,,,,,,,,9,\
             2026-11-26 08:00:00\n"
        );
        let read = parse_report(body.as_bytes(), 9).unwrap();
        assert_eq!(
            read.entries[0].booked_at.to_rfc3339(),
            "2026-11-26T08:00:00+00:00"
        );
        assert_eq!(read.closed_at, Some(read.entries[0].booked_at));
    }

    #[test]
    fn two_identical_lines_are_two_entries() {
        let line = "Co,Acc,P1,a,visa,2026-11-27 11:00:00,UTC,Settled,P2,EUR,,15.00,,,,,,,,,,,3";
        let read = parse_report(&report(&[line, line]), 3).unwrap();
        let ids: Vec<&str> = read
            .entries
            .iter()
            .map(|e| e.provider_entry_id.as_str())
            .collect();
        assert_eq!(ids, vec!["batch_3:Settled:P2", "batch_3:Settled:P2:2"]);
    }

    #[test]
    fn an_ambiguous_zone_is_refused() {
        assert_eq!(booked_at("2026-11-27 11:00:00", "IST"), None);
        assert_eq!(booked_at("2026-11-27 11:00:00", "CST"), None);
        assert_eq!(
            booked_at("2026-11-27 11:00:00", "CET")
                .unwrap()
                .to_rfc3339(),
            "2026-11-27T10:00:00+00:00"
        );
    }

    #[test]
    fn quoted_cells_keep_their_commas() {
        assert_eq!(
            split_csv("a,\"b, c\",\"d\"\"e\""),
            vec!["a", "b, c", "d\"e"]
        );
    }
}
