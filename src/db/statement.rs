//! A statement put together from fragments that number their own placeholders.
//!
//! A keyed statement is one SQL text made by several owners: the claim's frame
//! (`idempotency`), the work under the key (`payments`), the key's completion. Written with
//! fixed `$N`s, each fragment had to know how many parameters came before it, so renumbering
//! one broke SQL in another file. Here a fragment binds its values first and writes the
//! [`Param`]s it got back into its text: the numbers are handed out in binding order, and no
//! fragment ever writes a `$` of its own ([`Statement::push`] refuses it in debug builds and
//! tests).
//!
//! ```ignore
//! let mut q = Statement::new();
//! let merchant = q.bind::<Uuid, _>(merchant_id);
//! let key = q.bind::<Text, _>(key);
//! q.push(format_args!("SELECT 1 FROM idempotency_keys WHERE merchant_id = {merchant} AND key = {key}"));
//! let sql: Sql = q.finish();
//! ```
//!
//! The finished [`Sql`] is prepared once per connection like any other (see `db::sql`), and
//! [`Sql::text`] is what the statement snapshots compare (`tests/sql/`, checked by
//! `db::snapshot`).

use std::fmt::{self, Display, Write as _};

use diesel::pg::Pg;
use diesel::serialize::ToSql;
use diesel::sql_types::HasSqlType;

use super::sql::Sql;

/// The span a statement runs in, `db.statement`, named: with the claim's
/// (`idempotency.claim`) and the provider calls' (`provider.call`), a slow request's time
/// reads from one trace (docs/operations/monitoring.md, "Tracing"). Run the statement's future `.instrument(…)`ed.
/// Like every span of the write path it is at `debug` under the target
/// [`TRACE`](crate::telemetry::TRACE): off, unless asked for, it costs a request nothing.
pub fn span(name: &'static str) -> tracing::Span {
    tracing::debug_span!(target: crate::telemetry::TRACE, "db.statement", statement = name)
}

/// A placeholder handed out by [`Statement::bind`]; becomes `$n` in the finished text. Copy
/// it into as many places of the text as need the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param(usize);

/// How a [`Param`] is written while the text is put together: a mark no SQL text holds, so
/// that [`Statement::push`] can tell it from a `$n` a fragment wrote itself.
const MARK: char = '\u{1}';

impl Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{MARK}{}{MARK}", self.0)
    }
}

/// SQL text being written, and the values its placeholders stand for.
pub struct Statement<'f> {
    text: String,
    sql: Sql<'f>,
}

impl Default for Statement<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'f> Statement<'f> {
    pub fn new() -> Self {
        Statement {
            text: String::new(),
            sql: Sql::new(""),
        }
    }

    /// Binds `value` as SQL type `ST` and hands out its placeholder.
    pub fn bind<ST, V>(&mut self, value: V) -> Param
    where
        Pg: HasSqlType<ST>,
        V: ToSql<ST, Pg> + Send + 'f,
        ST: 'f,
    {
        Param(self.sql.push_value::<ST, V>(value))
    }

    /// Appends SQL text. Placeholders go in only as [`Param`]s: a text that itself holds
    /// `$1` would take the numbering back into the fragment's hands.
    pub fn push(&mut self, text: impl Display) -> &mut Self {
        let start = self.text.len();
        let _ = write!(self.text, "{text}");
        debug_assert!(
            !writes_a_placeholder(&self.text[start..]),
            "a fragment wrote a placeholder of its own: {}",
            &self.text[start..]
        );
        self
    }

    /// The statement, ready to run: each [`Param`] becomes its `$n`.
    pub fn finish(self) -> Sql<'f> {
        self.sql.with_marked_text(&self.text, MARK)
    }
}

/// Whether `text` holds a `$` followed by a digit: a placeholder not handed out.
fn writes_a_placeholder(text: &str) -> bool {
    text.match_indices('$')
        .any(|(at, _)| text[at + 1..].starts_with(|c: char| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use diesel::sql_types::{Integer, Text};

    #[test]
    fn placeholders_are_numbered_in_binding_order_across_fragments() {
        let mut q = Statement::new();
        let a = q.bind::<Integer, _>(1);
        q.push(format_args!("SELECT {a}"));
        // A second fragment, written without knowing how many came before it.
        let fragment = |q: &mut Statement<'_>| {
            let b = q.bind::<Text, _>("x");
            q.push(format_args!(", {b}, {b}"));
        };
        fragment(&mut q);
        q.push(format_args!(", {a}"));
        assert_eq!(q.finish().text(), "SELECT $1, $2, $2, $1");
    }

    #[test]
    #[should_panic(expected = "a fragment wrote a placeholder of its own")]
    fn a_literal_placeholder_is_refused() {
        let mut q = Statement::new();
        q.bind::<Integer, _>(1);
        q.push("SELECT $2");
    }
}
