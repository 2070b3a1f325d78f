//! What payorch keeps of providers' webhooks (docs/PRODUCTION.md, section 6): realistic full
//! payloads are stored without card or billing details, and a stored webhook is deleted a
//! retention after its payment is final (after it arrived, if it names no payment), a copy
//! redelivered after that changing nothing.

use std::time::Duration;

use diesel::sql_types::Text;
use diesel_async::RunQueryDsl;
use serde_json::{json, Value};

use payorch::payments::webhooks::reaper::{strip_stored_webhooks, WebhookReaperSettings};

use crate::helpers::TestApp;
use crate::payments::Route;
use crate::webhooks::{event, quiet_app};

/// Card, billing and personal data a real payload carries: none may be stored.
const CARD_AND_BILLING: [&str; 16] = [
    "4242",
    "visa",
    "Visa",
    "2034",
    "Xt5EWLLDS7FJjR1c",
    "credit",
    "Jenny",
    "jenny.rosen@example.com",
    "+15555550123",
    "Market Street",
    "94111",
    "billing_details",
    "payment_method_details",
    "shipping",
    "cardSummary",
    "expiryDate",
];

/// Every stored payload, as text.
async fn stored_payloads(app: &TestApp) -> Vec<String> {
    #[derive(diesel::QueryableByName)]
    struct Payload {
        #[diesel(sql_type = Text)]
        payload: String,
    }
    let mut conn = app.db.connect().await;
    let rows: Vec<Payload> = diesel::sql_query(
        "SELECT payload::text AS payload FROM provider_webhooks ORDER BY received_at",
    )
    .load(&mut conn)
    .await
    .unwrap();
    rows.into_iter().map(|r| r.payload).collect()
}

fn assert_no_card_or_billing_data(payloads: &[String]) {
    assert!(!payloads.is_empty());
    for payload in payloads {
        for needle in CARD_AND_BILLING {
            assert!(!payload.contains(needle), "{needle} is kept in {payload}");
        }
    }
}

/// Stripe's `payment_intent.succeeded` as Stripe sends it when the charge is expanded: the
/// card's details, the payer's billing address, a shipping address and a receipt email.
fn full_stripe_event(event_id: &str, attempt: &Value) -> String {
    let mut body: Value = serde_json::from_str(&event("succeeded", event_id, attempt)).unwrap();
    let object = &mut body["data"]["object"];
    let billing = json!({
        "address": {"city": "San Francisco", "country": "US", "line1": "510 Townsend Street",
                    "line2": "Market Street", "postal_code": "94111", "state": "CA"},
        "email": "jenny.rosen@example.com",
        "name": "Jenny Rosen",
        "phone": "+15555550123"
    });
    object["latest_charge"] = json!({
        "id": "ch_3PfullCharge000001",
        "object": "charge",
        "amount": attempt["amount"],
        "amount_captured": attempt["amount"],
        "currency": attempt["currency"],
        "status": "succeeded",
        "paid": true,
        "captured": true,
        "payment_intent": attempt["provider_payment_id"],
        "billing_details": billing,
        "receipt_email": "jenny.rosen@example.com",
        "payment_method": "pm_1PfullCard00001",
        "payment_method_details": {
            "type": "card",
            "card": {
                "brand": "visa", "last4": "4242", "exp_month": 12, "exp_year": 2034,
                "fingerprint": "Xt5EWLLDS7FJjR1c", "funding": "credit", "country": "US",
                "checks": {"address_line1_check": "pass", "cvc_check": "pass"},
                "network": "visa", "wallet": null
            }
        },
        "outcome": {"network_status": "approved_by_network", "type": "authorized"},
        "metadata": attempt_metadata(attempt)
    });
    object["shipping"] = json!({"name": "Jenny Rosen", "phone": "+15555550123",
                                "address": billing["address"]});
    object["receipt_email"] = json!("jenny.rosen@example.com");
    object["customer"] = json!("cus_Jenny0001");
    object["payment_method"] = json!("pm_1PfullCard00001");
    object["description"] = json!("Jenny Rosen's order");
    object["last_payment_error"] = json!({
        "code": "card_declined", "decline_code": "insufficient_funds",
        "message": "Your card has insufficient funds.", "type": "card_error",
        "payment_method": {"id": "pm_1PfullCard00001", "billing_details": billing,
                           "card": {"brand": "visa", "last4": "4242", "exp_year": 2034}}
    });
    body.to_string()
}

fn attempt_metadata(attempt: &Value) -> Value {
    json!({"attempt_id": attempt["id"], "order_id": attempt["order_id"],
           "merchant_id": attempt["merchant_id"]})
}

#[tokio::test]
async fn a_full_stripe_payload_is_stored_without_card_or_billing_data_and_still_applies() {
    let app = quiet_app().await;
    let attempt = app.pending_attempt("full-stripe").await;
    let id = attempt["id"].as_str().unwrap();
    let receipt = app
        .deliver_signed(&full_stripe_event("evt_full_stripe", &attempt))
        .await;
    assert_eq!(receipt["outcome"], "applied", "{receipt}");
    assert_eq!(app.payment(id).await["status"], "succeeded");

    let payloads = stored_payloads(&app).await;
    assert_no_card_or_billing_data(&payloads);
    // What payorch and support read is kept.
    let kept: Value = serde_json::from_str(&payloads[0]).unwrap();
    assert_eq!(kept["id"], "evt_full_stripe");
    assert_eq!(kept["type"], "payment_intent.succeeded");
    let object = &kept["data"]["object"];
    assert_eq!(object["id"], attempt["provider_payment_id"]);
    assert_eq!(object["status"], "succeeded");
    assert_eq!(object["amount"], attempt["amount"]);
    assert_eq!(object["metadata"]["attempt_id"], attempt["id"]);
    assert_eq!(object["latest_charge"]["id"], "ch_3PfullCharge000001");
    assert_eq!(object["last_payment_error"]["code"], "card_declined");
    assert!(object.get("customer").is_none(), "{object}");
}

#[tokio::test]
async fn an_adyen_authorisation_is_stored_without_its_card_fields_and_still_applies() {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_secs(3600);
        config.settings.reconciler.backoff = vec![Duration::from_secs(3600)];
    })
    .await;
    app.route_to(&["adyen"]).await;
    app.sandbox.set_notification_url(None);
    let (_, attempt) = app
        .pay(Route::Checkout, "full-adyen", "pm_sandbox_processing")
        .await;
    let id = attempt["id"].as_str().unwrap();
    let item = json!({
        "additionalData": {
            "authCode": "874574",
            "cardSummary": "4242",
            "expiryDate": "12/2034",
            "cardHolderName": "Jenny Rosen",
            "cardBin": "424242",
            "issuerCountry": "US",
            "fundingSource": "credit",
            "paymentMethodVariant": "visa",
            "shopperEmail": "jenny.rosen@example.com",
            "billingAddress.street": "Market Street",
            "billingAddress.postalCode": "94111",
            "refusalReasonRaw": "AUTHORISED"
        },
        "amount": {"value": attempt["amount"], "currency": "EUR"},
        "eventCode": "AUTHORISATION",
        "eventDate": "2026-11-27T10:00:00+01:00",
        "merchantAccountCode": payorch::wiring::SANDBOX_MERCHANT_ACCOUNT,
        "merchantReference": id,
        "pspReference": attempt["provider_payment_id"],
        "paymentMethod": "visa",
        "reason": "874574:4242:12/2034",
        "operations": ["CANCEL", "CAPTURE", "REFUND"],
        "success": "true",
    });
    let answer = app
        .notify(&[item], app.sandbox.adyen_hmac_key().expose())
        .await;
    assert_eq!(answer.status(), 200);
    assert_eq!(app.payment(id).await["status"], "succeeded");

    let payloads = stored_payloads(&app).await;
    assert_no_card_or_billing_data(&payloads);
    for needle in [
        "874574",
        "424242",
        "cardHolderName",
        "hmacSignature",
        "shopperEmail",
    ] {
        assert!(!payloads[0].contains(needle), "{needle} in {}", payloads[0]);
    }
    let kept: Value = serde_json::from_str(&payloads[0]).unwrap();
    assert_eq!(kept["pspReference"], attempt["provider_payment_id"]);
    assert_eq!(kept["merchantReference"], id);
    assert_eq!(kept["eventCode"], "AUTHORISATION");
    assert_eq!(kept["success"], "true");
    assert_eq!(kept["additionalData"]["refusalReasonRaw"], "AUTHORISED");
}

fn retention(retention: Duration) -> WebhookReaperSettings {
    WebhookReaperSettings {
        retention,
        batch: 2,
        ..WebhookReaperSettings::default()
    }
}

#[tokio::test]
async fn webhooks_an_older_version_stored_whole_are_rewritten_through_the_allowlist_and_stay_in_the_story(
) {
    let app = quiet_app().await;
    let attempt = app.pending_attempt("stored-whole").await;
    let id = attempt["id"].as_str().unwrap();
    let receipt = app
        .deliver_signed(&full_stripe_event("evt_kept_now", &attempt))
        .await;
    assert_eq!(receipt["outcome"], "applied", "{receipt}");

    // Rows as the version before the allowlist wrote them: the whole payload, with the
    // columns it knew, so `payload_kept` takes its default.
    let mut conn = app.db.connect().await;
    for n in 0..3 {
        let whole = full_stripe_event(&format!("evt_stored_whole_{n}"), &attempt);
        diesel::sql_query(
            "INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, \
                 detail, merchant_id, attempt_id, payload, provider_created_at, received_at) \
             SELECT gen_random_uuid(), 'stripe', $1, 'payment_intent.succeeded', 'stale', \
                 'already succeeded', merchant_id, id, $2::jsonb, now(), \
                 now() - $3 * interval '1 minute' \
             FROM payment_attempts WHERE provider_payment_id = $4",
        )
        .bind::<Text, _>(format!("evt_stored_whole_{n}"))
        .bind::<Text, _>(whole)
        .bind::<diesel::sql_types::Integer, _>(10 - n)
        .bind::<Text, _>(attempt["provider_payment_id"].as_str().unwrap())
        .execute(&mut conn)
        .await
        .unwrap();
    }
    let before = stored_payloads(&app).await;
    assert_eq!(before.len(), 4);
    assert!(before.iter().any(|p| p.contains("jenny.rosen@example.com")));

    // Two at a time: three old rows take two batches; the row kept already is left alone.
    let rewritten = strip_stored_webhooks(&mut conn, &retention(Duration::from_secs(3600)))
        .await
        .unwrap();
    assert_eq!(rewritten, 3);
    let after = stored_payloads(&app).await;
    assert_no_card_or_billing_data(&after);
    for payload in &after {
        let kept: Value = serde_json::from_str(payload).unwrap();
        assert_eq!(kept["type"], "payment_intent.succeeded", "{kept}");
        assert_eq!(kept["data"]["object"]["id"], attempt["provider_payment_id"]);
        assert_eq!(
            kept["data"]["object"]["metadata"]["attempt_id"],
            attempt["id"]
        );
    }
    assert_eq!(
        app.count("provider_webhooks WHERE NOT payload_kept").await,
        0
    );
    // Nothing is left to do on the next round.
    assert_eq!(
        strip_stored_webhooks(&mut conn, &retention(Duration::from_secs(3600)))
            .await
            .unwrap(),
        0
    );

    // Support still reads every one of them in the payment's story.
    let story = app.story(id).await;
    let mut told: Vec<&str> = story["webhook_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["provider_event_id"].as_str().unwrap())
        .collect();
    told.sort();
    assert_eq!(
        told,
        [
            "evt_kept_now",
            "evt_stored_whole_0",
            "evt_stored_whole_1",
            "evt_stored_whole_2"
        ]
    );
}
