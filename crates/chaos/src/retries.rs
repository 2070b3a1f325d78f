//! The `retries` run (#43; docs/RELIABILITY.md, "Retries and late approvals (#43)"): one
//! merchant whose route names both faces of the sandbox, Stripe's first, each approving,
//! declining and failing as a seeded mix says (docs/guides/test-cards.md, "Approval rates and
//! outages"), paid with `pm_sandbox_mix` while `serve` is killed as in the kill run. With
//! retries on, a soft decline at the first provider may be tried again at the second
//! (docs/guides/declines.md, "Retries"); the run checks that no retry ever followed an
//! outcome payorch could not know — a timeout, a 500, a connection closed after sending —
//! that each checkout was paid at most once, and measures how many more checkouts were paid
//! than with retries off on the same seed and mixes.
//!
//! The sandbox draws each charge's answer from the seed and the provider request's
//! `Idempotency-Key`, which payorch makes of the attempt's own id: two runs on one seed meet
//! the same rates and the same mix of answers, not the same answer for the n-th checkout.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use crate::database::connect;

/// The Stripe face's mix of a `retries` run unless `--stripe-mix` says otherwise: 60 % of
/// charges approved, the declines mostly soft, and one charge in ten meeting an outage of
/// each kind — the four whose outcome payorch cannot know, and `refused`, which it may fail
/// over from.
pub(crate) const STRIPE_MIX: &str = "approval=0.6,soft=0.7,hard=0.2,authentication_required=0.1,outage=0.1,outages=error_before+error_after+timeout+dropped+refused";

/// The Adyen face's: the same, approving 70 %.
pub(crate) const ADYEN_MIX: &str = "approval=0.7,soft=0.7,hard=0.2,authentication_required=0.1,outage=0.1,outages=error_before+error_after+timeout+dropped+refused";

/// The sandbox's outage of an approval told late (a decline first, the charge's success
/// after it), where the sandbox knows it; the default mixes then draw it among the others.
pub(crate) const LATE_APPROVAL: &str = "late_approval";

/// The seed of a run's draws unless `--mix-seed` says otherwise.
pub(crate) const SEED: u64 = 43;

/// The payment method of every checkout of the run: drawn from its face's mix.
pub(crate) const METHOD: &str = "pm_sandbox_mix";

/// Whether this sandbox knows the late approval among its outages.
pub(crate) fn late_approvals_known() -> bool {
    payorch_sandbox::Mix::parse(&format!("outages={LATE_APPROVAL}")).is_ok()
}

/// `mix` with the late approval added to its outages when the sandbox knows it and `mix`
/// names its outages.
pub(crate) fn with_late_approvals(mix: &str) -> String {
    if !late_approvals_known() || mix.contains(LATE_APPROVAL) {
        return mix.to_owned();
    }
    mix.split(',')
        .map(|part| match part.strip_prefix("outages=") {
            Some(outages) => format!("outages={outages}+{LATE_APPROVAL}"),
            None => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The sandbox's flags for the faces' mixes and their seed.
pub(crate) fn sandbox_args(stripe_mix: &str, adyen_mix: &str, seed: u64) -> Vec<String> {
    vec![
        "--stripe-mix".into(),
        stripe_mix.into(),
        "--adyen-mix".into(),
        adyen_mix.into(),
        "--mix-seed".into(),
        seed.to_string(),
    ]
}

/// The merchant's routing document: both faces, Stripe's first; with `retry`, a soft decline
/// tried again on the next provider, at most `max_attempts` attempts a checkout. Without, no
/// `retries` at all: a merchant's retries are off unless it turns them on.
pub(crate) fn routing(retry: bool, max_attempts: u32) -> Value {
    let mut routing = json!({ "providers": ["stripe", "adyen"] });
    if retry {
        routing["retries"] = json!({ "soft_declines": true, "max_attempts": max_attempts });
    }
    routing
}

/// An attempt as the retry checks read it (ids as the database's uuids).
#[derive(Debug, Clone, Default)]
pub(crate) struct ChainAttempt {
    pub(crate) id: String,
    pub(crate) order_id: String,
    pub(crate) provider: String,
    pub(crate) status: String,
    pub(crate) failure_code: Option<String>,
    pub(crate) failure_class: Option<String>,
    /// The attempt this one retried (`payment_attempts.retry_of`), when payorch has it.
    pub(crate) retry_of: Option<String>,
    pub(crate) retry_reason: Option<String>,
}

/// What the retry checks read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Chains {
    pub(crate) attempts: Vec<ChainAttempt>,
    /// Whether payorch's attempts name the attempt they retried (`retry_of`): without it no
    /// retry can be told from a first attempt, and the run says so.
    pub(crate) retry_column: bool,
    /// payorch's `late_approvals` list by status (`undoing`, `voided`, `refunded`,
    /// `undo_failed`), when it has one.
    pub(crate) late_approvals: Option<BTreeMap<String, i64>>,
}

/// What must be zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RetryFindings {
    /// Attempts that retried one that had not definitely declined: its outcome unknown
    /// (open, or failed with class `unknown` or none), a hard decline, or one of another
    /// checkout — anything but a failed attempt whose class is `soft` or
    /// `authentication_required`, or whose code is `provider_unavailable` (failover: provably
    /// never sent).
    pub(crate) retries_after_unknown: usize,
    /// Checkouts (orders) with more than one succeeded attempt.
    pub(crate) orders_paid_twice: usize,
    /// Late approvals payorch had not undone once everything settled (`undoing`), or could
    /// not (`undo_failed`: money kept, for a human).
    pub(crate) late_approvals_not_undone: usize,
}

impl RetryFindings {
    pub(crate) fn total(&self) -> usize {
        self.retries_after_unknown + self.orders_paid_twice + self.late_approvals_not_undone
    }
}

/// What the run measured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RetryFigures {
    pub(crate) orders: usize,
    /// Orders with a succeeded attempt.
    pub(crate) paid: usize,
    /// Of those, paid by an attempt that retried a declined one (not a failover's).
    pub(crate) paid_by_retry: usize,
    /// Attempts that retried another, by their reason (`retry_reason`).
    pub(crate) retries: BTreeMap<String, usize>,
    /// Succeeded attempts by provider.
    pub(crate) paid_at: BTreeMap<String, usize>,
}

/// The checks and the figures.
pub(crate) fn judge(chains: &Chains) -> (RetryFindings, RetryFigures) {
    let by_id: HashMap<&str, &ChainAttempt> =
        chains.attempts.iter().map(|a| (a.id.as_str(), a)).collect();
    let mut found = RetryFindings::default();
    let mut figures = RetryFigures::default();
    let mut succeeded: HashMap<&str, usize> = HashMap::new();
    let mut orders: HashMap<&str, ()> = HashMap::new();
    for attempt in &chains.attempts {
        orders.insert(attempt.order_id.as_str(), ());
        if attempt.status == "succeeded" {
            *succeeded.entry(attempt.order_id.as_str()).or_default() += 1;
            *figures.paid_at.entry(attempt.provider.clone()).or_default() += 1;
            // A failover is no retry after a decline: it would have been made without them.
            if attempt.retry_of.is_some()
                && attempt.retry_reason.as_deref() != Some("provider_unreached")
            {
                figures.paid_by_retry += 1;
            }
        }
        let Some(before) = &attempt.retry_of else {
            continue;
        };
        let reason = attempt
            .retry_reason
            .clone()
            .unwrap_or_else(|| "none".into());
        *figures.retries.entry(reason).or_default() += 1;
        let definite = by_id.get(before.as_str()).is_some_and(|before| {
            before.order_id == attempt.order_id
                && before.status == "failed"
                && (matches!(
                    before.failure_class.as_deref(),
                    Some("soft" | "authentication_required")
                ) || before.failure_code.as_deref() == Some("provider_unavailable"))
        });
        if !definite {
            found.retries_after_unknown += 1;
        }
    }
    found.orders_paid_twice = succeeded.values().filter(|n| **n > 1).count();
    found.late_approvals_not_undone = chains
        .late_approvals
        .iter()
        .flatten()
        .filter(|(status, _)| matches!(status.as_str(), "undoing" | "undo_failed"))
        .map(|(_, n)| *n as usize)
        .sum();
    figures.orders = orders.len();
    figures.paid = succeeded.len();
    (found, figures)
}

/// Reads the attempts, with `retry_of` and `retry_reason` where payorch has them, and the
/// length of its `late_approvals` list where it has one.
pub(crate) async fn gather(database_url: &str) -> Result<Chains, String> {
    let db = connect(database_url).await?;
    let sql = |e: tokio_postgres::Error| format!("reading the database: {e}");
    let has = |table: &'static str, column: &'static str| {
        let db = &db;
        async move {
            db.query_one(
                "SELECT count(*) FROM information_schema.columns
                  WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2",
                &[&table, &column],
            )
            .await
            .map(|row| row.get::<_, i64>(0) > 0)
        }
    };
    let retry_column = has("payment_attempts", "retry_of").await.map_err(sql)?;
    let reason_column = has("payment_attempts", "retry_reason").await.map_err(sql)?;
    let late_table = has("late_approvals", "id").await.map_err(sql)?;
    let query = format!(
        "SELECT id::text, order_id::text, provider, status::text, failure_code,
                failure_class::text, {}, {}
           FROM payment_attempts",
        if retry_column {
            "retry_of::text"
        } else {
            "NULL::text"
        },
        if reason_column {
            "retry_reason::text"
        } else {
            "NULL::text"
        },
    );
    let attempts = db
        .query(&query, &[])
        .await
        .map_err(sql)?
        .iter()
        .map(|row| ChainAttempt {
            id: row.get(0),
            order_id: row.get(1),
            provider: row.get(2),
            status: row.get(3),
            failure_code: row.get(4),
            failure_class: row.get(5),
            retry_of: row.get(6),
            retry_reason: row.get(7),
        })
        .collect();
    let late_approvals = if late_table {
        let rows = db
            .query(
                "SELECT status::text, count(*) FROM late_approvals GROUP BY 1",
                &[],
            )
            .await
            .map_err(sql)?;
        Some(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    } else {
        None
    };
    Ok(Chains {
        attempts,
        retry_column,
        late_approvals,
    })
}

/// The share of `intents` checkouts paid, as a percentage with one decimal.
pub(crate) fn approval(paid: usize, intents: usize) -> String {
    if intents == 0 {
        return "-".into();
    }
    format!("{:.1} %", paid as f64 * 100.0 / intents as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(id: &str, order: &str, status: &str) -> ChainAttempt {
        ChainAttempt {
            id: id.into(),
            order_id: order.into(),
            provider: "stripe".into(),
            status: status.into(),
            ..ChainAttempt::default()
        }
    }

    fn declined(id: &str, order: &str, class: &str, code: &str) -> ChainAttempt {
        ChainAttempt {
            failure_class: Some(class.into()),
            failure_code: Some(code.into()),
            ..attempt(id, order, "failed")
        }
    }

    fn retry(id: &str, order: &str, of: &str, status: &str) -> ChainAttempt {
        ChainAttempt {
            provider: "adyen".into(),
            retry_of: Some(of.into()),
            retry_reason: Some("soft_decline".into()),
            ..attempt(id, order, status)
        }
    }

    /// Three checkouts: paid at once, paid by a retry after a soft decline, failed over
    /// from a provider that refused and then declined hard.
    fn good() -> Chains {
        Chains {
            attempts: vec![
                attempt("a1", "o1", "succeeded"),
                declined("a2", "o2", "soft", "generic_decline"),
                retry("a3", "o2", "a2", "succeeded"),
                ChainAttempt {
                    failure_code: Some("provider_unavailable".into()),
                    ..attempt("a4", "o3", "failed")
                },
                ChainAttempt {
                    failure_class: Some("hard".into()),
                    failure_code: Some("lost_card".into()),
                    retry_reason: Some("provider_unreached".into()),
                    ..retry("a5", "o3", "a4", "failed")
                },
            ],
            retry_column: true,
            late_approvals: Some(BTreeMap::from([("refunded".into(), 2)])),
        }
    }

    #[test]
    fn a_good_run_finds_nothing_and_counts_the_retries() {
        let (found, figures) = judge(&good());
        assert_eq!(found, RetryFindings::default());
        assert_eq!(
            (figures.orders, figures.paid, figures.paid_by_retry),
            (3, 2, 1)
        );
        assert_eq!(figures.retries["soft_decline"], 1);
        assert_eq!(figures.retries["provider_unreached"], 1);
        assert_eq!(figures.paid_at["adyen"], 1);
        assert_eq!(approval(figures.paid, 3), "66.7 %");
    }

    #[test]
    fn a_retry_after_an_unknown_outcome_is_found_whatever_it_became() {
        for before in [
            // A timeout, a 500, a connection closed after sending: failed as unknown.
            declined("b1", "o9", "unknown", "provider_error"),
            // Failed with no class at all (nothing read).
            attempt("b1", "o9", "failed"),
            // Still open, or told after the retry was made.
            attempt("b1", "o9", "pending"),
            attempt("b1", "o9", "succeeded"),
            // A hard decline is no reason either.
            declined("b1", "o9", "hard", "stolen_card"),
        ] {
            let mut chains = good();
            chains.attempts.push(before.clone());
            chains.attempts.push(retry("b2", "o9", "b1", "failed"));
            let (found, _) = judge(&chains);
            assert_eq!(found.retries_after_unknown, 1, "{before:?}");
        }
        // One that names an attempt the database lacks, or another checkout's.
        let mut chains = good();
        chains.attempts.push(retry("b3", "o1", "nowhere", "failed"));
        chains.attempts.push(retry("b4", "o1", "a2", "failed"));
        assert_eq!(judge(&chains).0.retries_after_unknown, 2);
    }

    #[test]
    fn a_checkout_paid_by_two_attempts_is_found() {
        let mut chains = good();
        chains.attempts[1].status = "succeeded".into();
        chains.attempts[1].failure_class = None;
        let (found, _) = judge(&chains);
        assert_eq!(found.orders_paid_twice, 1);
        // And a retry of a succeeded attempt is no definite decline.
        assert_eq!(found.retries_after_unknown, 1);
        assert_eq!(found.total(), 2);
    }

    #[test]
    fn a_late_approval_left_undoing_or_failed_to_undo_is_found() {
        let mut chains = good();
        chains.late_approvals = Some(BTreeMap::from([
            ("refunded".into(), 2),
            ("voided".into(), 1),
            ("undoing".into(), 1),
            ("undo_failed".into(), 2),
        ]));
        assert_eq!(judge(&chains).0.late_approvals_not_undone, 3);
    }

    #[test]
    fn every_checkout_pays_with_a_card_of_its_own_drawn_from_the_mix() {
        use payorch_sandbox::Behaviour;
        for token in [METHOD.to_owned(), format!("{METHOD}.card17")] {
            assert_eq!(
                Behaviour::for_payment_method(&token),
                Some(Behaviour::Mixed(None)),
                "{token}"
            );
        }
    }

    #[test]
    fn the_routing_turns_retries_on_only_when_asked() {
        assert_eq!(routing(false, 3), json!({"providers": ["stripe", "adyen"]}));
        assert_eq!(
            routing(true, 3)["retries"],
            json!({"soft_declines": true, "max_attempts": 3})
        );
    }

    #[test]
    fn the_default_mixes_read_and_take_late_approvals_when_the_sandbox_has_them() {
        for mix in [STRIPE_MIX, ADYEN_MIX] {
            payorch_sandbox::Mix::parse(mix).expect(mix);
            let late = with_late_approvals(mix);
            payorch_sandbox::Mix::parse(&late).expect(&late);
            assert_eq!(late.contains(LATE_APPROVAL), late_approvals_known());
        }
        assert_eq!(
            sandbox_args("approval=1", "approval=0.5", 7),
            [
                "--stripe-mix",
                "approval=1",
                "--adyen-mix",
                "approval=0.5",
                "--mix-seed",
                "7"
            ]
        );
    }
}
