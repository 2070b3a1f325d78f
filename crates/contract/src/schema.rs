//! One value checked against one schema of a contract: the keywords lib.rs lists, with
//! JSON Schema's meaning (a keyword about objects says nothing of a string, and so on).

use serde_json::{Number, Value};

use crate::{escape, Contract, Part, Rule, Violation};

/// How leaves are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// As JSON typed them.
    Json,
    /// Every leaf is a string on the wire (a form or a query string): one that parses as
    /// the integer, number or boolean its schema asks for is that value.
    Form,
}

/// `$ref`s followed, and schemas entered, before the check gives up: the values checked are
/// finite, so only a loop of `$ref`s that consumes nothing gets this deep.
const MAX_DEPTH: usize = 256;

/// How many of a failed branch's violations an `anyOf`/`oneOf` violation repeats.
const NEAREST_SHOWN: usize = 3;

pub(crate) struct Check<'c> {
    contract: &'c Contract,
    mode: Mode,
    part: Part,
}

impl<'c> Check<'c> {
    pub(crate) fn new(contract: &'c Contract, mode: Mode, part: Part) -> Self {
        Check {
            contract,
            mode,
            part,
        }
    }

    /// Every violation of `schema` by `value`, whose place is `pointer`.
    pub(crate) fn run(&self, schema: &Value, value: &Value, pointer: &str) -> Vec<Violation> {
        let mut out = Vec::new();
        self.check(schema, value, pointer, 0, &mut out);
        out
    }

    fn violation(&self, pointer: &str, rule: Rule, message: String) -> Violation {
        Violation {
            part: self.part,
            pointer: pointer.to_owned(),
            rule,
            message,
        }
    }

    fn check(
        &self,
        schema: &Value,
        value: &Value,
        pointer: &str,
        depth: usize,
        out: &mut Vec<Violation>,
    ) {
        if depth > MAX_DEPTH {
            out.push(self.violation(
                pointer,
                Rule::Ref,
                format!("schemas nested deeper than {MAX_DEPTH}: a loop of $refs?"),
            ));
            return;
        }
        let schema = match schema {
            Value::Object(schema) => schema,
            // JSON Schema's boolean schemas (3.1).
            Value::Bool(true) => return,
            Value::Bool(false) => {
                out.push(self.violation(pointer, Rule::Not, "the schema is `false`".into()));
                return;
            }
            _ => return,
        };
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            match self.contract.resolve(reference) {
                Some(target) => self.check(target, value, pointer, depth + 1, out),
                None => {
                    out.push(self.violation(
                        pointer,
                        Rule::Ref,
                        format!("{reference} does not resolve"),
                    ));
                    return;
                }
            }
            // OpenAPI 3.0: "This object cannot be extended with additional properties and
            // any properties added SHALL be ignored." 3.1 applies them.
            if !self.contract.version_31 {
                return;
            }
        }
        if value.is_null() && schema.get("nullable") == Some(&Value::Bool(true)) {
            return;
        }
        let types = types(schema);
        let coerced = match (self.mode, value) {
            (Mode::Form, Value::String(text)) => types.as_deref().and_then(|t| coerce(t, text)),
            _ => None,
        };
        let value = coerced.as_ref().unwrap_or(value);

        if let Some(types) = &types {
            if !types.iter().any(|t| is_type(value, t)) {
                out.push(self.violation(
                    pointer,
                    Rule::Type,
                    format!("expected {}, found {}", types.join(" or "), describe(value)),
                ));
                // The other keywords would only repeat that the value is something else.
                return;
            }
        }
        // Stripe marks an enum it may extend without notice; its SDKs take any value there.
        let bypass = schema.get("x-stripeBypassValidation") == Some(&Value::Bool(true));
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
            if !bypass && !allowed.iter().any(|a| same(a, value)) {
                out.push(self.violation(
                    pointer,
                    Rule::Enum,
                    format!(
                        "{} is not one of {}",
                        describe(value),
                        short(&Value::Array(allowed.clone()))
                    ),
                ));
            }
        }
        if let Some(constant) = schema.get("const") {
            if !same(constant, value) {
                out.push(self.violation(
                    pointer,
                    Rule::Const,
                    format!("{} is not {}", describe(value), short(constant)),
                ));
            }
        }
        match value {
            Value::String(text) => self.check_string(schema, text, pointer, out),
            Value::Number(number) => self.check_number(schema, number, pointer, out),
            Value::Array(items) => self.check_array(schema, items, pointer, depth, out),
            Value::Object(members) => self.check_object(schema, members, pointer, depth, out),
            Value::Null | Value::Bool(_) => {}
        }
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            for branch in all {
                self.check(branch, value, pointer, depth + 1, out);
            }
        }
        if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
            let results = self.branches(any, value, pointer, depth);
            if !results.iter().any(Vec::is_empty) {
                out.push(self.violation(
                    pointer,
                    Rule::AnyOf,
                    format!(
                        "matches none of its {} schemas; {}",
                        any.len(),
                        nearest(&results)
                    ),
                ));
            }
        }
        if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
            let results = self.branches(one, value, pointer, depth);
            let matched: Vec<usize> = (0..results.len())
                .filter(|&i| results[i].is_empty())
                .collect();
            match matched.len() {
                1 => {}
                0 => out.push(self.violation(
                    pointer,
                    Rule::OneOf,
                    format!(
                        "matches none of its {} schemas; {}",
                        one.len(),
                        nearest(&results)
                    ),
                )),
                _ => out.push(self.violation(
                    pointer,
                    Rule::OneOf,
                    format!(
                        "matches {} of its schemas ({}), not exactly one",
                        matched.len(),
                        names(one, &matched)
                    ),
                )),
            }
        }
        if let Some(not) = schema.get("not") {
            if self.run_at(not, value, pointer, depth).is_empty() {
                out.push(self.violation(
                    pointer,
                    Rule::Not,
                    format!("{} matches the schema it must not", describe(value)),
                ));
            }
        }
    }

    fn run_at(&self, schema: &Value, value: &Value, pointer: &str, depth: usize) -> Vec<Violation> {
        let mut out = Vec::new();
        self.check(schema, value, pointer, depth + 1, &mut out);
        out
    }

    fn branches(
        &self,
        branches: &[Value],
        value: &Value,
        pointer: &str,
        depth: usize,
    ) -> Vec<Vec<Violation>> {
        branches
            .iter()
            .map(|branch| self.run_at(branch, value, pointer, depth))
            .collect()
    }

    fn check_string(
        &self,
        schema: &serde_json::Map<String, Value>,
        text: &str,
        pointer: &str,
        out: &mut Vec<Violation>,
    ) {
        // JSON Schema counts characters (code points), not bytes.
        let length = text.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
            if length < min {
                out.push(self.violation(
                    pointer,
                    Rule::MinLength,
                    format!("{length} characters, fewer than {min}"),
                ));
            }
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
            if length > max {
                out.push(self.violation(
                    pointer,
                    Rule::MaxLength,
                    format!("{length} characters, more than {max}"),
                ));
            }
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            match self.contract.pattern(pattern) {
                Ok(regex) if regex.is_match(text) => {}
                Ok(_) => out.push(self.violation(
                    pointer,
                    Rule::Pattern,
                    format!("{text:?} does not match /{pattern}/"),
                )),
                Err(e) => out.push(self.violation(
                    pointer,
                    Rule::Pattern,
                    format!("/{pattern}/ cannot be checked: {e}"),
                )),
            }
        }
    }

    fn check_number(
        &self,
        schema: &serde_json::Map<String, Value>,
        number: &Number,
        pointer: &str,
        out: &mut Vec<Violation>,
    ) {
        let Some(n) = number.as_f64() else {
            return;
        };
        let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
        // 3.0: `exclusiveMinimum: true` makes `minimum` exclusive; 3.1: it is the bound.
        let flag = |key: &str| schema.get(key) == Some(&Value::Bool(true));
        if let Some(min) = bound("minimum") {
            let exclusive = flag("exclusiveMinimum");
            if n < min || (exclusive && n == min) {
                out.push(self.violation(
                    pointer,
                    Rule::Minimum,
                    format!(
                        "{number} is below the minimum {min}{}",
                        if exclusive { " (exclusive)" } else { "" }
                    ),
                ));
            }
        }
        if let Some(min) = bound("exclusiveMinimum") {
            if n <= min {
                out.push(self.violation(
                    pointer,
                    Rule::Minimum,
                    format!("{number} is not above the exclusive minimum {min}"),
                ));
            }
        }
        if let Some(max) = bound("maximum") {
            let exclusive = flag("exclusiveMaximum");
            if n > max || (exclusive && n == max) {
                out.push(self.violation(
                    pointer,
                    Rule::Maximum,
                    format!(
                        "{number} is above the maximum {max}{}",
                        if exclusive { " (exclusive)" } else { "" }
                    ),
                ));
            }
        }
        if let Some(max) = bound("exclusiveMaximum") {
            if n >= max {
                out.push(self.violation(
                    pointer,
                    Rule::Maximum,
                    format!("{number} is not below the exclusive maximum {max}"),
                ));
            }
        }
    }

    fn check_array(
        &self,
        schema: &serde_json::Map<String, Value>,
        items: &[Value],
        pointer: &str,
        depth: usize,
        out: &mut Vec<Violation>,
    ) {
        let count = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
            if count < min {
                out.push(self.violation(
                    pointer,
                    Rule::MinItems,
                    format!("{count} items, fewer than {min}"),
                ));
            }
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
            if count > max {
                out.push(self.violation(
                    pointer,
                    Rule::MaxItems,
                    format!("{count} items, more than {max}"),
                ));
            }
        }
        if let Some(item_schema) = schema.get("items") {
            for (index, item) in items.iter().enumerate() {
                self.check(
                    item_schema,
                    item,
                    &format!("{pointer}/{index}"),
                    depth + 1,
                    out,
                );
            }
        }
    }

    fn check_object(
        &self,
        schema: &serde_json::Map<String, Value>,
        members: &serde_json::Map<String, Value>,
        pointer: &str,
        depth: usize,
        out: &mut Vec<Violation>,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !members.contains_key(name) {
                    out.push(self.violation(
                        &format!("{pointer}/{}", escape(name)),
                        Rule::Required,
                        "missing required property".into(),
                    ));
                }
            }
        }
        let additional = schema.get("additionalProperties");
        for (name, member) in members {
            let at = format!("{pointer}/{}", escape(name));
            match properties.and_then(|p| p.get(name)) {
                Some(property) => self.check(property, member, &at, depth + 1, out),
                None => match additional {
                    Some(Value::Bool(false)) => out.push(self.violation(
                        &at,
                        Rule::AdditionalProperties,
                        format!("unknown property {name:?}: the schema allows no other"),
                    )),
                    Some(extra @ Value::Object(_)) => {
                        self.check(extra, member, &at, depth + 1, out)
                    }
                    _ => {}
                },
            }
        }
    }
}

/// The schema's `type`, one or a list (3.1), `null` added for 3.0's `nullable: true`.
fn types(schema: &serde_json::Map<String, Value>) -> Option<Vec<String>> {
    let mut types: Vec<String> = match schema.get("type")? {
        Value::String(one) => vec![one.clone()],
        Value::Array(many) => many
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => return None,
    };
    if schema.get("nullable") == Some(&Value::Bool(true)) {
        types.push("null".to_owned());
    }
    Some(types)
}

/// A form's string read as the type its schema asks for, when the schema does not take a
/// string as it is.
fn coerce(types: &[String], text: &str) -> Option<Value> {
    if types.iter().any(|t| t == "string") {
        return None;
    }
    for wanted in types {
        let read = match wanted.as_str() {
            "integer" => text.parse::<i64>().ok().map(Value::from),
            "number" => text
                .parse::<f64>()
                .ok()
                .filter(|n| n.is_finite())
                .and_then(Number::from_f64)
                .map(Value::Number),
            "boolean" => match text {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            _ => None,
        };
        if read.is_some() {
            return read;
        }
    }
    None
}

fn is_type(value: &Value, wanted: &str) -> bool {
    match wanted {
        "string" => value.is_string(),
        "integer" => match value {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        // A type this validator does not know refuses nothing.
        _ => true,
    }
}

/// JSON equality, with numbers equal by value (`1` is `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {}", short(&Value::String(s.clone()))),
        Value::Array(a) => format!("an array of {}", a.len()),
        Value::Object(_) => "an object".into(),
    }
}

/// A value as JSON, cut short.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 120 {
        format!("{}…", text.chars().take(120).collect::<String>())
    } else {
        text
    }
}

/// What the failed branch with the fewest violations says: usually the one meant.
fn nearest(results: &[Vec<Violation>]) -> String {
    let Some((index, violations)) = results.iter().enumerate().min_by_key(|(_, v)| v.len()) else {
        return "it has none".into();
    };
    let shown: Vec<String> = violations
        .iter()
        .take(NEAREST_SHOWN)
        .map(|v| {
            let pointer = if v.pointer.is_empty() {
                "(root)"
            } else {
                &v.pointer
            };
            format!("{pointer}: {}: {}", v.rule, v.message)
        })
        .collect();
    let more = violations.len().saturating_sub(NEAREST_SHOWN);
    format!(
        "the nearest, #{index}, says [{}]{}",
        shown.join("; "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

/// Branches by their `$ref` name where they have one, else by index.
fn names(branches: &[Value], indices: &[usize]) -> String {
    indices
        .iter()
        .map(|&i| {
            branches[i]
                .get("$ref")
                .and_then(Value::as_str)
                .map(|r| r.rsplit('/').next().unwrap_or(r).to_owned())
                .unwrap_or_else(|| format!("#{i}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
