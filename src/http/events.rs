//! `GET /v1/events` and `GET /v1/events/{id}`: a merchant reads its own events, as its
//! endpoints receive them (docs/guides/events.md, "The events API"); a support key reads every merchant's.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::accounts::Caller;
use crate::events::list::{list_events, seq_of, EventFilter};
use crate::events::{find_event, EventType, EventsError};
use crate::http::errors::{ApiError, FieldError};
use crate::http::AppState;
use crate::ids::{EventId, MerchantId};
use crate::views;

/// A page when `limit` is not given: Stripe's, whose event list this one follows.
pub(super) const DEFAULT_LIMIT: i64 = 10;

impl From<EventsError> for ApiError {
    fn from(err: EventsError) -> Self {
        match err {
            EventsError::Db(err) => err.into(),
            // Logged with its cause; the caller sees an internal error, never half an event.
            EventsError::Unreadable(err) => ApiError::Internal(err.to_string()),
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventListParams {
    /// One event type, or several comma-separated (`payment.succeeded,payment.failed`):
    /// events of any of them. Given once.
    #[serde(rename = "type")]
    event_type: Option<String>,
    /// Written at or after: RFC 3339 (`2026-11-24T10:00:00Z`) or Unix seconds.
    created_gte: Option<String>,
    /// Written at or before: RFC 3339 or Unix seconds.
    created_lte: Option<String>,
    /// `false`: events some delivery of which has not succeeded (pending, failed or
    /// canceled). `true`: events delivered to every endpoint they were for. An event no
    /// endpoint was subscribed to has no delivery and is in neither.
    #[param(value_type = Option<bool>)]
    delivery_success: Option<String>,
    /// Support keys only (a merchant key may give only its own): one merchant's events.
    #[param(value_type = Option<String>, pattern = "^mer_[0-9a-f]{32}$")]
    merchant_id: Option<String>,
    /// 1–100, default 10.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100, default = 10)]
    limit: Option<String>,
    /// The last event id of the previous page (`evt_…`): this page holds the events written
    /// before it.
    #[param(value_type = Option<String>, pattern = "^evt_[0-9a-f]{32}$")]
    starting_after: Option<String>,
}

/// A page of events, newest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EventPage {
    /// Always `list`.
    object: &'static str,
    data: Vec<views::Event>,
    /// Another page exists: ask again with `starting_after` set to the last id here.
    has_more: bool,
}

/// Every bad parameter of a request, so one answer names them all (the disputes' list
/// checks its parameters the same way).
#[derive(Default)]
pub(super) struct Problems(pub(super) Vec<FieldError>);

impl Problems {
    pub(super) fn check<T>(
        &mut self,
        field: &str,
        raw: Option<&str>,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Option<T> {
        match raw.map(parse)? {
            Ok(value) => Some(value),
            Err(message) => {
                self.0.push(FieldError::new(field, message));
                None
            }
        }
    }
}

fn event_types(raw: &str) -> Result<Vec<EventType>, String> {
    let mut types = Vec::new();
    for name in raw.split(',') {
        let known = EventType::parse(name).ok_or_else(|| {
            let all: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
            format!(
                "`{name}` is not an event type; give one or more of {}, comma-separated",
                all.join(", ")
            )
        })?;
        if !types.contains(&known) {
            types.push(known);
        }
    }
    Ok(types)
}

/// RFC 3339, or whole Unix seconds as Stripe's `created` filters take them.
pub(super) fn instant(raw: &str) -> Result<DateTime<Utc>, String> {
    let wrong = || "must be an RFC 3339 time (2026-11-24T10:00:00Z) or Unix seconds".to_owned();
    if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
        let seconds: i64 = raw.parse().map_err(|_| wrong())?;
        return DateTime::from_timestamp(seconds, 0).ok_or_else(wrong);
    }
    DateTime::parse_from_rfc3339(raw)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| wrong())
}

fn boolean(raw: &str) -> Result<bool, String> {
    match raw {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("must be `true` or `false`".into()),
    }
}

pub(super) fn limit(raw: &str) -> Result<i64, String> {
    raw.parse::<i64>()
        .ok()
        .filter(|n| (1..=100).contains(n))
        .ok_or_else(|| "must be a whole number from 1 to 100".into())
}

pub(super) fn id<T: std::str::FromStr<Err = crate::ids::InvalidId>>(
    raw: &str,
) -> Result<T, String> {
    raw.parse()
        .map_err(|e: crate::ids::InvalidId| e.to_string())
}

/// List events
///
/// The events payorch recorded for the caller's merchant (a support key: every merchant's, or one
/// by `merchant_id`), newest first, filtered by `type`, creation time and delivery success,
/// paginated with `starting_after`. For catching up on deliveries your endpoint missed (docs/guides/events.md,
/// "Recovering missed events", "The events API").
#[utoipa::path(get, path = "/v1/events", tag = "events",
    params(EventListParams),
    security(("bearer" = [])),
    responses(
        (status = 200, body = EventPage, description = "the caller's events (a support key: every merchant's), newest first", example = json!(crate::views::examples::event_page())),
        (status = 400, body = crate::http::errors::Problem, description = "invalid_request: an unknown parameter, or one given twice"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed: each bad parameter named in `errors`"),
    ))]
pub async fn list(
    caller: Caller,
    state: web::Data<AppState>,
    params: web::Query<EventListParams>,
) -> Result<HttpResponse, ApiError> {
    let p = params.into_inner();
    let mut problems = Problems::default();
    let types = problems.check("type", p.event_type.as_deref(), event_types);
    let created_gte = problems.check("created_gte", p.created_gte.as_deref(), instant);
    let created_lte = problems.check("created_lte", p.created_lte.as_deref(), instant);
    let delivery_success =
        problems.check("delivery_success", p.delivery_success.as_deref(), boolean);
    let merchant = problems.check("merchant_id", p.merchant_id.as_deref(), id::<MerchantId>);
    let limit = problems
        .check("limit", p.limit.as_deref(), limit)
        .unwrap_or(DEFAULT_LIMIT);
    let after = problems.check("starting_after", p.starting_after.as_deref(), id::<EventId>);
    if let (Some(from), Some(to)) = (created_gte, created_lte) {
        if to < from {
            problems.0.push(FieldError::new(
                "created_lte",
                "is before created_gte: no event can be in that window",
            ));
        }
    }
    let scope = caller.scope();
    let merchant = match (scope, merchant) {
        (Some(own), Some(asked)) if own != asked => {
            problems.0.push(FieldError::new(
                "merchant_id",
                "a merchant key lists its own events only: leave merchant_id out",
            ));
            None
        }
        (Some(own), _) => Some(own),
        (None, asked) => asked,
    };
    let mut conn = state.pool.get().await?;
    let before_seq = match after {
        Some(id) => {
            let seq = seq_of(&mut conn, scope, id).await?;
            if seq.is_none() {
                problems.0.push(FieldError::new(
                    "starting_after",
                    format!("{id} is no event of yours: give the last id of the previous page (events past their retention are deleted: start again without starting_after)"),
                ));
            }
            seq
        }
        None => None,
    };
    if !problems.0.is_empty() {
        return Err(ApiError::ValidationFailed(problems.0));
    }
    let filter = EventFilter {
        merchant,
        types: types.unwrap_or_default(),
        created_gte,
        created_lte,
        delivery_success,
    };
    // One more than asked tells whether another page exists.
    let mut found = list_events(&mut conn, &filter, before_seq, limit + 1).await?;
    let has_more = found.len() as i64 > limit;
    found.truncate(limit as usize);
    Ok(HttpResponse::Ok().json(EventPage {
        object: "list",
        data: found.into_iter().map(views::Event::from).collect(),
        has_more,
    }))
}

/// Retrieve an event
///
/// One event, as its deliveries carry it: `data.object` is the payment, order or refund as `GET`
/// showed it when the event happened.
#[utoipa::path(get, path = "/v1/events/{id}", tag = "events",
    params(("id" = String, Path, description = "event id, `evt_…`", example = json!(crate::views::examples::EVENT))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = views::Event, description = "the event, its `data.object` as GET showed the resource then", example = json!(crate::views::examples::event())),
        (status = 404, body = crate::http::errors::Problem, description = "no such event of this merchant (or past its retention)"),
    ))]
pub async fn get(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id: EventId = path.parse().map_err(|_| ApiError::NotFound("event"))?;
    let mut conn = state.pool.get().await?;
    let event = find_event(&mut conn, caller.scope(), id)
        .await?
        .ok_or(ApiError::NotFound("event"))?;
    Ok(HttpResponse::Ok().json(views::Event::from(event)))
}
