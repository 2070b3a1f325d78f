//! Adyen's refusal of a field its API does not define. Every request schema of Checkout API
//! v71 the sandbox serves sets `additionalProperties: false`, at every depth
//! (`CheckoutService-v71.json`), and Adyen holds requests to it: a request with a field the
//! schema does not define is refused with error `702`, "Structure of PaymentRequest contains
//! the following unknown fields: [...]" (the message Adyen's own libraries' tests show), as is
//! a field that holds an object where the schema has a value, or the other way round.
//!
//! The schemas' fields are hard-coded (`v71`), read from the document; it is not read at run
//! time. Only names and shapes are checked here; the routes check the values they use.

use serde_json::Value as Json;

mod v71;

/// What a field of a schema holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    /// A string, number or boolean, or an array of them.
    Value,
    /// An object of the named schema.
    Object(&'static str),
    /// An array of objects of the named schema.
    List(&'static str),
    /// An object of free keys with text values (`metadata`, `additionalData`).
    Map,
    /// An object of one of several schemas, chosen by its `type`: each `type` value and the
    /// schema it chooses.
    OneOf(&'static [(&'static str, &'static str)]),
}

/// A schema of the document: its name and its fields.
#[derive(Debug)]
pub(super) struct Schema {
    pub name: &'static str,
    pub fields: &'static [(&'static str, Field)],
}

impl Schema {
    fn field(&self, name: &str) -> Option<Field> {
        self.fields
            .iter()
            .find(|(field, _)| *field == name)
            .map(|(_, held)| *held)
    }
}

/// The schema named `name`, if the sandbox knows it.
pub(super) fn schema(name: &str) -> Option<&'static Schema> {
    let at = v71::SCHEMAS
        .binary_search_by(|schema| schema.name.cmp(name))
        .ok()?;
    Some(&v71::SCHEMAS[at])
}

/// Whether `body` is a `root` (a schema name, e.g. `PaymentRequest`) with no field the
/// schema does not define, at any depth; `Err` with Adyen's message for a `702` if not.
pub(super) fn check(root: &str, body: &Json) -> Result<(), String> {
    match schema(root) {
        Some(schema) => object(schema, body),
        None => Ok(()),
    }
}

fn object(schema: &Schema, value: &Json) -> Result<(), String> {
    let Json::Object(fields) = value else {
        return Err(format!(
            "Structure of {} is invalid: an object is expected",
            schema.name
        ));
    };
    let unknown: Vec<&str> = fields
        .keys()
        .filter(|name| schema.field(name).is_none())
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "Structure of {} contains the following unknown fields: [{}]",
            schema.name,
            unknown.join(", ")
        ));
    }
    for (name, value) in fields {
        if let Some(held) = schema.field(name) {
            holds(schema, name, held, value)?;
        }
    }
    Ok(())
}

/// Whether `value`, field `name` of `schema`, is what the field holds.
fn holds(schema: &Schema, name: &str, held: Field, value: &Json) -> Result<(), String> {
    let misshapen = |expected: &str| {
        Err(format!(
            "Structure of {} is invalid: {name} should be {expected}",
            schema.name
        ))
    };
    let scalar = |value: &Json| !value.is_object() && !value.is_array();
    // A field sent as null is a field not sent.
    if value.is_null() {
        return Ok(());
    }
    match held {
        Field::Value => match value {
            Json::Object(_) => misshapen("a value"),
            Json::Array(items) if !items.iter().all(scalar) => misshapen("a list of values"),
            _ => Ok(()),
        },
        Field::Object(inner) => match self::schema(inner) {
            Some(inner) => object(inner, value),
            None => Ok(()),
        },
        Field::List(inner) => match (value, self::schema(inner)) {
            (Json::Array(items), Some(inner)) => {
                items.iter().try_for_each(|item| object(inner, item))
            }
            (Json::Array(_), None) => Ok(()),
            _ => misshapen("a list"),
        },
        Field::Map => match value {
            Json::Object(entries) if entries.values().all(scalar) => Ok(()),
            _ => misshapen("an object of text values"),
        },
        Field::OneOf(choices) => one_of(schema, name, choices, value),
    }
}

/// A field that holds one of several schemas: the one its `type` chooses; without a `type`
/// any of them names, a field is known if one of them defines it.
fn one_of(
    schema: &Schema,
    name: &str,
    choices: &[(&str, &str)],
    value: &Json,
) -> Result<(), String> {
    let Json::Object(fields) = value else {
        return Err(format!(
            "Structure of {} is invalid: {name} should be an object",
            schema.name
        ));
    };
    let kind = fields.get("type").and_then(Json::as_str);
    let chosen = choices
        .iter()
        .find(|(choice, _)| Some(*choice) == kind)
        .and_then(|(_, inner)| self::schema(inner));
    if let Some(chosen) = chosen {
        return object(chosen, value);
    }
    let all: Vec<&Schema> = choices
        .iter()
        .filter_map(|(_, inner)| self::schema(inner))
        .collect();
    for (field, value) in fields {
        let Some((inner, held)) = all
            .iter()
            .find_map(|inner| Some((*inner, inner.field(field)?)))
        else {
            return Err(format!(
                "Structure of {} contains the following unknown fields: [{field}]",
                schema.name
            ));
        };
        holds(inner, field, held, value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_is_sorted_and_names_only_schemas_it_has() {
        assert!(v71::SCHEMAS.windows(2).all(|w| w[0].name < w[1].name));
        for schema in v71::SCHEMAS {
            for (field, held) in schema.fields {
                let named: Vec<&str> = match held {
                    Field::Object(inner) | Field::List(inner) => vec![inner],
                    Field::OneOf(choices) => choices.iter().map(|(_, inner)| *inner).collect(),
                    Field::Value | Field::Map => vec![],
                };
                for inner in named {
                    assert!(
                        super::schema(inner).is_some(),
                        "{}.{field} names {inner}",
                        schema.name
                    );
                }
            }
        }
        for root in [
            "PaymentRequest",
            "PaymentDetailsRequest",
            "PaymentCaptureRequest",
            "PaymentCancelRequest",
            "StandalonePaymentCancelRequest",
            "PaymentRefundRequest",
            "PaymentReversalRequest",
        ] {
            assert!(super::schema(root).is_some(), "{root}");
        }
    }

    fn payment() -> Json {
        json!({
            "amount": {"value": 100, "currency": "EUR"},
            "reference": "att_1",
            "merchantAccount": "Acc",
            "paymentMethod": {"type": "scheme", "storedPaymentMethodId": "pm_card_visa"},
            "shopperInteraction": "ContAuth",
            "recurringProcessingModel": "UnscheduledCardOnFile",
            "metadata": {"order_id": "ord_1"},
            "additionalData": {"manualCapture": "true"},
            "returnUrl": "https://shop.example/back",
            "channel": "Web",
            "lineItems": [{"description": "a lamp", "quantity": 1}],
        })
    }

    #[test]
    fn what_payorch_sends_passes() {
        assert_eq!(check("PaymentRequest", &payment()), Ok(()));
        for (root, body) in [
            (
                "PaymentCaptureRequest",
                json!({"merchantAccount": "A", "amount": {"value": 1, "currency": "EUR"}, "reference": "r"}),
            ),
            (
                "PaymentCancelRequest",
                json!({"merchantAccount": "A", "reference": "r"}),
            ),
            (
                "StandalonePaymentCancelRequest",
                json!({"merchantAccount": "A", "paymentReference": "p"}),
            ),
            (
                "PaymentRefundRequest",
                json!({"merchantAccount": "A", "amount": {"value": 1, "currency": "EUR"}}),
            ),
            (
                "PaymentDetailsRequest",
                json!({"details": {"redirectResult": "x"}}),
            ),
        ] {
            assert_eq!(check(root, &body), Ok(()), "{root}");
        }
    }

    #[test]
    fn an_unknown_field_is_refused_at_any_depth_and_named() {
        let refused = |path: &[&str]| {
            let mut body = payment();
            let mut at = &mut body;
            for step in path {
                at = match at {
                    Json::Array(items) => &mut items[0],
                    _ => &mut at[*step],
                };
            }
            at["colour"] = json!("blue");
            check("PaymentRequest", &body).err()
        };
        assert_eq!(
            refused(&[]).as_deref(),
            Some("Structure of PaymentRequest contains the following unknown fields: [colour]")
        );
        assert_eq!(
            refused(&["amount"]).as_deref(),
            Some("Structure of Amount contains the following unknown fields: [colour]")
        );
        assert_eq!(
            refused(&["paymentMethod"]).as_deref(),
            Some("Structure of CardDetails contains the following unknown fields: [colour]")
        );
        assert_eq!(
            refused(&["lineItems", "0"]).as_deref(),
            Some("Structure of LineItem contains the following unknown fields: [colour]")
        );
        let mut untyped = payment();
        untyped["paymentMethod"] = json!({"storedPaymentMethodId": "x", "colour": "blue"});
        assert!(check("PaymentRequest", &untyped).is_err());
        untyped["paymentMethod"] = json!({"storedPaymentMethodId": "x"});
        assert_eq!(check("PaymentRequest", &untyped), Ok(()));
        let details = json!({"details": {"redirectResult": "x", "colour": "blue"}});
        assert!(check("PaymentDetailsRequest", &details).is_err());
    }

    #[test]
    fn a_value_for_an_object_or_an_object_for_a_value_is_refused() {
        for (field, value) in [
            ("amount", json!("100 EUR")),
            ("reference", json!({"id": 1})),
            ("metadata", json!({"order": {"id": 1}})),
            ("lineItems", json!({"description": "x"})),
        ] {
            let mut body = payment();
            body[field] = value;
            assert!(check("PaymentRequest", &body).is_err(), "{field}");
        }
        assert!(check("PaymentRequest", &json!([])).is_err());
        let mut body = payment();
        body["returnUrl"] = Json::Null;
        assert_eq!(check("PaymentRequest", &body), Ok(()));
    }
}
