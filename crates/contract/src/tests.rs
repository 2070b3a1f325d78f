//! The validator itself: each rule accepts what it should and refuses what it should, so
//! a validator that accepts everything cannot pass; then the vendored documents, whose own
//! examples must pass and whose known refusals must be refused.

use serde_json::{json, Value};

use crate::{decode_form, Contract, Part, Rule, Violation};

/// A 3.0 document (`v31: false`) or a 3.1 one with `schemas` as its components and one
/// operation per entry of `paths`.
fn doc(v31: bool, schemas: Value, paths: Value) -> Contract {
    let document = json!({
        "openapi": if v31 { "3.1.0" } else { "3.0.0" },
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example.com/v9"}],
        "paths": paths,
        "components": {"schemas": schemas},
    });
    Contract::from_value("test", document).expect("a document")
}

/// A contract whose component `s` is `schema`.
fn one(schema: Value) -> Contract {
    doc(false, json!({ "s": schema }), json!({}))
}

fn rules(result: Result<(), Vec<Violation>>) -> Vec<(String, Rule)> {
    match result {
        Ok(()) => Vec::new(),
        Err(violations) => violations
            .into_iter()
            .map(|v| (v.pointer, v.rule))
            .collect(),
    }
}

/// `value` passes `schema`.
#[track_caller]
fn accepts(schema: Value, value: Value) {
    let contract = one(schema.clone());
    if let Err(v) = contract.validate_schema("s", &value) {
        panic!("{schema} refused {value}:\n{}", crate::report(&v));
    }
}

/// `value` fails `schema` exactly at `pointer` by `rule` (and nowhere else).
#[track_caller]
fn refuses(schema: Value, value: Value, pointer: &str, rule: Rule) {
    let found = rules(one(schema.clone()).validate_schema("s", &value));
    assert_eq!(
        found,
        vec![(pointer.to_owned(), rule)],
        "{schema} on {value}"
    );
}

#[test]
fn type_of_each_kind() {
    for (ty, good, bad) in [
        ("string", json!("a"), json!(1)),
        ("integer", json!(3), json!(3.5)),
        ("integer", json!(-7), json!("3")),
        ("number", json!(3.5), json!("3.5")),
        ("boolean", json!(false), json!("false")),
        ("object", json!({}), json!([])),
        ("array", json!([1]), json!({})),
    ] {
        accepts(json!({"type": ty}), good);
        refuses(json!({"type": ty}), bad, "", Rule::Type);
    }
    // JSON Schema: 2.0 is an integer.
    accepts(json!({"type": "integer"}), json!(2.0));
    refuses(json!({"type": "string"}), Value::Null, "", Rule::Type);
}

#[test]
fn nullable_in_3_0_and_null_in_3_1_type_lists() {
    accepts(json!({"type": "string", "nullable": true}), Value::Null);
    // nullable takes null even where other keywords would refuse it (Stripe's
    // `anyOf: [...], nullable: true`).
    accepts(
        json!({"anyOf": [{"type": "string"}], "nullable": true}),
        Value::Null,
    );
    refuses(
        json!({"anyOf": [{"type": "string"}]}),
        Value::Null,
        "",
        Rule::AnyOf,
    );

    let v31 = doc(true, json!({"s": {"type": ["string", "null"]}}), json!({}));
    assert!(v31.validate_schema("s", &Value::Null).is_ok());
    assert!(v31.validate_schema("s", &json!("a")).is_ok());
    assert_eq!(
        rules(v31.validate_schema("s", &json!(1))),
        vec![(String::new(), Rule::Type)]
    );
}

#[test]
fn properties_required_and_additional_properties() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}, "b/c": {"type": "integer"}},
        "required": ["a"],
    });
    accepts(schema.clone(), json!({"a": "x", "other": 1}));
    refuses(schema.clone(), json!({}), "/a", Rule::Required);
    // The pointer escapes `/` as `~1`.
    refuses(
        schema.clone(),
        json!({"a": "x", "b/c": "no"}),
        "/b~1c",
        Rule::Type,
    );

    let closed = json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false});
    accepts(closed.clone(), json!({"a": 1}));
    refuses(
        closed,
        json!({"a": 1, "z": 2}),
        "/z",
        Rule::AdditionalProperties,
    );

    let typed = json!({"type": "object", "additionalProperties": {"type": "string"}});
    accepts(typed.clone(), json!({"k": "v"}));
    refuses(typed, json!({"k": 1}), "/k", Rule::Type);
}

#[test]
fn enum_and_const() {
    accepts(json!({"enum": ["a", "b"]}), json!("b"));
    refuses(json!({"enum": ["a", "b"]}), json!("c"), "", Rule::Enum);
    accepts(json!({"enum": [1]}), json!(1.0));
    accepts(json!({"const": "x"}), json!("x"));
    refuses(json!({"const": "x"}), json!("y"), "", Rule::Const);
    // Stripe's extensible enums are not enforced.
    accepts(
        json!({"type": "string", "enum": ["a"], "x-stripeBypassValidation": true}),
        json!("new_value"),
    );
}

#[test]
fn any_of_one_of_all_of_not() {
    let any = json!({"anyOf": [{"type": "string"}, {"type": "integer"}]});
    accepts(any.clone(), json!(1));
    accepts(any.clone(), json!("a"));
    refuses(any, json!(true), "", Rule::AnyOf);

    let one_of = json!({"oneOf": [{"type": "integer"}, {"type": "number"}]});
    accepts(one_of.clone(), json!(1.5));
    // 1 is an integer and a number: two branches match, not exactly one.
    refuses(one_of.clone(), json!(1), "", Rule::OneOf);
    refuses(one_of, json!("a"), "", Rule::OneOf);

    let all = json!({"allOf": [{"required": ["a"]}, {"required": ["b"]}]});
    accepts(all.clone(), json!({"a": 1, "b": 2}));
    refuses(all, json!({"a": 1}), "/b", Rule::Required);

    refuses(
        json!({"not": {"type": "string"}}),
        json!("a"),
        "",
        Rule::Not,
    );
    accepts(json!({"not": {"type": "string"}}), json!(1));
}

#[test]
fn items_and_their_counts() {
    let schema =
        json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2});
    accepts(schema.clone(), json!(["a", "b"]));
    refuses(schema.clone(), json!(["a", 1]), "/1", Rule::Type);
    refuses(schema.clone(), json!([]), "", Rule::MinItems);
    refuses(schema, json!(["a", "b", "c"]), "", Rule::MaxItems);
}

#[test]
fn lengths_in_characters_and_bounds() {
    let schema = json!({"type": "string", "minLength": 3, "maxLength": 3});
    accepts(schema.clone(), json!("EUR"));
    // Three characters, six bytes.
    accepts(schema.clone(), json!("ééé"));
    refuses(schema.clone(), json!("EURO"), "", Rule::MaxLength);
    refuses(schema, json!("EU"), "", Rule::MinLength);

    let bounded = json!({"type": "integer", "minimum": 1, "maximum": 10});
    accepts(bounded.clone(), json!(1));
    accepts(bounded.clone(), json!(10));
    refuses(bounded.clone(), json!(0), "", Rule::Minimum);
    refuses(bounded, json!(11), "", Rule::Maximum);
    // 3.0's boolean exclusive bounds.
    refuses(
        json!({"type": "number", "minimum": 0, "exclusiveMinimum": true}),
        json!(0),
        "",
        Rule::Minimum,
    );
    refuses(
        json!({"type": "number", "maximum": 5, "exclusiveMaximum": true}),
        json!(5),
        "",
        Rule::Maximum,
    );
    // 3.1's numeric ones.
    refuses(json!({"exclusiveMinimum": 0}), json!(0), "", Rule::Minimum);
    accepts(json!({"exclusiveMinimum": 0}), json!(0.5));
}

#[test]
fn pattern_is_a_search_and_an_uncompilable_one_refuses() {
    accepts(
        json!({"type": "string", "pattern": "^/v1/refunds"}),
        json!("/v1/refunds"),
    );
    refuses(
        json!({"type": "string", "pattern": "^/v1/refunds"}),
        json!("/v2/x"),
        "",
        Rule::Pattern,
    );
    // Unanchored: a match anywhere will do.
    accepts(json!({"pattern": "[0-9]+"}), json!("abc123"));
    // A look-ahead the regex crate cannot compile must not pass silently.
    refuses(
        json!({"type": "string", "pattern": "^(?=a)a$"}),
        json!("a"),
        "",
        Rule::Pattern,
    );
}

#[test]
fn refs_resolve_and_3_0_ignores_their_siblings() {
    let schemas = json!({
        "s": {"type": "object", "properties": {"amount": {"$ref": "#/components/schemas/Amount", "maxLength": 1}}},
        "Amount": {"type": "object", "required": ["value"], "properties": {"value": {"type": "integer"}}},
        "dangling": {"$ref": "#/components/schemas/nowhere"},
        "loop": {"$ref": "#/components/schemas/loop"},
    });
    let v30 = doc(false, schemas.clone(), json!({}));
    assert!(v30
        .validate_schema("s", &json!({"amount": {"value": 1}}))
        .is_ok());
    assert_eq!(
        rules(v30.validate_schema("s", &json!({"amount": {}}))),
        vec![("/amount/value".to_owned(), Rule::Required)]
    );
    assert_eq!(
        rules(v30.validate_schema("dangling", &json!(1))),
        vec![(String::new(), Rule::Ref)]
    );
    assert_eq!(
        rules(v30.validate_schema("loop", &json!(1))),
        vec![(String::new(), Rule::Ref)]
    );
    assert_eq!(
        rules(v30.validate_schema("no_such_schema", &json!(1))),
        vec![(String::new(), Rule::Ref)]
    );
    // 3.1: the sibling applies (an object has no length, so it passes; a string member
    // would not), shown with `required` instead.
    let v31 = doc(
        true,
        json!({
            "s": {"$ref": "#/components/schemas/Amount", "required": ["currency"]},
            "Amount": {"type": "object", "properties": {"value": {"type": "integer"}}},
        }),
        json!({}),
    );
    assert_eq!(
        rules(v31.validate_schema("s", &json!({"value": 1}))),
        vec![("/currency".to_owned(), Rule::Required)]
    );
    let v30_siblings = doc(
        false,
        json!({
            "s": {"$ref": "#/components/schemas/Amount", "required": ["currency"]},
            "Amount": {"type": "object"},
        }),
        json!({}),
    );
    assert!(v30_siblings
        .validate_schema("s", &json!({"value": 1}))
        .is_ok());
}

#[test]
fn form_bodies_decode_their_brackets() {
    assert_eq!(
        decode_form(
            b"amount=4200&metadata[attempt_id]=pay_1&metadata[order_id]=o&expand[0]=a&expand[1]=b"
        )
        .unwrap(),
        json!({"amount": "4200", "metadata": {"attempt_id": "pay_1", "order_id": "o"}, "expand": ["a", "b"]})
    );
    // Percent-encoded brackets, as reqwest's form encoder writes them.
    assert_eq!(
        decode_form(b"metadata%5Battempt_id%5D=pay_1&expand%5B%5D=x&expand%5B%5D=y").unwrap(),
        json!({"metadata": {"attempt_id": "pay_1"}, "expand": ["x", "y"]})
    );
    // Indices put in order.
    assert_eq!(
        decode_form(b"e[1]=b&e[0]=a").unwrap(),
        json!({"e": ["a", "b"]})
    );
    assert_eq!(decode_form(b"").unwrap(), json!({}));
    assert!(decode_form(b"a=1&a=2").is_err(), "a key given twice");
    assert!(decode_form(b"m=&m[a]=b").is_err(), "a value and an object");
    assert!(decode_form(b"m[a]=b&m=").is_err(), "an object and a value");
    assert!(decode_form(b"m[a=b").is_err(), "an unclosed bracket");
    assert!(decode_form(b"[a]=b").is_err(), "no name");
}

/// A form operation (Stripe's way) and a JSON one (Adyen's).
fn api() -> Contract {
    doc(
        false,
        json!({
            "Thing": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
        }),
        json!({
            "/things": {
                "get": {
                    "parameters": [
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 100}},
                        {"name": "query", "in": "query", "required": true, "schema": {"type": "string"}},
                        {"name": "expand", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                    ],
                    "responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}},
                },
                "post": {
                    "requestBody": {"required": true, "content": {"application/x-www-form-urlencoded": {"schema": {
                        "type": "object", "additionalProperties": false, "required": ["amount"],
                        "properties": {
                            "amount": {"type": "integer", "minimum": 1},
                            "confirm": {"type": "boolean"},
                            "rate": {"type": "number"},
                            "metadata": {"anyOf": [
                                {"type": "object", "additionalProperties": {"type": "string"}},
                                {"type": "string", "enum": [""]},
                            ]},
                            "expand": {"type": "array", "items": {"type": "string"}},
                        },
                    }}}},
                    "responses": {
                        "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},
                        "default": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                    },
                },
            },
            "/things/search": {"get": {"responses": {"200": {"description": "ok"}}}},
            "/things/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "maxLength": 5}}],
                "get": {"responses": {"2XX": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}}},
                "post": {
                    "requestBody": {"content": {"application/json": {"schema": {
                        "type": "object", "additionalProperties": false,
                        "properties": {"note": {"type": "string"}},
                    }}}},
                    "responses": {"201": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}},
                },
            },
        }),
    )
}

#[test]
fn operations_match_with_the_base_and_literals_first() {
    let api = api();
    assert_eq!(api.base_path(), "/v9");
    let op = api
        .operation("get", "/v9/things/search?x=1")
        .expect("the search");
    assert_eq!(op.template, "/things/search");
    let op = api.operation("GET", "/v9/things/th%5F1").expect("a thing");
    assert_eq!(op.template, "/things/{id}");
    assert_eq!(op.path_params, vec![("id".to_owned(), "th_1".to_owned())]);
    assert!(
        api.operation("GET", "/things").is_none(),
        "without the base"
    );
    assert!(
        api.operation("DELETE", "/v9/things").is_none(),
        "no such method"
    );
    assert!(
        api.operation("GET", "/v9/things/a/b").is_none(),
        "no such path"
    );
    assert!(
        api.operation("GET", "/v99/things").is_none(),
        "another base"
    );
    assert_eq!(
        rules(api.validate_request("GET", "/v9/nothing", "", b"")),
        vec![(String::new(), Rule::Operation)]
    );
    assert_eq!(api.operations().len(), 5);
}

#[test]
fn form_requests_read_strings_as_their_types() {
    let api = api();
    let form = "application/x-www-form-urlencoded";
    let post =
        |body: &str| rules(api.validate_request("POST", "/v9/things", form, body.as_bytes()));
    assert_eq!(
        post("amount=42&confirm=true&rate=1.5&metadata[k]=v&expand[0]=a"),
        vec![]
    );
    assert_eq!(post("amount=42&metadata="), vec![], "metadata unset");
    assert_eq!(post("amount=abc"), vec![("/amount".to_owned(), Rule::Type)]);
    assert_eq!(
        post("amount=0"),
        vec![("/amount".to_owned(), Rule::Minimum)]
    );
    assert_eq!(
        post("amount=1&confirm=yes"),
        vec![("/confirm".to_owned(), Rule::Type)]
    );
    assert_eq!(
        post("amount=1&metadata=x"),
        vec![("/metadata".to_owned(), Rule::AnyOf)]
    );
    assert_eq!(
        post("amount=1&other=1"),
        vec![("/other".to_owned(), Rule::AdditionalProperties)]
    );
    assert_eq!(
        post("confirm=true"),
        vec![("/amount".to_owned(), Rule::Required)]
    );
    assert_eq!(post("amount=1&amount=2"), vec![(String::new(), Rule::Form)]);
    // The body's media type must be one the operation takes.
    assert_eq!(
        rules(api.validate_request("POST", "/v9/things", "application/json", b"{\"amount\": 1}")),
        vec![(String::new(), Rule::ContentType)]
    );
    // A required body that is missing.
    assert_eq!(
        rules(api.validate_request("POST", "/v9/things", "", b"")),
        vec![(String::new(), Rule::Required)]
    );
    // A body where none is taken.
    assert_eq!(
        rules(api.validate_request("GET", "/v9/things/search", form, b"a=1")),
        vec![(String::new(), Rule::Body)]
    );
    // In JSON a string is no integer: form semantics are the form's only.
    let json_body = rules(api.validate_request(
        "POST",
        "/v9/things/t1",
        "application/json; charset=utf-8",
        br#"{"note": 1}"#,
    ));
    assert_eq!(json_body, vec![("/note".to_owned(), Rule::Type)]);
    assert_eq!(
        rules(api.validate_request("POST", "/v9/things/t1", "application/json", b"{not json")),
        vec![(String::new(), Rule::Body)]
    );
}

#[test]
fn query_and_path_parameters() {
    let api = api();
    let get = |path: &str| api.validate_request("GET", path, "", b"");
    assert_eq!(rules(get("/v9/things?query=a&limit=10&expand[]=x")), vec![]);
    let found = get("/v9/things?limit=10&sort=asc").unwrap_err();
    let by_part: Vec<(Part, String, Rule)> = found
        .into_iter()
        .map(|v| (v.part, v.pointer, v.rule))
        .collect();
    assert_eq!(
        by_part,
        vec![
            (Part::Query, "/sort".to_owned(), Rule::Parameter),
            (Part::Query, "/query".to_owned(), Rule::Required),
        ]
    );
    assert_eq!(
        rules(get("/v9/things?query=a&limit=500")),
        vec![("/limit".to_owned(), Rule::Maximum)]
    );
    assert_eq!(
        rules(get("/v9/things?query=a&limit=x")),
        vec![("/limit".to_owned(), Rule::Type)]
    );
    let long_id = get("/v9/things/abcdefgh").unwrap_err();
    assert_eq!(
        (long_id[0].part, long_id[0].rule),
        (Part::Path, Rule::MaxLength)
    );
}

#[test]
fn responses_by_status_range_and_default() {
    let api = api();
    let ok = br#"{"id": "t1"}"#;
    assert!(api.validate_response("POST", "/v9/things", 200, ok).is_ok());
    assert_eq!(
        rules(api.validate_response("POST", "/v9/things", 200, b"{}")),
        vec![("/id".to_owned(), Rule::Required)]
    );
    // Any other status is `default`: the error schema.
    assert!(api
        .validate_response("POST", "/v9/things", 402, br#"{"error": "x"}"#)
        .is_ok());
    assert_eq!(
        rules(api.validate_response("POST", "/v9/things", 402, ok)),
        vec![("/error".to_owned(), Rule::Required)]
    );
    // A range.
    assert!(api
        .validate_response("GET", "/v9/things/t1", 203, ok)
        .is_ok());
    // No response for the status and no default.
    assert_eq!(
        rules(api.validate_response("POST", "/v9/things/t1", 200, ok)),
        vec![(String::new(), Rule::Status)]
    );
    assert_eq!(
        rules(api.validate_response("POST", "/v9/things/t1", 201, b"<html>")),
        vec![(String::new(), Rule::Body)]
    );
    // A response without content: any body.
    assert!(api
        .validate_response("GET", "/v9/things/search", 200, b"anything")
        .is_ok());
}

// The vendored documents.

#[test]
fn the_vendored_documents_load_with_their_operations() {
    let stripe = Contract::stripe();
    assert_eq!(stripe.document()["info"]["version"], "2023-08-16");
    assert_eq!(stripe.base_path(), "");
    assert_eq!(stripe.operations().len(), 15);
    assert_eq!(
        stripe
            .operation("POST", "/v1/disputes/du_1/close")
            .unwrap()
            .template,
        "/v1/disputes/{dispute}/close"
    );
    assert!(stripe
        .operation("GET", "/v1/balance_transactions")
        .is_some());
    assert_eq!(
        stripe
            .operation("GET", "/v1/payment_intents/search")
            .unwrap()
            .template,
        "/v1/payment_intents/search"
    );
    assert_eq!(
        stripe
            .operation("GET", "/v1/payment_intents/pi_1")
            .unwrap()
            .template,
        "/v1/payment_intents/{intent}"
    );
    let checkout = Contract::adyen_checkout();
    assert_eq!(checkout.base_path(), "/v71");
    assert_eq!(checkout.operations().len(), 7);
    assert!(checkout.operation("POST", "/v71/payments").is_some());
    assert!(checkout
        .operation("POST", "/v71/payments/PSP1/captures")
        .is_some());
    // Adyen's Checkout API has no lookups.
    assert!(checkout.operation("GET", "/v71/payments/PSP1").is_none());
    assert!(checkout.operation("GET", "/v71/payments").is_none());
    assert!(
        checkout.operation("POST", "/payments").is_none(),
        "the base is part of the path"
    );
    let webhooks = Contract::adyen_webhooks();
    assert_eq!(webhooks.operations().len(), 24);
    assert!(webhooks.operation("POST", "/TECHNICAL_CANCEL").is_some());
    assert!(webhooks.operation("POST", "/SECOND_CHARGEBACK").is_some());
    assert!(webhooks
        .operation("POST", "/SCHEME_ARBITRATION_WON")
        .is_some());
    let disputes = Contract::adyen_disputes();
    assert_eq!(disputes.base_path(), "/ca/services/DisputeService/v30");
    assert_eq!(disputes.operations().len(), 4);
    assert!(disputes
        .operation("POST", "/ca/services/DisputeService/v30/defendDispute")
        .is_some());
}

/// Every example the Adyen documents give for a request or an answer passes its schema:
/// the validator does not refuse what Adyen itself sends or shows.
#[test]
fn adyen_examples_pass_their_own_schemas() {
    let mut checked = 0;
    let mut known_broken = 0;
    for contract in [
        Contract::adyen_checkout(),
        Contract::adyen_webhooks(),
        Contract::adyen_disputes(),
    ] {
        for op in contract.operations() {
            let path = op
                .template
                .replace("{paymentPspReference}", "PSP0000000000001");
            let path = format!("{}{path}", contract.base_path());
            let raw = contract.document().pointer(&format!(
                "/{}/{}/{}",
                if contract.document().get("paths").is_some() {
                    "paths"
                } else {
                    "webhooks"
                },
                crate::escape(op.template),
                op.method.to_ascii_lowercase()
            ));
            let raw = raw.expect("the operation");
            let media = |node: &Value| node.pointer("/content/application~1json/examples").cloned();
            let examples = |node: Option<&Value>| -> Vec<Value> {
                node.and_then(media)
                    .and_then(|e| e.as_object().cloned())
                    .map(|e| {
                        e.values()
                            .map(|ex| {
                                let ex = match ex.get("$ref").and_then(Value::as_str) {
                                    Some(r) => contract.resolve(r).expect("the example"),
                                    None => ex,
                                };
                                ex["value"].clone()
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for example in examples(raw.get("requestBody")) {
                let body = serde_json::to_vec(&example).unwrap();
                if let Err(v) =
                    contract.validate_request(&op.method, &path, "application/json", &body)
                {
                    // Adyen's one example that breaks its own schema: PREARBITRATION_LOST's
                    // shows a merchant's `metadata.*` in `additionalData`, which
                    // DisputesNotificationAdditionalData does not declare. Known, and nothing
                    // else may be wrong with it.
                    let metadata_only = v.iter().all(|v| {
                        v.rule == Rule::AdditionalProperties
                            && v.pointer.contains("/additionalData/metadata.")
                    });
                    if op.template == "/PREARBITRATION_LOST" && metadata_only {
                        known_broken += 1;
                        continue;
                    }
                    panic!(
                        "{} {path} request example {example}:\n{}",
                        op.method,
                        crate::report(&v)
                    );
                }
                checked += 1;
            }
            for (status, response) in raw["responses"].as_object().unwrap() {
                let Ok(status) = status.parse::<u16>() else {
                    continue;
                };
                for example in examples(Some(response)) {
                    let body = serde_json::to_vec(&example).unwrap();
                    if let Err(v) = contract.validate_response(&op.method, &path, status, &body) {
                        panic!(
                            "{} {path} {status} example {example}:\n{}",
                            op.method,
                            crate::report(&v)
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} examples checked");
    assert_eq!(known_broken, 1, "the known broken example is still there");
}

fn adyen_payment() -> Value {
    json!({
        "amount": {"value": 4200, "currency": "EUR"},
        "reference": "pay_1",
        "merchantAccount": "PayorchTest",
        "paymentMethod": {"type": "scheme", "storedPaymentMethodId": "8415995487234100"},
        "shopperInteraction": "ContAuth",
        "recurringProcessingModel": "UnscheduledCardOnFile",
        "returnUrl": "https://pay.example.com/v1/payments/pay_1/return",
        "metadata": {"order_id": "ord_1"},
        "additionalData": {"manualCapture": "true"},
    })
}

#[test]
fn adyen_refuses_unknown_fields_long_currencies_and_a_missing_return_url() {
    let checkout = Contract::adyen_checkout();
    let check = |body: &Value| {
        rules(checkout.validate_request(
            "POST",
            "/v71/payments",
            "application/json",
            &serde_json::to_vec(body).unwrap(),
        ))
    };
    assert_eq!(check(&adyen_payment()), vec![]);
    let mut unknown = adyen_payment();
    unknown["colour"] = json!("blue");
    assert_eq!(
        check(&unknown),
        vec![("/colour".to_owned(), Rule::AdditionalProperties)]
    );
    let mut currency = adyen_payment();
    currency["amount"]["currency"] = json!("EURO");
    assert_eq!(
        check(&currency),
        vec![("/amount/currency".to_owned(), Rule::MaxLength)]
    );
    let mut no_return = adyen_payment();
    no_return.as_object_mut().unwrap().remove("returnUrl");
    assert_eq!(
        check(&no_return),
        vec![("/returnUrl".to_owned(), Rule::Required)]
    );
    let mut channel = adyen_payment();
    channel["channel"] = json!("Browser");
    assert_eq!(check(&channel), vec![("/channel".to_owned(), Rule::Enum)]);
    // A payment method no schema of the oneOf takes.
    let mut method = adyen_payment();
    method["paymentMethod"] =
        json!({"type": "scheme", "storedPaymentMethodId": "x", "colour": "blue"});
    assert_eq!(
        check(&method),
        vec![("/paymentMethod".to_owned(), Rule::OneOf)]
    );
}

#[test]
fn stripe_forms_and_objects() {
    let stripe = Contract::stripe();
    let form = "application/x-www-form-urlencoded";
    let create = |body: &str| {
        rules(stripe.validate_request("POST", "/v1/payment_intents", form, body.as_bytes()))
    };
    assert_eq!(
        create("amount=4200&currency=eur&payment_method=pm_card_visa&confirm=true&capture_method=manual&return_url=https%3A%2F%2Fpay.example.com%2Fr&metadata%5Battempt_id%5D=pay_1&expand[0]=latest_charge"),
        vec![]
    );
    assert_eq!(
        create("amount=4200&currency=eur&capture_method=later"),
        vec![("/capture_method".to_owned(), Rule::Enum)]
    );
    assert_eq!(
        create("amount=42.5&currency=eur"),
        vec![("/amount".to_owned(), Rule::Type)]
    );
    assert_eq!(
        create("currency=eur"),
        vec![("/amount".to_owned(), Rule::Required)]
    );
    assert_eq!(
        create("amount=1&currency=eur&colour=blue"),
        vec![("/colour".to_owned(), Rule::AdditionalProperties)]
    );
    // The search's query is required; the list has no `query` parameter.
    assert_eq!(
        rules(stripe.validate_request(
            "GET",
            "/v1/payment_intents/search?query=metadata%5B%27attempt_id%27%5D%3A%27pay_1%27",
            "",
            b""
        )),
        vec![]
    );
    assert_eq!(
        rules(stripe.validate_request("GET", "/v1/payment_intents/search", "", b"")),
        vec![("/query".to_owned(), Rule::Required)]
    );
    assert_eq!(
        rules(stripe.validate_request("GET", "/v1/payment_intents?query=x", "", b"")),
        vec![("/query".to_owned(), Rule::Parameter)]
    );
    assert_eq!(
        rules(stripe.validate_request("GET", "/v1/refunds?payment_intent=pi_1&limit=100", "", b"")),
        vec![]
    );

    let intent = json!({
        "id": "pi_1", "object": "payment_intent", "amount": 4200, "currency": "eur",
        "capture_method": "automatic", "confirmation_method": "automatic", "created": 1718000000,
        "livemode": false, "payment_method_types": ["card"], "status": "succeeded",
        "metadata": {"attempt_id": "pay_1"}, "last_payment_error": null, "next_action": null,
    });
    assert!(stripe.validate_schema("payment_intent", &intent).is_ok());
    let mut bad = intent.clone();
    bad["status"] = json!("done");
    assert_eq!(
        rules(stripe.validate_schema("payment_intent", &bad)),
        vec![("/status".to_owned(), Rule::Enum)]
    );
    let mut missing = intent;
    missing.as_object_mut().unwrap().remove("livemode");
    assert_eq!(
        rules(stripe.validate_schema("payment_intent", &missing)),
        vec![("/livemode".to_owned(), Rule::Required)]
    );
}
