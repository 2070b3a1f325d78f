//! `/console` in headless Chromium (see [`crate::browser`]). Screenshots of each state are
//! saved under `target/tmp/screenshots/`.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::json;

use payorch::events::signing::Secret;
use payorch::ids::EndpointId;

use crate::browser::{browser, run, screenshot, show, text_with};

use crate::helpers::{eventually, sealed_secret, TestApp};
use crate::payments::Route;

#[tokio::test]
async fn a_support_person_finds_a_stuck_payment_sees_its_story_and_reconciles_it() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_secs(3600);
        config.settings.reconciler.alert_after = Duration::ZERO;
    })
    .await;
    app.sandbox.set_webhook_url(None);
    let (_, pending) = app
        .pay(Route::Checkout, "browser-lost", "pm_sandbox_lost_response")
        .await;
    assert_eq!(pending["status"], "pending");
    let id = pending["id"].as_str().unwrap();
    // Its `payment.pending` event went to an endpoint that answered 503 (written by SQL: the
    // delivery is due in a day, so no worker sends it meanwhile).
    let mut conn = app.db.connect().await;
    let endpoint = EndpointId::new();
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(format!(
            "WITH hook AS (INSERT INTO webhook_endpoints (merchant_id, id, url, enabled_events, \
                 secret) VALUES ('{m}', '{endpoint}', 'https://shop.invalid/hook', \
                 ARRAY['*'], '{sealed}') RETURNING merchant_id, id), \
             sent AS (INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id, attempts, \
                 next_attempt_at) SELECT e.id, hook.id, hook.merchant_id, 1, \
                 now() + interval '1 day' FROM merchant_events e, hook RETURNING event_id, endpoint_id) \
             INSERT INTO delivery_attempts (event_id, endpoint_id, http_status, latency_ms, error) \
             SELECT event_id, endpoint_id, 503, 42, 'the endpoint answered 503' FROM sent",
            m = app.merchant_id.0,
            endpoint = endpoint.0,
            sealed = sealed_secret(endpoint, &Secret::generate()),
        )),
        &mut conn,
    )
    .await
    .unwrap();

    client.goto(&app.url("/console")).await.unwrap();
    let key = client.find(Locator::Id("key")).await.unwrap();
    key.send_keys(&app.support_key).await.unwrap();
    screenshot(&client, "console-1-key").await;
    key.send_keys("\u{E007}").await.unwrap(); // Enter submits the form.
    let attention = text_with(&client, "attention-lists", id).await;
    assert!(
        attention.contains("Open past the alert age (1)"),
        "{attention}"
    );
    screenshot(&client, "console-2-needs-a-human").await;

    let query = client.find(Locator::Id("query")).await.unwrap();
    query.send_keys("browser-lost").await.unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    let timeline = text_with(&client, "timeline", "provider call").await;
    assert!(
        timeline.contains("pending by provider_response"),
        "{timeline}"
    );
    assert!(timeline.contains("create by api: unknown"), "{timeline}");
    let summary = text_with(&client, "summary", id).await;
    assert!(summary.contains("browser-lost"), "{summary}");
    let events = text_with(&client, "events", "payment.pending").await;
    assert!(events.contains("https://shop.invalid/hook"), "{events}");
    assert!(
        events.contains("HTTP 503, 42 ms (the endpoint answered 503)"),
        "{events}"
    );
    show(&client, "story").await;
    screenshot(&client, "console-3-story-pending").await;
    client
        .find(Locator::Css("#events button[data-event]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let events = text_with(&client, "events", "Redelivered: 1 of 1").await;
    assert!(events.contains("send(s), next"), "due again: {events}");

    client
        .find(Locator::Id("reconcile"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let result = text_with(&client, "reconcile-result", "succeeded").await;
    assert!(result.contains("the payment succeeded"), "{result}");
    let timeline = text_with(&client, "timeline", "succeeded by support").await;
    assert!(timeline.contains("asked by support key"), "{timeline}");
    let events = text_with(&client, "events", "order.paid").await;
    assert!(
        events.contains("payment.succeeded")
            && events.contains("by a webhook, the reconciler or support"),
        "{events}"
    );
    let results = text_with(&client, "result-list", "succeeded").await;
    assert!(
        !results.contains("pending"),
        "the list is refreshed: {results}"
    );
    show(&client, "story").await;
    screenshot(&client, "console-4-reconciled").await;
    assert_eq!(app.charges_for(id), 1);

    // A refund shows in the story once it is read again.
    let refund = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/payments/{id}/refunds"),
            Some("console-refund"),
            Some(json!({"amount": 1000}).to_string()),
        )
        .await;
    assert_eq!(refund.status(), 201);
    let refund: serde_json::Value = refund.json().await.unwrap();
    client
        .find(Locator::Id("reconcile"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let summary = text_with(&client, "summary", "1 refund(s)").await;
    assert!(summary.contains("€10.00 in 1 refund(s)"), "{summary}");
    let timeline = text_with(&client, "timeline", "refund").await;
    assert!(
        timeline.contains("succeeded by provider_response"),
        "{timeline}"
    );
    show(&client, "story").await;
    screenshot(&client, "console-4b-refunded").await;
    // A refund id finds its payment.
    client.refresh().await.unwrap();
    let query = client.find(Locator::Id("query")).await.unwrap();
    query
        .send_keys(refund["id"].as_str().unwrap())
        .await
        .unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    let summary = text_with(&client, "summary", id).await;
    assert!(summary.contains("1 refund(s)"), "{summary}");

    // The key never reaches a URL.
    let url = client.current_url().await.unwrap();
    assert!(!url.as_str().contains("sk_sup"), "{url}");

    client.set_window_size(390, 844).await.unwrap();
    screenshot(&client, "console-5-phone").await;
    client.close().await.unwrap();
}

/// The ids of the rows of the latest payments, top to bottom.
async fn latest_rows(client: &fantoccini::Client) -> Vec<String> {
    let rows = run(
        client,
        "return [...document.querySelectorAll('#latest-list tr')].map(r => r.dataset.payment)",
    )
    .await;
    serde_json::from_value(rows).unwrap()
}

/// Waits until the latest payments show exactly `wanted`, in order.
async fn latest_rows_become(client: &fantoccini::Client, wanted: &[String]) {
    let shown = eventually(Duration::from_secs(10), || async {
        latest_rows(client).await == wanted
    })
    .await;
    assert!(
        shown,
        "the latest payments show {:?}, not {wanted:?}",
        latest_rows(client).await
    );
}

/// What the chart draws: `(provider, status, count)` for each bar segment, added up over the
/// buckets, in series order.
async fn charted(client: &fantoccini::Client) -> Vec<(String, String, i64)> {
    let drawn = run(
        client,
        "const chart = document.getElementById('chart-svg');
         if (!chart) return null;
         return [...chart.querySelectorAll('g.series')].map(g => [g.dataset.provider,
           [...g.querySelectorAll('rect')].map(r => [r.dataset.status, Number(r.dataset.count)])]);",
    )
    .await;
    let series: Vec<(String, Vec<(String, i64)>)> = match drawn {
        serde_json::Value::Null => return Vec::new(),
        drawn => serde_json::from_value(drawn).unwrap(),
    };
    let mut totals: Vec<(String, String, i64)> = Vec::new();
    for (provider, bars) in series {
        if bars.is_empty() {
            totals.push((provider.clone(), "none".into(), 0));
        }
        for (status, count) in bars {
            match totals
                .iter_mut()
                .find(|(p, s, _)| *p == provider && *s == status)
            {
                Some(total) => total.2 += count,
                None => totals.push((provider.clone(), status, count)),
            }
        }
    }
    totals
}

#[tokio::test]
async fn the_console_opens_on_the_latest_payments_and_the_last_hour_by_provider() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let mut made = Vec::new();
    for (provider, key, method) in [
        ("stripe", "console-1", "pm_card_visa"),
        ("stripe", "console-2", "pm_card_chargeDeclined"),
        ("adyen", "console-3", "pm_card_visa"),
        ("adyen", "console-4", "pm_card_chargeDeclined"),
        ("stripe", "console-5", "pm_card_visa"),
    ] {
        let attempt = app.pay_through(provider, key, method).await;
        made.push(attempt["id"].as_str().unwrap().to_string());
    }
    let newest_first: Vec<String> = made.iter().rev().cloned().collect();

    client.goto(&app.url("/console")).await.unwrap();
    let key = client.find(Locator::Id("key")).await.unwrap();
    key.send_keys(&app.support_key).await.unwrap();
    key.send_keys("\u{E007}").await.unwrap();
    latest_rows_become(&client, &newest_first).await;
    let first = text_with(&client, "latest-list", &made[4]).await;
    assert!(first.contains("€42.00"), "{first}");

    let drawn = eventually(Duration::from_secs(10), || async {
        !charted(&client).await.is_empty()
    })
    .await;
    assert!(drawn, "the chart is drawn");
    let wanted = |p: &str, s: &str, n: i64| (p.to_string(), s.to_string(), n);
    assert_eq!(
        charted(&client).await,
        [
            wanted("stripe", "succeeded", 2),
            wanted("stripe", "failed", 1),
            wanted("adyen", "succeeded", 1),
            wanted("adyen", "failed", 1),
        ]
    );
    let totals = text_with(&client, "chart-totals", "adyen").await;
    assert!(
        totals.contains("stripe: 2 succeeded, 1 failed (33 % failed)"),
        "{totals}"
    );
    screenshot(&client, "console-6-latest-and-chart").await;

    // Narrowed to failed payments, then to Adyen's: the list follows each filter.
    client
        .find(Locator::Id("filter-status"))
        .await
        .unwrap()
        .select_by_value("failed")
        .await
        .unwrap();
    latest_rows_become(&client, &[made[3].clone(), made[1].clone()]).await;
    client
        .find(Locator::Id("filter-provider"))
        .await
        .unwrap()
        .select_by_value("adyen")
        .await
        .unwrap();
    latest_rows_become(&client, std::slice::from_ref(&made[3])).await;
    show(&client, "latest").await;
    screenshot(&client, "console-7-failed-adyen").await;

    // A row opens that payment's story.
    client
        .find(Locator::Css(&format!(
            "#latest-list a[href='#{}']",
            made[3]
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let summary = text_with(&client, "summary", &made[3]).await;
    assert!(summary.contains("console-4"), "{summary}");
    let timeline = text_with(&client, "timeline", "provider call").await;
    assert!(timeline.contains("create by api: failed"), "{timeline}");
    show(&client, "story").await;
    screenshot(&client, "console-8-story-from-the-list").await;

    // Without filters every payment is back, on one page: no older ones to offer.
    client
        .find(Locator::Id("filter-status"))
        .await
        .unwrap()
        .select_by_value("")
        .await
        .unwrap();
    client
        .find(Locator::Id("filter-provider"))
        .await
        .unwrap()
        .select_by_value("")
        .await
        .unwrap();
    latest_rows_become(&client, &newest_first).await;
    let more = client.find(Locator::Id("latest-more")).await.unwrap();
    assert!(!more.is_displayed().await.unwrap());

    // On a phone the page never scrolls sideways: the table scrolls in its own box, the
    // chart is redrawn to the new width, long ids in the story wrap.
    client.set_window_size(390, 844).await.unwrap();
    let fits = eventually(Duration::from_secs(10), || async {
        run(
            &client,
            "const page = document.documentElement; return page.scrollWidth <= page.clientWidth",
        )
        .await
            == true
    })
    .await;
    screenshot(&client, "console-9-phone-latest").await;
    assert!(fits, "the page is wider than a phone");
    client.close().await.unwrap();
}

/// A support person finds a payment whose money is held and releases it from the console:
/// the provider voids the hold (the sandbox's ledger shows the void and no capture), the
/// story shows the void by support, and the order is payable again.
#[tokio::test]
async fn a_support_person_voids_a_hold_from_the_console() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let id = hold(&app, "console-hold").await;

    client.goto(&app.url("/console")).await.unwrap();
    let key = client.find(Locator::Id("key")).await.unwrap();
    key.send_keys(&app.support_key).await.unwrap();
    key.send_keys("\u{E007}").await.unwrap();
    let query = client.find(Locator::Id("query")).await.unwrap();
    query.send_keys(&id).await.unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    let summary = text_with(&client, "summary", "manual (a hold)").await;
    assert!(summary.contains("held until"), "{summary}");
    show(&client, "story").await;
    screenshot(&client, "console-5-hold").await;
    client
        .find(Locator::Id("void-hold"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let result = text_with(&client, "void-result", "Released").await;
    assert!(result.contains("nothing was taken"), "{result}");
    let summary = text_with(&client, "summary", "void by support: succeeded").await;
    assert!(summary.contains("canceled: voided"), "{summary}");
    let timeline = text_with(&client, "timeline", "cancel by").await;
    assert!(timeline.contains("canceled"), "{timeline}");
    screenshot(&client, "console-6-voided").await;
    assert_eq!(app.payment(&id).await["status"], "canceled");
    let voids = app
        .sandbox
        .voids()
        .into_iter()
        .filter(|v| v.attempt_id.as_deref() == Some(id.as_str()))
        .count();
    assert_eq!(voids, 1);
    assert!(app
        .sandbox
        .captures()
        .iter()
        .all(|c| c.attempt_id.as_deref() != Some(id.as_str())));
    // Pressed again (another tab): refused by name, nothing sent.
    let again = app
        .post_keyed(
            &app.support_key,
            &format!("/v1/support/payments/{id}/void"),
            None,
            None,
        )
        .await;
    assert_eq!(again.status(), 409);
    let again: serde_json::Value = again.json().await.unwrap();
    assert_eq!(again["code"], "payment_not_cancelable");
}

/// The console at `/console`, with the support key entered.
async fn open_console(client: &fantoccini::Client, app: &TestApp) {
    client.goto(&app.url("/console")).await.unwrap();
    let key = client.find(Locator::Id("key")).await.unwrap();
    key.send_keys(&app.support_key).await.unwrap();
    key.send_keys("\u{E007}").await.unwrap();
}

/// Types `query` in the search box and submits it.
async fn search_for(client: &fantoccini::Client, query: &str) {
    let input = client.find(Locator::Id("query")).await.unwrap();
    input.clear().await.unwrap();
    input.send_keys(query).await.unwrap();
    input.send_keys("\u{E007}").await.unwrap();
}

/// A manual-capture checkout: a payment that holds its money, `authorized`.
async fn hold(app: &TestApp, key: &str) -> String {
    let held = app
        .checkout(
            key,
            &json!({"amount": 4200, "currency": "eur", "payment_method": "pm_card_visa",
                    "capture_method": "manual"}),
        )
        .await;
    assert_eq!(held.status(), 201);
    let held: serde_json::Value = held.json().await.unwrap();
    assert_eq!(held["payment"]["status"], "authorized");
    held["payment"]["id"].as_str().unwrap().to_owned()
}

/// Whether `#id` is shown: WebDriver's own test, which reads the CSS, not the `hidden`
/// attribute alone.
async fn shown(client: &fantoccini::Client, id: &str) -> bool {
    client
        .find(Locator::Id(id))
        .await
        .unwrap()
        .is_displayed()
        .await
        .unwrap()
}

/// "Void the hold" is offered on a hold only: a `.row`'s `display: flex` once beat the
/// `hidden` attribute, so it showed on every payment. And a void's refusal belongs to its
/// payment's story: it once stayed under the next payment opened.
#[tokio::test]
async fn void_the_hold_shows_on_a_hold_only_and_its_answer_leaves_with_its_story() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let (_, paid) = app
        .pay(Route::Checkout, "console-paid", "pm_card_visa")
        .await;
    let paid = paid["id"].as_str().unwrap().to_owned();
    let first = hold(&app, "console-hold-1").await;
    let second = hold(&app, "console-hold-2").await;

    open_console(&client, &app).await;
    search_for(&client, &paid).await;
    text_with(&client, "summary", &paid).await;
    assert!(
        !shown(&client, "void-hold").await,
        "a succeeded payment offers a void"
    );
    screenshot(&client, "console-10-no-void-on-a-payment").await;

    search_for(&client, &first).await;
    text_with(&client, "summary", &first).await;
    assert!(shown(&client, "void-hold").await, "a hold offers its void");
    // Voided meanwhile from another tab: the console's void is refused, and says so.
    let voided = app
        .post_keyed(
            &app.support_key,
            &format!("/v1/support/payments/{first}/void"),
            None,
            None,
        )
        .await;
    assert_eq!(voided.status(), 200);
    client
        .find(Locator::Id("void-hold"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let refused = text_with(&client, "void-result", "canceled").await;
    screenshot(&client, "console-11-void-refused").await;

    // The next story opened starts clean: no answer of the last one's void.
    search_for(&client, &second).await;
    text_with(&client, "summary", &second).await;
    assert!(shown(&client, "void-hold").await);
    let result = client
        .find(Locator::Id("void-result"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(result, "", "{refused:?} stayed on another payment's story");
    search_for(&client, &paid).await;
    text_with(&client, "summary", &paid).await;
    assert!(!shown(&client, "void-hold").await);
    client.close().await.unwrap();
}

/// Support is told what the merchant or the payer knows: the shop's order reference, the
/// shop's name. Either finds the payments in the search box (once, only ids and keys did).
#[tokio::test]
async fn a_support_person_finds_payments_by_order_reference_and_merchant_name() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let referenced = app
        .checkout(
            "console-ref",
            &json!({"amount": 1500, "currency": "eur", "payment_method": "pm_card_visa",
                    "merchant_reference": "cart-77"}),
        )
        .await;
    assert_eq!(referenced.status(), 201);
    let referenced: serde_json::Value = referenced.json().await.unwrap();
    let referenced = referenced["payment"]["id"].as_str().unwrap().to_owned();
    let (_, other_key) = app.other_merchant().await;
    let theirs = app
        .post_keyed(
            &other_key,
            "/v1/checkout",
            Some("console-theirs"),
            Some(
                json!({"amount": 900, "currency": "usd", "payment_method": "pm_card_visa"})
                    .to_string(),
            ),
        )
        .await;
    assert_eq!(theirs.status(), 201);
    let theirs: serde_json::Value = theirs.json().await.unwrap();
    let theirs = theirs["payment"]["id"].as_str().unwrap().to_owned();

    open_console(&client, &app).await;
    // The order reference: one payment, whose story opens.
    search_for(&client, "cart-77").await;
    let summary = text_with(&client, "summary", &referenced).await;
    assert!(summary.contains("console-ref"), "{summary}");
    let results = text_with(&client, "result-list", &referenced).await;
    assert!(results.contains("by order reference"), "{results}");
    screenshot(&client, "console-12-by-order-reference").await;

    // Part of a merchant's name, in another case: that merchant's payments only.
    search_for(&client, "OTHER merch").await;
    let results = text_with(&client, "result-list", &theirs).await;
    assert!(results.contains("by merchant name"), "{results}");
    assert!(!results.contains(&referenced), "{results}");
    // A part both names share: both merchants' payments, newest first.
    search_for(&client, "merchant").await;
    let results = text_with(&client, "status", "2 payment(s) found").await;
    let listed = run(
        &client,
        "return [...document.querySelectorAll('#result-list a')].map(a => a.textContent)",
    )
    .await;
    assert_eq!(listed, json!([theirs, referenced]), "{results}");
    show(&client, "results").await;
    screenshot(&client, "console-13-by-merchant-name").await;
    // A key is still a key.
    search_for(&client, "console-ref").await;
    text_with(&client, "summary", &referenced).await;
    client.close().await.unwrap();
}

/// The status filter and the chart offer every status the API documents: `authorized` (a
/// hold) and `canceled` (a hold voided) were once missing from both, so such payments could
/// not be listed alone and were left out of the chart's bars.
#[tokio::test]
async fn the_status_filter_and_the_chart_show_every_status() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let (_, paid) = app
        .pay(Route::Checkout, "console-paid", "pm_card_visa")
        .await;
    let paid = paid["id"].as_str().unwrap().to_owned();
    let held = hold(&app, "console-held").await;
    let voided = hold(&app, "console-voided").await;
    let void = app
        .post_keyed(
            &app.support_key,
            &format!("/v1/support/payments/{voided}/void"),
            None,
            None,
        )
        .await;
    assert_eq!(void.status(), 200);
    let documented: serde_json::Value = app.get("/openapi.json").await.json().await.unwrap();
    let documented = &documented["components"]["schemas"]["AttemptStatus"]["enum"];
    assert!(
        documented.as_array().is_some_and(|s| s.len() == 6),
        "{documented}"
    );

    open_console(&client, &app).await;
    latest_rows_become(&client, &[voided.clone(), held.clone(), paid.clone()]).await;
    let drawn = eventually(Duration::from_secs(10), || async {
        !charted(&client).await.is_empty()
    })
    .await;
    assert!(drawn, "the chart is drawn");
    let offered = run(
        &client,
        "return [...document.querySelectorAll('#filter-status option')].map(o => o.value)
           .filter(v => v)",
    )
    .await;
    assert_eq!(&offered, documented);
    let legend = client
        .find(Locator::Id("legend"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        legend.contains("authorized") && legend.contains("canceled"),
        "{legend}"
    );
    let mut bars: Vec<(String, i64)> = charted(&client)
        .await
        .into_iter()
        .filter(|(_, status, _)| status != "none")
        .map(|(_, status, n)| (status, n))
        .collect();
    bars.sort();
    let bar = |s: &str| (s.to_string(), 1);
    assert_eq!(bars, [bar("authorized"), bar("canceled"), bar("succeeded")]);
    show(&client, "overview").await;
    screenshot(&client, "console-14-every-status").await;

    for (status, id) in [("authorized", &held), ("canceled", &voided)] {
        client
            .find(Locator::Id("filter-status"))
            .await
            .unwrap()
            .select_by_value(status)
            .await
            .unwrap();
        latest_rows_become(&client, std::slice::from_ref(id)).await;
    }
    client.close().await.unwrap();
}

/// Merchants are shown by name, their id on hover (and beside the name in a story): once
/// only a cut-off `mer_…` id said whose payment a row was. A merchant made after the page
/// opened is named too.
#[tokio::test]
async fn merchants_are_shown_by_name_with_their_id_at_hand() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let (_, paid) = app
        .pay(Route::Checkout, "console-mine", "pm_card_visa")
        .await;
    let paid = paid["id"].as_str().unwrap().to_owned();
    let merchant = app.merchant_id.to_string();

    open_console(&client, &app).await;
    let rows = text_with(&client, "latest-list", "Test merchant").await;
    assert!(!rows.contains("mer_"), "{rows}");
    let hover = run(
        &client,
        "return document.querySelector('#latest-list .merchant').title",
    )
    .await;
    assert_eq!(hover, json!(merchant));

    // One made since: named once it is met.
    let (other, other_key) = app.other_merchant().await;
    let theirs = app
        .post_keyed(
            &other_key,
            "/v1/checkout",
            Some("console-theirs"),
            Some(
                json!({"amount": 900, "currency": "usd", "payment_method": "pm_card_visa"})
                    .to_string(),
            ),
        )
        .await;
    assert_eq!(theirs.status(), 201);
    tokio::time::sleep(Duration::from_secs(5)).await;
    client
        .find(Locator::Id("latest-refresh"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let rows = text_with(&client, "latest-list", "Other merchant").await;
    assert!(!rows.contains("mer_"), "{rows}");
    assert!(rows.contains("Test merchant"), "{rows}");
    show(&client, "latest").await;
    screenshot(&client, "console-15-merchants-by-name").await;

    search_for(&client, &paid).await;
    let summary = text_with(&client, "summary", &paid).await;
    assert!(
        summary.contains(&format!("Test merchant ({merchant})")),
        "{summary}"
    );
    search_for(&client, &other.to_string()).await;
    let results = text_with(&client, "result-list", "pay_").await;
    assert!(results.contains("Other merchant"), "{results}");
    client.close().await.unwrap();
}

/// A decline reads as words with payorch's code and class beside: an Adyen refusal once read
/// "failed 2", its `refusalReasonCode` alone.
#[tokio::test]
async fn a_decline_reads_in_words_with_its_code() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    // The answers decide, not a webhook that may come first (its refusal names no code).
    app.sandbox.set_webhook_url(None);
    app.sandbox.set_notification_url(None);
    let adyen = app
        .pay_through("adyen", "console-adyen", "pm_card_chargeDeclined")
        .await;
    let adyen = adyen["id"].as_str().unwrap().to_owned();
    let stripe = app
        .pay_through("stripe", "console-stripe", "pm_card_chargeDeclined")
        .await;
    let stripe = stripe["id"].as_str().unwrap().to_owned();

    open_console(&client, &app).await;
    latest_rows_become(&client, &[stripe.clone(), adyen.clone()]).await;
    let row = |id: &str| {
        let client = &client;
        let script = format!(
            "return document.querySelector('#latest-list tr[data-payment=\"{id}\"]').innerText"
        );
        async move { run(client, &script).await.as_str().unwrap().to_owned() }
    };
    let declined = row(&adyen).await;
    // The sandbox's Adyen face says Adyen's name alone as `refusalReason`, as Adyen does.
    assert!(declined.contains("failed Refused ("), "{declined}");
    assert!(
        declined.contains("(generic_decline, soft, provider 2)"),
        "payorch's code, its class and the provider's code: {declined}"
    );
    let declined = row(&stripe).await;
    assert!(
        declined.contains("(generic_decline, soft, provider card_declined/generic_decline)"),
        "the same through either protocol: {declined}"
    );
    show(&client, "latest").await;
    screenshot(&client, "console-16-declines-in-words").await;

    search_for(&client, &adyen).await;
    let summary = text_with(&client, "summary", &adyen).await;
    assert!(summary.contains("Refused"), "{summary}");
    assert!(
        summary.contains("(generic_decline, soft, provider 2)"),
        "{summary}"
    );
    client.close().await.unwrap();
}
