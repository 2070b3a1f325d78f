//! payorch paying through the sandbox's Adyen face (README, "Routing and failover"): the
//! same fault tokens end the same way as through Stripe, notifications settle payments, and
//! a notification is applied once however often and in whatever order it comes, and never
//! with a bad signature.

use std::time::Duration;

use serde_json::{json, Value};

use payorch::providers::adyen::sign_item;

use crate::helpers::TestApp;
use crate::payments::Route;

impl TestApp {
    /// Routes this merchant's payments to `providers`, in order.
    pub async fn route_to(&self, providers: &[&str]) {
        let response = self
            .client
            .put(format!(
                "{}/v1/merchants/{}/routing",
                self.base_url, self.merchant_id
            ))
            .bearer_auth(&self.support_key)
            .json(&json!({ "providers": providers }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }

    /// A notification delivery of `items` (NotificationRequestItem objects), each signed with
    /// `hex_key`.
    async fn notify(&self, items: &[Value], hex_key: &str) -> reqwest::Response {
        let items: Vec<Value> = items
            .iter()
            .map(|item| {
                let mut item = item.clone();
                let signature = sign_item(&item, hex_key).expect("a signable item");
                item["additionalData"]["hmacSignature"] = json!(signature);
                json!({ "NotificationRequestItem": item })
            })
            .collect();
        self.client
            .post(format!("{}/v1/webhooks/adyen", self.base_url))
            .json(&json!({"live": "false", "notificationItems": items}))
            .send()
            .await
            .unwrap()
    }
}

/// `(payment_method, status in the 201, final status, failure code, charges)`.
const OUTCOMES: [(&str, &str, &str, Option<&str>, usize); 7] = [
    ("pm_card_visa", "succeeded", "succeeded", None, 1),
    ("pm_card_chargeDeclined", "failed", "failed", Some("2"), 0),
    ("pm_sandbox_processing", "pending", "succeeded", None, 1),
    ("pm_sandbox_slow", "pending", "succeeded", None, 1),
    ("pm_sandbox_lost_response", "pending", "succeeded", None, 1),
    ("pm_sandbox_error_after", "pending", "succeeded", None, 1),
    (
        "pm_sandbox_error_before",
        "pending",
        "failed",
        Some("provider_no_record"),
        0,
    ),
];

#[tokio::test]
async fn every_fault_token_ends_in_the_right_status_through_adyen() {
    let app = TestApp::spawn().await;
    app.route_to(&["adyen"]).await;
    // The reconciler alone finds the truth here: by the sandbox's status check.
    app.sandbox.set_notification_url(None);
    for (method, first, last, code, charges) in OUTCOMES {
        let (status, attempt) = app.pay(Route::Checkout, method, method).await;
        assert_eq!(status, 201, "{method}: {attempt}");
        assert_eq!(attempt["provider"], "adyen", "{method}");
        assert_eq!(attempt["status"], first, "{method}: {attempt}");
        let id = attempt["id"].as_str().unwrap();
        let settled = app.settled(id, Duration::from_secs(20)).await;
        assert_eq!(settled["status"], last, "{method}: {settled}");
        assert_eq!(
            settled["failure_code"].as_str(),
            code,
            "{method}: {settled}"
        );
        assert_eq!(app.charges_for(id), charges, "{method}");
    }
    let ledger = app.sandbox.ledger();
    assert!(!ledger.is_empty());
    assert!(ledger.iter().all(|e| e.protocol == "adyen"));
}

#[tokio::test]
async fn a_notification_settles_a_pending_adyen_payment() {
    let app = TestApp::spawn_config(|config| {
        // The reconciler asleep: only the notification can finish it.
        config.settings.reconciler.interval = Duration::from_secs(3600);
        config.settings.reconciler.backoff = vec![Duration::from_secs(3600)];
    })
    .await;
    app.route_to(&["adyen"]).await;
    let (_, attempt) = app
        .pay(Route::Checkout, "received", "pm_sandbox_processing")
        .await;
    assert_eq!(attempt["status"], "pending");
    let id = attempt["id"].as_str().unwrap();
    let settled = app.settled(id, Duration::from_secs(15)).await;
    assert_eq!(settled["status"], "succeeded", "{settled}");
    let story = app.story(id).await;
    let events = story["webhook_events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{story}");
    assert_eq!(events[0]["event_type"], "AUTHORISATION");
    assert_eq!(events[0]["outcome"], "applied");
}

#[tokio::test]
async fn a_notification_duplicated_and_reordered_is_applied_once_and_a_bad_signature_is_refused() {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_secs(3600);
        config.settings.reconciler.backoff = vec![Duration::from_secs(3600)];
    })
    .await;
    app.route_to(&["adyen"]).await;
    // Made, then left `Received`: the sandbox's own notification is not delivered.
    app.sandbox.set_notification_url(None);
    let (_, attempt) = app
        .pay(Route::Checkout, "quiet", "pm_sandbox_processing")
        .await;
    let id = attempt["id"].as_str().unwrap();
    let psp = attempt["provider_payment_id"].as_str().unwrap();
    let key = app.sandbox.adyen_hmac_key();
    let item = |event: &str, success: &str| {
        json!({
            "additionalData": {},
            "amount": {"value": 4200, "currency": "EUR"},
            "eventCode": event,
            "eventDate": "2026-11-23T10:00:00+01:00",
            "merchantAccountCode": payorch::wiring::SANDBOX_MERCHANT_ACCOUNT,
            "merchantReference": id,
            "pspReference": psp,
            "success": success,
        })
    };
    let authorised = item("AUTHORISATION", "true");

    // A bad signature: refused, nothing stored, nothing moved.
    let events_before = app.count("webhook_events").await;
    let mut forged = authorised.clone();
    forged["additionalData"]["hmacSignature"] =
        json!("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
    let refused = app
        .client
        .post(format!("{}/v1/webhooks/adyen", app.base_url))
        .json(&json!({"live": "false", "notificationItems": [{"NotificationRequestItem": forged}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let wrong_key = app
        .notify(std::slice::from_ref(&authorised), &"11".repeat(32))
        .await;
    assert_eq!(wrong_key.status(), 400);
    assert_eq!(app.count("webhook_events").await, events_before);
    assert_eq!(app.payment(id).await["status"], "pending");

    // Reordered: a capture (not acted on) first, then the authorisation five times over, two
    // of them in one delivery; then a contradicting authorisation.
    let capture = item("CAPTURE", "true");
    for delivery in [
        vec![capture.clone()],
        vec![authorised.clone()],
        vec![authorised.clone(), authorised.clone()],
        vec![authorised.clone()],
        vec![authorised.clone()],
        vec![item("AUTHORISATION", "false")],
    ] {
        let answer = app.notify(&delivery, key.expose()).await;
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.text().await.unwrap(), "[accepted]");
    }
    assert_eq!(app.payment(id).await["status"], "succeeded");
    let story = app.story(id).await;
    let outcomes: Vec<&str> = story["webhook_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    let applied = outcomes.iter().filter(|o| **o == "applied").count();
    assert_eq!(applied, 1, "{outcomes:?}");
    let authorisation = story["webhook_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["outcome"] == "applied")
        .unwrap();
    assert_eq!(authorisation["deliveries"], 5, "{authorisation}");
    assert!(outcomes.contains(&"conflict"), "{outcomes:?}");
    assert_eq!(app.charges_for(id), 1);
}
