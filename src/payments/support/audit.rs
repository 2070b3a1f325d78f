//! The audit of what support staff change (docs/guides/support.md, "Support"): every write a support key
//! makes — a void, a reconcile of a payment or refund, a redelivery, a routing change — is on
//! record in `support_actions`: who (the key, its name and role at the time), what, to which
//! resource, its state before and after, and when. The database keeps the table append-only.
//!
//! A routing change and a redelivery are database writes alone: each is one row, written in
//! the transaction that makes it ([`record`]), so neither is ever made unaudited. The
//! provider-driven actions (reconcile, void) cannot share a transaction with the provider, so
//! each is two rows: its [`ask`], written before anything is done — if it cannot be written,
//! the action is not taken — and its [`answer`] once the action has answered. A process that
//! stops in between leaves the ask alone, and the story shows it as asked, outcome unknown.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Serialize;
use uuid::Uuid;

use crate::accounts::SupportRole;
use crate::db::schema::support_actions;
use crate::db::PgConn;
use crate::ids::{ApiKeyId, MerchantId, OrderId};
use crate::words::words;

/// The support key that acts, as it is now.
#[derive(Debug, Clone)]
pub struct Actor {
    pub key_id: ApiKeyId,
    pub key_name: String,
    pub role: SupportRole,
}

words! {
    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Action {
        ReconcilePayment => "reconcile_payment",
        VoidPayment => "void_payment",
        ReconcileRefund => "reconcile_refund",
        RedeliverEvent => "redeliver_event",
        ChangeRouting => "change_routing",
    }
}

impl Action {
    /// Whether the action is taken at a provider, outside any transaction of ours: audited by
    /// an [`ask`] before it and an [`answer`] after (the table's `support_actions_asked_first`).
    pub fn is_asked_first(self) -> bool {
        matches!(
            self,
            Action::ReconcilePayment | Action::VoidPayment | Action::ReconcileRefund
        )
    }

    /// The kind of resource the action is taken on.
    pub fn target_kind(self) -> &'static str {
        match self {
            Action::ReconcilePayment | Action::VoidPayment => "payment",
            Action::ReconcileRefund => "refund",
            Action::RedeliverEvent => "event",
            Action::ChangeRouting => "merchant",
        }
    }
}

/// What was done to which resource, of which merchant (and order, but for routing).
#[derive(Debug, Clone)]
pub struct Done {
    pub action: Action,
    pub target_id: Uuid,
    pub merchant_id: MerchantId,
    pub order_id: Option<OrderId>,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
}

/// The `after` of an ask: the action was asked, and nothing is known yet of what it did.
pub fn asked_outcome() -> serde_json::Value {
    serde_json::json!({ "outcome": "asked" })
}

/// Writes the one audit row of `done` by `actor`, a database write made in the caller's
/// transaction on `conn` (a redelivery, a routing change): made and audited, or neither.
pub async fn record(conn: &mut PgConn, actor: &Actor, done: Done) -> QueryResult<()> {
    insert(conn, Uuid::now_v7(), actor, &done, None).await
}

/// A provider-driven action asked on record: the only way to write its outcome.
#[derive(Debug)]
#[must_use = "an ask is answered once the action has answered"]
pub struct Asked {
    id: Uuid,
    actor: Actor,
    done: Done,
}

/// Writes the ask of a provider-driven action `done` by `actor` (its `after` is the ask's
/// marker, whatever `done` says), before anything is done: if this fails, the action must not
/// be taken.
pub async fn ask(conn: &mut PgConn, actor: &Actor, done: Done) -> QueryResult<Asked> {
    let done = Done {
        after: Some(asked_outcome()),
        ..done
    };
    let id = Uuid::now_v7();
    insert(conn, id, actor, &done, None).await?;
    Ok(Asked {
        id,
        actor: actor.clone(),
        done,
    })
}

/// Writes the outcome of `asked`: `after` is what the action answered (`{"error": code}` when
/// it failed).
pub async fn answer(conn: &mut PgConn, asked: Asked, after: serde_json::Value) -> QueryResult<()> {
    let done = Done {
        after: Some(after),
        ..asked.done
    };
    insert(conn, Uuid::now_v7(), &asked.actor, &done, Some(asked.id)).await
}

async fn insert(
    conn: &mut PgConn,
    id: Uuid,
    actor: &Actor,
    done: &Done,
    answers: Option<Uuid>,
) -> QueryResult<()> {
    diesel::insert_into(support_actions::table)
        .values((
            support_actions::id.eq(id),
            support_actions::key_id.eq(actor.key_id.0),
            support_actions::key_name.eq(&actor.key_name),
            support_actions::support_role.eq(actor.role.as_str()),
            support_actions::action.eq(done.action.as_str()),
            support_actions::target_kind.eq(done.action.target_kind()),
            support_actions::target_id.eq(done.target_id),
            support_actions::merchant_id.eq(done.merchant_id.0),
            support_actions::order_id.eq(done.order_id.map(|o| o.0)),
            support_actions::before.eq(&done.before),
            support_actions::after.eq(&done.after),
            support_actions::answers.eq(answers),
        ))
        .execute(conn)
        .await
        .map(|_| ())
}

/// One audited action, as the payment's story shows it: a one-row action, or an ask with
/// its outcome if one was written.
#[derive(Debug, Clone)]
pub struct RecordedAction {
    pub id: Uuid,
    pub key_id: ApiKeyId,
    pub key_name: String,
    pub role: String,
    pub action: String,
    pub target_kind: String,
    pub target_id: Uuid,
    pub before: Option<serde_json::Value>,
    /// What the action answered; `None` while its outcome is unknown.
    pub after: Option<serde_json::Value>,
    /// When it was asked (a one-row action: done).
    pub at: DateTime<Utc>,
    /// When its outcome was written; `None`: asked, outcome unknown — still running, or its
    /// process stopped before it could say.
    pub answered_at: Option<DateTime<Utc>>,
}

#[derive(Queryable)]
struct Row {
    id: Uuid,
    key_id: Uuid,
    key_name: String,
    role: String,
    action: String,
    target_kind: String,
    target_id: Uuid,
    before: Option<serde_json::Value>,
    after: Option<serde_json::Value>,
    answers: Option<Uuid>,
    at: DateTime<Utc>,
}

impl Row {
    fn into_action(self) -> RecordedAction {
        // Only an ask carries the marker (`support_actions_asked_first`).
        let asked = self.after.as_ref() == Some(&asked_outcome());
        RecordedAction {
            id: self.id,
            key_id: ApiKeyId(self.key_id),
            key_name: self.key_name,
            role: self.role,
            action: self.action,
            target_kind: self.target_kind,
            target_id: self.target_id,
            before: self.before,
            after: if asked { None } else { self.after },
            at: self.at,
            answered_at: if asked { None } else { Some(self.at) },
        }
    }
}

/// Every support action on the order's payments, refunds and events, oldest first, each ask
/// with its outcome.
pub async fn actions_of_order(
    conn: &mut PgConn,
    merchant: MerchantId,
    order: OrderId,
) -> QueryResult<Vec<RecordedAction>> {
    let rows: Vec<Row> = support_actions::table
        .filter(support_actions::merchant_id.eq(merchant.0))
        .filter(support_actions::order_id.eq(order.0))
        .order((support_actions::at.asc(), support_actions::id.asc()))
        .select((
            support_actions::id,
            support_actions::key_id,
            support_actions::key_name,
            support_actions::support_role,
            support_actions::action,
            support_actions::target_kind,
            support_actions::target_id,
            support_actions::before,
            support_actions::after,
            support_actions::answers,
            support_actions::at,
        ))
        .load(conn)
        .await?;
    Ok(with_outcomes(rows))
}

/// Pairs each ask with the outcome naming it (the database lets an ask have one at most).
/// An outcome whose ask is not among `rows` (an ask is on the same target, so of the same
/// order, unless someone wrote it by hand) is listed on its own rather than hidden.
fn with_outcomes(rows: Vec<Row>) -> Vec<RecordedAction> {
    let (outcomes, rows): (Vec<Row>, Vec<Row>) =
        rows.into_iter().partition(|row| row.answers.is_some());
    let mut outcomes: std::collections::HashMap<Uuid, Row> = outcomes
        .into_iter()
        .filter_map(|row| Some((row.answers?, row)))
        .collect();
    let mut actions: Vec<RecordedAction> = rows
        .into_iter()
        .map(|row| {
            let outcome = outcomes.remove(&row.id);
            let mut action = row.into_action();
            if let Some(outcome) = outcome {
                action.after = outcome.after;
                action.answered_at = Some(outcome.at);
            }
            action
        })
        .collect();
    if !outcomes.is_empty() {
        actions.extend(outcomes.into_values().map(Row::into_action));
        actions.sort_by_key(|a| (a.at, a.id));
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::Action;

    /// The audit is written, never parsed back: the round trip is through `ALL`.
    #[test]
    fn every_action_has_a_word_of_its_own() {
        for action in Action::ALL {
            let back = Action::ALL
                .into_iter()
                .filter(|a| a.as_str() == action.as_str());
            assert_eq!(back.collect::<Vec<_>>(), vec![action]);
        }
    }
}
