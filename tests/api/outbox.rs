//! The outbox (docs/guides/events.md, "Events and webhook endpoints"; docs/DESIGN.md, "The outbox"): every
//! change a merchant cares about writes exactly one event in the change's own statement,
//! showing the resource as `GET` showed it then and naming the request that caused it, or
//! none when a webhook, the reconciler or support did.

use std::time::Duration;

use diesel::sql_types::Text;
use diesel_async::RunQueryDsl;
use serde_json::{json, Value};

use payorch::events::events_of_order;
use payorch::ids::{MerchantId, OrderId};
use payorch::views;

use crate::helpers::{assert_refused_by, TestApp};
use crate::payments::checkout_body;

impl TestApp {
    /// The events of `order`, oldest first, as the API shows them.
    pub async fn events_of(&self, order: &str) -> Vec<Value> {
        let mut conn = self.db.connect().await;
        let order: OrderId = order.parse().expect("an order id");
        let merchant: MerchantId = self.merchant_id;
        events_of_order(&mut conn, merchant, order)
            .await
            .expect("events read")
            .into_iter()
            .map(|e| serde_json::to_value(views::Event::from(e)).expect("an event"))
            .collect()
    }
}

#[derive(diesel::QueryableByName)]
struct MovedBy {
    #[diesel(sql_type = Text)]
    source: String,
}

impl TestApp {
    /// Who made the move of payment or refund `id` to `status` (its timeline's source).
    async fn moved_by(&self, id: &str, status: &str) -> String {
        let (table, column) = if id.starts_with("re_") {
            ("refund_transitions", "refund_id")
        } else {
            ("attempt_transitions", "attempt_id")
        };
        let uuid = id.split_once('_').unwrap().1;
        let mut conn = self.db.connect().await;
        let row: MovedBy = diesel::sql_query(format!(
            "SELECT source::text AS source FROM {table} WHERE {column} = '{uuid}' AND to_status = '{status}'"
        ))
        .get_result(&mut conn)
        .await
        .expect("the move's timeline row");
        row.source
    }

    /// The request an event of `id`'s move to `status` names: the request's own when its
    /// answer made the move, none when the provider's webhook (which the sandbox sends as it
    /// answers) got there first.
    async fn request_of_move(&self, id: &str, status: &str, request: &Value) -> Value {
        match self.moved_by(id, status).await.as_str() {
            "provider_response" | "api" => request.clone(),
            "webhook" => Value::Null,
            other => panic!("{id} moved to {status} by {other}"),
        }
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// `{id, idempotency_key}` of the response's request.
fn request_of(response: &reqwest::Response, key: &str) -> Value {
    let id = response.headers()["x-request-id"].to_str().unwrap();
    json!({"id": id, "idempotency_key": key})
}

#[actix_web::test]
async fn a_checkout_writes_its_payment_and_order_events_named_by_its_request() {
    let app = TestApp::spawn().await;
    let response = app.checkout("ev-1", &checkout_body("pm_card_visa")).await;
    assert_eq!(response.status(), 201);
    let request = request_of(&response, "ev-1");
    let body: Value = response.json().await.unwrap();
    let (payment, order) = (&body["payment"], &body["order"]);

    let events = app.events_of(order["id"].as_str().unwrap()).await;
    assert_eq!(types(&events), ["payment.succeeded", "order.paid"]);
    let request = app
        .request_of_move(payment["id"].as_str().unwrap(), "succeeded", &request)
        .await;
    for event in &events {
        assert_eq!(event["object"], "event");
        assert!(event["id"].as_str().unwrap().starts_with("evt_"), "{event}");
        assert_eq!(event["request"], request, "{event}");
    }
    // Each shows its resource as GET shows it (nothing changed since).
    let shown_payment = app.payment(payment["id"].as_str().unwrap()).await;
    let shown_order = app.order(order["id"].as_str().unwrap()).await;
    assert_eq!(events[0]["data"]["object"], shown_payment);
    assert_eq!(events[1]["data"]["object"], shown_order);
}

#[actix_web::test]
async fn a_change_a_webhook_makes_names_no_request_and_pending_is_told_once() {
    let app = TestApp::spawn().await;
    let response = app
        .checkout("ev-2", &checkout_body("pm_sandbox_processing"))
        .await;
    assert_eq!(response.status(), 201);
    let request = request_of(&response, "ev-2");
    let body: Value = response.json().await.unwrap();
    let payment = body["payment"]["id"].as_str().unwrap().to_owned();
    let order = body["order"]["id"].as_str().unwrap().to_owned();
    assert_eq!(body["payment"]["status"], "pending");

    let settled = app.settled(&payment, Duration::from_secs(20)).await;
    assert_eq!(settled["status"], "succeeded");
    let events = app.events_of(&order).await;
    assert_eq!(
        types(&events),
        ["payment.pending", "payment.succeeded", "order.paid"]
    );
    let pending_by = app.request_of_move(&payment, "pending", &request).await;
    assert_eq!(events[0]["request"], pending_by);
    assert_eq!(events[0]["data"]["object"]["status"], "pending");
    assert_eq!(events[1]["request"], Value::Null, "{}", events[1]);
    assert_eq!(events[2]["request"], Value::Null, "{}", events[2]);
    assert_eq!(events[1]["data"]["object"], settled);
}

#[actix_web::test]
async fn a_decline_a_cancel_and_a_full_refund_each_tell_their_change() {
    let app = TestApp::spawn().await;

    // A decline: the payment fails, the order awaits payment again (no order event).
    let response = app
        .checkout("ev-3", &checkout_body("pm_card_chargeDeclined"))
        .await;
    let body: Value = response.json().await.unwrap();
    let order = body["order"]["id"].as_str().unwrap().to_owned();
    assert_eq!(types(&app.events_of(&order).await), ["payment.failed"]);

    // That order canceled: by its request.
    let cancel = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/orders/{order}/cancel"),
            Some("ev-3-cancel"),
            None,
        )
        .await;
    assert_eq!(cancel.status(), 200);
    let request = request_of(&cancel, "ev-3-cancel");
    let events = app.events_of(&order).await;
    assert_eq!(types(&events), ["payment.failed", "order.canceled"]);
    assert_eq!(events[1]["request"], request);
    assert_eq!(events[1]["data"]["object"], app.order(&order).await);

    // A paid order refunded in full: the refund's event, then the order's, by its request.
    let response = app.checkout("ev-4", &checkout_body("pm_card_visa")).await;
    let body: Value = response.json().await.unwrap();
    let (payment, order) = (
        body["payment"]["id"].as_str().unwrap().to_owned(),
        body["order"]["id"].as_str().unwrap().to_owned(),
    );
    let refund = app
        .refund(&payment, "ev-4-refund", json!({"amount": 4200}))
        .await;
    assert_eq!(refund.status(), 201);
    let request = request_of(&refund, "ev-4-refund");
    let refund: Value = refund.json().await.unwrap();
    let request = app
        .request_of_move(refund["id"].as_str().unwrap(), "succeeded", &request)
        .await;
    let events = app.events_of(&order).await;
    assert_eq!(
        types(&events),
        [
            "payment.succeeded",
            "order.paid",
            "refund.succeeded",
            "order.refunded"
        ]
    );
    assert_eq!(events[2]["request"], request);
    assert_eq!(events[3]["request"], request);
    assert_eq!(events[2]["data"]["object"], refund);
    assert_eq!(events[3]["data"]["object"], app.order(&order).await);
}

#[actix_web::test]
async fn the_database_holds_one_event_per_change() {
    let app = TestApp::spawn().await;
    let response = app.checkout("ev-5", &checkout_body("pm_card_visa")).await;
    let body: Value = response.json().await.unwrap();
    let order = body["order"]["id"].as_str().unwrap();
    assert_eq!(app.events_of(order).await.len(), 2);
    let mut conn = app.db.connect().await;
    // A second `payment.succeeded` of the same payment, written by hand: refused.
    assert_refused_by(
        &mut conn,
        "INSERT INTO merchant_events (merchant_id, type, resource_id, order_id, snapshot)
         SELECT merchant_id, type, resource_id, order_id, snapshot FROM merchant_events
         WHERE type = 'payment.succeeded'",
        "merchant_events_once",
    )
    .await;
}
