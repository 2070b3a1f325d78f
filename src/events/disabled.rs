//! Webhook endpoints payorch stopped sending to (an endpoint that answered `410`, or failed
//! for too long): one of the lists of `GET /v1/support/needs-a-human` (docs/guides/support.md, "Support").

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use crate::db::schema::webhook_endpoints;
use crate::db::PgConn;
use crate::ids::{EndpointId, MerchantId};

/// A disabled endpoint, not deleted: its merchant gets no more events there.
#[derive(Debug, Clone)]
pub struct DisabledEndpoint {
    pub id: EndpointId,
    pub merchant_id: MerchantId,
    pub url: String,
    pub disabled_reason: Option<String>,
    /// The first failed delivery since the last one that succeeded, if any.
    pub failing_since: Option<DateTime<Utc>>,
    /// When it was disabled (its last change).
    pub updated_at: DateTime<Utc>,
}

/// Up to `limit` disabled endpoints of every merchant, the latest disabled first.
pub async fn disabled_endpoints(
    conn: &mut PgConn,
    limit: i64,
) -> QueryResult<Vec<DisabledEndpoint>> {
    type Row = (
        Uuid,
        Uuid,
        String,
        Option<String>,
        Option<DateTime<Utc>>,
        DateTime<Utc>,
    );
    let rows: Vec<Row> = webhook_endpoints::table
        .filter(webhook_endpoints::status.eq("disabled"))
        .filter(webhook_endpoints::deleted_at.is_null())
        .order(webhook_endpoints::updated_at.desc())
        .limit(limit)
        .select((
            webhook_endpoints::id,
            webhook_endpoints::merchant_id,
            webhook_endpoints::url,
            webhook_endpoints::disabled_reason,
            webhook_endpoints::failing_since,
            webhook_endpoints::updated_at,
        ))
        .load(conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| DisabledEndpoint {
            id: EndpointId(r.0),
            merchant_id: MerchantId(r.1),
            url: r.2,
            disabled_reason: r.3,
            failing_since: r.4,
            updated_at: r.5,
        })
        .collect())
}
