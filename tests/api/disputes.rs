//! Disputes (docs/guides/disputes.md): both providers' dispute events folded into one state
//! machine the database enforces, and the refund cap counting what chargebacks took, so money
//! comes back at most once — whatever order the news comes in, however often, and however
//! refunds race a chargeback.

use chrono::Utc;
use diesel::sql_types::{BigInt, Text};
use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{assert_refused_by, TestApp};
use crate::payments::Route;

/// A succeeded payment of 4200 eur through `provider`.
async fn paid(app: &TestApp, provider: &str, key: &str) -> Value {
    app.route_to(&[provider]).await;
    let (status, payment) = app.pay(Route::Checkout, key, "pm_card_visa").await;
    assert_eq!(
        (status, payment["status"].as_str()),
        (201, Some("succeeded")),
        "{payment}"
    );
    payment
}

/// When every test dispute's answer is due (2030-01-01).
const DUE_BY: i64 = 1_893_456_000;

/// A Stripe `charge.dispute.*` event about dispute `du` of intent `pi`, told `at`.
fn stripe_event(
    event_id: &str,
    kind: &str,
    du: &str,
    pi: &str,
    status: &str,
    amount: i64,
    at: i64,
) -> String {
    json!({
        "id": event_id,
        "object": "event",
        "type": kind,
        "created": at,
        "livemode": false,
        "data": {"object": {
            "id": du,
            "object": "dispute",
            "amount": amount,
            "currency": "eur",
            "status": status,
            "reason": "fraudulent",
            "payment_intent": pi,
            "charge": "ch_disputed",
            // A dispute's deadline is its own, the same in every event of it: another one
            // where the dispute stands would be applied as news (moves.rs).
            "evidence_details": {"due_by": DUE_BY},
            "is_charge_refundable": false,
            "created": at,
        }},
    })
    .to_string()
}

/// An Adyen dispute notification item: dispute `psp` of payment `payment`, told `at`.
fn adyen_item(code: &str, psp: &str, payment: &Value, at: &str, extra: Value) -> Value {
    let mut additional = json!({
        "chargebackReasonCode": "10.4",
        "defensePeriodEndsAt": "2030-01-01T10:00:00+01:00",
    });
    for (key, value) in extra.as_object().unwrap() {
        additional[key] = value.clone();
    }
    json!({
        "additionalData": additional,
        "amount": {"value": 4200, "currency": "EUR"},
        "eventCode": code,
        "eventDate": at,
        "merchantAccountCode": payorch::wiring::SANDBOX_MERCHANT_ACCOUNT,
        "merchantReference": payment["id"],
        "originalReference": payment["provider_payment_id"],
        "pspReference": psp,
        "reason": "Fraud",
        "success": "true",
    })
}

#[derive(Debug, PartialEq, diesel::QueryableByName)]
struct DisputeState {
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Text)]
    stage: String,
    #[diesel(sql_type = BigInt)]
    refunded_before: i64,
    #[diesel(sql_type = BigInt)]
    overlap: i64,
}

#[derive(Debug, diesel::QueryableByName)]
struct Held {
    #[diesel(sql_type = BigInt)]
    captured: i64,
    #[diesel(sql_type = BigInt)]
    refund_held: i64,
    #[diesel(sql_type = BigInt)]
    dispute_held: i64,
}

#[derive(diesel::QueryableByName)]
struct Word {
    #[diesel(sql_type = Text)]
    word: String,
}

/// The database's uuid of an API id (`pay_…`).
fn uuid_of(id: &Value) -> String {
    let id = id.as_str().unwrap();
    id.split_once('_').map_or(id, |(_, hex)| hex).to_owned()
}

impl TestApp {
    async fn dispute_state(&self, provider_dispute_id: &str) -> DisputeState {
        let mut conn = self.db.connect().await;
        diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(format!(
                "SELECT status::text, stage::text, refunded_before::bigint, overlap::bigint \
                 FROM disputes WHERE provider_dispute_id = '{provider_dispute_id}'"
            )),
            &mut conn,
        )
        .await
        .unwrap()
    }

    async fn money_held(&self, payment: &Value) -> Held {
        let mut conn = self.db.connect().await;
        diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(format!(
                "SELECT COALESCE(amount_captured, amount)::bigint AS captured, \
                 refund_held::bigint, dispute_held::bigint FROM payment_attempts \
                 WHERE id = '{}'",
                uuid_of(&payment["id"])
            )),
            &mut conn,
        )
        .await
        .unwrap()
    }

    /// What the recorded provider event `event_id` did.
    async fn outcome_of(&self, event_id: &str) -> String {
        let mut conn = self.db.connect().await;
        let word: Word = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(format!(
                "SELECT outcome AS word FROM provider_webhooks \
                 WHERE provider_event_id = '{event_id}'"
            )),
            &mut conn,
        )
        .await
        .unwrap();
        word.word
    }

    /// Delivers one Adyen dispute item, signed; what it did.
    async fn notify_dispute(&self, item: Value) -> String {
        let key = self.sandbox.adyen_hmac_key();
        let answer = self.notify(std::slice::from_ref(&item), key.expose()).await;
        assert_eq!(answer.status(), 200);
        let event_id = format!(
            "{}:{}:{}",
            item["pspReference"].as_str().unwrap(),
            item["eventCode"].as_str().unwrap(),
            item["success"].as_str().unwrap()
        );
        self.outcome_of(&event_id).await
    }

    async fn disputes_told(&self, event_type: &str) -> i64 {
        self.db
            .count(&format!("merchant_events WHERE type = '{event_type}'"))
            .await
    }
}

#[tokio::test]
async fn a_stripe_chargeback_takes_the_money_from_the_refund_cap_and_a_win_gives_it_back() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "stripe", "stripe-dispute").await;
    let id = payment["id"].as_str().unwrap();
    let pi = payment["provider_payment_id"].as_str().unwrap();
    let t = Utc::now().timestamp();
    let event = |n: u32, kind: &str, status: &str| {
        stripe_event(
            &format!("evt_dp_{n}"),
            kind,
            "du_1",
            pi,
            status,
            4200,
            t + i64::from(n),
        )
    };

    let opened = app
        .deliver_signed(&event(1, "charge.dispute.created", "needs_response"))
        .await;
    assert_eq!(opened["outcome"], "applied", "{opened}");
    let state = app.dispute_state("du_1").await;
    assert_eq!(
        (state.status.as_str(), state.stage.as_str()),
        ("needs_response", "chargeback")
    );
    assert_eq!((state.refunded_before, state.overlap), (0, 0));
    assert_eq!(app.money_held(&payment).await.dispute_held, 4200);
    // The chargeback returned it all: no refund may return any of it again.
    let refused = app
        .refund(id, "after-chargeback", json!({"amount": 1}))
        .await;
    assert_eq!(refused.status(), 409);
    // A second copy changes nothing; the funds_withdrawn event says the same: no move.
    let again = app
        .deliver_signed(&event(1, "charge.dispute.created", "needs_response"))
        .await;
    assert_eq!(again["duplicate"], true, "{again}");
    let same = app
        .deliver_signed(&event(
            2,
            "charge.dispute.funds_withdrawn",
            "needs_response",
        ))
        .await;
    assert_eq!(same["outcome"], "stale", "{same}");

    let review = app
        .deliver_signed(&event(3, "charge.dispute.updated", "under_review"))
        .await;
    assert_eq!(review["outcome"], "applied", "{review}");
    assert_eq!(app.money_held(&payment).await.dispute_held, 4200);
    // News older than the review, delivered after it: stale.
    let older = app
        .deliver_signed(&stripe_event(
            "evt_dp_old",
            "charge.dispute.updated",
            "du_1",
            pi,
            "needs_response",
            4200,
            t,
        ))
        .await;
    assert_eq!(older["outcome"], "stale", "{older}");

    let won = app
        .deliver_signed(&event(4, "charge.dispute.closed", "won"))
        .await;
    assert_eq!(won["outcome"], "applied", "{won}");
    assert_eq!(app.money_held(&payment).await.dispute_held, 0);
    // Won at the chargeback: Stripe has no second chargeback, so a `lost` now is refused.
    let lost = app
        .deliver_signed(&event(5, "charge.dispute.updated", "lost"))
        .await;
    assert_eq!(lost["outcome"], "stale", "{lost}");
    assert_eq!(app.dispute_state("du_1").await.status, "won");
    // The reversal gave the amount back to the cap.
    let refund = app.refunded(id, "after-win", json!({"amount": 4200})).await;
    assert_eq!(refund["amount"], 4200);

    assert_eq!(app.disputes_told("dispute.created").await, 1);
    assert_eq!(app.disputes_told("dispute.updated").await, 1);
    assert_eq!(app.disputes_told("dispute.closed").await, 1);
    // A dispute of a payment payorch never made is recorded, and names none.
    let stranger = app
        .deliver_signed(&stripe_event(
            "evt_dp_x",
            "charge.dispute.created",
            "du_x",
            "pi_unknown",
            "needs_response",
            100,
            t,
        ))
        .await;
    assert_eq!(stranger["outcome"], "unknown_attempt", "{stranger}");
}

#[tokio::test]
async fn a_refund_past_what_a_partial_chargeback_left_is_refused_and_names_what_is_left() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "stripe", "partial-dispute").await;
    let id = payment["id"].as_str().unwrap();
    let pi = payment["provider_payment_id"].as_str().unwrap();
    let t = Utc::now().timestamp();
    let opened = stripe_event(
        "evt_pd_1",
        "charge.dispute.created",
        "du_pd",
        pi,
        "needs_response",
        1000,
        t,
    );
    assert_eq!(app.deliver_signed(&opened).await["outcome"], "applied");
    let refused = app.refund(id, "past-it", json!({"amount": 3201})).await;
    assert_eq!(refused.status(), 409);
    let problem: Value = refused.json().await.unwrap();
    assert_eq!(problem["code"], "refund_exceeds_payment", "{problem}");
    assert_eq!(problem["amount_refundable"], 3200, "{problem}");
    // What is left without an amount is what the chargeback left.
    let rest = app.refunded(id, "the-rest", json!({})).await;
    assert_eq!(rest["amount"], 3200, "{rest}");
    let held = app.money_held(&payment).await;
    assert_eq!((held.refund_held, held.dispute_held), (3200, 1000));
}

#[tokio::test]
async fn a_stripe_inquiry_moves_one_way_and_closes_for_good() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "stripe", "stripe-inquiry").await;
    let pi = payment["provider_payment_id"].as_str().unwrap();
    let t = Utc::now().timestamp();
    let deliver = |n: i64, status: &'static str| {
        let body = stripe_event(
            &format!("evt_iq_{n}"),
            "charge.dispute.updated",
            "du_iq",
            pi,
            status,
            4200,
            t + n,
        );
        let app = &app;
        async move {
            app.deliver_signed(&body).await["outcome"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    assert_eq!(deliver(1, "warning_needs_response").await, "applied");
    // An inquiry takes nothing.
    assert_eq!(app.money_held(&payment).await.dispute_held, 0);
    assert_eq!(deliver(2, "warning_under_review").await, "applied");
    assert_eq!(deliver(3, "warning_needs_response").await, "stale");
    assert_eq!(deliver(4, "warning_closed").await, "applied");
    // Closed for good: a chargeback comes as a new dispute, never this one reopened.
    assert_eq!(deliver(5, "needs_response").await, "stale");
    assert_eq!(app.dispute_state("du_iq").await.status, "warning_closed");
    assert_eq!(app.money_held(&payment).await.dispute_held, 0);
}

#[tokio::test]
async fn adyens_chargeback_notifications_fold_into_one_dispute_through_every_stage() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "adyen", "adyen-dispute").await;
    let item = |code: &str, minute: u32, extra: Value| {
        adyen_item(
            code,
            "DSP1",
            &payment,
            &format!("2030-01-01T10:{minute:02}:00+00:00"),
            extra,
        )
    };
    let none = || json!({});
    let state = || async { app.dispute_state("DSP1").await };

    assert_eq!(
        app.notify_dispute(item("NOTIFICATION_OF_CHARGEBACK", 1, none()))
            .await,
        "applied"
    );
    let now = state().await;
    assert_eq!(
        (now.status.as_str(), now.stage.as_str()),
        ("warning_needs_response", "inquiry")
    );
    assert_eq!(app.money_held(&payment).await.dispute_held, 0);

    assert_eq!(
        app.notify_dispute(item("CHARGEBACK", 2, none())).await,
        "applied"
    );
    let now = state().await;
    assert_eq!(
        (now.status.as_str(), now.stage.as_str()),
        ("needs_response", "chargeback")
    );
    assert_eq!(app.money_held(&payment).await.dispute_held, 4200);
    // An inquiry's answer after the chargeback: refused, nothing moves.
    assert_eq!(
        app.notify_dispute(item("INFORMATION_SUPPLIED", 3, none()))
            .await,
        "stale"
    );

    assert_eq!(
        app.notify_dispute(item("CHARGEBACK_REVERSED", 4, none()))
            .await,
        "applied"
    );
    assert_eq!(state().await.status, "won");
    assert_eq!(app.money_held(&payment).await.dispute_held, 0);

    assert_eq!(
        app.notify_dispute(item("SECOND_CHARGEBACK", 5, none()))
            .await,
        "applied"
    );
    let now = state().await;
    assert_eq!(
        (now.status.as_str(), now.stage.as_str()),
        ("lost", "second_chargeback")
    );
    assert_eq!(app.money_held(&payment).await.dispute_held, 4200);

    assert_eq!(
        app.notify_dispute(item("PREARBITRATION_WON", 6, none()))
            .await,
        "applied"
    );
    let now = state().await;
    assert_eq!(
        (now.status.as_str(), now.stage.as_str()),
        ("won", "pre_arbitration")
    );
    assert_eq!(app.money_held(&payment).await.dispute_held, 0);
    // Won at pre-arbitration: only a second chargeback could make it lost, and that stage is past.
    assert_eq!(
        app.notify_dispute(item("PREARBITRATION_LOST", 7, none()))
            .await,
        "stale"
    );
    assert_eq!(state().await.status, "won");
    // A second copy of a notification is recorded once.
    let before = app.db.count("provider_webhooks").await;
    assert_eq!(
        app.notify_dispute(item("CHARGEBACK", 2, none())).await,
        "applied"
    );
    assert_eq!(app.db.count("provider_webhooks").await, before);

    // A chargeback Adyen says cannot be defended is lost at once.
    let other = paid(&app, "adyen", "adyen-undefendable").await;
    let lost = adyen_item(
        "CHARGEBACK",
        "DSP2",
        &other,
        "2030-01-01T11:00:00+00:00",
        json!({"defendable": "false"}),
    );
    assert_eq!(app.notify_dispute(lost).await, "applied");
    assert_eq!(app.dispute_state("DSP2").await.status, "lost");
    assert_eq!(app.money_held(&other).await.dispute_held, 4200);

    // A dispute of no payment payorch made.
    let mut stranger = adyen_item(
        "CHARGEBACK",
        "DSP3",
        &other,
        "2030-01-01T11:00:00+00:00",
        none(),
    );
    stranger["originalReference"] = json!("NOSUCHPAYMENT");
    stranger["merchantReference"] = json!("not-a-payment");
    assert_eq!(app.notify_dispute(stranger).await, "unknown_attempt");
    assert_eq!(app.disputes_told("dispute.closed").await, 3);
}

#[tokio::test]
async fn a_chargeback_on_a_refunded_payment_is_flagged_with_what_it_returns_twice() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "stripe", "refunded-then-disputed").await;
    let id = payment["id"].as_str().unwrap();
    let pi = payment["provider_payment_id"].as_str().unwrap();
    app.refunded(id, "first-refund", json!({"amount": 1000}))
        .await;
    let t = Utc::now().timestamp();
    let opened = app
        .deliver_signed(&stripe_event(
            "evt_ov_1",
            "charge.dispute.created",
            "du_ov",
            pi,
            "needs_response",
            4200,
            t,
        ))
        .await;
    assert_eq!(opened["outcome"], "applied", "{opened}");
    let state = app.dispute_state("du_ov").await;
    assert_eq!((state.refunded_before, state.overlap), (1000, 1000));
    // Nothing is left to refund, and the merchant is told what to answer.
    assert_eq!(
        app.refund(id, "more", json!({"amount": 1})).await.status(),
        409
    );
    let mut conn = app.db.connect().await;
    let snapshot: Word = diesel_async::RunQueryDsl::get_result(
        diesel::sql_query(
            "SELECT snapshot::text AS word FROM merchant_events WHERE type = 'dispute.created'",
        ),
        &mut conn,
    )
    .await
    .unwrap();
    let snapshot: Value = serde_json::from_str(&snapshot.word).unwrap();
    assert_eq!(snapshot["dispute"]["overlap"], 1000, "{snapshot}");
    let events: Value = app
        .get_as(&app.merchant_key, "/v1/events?type=dispute.created")
        .await
        .json()
        .await
        .unwrap();
    let object = &events["data"][0]["data"]["object"];
    assert_eq!(object["object"], "dispute", "{events}");
    assert_eq!(object["overlap"], 1000, "{events}");
    assert!(
        object["advice"]
            .as_str()
            .unwrap()
            .contains("refund as evidence"),
        "{object}"
    );
}

#[tokio::test]
async fn thirty_concurrent_refunds_racing_a_chargeback_never_return_more_than_was_captured() {
    let app = TestApp::spawn().await;
    for round in 0..3 {
        let payment = paid(&app, "stripe", &format!("race-{round}")).await;
        let id = payment["id"].as_str().unwrap().to_owned();
        let pi = payment["provider_payment_id"].as_str().unwrap().to_owned();
        let du = format!("du_race_{round}");
        let chargeback = stripe_event(
            &format!("evt_race_{round}"),
            "charge.dispute.created",
            &du,
            &pi,
            "needs_response",
            4200,
            Utc::now().timestamp(),
        );
        // 30 refunds of 500 (15,000 asked of 4,200) and the chargeback, all at once: the
        // chargeback goes out first in the first round, among the refunds in the second.
        // In the last round one refund is made first, so the chargeback surely comes on
        // refunded money and its overlap is flagged.
        let first = if round == 2 {
            let refund = app
                .refund(&id, "race-2-first", json!({"amount": 500}))
                .await;
            assert_eq!(refund.status(), 201);
            1
        } else {
            0
        };
        let refunds = (first..30).map(|i| {
            let (app, id) = (&app, id.clone());
            async move {
                // Spread over about 90 ms, so the chargeback lands among them.
                tokio::time::sleep(std::time::Duration::from_millis(3 * i as u64)).await;
                let response = app
                    .refund(&id, &format!("race-{round}-{i}"), json!({"amount": 500}))
                    .await;
                response.status().as_u16()
            }
        });
        let dispute = async {
            tokio::time::sleep(std::time::Duration::from_millis([0, 30, 0][round])).await;
            app.deliver_signed(&chargeback).await
        };
        let (answers, told) = tokio::join!(join_all(refunds), dispute);
        assert_eq!(told["outcome"], "applied", "{told}");
        assert!(
            answers.iter().all(|s| *s == 201 || *s == 409),
            "{answers:?}"
        );
        let made = answers.iter().filter(|s| **s == 201).count() as i64 + first;

        let held = app.money_held(&payment).await;
        let state = app.dispute_state(&du).await;
        assert_eq!(held.dispute_held, 4200);
        assert_eq!(held.refund_held, made * 500, "round {round}");
        assert!(held.refund_held <= held.captured, "round {round}");
        // What the refunds held when the chargeback came is flagged, and only that.
        assert_eq!(state.refunded_before, held.refund_held, "round {round}");
        assert_eq!(
            state.overlap,
            (held.refund_held + held.dispute_held - held.captured).max(0),
            "round {round}"
        );
        // Beyond what was flagged, nothing returned twice: the refunds after the
        // chargeback were all refused.
        assert!(
            held.refund_held + held.dispute_held - state.overlap <= held.captured,
            "round {round}: {held:?} {state:?}"
        );
        assert_eq!(
            app.refunded_by_provider(&payment),
            held.refund_held,
            "round {round}"
        );
        if round == 2 {
            assert!(state.overlap >= 500, "round {round}: {state:?}");
        }
        println!(
            "race round {round}: {made} refunds made, {} before the chargeback, overlap {}",
            state.refunded_before / 500,
            state.overlap
        );
    }
}

#[tokio::test]
async fn hand_written_sql_cannot_move_a_dispute_back_or_set_what_disputes_hold() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "stripe", "sql-dispute").await;
    let pi = payment["provider_payment_id"].as_str().unwrap();
    let t = Utc::now().timestamp();
    let won = stripe_event(
        "evt_sql_1",
        "charge.dispute.closed",
        "du_sql",
        pi,
        "won",
        4200,
        t,
    );
    assert_eq!(app.deliver_signed(&won).await["outcome"], "applied");
    let mut conn = app.db.connect().await;
    for (sql, constraint) in [
        ("UPDATE disputes SET status = 'needs_response' WHERE provider_dispute_id = 'du_sql'", "disputes_status_transition"),
        ("UPDATE disputes SET status = 'lost' WHERE provider_dispute_id = 'du_sql'", "disputes_status_transition"),
        ("UPDATE disputes SET stage = 'inquiry' WHERE provider_dispute_id = 'du_sql'", "disputes_status_transition"),
        ("UPDATE disputes SET provider_payment_id = 'pi_other' WHERE provider_dispute_id = 'du_sql'", "disputes_immutable"),
        ("UPDATE disputes SET closed_at = NULL WHERE provider_dispute_id = 'du_sql'", "disputes_closed_is_finished"),
        ("UPDATE disputes SET status = 'bogus' WHERE provider_dispute_id = 'du_sql'", "dispute_status_known"),
    ] {
        assert_refused_by(&mut conn, sql, constraint).await;
    }
    let payment_row = uuid_of(&payment["id"]);
    assert_refused_by(
        &mut conn,
        &format!("UPDATE payment_attempts SET dispute_held = 1 WHERE id = '{payment_row}'"),
        "payment_attempts_dispute_held_by_disputes",
    )
    .await;
    // Lost again at a second chargeback is a move the database allows, and holds the money.
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(
            "UPDATE disputes SET status = 'lost', stage = 'second_chargeback' \
             WHERE provider_dispute_id = 'du_sql'",
        ),
        &mut conn,
    )
    .await
    .unwrap();
    assert_eq!(app.money_held(&payment).await.dispute_held, 4200);
}

/// The moves of docs/guides/disputes.md, "Statuses", within one stage (Stripe's: its warnings
/// are inquiries, the rest chargebacks).
const ALLOWED: [(&str, &str); 16] = [
    ("warning_needs_response", "warning_under_review"),
    ("warning_needs_response", "warning_closed"),
    ("warning_needs_response", "needs_response"),
    ("warning_needs_response", "under_review"),
    ("warning_needs_response", "won"),
    ("warning_needs_response", "lost"),
    ("warning_under_review", "warning_closed"),
    ("warning_under_review", "needs_response"),
    ("warning_under_review", "under_review"),
    ("warning_under_review", "won"),
    ("warning_under_review", "lost"),
    ("needs_response", "under_review"),
    ("needs_response", "won"),
    ("needs_response", "lost"),
    ("under_review", "won"),
    ("under_review", "lost"),
];

#[tokio::test]
async fn every_move_between_two_statuses_is_applied_or_refused_as_documented_by_webhook_and_by_sql()
{
    let app = TestApp::spawn().await;
    let payment = paid(&app, "stripe", "every-move").await;
    let pi = payment["provider_payment_id"].as_str().unwrap();
    let statuses = [
        "warning_needs_response",
        "warning_under_review",
        "warning_closed",
        "needs_response",
        "under_review",
        "won",
        "lost",
    ];
    let stage = |status: &str| {
        if status.starts_with("warning") {
            "inquiry"
        } else {
            "chargeback"
        }
    };
    let t = Utc::now().timestamp();
    let mut conn = app.db.connect().await;
    let mut checked = 0;
    for from in statuses {
        for to in statuses {
            let allowed = ALLOWED.contains(&(from, to));
            // Through Stripe's webhooks: opened in `from`, then told `to`.
            let du = format!("du_{from}_{to}");
            let open = stripe_event(
                &format!("evt_{du}_1"),
                "charge.dispute.created",
                &du,
                pi,
                from,
                100,
                t,
            );
            assert_eq!(app.deliver_signed(&open).await["outcome"], "applied");
            let news = stripe_event(
                &format!("evt_{du}_2"),
                "charge.dispute.updated",
                &du,
                pi,
                to,
                100,
                t + 1,
            );
            let outcome = app.deliver_signed(&news).await;
            let expected = if allowed { "applied" } else { "stale" };
            assert_eq!(outcome["outcome"], expected, "{from} -> {to}: {outcome}");
            let now = app.dispute_state(&du).await;
            assert_eq!(
                now.status,
                if allowed { to } else { from },
                "{from} -> {to}"
            );
            // By hand: the database's guard says the same.
            let du = format!("du_sql_{from}_{to}");
            let open = stripe_event(
                &format!("evt_{du}"),
                "charge.dispute.created",
                &du,
                pi,
                from,
                100,
                t,
            );
            assert_eq!(app.deliver_signed(&open).await["outcome"], "applied");
            let sql = format!(
                "UPDATE disputes SET status = '{to}', stage = '{}' WHERE provider_dispute_id = '{du}'",
                stage(to)
            );
            // Writing what it already is changes nothing, and the guard lets it be.
            if allowed || from == to {
                diesel_async::RunQueryDsl::execute(diesel::sql_query(&sql), &mut conn)
                    .await
                    .unwrap_or_else(|e| panic!("{from} -> {to} refused: {e}"));
            } else {
                assert_refused_by(&mut conn, &sql, "disputes_status_transition").await;
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 49);
    // What the open disputes hold is what their statuses say, whatever moved them.
    let held: Word = diesel_async::RunQueryDsl::get_result(
        diesel::sql_query(
            "SELECT (a.dispute_held = (SELECT COALESCE(sum(d.amount), 0) FROM disputes d \
             WHERE d.attempt_id = a.id AND d.status IN ('needs_response', 'under_review', 'lost')))::text \
             AS word FROM payment_attempts a WHERE a.provider_payment_id = '".to_owned()
                + pi
                + "'",
        ),
        &mut conn,
    )
    .await
    .unwrap();
    assert_eq!(held.word, "true");
}

#[tokio::test]
async fn first_reports_of_one_dispute_arriving_together_hold_its_amount_once() {
    let app = TestApp::spawn().await;
    // Stripe sends `charge.dispute.created` and `.funds_withdrawn` together: two first
    // reports, then several, of one dispute, each its own event, all at once.
    for (round, copies) in [(0, 2), (1, 6)] {
        let payment = paid(&app, "stripe", &format!("together-{round}")).await;
        let pi = payment["provider_payment_id"].as_str().unwrap().to_owned();
        let du = format!("du_together_{round}");
        let t = Utc::now().timestamp();
        let kinds = ["charge.dispute.created", "charge.dispute.funds_withdrawn"];
        let told = join_all((0..copies).map(|i| {
            let body = stripe_event(
                &format!("evt_together_{round}_{i}"),
                kinds[i % 2],
                &du,
                &pi,
                "needs_response",
                4200,
                t,
            );
            let app = &app;
            async move { app.deliver_signed(&body).await["outcome"].clone() }
        }))
        .await;
        let applied = told.iter().filter(|o| *o == "applied").count();
        assert_eq!(applied, 1, "round {round}: {told:?}");
        assert!(
            told.iter().all(|o| o == "applied" || o == "stale"),
            "{told:?}"
        );
        assert_eq!(
            app.money_held(&payment).await.dispute_held,
            4200,
            "round {round}"
        );
        assert_eq!(app.disputes_told("dispute.created").await, round + 1);
    }

    // The database alone holds it, whoever writes: two sessions inserting the same first
    // report, the second waiting on the first's row, keep one dispute holding 4200 once.
    let payment = paid(&app, "stripe", "together-sql").await;
    let insert = format!(
        "INSERT INTO disputes (merchant_id, id, attempt_id, order_id, provider, \
         provider_dispute_id, provider_payment_id, status, stage, amount, currency, reason, \
         provider_reason, provider_updated_at) \
         SELECT merchant_id, gen_random_uuid(), id, order_id, provider, 'du_sql_twice', \
         provider_payment_id, 'needs_response', 'chargeback', 4200, currency, 'fraudulent', \
         'fraudulent', now() FROM payment_attempts WHERE id = '{}' \
         ON CONFLICT (provider, provider_dispute_id) DO NOTHING",
        uuid_of(&payment["id"])
    );
    let (mut first, mut second) = (app.db.connect().await, app.db.connect().await);
    use diesel_async::SimpleAsyncConnection;
    first.batch_execute("BEGIN").await.unwrap();
    first.batch_execute(&insert).await.unwrap();
    let waiting = async {
        second.batch_execute(&insert).await.unwrap();
    };
    let commit = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        first.batch_execute("COMMIT").await.unwrap();
    };
    tokio::join!(waiting, commit);
    assert_eq!(
        app.db
            .count("disputes WHERE provider_dispute_id = 'du_sql_twice'")
            .await,
        1
    );
    assert_eq!(app.money_held(&payment).await.dispute_held, 4200);
}

#[tokio::test]
async fn adyen_notifications_without_original_reference_move_the_dispute_their_psp_reference_names()
{
    let app = TestApp::spawn().await;
    let payment = paid(&app, "adyen", "adyen-no-original").await;
    let id = payment["id"].as_str().unwrap();
    // As Adyen's own examples of these codes: no `originalReference`.
    let bare = |code: &str, psp: &str, minute: u32| {
        let mut item = adyen_item(
            code,
            psp,
            &payment,
            &format!("2030-01-01T10:{minute:02}:00+00:00"),
            json!({}),
        );
        item.as_object_mut().unwrap().remove("originalReference");
        item
    };
    let with_it = adyen_item(
        "CHARGEBACK",
        "DSPNOREF",
        &payment,
        "2030-01-01T10:01:00+00:00",
        json!({}),
    );
    assert_eq!(app.notify_dispute(with_it).await, "applied");
    assert_eq!(
        app.notify_dispute(bare("CHARGEBACK_REVERSED", "DSPNOREF", 2))
            .await,
        "applied"
    );
    assert_eq!(app.dispute_state("DSPNOREF").await.status, "won");
    assert_eq!(app.money_held(&payment).await.dispute_held, 0);
    // The second chargeback takes the money again; dropped, it would leave the dispute won
    // with nothing held, and a refund would return the money a second time.
    assert_eq!(
        app.notify_dispute(bare("SECOND_CHARGEBACK", "DSPNOREF", 3))
            .await,
        "applied"
    );
    let state = app.dispute_state("DSPNOREF").await;
    assert_eq!(
        (state.status.as_str(), state.stage.as_str()),
        ("lost", "second_chargeback")
    );
    assert_eq!(app.money_held(&payment).await.dispute_held, 4200);
    let refused = app.refund(id, "after-second", json!({"amount": 1})).await;
    assert_eq!(refused.status(), 409);

    // A first report without it is of the payment its `merchantReference` names, kept under
    // the payment's own pspReference.
    let other = paid(&app, "adyen", "adyen-no-original-2").await;
    let mut first = adyen_item(
        "CHARGEBACK",
        "DSPNOREF2",
        &other,
        "2030-01-01T10:05:00+00:00",
        json!({}),
    );
    first.as_object_mut().unwrap().remove("originalReference");
    assert_eq!(app.notify_dispute(first).await, "applied");
    assert_eq!(app.money_held(&other).await.dispute_held, 4200);
    assert_eq!(
        app.db
            .count(&format!(
                "disputes WHERE provider_dispute_id = 'DSPNOREF2' AND provider_payment_id = '{}'",
                other["provider_payment_id"].as_str().unwrap()
            ))
            .await,
        1
    );
}

#[tokio::test]
async fn a_dispute_holding_again_is_flagged_with_what_was_refunded_meanwhile() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "adyen", "adyen-holds-again").await;
    let id = payment["id"].as_str().unwrap();
    let item = |code: &str, minute: u32| {
        adyen_item(
            code,
            "DSPAGAIN",
            &payment,
            &format!("2030-01-01T10:{minute:02}:00+00:00"),
            json!({}),
        )
    };
    assert_eq!(app.notify_dispute(item("CHARGEBACK", 1)).await, "applied");
    let opened = app.dispute_state("DSPAGAIN").await;
    assert_eq!((opened.refunded_before, opened.overlap), (0, 0));
    assert_eq!(
        app.notify_dispute(item("CHARGEBACK_REVERSED", 2)).await,
        "applied"
    );
    // Won: the cap has the money back, and the merchant refunds it all.
    let refund = app
        .refunded(id, "after-reversal", json!({"amount": 4200}))
        .await;
    assert_eq!(refund["amount"], 4200);
    // The second chargeback takes it again: returned twice unless won, and flagged so.
    assert_eq!(
        app.notify_dispute(item("SECOND_CHARGEBACK", 3)).await,
        "applied"
    );
    let again = app.dispute_state("DSPAGAIN").await;
    assert_eq!(
        (again.status.as_str(), again.refunded_before, again.overlap),
        ("lost", 4200, 4200)
    );
}

#[tokio::test]
async fn a_new_amount_where_the_dispute_stands_is_applied_and_its_hold_and_flag_follow() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "stripe", "amount-change").await;
    let id = payment["id"].as_str().unwrap();
    let pi = payment["provider_payment_id"].as_str().unwrap();
    let t = Utc::now().timestamp();
    let refund = app
        .refunded(id, "before-dispute", json!({"amount": 1000}))
        .await;
    assert_eq!(refund["amount"], 1000);
    let told = |n: i64, amount: i64| {
        stripe_event(
            &format!("evt_amount_{n}"),
            "charge.dispute.updated",
            "du_amount",
            pi,
            "needs_response",
            amount,
            t + n,
        )
    };
    assert_eq!(
        app.deliver_signed(&told(0, 2000)).await["outcome"],
        "applied"
    );
    let state = app.dispute_state("du_amount").await;
    assert_eq!((state.refunded_before, state.overlap), (1000, 0));
    // The same status with a larger amount: an update, the hold and the flag follow it.
    assert_eq!(
        app.deliver_signed(&told(1, 4000)).await["outcome"],
        "applied"
    );
    assert_eq!(app.money_held(&payment).await.dispute_held, 4000);
    let state = app.dispute_state("du_amount").await;
    assert_eq!((state.refunded_before, state.overlap), (1000, 800));
    // The same news again is no change.
    assert_eq!(app.deliver_signed(&told(2, 4000)).await["outcome"], "stale");
    assert_eq!(app.disputes_told("dispute.updated").await, 0);
}

#[tokio::test]
async fn adyens_arbitration_rules_finally_and_a_code_that_does_not_say_who_won_is_for_a_human() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "adyen", "adyen-arbitration").await;
    let item = |code: &str, minute: u32, extra: Value| {
        adyen_item(
            code,
            "DSPARB",
            &payment,
            &format!("2030-01-01T10:{minute:02}:00+00:00"),
            extra,
        )
    };
    for (minute, code) in [(1, "CHARGEBACK"), (2, "SECOND_CHARGEBACK")] {
        assert_eq!(
            app.notify_dispute(item(code, minute, json!({}))).await,
            "applied"
        );
    }
    // The issuer opens pre-arbitration, then escalates: whether money moves Adyen does not
    // say, so nothing is applied; each is recorded a conflict, which needs-a-human lists.
    for (minute, code, extra) in [
        (
            3,
            "PREARBITRATION_OPEN",
            json!({"disputeStatus": "Pending"}),
        ),
        (4, "SCHEME_ARBITRATION", json!({})),
    ] {
        assert_eq!(
            app.notify_dispute(item(code, minute, extra)).await,
            "conflict"
        );
        let state = app.dispute_state("DSPARB").await;
        assert_eq!(
            (state.status.as_str(), state.stage.as_str()),
            ("lost", "second_chargeback"),
            "{code}"
        );
    }
    let listed = app
        .db
        .count("provider_webhooks WHERE outcome = 'conflict' AND attempt_id IS NOT NULL")
        .await;
    assert_eq!(listed, 2);
    // The scheme rules for the merchant: won at arbitration, the money back, and final.
    assert_eq!(
        app.notify_dispute(item("SCHEME_ARBITRATION_WON", 5, json!({})))
            .await,
        "applied"
    );
    let state = app.dispute_state("DSPARB").await;
    assert_eq!(
        (state.status.as_str(), state.stage.as_str()),
        ("won", "arbitration")
    );
    assert_eq!(app.money_held(&payment).await.dispute_held, 0);
    assert_eq!(
        app.notify_dispute(item("SCHEME_ARBITRATION_LOST", 6, json!({})))
            .await,
        "stale"
    );
    let mut conn = app.db.connect().await;
    assert_refused_by(
        &mut conn,
        "UPDATE disputes SET status = 'lost' WHERE provider_dispute_id = 'DSPARB'",
        "disputes_status_transition",
    )
    .await;

    // An issuer's answer past its time is a win at the chargeback (Adyen's example says Won).
    let other = paid(&app, "adyen", "adyen-timeframe").await;
    let opened = adyen_item(
        "CHARGEBACK",
        "DSPTIME",
        &other,
        "2030-01-01T11:00:00+00:00",
        json!({}),
    );
    assert_eq!(app.notify_dispute(opened).await, "applied");
    let expired = adyen_item(
        "ISSUER_RESPONSE_TIMEFRAME_EXPIRED",
        "DSPTIME",
        &other,
        "2030-01-01T11:01:00+00:00",
        json!({"disputeStatus": "Won"}),
    );
    assert_eq!(app.notify_dispute(expired).await, "applied");
    assert_eq!(app.dispute_state("DSPTIME").await.status, "won");
    assert_eq!(app.money_held(&other).await.dispute_held, 0);
}

#[tokio::test]
async fn a_chargeback_of_a_late_approval_payorch_refunded_is_flagged_as_returned_twice() {
    let app = TestApp::spawn().await;
    // Declined to payorch, approved by Stripe afterwards, and refunded by payorch at once
    // (migration 000026): the failed attempt holds no refund, the late approval does.
    let payment = app
        .pay_through("stripe", "late-then-disputed", "pm_sandbox_late_approval")
        .await;
    assert_eq!(payment["status"], "failed", "{payment}");
    let charge = payment["provider_payment_id"].as_str().unwrap().to_owned();
    let amount = payment["amount"].as_i64().unwrap();
    let refunded = crate::helpers::eventually(std::time::Duration::from_secs(20), || async {
        app.db
            .count(&format!(
                "late_approvals WHERE provider_payment_id = '{charge}' AND status = 'refunded'"
            ))
            .await
            == 1
    })
    .await;
    assert!(refunded, "the late approval was not refunded");
    // The payer disputes the charge all the same.
    let chargeback = stripe_event(
        "evt_late_disputed",
        "charge.dispute.created",
        "du_late",
        &charge,
        "needs_response",
        amount,
        Utc::now().timestamp(),
    );
    assert_eq!(app.deliver_signed(&chargeback).await["outcome"], "applied");
    let state = app.dispute_state("du_late").await;
    assert_eq!((state.refunded_before, state.overlap), (amount, amount));
}
