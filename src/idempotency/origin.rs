//! The request behind a change, as the events of the change name it (docs/guides/events.md, "Events and
//! webhook endpoints"; docs/DESIGN.md, "The outbox").
//!
//! Events are written by the database's triggers, which cannot see the HTTP request. So every
//! statement that writes a request's own key also sets the transaction-local setting
//! [`SETTING`] to `{"id": <X-Request-Id>, "idempotency_key": <key>}` (as the key's row is
//! written: `RETURNING set_config(…)`), and the triggers copy it into the event. A key's
//! statements are the only ones that set it: a change made by a webhook, the reconciler or
//! support is in a transaction that never names a request, and its event's `request` is null.
//!
//! Why the `RETURNING` of the key's own write: a data-modifying CTE always runs to the end,
//! and its `RETURNING` is computed for each row it writes, so the setting is in place exactly
//! when the key was written; the triggers' events fire at the end of the statement, after
//! every CTE. A transaction that changes a resource in one statement and completes the key in
//! a later one names its request first ([`name_request`]).

use diesel::sql_types::Text;
use diesel::QueryResult;
use diesel_async::RunQueryDsl;

use super::KeyedRequest;
use crate::db::statement::{span, Param, Statement};
use crate::db::PgConn;
use tracing::Instrument;

/// The setting the event triggers read (`events_emit` in the `…_merchant_events` migration).
pub const SETTING: &str = "payorch.request";

/// A request as its events name it: the JSON the triggers copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestOrigin(String);

impl RequestOrigin {
    pub fn of(request: &KeyedRequest) -> Self {
        RequestOrigin(
            serde_json::json!({
                "id": request.request_id,
                "idempotency_key": request.key.as_str(),
            })
            .to_string(),
        )
    }

    /// The SQL expression that names this request to the rest of the statement's
    /// transaction: for the `RETURNING` of a write of its key.
    pub fn set_config(&self, q: &mut Statement<'_>) -> String {
        let value: Param = q.bind::<Text, _>(self.0.clone());
        format!("set_config('{SETTING}', {value}, true)")
    }

    /// Names this request for the rest of the caller's transaction.
    pub async fn name_request(&self, conn: &mut PgConn) -> QueryResult<()> {
        let mut q = Statement::new();
        let set = self.set_config(&mut q);
        q.push(format_args!("SELECT {set}"));
        q.finish()
            .execute(conn)
            .instrument(span("name_request"))
            .await
            .map(|_| ())
    }
}
