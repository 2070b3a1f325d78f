//! The OpenAPI document tells the truth, and the server answers as it says: problem+json
//! errors, `405` for a method a path does not have, `414` for an overlong target.

use payorch::idempotency::Operation;
use payorch::providers::decline::{DeclineCode, FailureClass};
use payorch_contract::{report, Contract};
use serde_json::Value;

use crate::helpers::{assert_problem, TestApp};

#[tokio::test]
async fn a_method_a_path_does_not_have_is_405_with_allow() {
    let app = TestApp::spawn().await;
    for (method, path, allow) in [
        ("TRACE", "/v1/orders", "POST"),
        ("PUT", "/v1/orders", "POST"),
        ("DELETE", "/v1/payments/pay_x", "GET"),
        ("PATCH", "/health/live", "GET"),
        ("GET", "/v1/checkout", "POST"),
    ] {
        let response = app
            .client
            .request(method.parse().unwrap(), app.url(path))
            .bearer_auth(&app.merchant_key)
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["allow"], allow, "{method} {path}");
        assert_problem(response, 405, "method_not_allowed").await;
    }
    assert_problem(app.get("/v1/no-such-thing").await, 404, "not_found").await;
}

#[tokio::test]
async fn an_overlong_request_target_is_414_problem_json() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = TestApp::spawn().await;
    let address = app.url("").trim_start_matches("http://").to_string();
    // Up to 64 KiB: past it the HTTP layer refuses the target itself (docs/guides/api.md, "OpenAPI").
    for length in [9_000, 60_000] {
        // Raw: HTTP clients refuse to send such a target at all.
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "GET /v1/orders/ord_{} HTTP/1.1\r\nHost: payorch\r\nConnection: close\r\n\r\n",
            "x".repeat(length)
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        let status_line = answer.lines().next().unwrap_or_default().to_string();
        assert_eq!(status_line, "HTTP/1.1 414 URI Too Long", "length {length}");
        assert!(
            answer.contains("application/problem+json"),
            "length {length}"
        );
        assert!(
            answer.contains(r#""code":"uri_too_long""#),
            "length {length}"
        );
    }
}

async fn document(app: &TestApp) -> Value {
    let response = app.get("/openapi.json").await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// Every operation of the document, as (method, path template), read from the document itself
/// so that a new route is checked without being listed here.
fn operations(doc: &Value) -> Vec<(String, String)> {
    let paths = doc["paths"].as_object().expect("the document has paths");
    let mut operations = Vec::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            operations.push((method.clone(), path.clone()));
        }
    }
    assert!(!operations.is_empty());
    operations
}

/// A path the server takes for its template: each `{…}` a well-formed id of no resource.
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|segment| match segment {
            "{provider}" => "stripe",
            s if s.starts_with('{') => "x_00000000000070008000000000000000",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// What is documented is served: each operation of the document reaches a route (the answer is
/// neither the unknown route's `404` nor a `405`), and every other method of its path answers
/// `405` with an `Allow` naming exactly the documented methods. (What is served is documented
/// by construction: `http::api` makes both from one list, and its unit tests hold the
/// annotations' paths to that list.)
#[tokio::test]
async fn every_documented_route_is_served() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    // What the check below tells apart: the unknown route's answer from a resource's `404`.
    let unknown = app.get_as(&app.merchant_key, "/v1/no-such-thing").await;
    let unknown = assert_problem(unknown, 404, "not_found").await;
    assert_eq!(unknown["detail"], "no such route");
    for (method, template) in operations(&doc) {
        let path = concrete(&template);
        let response = app
            .client
            .request(method.to_uppercase().parse().unwrap(), app.url(&path))
            .bearer_auth(&app.merchant_key)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        assert_ne!(status, 405, "{method} {template} ({path}): {body}");
        assert!(
            !(status == 404 && body.contains("no such route")),
            "{method} {template} ({path}) is documented but not served: {body}"
        );
    }
    let paths = doc["paths"].as_object().unwrap();
    for (template, item) in paths {
        let mut documented: Vec<String> = item
            .as_object()
            .unwrap()
            .keys()
            .map(|m| m.to_uppercase())
            .collect();
        documented.sort();
        let response = app
            .client
            .patch(app.url(&concrete(template)))
            .bearer_auth(&app.merchant_key)
            .send()
            .await
            .unwrap();
        let allow = response.headers()["allow"].to_str().unwrap().to_string();
        let mut allowed: Vec<String> = allow.split(", ").map(str::to_string).collect();
        allowed.sort();
        assert_eq!(allowed, documented, "PATCH {template}: Allow {allow}");
        assert_problem(response, 405, "method_not_allowed").await;
    }
}

#[tokio::test]
async fn every_route_is_documented_with_problem_json_errors() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    for (method, path) in operations(&doc) {
        let operation = &doc["paths"][&path][&method];
        assert!(operation.is_object(), "{method} {path} is documented");
        let responses = operation["responses"].as_object().unwrap();
        for (status, response) in responses {
            let status: u16 = status.parse().unwrap();
            if status >= 400 {
                let content = response["content"].as_object().unwrap();
                assert_eq!(
                    content.keys().collect::<Vec<_>>(),
                    ["application/problem+json"],
                    "{method} {path} {status}"
                );
            }
        }
        let has = |status: &str| responses.contains_key(status);
        if operation["security"].is_array() {
            assert!(has("401"), "{method} {path} documents 401");
            assert!(has("400"), "{method} {path} documents 400");
        }
        if operation["requestBody"].is_object() {
            for status in ["400", "408", "413", "422"] {
                assert!(has(status), "{method} {path} documents {status}");
            }
        }
        assert!(
            has("405") && has("414"),
            "{method} {path} documents 405, 414"
        );
    }
}

#[tokio::test]
async fn request_schemas_say_what_the_server_accepts() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let key = doc["paths"]["/v1/orders"]["post"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Idempotency-Key")
        .expect("the key is documented")
        .clone();
    assert_eq!(key["required"], true);
    assert_eq!(key["schema"]["maxLength"], 255);
    assert_eq!(key["schema"]["minLength"], 1);
    assert!(key["schema"]["pattern"].is_string());

    let schemas = &doc["components"]["schemas"];
    for name in ["CreateOrderBody", "CheckoutBody"] {
        let body = &schemas[name];
        let required: Vec<&str> = body["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert!(
            required.contains(&"amount") && required.contains(&"currency"),
            "{name}"
        );
        assert_eq!(body["additionalProperties"], false, "{name}");
        let amount = &body["properties"]["amount"];
        assert_eq!(amount["minimum"], 1, "{name}");
        assert_eq!(amount["maximum"], 1_000_000_000_000_i64, "{name}");
        let currencies = body["properties"]["currency"]["enum"].as_array().unwrap();
        assert!(currencies.contains(&Value::from("eur")), "{name}");
        assert!(currencies.len() > 100, "{name}: every ISO 4217 code");
    }
    assert!(schemas["CheckoutBody"]["required"]
        .as_array()
        .unwrap()
        .contains(&Value::from("payment_method")));
}

/// Every number a request may hold is documented with the range the server enforces: an
/// amount (order, checkout, refund) 1 to 10^12, a list's `limit` 1 to 100; and the server
/// takes the ends of each range and refuses past them.
#[tokio::test]
async fn numbers_in_requests_are_documented_with_the_range_the_server_enforces() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let schemas = &doc["components"]["schemas"];
    for name in ["CreateOrderBody", "CheckoutBody", "CreateRefundBody"] {
        let amount = &schemas[name]["properties"]["amount"];
        assert_eq!(amount["minimum"], 1, "{name}: {amount}");
        assert_eq!(amount["maximum"], 1_000_000_000_000_i64, "{name}: {amount}");
        assert_eq!(amount["format"], "int64", "{name}: {amount}");
    }
    let refund = &schemas["CreateRefundBody"];
    assert_eq!(refund["additionalProperties"], false, "{refund}");
    assert_eq!(
        refund["properties"]["reason"]["maxLength"], 1000,
        "{refund}"
    );

    for path in [
        "/v1/support/merchants",
        "/v1/support/payments",
        "/v1/support/needs-a-human",
    ] {
        let limit = doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "limit")
            .unwrap_or_else(|| panic!("{path} documents limit"))
            .clone();
        assert_eq!(limit["in"], "query", "{path}");
        assert_eq!(limit["schema"]["minimum"], 1, "{path}: {limit}");
        assert_eq!(limit["schema"]["maximum"], 100, "{path}: {limit}");
        for taken in [1, 100] {
            let response = app
                .get_as(&app.support_key, &format!("{path}?limit={taken}"))
                .await;
            assert_eq!(response.status(), 200, "{path}?limit={taken}");
        }
        for refused in [0, 101] {
            let response = app
                .get_as(&app.support_key, &format!("{path}?limit={refused}"))
                .await;
            assert_problem(response, 422, "validation_failed").await;
        }
    }
}

/// A support key may not make a merchant's write: every keyed operation of the document (one
/// that takes an `Idempotency-Key`) answers it `403 forbidden`, and the document lists that
/// `403`. The role is checked before the body's fields, so `{}` does for every body.
#[tokio::test]
async fn a_merchant_write_by_a_support_key_is_a_documented_403() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let mut keyed = 0;
    for (method, documented) in operations(&doc) {
        let operation = &doc["paths"][&documented][&method];
        let takes_a_key = operation["parameters"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["name"] == "Idempotency-Key"));
        if !takes_a_key {
            continue;
        }
        keyed += 1;
        assert_eq!(method, "post", "{documented}: a keyed operation is a POST");
        assert!(
            operation["responses"]["403"].is_object(),
            "{documented} documents 403"
        );
        let body = operation["requestBody"]
            .is_object()
            .then(|| "{}".to_owned());
        let response = app
            .post_keyed(
                &app.support_key,
                &concrete(&documented),
                Some("support-tries"),
                body,
            )
            .await;
        assert_problem(response, 403, "forbidden").await;
    }
    // As many as the keyed operations' registry has; `http::api`'s unit test holds each
    // operation's route to a POST of the list.
    assert_eq!(keyed, Operation::ALL.len(), "keyed operations documented");
    assert_eq!(app.charges(), 0);
}

#[tokio::test]
async fn the_event_list_documents_its_parameters_and_the_event_its_types() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let parameters = doc["paths"]["/v1/events"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let named = |name: &str| {
        parameters
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} is documented"))
    };
    for name in [
        "type",
        "created_gte",
        "created_lte",
        "delivery_success",
        "merchant_id",
        "starting_after",
    ] {
        assert_eq!(named(name)["in"], "query", "{name}");
    }
    assert_eq!(named("limit")["schema"]["default"], 10);
    assert_eq!(named("limit")["schema"]["maximum"], 100);
    let types = &doc["components"]["schemas"]["EventType"]["enum"];
    let types: Vec<&str> = types
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    // Every type the code sends, counted from the code: each issue adds its own.
    assert_eq!(
        types.len(),
        payorch::events::EventType::ALL.len(),
        "{types:?}"
    );
    for t in [
        "payment.pending",
        "payment.requires_action",
        "payment.authorized",
        "payment.canceled",
        "order.refunded",
        "refund.failed",
    ] {
        assert!(types.contains(&t), "{t} in {types:?}");
    }
    assert!(doc["components"]["schemas"]["Event"].is_object());
}

/// A payment's `failure_class` is documented as the vocabulary's enum, every word of
/// `FailureClass::ALL`; its `failure_code` as a string whose description names every code a
/// failed payment can hold (`DeclineCode::ALL` but `outcome_unknown`), since a payment failed
/// before the vocabulary (or by an older replica during an upgrade) holds a provider's raw code
/// there, which a generated client must still read (docs/guides/declines.md).
#[tokio::test]
async fn the_payment_documents_the_decline_vocabulary() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let schemas = &doc["components"]["schemas"];
    let words: Vec<String> = schemas["FailureClass"]["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("FailureClass is an enum: {}", schemas["FailureClass"]))
        .iter()
        .map(|w| w.as_str().unwrap().to_owned())
        .collect();
    let classes: Vec<&str> = FailureClass::ALL.map(FailureClass::as_str).into();
    assert_eq!(words, classes);
    let properties = &schemas["Payment"]["properties"];
    let code = &properties["failure_code"];
    assert!(code["enum"].is_null() && code["$ref"].is_null(), "{code}");
    assert!(
        code.to_string().contains("\"string\""),
        "failure_code is a string: {code}"
    );
    let description = code["description"].as_str().unwrap_or_default();
    for word in DeclineCode::ALL {
        let named = description.contains(&format!("`{}`", word.as_str()));
        let failed_may_hold = word.class() != FailureClass::Unknown;
        assert_eq!(
            named,
            failed_may_hold,
            "failure_code's description and `{}`: {description}",
            word.as_str()
        );
    }
    assert!(description.contains("raw code"), "{description}");
    let class = properties["failure_class"].to_string();
    assert!(class.contains("FailureClass"), "{class}");
    let provider = properties["provider_failure_code"]["description"]
        .as_str()
        .unwrap_or_default();
    for own in ["provider_no_record", "provider_unavailable", "null"] {
        assert!(provider.contains(own), "{own}: {provider}");
    }
}

#[actix_web::test]
async fn the_delivery_of_an_event_is_documented_with_its_headers() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let delivery = &doc["webhooks"]["event"]["post"];
    let headers: Vec<&str> = delivery["parameters"]
        .as_array()
        .expect("the delivery's headers")
        .iter()
        .filter(|p| p["in"] == "header")
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        headers,
        ["webhook-id", "webhook-timestamp", "webhook-signature"]
    );
    let body = &delivery["requestBody"]["content"]["application/json"]["schema"]["$ref"];
    let name = body.as_str().unwrap().rsplit('/').next().unwrap();
    assert!(doc["components"]["schemas"][name].is_object(), "{name}");
    assert!(delivery["responses"]["410"].is_object());
}

/// The answer's body as JSON bytes, and its status.
async fn answer(response: reqwest::Response) -> (u16, Vec<u8>) {
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

/// Every operation is documented for the developer who reads it (the reference served at
/// `/docs` shows these): a summary, a description, an example of its request body when it takes
/// one and of its success answer; and every example is valid against the schema its operation
/// documents, by the validator that holds payorch to the providers' documents (crates/contract),
/// so an example cannot drift from the API without failing here.
#[tokio::test]
async fn every_operation_has_a_summary_a_description_and_examples_its_schemas_take() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let contract = Contract::from_value("payorch", doc.clone()).unwrap();
    assert_eq!(
        doc["servers"],
        serde_json::json!([{"url": "/", "description": "the payorch that served this document"}])
    );
    let mut requests = 0;
    for (method, template) in operations(&doc) {
        let operation = &doc["paths"][&template][&method];
        let named = format!("{} {template}", method.to_uppercase());
        for field in ["summary", "description"] {
            let text = operation[field].as_str().unwrap_or_default();
            assert!(!text.trim().is_empty(), "{named} has no {field}");
        }
        // A path's `{id}` as a reader would fill it in (the examples' ids are one story).
        for parameter in operation["parameters"].as_array().into_iter().flatten() {
            if parameter["in"] == "path" {
                assert!(
                    parameter["example"].is_string(),
                    "{named}: no example of {}",
                    parameter["name"]
                );
            }
        }
        if let Some(content) = operation["requestBody"]["content"].as_object() {
            for (media, body) in content {
                let example = body
                    .get("example")
                    .unwrap_or_else(|| panic!("{named}: no example request ({media})"));
                let bytes = serde_json::to_vec(example).unwrap();
                let verdict =
                    contract.validate_request(&method, &concrete(&template), media, &bytes);
                assert!(
                    verdict.is_ok(),
                    "{named}: its example request: {}",
                    report(&verdict.unwrap_err())
                );
                requests += 1;
            }
        }
        let responses = operation["responses"].as_object().unwrap();
        let (status, response) = responses
            .iter()
            .filter(|(status, response)| status.starts_with('2') && response["content"].is_object())
            .min_by_key(|(status, _)| status.to_string())
            .unwrap_or_else(|| panic!("{named}: no success answer with a body"));
        for (media, body) in response["content"].as_object().unwrap() {
            let example = body
                .get("example")
                .unwrap_or_else(|| panic!("{named}: no example answer ({status} {media})"));
            let bytes = match example.as_str() {
                Some(text) if !media.contains("json") => text.as_bytes().to_vec(),
                _ => serde_json::to_vec(example).unwrap(),
            };
            let verdict = contract.validate_response(
                &method,
                &concrete(&template),
                status.parse().unwrap(),
                &bytes,
            );
            assert!(
                verdict.is_ok(),
                "{named}: its example answer: {}",
                report(&verdict.unwrap_err())
            );
        }
    }
    assert_eq!(requests, 11, "the operations that take a body");
}

/// The examples are what the server takes and answers: each example request of a merchant's
/// write is sent as it is, in the order a merchant would (an order, its metadata, a payment, a
/// refund; a checkout; a hold captured, another voided), is answered its documented success,
/// and the answer is valid against the schema the example is held to.
#[tokio::test]
async fn the_example_requests_are_taken_and_answered_as_documented() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let contract = Contract::from_value("payorch", doc.clone()).unwrap();
    let example = |method: &str, template: &str| -> String {
        let body = &doc["paths"][template][method]["requestBody"]["content"]["application/json"]
            ["example"];
        assert!(body.is_object(), "{method} {template} has an example");
        body.to_string()
    };
    let key = app.merchant_key.clone();
    let mut keys = 0;
    let mut send =
        async |secret: &str, template: &str, path: String, body: String, expected: u16| -> Value {
            keys += 1;
            let response = app
                .post_keyed(secret, &path, Some(&format!("example-{keys}")), Some(body))
                .await;
            let (status, bytes) = answer(response).await;
            let text = String::from_utf8_lossy(&bytes).to_string();
            assert_eq!(status, expected, "POST {path}: {text}");
            let verdict = contract.validate_response("POST", &path, status, &bytes);
            assert!(
                verdict.is_ok(),
                "POST {template}: {}",
                report(&verdict.unwrap_err())
            );
            serde_json::from_slice(&bytes).unwrap()
        };
    let order = send(
        &key,
        "/v1/orders",
        "/v1/orders".into(),
        example("post", "/v1/orders"),
        201,
    )
    .await;
    let order_id = order["id"].as_str().unwrap().to_string();
    send(
        &key,
        "/v1/orders/{id}",
        format!("/v1/orders/{order_id}"),
        example("post", "/v1/orders/{id}"),
        200,
    )
    .await;
    let payment = send(
        &key,
        "/v1/orders/{id}/payments",
        format!("/v1/orders/{order_id}/payments"),
        example("post", "/v1/orders/{id}/payments"),
        201,
    )
    .await;
    assert_eq!(payment["status"], "succeeded", "{payment}");
    let payment_id = payment["id"].as_str().unwrap().to_string();
    send(
        &key,
        "/v1/payments/{id}/refunds",
        format!("/v1/payments/{payment_id}/refunds"),
        example("post", "/v1/payments/{id}/refunds"),
        201,
    )
    .await;

    // The checkout's example names the same `merchant_reference`: another merchant's.
    let (_, other) = app.other_merchant().await;
    let checkout = send(
        &other,
        "/v1/checkout",
        "/v1/checkout".into(),
        example("post", "/v1/checkout"),
        201,
    )
    .await;
    assert_eq!(checkout["payment"]["status"], "succeeded", "{checkout}");

    for (operation, expected) in [("capture", "succeeded"), ("cancel", "canceled")] {
        let held = send(&other, "/v1/checkout", "/v1/checkout".into(),
            serde_json::json!({"amount": 2500, "currency": "eur", "payment_method": "pm_card_visa", "capture_method": "manual"}).to_string(),
            201).await;
        assert_eq!(held["payment"]["status"], "authorized", "{held}");
        let id = held["payment"]["id"].as_str().unwrap();
        let template = format!("/v1/payments/{{id}}/{operation}");
        let operated = send(
            &other,
            &template,
            format!("/v1/payments/{id}/{operation}"),
            example("post", &template),
            200,
        )
        .await;
        assert_eq!(operated["payment"]["status"], expected, "{operated}");
    }
}
