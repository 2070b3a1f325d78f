//! The one place that decides what a provider's word does to an attempt, used alike by the
//! payment flow, the reconciler and webhooks; and the conditional update that applies it.

use crate::db::statement::{span, Statement};
use crate::db::PgConn;
use chrono::{DateTime, Utc};
use diesel::sql_types::{Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel::OptionalExtension;
use diesel_async::RunQueryDsl;
use tracing::Instrument;

use super::{find_attempt, AttemptRow, PaymentAttempt, Source};
use crate::payments::answer::logged;
use crate::payments::metrics::PaymentMetrics;
use crate::payments::status::AttemptStatus;
use crate::providers::decline::Decline;
use crate::providers::{CaptureMethod, NextAction, ProviderOutcome};

/// What an outcome means for an attempt in a given status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Move to `to` (recording the provider's id and failure, if any).
    Move {
        to: AttemptStatus,
        provider_payment_id: Option<String>,
        failure: Option<Failure>,
        detail: String,
        news: News,
    },
    /// Still open: remember the provider id if we learnt it and look again later.
    StayOpen {
        provider_payment_id: Option<String>,
        detail: String,
        news: News,
    },
    /// Says what the attempt already is (a duplicate, or news that arrived late).
    AlreadySo,
    /// Says something older than what the attempt already is (`processing` after `succeeded`).
    Stale,
    /// Contradicts the final status (`failed` after `succeeded`): never applied, counted for
    /// a human to look at.
    Conflict,
}

/// Why a provider's word failed an attempt (or a refund): its code and message and, for a
/// charge, the decline the answer said (an attempt stores [`Decline::stored`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: String,
    pub message: String,
    pub decline: Option<Decline>,
}

/// What else an answer tells about an attempt, besides its status: a challenge to follow, how
/// long a hold lasts, why it was canceled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct News {
    pub next_action: Option<NextAction>,
    pub authorized_until: Option<DateTime<Utc>>,
    pub cancellation_reason: Option<String>,
}

/// What `outcome` does to an attempt that is `current` and captured by `capture`.
pub fn decide(
    current: AttemptStatus,
    capture: CaptureMethod,
    outcome: &ProviderOutcome,
) -> Decision {
    use AttemptStatus::*;
    let mut news = News::default();
    let (to, failure, detail) = match outcome {
        ProviderOutcome::Succeeded { provider_id } => (
            Succeeded,
            None,
            format!("provider says succeeded ({provider_id})"),
        ),
        // An automatic capture follows its authorisation at the provider (Adyen tells of the
        // authorisation only), so for it "authorized" means the money is taken.
        ProviderOutcome::Authorized {
            provider_id,
            expires_at,
        } => {
            news.authorized_until = *expires_at;
            match capture {
                CaptureMethod::Manual => (
                    Authorized,
                    None,
                    format!("provider holds the money ({provider_id})"),
                ),
                CaptureMethod::Automatic => (
                    Succeeded,
                    None,
                    format!("provider says authorized, captured automatically ({provider_id})"),
                ),
            }
        }
        ProviderOutcome::RequiresAction { next_action, .. } => {
            news.next_action = Some(next_action.clone());
            (
                Pending,
                None,
                "provider asks the payer to authenticate".into(),
            )
        }
        ProviderOutcome::Canceled { .. } => {
            news.cancellation_reason = Some(CANCELED_AT_PROVIDER.to_owned());
            (Canceled, None, "provider says canceled".into())
        }
        ProviderOutcome::Failed {
            code,
            message,
            decline,
            ..
        } => (
            Failed,
            Some(Failure {
                code: code.clone(),
                message: message.clone(),
                decline: decline.clone(),
            }),
            format!("provider says failed: {code}"),
        ),
        ProviderOutcome::Pending { .. } => (Pending, None, "provider is processing".into()),
        ProviderOutcome::Unknown { reason } => {
            (Pending, None, format!("outcome unknown: {reason}"))
        }
        // Only the payment flow knows whether a send was an attempt's first; for everyone
        // else an unreachable provider says nothing about earlier sends.
        ProviderOutcome::Unavailable { reason } => {
            (Pending, None, format!("provider unavailable: {reason}"))
        }
        ProviderOutcome::NotFound => (Pending, None, "provider has no record yet".into()),
    };
    let provider_payment_id = outcome.provider_id().map(str::to_owned);
    match (current, to) {
        (Created, Pending) => Decision::Move {
            to,
            provider_payment_id,
            failure,
            detail,
            news,
        },
        // Still open as it was: a challenge still waiting, a hold still held (whose end the
        // answer may tell again).
        (Pending, Pending) | (Authorized, Authorized) => Decision::StayOpen {
            provider_payment_id,
            detail,
            news,
        },
        (from, to) if from.can_become(to) => Decision::Move {
            to,
            provider_payment_id,
            failure,
            detail,
            news,
        },
        (from, to) if from == to => Decision::AlreadySo,
        // A hold is newer news than "processing"; final statuses are newer than both.
        (_, Pending) | (Succeeded | Canceled, Authorized) => Decision::Stale,
        _ => Decision::Conflict,
    }
}

/// The cancellation reason of an attempt the provider says is canceled, when payorch did not
/// ask for it (a void payorch asked for says `voided`, and so on).
pub const CANCELED_AT_PROVIDER: &str = "canceled_at_provider";

/// What applying an outcome did.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The attempt as it is after this.
    pub attempt: PaymentAttempt,
    pub decision: Decision,
}

/// Applies `outcome` to `attempt` inside the caller's transaction: a conditional update on
/// the status it was read with, plus its timeline row, in one statement. If someone else
/// moved the attempt first, it is read again and the outcome judged against that.
/// `next_check_at` is when to look again should it stay open.
pub async fn apply(
    conn: &mut PgConn,
    metrics: &PaymentMetrics,
    mut attempt: PaymentAttempt,
    outcome: &ProviderOutcome,
    source: Source,
    next_check_at: DateTime<Utc>,
) -> diesel::QueryResult<Applied> {
    // Bounded: each retry means another writer finished a move, and there are at most two.
    for _ in 0..3 {
        let decision = decide(attempt.status, attempt.capture_method, outcome);
        let Some(change) = move_of(attempt.status, &decision) else {
            return Ok(Applied { attempt, decision });
        };
        let updated = move_attempt(conn, &attempt, change, source, next_check_at).await?;
        match updated {
            Some(moved) => {
                if let Decision::Move { to, .. } = &decision {
                    metrics.transition(attempt.status, *to, source);
                }
                if let Decision::Move {
                    failure: Some(f), ..
                } = &decision
                {
                    metrics.declined(&attempt.provider, &f.code, f.decline.as_ref());
                }
                return Ok(Applied {
                    attempt: moved,
                    decision,
                });
            }
            None => {
                attempt = find_attempt(conn, Some(attempt.merchant_id), attempt.id)
                    .await?
                    .ok_or(diesel::result::Error::NotFound)?;
            }
        }
    }
    Err(diesel::result::Error::RollbackTransaction)
}

/// What a [`Decision`] that changes the row writes.
#[derive(Clone, Copy)]
pub(crate) struct Change<'a> {
    /// The new status; the current one for `StayOpen`.
    to: AttemptStatus,
    provider_payment_id: Option<&'a str>,
    failure: Option<&'a Failure>,
    /// The timeline row's detail; empty for no detail.
    detail: &'a str,
    news: &'a News,
}

/// `None` for decisions that write nothing.
pub(crate) fn move_of(current: AttemptStatus, decision: &Decision) -> Option<Change<'_>> {
    match decision {
        Decision::Move {
            to,
            provider_payment_id,
            failure,
            detail,
            news,
        } => Some(Change {
            to: *to,
            provider_payment_id: provider_payment_id.as_deref(),
            failure: failure.as_ref(),
            detail,
            news,
        }),
        Decision::StayOpen {
            provider_payment_id,
            news,
            ..
        } => Some(Change {
            to: current,
            provider_payment_id: provider_payment_id.as_deref(),
            failure: None,
            detail: "",
            news,
        }),
        Decision::AlreadySo | Decision::Stale | Decision::Conflict => None,
    }
}

/// The CTEs `moved` (the conditional update of `attempt`, on the status it was read with)
/// and `logged` (its timeline row, when the status changes), which open every statement that
/// moves an attempt: [`move_attempt`] here, transaction 2
/// ([`super::keyed::record_answer`]) and a webhook's
/// ([`crate::payments::webhooks::keyed::apply_to_attempt`]). Statements append their own CTEs
/// after it, which may read `moved`. `payment_attempts_guard_transition` refuses any move the
/// state machine does not allow, and a final attempt never changes (docs/DESIGN.md,
/// "Attempts").
pub(crate) fn move_ctes<'f>(
    q: &mut Statement<'f>,
    attempt: &'f PaymentAttempt,
    Change {
        to,
        provider_payment_id,
        failure,
        detail,
        news,
    }: Change<'f>,
    source: Source,
    next_check_at: DateTime<Utc>,
) {
    let said_until = news
        .authorized_until
        .map(|said| plausible_hold_end(said, attempt.created_at));
    let merchant = q.bind::<SqlUuid, _>(attempt.merchant_id.0);
    let id = q.bind::<SqlUuid, _>(attempt.id.0);
    let was = q.bind::<Text, _>(attempt.status.as_str());
    let to_param = q.bind::<Text, _>(to.as_str());
    let provider_id = q.bind::<Nullable<Text>, _>(provider_payment_id);
    let stored = failure.map(|f| Decline::stored(&f.code, f.decline.as_ref()));
    let code = q.bind::<Nullable<Text>, _>(stored.as_ref().map(|d| d.code.as_str()));
    let class = q.bind::<Nullable<Text>, _>(stored.as_ref().map(|d| d.class.as_str()));
    let provider_code = q.bind::<Nullable<Text>, _>(stored.and_then(|d| d.provider_code));
    let message = q.bind::<Nullable<Text>, _>(failure.map(|f| f.message.as_str()));
    let next_check = q.bind::<Nullable<Timestamptz>, _>((!to.is_final()).then(|| {
        // The earliest end anyone told: a hold is never thought to outlive what the provider
        // (or a person, by hand) last said of it.
        let until = match (said_until, attempt.authorized_until) {
            (Some(said), Some(known)) => Some(said.min(known)),
            (said, known) => said.or(known),
        };
        hold_check_at(to, until, next_check_at)
    }));
    let action = q.bind::<Nullable<Jsonb>, _>(
        news.next_action
            .as_ref()
            .map(|a| serde_json::to_value(a).unwrap_or_default()),
    );
    let until = q.bind::<Nullable<Timestamptz>, _>(said_until);
    let reason = q.bind::<Nullable<Text>, _>(news.cancellation_reason.as_deref());
    q.push(format_args!(
        "WITH moved AS (
    UPDATE payment_attempts SET status = {to_param},
        provider_payment_id = coalesce(provider_payment_id, {provider_id}),
        failure_code = {code}, failure_message = {message}, next_check_at = {next_check},
        failure_class = {class}, provider_failure_code = {provider_code},
        next_action = coalesce({action}, next_action),
        authorized_until = least({until}, authorized_until),
        cancellation_reason = {reason}
    WHERE merchant_id = {merchant} AND id = {id} AND status = {was} RETURNING *)"
    ));
    let detail = (!detail.is_empty()).then_some(detail);
    logged(
        q,
        ("attempt_transitions", "attempt_id"),
        was,
        source,
        detail,
    );
}

/// How long a provider holds an authorisation when it does not say: Stripe's 7 days for a
/// payer-present card payment.
pub const HOLD_LIFETIME: chrono::Duration = chrono::Duration::days(7);

/// How far the provider's clock may be behind payorch's before the end of a hold it tells is
/// not believed.
pub const CLOCK_TOLERANCE: chrono::Duration = chrono::Duration::hours(1);

/// The end of a hold, as the provider `said` it, unless its clock is implausible: a hold
/// begins after payorch made the attempt, so it cannot end much before `HOLD_LIFETIME` after
/// that. An end earlier than that by more than `CLOCK_TOLERANCE` (a provider's `created` far
/// in the past) is replaced by payorch's own record, so that no hold is voided early on a
/// clock's word.
pub fn plausible_hold_end(said: DateTime<Utc>, attempt_created: DateTime<Utc>) -> DateTime<Utc> {
    let own = attempt_created + HOLD_LIFETIME;
    if said < own - CLOCK_TOLERANCE {
        own
    } else {
        said
    }
}

/// How long before a hold expires the reconciler asks the provider about it, and voids it if
/// it is still held (docs/DESIGN.md, "Holds and challenges").
pub const HOLD_EXPIRY_MARGIN: chrono::Duration = chrono::Duration::hours(1);

/// When to look at an attempt next: a hold just before it expires (and, once that time has
/// come, on the usual backoff while its void is under way), anything else at `usual`.
fn hold_check_at(
    to: AttemptStatus,
    authorized_until: Option<DateTime<Utc>>,
    usual: DateTime<Utc>,
) -> DateTime<Utc> {
    match to {
        AttemptStatus::Authorized => {
            let until = authorized_until.unwrap_or_else(|| Utc::now() + HOLD_LIFETIME);
            (until - HOLD_EXPIRY_MARGIN).max(usual)
        }
        _ => usual,
    }
}

/// The conditional update and its timeline row. `None` if the attempt was no longer in the
/// status it was read with.
async fn move_attempt(
    conn: &mut PgConn,
    attempt: &PaymentAttempt,
    change: Change<'_>,
    source: Source,
    next_check_at: DateTime<Utc>,
) -> diesel::QueryResult<Option<PaymentAttempt>> {
    let mut q = Statement::new();
    move_ctes(&mut q, attempt, change, source, next_check_at);
    q.push("\nSELECT * FROM moved");
    let row: Option<AttemptRow> = q
        .finish()
        .load(conn)
        .instrument(span("move_attempt"))
        .await
        .and_then(crate::db::one)
        .optional()?;
    Ok(row.map(Into::into))
}

#[cfg(test)]
mod tests {
    use super::*;
    use AttemptStatus::*;

    fn succeeded() -> ProviderOutcome {
        ProviderOutcome::Succeeded {
            provider_id: "pi_1".into(),
        }
    }

    fn failed() -> ProviderOutcome {
        ProviderOutcome::Failed {
            code: "card_declined".into(),
            message: "declined".into(),
            provider_id: None,
            decline: None,
        }
    }

    fn unknown() -> ProviderOutcome {
        ProviderOutcome::Unknown {
            reason: "timeout".into(),
        }
    }

    #[test]
    fn open_attempts_take_definitive_answers() {
        for open in [Created, Pending] {
            assert!(matches!(
                decide(open, CaptureMethod::Automatic, &succeeded()),
                Decision::Move { to: Succeeded, .. }
            ));
            assert!(matches!(
                decide(open, CaptureMethod::Automatic, &failed()),
                Decision::Move { to: Failed, .. }
            ));
        }
    }

    #[test]
    fn unknown_makes_created_pending_and_keeps_pending_open() {
        assert!(matches!(
            decide(Created, CaptureMethod::Automatic, &unknown()),
            Decision::Move { to: Pending, .. }
        ));
        assert!(matches!(
            decide(Pending, CaptureMethod::Automatic, &unknown()),
            Decision::StayOpen { .. }
        ));
    }

    #[test]
    fn a_hold_end_from_an_implausible_provider_clock_is_payorchs_own() {
        let made = Utc::now();
        // A provider whose clock says the intent was made a year ago.
        let said = made - chrono::Duration::days(365) + HOLD_LIFETIME;
        assert_eq!(plausible_hold_end(said, made), made + HOLD_LIFETIME);
        // Minutes of disagreement, or a later end, are believed.
        let close = made + HOLD_LIFETIME - chrono::Duration::minutes(5);
        assert_eq!(plausible_hold_end(close, made), close);
        let later = made + HOLD_LIFETIME + chrono::Duration::days(1);
        assert_eq!(plausible_hold_end(later, made), later);
    }

    #[test]
    fn final_attempts_never_move() {
        assert_eq!(
            decide(Succeeded, CaptureMethod::Automatic, &succeeded()),
            Decision::AlreadySo
        );
        assert_eq!(
            decide(Failed, CaptureMethod::Automatic, &failed()),
            Decision::AlreadySo
        );
        assert_eq!(
            decide(Succeeded, CaptureMethod::Automatic, &unknown()),
            Decision::Stale
        );
        assert_eq!(
            decide(Failed, CaptureMethod::Automatic, &unknown()),
            Decision::Stale
        );
        assert_eq!(
            decide(Succeeded, CaptureMethod::Automatic, &failed()),
            Decision::Conflict
        );
        assert_eq!(
            decide(Failed, CaptureMethod::Automatic, &succeeded()),
            Decision::Conflict
        );
    }
}
