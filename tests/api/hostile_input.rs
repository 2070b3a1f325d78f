//! Input made to confuse or to slip card data past payorch: refused with the right problem,
//! nothing stored, no card number echoed (docs/guides/api.md, "Card data" and "Text fields").

use serde_json::{json, Value};

use crate::helpers::{assert_problem, TestApp};

const CARD: &str = "4242424242424242";

impl TestApp {
    async fn post_order_text(&self, key: &str, body: &str) -> reqwest::Response {
        self.post_keyed(
            &self.merchant_key,
            "/v1/orders",
            Some(key),
            Some(body.into()),
        )
        .await
    }

    async fn nothing_stored(&self) {
        assert_eq!(self.count("orders").await, 0);
        assert_eq!(self.count("idempotency_keys").await, 0);
    }
}

fn fields(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .map(|e| e["field"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_nul_anywhere_is_a_422_naming_the_field() {
    let app = TestApp::spawn().await;
    let cases = [
        (
            json!({"amount": 100, "currency": "eur", "metadata": {"k": "a\u{0}b"}}),
            "/metadata/k",
        ),
        (
            json!({"amount": 100, "currency": "eur", "metadata": {"k\u{0}": "v"}}),
            "/metadata/k\\u0000",
        ),
        (
            json!({"amount": 100, "currency": "eur", "description": "tea\u{0}"}),
            "/description",
        ),
        (
            json!({"amount": 100, "currency": "eur", "merchant_reference": "\u{0}"}),
            "/merchant_reference",
        ),
    ];
    for (i, (body, field)) in cases.iter().enumerate() {
        let response = app
            .post_order_text(&format!("nul-{i}"), &body.to_string())
            .await;
        let problem = assert_problem(response, 422, "validation_failed").await;
        assert_eq!(fields(&problem), [*field], "{body}");
    }
    let checkout = json!({"amount": 100, "currency": "eur", "payment_method": "pm_card_visa",
                          "description": "a\u{0}"});
    let response = app
        .post_keyed(
            &app.merchant_key,
            "/v1/checkout",
            Some("nul-checkout"),
            Some(checkout.to_string()),
        )
        .await;
    assert_problem(response, 422, "validation_failed").await;
    app.nothing_stored().await;
}

#[tokio::test]
async fn a_card_number_as_a_member_name_is_refused_and_never_repeated() {
    let app = TestApp::spawn().await;
    let body = json!({"amount": 100, "currency": "eur", "metadata": {CARD: "x"}});
    let response = app.post_order_text("card-name", &body.to_string()).await;
    let text = response.text().await.unwrap();
    assert!(!text.contains("4242"), "echoed: {text}");
    let problem: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(problem["code"], "raw_card_data_forbidden");
    assert_eq!(problem["field"], "/metadata/[redacted]");

    // Given twice, the duplicate-member error does not repeat it either.
    let twice =
        format!(r#"{{"amount":100,"currency":"eur","metadata":{{"{CARD}":"a","{CARD}":"b"}}}}"#);
    let text = app
        .post_order_text("card-twice", &twice)
        .await
        .text()
        .await
        .unwrap();
    assert!(!text.contains("4242"), "echoed: {text}");
    app.nothing_stored().await;
}

#[tokio::test]
async fn disguised_card_numbers_are_refused_and_ordinary_numbers_pass() {
    let app = TestApp::spawn().await;
    let disguised = [
        "4242.4242.4242.4242",
        "4242/4242/4242/4242",
        "4242_4242_4242_4242",
        "4242\n4242\n4242\n4242",
        "4242  4242  4242  4242",
        "4242\u{00A0}4242\u{00A0}4242\u{00A0}4242",
        "4242\u{200B}4242\u{200B}4242\u{200B}4242",
        "４２４２４２４２４２４２４２４２",
        "٤٢٤٢٤٢٤٢٤٢٤٢٤٢٤٢",
    ];
    for (i, text) in disguised.iter().enumerate() {
        let body = json!({"amount": 100, "currency": "eur", "description": text});
        let response = app
            .post_order_text(&format!("disguised-{i}"), &body.to_string())
            .await;
        let problem = assert_problem(response, 422, "raw_card_data_forbidden").await;
        assert_eq!(problem["field"], "/description", "{text:?}");
    }
    app.nothing_stored().await;

    let ordinary = [
        "order 100000000000017",
        "2026-11-22T10:11:12Z",
        "20261122101112",
        "1700000000",
        "018f3c2e-7b1a-7c3d-9e4f-0a1b2c3d4e5f",
        "+44 20 7946 0958",
    ];
    for (i, text) in ordinary.iter().enumerate() {
        let body = json!({"amount": 100, "currency": "eur", "description": text,
                          "merchant_reference": text});
        let response = app
            .post_order_text(&format!("ordinary-{i}"), &body.to_string())
            .await;
        assert_eq!(response.status(), 201, "{text:?}");
    }
}

#[tokio::test]
async fn a_card_number_in_a_key_or_the_request_target_is_refused() {
    let app = TestApp::spawn().await;
    let body = r#"{"amount": 100, "currency": "eur"}"#;
    for key in [CARD, "4242-4242-4242-4242", "pay-4242.4242.4242.4242"] {
        let response = app.post_order_text(key, body).await;
        let problem = assert_problem(response, 422, "raw_card_data_forbidden").await;
        assert_eq!(problem["field"], "Idempotency-Key");
    }
    for path in [
        format!("/v1/orders/{CARD}"),
        format!("/v1/orders?card={CARD}"),
        "/v1/orders/%34%32%34%32%34%32%34%32%34%32%34%32%34%32%34%32".to_string(),
    ] {
        let response = app.get_as(&app.merchant_key, &path).await;
        let problem = assert_problem(response, 422, "raw_card_data_forbidden").await;
        assert_eq!(problem["field"], "request target", "{path}");
    }
    // payorch's own ids are 32 hex digits, whose decimal runs pass the card checks now and
    // then; such an id is looked up, never refused (it once stranded a real order).
    let own_id = format!("0198ab{CARD}cdef0123ab");
    assert_eq!(own_id.len(), 32);
    for path in [
        format!("/v1/orders/ord_{own_id}"),
        format!("/v1/payments/pay_{own_id}"),
    ] {
        let response = app.get_as(&app.merchant_key, &path).await;
        assert_eq!(response.status(), 404, "{path}");
    }
    let response = app
        .get_as(&app.merchant_key, &format!("/v1/orders/ord_{CARD}"))
        .await;
    assert_problem(response, 422, "raw_card_data_forbidden").await;
    let response = app
        .client
        .get(app.url("/health/live"))
        .header("user-agent", format!("shop/1.0 card {CARD}"))
        .send()
        .await
        .unwrap();
    assert_problem(response, 422, "raw_card_data_forbidden").await;
    app.nothing_stored().await;
}

#[tokio::test]
async fn headers_given_twice_are_refused() {
    let app = TestApp::spawn().await;
    let body = r#"{"amount": 100, "currency": "eur"}"#;
    let response = app
        .client
        .post(app.url("/v1/orders"))
        .bearer_auth(&app.merchant_key)
        .header("content-type", "application/json")
        .header("Idempotency-Key", "first")
        .header("Idempotency-Key", "second")
        .body(body)
        .send()
        .await
        .unwrap();
    let problem = assert_problem(response, 400, "duplicate_header").await;
    assert_eq!(problem["header"], "Idempotency-Key");

    let response = app
        .client
        .post(app.url("/v1/orders"))
        .header("authorization", format!("Bearer {}", app.merchant_key))
        .header("authorization", "Bearer sk_mer_someone_else")
        .header("content-type", "application/json")
        .header("Idempotency-Key", "two-auth")
        .body(body)
        .send()
        .await
        .unwrap();
    let problem = assert_problem(response, 400, "duplicate_header").await;
    assert_eq!(problem["header"], "Authorization");
    app.nothing_stored().await;
}

#[tokio::test]
async fn a_member_given_twice_is_refused() {
    let app = TestApp::spawn().await;
    for (i, body) in [
        r#"{"amount":100,"amount":5,"currency":"eur"}"#,
        r#"{"amount":100,"currency":"eur","metadata":{"a":"1","a":"2"}}"#,
    ]
    .iter()
    .enumerate()
    {
        let response = app.post_order_text(&format!("dup-{i}"), body).await;
        let problem = assert_problem(response, 400, "invalid_request").await;
        assert!(
            problem["detail"].as_str().unwrap().contains("given twice"),
            "{problem}"
        );
    }
    app.nothing_stored().await;
}

#[tokio::test]
async fn references_are_one_text_and_never_hide_what_they_say() {
    let app = TestApp::spawn().await;
    for (i, reference) in ["   ", "ref\u{202E}fer", "\u{FEFF}ref", "\u{2066}x\u{2069}"]
        .iter()
        .enumerate()
    {
        let body = json!({"amount": 100, "currency": "eur", "merchant_reference": reference});
        let response = app
            .post_order_text(&format!("unclear-{i}"), &body.to_string())
            .await;
        let problem = assert_problem(response, 422, "validation_failed").await;
        assert_eq!(fields(&problem), ["/merchant_reference"], "{reference:?}");
    }
    let composed = json!({"amount": 100, "currency": "eur", "merchant_reference": "Caf\u{00E9}-1"});
    let response = app.post_order_text("nfc", &composed.to_string()).await;
    assert_eq!(response.status(), 201);
    let order: Value = response.json().await.unwrap();
    let decomposed =
        json!({"amount": 100, "currency": "eur", "merchant_reference": "Cafe\u{0301}-1"});
    let response = app.post_order_text("nfd", &decomposed.to_string()).await;
    let problem = assert_problem(response, 409, "merchant_reference_exists").await;
    assert_eq!(problem["order_id"], order["id"]);
}

#[tokio::test]
async fn a_random_uuid_or_hex_key_is_never_taken_for_a_card_number() {
    let app = TestApp::spawn().await;
    // Random keys, each once refused as card data: UUIDs (about one in 1,500 was), hex
    // tokens (about one in 2,000), and a load generator's `<thread>-<hex>-<counter>` whose
    // digits after the `b` passed the checks as one run.
    for key in [
        "bf656202-2791-4080-9a6b-4d6127fa12d8",
        "3675e503-8471-4981-8124-5c7e1eb332cd",
        "41111111-1111-4115-abcd-0123456789ab",
        "4895950225784242838dc544c1058e1e",
        "bad3a8b73f30478413362965c9aa023db72a4c1f",
        "1-b65381607173-13",
    ] {
        let response = app
            .post_order_text(key, r#"{"amount": 100, "currency": "eur"}"#)
            .await;
        assert_eq!(response.status(), 201, "{key}");
    }
}
