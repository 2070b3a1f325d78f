//! What a statement that records a provider's answer is made of, besides the row's own move:
//! written once here, for `refunds::record` and `holds::record`, and the timeline row for an
//! attempt's move too (`attempts::transition::move_ctes`; docs/DESIGN.md, "The write path").
//!
//! Such a statement opens with the CTE `moved`: the row's move, conditional on the status it
//! was read with ([`unmoved`] when the answer moves nothing: the row as it is, for the key and
//! the call log). Everything after it is written from `moved`: the timeline row
//! ([`logged`], when the status changed), then, by [`finish`], the key's completion (the
//! `settled` CTE of `idempotency::in_flight`, for the request's key or the row's) and the
//! call's log row ([`called`]), and `SELECT * FROM moved`. So a statement whose row was not as read writes nothing at all, and its caller
//! reads the row again and judges the answer against it.
//!
//! The call's row is written last in the text, but the order that matters is the locks': the
//! foreign keys of `provider_calls` take their share locks at the end of the statement, after
//! `moved` took the row exclusively, so two recordings of one row never wait for each other
//! the wrong way round.

use diesel::sql_types::{Nullable, Text, Uuid as SqlUuid};
use uuid::Uuid;

use crate::db::sql::Sql;
use crate::db::statement::{Param, Statement};
use crate::idempotency::in_flight::{settle_by_resource, Settle, Settling};
use crate::idempotency::{InFlightKey, ResourceType};
use crate::ids::MerchantId;
use crate::payments::attempts::call_log::CallRecord;
use crate::payments::attempts::Source;

/// The CTE `moved` for an answer that moves nothing: the row of `table` as it is, while it
/// is `was` (a final row never changes, so for it that is a formality).
pub(crate) fn unmoved(
    q: &mut Statement<'_>,
    table: &str,
    (merchant_id, id): (Uuid, Uuid),
    was: &'static str,
) {
    let merchant = q.bind::<SqlUuid, _>(merchant_id);
    let id = q.bind::<SqlUuid, _>(id);
    let was = q.bind::<Text, _>(was);
    q.push(format_args!(
        "WITH moved AS (
    SELECT * FROM {table} WHERE merchant_id = {merchant} AND id = {id} AND status = {was})"
    ));
}

/// The CTE `logged`: the moved row's timeline row in `table` (whose column `column` names
/// the row), when its status is no longer `was`.
pub(crate) fn logged<'f>(
    q: &mut Statement<'f>,
    (table, column): (&str, &str),
    was: Param,
    source: Source,
    detail: Option<&'f str>,
) {
    let source = q.bind::<Text, _>(source.as_str());
    let detail = q.bind::<Nullable<Text>, _>(detail);
    q.push(format_args!(
        ",
logged AS (
    INSERT INTO {table} (merchant_id, {column}, from_status, to_status, source, detail)
    SELECT merchant_id, id, {was}, status, {source}, {detail} FROM moved WHERE status <> {was})"
    ));
}

/// What a logged call is about, besides its payment: the column of `provider_calls` that
/// names the moved row.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CallAbout {
    Refund,
    HoldOperation,
}

/// The CTE `called`: the call's row in the payment's call log, about the moved row (a refund
/// or an operation, whose `payment_id` is the payment's).
pub(crate) fn called<'f>(q: &mut Statement<'f>, call: &'f CallRecord, about: CallAbout) {
    let column = match about {
        CallAbout::Refund => "refund_id",
        CallAbout::HoldOperation => "hold_operation_id",
    };
    let values = call.values(q);
    q.push(format_args!(
        ",
called AS (
    INSERT INTO provider_calls (merchant_id, attempt_id, {column}, operation, source, outcome,
        http_status, latency_ms, detail)
    SELECT merchant_id, payment_id, id, {values} FROM moved)"
    ));
}

/// Whose key an answer completes: the request's own (consumed by the statement, and handed
/// back if it wrote nothing), or, for whoever else finished the work (the reconciler, a
/// webhook, support), the key named on the row (none for a row made without one).
pub(crate) enum AnswerKey<'k> {
    Request(InFlightKey),
    Resource(Option<&'k str>),
}

/// The row an answer is about, as its key and call log name it.
pub(crate) struct Answered<'a> {
    pub merchant_id: MerchantId,
    pub resource: (ResourceType, Uuid),
    pub about: CallAbout,
    /// The key's answer: the status code it replays, and the row's open statuses (an SQL
    /// list: a key completed while its row is open stays unresolved).
    pub settle: Settle<'a>,
}

/// What every answer statement writes after its `moved` (and `logged`) CTEs: the key's
/// completion and the call's row, then the moved row; the statement, finished, and the
/// request key's [`Settling`] (none for a key completed by its resource).
pub(crate) fn finish<'f>(
    mut q: Statement<'f>,
    key: AnswerKey<'f>,
    row: Answered<'_>,
    call: Option<&'f CallRecord>,
) -> (Sql<'f>, Option<Settling>) {
    q.push(",\n");
    let settling = match key {
        AnswerKey::Request(key) => Some(key.settle(&mut q, row.settle)),
        AnswerKey::Resource(key) => {
            settle_by_resource(
                &mut q,
                row.merchant_id,
                key,
                row.resource,
                row.settle,
                // At whatever status the answer leaves the row: unresolved while it is open,
                // so a retry replays the row as it is.
                None,
            );
            None
        }
    };
    if let Some(call) = call {
        called(&mut q, call, row.about);
    }
    q.push("\nSELECT * FROM moved");
    (q.finish(), settling)
}
