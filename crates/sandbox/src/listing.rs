//! The query of Stripe's list APIs (`GET /v1/payment_intents`, `GET /v1/refunds`), as
//! Stripe's OpenAPI document defines it: `limit` (1 to 100, default 10), `starting_after` or
//! `ending_before` (an object's id: the page after or before it, newest first), `created` (a
//! Unix time, or a range as `created[gt]`, `created[gte]`, `created[lt]`, `created[lte]`),
//! `expand[]` (taken, and nothing to expand here), and the list's own filters. Any other
//! parameter is refused, as Stripe refuses it.
//!
//! The list APIs are read-after-write (Stripe's docs, "Search": "the list APIs aren't
//! subject to the delay"), so an intent lost with its answer is found by listing the window
//! it was made in.

use std::collections::BTreeMap;

use super::params::ParamError;

/// Stripe's most objects a page holds.
const MAX_LIMIT: usize = 100;
const DEFAULT_LIMIT: usize = 10;

/// Where a page starts, by an object's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cursor {
    /// The newest first.
    Newest,
    /// `starting_after`: the ones older than this id.
    After(String),
    /// `ending_before`: the ones newer than this id.
    Before(String),
}

impl Cursor {
    /// The parameter that named the cursor, for an error about it.
    pub(super) fn param(&self) -> &'static str {
        match self {
            Cursor::Newest => "",
            Cursor::After(_) => "starting_after",
            Cursor::Before(_) => "ending_before",
        }
    }

    /// The id it names.
    pub(super) fn id(&self) -> &str {
        match self {
            Cursor::Newest => "",
            Cursor::After(id) | Cursor::Before(id) => id,
        }
    }
}

/// `created`: an exact Unix time, and bounds, all of which an object's `created` must meet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Created {
    pub eq: Option<i64>,
    pub gt: Option<i64>,
    pub gte: Option<i64>,
    pub lt: Option<i64>,
    pub lte: Option<i64>,
}

impl Created {
    /// The earliest `created` the window takes.
    pub(super) fn earliest(&self) -> i64 {
        [self.eq, self.gte, self.gt.map(|gt| gt.saturating_add(1))]
            .into_iter()
            .flatten()
            .fold(i64::MIN, i64::max)
    }

    /// Whether an object created at `created` (Unix seconds) is in the window.
    pub(super) fn holds(&self, created: i64) -> bool {
        self.eq.is_none_or(|eq| created == eq)
            && self.gt.is_none_or(|gt| created > gt)
            && self.gte.is_none_or(|gte| created >= gte)
            && self.lt.is_none_or(|lt| created < lt)
            && self.lte.is_none_or(|lte| created <= lte)
    }
}

/// A list request's parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ListQuery {
    pub limit: usize,
    pub cursor: Cursor,
    pub created: Created,
    /// The list's own filters (`customer`, `payment_intent`, …), as given.
    pub filters: BTreeMap<String, String>,
}

impl ListQuery {
    /// The query string of a list whose own filters are `filters`.
    pub(super) fn parse(query: &str, filters: &[&str]) -> Result<ListQuery, ParamError> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query).map_err(|e| ParamError {
                code: "parameter_invalid",
                param: None,
                message: format!("Invalid query string: {e}"),
            })?;
        let mut limit = DEFAULT_LIMIT;
        let mut after = None;
        let mut before = None;
        let mut created = Created::default();
        let mut own = BTreeMap::new();
        for (name, value) in pairs {
            let bound = match name.as_str() {
                "limit" => {
                    limit = match value.parse::<usize>() {
                        Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
                        _ => {
                            return Err(ParamError::new(
                                "parameter_invalid_integer",
                                "limit",
                                format!(
                                    "Invalid limit: {value}; a limit is a whole number from 1 \
                                     to {MAX_LIMIT}."
                                ),
                            ))
                        }
                    };
                    continue;
                }
                "starting_after" => {
                    after = Some(value);
                    continue;
                }
                "ending_before" => {
                    before = Some(value);
                    continue;
                }
                "created" => &mut created.eq,
                "created[gt]" => &mut created.gt,
                "created[gte]" => &mut created.gte,
                "created[lt]" => &mut created.lt,
                "created[lte]" => &mut created.lte,
                // Nothing here has anything to expand.
                name if name == "expand[]" || is_indexed(name, "expand") => continue,
                name if filters.contains(&name) => {
                    own.insert(name.to_owned(), value);
                    continue;
                }
                _ => {
                    return Err(ParamError::new(
                        "parameter_unknown",
                        &name,
                        format!("Received unknown parameter: {name}"),
                    ))
                }
            };
            *bound = Some(value.parse::<i64>().map_err(|_| {
                ParamError::new(
                    "parameter_invalid_integer",
                    &name,
                    format!("Invalid integer: {value}"),
                )
            })?);
        }
        let cursor = match (after, before) {
            (Some(_), Some(_)) => {
                return Err(ParamError {
                    code: "parameter_invalid_string",
                    param: Some("starting_after".into()),
                    message: "You may only specify one of these parameters: starting_after, \
                              ending_before."
                        .into(),
                })
            }
            (Some(after), None) => Cursor::After(after),
            (None, Some(before)) => Cursor::Before(before),
            (None, None) => Cursor::Newest,
        };
        Ok(ListQuery {
            limit,
            cursor,
            created,
            filters: own,
        })
    }
}

/// `name` is `array[N]`.
fn is_indexed(name: &str, array: &str) -> bool {
    name.strip_prefix(array)
        .and_then(|rest| rest.strip_prefix('['))
        .and_then(|rest| rest.strip_suffix(']'))
        .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_of_creation_pages_as_stripe_does() {
        let query = "created%5Bgte%5D=100&created%5Blt%5D=200&limit=3&starting_after=pi_x\
                     &expand%5B%5D=data.latest_charge&customer=cus_1";
        let parsed = ListQuery::parse(query, &["customer"]).expect("parses");
        assert_eq!(parsed.limit, 3);
        assert_eq!(parsed.cursor, Cursor::After("pi_x".into()));
        assert_eq!(
            parsed.filters.get("customer").map(String::as_str),
            Some("cus_1")
        );
        let window = parsed.created;
        assert_eq!(window.earliest(), 100);
        assert!(!window.holds(99) && window.holds(100) && window.holds(199));
        assert!(!window.holds(200));
        let exact = ListQuery::parse("created=150", &[])
            .expect("parses")
            .created;
        assert!(exact.holds(150) && !exact.holds(151));
        let open = ListQuery::parse("", &[]).expect("parses");
        assert_eq!((open.limit, open.cursor), (10, Cursor::Newest));
    }

    #[test]
    fn what_stripe_refuses_is_refused_and_named() {
        let refused = |query: &str| {
            ListQuery::parse(query, &["payment_intent"])
                .err()
                .map(|e| (e.code, e.param))
        };
        assert_eq!(
            refused("limit=0"),
            Some(("parameter_invalid_integer", Some("limit".into())))
        );
        assert_eq!(
            refused("limit=101"),
            Some(("parameter_invalid_integer", Some("limit".into())))
        );
        assert_eq!(
            refused("created%5Bgt%5D=soon"),
            Some(("parameter_invalid_integer", Some("created[gt]".into())))
        );
        assert_eq!(
            refused("customer=cus_1"),
            Some(("parameter_unknown", Some("customer".into())))
        );
        assert_eq!(
            refused("starting_after=a&ending_before=b"),
            Some(("parameter_invalid_string", Some("starting_after".into())))
        );
        assert!(refused("payment_intent=pi_1&expand%5B0%5D=data").is_none());
    }
}
