//! Every list of words the database CHECKs (a text domain's, or a column's `IN (…)`) held to
//! the Rust enum it mirrors, so that a variant added to an enum but not to its migration fails
//! here rather than as a `500` when the database refuses the row (issue #41).
//!
//! The lists are read from the migrated database (`pg_get_constraintdef`), not from the
//! migrations' text: what counts is what the last `ALTER DOMAIN` left.

use std::collections::{BTreeMap, BTreeSet};

use diesel::sql_types::Text;
use diesel_async::RunQueryDsl;
use payorch::accounts::{KeyOwner, SupportRole};
use payorch::events::endpoints::{EndpointStatus, ALL_EVENTS};
use payorch::events::EventType;
use payorch::idempotency::in_flight::KeyState;
use payorch::idempotency::Operation;
use payorch::ids::MerchantId;
use payorch::payments::attempts::retry::RetryReason;
use payorch::payments::attempts::{CallKind, Source};
use payorch::payments::disputes::keyed::{DisputeActionKind, DisputeActionStatus};
use payorch::payments::disputes::{DisputeReason, DisputeStage, DisputeStatus};
use payorch::payments::holds::HoldKind;
use payorch::payments::late_approvals::{ApprovedAs, LateSource, LateStatus};
use payorch::payments::settlement::FindingKind;
use payorch::payments::status::{AttemptStatus, OrderStatus};
use payorch::payments::success_routing::Strategy;
use payorch::payments::support::audit::Action;
use payorch::payments::webhooks::EventOutcome;
use payorch::providers::decline::FailureClass;
use payorch::providers::settlement::EntryKind;
use payorch::providers::{CaptureMethod, NextAction, ProviderOutcome, ThreeDSecure};

use crate::helpers::TestDatabase;

/// A CHECK as the catalog holds it: on a domain (`owner` is the domain) or on a table's
/// column (`owner` is the table).
#[derive(diesel::QueryableByName)]
struct Check {
    #[diesel(sql_type = Text)]
    owner: String,
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    definition: String,
}

/// How a CHECK's list stands to its enum.
enum Mirror {
    /// The same set of words: the database refuses nothing the enum says, and allows only
    /// `legacy` besides (words of old rows the code no longer writes).
    Same {
        words: Vec<&'static str>,
        legacy: &'static [&'static str],
    },
    /// Part of an enum (which statuses a refund takes, which a row keeps open): every word
    /// must still be one of the enum's, and the part itself is the table's rule, not Rust's.
    Within(Vec<&'static str>),
}

struct Expected {
    enum_name: &'static str,
    mirror: Mirror,
}

fn same(enum_name: &'static str, words: impl IntoIterator<Item = &'static str>) -> Expected {
    Expected {
        enum_name,
        mirror: Mirror::Same {
            words: words.into_iter().collect(),
            legacy: &[],
        },
    }
}

fn within(enum_name: &'static str, words: impl IntoIterator<Item = &'static str>) -> Expected {
    Expected {
        enum_name,
        mirror: Mirror::Within(words.into_iter().collect()),
    }
}

/// Every provider outcome's word. The match has no wildcard: a new variant does not compile
/// until it is listed here, and so held to `provider_outcome`.
fn provider_outcome_words() -> Vec<&'static str> {
    let id = || Some("p".to_string());
    let every = [
        ProviderOutcome::Succeeded {
            provider_id: "p".into(),
        },
        ProviderOutcome::Authorized {
            provider_id: "p".into(),
            expires_at: None,
        },
        ProviderOutcome::RequiresAction {
            provider_id: id(),
            next_action: NextAction {
                url: "https://example.test/".into(),
                return_url: None,
            },
        },
        ProviderOutcome::Canceled { provider_id: id() },
        ProviderOutcome::Failed {
            code: "c".into(),
            message: "m".into(),
            provider_id: id(),
            decline: None,
        },
        ProviderOutcome::Pending { provider_id: id() },
        ProviderOutcome::Unknown { reason: "r".into() },
        ProviderOutcome::Unavailable { reason: "r".into() },
        ProviderOutcome::NotFound,
    ];
    for outcome in &every {
        match outcome {
            ProviderOutcome::Succeeded { .. }
            | ProviderOutcome::Authorized { .. }
            | ProviderOutcome::RequiresAction { .. }
            | ProviderOutcome::Canceled { .. }
            | ProviderOutcome::Failed { .. }
            | ProviderOutcome::Pending { .. }
            | ProviderOutcome::Unknown { .. }
            | ProviderOutcome::Unavailable { .. }
            | ProviderOutcome::NotFound => {}
        }
    }
    every.iter().map(ProviderOutcome::label).collect()
}

/// What each list CHECK mirrors, by `(owner, constraint)`.
fn expected() -> BTreeMap<(&'static str, &'static str), Expected> {
    let statuses = || AttemptStatus::ALL.into_iter();
    let final_statuses = || {
        statuses()
            .filter(|s| s.is_final())
            .map(AttemptStatus::as_str)
    };
    let open_statuses = || {
        statuses()
            .filter(|s| !s.is_final())
            .map(AttemptStatus::as_str)
    };
    let roles = SupportRole::ALL.map(SupportRole::as_str);
    let owners = [KeyOwner::Merchant(MerchantId(uuid::Uuid::nil()))]
        .into_iter()
        .chain(SupportRole::ALL.map(KeyOwner::Support))
        .map(KeyOwner::role);
    let events = || EventType::ALL.map(EventType::as_str);
    // The words a refund, or a capture or void of a hold, takes: an attempt's, without the
    // hold and the release (docs/guides/refunds.md, "Refunds"); kept open while `created` or `pending`.
    let refund_words = ["created", "pending", "succeeded", "failed"];
    let refund_open = ["created", "pending"];
    let refund_final = ["succeeded", "failed"];
    let attempt = "AttemptStatus";

    let provider_operation = Expected {
        enum_name: "CallKind",
        mirror: Mirror::Same {
            words: CallKind::ALL.map(CallKind::as_str).into(),
            // Stripe's search, which calls logged before #39 and payorch no longer asks
            // (docs/guides/checkout.md, "At the real providers"): the old rows keep their word.
            legacy: &["search"],
        },
    };

    BTreeMap::from([
        (
            ("attempt_status", "attempt_status_known"),
            same(attempt, statuses().map(AttemptStatus::as_str)),
        ),
        (
            ("open_attempt_status", "open_attempt_status_known"),
            same("AttemptStatus, not final", open_statuses()),
        ),
        (
            ("payment_attempts", "payment_attempts_final_is_finished"),
            same("AttemptStatus, final", final_statuses()),
        ),
        (
            ("payment_attempts", "payment_attempts_open_is_checked"),
            same("AttemptStatus, not final", open_statuses()),
        ),
        (
            // A table CHECK, not a domain: migration 000024 says why.
            ("payment_attempts", "payment_attempts_failure_class_known"),
            same("FailureClass", FailureClass::ALL.map(FailureClass::as_str)),
        ),
        (
            // Table CHECKs, for migration 000024's reason (migration 000025).
            ("payment_attempts", "payment_attempts_retry_reason_known"),
            same("RetryReason", RetryReason::ALL.map(RetryReason::as_str)),
        ),
        (
            ("payment_attempts", "payment_attempts_three_d_secure_known"),
            same("ThreeDSecure", ThreeDSecure::ALL.map(ThreeDSecure::as_str)),
        ),
        (
            // A small table's plain CHECK (migration 000027).
            ("merchant_routing", "merchant_routing_strategy_known"),
            same("Strategy", Strategy::ALL.map(Strategy::as_str)),
        ),
        (
            ("order_status", "order_status_known"),
            same("OrderStatus", OrderStatus::ALL.map(OrderStatus::as_str)),
        ),
        (
            ("transition_source", "transition_source_known"),
            same("Source", Source::ALL.map(Source::as_str)),
        ),
        // Provider calls are logged as made by the API, the reconciler or support (the
        // reconciler's `log_source`); the type itself does not narrow it.
        (
            ("provider_call_source", "provider_call_source_known"),
            within("Source", ["api", "reconciler", "support"]),
        ),
        (
            ("key_operation", "key_operation_known"),
            same("Operation", Operation::ALL.map(Operation::as_str)),
        ),
        (
            ("key_state", "key_state_known"),
            same("KeyState", KeyState::ALL.map(KeyState::as_str)),
        ),
        (
            ("provider_operation", "provider_operation_known"),
            provider_operation,
        ),
        (
            ("provider_outcome", "provider_outcome_known"),
            same("ProviderOutcome::label", provider_outcome_words()),
        ),
        (
            ("webhook_outcome", "webhook_outcome_known"),
            same("EventOutcome", EventOutcome::ALL.map(EventOutcome::as_str)),
        ),
        // The outcomes of an event that moved no attempt of ours.
        (
            ("provider_webhooks", "provider_webhooks_attempt_known"),
            within("EventOutcome", ["unknown_attempt", "ignored"]),
        ),
        (
            ("refund_status", "refund_status_known"),
            within(attempt, refund_words),
        ),
        (
            ("open_refund_status", "open_refund_status_known"),
            within(attempt, refund_open),
        ),
        (
            ("refunds", "refunds_final_is_finished"),
            within(attempt, refund_final),
        ),
        (
            ("refunds", "refunds_open_is_checked"),
            within(attempt, refund_open),
        ),
        (
            ("hold_operations", "hold_operations_final_is_finished"),
            within(attempt, refund_final),
        ),
        (
            ("hold_operations", "hold_operations_open_is_checked"),
            within(attempt, refund_open),
        ),
        (
            ("capture_method", "capture_method_known"),
            same(
                "CaptureMethod",
                CaptureMethod::ALL.map(CaptureMethod::as_str),
            ),
        ),
        (
            ("hold_operation_kind", "hold_operation_kind_known"),
            same("HoldKind", HoldKind::ALL.map(HoldKind::as_str)),
        ),
        (
            ("endpoint_status", "endpoint_status_known"),
            same(
                "EndpointStatus",
                EndpointStatus::ALL.map(EndpointStatus::as_str),
            ),
        ),
        (
            ("event_type", "event_type_known"),
            same("EventType", events()),
        ),
        (
            ("late_approval_kind", "late_approval_kind_known"),
            same("ApprovedAs", ApprovedAs::ALL.map(ApprovedAs::as_str)),
        ),
        (
            ("late_approval_status", "late_approval_status_known"),
            same("LateStatus", LateStatus::ALL.map(LateStatus::as_str)),
        ),
        (
            ("late_approval_source", "late_approval_source_known"),
            same("LateSource", LateSource::ALL.map(LateSource::as_str)),
        ),
        (
            ("settlement_entry_kind", "settlement_entry_kind_known"),
            same("EntryKind", EntryKind::ALL.map(EntryKind::as_str)),
        ),
        (
            ("settlement_finding_kind", "settlement_finding_kind_known"),
            same("FindingKind", FindingKind::ALL.map(FindingKind::as_str)),
        ),
        (
            ("dispute_status", "dispute_status_known"),
            same(
                "DisputeStatus",
                DisputeStatus::ALL.map(DisputeStatus::as_str),
            ),
        ),
        (
            ("dispute_stage", "dispute_stage_known"),
            same("DisputeStage", DisputeStage::ALL.map(DisputeStage::as_str)),
        ),
        (
            ("dispute_reason", "dispute_reason_known"),
            same(
                "DisputeReason",
                DisputeReason::ALL.map(DisputeReason::as_str),
            ),
        ),
        (
            ("disputes", "disputes_closed_is_finished"),
            same(
                "DisputeStatus, closed",
                DisputeStatus::ALL
                    .into_iter()
                    .filter(|s| s.closed())
                    .map(DisputeStatus::as_str),
            ),
        ),
        (
            ("dispute_action_kind", "dispute_action_kind_known"),
            same(
                "DisputeActionKind",
                DisputeActionKind::ALL.map(DisputeActionKind::as_str),
            ),
        ),
        (
            ("dispute_action_status", "dispute_action_status_known"),
            same(
                "DisputeActionStatus",
                DisputeActionStatus::ALL.map(DisputeActionStatus::as_str),
            ),
        ),
        (
            (
                "webhook_endpoints",
                "webhook_endpoints_enabled_events_check",
            ),
            same(
                "EventType and ALL_EVENTS",
                events().into_iter().chain([ALL_EVENTS]),
            ),
        ),
        // Written only by the delivery worker's statements, as SQL literals; no enum yet.
        (
            ("delivery_state", "delivery_state_known"),
            within(
                "(none: literals in delivery)",
                ["pending", "succeeded", "failed", "canceled"],
            ),
        ),
        (
            ("api_keys", "api_keys_role_check"),
            same("KeyOwner::role", owners),
        ),
        (
            ("api_keys", "api_keys_support_role_check"),
            same("SupportRole", roles),
        ),
        (
            ("support_actions", "support_actions_support_role_check"),
            same("SupportRole", roles),
        ),
        (
            ("support_actions", "support_actions_action_check"),
            same("Action", Action::ALL.map(Action::as_str)),
        ),
        // The actions taken at a provider, audited by an ask before and an answer after.
        (
            ("support_actions", "support_actions_asked_first"),
            same(
                "Action::is_asked_first",
                Action::ALL
                    .into_iter()
                    .filter(|a| a.is_asked_first())
                    .map(Action::as_str),
            ),
        ),
        (
            ("support_actions", "support_actions_target_kind_check"),
            same("Action::target_kind", Action::ALL.map(Action::target_kind)),
        ),
    ])
}

/// The words an enum's `Within` list must come from.
fn whole_enum(enum_name: &str) -> Option<BTreeSet<&'static str>> {
    Some(match enum_name {
        "AttemptStatus" => AttemptStatus::ALL.map(AttemptStatus::as_str).into(),
        "Source" => Source::ALL.map(Source::as_str).into(),
        "EventOutcome" => EventOutcome::ALL.map(EventOutcome::as_str).into(),
        _ => return None,
    })
}

/// The words of a CHECK's lists (`ARRAY[…]`): one list per CHECK read here, where a CHECK
/// may also hold other literals (`support_actions_asked_first` compares a jsonb).
fn words(definition: &str) -> BTreeSet<String> {
    definition
        .split("ARRAY[")
        .skip(1)
        .filter_map(|list| list.split(']').next())
        .flat_map(|list| list.split('\'').skip(1).step_by(2))
        .map(str::to_owned)
        .collect()
}

fn difference<'a>(a: &'a BTreeSet<String>, b: &'a BTreeSet<String>) -> Vec<&'a str> {
    a.difference(b).map(String::as_str).collect()
}

#[tokio::test]
async fn schema_mirrors_every_check_list_matches_its_enum() {
    let db = TestDatabase::migrated().await;
    let mut conn = db.connect().await;
    // Every CHECK of ours that compares with a list of words: `IN (…)` reads back as
    // `= ANY (ARRAY[…])`, and a column of arrays is checked with `<@ ARRAY[…]`.
    // A partition's CHECKs are its parent's, read once there.
    let checks: Vec<Check> = diesel::sql_query(
        "SELECT coalesce(t.typname, r.relname)::text AS owner, c.conname::text AS name, \
                pg_get_constraintdef(c.oid) AS definition \
           FROM pg_constraint c \
           JOIN pg_namespace n ON n.oid = c.connamespace \
           LEFT JOIN pg_type t ON t.oid = c.contypid \
           LEFT JOIN pg_class r ON r.oid = c.conrelid \
          WHERE c.contype = 'c' AND n.nspname = 'public' \
            AND pg_get_constraintdef(c.oid) ~ 'ANY \\(ARRAY\\[|<@ ARRAY\\[' \
            AND NOT coalesce(r.relispartition, false) \
          ORDER BY 1, 2",
    )
    .load(&mut conn)
    .await
    .expect("read the CHECKs");

    let mut expected = expected();
    let mut problems = Vec::new();
    for check in &checks {
        let found = words(&check.definition);
        let Some(mirror) = expected.remove(&(check.owner.as_str(), check.name.as_str())) else {
            problems.push(format!(
                "{}.{}: a list CHECK no test holds to an enum: add it to `expected` ({:?})",
                check.owner, check.name, found
            ));
            continue;
        };
        let at = format!("{}.{} (enum {})", check.owner, check.name, mirror.enum_name);
        match mirror.mirror {
            Mirror::Same { words, legacy } => {
                let rust: BTreeSet<String> = words.iter().map(|w| w.to_string()).collect();
                let legacy: BTreeSet<String> = legacy.iter().map(|w| w.to_string()).collect();
                let refused = difference(&rust, &found);
                let allowed: BTreeSet<String> = found.difference(&legacy).cloned().collect();
                let unknown = difference(&allowed, &rust);
                let gone_legacy = difference(&legacy, &found);
                if !refused.is_empty() || !unknown.is_empty() || !gone_legacy.is_empty() {
                    problems.push(format!(
                        "{at}: Rust writes but the database refuses {refused:?}; the database \
                         allows but Rust does not know {unknown:?}; legacy allowance no longer \
                         in the database {gone_legacy:?}"
                    ));
                }
            }
            Mirror::Within(words) => {
                let listed: BTreeSet<String> = words.iter().map(|w| w.to_string()).collect();
                if listed != found {
                    problems.push(format!(
                        "{at}: the database lists {:?}, this test {:?}",
                        difference(&found, &listed),
                        difference(&listed, &found)
                    ));
                }
                if let Some(whole) = whole_enum(mirror.enum_name) {
                    let outside: Vec<&str> = found
                        .iter()
                        .map(String::as_str)
                        .filter(|w| !whole.contains(w))
                        .collect();
                    if !outside.is_empty() {
                        problems.push(format!("{at}: words Rust does not know {outside:?}"));
                    }
                }
            }
        }
    }
    for (owner, name) in expected.keys() {
        problems.push(format!("{owner}.{name}: expected a list CHECK, found none"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// An enum the API shows and the database stores says the same word in both: its JSON (serde's
/// `rename`s, written beside the variants for the OpenAPI document) is the word `words!`
/// stores, for every variant.
#[test]
fn schema_mirrors_every_shown_enum_says_its_stored_word() {
    fn check<T: serde::Serialize + std::fmt::Debug>(all: &[T], word: impl Fn(&T) -> &'static str) {
        for value in all {
            assert_eq!(
                serde_json::to_value(value).unwrap(),
                serde_json::Value::from(word(value)),
                "{value:?} is shown as one word and stored as another"
            );
        }
    }
    check(&AttemptStatus::ALL, |v| v.as_str());
    check(&OrderStatus::ALL, |v| v.as_str());
    check(&EventType::ALL, |v| v.as_str());
    check(&Source::ALL, |v| v.as_str());
    check(&EventOutcome::ALL, |v| v.as_str());
    check(&Action::ALL, |v| v.as_str());
    check(&SupportRole::ALL, |v| v.as_str());
    check(&Strategy::ALL, |v| v.as_str());
    check(&RetryReason::ALL, |v| v.as_str());
}
