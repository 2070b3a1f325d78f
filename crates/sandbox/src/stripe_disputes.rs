//! The Stripe face's disputes (`disputes`), as Stripe's Disputes API has them:
//!
//! - `GET /v1/disputes/{id}`: the `dispute` object (`dispute_news::stripe_dispute`);
//! - `GET /v1/disputes`: the Stripe face's disputes, newest first, by `payment_intent`,
//!   `charge` and `created`, paged by `starting_after` / `ending_before`;
//! - `POST /v1/disputes/{id}`: `evidence[…]` text fields and `metadata[…]`, with `submit`
//!   (default `true`, as Stripe's) sending them for review: `needs_response` becomes
//!   `under_review`, `warning_needs_response` `warning_under_review`. In Stripe's test mode
//!   the evidence `winning_evidence` wins and `losing_evidence` loses (an inquiry: escalates)
//!   `--dispute-after-ms` later (`dispute_control`);
//! - `POST /v1/disputes/{id}/close`: the merchant accepts; a chargeback is `lost`, an
//!   inquiry `warning_closed`.
//!
//! The POSTs take an `Idempotency-Key` as every Stripe POST does: the first answer is
//! recorded under it and a resend gets it again, never a second move.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};

use super::answers::{
    begin_keyed, error, invalid_request, refuse_unauthorized, respond, stored_error, stored_json,
};
use super::dispute_news::{stripe_dispute, EVIDENCE_FIELDS};
use super::disputes::{DisputeEntry, Move};
use super::listing::{Cursor, ListQuery};
use super::params::{metadata_key, ParamError};
use super::store::StoredResponse;
use super::webhooks::Cause;
use super::{random_id, Sandbox};
use payorch_wire::stripe::ApiError;

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/disputes", web::get().to(list_disputes))
        .route("/v1/disputes/{id}", web::get().to(retrieve_dispute))
        .route("/v1/disputes/{id}", web::post().to(update_dispute))
        .route("/v1/disputes/{id}/close", web::post().to(close_dispute));
}

/// The Stripe face's dispute `id`.
fn stripe_dispute_named(sb: &Sandbox, id: &str) -> Option<DisputeEntry> {
    sb.disputes.get(id).filter(|d| !d.is_adyen())
}

fn no_such_dispute(id: &str) -> ApiError {
    ApiError {
        kind: "invalid_request_error".into(),
        code: Some("resource_missing".into()),
        decline_code: None,
        message: Some(format!("No such dispute: '{id}'")),
        param: Some("dispute".into()),
        payment_intent: None,
    }
}

/// Stripe's refusal of a move the dispute's status does not allow.
fn refused(why: String) -> ApiError {
    ApiError {
        kind: "invalid_request_error".into(),
        code: None,
        decline_code: None,
        message: Some(format!("This dispute cannot be changed now: {why}.")),
        param: None,
        payment_intent: None,
    }
}

async fn retrieve_dispute(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    id: web::Path<String>,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    match stripe_dispute_named(&sb, &id) {
        Some(dispute) => HttpResponse::Ok().json(stripe_dispute(&dispute)),
        None => error(StatusCode::NOT_FOUND, no_such_dispute(&id)),
    }
}

/// `POST /v1/disputes/{id}`'s form: the evidence, `submit`, metadata.
struct Update {
    evidence: BTreeMap<String, String>,
    submit: bool,
    fingerprint: String,
}

impl Update {
    fn parse(body: &[u8]) -> Result<Update, ParamError> {
        let mut pairs: Vec<(String, String)> =
            serde_urlencoded::from_bytes(body).map_err(|e| ParamError {
                code: "parameter_invalid",
                param: None,
                message: format!("Invalid form body: {e}"),
            })?;
        let mut evidence = BTreeMap::new();
        let mut submit = true;
        for (name, value) in &pairs {
            if let Some(field) = name
                .strip_prefix("evidence[")
                .and_then(|rest| rest.strip_suffix(']'))
            {
                if !EVIDENCE_FIELDS.contains(&field) {
                    return Err(unknown(name));
                }
                evidence.insert(field.to_owned(), value.clone());
                continue;
            }
            match name.as_str() {
                "submit" => {
                    submit = match value.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => {
                            return Err(ParamError::new(
                                "parameter_invalid_boolean",
                                "submit",
                                format!("Invalid boolean: {value}"),
                            ))
                        }
                    }
                }
                "expand[]" => {}
                // Kept by Stripe; the sandbox takes it and shows none (its disputes'
                // `metadata` stays empty).
                _ if metadata_key(name).is_some() => {}
                _ => return Err(unknown(name)),
            }
        }
        pairs.sort();
        let fingerprint = serde_json::to_string(&pairs).unwrap_or_default();
        Ok(Update {
            evidence,
            submit,
            fingerprint,
        })
    }
}

fn unknown(name: &str) -> ParamError {
    ParamError::new(
        "parameter_unknown",
        name,
        format!("Received unknown parameter: {name}"),
    )
}

async fn update_dispute(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    id: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    let update = match Update::parse(&body) {
        Ok(update) => update,
        Err(e) => return invalid_request(e),
    };
    let key = match begin_keyed(&sb, &req, &format!("dispute {id} {}", update.fingerprint)) {
        Ok(key) => key,
        Err(answer) => return *answer,
    };
    let stored = if stripe_dispute_named(&sb, &id).is_none() {
        stored_error(StatusCode::NOT_FOUND, no_such_dispute(&id))
    } else if update.submit {
        moved(&sb, &id, Move::Submit, update.evidence, key.as_deref())
    } else {
        match sb.disputes.add_evidence(&id, update.evidence) {
            Ok(dispute) => stored_json(StatusCode::OK, &stripe_dispute(&dispute)),
            Err(why) => stored_error(StatusCode::BAD_REQUEST, refused(why)),
        }
    };
    finish(&sb, key.as_deref(), stored)
}

async fn close_dispute(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    id: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    if let Some((name, _)) = pairs.iter().find(|(name, _)| name != "expand[]") {
        return invalid_request(unknown(name));
    }
    let key = match begin_keyed(&sb, &req, &format!("close {id}")) {
        Ok(key) => key,
        Err(answer) => return *answer,
    };
    let stored = if stripe_dispute_named(&sb, &id).is_none() {
        stored_error(StatusCode::NOT_FOUND, no_such_dispute(&id))
    } else {
        moved(&sb, &id, Move::Accept, BTreeMap::new(), key.as_deref())
    };
    finish(&sb, key.as_deref(), stored)
}

/// The dispute moved, its events caused by this request, as the answer.
fn moved(
    sb: &Sandbox,
    id: &str,
    the_move: Move,
    evidence: BTreeMap<String, String>,
    key: Option<&str>,
) -> StoredResponse {
    let cause = Cause {
        request_id: random_id("req"),
        idempotency_key: key.map(str::to_owned),
    };
    match sb.move_dispute_caused(id, the_move, evidence, Some(cause)) {
        Ok(dispute) => stored_json(StatusCode::OK, &stripe_dispute(&dispute)),
        Err(why) => stored_error(StatusCode::BAD_REQUEST, refused(why)),
    }
}

/// Records the answer under the key (if any) and gives it.
fn finish(sb: &Sandbox, key: Option<&str>, stored: StoredResponse) -> HttpResponse {
    if let Some(key) = key {
        sb.store.finish(key, stored.clone());
    }
    respond(&stored, key, false)
}

/// `GET /v1/disputes`.
async fn list_disputes(sb: web::Data<Sandbox>, req: HttpRequest) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    let query = match ListQuery::parse(req.query_string(), &["payment_intent", "charge"]) {
        Ok(query) => query,
        Err(e) => return invalid_request(e),
    };
    let payment_intent = query.filters.get("payment_intent");
    let charge = query.filters.get("charge");
    // Newest first; ties (the same second) by the order they were made.
    let mut kept: Vec<DisputeEntry> = sb
        .disputes
        .all()
        .into_iter()
        .filter(|d| !d.is_adyen())
        .collect();
    kept.reverse();
    let place = |id: &str| kept.iter().position(|d| d.id == id);
    let (from, to) = match &query.cursor {
        Cursor::Newest => (0, kept.len()),
        Cursor::After(id) => match place(id) {
            Some(at) => (at + 1, kept.len()),
            None => return invalid_request(missing_cursor(&query.cursor)),
        },
        Cursor::Before(id) => match place(id) {
            Some(at) => (0, at),
            None => return invalid_request(missing_cursor(&query.cursor)),
        },
    };
    let keep = |d: &&DisputeEntry| {
        payment_intent.is_none_or(|pi| *pi == d.payment_intent)
            && charge.is_none_or(|ch| *ch == d.charge)
            && query.created.holds(d.created)
    };
    let matching: Vec<&DisputeEntry> = kept[from..to].iter().filter(keep).collect();
    let (page, has_more) = match query.cursor {
        // Taken from the cursor up: the nearest ones, still newest first.
        Cursor::Before(_) => {
            let skip = matching.len().saturating_sub(query.limit);
            (matching[skip..].to_vec(), skip > 0)
        }
        _ => (
            matching.iter().take(query.limit).copied().collect(),
            matching.len() > query.limit,
        ),
    };
    let data: Vec<serde_json::Value> = page.into_iter().map(stripe_dispute).collect();
    HttpResponse::Ok().json(serde_json::json!({
        "object": "list", "data": data, "has_more": has_more, "url": "/v1/disputes",
    }))
}

fn missing_cursor(cursor: &Cursor) -> ParamError {
    ParamError::new(
        "resource_missing",
        cursor.param(),
        format!("No such dispute: '{}'", cursor.id()),
    )
}
