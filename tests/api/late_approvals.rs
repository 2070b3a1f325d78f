//! Late approvals (docs/guides/declines.md, "Late approvals"): a provider that declined a
//! charge and then says it approved it after all. payorch had told the merchant nothing was
//! taken, so it gives the money back at once — a refund of a capture, a void of a hold — once
//! however often it is told, tells the merchant (`late_approval.*` events) and lists it for a
//! human; a crash between recording the news and asking for the undo is made good by the
//! reconciler. `pm_sandbox_late_approval` answers a soft decline, books the charge as approved
//! and sends its success webhook after `--late-approval-ms` (docs/guides/test-cards.md).

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{json, Value};

use payorch::providers::circuit::CircuitSettings;
use payorch_sandbox::{Face, Mix};

use crate::browser::{browser, screenshot, text_with};
use crate::helpers::{assert_refused_by, eventually, TestApp};
use crate::payments::checkout_body;

const LATE: &str = "pm_sandbox_late_approval";

/// The database's uuid of an API id (`pay_…`).
fn uuid_of(id: &str) -> String {
    id.split_once('_').map_or(id, |(_, hex)| hex).to_owned()
}

impl TestApp {
    /// The late approval of payment `id`, as its support story shows it (`null`: none).
    async fn late_approval_of(&self, id: &str) -> Value {
        let story: Value = self
            .support_get(&format!("/v1/support/payments/{id}"))
            .await
            .json()
            .await
            .unwrap();
        story["late_approval"].clone()
    }

    /// Waits until payment `id`'s late approval has left `undoing`; its view.
    async fn undone(&self, id: &str, what: &str) -> Value {
        let done = eventually(Duration::from_secs(20), || async {
            let late = self.late_approval_of(id).await;
            late.is_object() && late["status"] != "undoing"
        })
        .await;
        let late = self.late_approval_of(id).await;
        assert!(done, "{what}: the late approval was not undone: {late}");
        late
    }

    /// The sandbox's refunds of charge `charge`.
    fn refunds_of(&self, charge: &str) -> usize {
        self.sandbox
            .refunds()
            .iter()
            .filter(|r| r.payment_intent == charge)
            .count()
    }

    /// The sandbox ledger's status of charge `charge`.
    fn ledger_status(&self, charge: &str) -> String {
        self.sandbox
            .ledger()
            .iter()
            .find(|e| e.provider_id == charge)
            .map(|e| e.status.clone())
            .unwrap_or_default()
    }

    /// How many events of `event_type` the merchant was told.
    async fn told(&self, event_type: &str) -> i64 {
        self.db
            .count(&format!("merchant_events WHERE type = '{event_type}'"))
            .await
    }

    /// Whether payment `id`'s support story shows an event of `event_type` recorded with one
    /// of `outcomes`, within a few seconds.
    async fn told_of(&self, id: &str, event_type: &str, outcomes: &[&str]) -> bool {
        eventually(Duration::from_secs(10), || async {
            let story: Value = self
                .support_get(&format!("/v1/support/payments/{id}"))
                .await
                .json()
                .await
                .unwrap();
            story["webhook_events"].as_array().is_some_and(|events| {
                events.iter().any(|e| {
                    e["event_type"] == event_type && outcomes.iter().any(|o| e["outcome"] == *o)
                })
            })
        })
        .await
    }

    /// A checkout with `pm_sandbox_late_approval` at `provider`: its payment, which must be
    /// failed with a soft decline, and the charge id the provider named.
    async fn declined_late(&self, provider: &str, key: &str) -> (Value, String) {
        let payment = self.pay_through(provider, key, LATE).await;
        assert_eq!(payment["status"], "failed", "{payment}");
        assert_eq!(payment["failure_class"], "soft", "{payment}");
        let charge = payment["provider_payment_id"]
            .as_str()
            .unwrap_or_else(|| panic!("the decline named its charge: {payment}"))
            .to_owned();
        (payment, charge)
    }
}

#[tokio::test]
async fn a_late_approval_through_each_face_is_refunded_once_told_and_listed() {
    let app = TestApp::spawn().await;
    for (n, provider) in ["stripe", "adyen"].into_iter().enumerate() {
        let (payment, charge) = app
            .declined_late(provider, &format!("late-{provider}"))
            .await;
        let id = payment["id"].as_str().unwrap();
        let late = app.undone(id, provider).await;
        assert_eq!(late["status"], "refunded", "{provider}: {late}");
        assert_eq!(late["approved_as"], "succeeded", "{provider}: {late}");
        assert_eq!(late["source"], "webhook", "{provider}: {late}");
        assert_eq!(late["payment_id"], id, "{provider}: {late}");
        assert_eq!(late["provider_payment_id"], charge.as_str());
        assert_eq!(late["amount"], payment["amount"]);
        assert_eq!(app.refunds_of(&charge), 1, "{provider}: refunded once");
        // The payment stays what payorch told the merchant: failed.
        assert_eq!(app.payment(id).await["status"], "failed", "{provider}");
        let count = n as i64 + 1;
        assert_eq!(
            app.told("late_approval.detected").await,
            count,
            "{provider}"
        );
        assert_eq!(
            app.told("late_approval.refunded").await,
            count,
            "{provider}"
        );
        let listed: Value = app
            .support_get("/v1/support/needs-a-human")
            .await
            .json()
            .await
            .unwrap();
        let ids: Vec<&str> = listed["late_approvals"]
            .as_array()
            .expect("a list of late approvals")
            .iter()
            .filter_map(|l| l["payment_id"].as_str())
            .collect();
        assert!(ids.contains(&id), "{provider}: not listed: {listed}");
    }
    // Each event's object is the late approval, as the story shows it.
    let events: Value = app
        .get_as(&app.merchant_key, "/v1/events?type=late_approval.refunded")
        .await
        .json()
        .await
        .unwrap();
    let object = &events["data"][0]["data"]["object"];
    assert_eq!(object["object"], "late_approval", "{events}");
    assert_eq!(object["status"], "refunded", "{events}");
}

#[tokio::test]
async fn the_same_approval_told_twice_makes_one_row_and_one_undo() {
    let app = TestApp::spawn_config(|config| config.sandbox.webhook_duplicate_rate = 1.0).await;
    let (payment, charge) = app.declined_late("stripe", "late-twice").await;
    let id = payment["id"].as_str().unwrap();
    app.undone(id, "told twice").await;
    // Time for the second copy (and any resend) to have arrived and done nothing.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rows = app
        .db
        .count(&format!(
            "late_approvals WHERE attempt_id = '{}'",
            uuid_of(id)
        ))
        .await;
    assert_eq!(rows, 1);
    assert_eq!(app.refunds_of(&charge), 1, "refunded once");
    assert_eq!(app.told("late_approval.detected").await, 1);
}

#[tokio::test]
async fn a_crash_between_the_commit_and_the_undo_is_undone_by_the_reconciler_once() {
    let app = TestApp::spawn().await;
    // The approval is never told: the row stands in for one committed by a request that died
    // before it asked for the undo.
    app.sandbox.set_webhook_url(None);
    let (payment, charge) = app.declined_late("stripe", "late-crash").await;
    let id = payment["id"].as_str().unwrap();
    assert_eq!(
        app.ledger_status(&charge),
        "succeeded",
        "the ledger's truth"
    );
    let mut conn = app.db.connect().await;
    let insert = format!(
        "INSERT INTO late_approvals (merchant_id, id, attempt_id, order_id, provider,
             provider_payment_id, amount, currency, approved_as, source, next_check_at)
         SELECT merchant_id, gen_random_uuid(), id, order_id, provider, '{charge}', amount,
             currency, 'succeeded', 'webhook', now()
         FROM payment_attempts WHERE id = '{}'",
        uuid_of(id)
    );
    diesel_async::RunQueryDsl::execute(diesel::sql_query(insert), &mut conn)
        .await
        .expect("a late approval left undoing");
    let late = app.undone(id, "after a crash").await;
    assert_eq!(late["status"], "refunded", "{late}");
    // More rounds of the reconciler change nothing: the row is final.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(app.refunds_of(&charge), 1, "refunded once");
    assert_eq!(app.told("late_approval.refunded").await, 1);
}

#[tokio::test]
async fn a_held_late_approval_is_voided_not_refunded() {
    let app = TestApp::spawn().await;
    for (n, (provider, void_told_as)) in [
        ("stripe", "payment_intent.canceled"),
        ("adyen", "CANCELLATION"),
    ]
    .into_iter()
    .enumerate()
    {
        app.route_to(&[provider]).await;
        let body = json!({"amount": 4200, "currency": "eur", "description": "Teapot",
                          "payment_method": LATE, "capture_method": "manual"});
        let response = app.checkout(&format!("late-held-{provider}"), &body).await;
        assert_eq!(response.status(), 201);
        let payment = response.json::<Value>().await.unwrap()["payment"].clone();
        assert_eq!(payment["status"], "failed", "{provider}: {payment}");
        let id = payment["id"].as_str().unwrap();
        let charge = payment["provider_payment_id"].as_str().unwrap();
        let late = app.undone(id, provider).await;
        assert_eq!(late["status"], "voided", "{provider}: {late}");
        assert_eq!(late["approved_as"], "authorized", "{provider}: {late}");
        assert_eq!(app.ledger_status(charge), "canceled", "{provider}");
        assert_eq!(
            app.refunds_of(charge),
            0,
            "{provider}: a hold is never refunded"
        );
        assert_eq!(app.told("late_approval.voided").await, n as i64 + 1);
        // The provider's word of the void is no contradiction for a human to look at again:
        // Adyen's CANCELLATION is what ends the void it took (`received`), so it is applied;
        // Stripe's event follows a void already answered canceled (or, arriving first, ends
        // it).
        let told_void = app.told_of(id, void_told_as, &["applied", "stale"]).await;
        assert!(told_void, "{provider}: the void's word is not a conflict");
    }
}

#[tokio::test]
async fn the_database_keeps_a_late_approval_one_way_and_of_a_failed_attempt() {
    let app = TestApp::spawn().await;
    app.sandbox.set_webhook_url(None);
    let (payment, charge) = app.declined_late("stripe", "late-rules").await;
    let attempt = uuid_of(payment["id"].as_str().unwrap());
    let paid = app
        .pay_through("stripe", "late-rules-paid", "pm_card_visa")
        .await;
    let paid = uuid_of(paid["id"].as_str().unwrap());
    let mut conn = app.db.connect().await;
    let insert = |attempt: &str| {
        format!(
            "INSERT INTO late_approvals (merchant_id, id, attempt_id, order_id, provider,
                 provider_payment_id, amount, currency, approved_as, source, next_check_at)
             SELECT merchant_id, gen_random_uuid(), id, order_id, provider, '{charge}', amount,
                 currency, 'succeeded', 'webhook', now() + interval '1 hour'
             FROM payment_attempts WHERE id = '{attempt}'"
        )
    };
    assert_refused_by(&mut conn, &insert(&paid), "late_approvals_of_a_failure").await;
    diesel_async::RunQueryDsl::execute(diesel::sql_query(insert(&attempt)), &mut conn)
        .await
        .expect("a late approval of the failed attempt");
    assert_refused_by(&mut conn, &insert(&attempt), "late_approvals_once").await;
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(format!(
            "UPDATE late_approvals SET status = 'undo_failed' WHERE attempt_id = '{attempt}'"
        )),
        &mut conn,
    )
    .await
    .expect("undoing → undo_failed");
    assert_refused_by(
        &mut conn,
        &format!("UPDATE late_approvals SET status = 'undoing' WHERE attempt_id = '{attempt}'"),
        "late_approvals_final",
    )
    .await;
}

/// The case late approvals exist for: `a` declines softly, the payment is retried and paid at
/// `b`, then `a` says it approved after all. The order stays paid once, by `b`; `a`'s charge
/// is refunded.
#[tokio::test]
async fn a_late_approval_after_a_retry_elsewhere_leaves_the_order_paid_once() {
    let app = TestApp::spawn_config(|config| {
        config.two_providers = Some(CircuitSettings {
            threshold: 1000,
            cool_down: Duration::from_secs(60),
        });
        // `a`'s decline is told by webhook only after its answer was recorded, so the retry
        // is made (a decline's webhook first would end the payment without one).
        config.sandbox.webhook_delay_ms = 300;
        config.sandbox.late_approval_ms = 600;
    })
    .await;
    // Every ordinary card `a` charges is a late approval.
    let mix = Mix::parse("outage=1,outages=late_approval").unwrap();
    app.sandbox.set_mix(Face::Stripe, mix);
    let b = &app.second.as_ref().expect("two providers").sandbox;
    b.set_webhook_url(None);
    b.set_notification_url(None);
    let routing = json!({"providers": ["a", "b"], "retries": {"soft_declines": true}});
    let response = app
        .client
        .put(app.url(&format!("/v1/merchants/{}/routing", app.merchant_id)))
        .bearer_auth(&app.support_key)
        .json(&routing)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let response = app
        .checkout("late-after-retry", &checkout_body("pm_card_visa"))
        .await;
    assert_eq!(response.status(), 201);
    let paid: Value = response.json().await.unwrap();
    assert_eq!(paid["payment"]["status"], "succeeded", "{paid}");
    assert_eq!(paid["payment"]["provider"], "b", "{paid}");
    let order_id = paid["order"]["id"].as_str().unwrap();
    let first = paid["payment"]["retry_of"]
        .as_str()
        .unwrap_or_else(|| panic!("paid by a retry: {paid}"));
    let declined = app.payment(first).await;
    assert_eq!(declined["provider"], "a");
    let charge = declined["provider_payment_id"].as_str().unwrap().to_owned();

    let late = app.undone(first, "after a retry at b").await;
    assert_eq!(late["status"], "refunded", "{late}");
    assert_eq!(app.refunds_of(&charge), 1, "a's charge refunded once");
    let on_b = b
        .ledger()
        .iter()
        .filter(|e| e.order_id.as_deref() == Some(order_id) && e.is_charged())
        .count();
    assert_eq!(on_b, 1, "b charged once");
    assert_eq!(app.order(order_id).await["status"], "paid");
    assert_eq!(app.payment(first).await["status"], "failed");
}

/// The console lists the late approval among what needs a human, and the payment's summary
/// says what became of it.
#[tokio::test]
async fn the_console_shows_a_late_approval_to_confirm() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let (payment, _) = app.declined_late("stripe", "late-console").await;
    let id = payment["id"].as_str().unwrap();
    app.undone(id, "for the console").await;

    client.goto(&app.url("/console")).await.unwrap();
    let key = client.find(Locator::Id("key")).await.unwrap();
    key.send_keys(&app.support_key).await.unwrap();
    key.send_keys("\u{E007}").await.unwrap(); // Enter submits the form.
    let attention = text_with(&client, "attention-lists", id).await;
    assert!(
        attention.contains("Late approvals: confirm each with the provider (1)"),
        "{attention}"
    );
    screenshot(&client, "console-late-approval").await;
    let query = client.find(Locator::Id("query")).await.unwrap();
    query.send_keys("late-console").await.unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    let summary = text_with(&client, "summary", "Late approval").await;
    assert!(
        summary.contains("said succeeded") && summary.contains("refunded"),
        "{summary}"
    );
}

/// Two different events approving the same declined charge (two provider event ids, so
/// neither is dropped as a copy of the other), delivered at once: one late approval, and one
/// undo, sent under one provider key.
#[tokio::test]
async fn two_different_events_approving_one_charge_make_one_row_and_one_undo() {
    let app = TestApp::spawn().await;
    // The sandbox's own webhook would be a third event: only the two below tell.
    app.sandbox.set_webhook_url(None);
    let (payment, charge) = app.declined_late("stripe", "late-two-events").await;
    let id = payment["id"].as_str().unwrap();
    let first = crate::webhooks::event("succeeded", "evt_late_first", &payment);
    let second = crate::webhooks::event("succeeded", "evt_late_second", &payment);
    futures_util::future::join(app.deliver_signed(&first), app.deliver_signed(&second)).await;
    let late = app.undone(id, "told by two events").await;
    assert_eq!(late["status"], "refunded", "{late}");
    // Time for a second undo, had either event started one, to have been sent.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let attempt = uuid_of(id);
    let rows = app
        .db
        .count(&format!("late_approvals WHERE attempt_id = '{attempt}'"))
        .await;
    assert_eq!(rows, 1, "one late approval");
    // A second undo under a new key would be refused by the sandbox (nothing left to refund)
    // and so leave no second refund: the calls payorch made are what tells.
    let undo_calls = app
        .db
        .count(&format!(
            "provider_calls WHERE attempt_id = '{attempt}' AND detail LIKE 'asked by late approval%'"
        ))
        .await;
    assert_eq!(undo_calls, 1, "one undo asked");
    let keys: std::collections::BTreeSet<Option<String>> = app
        .sandbox
        .refunds()
        .into_iter()
        .filter(|r| r.payment_intent == charge)
        .map(|r| r.idempotency_key)
        .collect();
    assert_eq!(keys.len(), 1, "one provider key: {keys:?}");
    let key = keys.into_iter().next().flatten().unwrap_or_default();
    assert!(
        key.ends_with("_refund"),
        "the late approval's refund key: {key}"
    );
    assert_eq!(app.refunds_of(&charge), 1, "refunded once");
    assert_eq!(app.told("late_approval.detected").await, 1);
    // Both events are listed once, as the late approval, not again as webhook conflicts.
    let listed: Value = app
        .support_get("/v1/support/needs-a-human")
        .await
        .json()
        .await
        .unwrap();
    let conflicts = listed["webhook_conflicts"].as_array().expect("a list");
    assert!(
        !conflicts
            .iter()
            .any(|c| c.to_string().contains("evt_late_")),
        "{listed}"
    );
    assert_eq!(listed["late_approvals"][0]["payment_id"], id, "{listed}");
}

/// Adyen takes a refund (`received`) and tells its end by notification. A refund refused then
/// (`+sandbox_failure`: the REFUND notification says `success` false) ends the late approval
/// `undo_failed`, the money still taken, for a human; never `refunded` on the word `received`.
#[tokio::test]
async fn an_adyen_refund_refused_by_its_notification_ends_undo_failed() {
    let app = TestApp::spawn().await;
    let method = format!("{LATE}+sandbox_failure");
    let payment = app
        .pay_through("adyen", "late-refund-refused", &method)
        .await;
    assert_eq!(payment["status"], "failed", "{payment}");
    let id = payment["id"].as_str().unwrap();
    let late = app.undone(id, "a refund refused").await;
    assert_eq!(late["status"], "undo_failed", "{late}");
    assert!(
        late["detail"]
            .as_str()
            .is_some_and(|d| d.contains("the refund failed")),
        "{late}"
    );
    assert_eq!(app.told("late_approval.undo_failed").await, 1);
    assert_eq!(app.told("late_approval.refunded").await, 0);
    assert!(
        app.told_of(id, "REFUND", &["applied"]).await,
        "the REFUND notification ended it"
    );
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics
            .contains("payorch_late_approvals_total{provider=\"adyen\",result=\"undo_failed\"} 1"),
        "{metrics}"
    );
}

/// A refund Adyen took but has not done yet (`+sandbox_pending`: its REFUND notification
/// comes after `--processing-ms`) keeps the late approval `undoing`, saying so, until the
/// notification ends it `refunded`.
#[tokio::test]
async fn an_accepted_refund_ends_refunded_only_after_its_notification() {
    let app = TestApp::spawn_config(|config| config.sandbox.processing_ms = 2_000).await;
    let method = format!("{LATE}+sandbox_pending");
    let payment = app
        .pay_through("adyen", "late-refund-pending", &method)
        .await;
    let id = payment["id"].as_str().unwrap();
    let accepted = eventually(Duration::from_secs(10), || async {
        let late = app.late_approval_of(id).await;
        late["status"] == "undoing"
            && late["detail"]
                .as_str()
                .is_some_and(|d| d.contains("accepted the refund"))
    })
    .await;
    let late = app.late_approval_of(id).await;
    assert!(accepted, "taken, not done: still undoing: {late}");
    assert_eq!(app.told("late_approval.refunded").await, 0, "{late}");
    let late = app.undone(id, "a refund taken").await;
    assert_eq!(late["status"], "refunded", "{late}");
    assert!(
        app.told_of(id, "REFUND", &["applied"]).await,
        "the REFUND notification ended it"
    );
    assert_eq!(app.told("late_approval.refunded").await, 1);
}

/// What must not be missed is seen first: every provider's late-approval series is served at 0
/// from the start (so the first `undo_failed` raises `LateApprovalUndoFailed`), a late approval
/// left `undoing` past the alert age is counted for `LateApprovalsUndoing`, and support's
/// needs-a-human lists it before a newer one already undone, even on a page of one.
#[tokio::test]
async fn a_late_approval_still_undoing_is_counted_and_listed_before_newer_undone_ones() {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.alert_after = Duration::ZERO;
    })
    .await;
    for provider in ["stripe", "adyen"] {
        for result in ["detected", "voided", "refunded", "undo_failed"] {
            let series = format!(
                r#"payorch_late_approvals_total{{provider="{provider}",result="{result}"}}"#
            );
            assert_eq!(
                crate::monitoring::sample(&app, &series).await,
                Some(0.0),
                "{series}"
            );
        }
    }
    // Nothing tells the approvals: the rows below stand in for what their webhooks wrote.
    app.sandbox.set_webhook_url(None);
    let (stuck, stuck_charge) = app.declined_late("stripe", "late-stuck").await;
    let (undone, undone_charge) = app.declined_late("stripe", "late-undone").await;
    let mut conn = app.db.connect().await;
    let insert = |payment: &Value, charge: &str, age: &str| {
        format!(
            "INSERT INTO late_approvals (merchant_id, id, attempt_id, order_id, provider,
                 provider_payment_id, amount, currency, approved_as, source, next_check_at,
                 detected_at)
             SELECT merchant_id, gen_random_uuid(), id, order_id, provider, '{charge}', amount,
                 currency, 'succeeded', 'webhook', now() + interval '1 hour',
                 now() - interval '{age}'
             FROM payment_attempts WHERE id = '{}'",
            uuid_of(payment["id"].as_str().unwrap())
        )
    };
    // The older one still undoing (its next ask an hour away, so the reconciler leaves it);
    // the newer one refunded.
    for sql in [
        insert(&stuck, &stuck_charge, "1 hour"),
        insert(&undone, &undone_charge, "1 minute"),
        format!(
            "UPDATE late_approvals SET status = 'refunded' WHERE attempt_id = '{}'",
            uuid_of(undone["id"].as_str().unwrap())
        ),
    ] {
        diesel_async::RunQueryDsl::execute(diesel::sql_query(sql), &mut conn)
            .await
            .expect("a late approval written");
    }
    let listed: Value = app
        .support_get("/v1/support/needs-a-human?limit=1")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        listed["late_approvals"][0]["payment_id"], stuck["id"],
        "the one still undoing first: {listed}"
    );
    let counted = eventually(Duration::from_secs(10), || async {
        crate::monitoring::sample(&app, "payorch_late_approvals_undoing_overdue").await == Some(1.0)
    })
    .await;
    assert!(counted, "one late approval undoing past the alert age");
}

/// Stripe's word of a late approval's refund (`refund.failed`, whose `metadata[refund_id]` is
/// the late approval's id) finds its row though no refund of payorch's has that id: one still
/// `undoing` (its refund taken `pending`) ends `undo_failed`; a later word that contradicts
/// that end is a conflict for a human, and changes nothing.
#[tokio::test]
async fn a_stripe_refund_failed_ends_a_late_approval_still_undoing_undo_failed() {
    let app = TestApp::spawn().await;
    app.sandbox.set_webhook_url(None);
    let (payment, charge) = app
        .declined_late("stripe", "late-stripe-refund-failed")
        .await;
    let id = payment["id"].as_str().unwrap();
    // Its refund taken `pending` (the sandbox's Stripe face cannot be asked for one): the row
    // as that answer leaves it, not due to the reconciler for an hour.
    let late_id = uuid::Uuid::now_v7();
    let mut conn = app.db.connect().await;
    let insert = format!(
        "INSERT INTO late_approvals (merchant_id, id, attempt_id, order_id, provider,
             provider_payment_id, amount, currency, approved_as, source, provider_undo_id,
             next_check_at)
         SELECT merchant_id, '{late_id}', id, order_id, provider, '{charge}', amount,
             currency, 'succeeded', 'webhook', 're_late_pending', now() + interval '1 hour'
         FROM payment_attempts WHERE id = '{}'",
        uuid_of(id)
    );
    diesel_async::RunQueryDsl::execute(diesel::sql_query(insert), &mut conn)
        .await
        .expect("a late approval whose refund is pending");
    let refund_event = |event_id: &str, kind: &str, status: &str| {
        json!({
            "id": event_id, "object": "event", "type": kind,
            "created": chrono::Utc::now().timestamp(), "livemode": false,
            "data": {"object": {
                "id": "re_late_pending", "object": "refund", "amount": payment["amount"],
                "currency": payment["currency"], "status": status,
                "failure_reason": if status == "failed" { json!("expired_or_canceled_card") } else { Value::Null },
                "metadata": {"refund_id": late_id.to_string(), "reason": "late_approval"},
                "payment_intent": charge, "created": chrono::Utc::now().timestamp(),
            }},
        })
        .to_string()
    };
    app.deliver_signed(&refund_event(
        "evt_late_refund_failed",
        "refund.failed",
        "failed",
    ))
    .await;
    let late = app.undone(id, "a Stripe refund failed").await;
    assert_eq!(late["status"], "undo_failed", "{late}");
    assert_eq!(late["provider_undo_id"], "re_late_pending", "{late}");
    assert_eq!(app.told("late_approval.undo_failed").await, 1);
    assert!(
        app.told_of(id, "refund.failed", &["applied"]).await,
        "the refund's event ended it"
    );
    let later = refund_event("evt_late_refund_succeeded", "refund.updated", "succeeded");
    app.deliver_signed(&later).await;
    assert!(
        app.told_of(id, "refund.updated", &["conflict"]).await,
        "a word against the end is for a human"
    );
    assert_eq!(app.late_approval_of(id).await["status"], "undo_failed");
}

/// A void Adyen took (`received`) and then refused (its CANCELLATION says `success` false:
/// the payment was captured meanwhile, say) is followed by the refund at once, under the
/// refund's own key; here the sandbox refuses that refund too (it never captured the hold), so
/// the late approval ends `undo_failed`, for a human, and the reconciler asks nothing more.
#[tokio::test]
async fn an_adyen_void_refused_by_its_notification_is_followed_by_a_refund() {
    let app = TestApp::spawn().await;
    app.route_to(&["adyen"]).await;
    // Only the notifications below tell.
    app.sandbox.set_notification_url(None);
    let body = json!({"amount": 4200, "currency": "eur", "description": "Teapot",
                      "payment_method": LATE, "capture_method": "manual"});
    let response = app.checkout("late-void-refused", &body).await;
    let payment = response.json::<Value>().await.unwrap()["payment"].clone();
    assert_eq!(payment["status"], "failed", "{payment}");
    let id = payment["id"].as_str().unwrap();
    let charge = payment["provider_payment_id"].as_str().unwrap();
    let key = app.sandbox.adyen_hmac_key();
    let item = |code: &str, psp: &str, success: &str| {
        json!({
            "additionalData": {},
            "amount": {"value": 4200, "currency": "EUR"},
            "eventCode": code,
            "eventDate": "2026-11-27T10:00:00+01:00",
            "merchantAccountCode": payorch::wiring::SANDBOX_MERCHANT_ACCOUNT,
            "merchantReference": id,
            "originalReference": if code == "AUTHORISATION" { "" } else { charge },
            "pspReference": psp,
            "reason": if success == "true" { "" } else { "Payment was already captured" },
            "success": success,
        })
    };
    let approved = item("AUTHORISATION", charge, "true");
    assert_eq!(app.notify(&[approved], &key).await.status(), 200);
    let accepted = eventually(Duration::from_secs(10), || async {
        let late = app.late_approval_of(id).await;
        late["status"] == "undoing"
            && late["detail"]
                .as_str()
                .is_some_and(|d| d.contains("accepted the void"))
    })
    .await;
    assert!(accepted, "{}", app.late_approval_of(id).await);
    let refused = item("CANCELLATION", "CANCELREFUSED0001", "false");
    assert_eq!(app.notify(&[refused], &key).await.status(), 200);
    let late = app.undone(id, "a void refused").await;
    assert_eq!(late["status"], "undo_failed", "{late}");
    assert!(
        app.told_of(id, "CANCELLATION", &["applied"]).await,
        "the refusal moved the undo on"
    );
    let attempt = uuid_of(id);
    let asked = |operation: &str| {
        format!(
            "provider_calls WHERE attempt_id = '{attempt}' AND operation = '{operation}'
             AND detail LIKE 'asked by late approval%'"
        )
    };
    assert_eq!(app.db.count(&asked("cancel")).await, 1, "one void");
    assert_eq!(
        app.db.count(&asked("create_refund")).await,
        1,
        "then one refund"
    );
    assert_eq!(app.told("late_approval.undo_failed").await, 1);
}
