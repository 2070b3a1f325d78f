//! Limits (issue #40; docs/PRODUCTION.md, "Limits and the addresses payorch believes"): reads
//! per key and per address, failed authentication per address with a memory of failed
//! secrets, the payer's return per address and per payment; refusals are `429 rate_limited`
//! with `Retry-After` and the RateLimit fields. And the client address they count: the peer's,
//! unless the peer is a trusted proxy.

use std::time::Duration;

use diesel::sql_types::{Bytea, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use futures_util::{stream, StreamExt};
use payorch::rate_limit::Quota;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, TestApp};

/// `name{labels}`'s value in the app's metrics, 0 when it was never counted.
async fn metric(app: &TestApp, series: &str) -> u64 {
    let text = app.get("/metrics").await.text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

const LOOKED_UP: &str = "payorch_auth_failures_total{answered_by=\"database\"}";
const FROM_MEMORY: &str = "payorch_auth_failures_total{answered_by=\"recent_failure\"}";

fn header<'a>(response: &'a reqwest::Response, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} on {}", response.status()))
        .to_str()
        .unwrap()
}

/// A `429 rate_limited` of `policy`, with the fields that say when to come back.
async fn assert_limited(response: reqwest::Response, policy: &str, quota: u32, window: u64) {
    let retry_after: u64 = header(&response, "retry-after").parse().unwrap();
    assert!((1..=window).contains(&retry_after), "{retry_after}");
    assert_eq!(
        header(&response, "ratelimit-policy"),
        format!("\"{policy}\";q={quota};w={window}")
    );
    assert_eq!(
        header(&response, "ratelimit"),
        format!("\"{policy}\";r=0;t={retry_after}")
    );
    let problem = assert_problem(response, 429, "rate_limited").await;
    assert_eq!(problem["policy"], policy);
}

#[tokio::test]
async fn two_thousand_random_keys_from_one_address_cost_a_few_lookups_then_429() {
    let app = TestApp::spawn().await;
    let path = format!("/v1/merchants/{}", app.merchant_id);
    let statuses: Vec<u16> = stream::iter(0..2_000)
        .map(|n| {
            let (app, path) = (&app, &path);
            async move {
                let secret = format!("sk_mer_random_{n}_{}", uuid::Uuid::now_v7().simple());
                app.get_as(&secret, path).await.status().as_u16()
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let unauthenticated = statuses.iter().filter(|s| **s == 401).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(unauthenticated + limited, 2_000, "{statuses:?}");
    // The default allows 20 failures a minute from one address, then one each 3 s (and the
    // few in flight when the 20th failed).
    assert!(unauthenticated <= 40, "{unauthenticated} answered 401");
    let lookups = metric(&app, LOOKED_UP).await;
    assert!(
        (20..=40).contains(&lookups),
        "{lookups} lookups for 2,000 random keys"
    );
    let response = app.get_as("sk_mer_one_more", &path).await;
    assert_limited(response, "failed-auth-per-address", 20, 60).await;
    assert_eq!(
        metric(&app, LOOKED_UP).await,
        lookups,
        "no lookup for a 429"
    );
}

#[tokio::test]
async fn a_repeated_bad_key_is_answered_from_memory_without_a_lookup() {
    let app = TestApp::spawn_with(|settings| {
        settings.limits.failed_auth_per_address = Quota::per_minute(1_000);
        settings.limits.failed_auth_memory = Duration::from_secs(60);
    })
    .await;
    let path = format!("/v1/merchants/{}", app.merchant_id);
    for _ in 0..50 {
        assert_problem(
            app.get_as("sk_mer_wrong", &path).await,
            401,
            "unauthenticated",
        )
        .await;
    }
    assert_eq!(metric(&app, LOOKED_UP).await, 1);
    assert_eq!(metric(&app, FROM_MEMORY).await, 49);
}

#[tokio::test]
async fn a_key_made_after_a_failed_attempt_works_once_the_short_memory_has_passed() {
    let memory = Duration::from_millis(500);
    let app = TestApp::spawn_with(|settings| settings.limits.failed_auth_memory = memory).await;
    let path = format!("/v1/merchants/{}", app.merchant_id);
    let secret = format!("sk_mer_{}", uuid::Uuid::now_v7().simple());
    assert_problem(app.get_as(&secret, &path).await, 401, "unauthenticated").await;

    // Another process (the CLI) makes a key with that very secret.
    diesel::sql_query(
        "INSERT INTO api_keys (id, secret_sha256, role, merchant_id, name) \
         VALUES ($1, $2, 'merchant', $3, $4)",
    )
    .bind::<SqlUuid, _>(uuid::Uuid::now_v7())
    .bind::<Bytea, _>(payorch::accounts::secret_hash(&secret).to_vec())
    .bind::<SqlUuid, _>(app.merchant_id.0)
    .bind::<Text, _>("made elsewhere")
    .execute(&mut app.db.connect().await)
    .await
    .unwrap();

    tokio::time::sleep(memory + Duration::from_millis(100)).await;
    let response = app.get_as(&secret, &path).await;
    assert_eq!(response.status(), 200, "the new key works");
    assert_eq!(metric(&app, LOOKED_UP).await, 1);
}

#[tokio::test]
async fn reads_over_the_per_key_limit_are_429_and_other_keys_read_on() {
    let app = TestApp::spawn_with(|settings| {
        settings.limits.reads_per_key = Quota::per_minute(5);
    })
    .await;
    let path = format!("/v1/merchants/{}", app.merchant_id);
    for left in (0..5).rev() {
        let response = app.get_as(&app.merchant_key, &path).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "ratelimit-policy"),
            "\"reads-per-key\";q=5;w=60"
        );
        let standing = header(&response, "ratelimit");
        assert!(
            standing.starts_with(&format!("\"reads-per-key\";r={left};t=")),
            "{standing}"
        );
    }
    let refused = app.get_as(&app.merchant_key, &path).await;
    assert_limited(refused, "reads-per-key", 5, 60).await;
    // Writes are not counted in reads.
    let order = json!({"amount": 100, "currency": "eur"}).to_string();
    let created = app
        .post_keyed(
            &app.merchant_key,
            "/v1/orders",
            Some("after-reads"),
            Some(order),
        )
        .await;
    assert_eq!(created.status(), 201);
    let support = app.get_as(&app.support_key, "/v1/support/merchants").await;
    assert_eq!(support.status(), 200, "another key has its own quota");
}

/// Reads per address, with a `X-Forwarded-For` of its choosing on each.
async fn reads_with_forwarded_for(app: &TestApp, clients: &[&str]) -> Vec<u16> {
    let path = format!("/v1/merchants/{}", app.merchant_id);
    let mut statuses = Vec::new();
    for client in clients {
        let response = app
            .client
            .get(app.url(&path))
            .bearer_auth(&app.merchant_key)
            .header("x-forwarded-for", *client)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    statuses
}

const SIX_CLIENTS: [&str; 6] = [
    "203.0.113.1",
    "203.0.113.2",
    "203.0.113.3",
    "203.0.113.4",
    "203.0.113.5",
    "203.0.113.6",
];

#[tokio::test]
async fn a_forwarded_for_from_an_untrusted_peer_escapes_no_per_address_limit() {
    let app = TestApp::spawn_with(|settings| {
        settings.limits.reads_per_address = Quota::per_minute(5);
    })
    .await;
    assert_eq!(
        reads_with_forwarded_for(&app, &SIX_CLIENTS).await,
        [200, 200, 200, 200, 200, 429],
        "six made-up clients are one peer"
    );
}

#[tokio::test]
async fn a_trusted_proxy_is_believed_about_its_clients() {
    let app = TestApp::spawn_with(|settings| {
        settings.limits.reads_per_address = Quota::per_minute(5);
        settings.limits.trusted_proxies.nets = vec!["127.0.0.1/32".parse().unwrap()];
    })
    .await;
    assert_eq!(
        reads_with_forwarded_for(&app, &SIX_CLIENTS).await,
        [200; 6],
        "six clients behind the proxy, each with its own quota"
    );
    // A client that writes its own X-Forwarded-For is seen at the proxy's right-most entry.
    let one = ["198.51.100.1", "10.9.9.9, 198.51.100.1", "198.51.100.1"];
    let statuses = reads_with_forwarded_for(&app, &[&one[..], &one[..]].concat()).await;
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429]);
}

#[tokio::test]
async fn fifty_payer_returns_ask_the_provider_a_few_times_and_the_address_is_limited() {
    let app = TestApp::spawn_with(|settings| {
        settings.reconciler.backoff = vec![Duration::from_secs(60)];
        settings.limits.payer_returns_per_address = Quota::per_minute(40);
    })
    .await;
    app.sandbox.set_webhook_url(None);
    app.sandbox.set_notification_url(None);
    let body = json!({"amount": 4200, "currency": "eur",
        "payment_method": "pm_card_threeDSecure2Required",
        "return_url": "https://shop.example/thanks"});
    let response = app.checkout("returns", &body).await;
    assert_eq!(response.status(), 201);
    let payment: Value = response.json().await.unwrap();
    let id = payment["payment"]["id"].as_str().unwrap().to_owned();
    assert_eq!(payment["payment"]["status"], "pending");

    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let route = app.url(&format!(
        "/v1/payments/{id}/return?redirect_status=succeeded"
    ));
    let mut statuses = Vec::new();
    let mut refused = None;
    for _ in 0..50 {
        let response = browser.get(&route).send().await.unwrap();
        statuses.push(response.status().as_u16());
        if response.status() == 429 {
            refused.get_or_insert(response);
        }
    }
    let answered = statuses.iter().filter(|s| **s == 303).count();
    assert_eq!(answered, 40, "{statuses:?}");
    assert_limited(refused.unwrap(), "payer-returns-per-address", 40, 60).await;

    let story = app.story(&id).await;
    let checks = story["provider_calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|call| call["operation"] == "complete_action")
        .count();
    // Two at once, then one each 5 s: the loop takes well under 5 s, a slow machine maybe more.
    assert!((1..=4).contains(&checks), "{checks} provider checks");
}

#[tokio::test]
async fn the_openapi_document_lists_the_429_of_every_limit() {
    let app = TestApp::spawn().await;
    let doc: Value = app.get("/openapi.json").await.json().await.unwrap();
    let too_many = |path: &str, method: &str| {
        let pointer = format!("/paths/{}/{method}/responses/429", path.replace('/', "~1"));
        doc.pointer(&pointer)
            .unwrap_or_else(|| panic!("no 429 for {method} {path}"))
            .clone()
    };
    let read = too_many("/v1/payments/{id}", "get");
    let described = read["description"].as_str().unwrap();
    for policy in [
        "failed-auth-per-address",
        "reads-per-key",
        "reads-per-address",
    ] {
        assert!(described.contains(policy), "{described}");
    }
    for name in ["Retry-After", "RateLimit-Policy", "RateLimit"] {
        assert!(read["headers"][name].is_object(), "{read}");
    }
    let write = too_many("/v1/checkout", "post");
    assert!(write["description"]
        .as_str()
        .unwrap()
        .contains("failed-auth-per-address"));
    let payer_return = too_many("/v1/payments/{id}/return", "get");
    assert!(
        payer_return["headers"]["RateLimit"].is_object(),
        "{payer_return}"
    );
}

/// A shared address (a NAT) where someone keeps sending a dead key: the live keys behind it
/// work on after their cache entries go stale; a key this replica never saw live meets the
/// limit.
#[tokio::test]
async fn a_live_key_is_looked_up_past_its_address_s_failed_auth_limit() {
    let ttl = Duration::from_millis(300);
    let app = TestApp::spawn_with(|settings| {
        settings.auth_cache_ttl = ttl;
        settings.limits.failed_auth_per_address = Quota::per_minute(3);
    })
    .await;
    let path = format!("/v1/merchants/{}", app.merchant_id);
    assert_eq!(app.get_as(&app.merchant_key, &path).await.status(), 200);
    for n in 0..3 {
        let dead = format!("sk_mer_dead_{n}");
        assert_problem(app.get_as(&dead, &path).await, 401, "unauthenticated").await;
    }
    let response = app.get_as("sk_mer_dead_again", &path).await;
    assert_limited(response, "failed-auth-per-address", 3, 60).await;

    tokio::time::sleep(ttl + Duration::from_millis(200)).await;
    let lookups = metric(&app, LOOKED_UP).await;
    for _ in 0..2 {
        let response = app.get_as(&app.merchant_key, &path).await;
        assert_eq!(response.status(), 200, "the live key, its entry stale");
        tokio::time::sleep(ttl + Duration::from_millis(50)).await;
    }
    let never_seen = format!("sk_mer_{}", uuid::Uuid::now_v7().simple());
    let response = app.get_as(&never_seen, &path).await;
    assert_limited(response, "failed-auth-per-address", 3, 60).await;
    assert_eq!(
        metric(&app, LOOKED_UP).await,
        lookups,
        "no secret that is no live key was looked up"
    );
}

/// A key this replica found live, which has since become no live key without the key poll
/// seeing it (its expiry passed, with no write to the row): looked up once past the limit,
/// then forgotten, so its next try meets the limit like any dead key.
#[tokio::test]
async fn a_remembered_key_that_died_is_looked_up_once_then_meets_the_limit() {
    let ttl = Duration::from_millis(300);
    let app = TestApp::spawn_with(|settings| {
        settings.auth_cache_ttl = ttl;
        settings.limits.failed_auth_per_address = Quota::per_minute(3);
        settings.limits.failed_auth_memory = Duration::ZERO;
    })
    .await;
    let path = format!("/v1/merchants/{}", app.merchant_id);
    let mut conn = app.db.connect().await;
    let first = payorch::accounts::life::list_keys(
        &mut conn,
        payorch::accounts::life::KeyFilter::Merchant(app.merchant_id),
    )
    .await
    .unwrap()[0]
        .id;
    // It ends in a few seconds, and is first seen once the key poll is done evicting it for
    // that change (its margin): no later write tells the poll that it ended.
    let set_at = tokio::time::Instant::now();
    diesel::sql_query(
        "UPDATE api_keys SET expires_at = now() + interval '5 seconds' WHERE id = $1",
    )
    .bind::<SqlUuid, _>(first.0)
    .execute(&mut conn)
    .await
    .unwrap();
    tokio::time::sleep(payorch::accounts::sync::MARGIN + Duration::from_secs(1)).await;
    assert_eq!(app.get_as(&app.merchant_key, &path).await.status(), 200);
    for n in 0..3 {
        let dead = format!("sk_mer_dead_{n}");
        assert_problem(app.get_as(&dead, &path).await, 401, "unauthenticated").await;
    }
    tokio::time::sleep_until(set_at + Duration::from_millis(5_500)).await;

    let lookups = metric(&app, LOOKED_UP).await;
    let response = app.get_as(&app.merchant_key, &path).await;
    assert_limited(response, "failed-auth-per-address", 3, 60).await;
    assert_eq!(metric(&app, LOOKED_UP).await, lookups + 1, "looked up once");
    let response = app.get_as(&app.merchant_key, &path).await;
    assert_limited(response, "failed-auth-per-address", 3, 60).await;
    assert_eq!(
        metric(&app, LOOKED_UP).await,
        lookups + 1,
        "forgotten: refused before any lookup"
    );
}
