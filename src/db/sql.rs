//! Hand-written SQL that each connection prepares **once**.
//!
//! diesel's `sql_query` marks itself unsafe to cache, so every run of it is an unnamed
//! statement, planned from scratch for each request. [`Sql`] is the same hand-written SQL with
//! `$n` parameters, but safe to cache: the connection keeps it prepared, keyed by its text and
//! parameter types, and each later run is one round trip without planning (src/db/conn.rs;
//! behind a pooler in transaction mode every statement is unnamed, docs/operations/pooler.md). It is made by a
//! [`Statement`](super::statement::Statement), the one way to write SQL by hand
//! (docs/DESIGN.md, "Writing SQL").
//!
//! diesel numbers parameters itself, in the order they are pushed, so the text is cut at
//! every `$n` and the `n`-th value is pushed there; a parameter used three times is sent three
//! times (a few bytes), which keeps the text readable with repeated `$2`s.

use std::marker::PhantomData;

use diesel::pg::Pg;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{HasSqlType, Untyped};
use diesel::QueryResult;

/// SQL text with `$1`, `$2`, … and their values.
pub struct Sql<'f> {
    pieces: Vec<Piece>,
    values: Vec<Box<dyn Value + Send + 'f>>,
}

enum Piece {
    Text(String),
    /// The 0-based index of a value.
    Param(usize),
}

impl<'f> Sql<'f> {
    /// `text` with no values yet. Only `db`'s own: outside it, a statement is written with a
    /// [`Statement`](super::statement::Statement), whose fragments never write a `$n` of
    /// their own (docs/DESIGN.md, "Writing SQL").
    pub(super) fn new(text: &str) -> Self {
        Sql {
            pieces: split(text),
            values: Vec::new(),
        }
    }

    /// Binds the next value in place; its number (`n` of `$n`).
    pub(super) fn push_value<ST, V>(&mut self, value: V) -> usize
    where
        Pg: HasSqlType<ST>,
        V: ToSql<ST, Pg> + Send + 'f,
        ST: 'f,
    {
        self.values.push(Box::new(Bound {
            value,
            sql_type: PhantomData::<fn() -> ST>,
        }));
        self.values.len()
    }

    /// The same values under `text`, whose parameters are written as their numbers between
    /// two `mark`s rather than as `$n` (see `db::statement`): cut at the marks directly.
    pub(super) fn with_marked_text(self, text: &str, mark: char) -> Self {
        let pieces = text
            .split(mark)
            .enumerate()
            .map(|(i, part)| match (i % 2, part.parse::<usize>()) {
                // Marks come in pairs around a number: every odd part is one.
                (1, Ok(n)) => Piece::Param(n.saturating_sub(1)),
                _ => Piece::Text(part.to_string()),
            })
            .collect();
        Sql {
            pieces,
            values: self.values,
        }
    }

    /// The same text without its values, for a test that only reads the text (a snapshot of
    /// a statement whose values borrow what the test made).
    #[cfg(test)]
    pub(crate) fn text_only(&self) -> Sql<'static> {
        Sql {
            pieces: split(&self.text()),
            values: Vec::new(),
        }
    }

    /// The text as the database receives it, `$n` and all: what the statement snapshots
    /// compare.
    pub fn text(&self) -> String {
        self.pieces
            .iter()
            .map(|piece| match piece {
                Piece::Text(text) => text.clone(),
                Piece::Param(i) => format!("${}", i + 1),
            })
            .collect()
    }
}

/// `text` cut at every `$n`.
fn split(text: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        let digits = rest[at + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len() - at - 1);
        if digits == 0 {
            // A `$` that starts no parameter stays text.
            pieces.push(Piece::Text(rest[..=at].to_string()));
            rest = &rest[at + 1..];
            continue;
        }
        pieces.push(Piece::Text(rest[..at].to_string()));
        let n: usize = rest[at + 1..at + 1 + digits].parse().unwrap_or(0);
        pieces.push(Piece::Param(n.saturating_sub(1)));
        rest = &rest[at + 1 + digits..];
    }
    pieces.push(Piece::Text(rest.to_string()));
    pieces
}

trait Value {
    fn push<'b>(&'b self, out: AstPass<'_, 'b, Pg>) -> QueryResult<()>;
}

struct Bound<ST, V> {
    value: V,
    sql_type: PhantomData<fn() -> ST>,
}

impl<ST, V> Value for Bound<ST, V>
where
    Pg: HasSqlType<ST>,
    V: ToSql<ST, Pg>,
{
    fn push<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_bind_param::<ST, V>(&self.value)
    }
}

impl QueryFragment<Pg> for Sql<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_sql(text),
                Piece::Param(i) => {
                    let value = self.values.get(*i).ok_or_else(|| {
                        diesel::result::Error::QueryBuilderError(
                            format!("${} has no value", i + 1).into(),
                        )
                    })?;
                    value.push(out.reborrow())?;
                }
            }
        }
        Ok(())
    }
}

impl QueryId for Sql<'_> {
    type QueryId = ();
    // Cached by its text instead.
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl Query for Sql<'_> {
    type SqlType = Untyped;
}

/// Run on a synchronous connection too: the migrations' lock is taken on the connection the
/// (synchronous) migration harness drives (`db::migrations`).
impl<Conn> diesel::RunQueryDsl<Conn> for Sql<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> String {
        split(text)
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Param(i) => format!("<{i}>"),
            })
            .collect()
    }

    #[test]
    fn cuts_at_every_parameter_and_keeps_other_dollars() {
        assert_eq!(
            shape("SELECT $1, $12 + $1 FROM t WHERE a = '$' AND b = $3"),
            "SELECT <0>, <11> + <0> FROM t WHERE a = '$' AND b = <2>"
        );
        assert_eq!(shape("$2"), "<1>");
    }
}
