//! The rules every field a merchant gives payorch follows, whatever it belongs to (an order,
//! a refund, a webhook endpoint): how problems are told (all at once, each named by its JSON
//! pointer; docs/guides/api.md, "API overview"), how long a description may be, and what free text may
//! hold (`text`). Below every module that reads a request's fields, so that each reads them by
//! the same rules without importing the others (docs/DESIGN.md, "Modules and their
//! dependencies").

pub mod text;

/// Field problems found while parsing: `(field pointer, message)`.
pub type FieldProblems = Vec<(String, String)>;

/// The longest description (or refund reason) kept, in characters.
pub const MAX_DESCRIPTION_LEN: usize = 1000;
