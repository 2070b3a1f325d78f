//! The settlement records as each provider serves them (`settlement`), and the sandbox's own
//! control of them:
//!
//! - `GET /v1/balance_transactions` (Bearer): the Stripe face's entries, newest first, in a
//!   `created` window, paged by `starting_after`/`ending_before`, `expand[]=data.source`
//!   giving each its charge, refund or dispute (else its id).
//! - `GET /reports/download/MerchantAccount/{account}/settlement_detail_report_batch_{n}.csv`
//!   (`X-API-Key`): the Adyen face's settlement details report of batch `n`, `404` until the
//!   batch has closed; its last line the batch's `MerchantPayout`.
//! - `POST /__sandbox/settlement/forget`, `/invent`, `/close`: drop entries, add one, close
//!   the open Adyen batch (`{"every_secs": n}` also sets how often they close;
//!   `{"late_batches": k}` settles each line `k` batches after its creation's). And
//!   `GET /__sandbox/settlement`: the whole record of both faces.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::answers::{invalid_request, json as json_answer, refuse_unauthorized};
use super::listing::{Cursor, ListQuery};
use super::params::ParamError;
use super::settlement::{major_units, record, Booked, Forget, Invent};
use super::Sandbox;

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/v1/balance_transactions",
        web::get().to(balance_transactions),
    )
    .route(
        "/reports/download/MerchantAccount/{account}/{file}",
        web::get().to(report),
    )
    .route("/__sandbox/settlement", web::get().to(whole))
    .route("/__sandbox/settlement/forget", web::post().to(forget))
    .route("/__sandbox/settlement/invent", web::post().to(invent))
    .route("/__sandbox/settlement/close", web::post().to(close));
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

async fn balance_transactions(sb: web::Data<Sandbox>, req: HttpRequest) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    let query = match ListQuery::parse(
        req.query_string(),
        &["type", "source", "payout", "currency"],
    ) {
        Ok(query) => query,
        Err(e) => return invalid_request(e),
    };
    let expand = req.query_string().contains("data.source");
    // Newest first, as Stripe lists.
    let mut all: Vec<Booked> = record(&sb)
        .into_iter()
        .filter(|b| b.protocol == "stripe" && query.created.holds(b.created))
        .collect();
    all.reverse();
    let start = match &query.cursor {
        Cursor::Newest => 0,
        Cursor::After(id) | Cursor::Before(id) => match all.iter().position(|b| b.id == *id) {
            Some(at) if matches!(query.cursor, Cursor::After(_)) => at + 1,
            Some(at) => at.saturating_sub(query.limit),
            None => {
                return invalid_request(ParamError::new(
                    "resource_missing",
                    query.cursor.param(),
                    format!("No such balance transaction: '{id}'"),
                ))
            }
        },
    };
    let end = match &query.cursor {
        Cursor::Before(id) => all.iter().position(|b| b.id == *id).unwrap_or(0),
        _ => (start + query.limit).min(all.len()),
    };
    let data: Vec<Value> = all[start..end]
        .iter()
        .map(|b| balance_transaction(b, expand))
        .collect();
    let has_more = match query.cursor {
        Cursor::Before(_) => start > 0,
        _ => end < all.len(),
    };
    json_answer(
        StatusCode::OK,
        &json!({"object": "list", "data": data, "has_more": has_more,
                "url": "/v1/balance_transactions"}),
    )
}

/// A balance transaction of Stripe's `balance_transaction` schema.
fn balance_transaction(b: &Booked, expand: bool) -> Value {
    let (kind, category) = match b.kind.as_str() {
        "charge" => ("charge", "charge"),
        "refund" => ("refund", "refund"),
        "dispute_withdrawal" => ("adjustment", "dispute"),
        _ => ("adjustment", "dispute_reversal"),
    };
    let source = if !expand {
        json!(b.source)
    } else {
        let object = match b.kind.as_str() {
            "charge" => "charge",
            "refund" => "refund",
            _ => "dispute",
        };
        let metadata = match (object, &b.reference) {
            ("charge", Some(r)) => json!({"attempt_id": r}),
            ("refund", Some(r)) => json!({"refund_id": r}),
            _ => json!({}),
        };
        json!({"id": b.source, "object": object, "amount": b.amount.abs(),
               "currency": b.currency, "payment_intent": b.payment, "metadata": metadata})
    };
    json!({"id": b.id, "object": "balance_transaction", "amount": b.amount,
           "available_on": b.created, "created": b.created, "currency": b.currency,
           "description": null, "exchange_rate": null, "fee": 0, "fee_details": [],
           "net": b.amount, "reporting_category": category, "source": source,
           "status": "available", "type": kind})
}

const HEADER: &str = "Company Account,Merchant Account,Psp Reference,Merchant Reference,\
Payment Method,Creation Date,TimeZone,Type,Modification Reference,Gross Currency,\
Gross Debit (GC),Gross Credit (GC),Exchange Rate,Net Currency,Net Debit (NC),Net Credit (NC),\
Commission (NC),Markup (NC),Scheme Fees (NC),Interchange (NC),Payment Method Variant,\
Modification Merchant Reference,Batch Number";

async fn report(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    if let Some(refused) = super::adyen::refuse_unauthorized(&sb, &req) {
        return refused;
    }
    let (account, file) = path.into_inner();
    let batch = file
        .strip_prefix("settlement_detail_report_batch_")
        .and_then(|rest| rest.strip_suffix(".csv"))
        .and_then(|n| n.parse::<usize>().ok());
    let Some(((start, end), close)) = batch.and_then(|n| sb.settlement.batch(n, now())) else {
        return HttpResponse::NotFound().body("report not found");
    };
    let batch = batch.unwrap_or_default();
    let mut lines = vec![HEADER.to_owned()];
    let mut net = 0;
    let mut currency = String::from("EUR");
    for b in record(&sb)
        .into_iter()
        .filter(|b| b.protocol == "adyen" && start <= b.created && b.created < end)
    {
        let kind = match b.kind.as_str() {
            "charge" => "Settled",
            "refund" => "Refunded",
            "dispute_withdrawal" => "Chargeback",
            _ => "ChargebackReversed",
        };
        let amount = major_units(b.amount, &b.currency);
        let (debit, credit) = if b.amount < 0 {
            (amount, String::new())
        } else {
            (String::new(), amount)
        };
        let (merchant_reference, modification_reference) = match b.kind.as_str() {
            "charge" => (b.reference.clone().unwrap_or_default(), String::new()),
            "refund" => (String::new(), b.reference.clone().unwrap_or_default()),
            _ => (String::new(), String::new()),
        };
        currency = b.currency.to_ascii_uppercase();
        net += b.amount;
        lines.push(format!(
            "Sandbox,{account},{},{merchant_reference},visa,{},UTC,{kind},{},{currency},{debit},\
             {credit},1,{currency},{debit},{credit},,,,,visa,{modification_reference},{batch}",
            b.payment,
            date(b.created),
            b.source,
        ));
    }
    let payout = major_units(net, &currency);
    lines.push(format!(
        "Sandbox,{account},,,,{},UTC,MerchantPayout,,,,,,{currency},{payout},,,,,,,,{batch}",
        date(close),
    ));
    HttpResponse::Ok()
        .content_type("text/csv")
        .body(lines.join("\n") + "\n")
}

/// `YYYY-MM-DD HH:MM:SS` in UTC.
fn date(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|at| at.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

async fn whole(sb: web::Data<Sandbox>, req: HttpRequest) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    json_answer(StatusCode::OK, &json!({"data": record(&sb)}))
}

async fn forget(sb: web::Data<Sandbox>, req: HttpRequest, body: web::Json<Forget>) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    let forget = body.into_inner();
    if forget.id.is_none() && forget.source.is_none() && forget.payment.is_none() {
        return control_refused("name an id, a source or a payment to forget");
    }
    sb.settlement.forget(forget.clone());
    json_answer(StatusCode::OK, &json!({"forgotten": forget}))
}

async fn invent(sb: web::Data<Sandbox>, req: HttpRequest, body: web::Json<Invent>) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    let invent = body.into_inner();
    let kinds = [
        "charge",
        "refund",
        "dispute_withdrawal",
        "dispute_reinstatement",
    ];
    if !["stripe", "adyen"].contains(&invent.protocol.as_str())
        || !kinds.contains(&invent.kind.as_str())
        || invent.amount == 0
        || invent.currency.len() != 3
    {
        return control_refused(
            "protocol stripe|adyen, kind charge|refund|dispute_withdrawal|\
             dispute_reinstatement, a non-zero amount and a currency",
        );
    }
    json_answer(StatusCode::OK, &sb.settlement.invent(invent, now()))
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Close {
    every_secs: Option<i64>,
    late_batches: Option<usize>,
}

async fn close(sb: web::Data<Sandbox>, req: HttpRequest, body: web::Bytes) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    let close: Close = if body.is_empty() {
        Close::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(close) => close,
            Err(e) => return control_refused(&e.to_string()),
        }
    };
    if let Some(late) = close.late_batches {
        sb.settlement.settle_late(late);
    }
    let batch = sb.settlement.close(now(), close.every_secs);
    json_answer(StatusCode::OK, &json!({"closed_batch": batch}))
}

fn control_refused(message: &str) -> HttpResponse {
    json_answer(
        StatusCode::BAD_REQUEST,
        &json!({"error": {"type": "invalid_request_error", "message": message}}),
    )
}
