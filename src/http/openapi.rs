//! The OpenAPI 3.1 document, generated from the handlers' annotations (the paths of
//! `http::api`'s list) and completed here.

use serde_json::{json, Map, Value};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::Modify;

use crate::events::endpoints::fields::MAX_URL_LEN;
use crate::events::endpoints::ALL_EVENTS;
use crate::events::EventType;
use crate::idempotency::key::MAX_KEY_LEN;
use crate::payments::money::{Currency, MAX_AMOUNT};
use crate::payments::orders::{
    MAX_DESCRIPTION_LEN, MAX_METADATA_KEYS, MAX_METADATA_KEY_LEN, MAX_METADATA_VALUE_LEN,
    MAX_REFERENCE_LEN,
};
use crate::payments::payment_method::MAX_LEN as PAYMENT_METHOD_MAX_LEN;

/// The two bearer schemes the annotations' `security` name.
pub(super) struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "a merchant (`sk_mer_…`) or support (`sk_sup_…`) secret",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "metrics_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "the metrics token (`--metrics-token-file`), when this server asks for one",
                    ))
                    .build(),
            ),
        );
    }
}

/// The document as served: what the annotations say (`api::ApiDoc`, made from the API's one
/// list of routes), made to tell the whole truth about what every operation can answer and
/// accept (docs/guides/api.md, "OpenAPI").
pub fn document(annotated: utoipa::openapi::OpenApi) -> Value {
    let mut doc = serde_json::to_value(annotated).unwrap_or_default();
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        for item in paths.values_mut().filter_map(Value::as_object_mut) {
            describe_rate_limits(item);
            for operation in item.values_mut().filter_map(Value::as_object_mut) {
                complete_responses(operation);
                describe_idempotency_key(operation);
                describe_page_limit(operation);
            }
        }
    }
    if let Some(schemas) = doc.pointer_mut("/components/schemas") {
        for name in ["CreateOrderBody", "CheckoutBody"] {
            if let Some(schema) = schemas.get_mut(name) {
                describe_order_fields(schema, name == "CheckoutBody");
            }
        }
        if let Some(schema) = schemas.get_mut("CreatePaymentBody") {
            require(schema, &["payment_method"]);
            schema["properties"]["payment_method"] = payment_method_schema();
        }
        if let Some(schema) = schemas.get_mut("CreateRefundBody") {
            describe_refund_fields(schema);
        }
        if let Some(schema) = schemas.get_mut("CaptureBody") {
            schema["additionalProperties"] = Value::Bool(false);
            schema["properties"]["amount"] = json!({
                "type": ["integer", "null"], "format": "int64", "minimum": 1, "maximum": MAX_AMOUNT,
                "description": "minor units, at most what was authorized; absent or null: all of it"
            });
        }
        if let Some(schema) = schemas.get_mut("CreateEndpointBody") {
            describe_endpoint_fields(schema);
        }
    }
    doc["webhooks"] = json!({ "event": event_delivery() });
    doc["servers"] = servers();
    doc
}

/// Relative: a client resolves `/` against where it read this document, so it names the right
/// host and scheme behind a TLS proxy, on any port and under any name; the address payorch
/// binds (`0.0.0.0:8080`) is seldom the one a client reaches, and the document is made once for
/// every request, whatever its `Host`.
fn servers() -> Value {
    json!([{"url": "/", "description": "the payorch that served this document"}])
}

/// What payorch sends to a merchant's webhook endpoint (OpenAPI 3.1's `webhooks`): the event as
/// `GET /v1/events/{id}` shows it, signed as Standard Webhooks v1 says (docs/guides/events.md, "What a
/// delivery is", "Verifying a delivery", "Answering, and retries").
fn event_delivery() -> Value {
    let header = |name: &str, description: &str, example: &str| {
        json!({
            "name": name, "in": "header", "required": true, "description": description,
            "schema": {"type": "string"}, "example": example,
        })
    };
    json!({
        "post": {
            "summary": "A merchant event, delivered to each endpoint subscribed to its type",
            "description": "At least once: a crash in the middle of a send sends it again, \
                with the same `webhook-id`; not in order (order by `data.object.updated_at`; \
                a final status never changes). Retried on a schedule of about three days \
                (at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, 24 h, 24 h, jittered); \
                redirects are not followed.",
            "parameters": [
                header("webhook-id", "The event's id, the same on every attempt: deduplicate by it.",
                    "evt_0193a1f0c4e87d2b9c1a5e6f7a8b9c0d"),
                header("webhook-timestamp", "Unix seconds of this attempt; refuse one more than 5 minutes from your clock.",
                    "1764000000"),
                header("webhook-signature", "`v1,` and the base64 HMAC-SHA256, under the base64-decoded bytes of the endpoint's `whsec_` secret, of `{webhook-id}.{webhook-timestamp}.{body}`; two, space-separated, for 24 h after a rotation.",
                    "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="),
            ],
            "requestBody": {
                "required": true,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Event"}}},
            },
            "responses": {
                "2XX": {"description": "Received: any 2xx within 15 s ends the delivery's retries."},
                "410": {"description": "Gone: payorch disables the endpoint and sends it nothing more."},
                "429": {"description": "Slow down: the next attempt waits at least its `Retry-After` (up to 24 h)."},
                "503": {"description": "Unavailable: the next attempt waits at least its `Retry-After` (up to 24 h)."},
                "default": {"description": "Failed (as is no answer within 15 s, or a redirect): retried on the schedule."},
            },
        }
    })
}

/// Problem statuses any operation may answer, with why.
const EVERYWHERE: [(&str, &str); 3] = [
    (
        "405",
        "method_not_allowed: the path does not take this method (see `Allow`)",
    ),
    ("414", "uri_too_long: the request target is over 8 KiB"),
    (
        "422",
        "raw_card_data_forbidden: card data in the request target or User-Agent",
    ),
];

fn complete_responses(operation: &mut Map<String, Value>) {
    let secured = operation.contains_key("security");
    let has_body = operation.contains_key("requestBody");
    let keyed = operation
        .get("parameters")
        .and_then(Value::as_array)
        .is_some_and(|ps| ps.iter().any(|p| p["name"] == "Idempotency-Key"));
    let mut add: Vec<(&str, &str)> = EVERYWHERE.to_vec();
    if secured {
        add.extend([
            (
                "400",
                "invalid_request, duplicate_header (two Authorization headers)",
            ),
            ("401", "unauthenticated: no live key"),
            (
                "503",
                "unavailable: the database cannot be reached, or more requests wait for it than \
                 it can serve in time (refused on arrival, nothing done); retry after Retry-After",
            ),
        ]);
    }
    if has_body {
        add.extend([
            (
                "400",
                "invalid_request: not a JSON object, a member given twice, wrong types",
            ),
            ("408", "request_timeout: the body did not arrive in time"),
            ("413", "payload_too_large: the body is over 64 KiB"),
            ("422", "validation_failed, raw_card_data_forbidden"),
        ]);
    }
    // Every keyed operation is a merchant's write, which a support key may not make.
    if keyed {
        add.extend([
            (
                "400",
                "idempotency_key_missing, idempotency_key_invalid, duplicate_header",
            ),
            (
                "403",
                "forbidden: a support key; only the merchant's own key may do this",
            ),
            (
                "409",
                "idempotency_key_in_use: the first request with this key is still running",
            ),
            (
                "422",
                "idempotency_key_reused: the key was used with another request",
            ),
            (
                "429",
                "rate_limited: too many new keys this minute; retry after Retry-After",
            ),
        ]);
    }
    let responses = operation
        .entry("responses")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(responses) = responses.as_object_mut() else {
        return;
    };
    for (status, why) in add {
        let response = responses
            .entry(status)
            .or_insert_with(|| json!({"description": why}));
        if let Some(description) = response["description"].as_str() {
            if !description.contains(why) && description != why {
                response["description"] = Value::from(format!("{description}; {why}"));
            }
        }
    }
    // Every error is problem+json, whatever the annotation said.
    for (status, response) in responses.iter_mut() {
        if status.starts_with('4') || status.starts_with('5') {
            response["content"] = json!({"application/problem+json": {
                "schema": {"$ref": "#/components/schemas/Problem"}
            }});
        }
    }
}

/// The `429` of the request limits (docs/PRODUCTION.md, "Limits and the addresses payorch
/// believes"): every keyed operation is refused once its address presented too many
/// secrets that are no live key, and every keyed read once its key or address read too much.
fn describe_rate_limits(item: &mut Map<String, Value>) {
    for (method, operation) in item.iter_mut() {
        let Some(operation) = operation.as_object_mut() else {
            continue;
        };
        if !operation.contains_key("security") {
            continue;
        }
        let mut why = String::from(
            "rate_limited: too many secrets that are no live key from this address \
             (`failed-auth-per-address`, answered before any lookup)",
        );
        if method == "get" {
            why.push_str(
                ", or too many reads with this key or from this address (`reads-per-key`, \
                 `reads-per-address`; every read's answer says where it stands in \
                 `RateLimit-Policy` and `RateLimit`)",
            );
        }
        why.push_str("; retry after `Retry-After` seconds");
        let responses = operation
            .entry("responses")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(responses) = responses.as_object_mut() {
            let response = responses
                .entry("429")
                .or_insert_with(|| json!({"description": ""}));
            let description = match response["description"].as_str() {
                Some(old) if !old.is_empty() => format!("{old}; {why}"),
                _ => why,
            };
            response["description"] = Value::from(description);
            response["headers"] = json!({
                "Retry-After": {"description": "seconds", "schema": {"type": "integer"}},
                "RateLimit-Policy": {"description": "the quota refused, as draft-ietf-httpapi-ratelimit-headers-10 writes it", "schema": {"type": "string"}},
                "RateLimit": {"description": "what is left of it (`r=0`) and when it is back (`t`)", "schema": {"type": "string"}},
            });
        }
    }
}

fn describe_idempotency_key(operation: &mut Map<String, Value>) {
    let Some(parameters) = operation
        .get_mut("parameters")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for parameter in parameters {
        if parameter["name"] == "Idempotency-Key" {
            parameter["required"] = Value::Bool(true);
            parameter["schema"] = json!({
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_KEY_LEN,
                "pattern": "^[!-~]+$",
                "description": "visible ASCII; may also be sent as a quoted string"
            });
        }
    }
}

/// A list's `limit`, as `http::page_limit` takes it: 1 to 100, 20 when not given (or the
/// default its annotation gives: the event list's is 10).
fn describe_page_limit(operation: &mut Map<String, Value>) {
    let Some(parameters) = operation
        .get_mut("parameters")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for parameter in parameters {
        if parameter["name"] == "limit" && parameter["in"] == "query" {
            let default = parameter["schema"]
                .get("default")
                .cloned()
                .unwrap_or(json!(20));
            parameter["schema"] = json!({
                "type": "integer", "format": "int64", "minimum": 1, "maximum": 100, "default": default
            });
        }
    }
}

/// A refund's body, as the refund validates it (`payments::refunds::refund`): `amount` as
/// [`crate::payments::money::Amount`] takes it (absent or `null`: all that is left), `reason`
/// as long as a description.
fn describe_refund_fields(schema: &mut Value) {
    schema["additionalProperties"] = Value::Bool(false);
    let properties = &mut schema["properties"];
    properties["amount"] = json!({
        "type": ["integer", "null"], "format": "int64", "minimum": 1, "maximum": MAX_AMOUNT,
        "description": "minor units; absent or null: all that is left to refund"
    });
    properties["reason"] = json!({
        "type": ["string", "null"], "maxLength": MAX_DESCRIPTION_LEN,
        "description": "free text for the merchant's records"
    });
}

/// A new webhook endpoint's body, as `events::endpoints::fields` validates it (docs/guides/events.md,
/// "Webhook endpoints"). That an `http` URL or a private address is refused depends on the
/// server's flags, so the URL's schema says only what every server takes.
fn describe_endpoint_fields(schema: &mut Value) {
    require(schema, &["url", "enabled_events"]);
    schema["additionalProperties"] = Value::Bool(false);
    let mut types = vec![ALL_EVENTS];
    types.extend(EventType::ALL.iter().map(|t| t.as_str()));
    let properties = &mut schema["properties"];
    properties["url"] = json!({
        "type": "string", "format": "uri", "minLength": 1, "maxLength": MAX_URL_LEN,
        "description": "https, to a public host; http only to a loopback host of a server \
                        started with --allow-http-webhooks"
    });
    properties["enabled_events"] = json!({
        "type": "array", "minItems": 1, "items": {"type": "string", "enum": types},
        "description": "event types, or [\"*\"] alone for every type"
    });
    properties["description"] =
        json!({"type": ["string", "null"], "maxLength": MAX_DESCRIPTION_LEN});
}

fn describe_order_fields(schema: &mut Value, checkout: bool) {
    let mut required = vec!["amount", "currency"];
    if checkout {
        required.push("payment_method");
        schema["properties"]["payment_method"] = payment_method_schema();
    }
    require(schema, &required);
    schema["additionalProperties"] = Value::Bool(false);
    let properties = &mut schema["properties"];
    properties["amount"] = json!({
        "type": "integer", "format": "int64", "minimum": 1, "maximum": MAX_AMOUNT,
        "description": "minor units (cents)"
    });
    properties["currency"] = json!({
        "type": "string",
        "enum": Currency::all_codes(),
        "description": "ISO 4217, lowercase (any case is accepted and stored lowercase)"
    });
    properties["merchant_reference"] = json!({
        "type": ["string", "null"], "minLength": 1, "maxLength": MAX_REFERENCE_LEN,
        "description": "unique per merchant for ever; stored in NFC; one line, not only spaces"
    });
    properties["description"] =
        json!({"type": ["string", "null"], "maxLength": MAX_DESCRIPTION_LEN});
    properties["metadata"] = json!({
        "type": ["object", "null"],
        "maxProperties": MAX_METADATA_KEYS,
        "propertyNames": {"minLength": 1, "maxLength": MAX_METADATA_KEY_LEN},
        "additionalProperties": {"type": "string", "maxLength": MAX_METADATA_VALUE_LEN}
    });
}

fn payment_method_schema() -> Value {
    json!({
        "type": "string", "minLength": 1, "maxLength": PAYMENT_METHOD_MAX_LEN,
        "pattern": "^[!-~]+$",
        "examples": ["pm_card_visa", "pm_card_chargeDeclined", "pm_sandbox_processing"],
        "description": "a provider payment method token; never card data"
    })
}

fn require(schema: &mut Value, fields: &[&str]) {
    schema["required"] = Value::from(fields.to_vec());
}
