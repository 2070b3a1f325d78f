//! The providers' published OpenAPI contracts (fixtures/contracts/README.md) and a validator
//! of what payorch and its sandbox put on the wire against them: requests (JSON, or Stripe's
//! form encoding with its brackets, and query strings), answers by status, and webhook
//! bodies. For tests: payorch's adapters and the sandbox must speak the providers' protocols
//! as the providers publish them, not as payorch imagines them (docs/DESIGN.md, "The
//! provider protocol").
//!
//! What a schema is checked for (the `schema` module): local `$ref` (its siblings too in an
//! OpenAPI 3.1 document, ignored in 3.0 as 3.0 says), `type` (one or a 3.1 list, `null`
//! among them, and 3.0's `nullable: true`), `properties`, `required`,
//! `additionalProperties` (a boolean or a schema), `enum` and `const`, `allOf`, `anyOf`,
//! `oneOf` (exactly one), `not`, `items`, `minItems`/`maxItems`, `minLength`/`maxLength` (in
//! characters), `minimum`/`maximum` and both forms of `exclusiveMinimum`/`exclusiveMaximum`,
//! and `pattern` (an unanchored search, as JSON Schema says; a pattern the `regex` crate
//! cannot compile is a violation, never a silent pass). What it does not check, on purpose:
//! `format` (Stripe's `unix-time`, Adyen's `date-time`, `int64`: annotations in OpenAPI, and
//! Adyen's own examples break some), `readOnly`/`writeOnly`, `discriminator` (informative:
//! `oneOf` decides), `multipleOf`, `uniqueItems`, `patternProperties`, `dependent*`,
//! `if`/`then`/`else`, extensions (`x-…`) except Stripe's `x-stripeBypassValidation`, which
//! marks an enum Stripe may extend without notice and so is not enforced, and headers (the
//! tests check `Idempotency-Key` and `Stripe-Version` themselves). Stripe's `expand`ed
//! objects are validated like any other `anyOf` branch.

mod form;
mod schema;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

pub use form::decode_form;
use schema::{Check, Mode};

/// Which rule a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// The method and path are no operation of the contract.
    Operation,
    /// The status has no response in the operation, and there is no `default`.
    Status,
    /// The request's media type is not one the operation takes.
    ContentType,
    /// A body that is not what its media type says (no JSON, or one where none is taken).
    Body,
    /// A form or query string whose bracket encoding does not decode.
    Form,
    /// A query parameter the operation does not declare.
    Parameter,
    /// A `$ref` that does not resolve, or a loop of them.
    Ref,
    Type,
    Required,
    AdditionalProperties,
    Enum,
    Const,
    AnyOf,
    OneOf,
    Not,
    MinLength,
    MaxLength,
    Pattern,
    Minimum,
    Maximum,
    MinItems,
    MaxItems,
}

impl Rule {
    /// The keyword as the OpenAPI document spells it (or what is checked, for the rest).
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Operation => "operation",
            Rule::Status => "status",
            Rule::ContentType => "content-type",
            Rule::Body => "body",
            Rule::Form => "form",
            Rule::Parameter => "parameter",
            Rule::Ref => "$ref",
            Rule::Type => "type",
            Rule::Required => "required",
            Rule::AdditionalProperties => "additionalProperties",
            Rule::Enum => "enum",
            Rule::Const => "const",
            Rule::AnyOf => "anyOf",
            Rule::OneOf => "oneOf",
            Rule::Not => "not",
            Rule::MinLength => "minLength",
            Rule::MaxLength => "maxLength",
            Rule::Pattern => "pattern",
            Rule::Minimum => "minimum",
            Rule::Maximum => "maximum",
            Rule::MinItems => "minItems",
            Rule::MaxItems => "maxItems",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which part of a message a violation's pointer points into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// The request as a whole: its method and path, its media type.
    Request,
    /// A query parameter: the pointer starts with its name.
    Query,
    /// A path parameter: the pointer is its name.
    Path,
    /// The request body.
    Body,
    /// The answer: its status, its body.
    Response,
    /// A value given to [`Contract::validate_schema`].
    Value,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Request => "request",
            Part::Query => "query",
            Part::Path => "path",
            Part::Body => "body",
            Part::Response => "response",
            Part::Value => "value",
        })
    }
}

/// One way a message breaks the contract: where (a JSON pointer into `part`, `""` for the
/// whole), which rule, and what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub part: Part,
    pub pointer: String,
    pub rule: Rule,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pointer = if self.pointer.is_empty() {
            "(root)"
        } else {
            &self.pointer
        };
        write!(
            f,
            "{} {pointer}: {}: {}",
            self.part, self.rule, self.message
        )
    }
}

/// Every violation, one a line: for a test's failure message.
pub fn report(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| format!("  {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a validation answers: nothing wrong, or everything found wrong.
pub type Verdict = Result<(), Vec<Violation>>;

fn verdict(violations: Vec<Violation>) -> Verdict {
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

/// An OpenAPI document (3.0 or 3.1) to validate against.
#[derive(Debug)]
pub struct Contract {
    name: String,
    doc: Value,
    /// The path of the first server's URL (`/v71` for Adyen's Checkout API): request paths
    /// start with it, the document's paths do not.
    base_path: String,
    /// OpenAPI 3.1 (JSON Schema 2020-12): a `$ref`'s siblings apply too.
    version_31: bool,
    /// `pattern`s compiled once each.
    patterns: Mutex<HashMap<String, Result<regex::Regex, String>>>,
}

/// The vendored documents, embedded: the tests need no path to the repository at run time.
const STRIPE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/contracts/stripe/spec3.json"
));
const ADYEN_CHECKOUT: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/contracts/adyen/CheckoutService-v71.json"
));
const ADYEN_WEBHOOKS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/contracts/adyen/Webhooks-v1.json"
));
const ADYEN_DISPUTES: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/contracts/adyen/DisputeService-v30.json"
));

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

impl Contract {
    /// Stripe's API at version 2023-08-16 (fixtures/contracts/stripe/spec3.json).
    pub fn stripe() -> &'static Contract {
        static CONTRACT: OnceLock<Contract> = OnceLock::new();
        CONTRACT.get_or_init(|| {
            Contract::from_json("stripe", STRIPE).expect("the vendored Stripe document")
        })
    }

    /// Adyen's Checkout API v71 (fixtures/contracts/adyen/CheckoutService-v71.json): paths
    /// are asked with their `/v71` base, as the sandbox serves them.
    pub fn adyen_checkout() -> &'static Contract {
        static CONTRACT: OnceLock<Contract> = OnceLock::new();
        CONTRACT.get_or_init(|| {
            Contract::from_json("adyen-checkout-v71", ADYEN_CHECKOUT)
                .expect("the vendored Adyen Checkout document")
        })
    }

    /// Adyen's standard notification webhooks (fixtures/contracts/adyen/Webhooks-v1.json):
    /// one webhook per event code, `POST /<EVENT_CODE>`.
    pub fn adyen_webhooks() -> &'static Contract {
        static CONTRACT: OnceLock<Contract> = OnceLock::new();
        CONTRACT.get_or_init(|| {
            Contract::from_json("adyen-webhooks-v1", ADYEN_WEBHOOKS)
                .expect("the vendored Adyen Webhooks document")
        })
    }

    /// Adyen's Disputes API v30 (fixtures/contracts/adyen/DisputeService-v30.json): paths
    /// are asked with their `/ca/services/DisputeService/v30` base, as the server URL says.
    pub fn adyen_disputes() -> &'static Contract {
        static CONTRACT: OnceLock<Contract> = OnceLock::new();
        CONTRACT.get_or_init(|| {
            Contract::from_json("adyen-disputes-v30", ADYEN_DISPUTES)
                .expect("the vendored Adyen Disputes document")
        })
    }

    /// A contract from an OpenAPI document's text.
    pub fn from_json(name: &str, text: &str) -> Result<Contract, String> {
        let doc = serde_json::from_str(text).map_err(|e| format!("{name}: {e}"))?;
        Contract::from_value(name, doc)
    }

    /// A contract from an OpenAPI document.
    pub fn from_value(name: &str, doc: Value) -> Result<Contract, String> {
        let version = doc
            .get("openapi")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{name}: no `openapi` version"))?;
        if !version.starts_with("3.") {
            return Err(format!("{name}: OpenAPI {version} is not 3.x"));
        }
        let version_31 = !version.starts_with("3.0");
        let base_path = doc
            .pointer("/servers/0/url")
            .and_then(Value::as_str)
            .map(path_of_url)
            .unwrap_or_default();
        Ok(Contract {
            name: name.to_owned(),
            version_31,
            base_path,
            doc,
            patterns: Mutex::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The document itself.
    pub fn document(&self) -> &Value {
        &self.doc
    }

    /// The path every request path starts with (`""` for Stripe, `/v71` for Adyen).
    pub fn base_path(&self) -> &str {
        &self.base_path
    }

    /// What a local `$ref` (`#/components/schemas/payment_intent`) points at.
    pub fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.doc.pointer(pointer)
    }

    /// The operations of the document, or of its `webhooks` when it has no `paths`.
    fn path_items(&self) -> Option<&serde_json::Map<String, Value>> {
        self.doc
            .get("paths")
            .and_then(Value::as_object)
            .filter(|paths| !paths.is_empty())
            .or_else(|| self.doc.get("webhooks").and_then(Value::as_object))
    }

    /// Every operation of the contract, in the document's order.
    pub fn operations(&self) -> Vec<Operation<'_>> {
        let Some(items) = self.path_items() else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for (template, item) in items {
            for method in METHODS {
                if let Some(op) = item.get(method) {
                    found.push(Operation {
                        contract: self,
                        method: method.to_ascii_uppercase(),
                        template,
                        path_params: Vec::new(),
                        item,
                        op,
                    });
                }
            }
        }
        found
    }

    /// The operation a request of `method` to `path` (its base included, a query string
    /// allowed) is, if the contract has it. A literal segment wins over a template
    /// (`/v1/payment_intents/search` is not the intent `search`), as OpenAPI says.
    pub fn operation(&self, method: &str, path: &str) -> Option<Operation<'_>> {
        let path = path.split(['?', '#']).next().unwrap_or_default();
        let relative = if self.base_path.is_empty() {
            path
        } else {
            let rest = path.strip_prefix(&self.base_path)?;
            if !(rest.is_empty() || rest.starts_with('/')) {
                return None;
            }
            rest
        };
        let segments: Vec<&str> = relative.split('/').collect();
        let method = method.to_ascii_lowercase();
        let mut best: Option<(usize, Operation<'_>)> = None;
        for (template, item) in self.path_items()? {
            let Some(op) = item.get(&method) else {
                continue;
            };
            let parts: Vec<&str> = template.split('/').collect();
            if parts.len() != segments.len() {
                continue;
            }
            let mut literals = 0;
            let mut params = Vec::new();
            let matched = parts.iter().zip(&segments).all(|(part, segment)| {
                match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                    Some(name) if !segment.is_empty() => {
                        params.push((name.to_owned(), percent_decode(segment)));
                        true
                    }
                    Some(_) => false,
                    None => {
                        literals += 1;
                        part == segment
                    }
                }
            });
            if matched && best.as_ref().is_none_or(|(most, _)| literals > *most) {
                best = Some((
                    literals,
                    Operation {
                        contract: self,
                        method: method.to_ascii_uppercase(),
                        template,
                        path_params: params,
                        item,
                        op,
                    },
                ));
            }
        }
        best.map(|(_, op)| op)
    }

    /// Check a request: that its method and path are an operation, that its query
    /// parameters are the operation's, and its body the operation's request body for
    /// `content_type` (`""`: none sent). Stripe's form bodies are decoded from their bracket
    /// encoding and read with form semantics (every leaf is a string on the wire).
    pub fn validate_request(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> Verdict {
        match self.operation(method, path) {
            Some(op) => {
                op.validate_request(path.split_once('?').map(|(_, q)| q), content_type, body)
            }
            None => Err(vec![self.no_operation(method, path)]),
        }
    }

    /// Check an answer of `status` to a request of `method` to `path`: against the
    /// response of that status, else of its range (`4XX`), else `default`.
    pub fn validate_response(&self, method: &str, path: &str, status: u16, body: &[u8]) -> Verdict {
        match self.operation(method, path) {
            Some(op) => op.validate_response(status, body),
            None => Err(vec![self.no_operation(method, path)]),
        }
    }

    /// Check a webhook body: Adyen's webhook for `event` (`AUTHORISATION`, …), whose
    /// request schema is the notification's.
    pub fn validate_webhook(&self, event: &str, body: &[u8]) -> Verdict {
        self.validate_request("POST", &format!("/{event}"), "application/json", body)
    }

    /// Check a value against the component schema `name` (`payment_intent`).
    pub fn validate_schema(&self, name: &str, value: &Value) -> Verdict {
        let reference = format!("#/components/schemas/{}", escape(name));
        let Some(schema) = self.resolve(&reference) else {
            return Err(vec![Violation {
                part: Part::Value,
                pointer: String::new(),
                rule: Rule::Ref,
                message: format!("{} has no schema {name:?}", self.name),
            }]);
        };
        verdict(Check::new(self, Mode::Json, Part::Value).run(schema, value, ""))
    }

    fn no_operation(&self, method: &str, path: &str) -> Violation {
        Violation {
            part: Part::Request,
            pointer: String::new(),
            rule: Rule::Operation,
            message: format!(
                "{} has no operation {} {path}",
                self.name,
                method.to_ascii_uppercase()
            ),
        }
    }

    /// `pattern` compiled, or why it cannot be.
    fn pattern(&self, pattern: &str) -> Result<regex::Regex, String> {
        let mut patterns = self.patterns.lock().unwrap_or_else(|e| e.into_inner());
        patterns
            .entry(pattern.to_owned())
            .or_insert_with(|| regex::Regex::new(pattern).map_err(|e| e.to_string()))
            .clone()
    }

    /// A `$ref`'s target with its `$ref`s followed (parameters, responses, request bodies
    /// may be references).
    fn follow<'a>(&'a self, mut value: &'a Value) -> &'a Value {
        for _ in 0..32 {
            match value.get("$ref").and_then(Value::as_str) {
                Some(reference) => match self.resolve(reference) {
                    Some(target) => value = target,
                    None => break,
                },
                None => break,
            }
        }
        value
    }
}

/// One operation of a contract, as a request matched it.
#[derive(Debug, Clone)]
pub struct Operation<'c> {
    contract: &'c Contract,
    /// Uppercase.
    pub method: String,
    /// The path as the document writes it (`/v1/payment_intents/{intent}`), without the base.
    pub template: &'c str,
    /// The path's parameters as the request gave them, percent-decoded.
    pub path_params: Vec<(String, String)>,
    item: &'c Value,
    op: &'c Value,
}

impl<'c> Operation<'c> {
    pub fn operation_id(&self) -> Option<&'c str> {
        self.op.get("operationId").and_then(Value::as_str)
    }

    /// The operation's parameters with the path item's, references followed; the
    /// operation's own win over the path item's of the same name and place.
    pub fn parameters(&self) -> Vec<&'c Value> {
        let contract = self.contract;
        let list = |node: &'c Value| -> Vec<&'c Value> {
            node.get("parameters")
                .and_then(Value::as_array)
                .map(|ps| ps.iter().map(|p| contract.follow(p)).collect())
                .unwrap_or_default()
        };
        let own = list(self.op);
        let key = |p: &Value| (p.get("name").cloned(), p.get("in").cloned());
        let mut all: Vec<&Value> = list(self.item)
            .into_iter()
            .filter(|shared| own.iter().all(|o| key(o) != key(shared)))
            .collect();
        all.extend(own);
        all
    }

    /// The declared parameter `name` in `place` (`query`, `header`, `path`); a header's name
    /// is matched without regard to case.
    pub fn parameter(&self, place: &str, name: &str) -> Option<&'c Value> {
        self.parameters().into_iter().find(|p| {
            p.get("in").and_then(Value::as_str) == Some(place)
                && p.get("name").and_then(Value::as_str).is_some_and(|n| {
                    if place == "header" {
                        n.eq_ignore_ascii_case(name)
                    } else {
                        n == name
                    }
                })
        })
    }

    /// Check a request to this operation: its path parameters, its query string (`None`:
    /// none), its body of `content_type`.
    pub fn validate_request(
        &self,
        query: Option<&str>,
        content_type: &str,
        body: &[u8],
    ) -> Verdict {
        let mut out = Vec::new();
        let form = Check::new(self.contract, Mode::Form, Part::Path);
        for (name, value) in &self.path_params {
            if let Some(schema) = self.parameter("path", name).and_then(|p| p.get("schema")) {
                out.extend(form.run(schema, &Value::String(value.clone()), &escape(name)));
            }
        }
        self.check_query(query.unwrap_or_default(), &mut out);
        self.check_body(content_type, body, &mut out);
        verdict(out)
    }

    fn check_query(&self, query: &str, out: &mut Vec<Violation>) {
        let violation = |pointer: &str, rule, message: String| Violation {
            part: Part::Query,
            pointer: pointer.to_owned(),
            rule,
            message,
        };
        let decoded = match decode_form(query.as_bytes()) {
            Ok(decoded) => decoded,
            Err(e) => {
                out.push(violation("", Rule::Form, e));
                return;
            }
        };
        let given = decoded.as_object().cloned().unwrap_or_default();
        let check = Check::new(self.contract, Mode::Form, Part::Query);
        for (name, value) in &given {
            let pointer = format!("/{}", escape(name));
            match self.parameter("query", name) {
                Some(parameter) => {
                    if let Some(schema) = parameter.get("schema") {
                        out.extend(check.run(schema, value, &pointer));
                    }
                }
                None => out.push(violation(
                    &pointer,
                    Rule::Parameter,
                    format!(
                        "{name:?} is not a query parameter of {} {}",
                        self.method, self.template
                    ),
                )),
            }
        }
        for parameter in self.parameters() {
            let is_required_query = parameter.get("in").and_then(Value::as_str) == Some("query")
                && parameter.get("required") == Some(&Value::Bool(true));
            if let Some(name) = parameter.get("name").and_then(Value::as_str) {
                if is_required_query && !given.contains_key(name) {
                    out.push(violation(
                        &format!("/{}", escape(name)),
                        Rule::Required,
                        "missing required query parameter".to_owned(),
                    ));
                }
            }
        }
    }

    fn check_body(&self, content_type: &str, body: &[u8], out: &mut Vec<Violation>) {
        let violation = |part, rule, message: String| Violation {
            part,
            pointer: String::new(),
            rule,
            message,
        };
        let media = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let Some(request_body) = self.op.get("requestBody").map(|b| self.contract.follow(b)) else {
            if !body.is_empty() {
                out.push(violation(
                    Part::Body,
                    Rule::Body,
                    format!("{} {} takes no request body", self.method, self.template),
                ));
            }
            return;
        };
        let required = request_body.get("required") == Some(&Value::Bool(true));
        if media.is_empty() {
            if !body.is_empty() {
                out.push(violation(
                    Part::Request,
                    Rule::ContentType,
                    "a body without a Content-Type".to_owned(),
                ));
            } else if required {
                out.push(violation(
                    Part::Body,
                    Rule::Required,
                    "the request body is required".to_owned(),
                ));
            }
            return;
        }
        let content = request_body.get("content").and_then(Value::as_object);
        let Some(media_type) = content.and_then(|c| c.get(&media)) else {
            let offered: Vec<&String> = content.map(|c| c.keys().collect()).unwrap_or_default();
            out.push(violation(
                Part::Request,
                Rule::ContentType,
                format!("{media} is not taken; the operation takes {offered:?}"),
            ));
            return;
        };
        let Some(schema) = media_type.get("schema") else {
            return;
        };
        if media == "application/x-www-form-urlencoded" {
            // An empty form is an empty object, not a missing body.
            match decode_form(body) {
                Ok(value) => out.extend(
                    Check::new(self.contract, Mode::Form, Part::Body).run(schema, &value, ""),
                ),
                Err(e) => out.push(violation(Part::Body, Rule::Form, e)),
            }
        } else if is_json(&media) {
            if body.is_empty() {
                if required {
                    out.push(violation(
                        Part::Body,
                        Rule::Required,
                        "the request body is required".to_owned(),
                    ));
                }
                return;
            }
            match serde_json::from_slice::<Value>(body) {
                Ok(value) => out.extend(
                    Check::new(self.contract, Mode::Json, Part::Body).run(schema, &value, ""),
                ),
                Err(e) => out.push(violation(Part::Body, Rule::Body, format!("not JSON: {e}"))),
            }
        } else {
            out.push(violation(
                Part::Request,
                Rule::ContentType,
                format!("{media}: the validator reads only JSON and form bodies"),
            ));
        }
    }

    /// The response the document gives for `status`: its own, its range's, or `default`.
    pub fn response(&self, status: u16) -> Option<&'c Value> {
        let responses = self.op.get("responses")?;
        let response = responses
            .get(status.to_string())
            .or_else(|| responses.get(format!("{}XX", status / 100)))
            .or_else(|| responses.get(format!("{}xx", status / 100)))
            .or_else(|| responses.get("default"))?;
        Some(self.contract.follow(response))
    }

    /// Check an answer of `status` with `body` against the operation's response for it.
    pub fn validate_response(&self, status: u16, body: &[u8]) -> Verdict {
        let violation = |rule, message: String| {
            Err(vec![Violation {
                part: Part::Response,
                pointer: String::new(),
                rule,
                message,
            }])
        };
        let Some(response) = self.response(status) else {
            return violation(
                Rule::Status,
                format!(
                    "{} {} has no response {status} and no default",
                    self.method, self.template
                ),
            );
        };
        let Some(content) = response.get("content").and_then(Value::as_object) else {
            // The document says nothing of the body (Adyen's webhook acknowledgement).
            return Ok(());
        };
        let Some(schema) = content
            .iter()
            .find(|(media, _)| is_json(media))
            .and_then(|(_, media)| media.get("schema"))
        else {
            return Ok(());
        };
        match serde_json::from_slice::<Value>(body) {
            Ok(value) => verdict(
                Check::new(self.contract, Mode::Json, Part::Response).run(schema, &value, ""),
            ),
            Err(e) => violation(Rule::Body, format!("not JSON: {e}")),
        }
    }
}

fn is_json(media: &str) -> bool {
    media == "application/json" || media.ends_with("+json")
}

/// The path of a server URL, without its trailing `/`: `https://h/v71` → `/v71`.
fn path_of_url(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = rest.find('/').map_or("", |at| &rest[at..]);
    path.trim_end_matches('/').to_owned()
}

/// A JSON pointer's reference token for `name`.
pub(crate) fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// `%xx` sequences decoded (a path segment; `+` is a plus there).
fn percent_decode(segment: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(high << 4 | low);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
