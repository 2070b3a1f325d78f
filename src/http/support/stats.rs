//! `GET /v1/support/payments/stats`: the last hour's (or `window`'s) attempts by provider and
//! status, in time buckets (docs/guides/support.md, "Support"). The console draws it; support keys only.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::support_key_name;
use crate::accounts::Caller;
use crate::http::errors::{ApiError, FieldError};
use crate::http::AppState;
use crate::payments::support::stats::{self, Buckets};
use crate::payments::AttemptStatus;

/// The longest window: a day of minutes is the most buckets one answer holds.
const MAX_WINDOW: Duration = Duration::hours(24);
/// Bucket widths tried in turn when none is asked for.
const DEFAULT_WIDTHS: [Duration; 4] = [
    Duration::minutes(1),
    Duration::minutes(5),
    Duration::minutes(15),
    Duration::hours(1),
];
/// At most this many buckets when the width is left to payorch: a chart's worth.
const DEFAULT_MAX_BUCKETS: i64 = 120;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct StatsParams {
    /// How far back: whole minutes or hours, `1m` to `24h` (`15m`, `1h`, `6h`). Default `1h`.
    window: Option<String>,
    /// Each bucket's width, the same way: at least `1m`, dividing the window. Default the
    /// first of `1m`, `5m`, `15m` and `1h` that makes at most 120 buckets.
    bucket: Option<String>,
}

/// The attempts made in each bucket of the window, by provider and status now.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PaymentStats {
    /// Always `payment_stats`.
    object: &'static str,
    window_seconds: i64,
    bucket_seconds: i64,
    /// The start of the first bucket.
    from: DateTime<Utc>,
    /// When the count was made: the last bucket, which holds it, is still filling.
    to: DateTime<Utc>,
    /// Every configured provider in routing order, then any other an attempt in the window
    /// names (one since removed from the configuration); a provider with no attempt has an
    /// empty series.
    providers: Vec<String>,
    /// Every bucket, oldest first, empty ones too.
    buckets: Vec<StatsBucket>,
    /// The whole window's counts.
    totals: Vec<StatsCount>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct StatsBucket {
    start: DateTime<Utc>,
    /// The non-zero counts, by provider (in `providers` order) then status.
    counts: Vec<StatsCount>,
}

/// Attempts made through `provider` that are `status` now.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct StatsCount {
    provider: String,
    status: AttemptStatus,
    count: i64,
}

/// `15m`, `1h`: a whole number of minutes or hours.
fn span(raw: &str) -> Result<Duration, String> {
    let wrong = || "must be a whole number of minutes or hours, like 15m or 1h".to_owned();
    // The unit is the last character, which may be any character at all: split before it,
    // never inside it.
    let Some((at, _)) = raw.char_indices().next_back() else {
        return Err(wrong());
    };
    let (digits, unit) = raw.split_at(at);
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(wrong());
    }
    let n: i64 = digits.parse().map_err(|_| wrong())?;
    let span = match unit {
        "m" => Duration::minutes(n),
        "h" => Duration::hours(n),
        _ => return Err(wrong()),
    };
    if span <= Duration::zero() {
        return Err(wrong());
    }
    Ok(span)
}

/// The window and bucket width asked for, or every reason they cannot be used.
fn window_and_width(params: &StatsParams) -> Result<(Duration, Duration), Vec<FieldError>> {
    let mut errors = Vec::new();
    let window = match params.window.as_deref().map(span) {
        None => Some(Duration::hours(1)),
        Some(Ok(window)) if window <= MAX_WINDOW => Some(window),
        Some(Ok(_)) => {
            errors.push(FieldError::new("window", "must be at most 24h"));
            None
        }
        Some(Err(err)) => {
            errors.push(FieldError::new("window", err));
            None
        }
    };
    let width = match params.bucket.as_deref().map(span) {
        None => None,
        Some(Ok(width)) => Some(width),
        Some(Err(err)) => {
            errors.push(FieldError::new("bucket", err));
            None
        }
    };
    match (window, width) {
        (Some(window), Some(width)) if window.num_seconds() % width.num_seconds() != 0 => {
            errors.push(FieldError::new("bucket", "must divide the window"))
        }
        (Some(window), Some(width)) if errors.is_empty() => return Ok((window, width)),
        (Some(window), None) if errors.is_empty() => {
            let (seconds, max) = (window.num_seconds(), DEFAULT_MAX_BUCKETS);
            let width = DEFAULT_WIDTHS
                .into_iter()
                .find(|w| seconds % w.num_seconds() == 0 && seconds / w.num_seconds() <= max)
                // A window none of them divides into few enough (`121m`): minute by minute.
                .unwrap_or(Duration::minutes(1));
            return Ok((window, width));
        }
        _ => {}
    }
    Err(errors)
}

/// Payment attempts by provider and status over time (support)
///
/// Counts of the attempts made in the last hour (or `window`), per provider and status, in buckets
/// of `bucket` seconds, with totals: the console's chart. Support keys only (docs/guides/support.md, "Support").
#[utoipa::path(get, path = "/v1/support/payments/stats", tag = "support",
    params(StatsParams),
    security(("bearer" = [])),
    responses(
        (status = 200, body = PaymentStats, example = json!(crate::views::examples::payment_stats())),
        (status = 403, body = crate::http::errors::Problem, description = "not a support key"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed: each bad parameter named"),
    ))]
pub async fn payment_stats(
    caller: Caller,
    state: web::Data<AppState>,
    params: web::Query<StatsParams>,
) -> Result<HttpResponse, ApiError> {
    let key_name = support_key_name(&state, &caller).await?;
    let (window, width) = window_and_width(&params).map_err(ApiError::ValidationFailed)?;
    tracing::info!(support_key = %key_name, window = window.num_seconds(), "support read payment stats");
    let now = Utc::now();
    let buckets = Buckets::ending_at(now, window, width);
    let counted = {
        let mut conn = state.pool.get().await?;
        stats::payment_counts(&mut conn, buckets).await?
    };
    let providers = providers_of(state.payments.providers.names(), &counted);
    let (buckets_view, totals) = by_provider(&providers, counted);
    Ok(HttpResponse::Ok().json(PaymentStats {
        object: "payment_stats",
        window_seconds: window.num_seconds(),
        bucket_seconds: width.num_seconds(),
        from: buckets.from,
        to: now,
        providers,
        buckets: buckets_view,
        totals,
    }))
}

/// The configured providers in routing order, then any other the buckets name, by name.
fn providers_of(configured: Vec<String>, counted: &[stats::Bucket]) -> Vec<String> {
    let mut others: Vec<String> = counted
        .iter()
        .flat_map(|b| b.counts.iter().map(|c| c.provider.clone()))
        .filter(|p| !configured.contains(p))
        .collect();
    others.sort();
    others.dedup();
    let mut providers = configured;
    providers.extend(others);
    providers
}

/// The buckets with their counts in `providers` order then status order, and the totals.
fn by_provider(
    providers: &[String],
    counted: Vec<stats::Bucket>,
) -> (Vec<StatsBucket>, Vec<StatsCount>) {
    let order = |c: &StatsCount| {
        let provider = providers.iter().position(|p| *p == c.provider);
        (provider, c.status as u8)
    };
    let mut totals: Vec<StatsCount> = Vec::new();
    let buckets = counted
        .into_iter()
        .map(|bucket| {
            let mut counts: Vec<StatsCount> = bucket
                .counts
                .into_iter()
                .filter_map(|c| {
                    // The table's CHECK allows only the four statuses.
                    Some(StatsCount {
                        status: AttemptStatus::parse(&c.status)?,
                        provider: c.provider,
                        count: c.count,
                    })
                })
                .collect();
            counts.sort_by_key(order);
            for count in &counts {
                match totals
                    .iter_mut()
                    .find(|t| t.provider == count.provider && t.status == count.status)
                {
                    Some(total) => total.count += count.count,
                    None => totals.push(count.clone()),
                }
            }
            StatsBucket {
                start: bucket.start,
                counts,
            }
        })
        .collect();
    totals.sort_by_key(order);
    (buckets, totals)
}
