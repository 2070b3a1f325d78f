//! Disputes where merchants and support see them (docs/guides/disputes.md, "The disputes
//! API"; docs/guides/support.md, "Disputes"): `GET /v1/disputes` with its filters and pages,
//! `GET /v1/disputes/{id}`, the payment's disputes, the support story and needs-a-human —
//! with the sandbox's own disputes, told to payorch by its signed webhooks.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{json, Value};

use crate::browser::{browser, screenshot, text_with};
use crate::helpers::{assert_problem, TestApp};
use crate::payments::Route;

/// A payment through `provider` with `method`, which must succeed.
async fn paid_with(app: &TestApp, provider: &str, key: &str, method: &str) -> Value {
    app.route_to(&[provider]).await;
    let (status, payment) = app.pay(Route::Checkout, key, method).await;
    assert_eq!(
        (status, payment["status"].as_str()),
        (201, Some("succeeded")),
        "{payment}"
    );
    payment
}

/// `GET path` with `secret`: its status and body.
async fn read(app: &TestApp, secret: &str, path: &str) -> (u16, Value) {
    let response = app.get_as(secret, path).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The merchant's dispute of `payment` once payorch holds it in `status`.
async fn dispute_of(app: &TestApp, payment: &Value, status: &str) -> Value {
    let path = format!(
        "/v1/disputes?payment_id={}",
        payment["id"].as_str().unwrap()
    );
    let mut found = Value::Null;
    for _ in 0..150 {
        let (_, page) = read(app, &app.merchant_key, &path).await;
        found = page["data"][0].clone();
        if found["status"] == status {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no dispute {status} of {payment} after 15 s: {found}");
}

/// Every page of `query`, `limit` at a time: the ids in the order served.
async fn all_pages(app: &TestApp, query: &str, limit: usize) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for _ in 0..100 {
        let cursor = ids
            .last()
            .map(|id| format!("&starting_after={id}"))
            .unwrap_or_default();
        let (status, page) = read(
            app,
            &app.merchant_key,
            &format!("/v1/disputes?limit={limit}{query}{cursor}"),
        )
        .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["object"], "list");
        let data = page["data"].as_array().unwrap();
        assert!(data.len() <= limit, "{page}");
        ids.extend(data.iter().map(|d| d["id"].as_str().unwrap().to_owned()));
        if page["has_more"] != true {
            return ids;
        }
    }
    panic!("more than 100 pages");
}

/// A move of the sandbox's dispute book, by its knob (docs/guides/test-cards.md, "Disputes").
async fn sandbox_dispute(app: &TestApp, body: Value) -> Value {
    let response = app
        .client
        .post(format!("{}/__sandbox/disputes", app.sandbox.base_url()))
        .bearer_auth(app.config.sandbox.secret.expose())
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 200, "{body}: {answer}");
    answer
}

#[tokio::test]
async fn disputes_are_listed_filtered_paged_and_kept_to_their_merchant() {
    let app = TestApp::spawn().await;
    let mut payments = Vec::new();
    for n in 0..3 {
        let key = format!("list-stripe-{n}");
        payments.push(paid_with(&app, "stripe", &key, "pm_card_createDispute").await);
    }
    let inquiry = paid_with(
        &app,
        "stripe",
        "list-inquiry",
        "pm_card_createDisputeInquiry",
    )
    .await;
    let adyen = paid_with(&app, "adyen", "list-adyen", "pm_card_createDispute").await;
    let mut disputes = Vec::new();
    for payment in &payments {
        disputes.push(dispute_of(&app, payment, "needs_response").await);
    }
    let asked = dispute_of(&app, &inquiry, "warning_needs_response").await;
    let at_adyen = dispute_of(&app, &adyen, "needs_response").await;
    assert_eq!(asked["stage"], "inquiry", "{asked}");
    assert_eq!(at_adyen["provider"], "adyen", "{at_adyen}");

    // Newest first, one page or five, each dispute once.
    let (status, page) = read(&app, &app.merchant_key, "/v1/disputes").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["has_more"], false);
    let ids: Vec<String> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 5, "{page}");
    let mut newest_first = ids.clone();
    newest_first.sort();
    newest_first.reverse();
    assert_eq!(ids, newest_first, "newest first");
    assert_eq!(all_pages(&app, "", 2).await, ids, "pages of two");
    assert_eq!(all_pages(&app, "", 1).await, ids, "pages of one");

    // Each filter, and the payment's view, show the same dispute as GET shows it.
    let id = disputes[1]["id"].as_str().unwrap();
    let (status, one) = read(&app, &app.merchant_key, &format!("/v1/disputes/{id}")).await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one, disputes[1]);
    assert_eq!(one["object"], "dispute");
    assert_eq!(one["payment_id"], payments[1]["id"]);
    assert_eq!(
        (one["amount"].as_i64(), one["currency"].as_str()),
        (Some(4200), Some("eur"))
    );
    assert!(one["evidence_due_by"].is_string(), "{one}");
    let payment = app.payment(payments[1]["id"].as_str().unwrap()).await;
    assert_eq!(payment["disputes"], json!([one]), "{payment}");
    let undisputed = paid_with(&app, "stripe", "list-undisputed", "pm_card_visa").await;
    let undisputed = app.payment(undisputed["id"].as_str().unwrap()).await;
    assert_eq!(undisputed["disputes"], json!([]), "{undisputed}");
    let filtered = |query: &'static str| {
        let app = &app;
        async move {
            let (status, page) =
                read(app, &app.merchant_key, &format!("/v1/disputes?{query}")).await;
            assert_eq!(status, 200, "{query}: {page}");
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        filtered("status=warning_needs_response").await,
        [asked["id"].as_str().unwrap()]
    );
    assert_eq!(filtered("status=needs_response").await.len(), 4);
    assert_eq!(filtered("status=won").await.len(), 0);
    assert_eq!(
        filtered("provider=adyen").await,
        [at_adyen["id"].as_str().unwrap()]
    );
    assert_eq!(
        filtered("provider=stripe&status=needs_response")
            .await
            .len(),
        3
    );
    assert_eq!(filtered("created_gte=2000-01-01T00:00:00Z").await.len(), 5);
    assert_eq!(
        filtered("created_gte=4102444800").await.len(),
        0,
        "from 2100 on"
    );
    assert_eq!(filtered("created_lte=2000-01-01T00:00:00Z").await.len(), 0);
    let of_payment = format!(
        "/v1/disputes?payment_id={}&status=needs_response",
        payments[2]["id"].as_str().unwrap()
    );
    let (_, page) = read(&app, &app.merchant_key, &of_payment).await;
    assert_eq!(page["data"], json!([disputes[2]]));

    // Bad filters are named, all at once, as the events' list names them.
    let bad = app
        .get_as(
            &app.merchant_key,
            "/v1/disputes?status=open&payment_id=ord_1&limit=0&created_gte=yesterday",
        )
        .await;
    let problem = assert_problem(bad, 422, "validation_failed").await;
    let named: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        named,
        ["status", "payment_id", "created_gte", "limit"],
        "{problem}"
    );
    let window = app
        .get_as(
            &app.merchant_key,
            "/v1/disputes?created_gte=2026-11-02T00:00:00Z&created_lte=2026-11-01T00:00:00Z",
        )
        .await;
    assert_problem(window, 422, "validation_failed").await;
    let unknown = app
        .get_as(&app.merchant_key, "/v1/disputes?state=won")
        .await;
    assert_problem(unknown, 400, "invalid_request").await;
    let (status, _) = read(&app, &app.merchant_key, "/v1/disputes/dp_nope").await;
    assert_eq!(status, 404);

    // Another merchant sees none of them, and cannot ask for them.
    let (other, other_key) = app.other_merchant().await;
    let (status, _) = read(&app, &other_key, &format!("/v1/disputes/{id}")).await;
    assert_eq!(status, 404, "another merchant's dispute");
    let (status, page) = read(&app, &other_key, "/v1/disputes").await;
    assert_eq!((status, page["data"].clone()), (200, json!([])));
    let theirs = app
        .get_as(
            &other_key,
            &format!("/v1/disputes?merchant_id={}", app.merchant_id),
        )
        .await;
    assert_problem(theirs, 422, "validation_failed").await;

    // A support key reads any merchant's, as it reads their payments and refunds.
    let (status, seen) = read(&app, &app.support_key, &format!("/v1/disputes/{id}")).await;
    assert_eq!((status, &seen), (200, &one));
    let (_, all) = read(
        &app,
        &app.support_key,
        &format!("/v1/disputes?merchant_id={}", app.merchant_id),
    )
    .await;
    assert_eq!(all["data"].as_array().unwrap().len(), 5, "{all}");
    let (_, none) = read(
        &app,
        &app.support_key,
        &format!("/v1/disputes?merchant_id={other}"),
    )
    .await;
    assert_eq!(none["data"], json!([]));
}

#[tokio::test]
async fn the_story_tells_a_dispute_and_needs_a_human_lists_money_returned_twice_first() {
    let app = TestApp::spawn().await;
    // Refunded in full, then charged back: the payer has the money twice unless it is won.
    let refunded = paid_with(&app, "stripe", "twice", "pm_card_visa").await;
    let refunded_id = refunded["id"].as_str().unwrap();
    let refund = app.refunded(refunded_id, "twice-refund", json!({})).await;
    assert_eq!(refund["status"], "succeeded", "{refund}");
    sandbox_dispute(
        &app,
        json!({"payment": refunded["provider_payment_id"], "action": "open"}),
    )
    .await;
    let twice = dispute_of(&app, &refunded, "needs_response").await;
    assert_eq!(
        (twice["refunded_before"].as_i64(), twice["overlap"].as_i64()),
        (Some(4200), Some(4200)),
        "{twice}"
    );
    // Charged back and not answered: due in seven days.
    let due = paid_with(&app, "stripe", "due", "pm_card_createDispute").await;
    let due = dispute_of(&app, &due, "needs_response").await;
    // Charged back and answered: nothing for a human to do.
    let answered = paid_with(&app, "stripe", "answered", "pm_card_createDispute").await;
    let answered_dispute = dispute_of(&app, &answered, "needs_response").await;
    let response = app
        .post_keyed(
            &app.merchant_key,
            &format!(
                "/v1/disputes/{}/evidence",
                answered_dispute["id"].as_str().unwrap()
            ),
            Some("answer-1"),
            Some(json!({"evidence": {"uncategorized_text": "winning_evidence"}}).to_string()),
        )
        .await;
    assert_eq!(response.status(), 200);

    let needs: Value = app
        .support_get("/v1/support/needs-a-human")
        .await
        .json()
        .await
        .unwrap();
    let listed: Vec<&str> = needs["disputes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [twice["id"].as_str().unwrap(), due["id"].as_str().unwrap()],
        "money returned twice first, then the answer due; the answered one not: {needs}"
    );
    assert!(
        needs["disputes"][0]["advice"]
            .as_str()
            .unwrap()
            .contains("refund as evidence"),
        "{needs}"
    );
    // The alert's gauge counts the two unanswered, due in seven days: not yet within 72 hours.
    let mut conn = app.db.connect().await;
    let due_within = |days: i64| chrono::Duration::days(days);
    let count = payorch::payments::support::disputes::count_due;
    assert_eq!(count(&mut conn, due_within(8)).await.unwrap(), 2);
    assert_eq!(count(&mut conn, due_within(3)).await.unwrap(), 0);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    let applied = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"payorch_disputes_total{provider="stripe",status="needs_response"} "#)
        })
        .and_then(|n| n.parse::<u64>().ok());
    assert!(applied >= Some(3), "three chargebacks told: {applied:?}");
    let refused = app
        .get_as(&app.merchant_key, "/v1/support/needs-a-human")
        .await;
    assert_problem(refused, 403, "forbidden").await;

    // The answered dispute's story: withdrawn, answered, under review, in that order.
    let story = app.story(answered["id"].as_str().unwrap()).await;
    let told = story["disputes"][0]["told"].as_str().unwrap();
    let day = answered_dispute["opened_at"].as_str().unwrap()[..10].to_owned();
    assert_eq!(
        told,
        format!(
            "{day} needs_response (chargeback, fraudulent): 4200 eur withdrawn; \
             {day} evidence submitted; {day} under_review"
        ),
        "{story}"
    );
    assert_eq!(story["disputes"][0]["dispute"]["status"], "under_review");
    let moves: Vec<(&str, &str)> = story["disputes"][0]["moves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["to"].as_str().unwrap(), m["source"].as_str().unwrap()))
        .collect();
    assert_eq!(moves[0], ("needs_response", "webhook"), "{story}");
    assert_eq!(moves.last().unwrap().0, "under_review", "{story}");
    let answers = &story["disputes"][0]["answers"];
    assert_eq!(
        (answers[0]["kind"].as_str(), answers[0]["status"].as_str()),
        (Some("evidence"), Some("succeeded")),
        "{story}"
    );
    // The refunded one's story says the money went back twice.
    let story = app.story(refunded_id).await;
    let told = story["disputes"][0]["told"].as_str().unwrap();
    assert!(
        told.ends_with("4200 eur refunded before it: 4200 eur returned twice unless won"),
        "{told}"
    );
    assert_eq!(story["refunds"][0]["id"], refund["id"]);
    // A payment never disputed has none.
    let plain = paid_with(&app, "stripe", "plain", "pm_card_visa").await;
    assert_eq!(
        app.story(plain["id"].as_str().unwrap()).await["disputes"],
        json!([])
    );
}

/// The console lists the disputes needing a human, finds a payment by its dispute's id, and
/// the payment's summary tells its dispute, in headless Chromium.
#[tokio::test]
async fn the_console_shows_a_dispute_to_answer() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let payment = paid_with(&app, "stripe", "dispute-console", "pm_card_createDispute").await;
    let dispute = dispute_of(&app, &payment, "needs_response").await;
    let id = dispute["id"].as_str().unwrap();

    client.goto(&app.url("/console")).await.unwrap();
    let key = client.find(Locator::Id("key")).await.unwrap();
    key.send_keys(&app.support_key).await.unwrap();
    key.send_keys("\u{E007}").await.unwrap(); // Enter submits the form.
    let attention = text_with(&client, "attention-lists", id).await;
    assert!(attention.contains("Disputes to answer (1)"), "{attention}");
    assert!(
        attention.contains("needs_response, answer by"),
        "{attention}"
    );
    screenshot(&client, "console-dispute").await;
    let query = client.find(Locator::Id("query")).await.unwrap();
    // Support is given the dispute's id: it opens its payment's story.
    query.send_keys(id).await.unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    let summary = text_with(&client, "summary", "Disputes").await;
    assert!(
        summary.contains("needs_response (chargeback, fraudulent): 4200 eur withdrawn"),
        "{summary}"
    );
}
