//! A merchant's answer to a dispute (docs/guides/disputes.md, "Answering a dispute"):
//! `POST /v1/disputes/{id}/evidence` and `…/accept` against the sandbox's own disputes,
//! through both protocols — each action once per key, sent under its own provider key, and
//! every answer the dispute no longer takes refused before anything is sent.

use std::time::Duration;

use diesel::sql_types::Text;
use serde_json::{json, Value};

use crate::helpers::TestApp;
use crate::payments::Route;

#[derive(diesel::QueryableByName)]
struct Dispute {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    status: String,
}

#[derive(diesel::QueryableByName)]
struct Word {
    #[diesel(sql_type = Text)]
    word: String,
}

impl TestApp {
    /// A payment through `provider` with a card the sandbox disputes, and its dispute once
    /// the provider told payorch of it: (`dp_…`, its status).
    async fn disputed(&self, provider: &str, key: &str) -> (String, String) {
        let (dispute, _) = self
            .disputed_by(provider, key, "pm_card_createDispute", "needs_response")
            .await;
        (dispute, "needs_response".to_owned())
    }

    /// A payment through `provider` with `method`, and its dispute once payorch has it in
    /// `awaiting`: (`dp_…`, the payment's id).
    async fn disputed_by(
        &self,
        provider: &str,
        key: &str,
        method: &str,
        awaiting: &str,
    ) -> (String, String) {
        self.route_to(&[provider]).await;
        let (status, payment) = self.pay(Route::Checkout, key, method).await;
        assert_eq!(status, 201, "{payment}");
        let payment_id = payment["id"].as_str().unwrap().to_owned();
        let uuid = payment_id.split_once('_').unwrap().1.to_owned();
        for _ in 0..100 {
            if let Some(d) = self.dispute_of(&uuid).await {
                if d.status == awaiting {
                    return (format!("dp_{}", d.id.replace('-', "")), payment_id);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no dispute of {payment} {awaiting} after 10 s");
    }

    /// The dispute's status once it is `status`, within 10 s; else what it is then.
    async fn dispute_becomes(&self, dispute: &str, status: &str) -> String {
        for _ in 0..100 {
            let now = self.dispute_status(dispute).await;
            if now == status {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.dispute_status(dispute).await
    }

    async fn dispute_of(&self, attempt_uuid: &str) -> Option<Dispute> {
        let mut conn = self.db.connect().await;
        diesel_async::RunQueryDsl::get_results::<Dispute>(
            diesel::sql_query(format!(
                "SELECT id::text, status::text FROM disputes WHERE attempt_id = '{attempt_uuid}'"
            )),
            &mut conn,
        )
        .await
        .unwrap()
        .into_iter()
        .next()
    }

    async fn dispute_status(&self, dispute: &str) -> String {
        let uuid = dispute.trim_start_matches("dp_");
        let mut conn = self.db.connect().await;
        let w: Word = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(format!(
                "SELECT status::text AS word FROM disputes WHERE id = '{uuid}'::uuid"
            )),
            &mut conn,
        )
        .await
        .unwrap();
        w.word
    }

    async fn answer(
        &self,
        dispute: &str,
        what: &str,
        key: &str,
        body: Option<Value>,
    ) -> (u16, Value, bool) {
        self.answer_as(&self.merchant_key, dispute, what, key, body)
            .await
    }

    async fn answer_as(
        &self,
        secret: &str,
        dispute: &str,
        what: &str,
        key: &str,
        body: Option<Value>,
    ) -> (u16, Value, bool) {
        let response = self
            .post_keyed(
                secret,
                &format!("/v1/disputes/{dispute}/{what}"),
                Some(key),
                body.map(|b| b.to_string()),
            )
            .await;
        let status = response.status().as_u16();
        let replayed = response.headers().contains_key("idempotent-replayed");
        (
            status,
            response.json().await.unwrap_or(Value::Null),
            replayed,
        )
    }
}

fn stripe_evidence() -> Value {
    json!({"evidence": {
        "uncategorized_text": "winning_evidence",
        "customer_name": "Ada Lovelace",
    }})
}

#[tokio::test]
async fn stripe_evidence_is_sent_once_per_key_and_the_dispute_then_takes_no_other_answer() {
    let app = TestApp::spawn().await;
    let (dispute, _) = app.disputed("stripe", "disputed-1").await;

    let (status, first, _) = app
        .answer(&dispute, "evidence", "ev-1", Some(stripe_evidence()))
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["object"], "dispute_action");
    assert_eq!(
        (first["kind"].as_str(), first["status"].as_str()),
        (Some("evidence"), Some("succeeded")),
        "{first}"
    );
    assert_eq!(first["dispute"]["status"], "under_review", "{first}");
    assert_ne!(app.dispute_status(&dispute).await, "needs_response");

    // The same key and body: the first answer again, nothing sent again.
    let (status, replay, replayed) = app
        .answer(&dispute, "evidence", "ev-1", Some(stripe_evidence()))
        .await;
    assert_eq!((status, replayed), (200, true), "{replay}");
    assert_eq!(replay["id"], first["id"]);
    // The same key with another body.
    let (status, reused, _) = app
        .answer(
            &dispute,
            "evidence",
            "ev-1",
            Some(json!({"evidence": {"customer_name": "B"}})),
        )
        .await;
    assert_eq!(
        (status, reused["code"].as_str()),
        (422, Some("idempotency_key_reused"))
    );

    // Evidence taken: another answer, or an accept, is refused with what to do.
    let (status, again, _) = app
        .answer(&dispute, "evidence", "ev-2", Some(stripe_evidence()))
        .await;
    assert_eq!(
        (status, again["code"].as_str()),
        (409, Some("dispute_not_answerable")),
        "{again}"
    );
    assert!(again["dispute_status"].is_string(), "{again}");
    let (status, accept, _) = app.answer(&dispute, "accept", "acc-1", None).await;
    assert_eq!(
        (status, accept["code"].as_str()),
        (409, Some("dispute_not_answerable")),
        "{accept}"
    );
    assert_eq!(
        app.db
            .count("dispute_actions WHERE status = 'succeeded'")
            .await,
        1,
        "one action, the first"
    );
}

#[tokio::test]
async fn an_accepted_dispute_is_lost_and_takes_nothing_more() {
    let app = TestApp::spawn().await;
    let (dispute, _) = app.disputed("stripe", "disputed-2").await;
    let (status, accepted, _) = app.answer(&dispute, "accept", "acc-1", None).await;
    assert_eq!(status, 200, "{accepted}");
    assert_eq!(
        (accepted["kind"].as_str(), accepted["status"].as_str()),
        (Some("accept"), Some("succeeded"))
    );
    assert_eq!(accepted["dispute"]["status"], "lost", "{accepted}");

    let (status, twice, _) = app.answer(&dispute, "accept", "acc-2", None).await;
    assert_eq!(
        (status, twice["code"].as_str()),
        (409, Some("dispute_not_answerable")),
        "{twice}"
    );
    assert!(
        twice["detail"].as_str().unwrap().contains("accepted"),
        "{twice}"
    );
    let (status, late, _) = app
        .answer(&dispute, "evidence", "ev-late", Some(stripe_evidence()))
        .await;
    assert_eq!(
        (status, late["code"].as_str()),
        (409, Some("dispute_not_answerable")),
        "{late}"
    );
}

#[tokio::test]
async fn what_a_provider_cannot_take_and_who_may_not_ask_are_refused_before_anything_is_sent() {
    let app = TestApp::spawn().await;
    let (dispute, _) = app.disputed("stripe", "disputed-3").await;
    // Documents need Stripe's Files API, which payorch does not use.
    let documents = json!({"documents": [{"document_type": "DefenseMaterial",
        "content_type": "application/pdf", "content": "JVBERi0xLjQK"}]});
    let (status, refused, _) = app
        .answer(&dispute, "evidence", "doc-1", Some(documents))
        .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (422, Some("validation_failed")),
        "{refused}"
    );
    // A field Stripe lacks.
    let (status, unknown, _) = app
        .answer(
            &dispute,
            "evidence",
            "doc-2",
            Some(json!({"evidence": {"explanation": "x"}})),
        )
        .await;
    assert_eq!(
        (status, unknown["code"].as_str()),
        (422, Some("validation_failed")),
        "{unknown}"
    );
    // A support key may not write; another merchant does not see the dispute.
    let support = app.support_key.clone();
    let (status, _, _) = app
        .answer_as(
            &support,
            &dispute,
            "evidence",
            "sup-1",
            Some(stripe_evidence()),
        )
        .await;
    assert_eq!(status, 403);
    let (_, other) = app.other_merchant().await;
    let (status, _, _) = app
        .answer_as(
            &other,
            &dispute,
            "evidence",
            "oth-1",
            Some(stripe_evidence()),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _, _) = app
        .answer_as(&other, &dispute, "accept", "oth-2", None)
        .await;
    assert_eq!(status, 404);
    let (status, _, _) = app
        .answer(
            "dp_0000000000000000000000000000000a",
            "accept",
            "none-1",
            None,
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(
        app.db.count("dispute_actions").await,
        0,
        "nothing was recorded"
    );
    assert_eq!(app.dispute_status(&dispute).await, "needs_response");
}

#[tokio::test]
async fn adyen_takes_documents_and_a_defence_reason() {
    let app = TestApp::spawn().await;
    let (dispute, _) = app.disputed("adyen", "disputed-4").await;
    // Text is Stripe's: Adyen's Disputes API takes none.
    let (status, refused, _) = app
        .answer(&dispute, "evidence", "ady-0", Some(stripe_evidence()))
        .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (422, Some("validation_failed")),
        "{refused}"
    );
    let body = json!({
        "documents": [{"document_type": "DefenseMaterial", "content_type": "application/pdf",
            "content": "JVBERi0xLjQK"}],
        "defense_reason_code": "SupplyDefenseMaterial",
    });
    let (status, answered, _) = app.answer(&dispute, "evidence", "ady-1", Some(body)).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["status"], "succeeded", "{answered}");
    assert_eq!(answered["dispute"]["status"], "under_review", "{answered}");
}

/// An answer that told nothing (here: the provider unreachable) leaves the action `pending`
/// and its key in flight; another action waits for it, and the same request, once the lease
/// has passed, resends it under the same provider key: one action, one answer.
#[tokio::test]
async fn an_answer_that_told_nothing_is_resent_under_the_same_provider_key_by_its_retry() {
    let app = TestApp::spawn_config(|config| {
        config.two_providers = Some(payorch::providers::circuit::CircuitSettings {
            threshold: 1000,
            cool_down: Duration::from_secs(60),
        })
    })
    .await;
    let (dispute, _) = app.disputed("a", "disputed-5").await;
    let door = app.second.as_ref().expect("two providers").door.clone();
    door.shut();
    let (status, pending, _) = app
        .answer(&dispute, "evidence", "ev-door", Some(stripe_evidence()))
        .await;
    assert_eq!(
        (status, pending["status"].as_str()),
        (202, Some("pending")),
        "{pending}"
    );
    let (status, waiting, _) = app.answer(&dispute, "accept", "acc-door", None).await;
    assert_eq!(
        (status, waiting["code"].as_str()),
        (409, Some("dispute_action_in_progress")),
        "{waiting}"
    );
    assert_eq!(waiting["action_id"], pending["id"]);
    door.open();
    let mut answered = Value::Null;
    for _ in 0..40 {
        let (status, body, _) = app
            .answer(&dispute, "evidence", "ev-door", Some(stripe_evidence()))
            .await;
        if status == 200 {
            answered = body;
            break;
        }
        // Until the first request's lease has passed, the key is still its.
        assert_eq!(body["code"], "idempotency_key_in_use", "{status} {body}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(answered["id"], pending["id"], "the same action: {answered}");
    assert_eq!(answered["status"], "succeeded", "{answered}");
    assert_eq!(answered["dispute"]["status"], "under_review", "{answered}");
    assert_eq!(app.db.count("dispute_actions").await, 1);
}

/// A refusal by the provider did nothing: the action is `failed` with the provider's reason,
/// the dispute still awaits its answer, and a corrected answer under a new key is taken.
#[tokio::test]
async fn a_refused_answer_did_nothing_and_a_corrected_one_is_taken() {
    let app = TestApp::spawn().await;
    let (dispute, _) = app.disputed("adyen", "disputed-6").await;
    let document = json!([{"document_type": "DefenseMaterial", "content_type": "application/pdf",
        "content": "JVBERi0xLjQK"}]);
    let (status, refused, _) = app
        .answer(
            &dispute,
            "evidence",
            "ady-bad",
            Some(json!({"documents": document, "defense_reason_code": "NotAReason"})),
        )
        .await;
    assert_eq!(status, 200, "{refused}");
    assert_eq!(refused["status"], "failed", "{refused}");
    assert!(refused["failure_message"].is_string(), "{refused}");
    assert_eq!(refused["dispute"]["status"], "needs_response", "{refused}");
    let (status, taken, _) = app
        .answer(
            &dispute,
            "evidence",
            "ady-good",
            Some(json!({"documents": document, "defense_reason_code": "SupplyDefenseMaterial"})),
        )
        .await;
    assert_eq!(
        (status, taken["status"].as_str()),
        (200, Some("succeeded")),
        "{taken}"
    );
}

/// An accepted inquiry is not closed by payorch: Adyen then books the chargeback its
/// notification announced (`CHARGEBACK`, `Accepted`), which payorch takes as `lost` with the
/// money held, so no refund returns it a second time; Stripe closes the inquiry, and payorch
/// hears it from Stripe. Accepted, the dispute takes no other answer.
#[tokio::test]
async fn an_accepted_inquiry_waits_for_the_providers_news_and_a_chargeback_that_follows_holds_the_money(
) {
    let app = TestApp::spawn().await;
    let (dispute, payment) = app
        .disputed_by(
            "adyen",
            "inquiry-1",
            "pm_card_createDisputeInquiry",
            "warning_needs_response",
        )
        .await;
    let (status, accepted, _) = app.answer(&dispute, "accept", "acc-inq", None).await;
    assert_eq!(status, 200, "{accepted}");
    assert_eq!(accepted["status"], "succeeded", "{accepted}");
    assert_ne!(
        accepted["dispute"]["status"], "warning_closed",
        "payorch does not close it: {accepted}"
    );
    assert_eq!(app.dispute_becomes(&dispute, "lost").await, "lost");
    let uuid = dispute.trim_start_matches("dp_");
    assert_eq!(
        app.db
            .count(&format!(
                "payment_attempts a JOIN disputes d ON d.attempt_id = a.id \
                 WHERE d.id = '{uuid}'::uuid AND a.dispute_held = d.amount AND d.amount > 0"
            ))
            .await,
        1,
        "the chargeback holds its money"
    );
    let refused = app.refund(&payment, "refund-after", json!({})).await;
    assert_eq!(refused.status(), 409, "nothing left to refund");
    let (status, again, _) = app
        .answer(
            &dispute,
            "evidence",
            "ev-after",
            Some(json!({
            "documents": [{"document_type": "DefenseMaterial",
                "content_type": "application/pdf", "content": "JVBERi0xLjQK"}],
            "defense_reason_code": "SupplyDefenseMaterial"})),
        )
        .await;
    assert_eq!(
        (status, again["code"].as_str()),
        (409, Some("dispute_not_answerable")),
        "{again}"
    );

    let (dispute, _) = app
        .disputed_by(
            "stripe",
            "inquiry-2",
            "pm_card_createDisputeInquiry",
            "warning_needs_response",
        )
        .await;
    let (status, accepted, _) = app.answer(&dispute, "accept", "acc-inq-2", None).await;
    assert_eq!(
        (status, accepted["status"].as_str()),
        (200, Some("succeeded")),
        "{accepted}"
    );
    assert_eq!(
        app.dispute_becomes(&dispute, "warning_closed").await,
        "warning_closed",
        "Stripe's close, told by Stripe"
    );
    // Accepted and still awaiting the news, or closed: no second answer either way.
    let (status, again, _) = app.answer(&dispute, "accept", "acc-inq-3", None).await;
    assert_eq!(status, 409, "{again}");
}

impl TestApp {
    /// The provider's id of `dispute` (`du_…`).
    async fn provider_dispute_id(&self, dispute: &str) -> String {
        let uuid = dispute.trim_start_matches("dp_");
        let mut conn = self.db.connect().await;
        let w: Word = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(format!(
                "SELECT provider_dispute_id AS word FROM disputes WHERE id = '{uuid}'::uuid"
            )),
            &mut conn,
        )
        .await
        .unwrap();
        w.word
    }

    /// The request `key` again until its first request's lease has passed: its answer.
    async fn answer_after_the_lease(
        &self,
        dispute: &str,
        what: &str,
        key: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        for _ in 0..40 {
            let (status, answer, _) = self.answer(dispute, what, key, body.clone()).await;
            if answer["code"] != "idempotency_key_in_use" {
                return (status, answer);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("the key {key} stayed in use for 10 s");
    }
}

/// A send whose answer was lost may have been taken: the provider then refuses the resend
/// ("already under review", as Stripe does once the key's 24 hours are over), and that
/// refusal says nothing of the first send. The action stays pending, not failed, and the
/// dispute's news settles it.
#[tokio::test]
async fn a_refused_resend_after_a_lost_answer_is_not_a_failure_and_the_disputes_news_settles_it() {
    let app = TestApp::spawn_config(|config| {
        config.two_providers = Some(payorch::providers::circuit::CircuitSettings {
            threshold: 1000,
            cool_down: Duration::from_secs(60),
        })
    })
    .await;
    let (dispute, _) = app.disputed("a", "disputed-lost").await;
    let du = app.provider_dispute_id(&dispute).await;
    // payorch hears nothing from provider a until the end.
    app.sandbox.set_webhook_url(None);
    let door = app.second.as_ref().expect("two providers").door.clone();
    door.shut();
    let (status, pending, _) = app
        .answer(&dispute, "evidence", "ev-lost", Some(stripe_evidence()))
        .await;
    assert_eq!((status, pending["status"].as_str()), (202, Some("pending")));
    // That send never left (the door refused the connection): as if it had, and its answer
    // were lost, the provider took it under its key ...
    assert_eq!(
        app.db
            .count("dispute_actions WHERE status = 'pending' AND sends = 0")
            .await,
        1,
        "a send that never left is not counted"
    );
    let mut conn = app.db.connect().await;
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query("UPDATE dispute_actions SET sends = 1"),
        &mut conn,
    )
    .await
    .unwrap();
    // ... and the key's life there is over: the evidence was taken under another key.
    let taken = reqwest::Client::new()
        .post(format!("{}/v1/disputes/{du}", app.sandbox.base_url()))
        .bearer_auth("sk_test_payorch")
        .header("Idempotency-Key", "taken-earlier")
        .form(&[("evidence[customer_name]", "Ada Lovelace")])
        .send()
        .await
        .unwrap();
    assert_eq!(taken.status().as_u16(), 200);
    door.open();
    let (status, resent) = app
        .answer_after_the_lease(&dispute, "evidence", "ev-lost", Some(stripe_evidence()))
        .await;
    assert_eq!(
        (status, resent["status"].as_str()),
        (202, Some("pending")),
        "the resend's refusal is no proof: {resent}"
    );
    assert_eq!(
        app.db
            .count("dispute_actions WHERE status = 'failed'")
            .await,
        0
    );
    assert_eq!(app.dispute_status(&dispute).await, "needs_response");

    // The news comes: the bank decided for the merchant. The action ends succeeded with it,
    // and its key with it: the request again replays it, nothing sent.
    app.sandbox
        .set_webhook_url(Some(format!("{}/v1/webhooks/a", app.base_url)));
    let won = reqwest::Client::new()
        .post(format!("{}/__sandbox/disputes", app.sandbox.base_url()))
        .bearer_auth("sk_test_payorch")
        .json(&json!({"dispute": du, "action": "win"}))
        .send()
        .await
        .unwrap();
    assert_eq!(won.status().as_u16(), 200, "{}", won.text().await.unwrap());
    assert_eq!(app.dispute_becomes(&dispute, "won").await, "won");
    let (status, settled, replayed) = app
        .answer(&dispute, "evidence", "ev-lost", Some(stripe_evidence()))
        .await;
    assert_eq!(
        (status, settled["status"].as_str(), replayed),
        (200, Some("succeeded"), true),
        "{settled}"
    );
    assert_eq!(
        app.db
            .count("idempotency_keys WHERE key = 'ev-lost' AND state = 'completed'")
            .await,
        1
    );
}

/// A pending action whose client gave up does not hold the dispute: when the dispute moves
/// on (here: evidence given elsewhere, in the provider's dashboard), the pending accept ends
/// `failed`, `dispute_moved`, with where it went; its key is completed, and the next answer
/// is judged by the dispute as it stands, not held behind the accept.
#[tokio::test]
async fn a_pending_action_ends_with_the_disputes_news() {
    let app = TestApp::spawn_config(|config| {
        config.two_providers = Some(payorch::providers::circuit::CircuitSettings {
            threshold: 1000,
            cool_down: Duration::from_secs(60),
        })
    })
    .await;
    let (dispute, _) = app.disputed("a", "disputed-moved").await;
    let du = app.provider_dispute_id(&dispute).await;
    let door = app.second.as_ref().expect("two providers").door.clone();
    door.shut();
    let (status, pending, _) = app.answer(&dispute, "accept", "acc-gone", None).await;
    assert_eq!((status, pending["status"].as_str()), (202, Some("pending")));
    door.open();
    let taken = reqwest::Client::new()
        .post(format!("{}/v1/disputes/{du}", app.sandbox.base_url()))
        .bearer_auth("sk_test_payorch")
        .header("Idempotency-Key", "from-the-dashboard")
        .form(&[("evidence[customer_name]", "Ada Lovelace")])
        .send()
        .await
        .unwrap();
    assert_eq!(taken.status().as_u16(), 200);
    assert_eq!(
        app.dispute_becomes(&dispute, "under_review").await,
        "under_review"
    );
    let (status, ended, replayed) = app.answer(&dispute, "accept", "acc-gone", None).await;
    assert_eq!((status, replayed), (200, true), "{ended}");
    assert_eq!(
        (ended["status"].as_str(), ended["failure_code"].as_str()),
        (Some("failed"), Some("dispute_moved")),
        "{ended}"
    );
    assert!(
        ended["failure_message"]
            .as_str()
            .unwrap()
            .contains("under_review"),
        "{ended}"
    );
    let (status, next, _) = app
        .answer(&dispute, "evidence", "ev-next", Some(stripe_evidence()))
        .await;
    assert_eq!(
        (status, next["code"].as_str()),
        (409, Some("dispute_not_answerable")),
        "no longer held behind the accept: {next}"
    );
}

/// A client that gave up does not hold the dispute: once its request's lease has passed,
/// another action's request on the dispute first resends the pending one (its own provider
/// key, as its client's retry would), and is then judged by the dispute as it stands. Never
/// two answers under way at once.
#[tokio::test]
async fn another_request_resends_a_pending_action_whose_client_gave_up() {
    let app = TestApp::spawn_config(|config| {
        config.two_providers = Some(payorch::providers::circuit::CircuitSettings {
            threshold: 1000,
            cool_down: Duration::from_secs(60),
        })
    })
    .await;
    let (dispute, _) = app.disputed("a", "disputed-gave-up").await;
    let door = app.second.as_ref().expect("two providers").door.clone();
    door.shut();
    let (status, pending, _) = app
        .answer(&dispute, "evidence", "ev-gave-up", Some(stripe_evidence()))
        .await;
    assert_eq!((status, pending["status"].as_str()), (202, Some("pending")));
    door.open();
    // Within the lease the evidence's request may still be at it: the accept waits.
    let (status, waiting, _) = app.answer(&dispute, "accept", "acc-1", None).await;
    assert_eq!(
        (status, waiting["code"].as_str()),
        (409, Some("dispute_action_in_progress")),
        "{waiting}"
    );
    // Past it, the accept's request settles the evidence first: taken, so the dispute is
    // under review and the accept is refused as it stands.
    let mut refused = Value::Null;
    for _ in 0..40 {
        let (status, body, _) = app.answer(&dispute, "accept", "acc-2", None).await;
        if body["code"] != "dispute_action_in_progress" {
            assert_eq!(status, 409, "{body}");
            refused = body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(refused["code"], "dispute_not_answerable", "{refused}");
    assert_eq!(app.dispute_status(&dispute).await, "under_review");
    assert_eq!(
        app.db
            .count("dispute_actions WHERE kind = 'evidence' AND status = 'succeeded'")
            .await,
        1
    );
    assert_eq!(app.db.count("dispute_actions").await, 1, "no accept made");
    // The evidence's own key was completed with it: its retry replays the answer.
    let (status, replay, replayed) = app
        .answer(&dispute, "evidence", "ev-gave-up", Some(stripe_evidence()))
        .await;
    assert_eq!(
        (status, replay["status"].as_str(), replayed),
        (200, Some("succeeded"), true),
        "{replay}"
    );
}

/// The news and the answer meet: a webhook's move commits while the answer's record waits
/// for the dispute's row. The record then moves nothing from where the news took the
/// dispute (no `won` → `under_review` for the guard to refuse, no `500`), and the action is
/// what the news made it.
#[tokio::test]
async fn an_answer_recorded_after_the_disputes_news_moves_nothing_more() {
    let app = TestApp::spawn_config(|config| {
        config.two_providers = Some(payorch::providers::circuit::CircuitSettings {
            threshold: 1000,
            cool_down: Duration::from_secs(60),
        })
    })
    .await;
    let (dispute, _) = app.disputed("a", "disputed-race").await;
    let uuid = dispute.trim_start_matches("dp_").to_owned();
    let door = app.second.as_ref().expect("two providers").door.clone();
    door.shut();
    let (status, _, _) = app
        .answer(&dispute, "evidence", "ev-race", Some(stripe_evidence()))
        .await;
    assert_eq!(status, 202);
    door.open();
    // The news holds the dispute's row while the retry's answer comes back, and its payment's
    // first, in the order a dispute event takes them.
    let mut news = app.db.connect().await;
    let run = |sql: String| diesel::sql_query(sql);
    diesel_async::RunQueryDsl::execute(run("BEGIN".into()), &mut news)
        .await
        .unwrap();
    diesel_async::RunQueryDsl::execute(
        run(format!(
            "SELECT 1 FROM payment_attempts a JOIN disputes d ON d.attempt_id = a.id \
             WHERE d.id = '{uuid}'::uuid FOR NO KEY UPDATE"
        )),
        &mut news,
    )
    .await
    .unwrap();
    let retry = {
        let (base, key) = (app.base_url.clone(), app.merchant_key.clone());
        let dispute = dispute.clone();
        tokio::spawn(async move {
            for _ in 0..40 {
                let response = reqwest::Client::new()
                    .post(format!("{base}/v1/disputes/{dispute}/evidence"))
                    .bearer_auth(&key)
                    .header("Idempotency-Key", "ev-race")
                    .header("Content-Type", "application/json")
                    .body(stripe_evidence().to_string())
                    .send()
                    .await
                    .unwrap();
                let status = response.status().as_u16();
                let body: Value = response.json().await.unwrap();
                if body["code"] != "idempotency_key_in_use" {
                    return (status, body);
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            panic!("the key stayed in use");
        })
    };
    let waiting = "pg_stat_activity WHERE wait_event_type = 'Lock' \
                   AND datname = current_database()";
    assert!(
        crate::helpers::eventually(Duration::from_secs(15), || async {
            app.db.count(waiting).await > 0
        })
        .await,
        "the answer's record waits for the dispute's row"
    );
    diesel_async::RunQueryDsl::execute(
        run(format!(
            "UPDATE disputes SET status = 'won', closed_at = now() WHERE id = '{uuid}'::uuid"
        )),
        &mut news,
    )
    .await
    .unwrap();
    diesel_async::RunQueryDsl::execute(run("COMMIT".into()), &mut news)
        .await
        .unwrap();
    let (status, answered) = retry.await.unwrap();
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["status"], "succeeded", "{answered}");
    assert_eq!(answered["dispute"]["status"], "won", "{answered}");
    assert_eq!(app.dispute_status(&dispute).await, "won");
}
