//! Retries after a definite decline (docs/guides/declines.md, "Retries"): `a` is the app's
//! sandbox (spoken to as Stripe), `b` a second sandbox (spoken to as Adyen). A soft decline at
//! `a` is tried at `b` only when the merchant turned retries on, within its `max_attempts` and
//! the card's cap; a hard decline or an unknown outcome never is; a decline asking for
//! authentication is asked again at `a` with 3-D Secure when a payer is there. The two ledgers
//! are the judge: one charge per intent at most, across both.

use std::time::Duration;

use serde_json::{json, Value};

use payorch::providers::circuit::CircuitSettings;
use payorch_sandbox::{Face, Mix};

use crate::helpers::TestApp;
use crate::payments::checkout_body;

/// Two providers whose circuits never open within a test; `a` declines every ordinary card
/// softly (its Stripe face's mix approves none, and every decline it draws is soft). Neither
/// tells by webhook: a decline's webhook that beats the create's answer fails the attempt and
/// completes the key first, and then the payment ends without a retry
/// (docs/guides/declines.md, "Retries"); these tests are about the rules, not that race.
async fn a_declines_softly() -> TestApp {
    let app = TestApp::spawn_config(|config| {
        config.two_providers = Some(CircuitSettings {
            threshold: 1000,
            cool_down: Duration::from_secs(60),
        })
    })
    .await;
    let mix = Mix::parse("approval=0,soft=1,hard=0,authentication_required=0").unwrap();
    app.sandbox.set_mix(Face::Stripe, mix);
    app.sandbox.set_webhook_url(None);
    app.sandbox_b().set_webhook_url(None);
    app.sandbox_b().set_notification_url(None);
    app
}

impl TestApp {
    fn sandbox_b(&self) -> &payorch_sandbox::SandboxHandle {
        &self.second.as_ref().expect("two providers").sandbox
    }

    /// Charges for `order_id`: `(on a, on b)`.
    fn charged_on(&self, order_id: &str) -> (usize, usize) {
        let on_b = self
            .sandbox_b()
            .ledger()
            .iter()
            .filter(|e| e.order_id.as_deref() == Some(order_id) && e.is_charged())
            .count();
        (self.charges_for_order(order_id), on_b)
    }

    /// Routes `a` then `b`, with these retries.
    async fn retries(&self, retries: Value) {
        self.retries_of(self.merchant_id, retries).await
    }

    /// Routes `merchant`'s payments to `a` then `b`, with these retries.
    async fn retries_of(&self, merchant: payorch::ids::MerchantId, retries: Value) {
        let response = self
            .client
            .put(self.url(&format!("/v1/merchants/{merchant}/routing")))
            .bearer_auth(&self.support_key)
            .json(&json!({"providers": ["a", "b"], "retries": retries}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let shown: Value = response.json().await.unwrap();
        for (field, value) in retries.as_object().unwrap() {
            assert_eq!(&shown["retries"][field], value, "{shown}");
        }
    }

    /// A checkout of `body` under `key`: its answer, and the order's payments, oldest first.
    async fn checkout_chain(&self, key: &str, body: &Value) -> (Value, Vec<Value>) {
        self.checkout_chain_as(&self.merchant_key, key, body).await
    }

    /// [`TestApp::checkout_chain`] by the merchant whose key is `secret`.
    async fn checkout_chain_as(
        &self,
        secret: &str,
        key: &str,
        body: &Value,
    ) -> (Value, Vec<Value>) {
        let response = self
            .post_keyed(secret, "/v1/checkout", Some(key), Some(body.to_string()))
            .await;
        assert_eq!(response.status(), 201);
        let paid: Value = response.json().await.unwrap();
        let path = format!("/v1/orders/{}", paid["order"]["id"].as_str().unwrap());
        let order: Value = self.get_as(secret, &path).await.json().await.unwrap();
        let mut chain = order["payments"].as_array().unwrap().clone();
        chain.reverse();
        (paid, chain)
    }
}

fn switched_on() -> Value {
    json!({"soft_declines": true})
}

#[tokio::test]
async fn a_soft_decline_is_tried_at_the_next_provider_under_the_same_key() {
    let app = a_declines_softly().await;
    app.retries(switched_on()).await;
    let (paid, chain) = app
        .checkout_chain("soft", &checkout_body("pm_card_visa"))
        .await;
    let payment = &paid["payment"];
    assert_eq!(payment["status"], "succeeded", "{paid}");
    assert_eq!(payment["provider"], "b");
    assert_eq!(paid["order"]["status"], "paid");
    let order_id = paid["order"]["id"].as_str().unwrap();
    assert_eq!(app.charged_on(order_id), (0, 1), "one charge, at b");

    assert_eq!(chain.len(), 2, "{chain:?}");
    let (first, second) = (&chain[0], &chain[1]);
    assert_eq!(first["provider"], "a");
    assert_eq!(first["status"], "failed");
    assert_eq!(first["failure_class"], "soft");
    assert_eq!(first["retry_of"], Value::Null);
    assert_eq!(second["id"], payment["id"]);
    assert_eq!(second["retry_of"], first["id"]);
    assert_eq!(second["retry_reason"], "soft_decline");
    assert_ne!(
        first["provider_idempotency_key"], second["provider_idempotency_key"],
        "each attempt its own provider key"
    );

    // The key names the last attempt: a retry of the request replays it and sends nothing.
    let again = app.checkout("soft", &checkout_body("pm_card_visa")).await;
    assert_eq!(again.status(), 201);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["payment"]["id"], payment["id"]);
    assert_eq!(again["payment"]["status"], "succeeded");
    assert_eq!(app.charged_on(order_id), (0, 1));
    let metrics = app.get("/metrics").await.text().await.unwrap();
    let counted = r#"payorch_payment_retries_total{from="a",reason="soft_decline",to="b"} 1"#;
    assert!(metrics.contains(counted), "missing {counted}\n{metrics}");

    // The story tells the chain: the retry's first line says why it was made.
    let story = app.story(payment["id"].as_str().unwrap()).await;
    let made = &story["timeline"][0];
    let told = made["detail"].as_str().unwrap_or_default();
    assert!(
        told.starts_with("retried at b after a soft decline (") && told.ends_with(") at a"),
        "{made}"
    );
    assert_eq!(story["other_attempts"][0]["id"], first["id"]);

    // The declined attempt is told as any decline is, and the retry's success carries the
    // chain: each event's payment as GET shows it.
    for (kind, payment) in [("payment.failed", first), ("payment.succeeded", second)] {
        let path = format!("/v1/events?type={kind}&limit=10");
        let events: Value = app
            .get_as(&app.merchant_key, &path)
            .await
            .json()
            .await
            .unwrap();
        let events = events["data"].as_array().unwrap();
        assert_eq!(events.len(), 1, "{kind}: {events:?}");
        let object = &events[0]["data"]["object"];
        assert_eq!(object["id"], payment["id"], "{kind}");
        assert_eq!(object["retry_of"], payment["retry_of"], "{kind}");
        assert_eq!(object["retry_reason"], payment["retry_reason"], "{kind}");
    }
}

/// A request whose answer came after its lease passed, and after the request that took its key
/// over had retried the declined attempt, must not answer the decline: the key is in flight on
/// the retry. What it reads to know: whether the attempt it answered was retried.
#[tokio::test]
async fn a_retried_attempt_is_known_as_retried() {
    let app = a_declines_softly().await;
    app.retries(switched_on()).await;
    let (_, chain) = app
        .checkout_chain("retried", &checkout_body("pm_card_visa"))
        .await;
    assert_eq!(chain.len(), 2, "{chain:?}");
    let mut conn = app.db.connect().await;
    let mut retried = Vec::new();
    for payment in &chain {
        let id = payment["id"].as_str().unwrap().parse().unwrap();
        let attempt = payorch::payments::attempts::find_attempt(&mut conn, None, id)
            .await
            .unwrap()
            .expect("the attempt");
        let known = payorch::payments::attempts::chain::retried(&mut conn, &attempt).await;
        retried.push(known.unwrap());
    }
    assert_eq!(
        retried,
        [true, false],
        "the declined one is retried, its retry is not"
    );
}

#[tokio::test]
async fn a_soft_decline_ends_the_payment_while_retries_are_off() {
    let app = a_declines_softly().await;
    let (paid, chain) = app
        .checkout_chain("off", &checkout_body("pm_card_visa"))
        .await;
    assert_eq!(paid["payment"]["status"], "failed", "{paid}");
    assert_eq!(paid["payment"]["failure_class"], "soft");
    assert_eq!(chain.len(), 1, "{chain:?}");
    assert_eq!(paid["order"]["status"], "awaiting_payment");
    let metrics = app.get("/metrics").await.text().await.unwrap();
    let counted = r#"payorch_payment_retries_refused_total{provider="a",reason="switch_off"} 1"#;
    assert!(metrics.contains(counted), "missing {counted}\n{metrics}");
}

#[tokio::test]
async fn a_hard_decline_is_never_tried_again() {
    let app = a_declines_softly().await;
    app.retries(switched_on()).await;
    let (paid, chain) = app
        .checkout_chain("hard", &checkout_body("pm_card_chargeDeclinedLostCard"))
        .await;
    assert_eq!(paid["payment"]["failure_class"], "hard", "{paid}");
    assert_eq!(chain.len(), 1, "{chain:?}");
}

#[tokio::test]
async fn an_unknown_outcome_is_never_tried_elsewhere() {
    let app = a_declines_softly().await;
    app.retries(switched_on()).await;
    // Charged at a, its answer lost: payorch learns the outcome by asking a (the answer
    // may be `pending` or, found at once, `succeeded`), never by trying b.
    let (paid, chain) = app
        .checkout_chain("lost", &checkout_body("pm_sandbox_lost_response"))
        .await;
    assert_ne!(paid["payment"]["status"], "failed", "{paid}");
    assert_eq!(paid["payment"]["provider"], "a");
    assert_eq!(paid["payment"]["retry_of"], Value::Null);
    assert_eq!(chain.len(), 1, "{chain:?}");
    let order_id = paid["order"]["id"].as_str().unwrap();
    assert_eq!(
        app.charged_on(order_id),
        (1, 0),
        "charged once, at a; nothing sent to b"
    );
}

#[tokio::test]
async fn max_attempts_of_one_makes_no_retry() {
    let app = a_declines_softly().await;
    app.retries(json!({"soft_declines": true, "max_attempts": 1}))
        .await;
    let (paid, chain) = app
        .checkout_chain("one", &checkout_body("pm_card_visa"))
        .await;
    assert_eq!(paid["payment"]["status"], "failed", "{paid}");
    assert_eq!(chain.len(), 1, "{chain:?}");
}

/// Both providers decline softly and the merchant allows three attempts: the chain is `a`
/// then `b` and ends there, attempts to spare, for want of a provider it has not tried. It
/// never takes the card back to `a` (the choice is `attempts::cascade`'s first provider of
/// the route the chain has not used; its unit tests hold it on a route re-ordered between
/// the chain's attempts, which a resumed request routed by success meets).
#[tokio::test]
async fn a_chain_never_returns_to_a_provider_it_tried() {
    let app = a_declines_softly().await;
    let mix = Mix::parse("approval=0,soft=1,hard=0,authentication_required=0").unwrap();
    app.sandbox_b().set_mix(Face::Adyen, mix);
    app.retries(json!({"soft_declines": true, "max_attempts": 3}))
        .await;
    let (paid, chain) = app
        .checkout_chain("both-soft", &checkout_body("pm_card_visa"))
        .await;
    assert_eq!(paid["payment"]["status"], "failed", "{paid}");
    let providers: Vec<&Value> = chain.iter().map(|p| &p["provider"]).collect();
    assert_eq!(providers, [&json!("a"), &json!("b")], "{chain:?}");
    assert_eq!(chain[1]["failure_class"], "soft");
    let order_id = paid["order"]["id"].as_str().unwrap();
    assert_eq!(app.charged_on(order_id), (0, 0));
    let metrics = app.get("/metrics").await.text().await.unwrap();
    let counted =
        r#"payorch_payment_retries_refused_total{provider="b",reason="no_next_provider"} 1"#;
    assert!(metrics.contains(counted), "missing {counted}\n{metrics}");
}

#[tokio::test]
async fn the_routing_refuses_max_attempts_outside_one_to_four() {
    let app = a_declines_softly().await;
    for bad in [0, 5] {
        let response = app
            .client
            .put(app.url(&format!("/v1/merchants/{}/routing", app.merchant_id)))
            .bearer_auth(&app.support_key)
            .json(&json!({"providers": ["a"], "retries": {"max_attempts": bad}}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 422, "max_attempts {bad}");
    }
}

#[tokio::test]
async fn a_card_declined_ten_times_in_a_day_is_not_tried_again() {
    let app = a_declines_softly().await;
    app.retries(switched_on()).await;
    // pm_card_chargeDeclined declines softly at both: each checkout declines twice (a, then
    // b) until the card has ten declines at this merchant.
    for n in 0..5 {
        let body = checkout_body("pm_card_chargeDeclined");
        let (_, chain) = app.checkout_chain(&format!("card-{n}"), &body).await;
        assert_eq!(chain.len(), 2, "checkout {n}: {chain:?}");
    }
    let body = checkout_body("pm_card_chargeDeclined");
    let (paid, chain) = app.checkout_chain("card-capped", &body).await;
    assert_eq!(paid["payment"]["provider"], "a");
    assert_eq!(chain.len(), 1, "the card's cap: {chain:?}");
    // Another card of the same merchant is not held back.
    let (_, chain) = app
        .checkout_chain("other-card", &checkout_body("pm_card_visa"))
        .await;
    assert_eq!(chain.len(), 2, "{chain:?}");
}

#[tokio::test]
async fn a_decline_asking_for_authentication_is_asked_again_with_three_d_secure() {
    let app = a_declines_softly().await;
    // The switch stays off: a step-up stays at the same provider.
    let body = json!({
        "amount": 4200, "currency": "eur",
        "payment_method": "pm_sandbox_decline_authentication_required",
        "return_url": "https://shop.example/thanks",
    });
    let (paid, chain) = app.checkout_chain("step-up", &body).await;
    assert_eq!(chain.len(), 2, "{chain:?}");
    let (first, second) = (&chain[0], &chain[1]);
    assert_eq!(first["failure_class"], "authentication_required");
    assert_eq!(second["provider"], "a", "the same provider");
    assert_eq!(second["retry_of"], first["id"]);
    assert_eq!(second["retry_reason"], "authentication_required");
    // Asked with 3-D Secure, the issuer challenges the payer.
    assert_eq!(paid["payment"]["id"], second["id"]);
    assert_eq!(paid["payment"]["status"], "pending", "{paid}");
    assert!(paid["payment"]["next_action"]["url"].is_string(), "{paid}");
    let mut conn = app.db.connect().await;
    let asked: Vec<String> = {
        use diesel::prelude::*;
        use diesel_async::RunQueryDsl;
        use payorch::db::schema::payment_attempts::dsl as a;
        a::payment_attempts
            .filter(a::order_id.eq(order_uuid(&paid["order"]["id"])))
            .order(a::created_at)
            .select(a::three_d_secure)
            .load(&mut conn)
            .await
            .unwrap()
    };
    assert_eq!(asked, ["automatic", "required"]);
}

#[tokio::test]
async fn no_step_up_without_a_payer_to_challenge() {
    let app = a_declines_softly().await;
    let body = checkout_body("pm_sandbox_decline_authentication_required");
    let (paid, chain) = app.checkout_chain("no-payer", &body).await;
    assert_eq!(paid["payment"]["status"], "failed", "{paid}");
    assert_eq!(chain.len(), 1, "{chain:?}");
}

/// The uuid of an order id as shown (`ord_…`).
fn order_uuid(id: &Value) -> uuid::Uuid {
    let id: payorch::ids::OrderId = id.as_str().unwrap().parse().unwrap();
    id.0
}

/// `a` declines half its charges softly and half asking for authentication, so some requests
/// meet a soft decline on the step-up that asked the payer for 3-D Secure: only a merchant that
/// allows it sends those on to `b`. Each draw is the attempt's own (its provider key), so 40
/// requests meet that path with a probability above 0.99999. A new merchant every three
/// requests keeps the card (one token) under its cap of declines, which counts per merchant.
#[tokio::test]
async fn a_soft_decline_after_three_d_secure_goes_elsewhere_only_when_allowed() {
    let app = a_declines_softly().await;
    let mix = Mix::parse("approval=0,soft=1,hard=0,authentication_required=1").unwrap();
    app.sandbox.set_mix(Face::Stripe, mix);
    for allowed in [false, true] {
        let retries = json!({"soft_declines": true, "after_three_d_secure": allowed,
                             "max_attempts": 3});
        let mut met = 0;
        let mut secret = String::new();
        for n in 0..40 {
            if n % 3 == 0 {
                let (merchant, key) = app.other_merchant().await;
                app.retries_of(merchant, retries.clone()).await;
                secret = key;
            }
            let body = json!({
                "amount": 4200, "currency": "eur", "payment_method": "pm_card_visa",
                "return_url": "https://shop.example/thanks",
            });
            let key = format!("after-3ds-{allowed}-{n}");
            let (_, chain) = app.checkout_chain_as(&secret, &key, &body).await;
            let stepped_up_then_soft = chain.len() >= 2
                && chain[0]["failure_class"] == "authentication_required"
                && chain[1]["retry_reason"] == "authentication_required"
                && chain[1]["failure_class"] == "soft";
            if !stepped_up_then_soft {
                continue;
            }
            met += 1;
            if allowed {
                assert_eq!(chain.len(), 3, "{chain:?}");
                assert_eq!(chain[2]["provider"], "b");
                assert_eq!(chain[2]["retry_reason"], "soft_decline");
            } else {
                assert_eq!(chain.len(), 2, "no retry after 3-D Secure: {chain:?}");
            }
        }
        assert!(met > 0, "no request met a soft decline after its step-up");
    }
}

/// The console's story of a retry names the payment it followed and says why, in its
/// summary and its timeline (docs/guides/support.md, "Support").
#[tokio::test]
async fn the_console_shows_the_chain() {
    let Some((_driver, client)) = crate::browser::browser().await else {
        return;
    };
    let app = a_declines_softly().await;
    app.retries(switched_on()).await;
    let (paid, chain) = app
        .checkout_chain("console-retry", &checkout_body("pm_card_visa"))
        .await;
    let (first, second) = (chain[0]["id"].as_str().unwrap(), &paid["payment"]);
    client.goto(&app.url("/console")).await.unwrap();
    let key = client.find(fantoccini::Locator::Id("key")).await.unwrap();
    key.send_keys(&app.support_key).await.unwrap();
    key.send_keys("\u{E007}").await.unwrap();
    let query = client.find(fantoccini::Locator::Id("query")).await.unwrap();
    query
        .send_keys(second["id"].as_str().unwrap())
        .await
        .unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    let summary = crate::browser::text_with(&client, "summary", first).await;
    assert!(
        summary.contains(&format!("{first} (soft_decline)")),
        "{summary}"
    );
    let timeline = crate::browser::text_with(&client, "timeline", "retried at b").await;
    assert!(timeline.contains("after a soft decline"), "{timeline}");
    crate::browser::screenshot(&client, "console-retry").await;
}
