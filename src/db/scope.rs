//! Tenancy, written once: what a caller may see of a table with a `merchant_id` column. A
//! merchant's key sees its own merchant's rows; a support key (`None`) every merchant's
//! (docs/guides/api.md, "API overview": anything else is `404`). Each by-id look-up of a resource —
//! an order, a payment, a refund, an endpoint, an event — reads through [`find_in_scope`],
//! so none can forget the merchant, and a list through [`InScope::in_scope`].

use std::future::Future;

use diesel::dsl;
use diesel::query_dsl::methods::{FilterDsl, LimitDsl};
use diesel::sql_types::Uuid as SqlUuid;
use diesel::{Expression, ExpressionMethods, OptionalExtension, QueryResult};
use diesel_async::methods::LoadQuery;
use diesel_async::RunQueryDsl;
use futures_util::FutureExt;
use uuid::Uuid;

use crate::db::PgConn;
use crate::ids::MerchantId;

/// A query narrowed to what `scope` may see.
pub trait InScope: Sized {
    /// Only `scope`'s rows by `merchant_id` (the table's column), or every row for support
    /// (`None`).
    fn in_scope<M>(self, merchant_id: M, scope: Option<MerchantId>) -> Self
    where
        M: ExpressionMethods + Expression<SqlType = SqlUuid>,
        Self: FilterDsl<dsl::Eq<M, Uuid>, Output = Self>,
    {
        match scope {
            Some(merchant) => FilterDsl::filter(self, merchant_id.eq(merchant.0)),
            None => self,
        }
    }
}

impl<Q> InScope for Q {}

/// The row of `query` (a boxed select of one table) that `id` picks (`table::id.eq(..)`), if
/// `scope` may see it ([`InScope::in_scope`] by `merchant_id`): at most one row, and `None`
/// for none. A plain function returning its future, so the future is `Send` for any caller
/// (as an `async fn` generic over the query, it is not to the compiler's eye).
pub fn find_in_scope<'c, Q, I, M, R>(
    conn: &'c mut PgConn,
    query: Q,
    id: dsl::Eq<I, Uuid>,
    merchant_id: M,
    scope: Option<MerchantId>,
) -> impl Future<Output = QueryResult<Option<R>>> + Send + 'c
where
    I: ExpressionMethods + Expression<SqlType = SqlUuid>,
    M: ExpressionMethods + Expression<SqlType = SqlUuid>,
    Q: FilterDsl<dsl::Eq<I, Uuid>, Output = Q> + FilterDsl<dsl::Eq<M, Uuid>, Output = Q>,
    Q: LimitDsl,
    <Q as LimitDsl>::Output: LoadQuery<'static, PgConn, R> + Send + 'static,
    R: Send + 'c,
{
    let query = FilterDsl::filter(query, id).in_scope(merchant_id, scope);
    LimitDsl::limit(query, 1)
        .load(conn)
        .map(|rows| rows.and_then(super::one).optional())
}
