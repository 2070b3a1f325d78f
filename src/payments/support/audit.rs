//! The audit of what support staff change (README, "Support"): every write a support key
//! makes — a void, a reconcile of a payment or refund, a redelivery, a routing change — is one
//! row of `support_actions`: who (the key, its name and role at the time), what, to which
//! resource, its state before and after, and when. The database keeps the table append-only.
//!
//! A routing change is written in the transaction that makes it. The provider-driven actions
//! (reconcile, void, redeliver) are not one database transaction, so their row is written when
//! the action has answered, with the status before it was asked and after.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde::Serialize;
use uuid::Uuid;

use crate::accounts::SupportRole;
use crate::db::schema::support_actions;
use crate::ids::{ApiKeyId, MerchantId, OrderId};

/// The support key that acts, as it is now.
#[derive(Debug, Clone)]
pub struct Actor {
    pub key_id: ApiKeyId,
    pub key_name: String,
    pub role: SupportRole,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    ReconcilePayment,
    VoidPayment,
    ReconcileRefund,
    RedeliverEvent,
    ChangeRouting,
}

impl Action {
    pub const ALL: [Action; 5] = [
        Action::ReconcilePayment,
        Action::VoidPayment,
        Action::ReconcileRefund,
        Action::RedeliverEvent,
        Action::ChangeRouting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::ReconcilePayment => "reconcile_payment",
            Action::VoidPayment => "void_payment",
            Action::ReconcileRefund => "reconcile_refund",
            Action::RedeliverEvent => "redeliver_event",
            Action::ChangeRouting => "change_routing",
        }
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

/// Writes the audit row of `done` by `actor`, on `conn` (inside the caller's transaction when
/// the action is one).
pub async fn record(conn: &mut AsyncPgConnection, actor: &Actor, done: Done) -> QueryResult<()> {
    diesel::insert_into(support_actions::table)
        .values((
            support_actions::id.eq(Uuid::now_v7()),
            support_actions::key_id.eq(actor.key_id.0),
            support_actions::key_name.eq(&actor.key_name),
            support_actions::support_role.eq(actor.role.as_str()),
            support_actions::action.eq(done.action.as_str()),
            support_actions::target_kind.eq(done.action.target_kind()),
            support_actions::target_id.eq(done.target_id),
            support_actions::merchant_id.eq(done.merchant_id.0),
            support_actions::order_id.eq(done.order_id.map(|o| o.0)),
            support_actions::before.eq(done.before),
            support_actions::after.eq(done.after),
        ))
        .execute(conn)
        .await
        .map(|_| ())
}

/// One audited action, as the payment's story shows it.
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
    pub after: Option<serde_json::Value>,
    pub at: DateTime<Utc>,
}

type Row = (
    Uuid,
    Uuid,
    String,
    String,
    String,
    String,
    Uuid,
    Option<serde_json::Value>,
    Option<serde_json::Value>,
    DateTime<Utc>,
);

/// Every support action on the order's payments, refunds and events, oldest first.
pub async fn actions_of_order(
    conn: &mut AsyncPgConnection,
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
            support_actions::at,
        ))
        .load(conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(
            |(id, key_id, key_name, role, action, target_kind, target_id, before, after, at)| {
                RecordedAction {
                    id,
                    key_id: ApiKeyId(key_id),
                    key_name,
                    role,
                    action,
                    target_kind,
                    target_id,
                    before,
                    after,
                    at,
                }
            },
        )
        .collect())
}
