//! Reading and deleting endpoints: `GET /v1/webhook_endpoints`, `GET …/{id}` and
//! `DELETE …/{id}` (docs/guides/events.md, "Webhook endpoints"). A deleted endpoint is kept, hidden, so its
//! deliveries stay in the story of the payments they told of; it is never shown again.

use diesel::prelude::*;
use diesel::sql_types::{Jsonb, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use serde_json::Value;
use tracing::Instrument;

use super::{EndpointRow, UnreadableEndpoint, WebhookEndpoint};
use crate::db::schema::webhook_endpoints;
use crate::db::scope::find_in_scope;
use crate::db::sql::Sql;
use crate::db::statement::{span, Statement};
use crate::db::PgConn;
use crate::ids::{EndpointId, MerchantId};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
    #[error(transparent)]
    Unreadable(#[from] UnreadableEndpoint),
}

/// The endpoint `id`, not deleted, if `scope` (a merchant, or `None` for support) may see it.
pub async fn find_endpoint(
    conn: &mut PgConn,
    scope: Option<MerchantId>,
    id: EndpointId,
) -> Result<Option<WebhookEndpoint>, StoreError> {
    let query = webhook_endpoints::table
        .filter(webhook_endpoints::deleted_at.is_null())
        .select(EndpointRow::as_select())
        .into_boxed();
    let id = webhook_endpoints::id.eq(id.0);
    let row: Option<EndpointRow> =
        find_in_scope(conn, query, id, webhook_endpoints::merchant_id, scope).await?;
    Ok(row.map(WebhookEndpoint::try_from).transpose()?)
}

/// `merchant`'s endpoints that are not deleted, newest first: at most
/// [`MAX_ENDPOINTS`](super::MAX_ENDPOINTS), so one page.
pub async fn list_endpoints(
    conn: &mut PgConn,
    merchant: MerchantId,
) -> Result<Vec<WebhookEndpoint>, StoreError> {
    let rows = webhook_endpoints::table
        .filter(webhook_endpoints::merchant_id.eq(merchant.0))
        .filter(webhook_endpoints::deleted_at.is_null())
        .order((
            webhook_endpoints::created_at.desc(),
            webhook_endpoints::id.desc(),
        ))
        .select(EndpointRow::as_select())
        .load(conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(WebhookEndpoint::try_from)
        .collect::<Result<_, _>>()?)
}

/// Deletes `merchant`'s endpoint `id` and, in the same statement, cancels its pending
/// deliveries: the endpoint as deleted, or `None` when there was none to delete (unknown,
/// another merchant's, or deleted already). Its status stays as it was.
pub async fn delete_endpoint(
    conn: &mut PgConn,
    merchant: MerchantId,
    id: EndpointId,
) -> Result<Option<WebhookEndpoint>, StoreError> {
    #[derive(QueryableByName)]
    struct Deleted {
        #[diesel(sql_type = Jsonb)]
        endpoint: Value,
    }
    let deleted: Option<Deleted> = delete_statement(merchant, id)
        .load(conn)
        .instrument(span("delete_webhook_endpoint"))
        .await
        .and_then(crate::db::one)
        .optional()?;
    let Some(deleted) = deleted else {
        return Ok(None);
    };
    let row: EndpointRow =
        serde_json::from_value(deleted.endpoint).map_err(|err| UnreadableEndpoint {
            id,
            what: err.to_string(),
        })?;
    Ok(Some(WebhookEndpoint::try_from(row)?))
}

/// The delete statement (whole text: `tests/sql/delete_webhook_endpoint.sql`). The deliveries
/// are canceled in its own statement so that none is left pending for an endpoint nobody
/// sees; a delivery an event writes for the endpoint while it is being deleted (its
/// statement read the endpoint live) is the sender's to cancel when it takes it.
fn delete_statement<'f>(merchant: MerchantId, id: EndpointId) -> Sql<'f> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(merchant.0);
    let id = q.bind::<SqlUuid, _>(id.0);
    q.push(format_args!(
        "WITH deleted AS (
    UPDATE webhook_endpoints SET deleted_at = now(), updated_at = now()
    WHERE merchant_id = {merchant} AND id = {id} AND deleted_at IS NULL
    RETURNING *),
canceled AS (
    UPDATE event_deliveries d SET state = 'canceled', updated_at = now()
    FROM deleted
    WHERE d.merchant_id = deleted.merchant_id AND d.endpoint_id = deleted.id
      AND d.state = 'pending'
    RETURNING d.event_id)
SELECT to_jsonb(deleted) - 'secret' - 'previous_secret' AS endpoint FROM deleted"
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_delete_statement_reads_as_its_snapshot() {
        assert_sql_snapshot(
            "delete_webhook_endpoint",
            &delete_statement(MerchantId::new(), EndpointId::new()),
        );
    }
}
