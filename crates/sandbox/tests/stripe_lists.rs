//! What the Stripe face's reads promise, as Stripe's docs do: a retrieve by id and the list
//! APIs are read-after-write, search lags (`--search-lag-secs`); the lists take Stripe's
//! `created` window with `limit`, `starting_after` and `ending_before`, newest first.

mod common;

use std::time::{Duration, Instant};

use common::{client, fast, get, start, stripe_post, SandboxConfig};
use payorch_sandbox::SandboxHandle;
use serde_json::Value;

/// A charged intent for `attempt`: its id and `created`.
async fn paid(client: &reqwest::Client, sandbox: &SandboxHandle, attempt: &str) -> (String, i64) {
    let form = [
        ("amount", "900"),
        ("currency", "eur"),
        ("payment_method", "pm_card_visa"),
        ("confirm", "true"),
        ("payment_method_types[0]", "card"),
        ("metadata[attempt_id]", attempt),
    ];
    let made = stripe_post(client, sandbox, "/v1/payment_intents", None, &form)
        .await
        .expect("answered");
    assert_eq!(made.status, 200, "{}", made.body);
    let id = made.body["id"].as_str().expect("an id").to_owned();
    (id, made.body["created"].as_i64().expect("created"))
}

fn ids(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|item| item["id"].as_str().expect("an id").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_shows_an_intent_only_once_it_has_existed_the_lag_and_reads_by_id_at_once() {
    let sandbox = start(SandboxConfig {
        search_lag_secs: 1,
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let (id, _) = paid(&client, &sandbox, "att_lagging").await;
    let made_at = Instant::now();
    let search =
        "/v1/payment_intents/search?query=metadata%5B%27attempt_id%27%5D%3A%27att_lagging%27";
    let found = get(&client, &sandbox, search).await;
    assert_eq!(found.status, 200);
    assert!(
        ids(&found.body).is_empty(),
        "too young to search: {}",
        found.body
    );
    let retrieved = get(&client, &sandbox, &format!("/v1/payment_intents/{id}")).await;
    assert_eq!(
        retrieved.body["status"], "succeeded",
        "a retrieve is immediate"
    );
    let listed = get(&client, &sandbox, "/v1/payment_intents").await;
    assert_eq!(ids(&listed.body), [id.as_str()], "a list is immediate");

    loop {
        let found = get(&client, &sandbox, search).await;
        if ids(&found.body) == [id.as_str()] {
            assert!(
                made_at.elapsed() >= Duration::from_millis(900),
                "shown after {:?}",
                made_at.elapsed()
            );
            break;
        }
        assert!(made_at.elapsed() < Duration::from_secs(5), "never shown");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_search_lags_a_minute() {
    let sandbox = start(SandboxConfig {
        search_lag_secs: payorch_sandbox::DEFAULT_SEARCH_LAG_SECS,
        ..fast()
    })
    .await;
    assert_eq!(payorch_sandbox::DEFAULT_SEARCH_LAG_SECS, 60);
    let client = client(Duration::from_secs(5));
    paid(&client, &sandbox, "att_minute").await;
    let found = get(
        &client,
        &sandbox,
        "/v1/payment_intents/search?query=status%3A%27succeeded%27",
    )
    .await;
    assert!(ids(&found.body).is_empty(), "{}", found.body);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_takes_a_created_window_and_pages_through_it_newest_first() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    // Four intents, each made in a second of its own.
    let mut made: Vec<(String, i64)> = Vec::new();
    for attempt in ["att_a", "att_b", "att_c", "att_d"] {
        if let Some((_, previous)) = made.last() {
            while unix_now() <= *previous {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        made.push(paid(&client, &sandbox, attempt).await);
    }
    let [a, b, c, d] = [0, 1, 2, 3].map(|i| made[i].clone());
    assert!(a.1 < b.1 && b.1 < c.1 && c.1 < d.1, "{made:?}");

    let list = |query: String| {
        let client = client.clone();
        let sandbox = &sandbox;
        async move { get(&client, sandbox, &format!("/v1/payment_intents?{query}")).await }
    };
    assert_eq!(
        ids(&list(String::new()).await.body),
        [&d.0, &c.0, &b.0, &a.0].map(String::as_str),
        "newest first"
    );
    let exact = list(format!("created={}", b.1)).await;
    assert_eq!(ids(&exact.body), [b.0.as_str()]);
    let window = format!("created%5Bgt%5D={}&created%5Blt%5D={}", a.1, d.1);
    let page_one = list(format!("{window}&limit=1")).await;
    assert_eq!(page_one.status, 200, "{}", page_one.body);
    assert_eq!(ids(&page_one.body), [c.0.as_str()]);
    assert_eq!(page_one.body["has_more"], true);
    let page_two = list(format!("{window}&limit=1&starting_after={}", c.0)).await;
    assert_eq!(ids(&page_two.body), [b.0.as_str()]);
    assert_eq!(page_two.body["has_more"], false, "{}", page_two.body);
    let back = list(format!("{window}&limit=1&ending_before={}", b.0)).await;
    assert_eq!(ids(&back.body), [c.0.as_str()]);
    assert_eq!(back.body["has_more"], false);
    let up_to = list(format!("created%5Blte%5D={}", b.1)).await;
    assert_eq!(ids(&up_to.body), [b.0.as_str(), a.0.as_str()]);
    let from = list(format!("created%5Bgte%5D={}&limit=2", c.1)).await;
    assert_eq!(ids(&from.body), [d.0.as_str(), c.0.as_str()]);
    assert_eq!(from.body["has_more"], false);

    for refused in [
        "created%5Bgt%5D=yesterday",
        "limit=101",
        "colour=blue",
        "starting_after=a&ending_before=b",
    ] {
        let answer = list(refused.to_owned()).await;
        assert_eq!(answer.status, 400, "{refused}: {}", answer.body);
        assert_eq!(answer.body["error"]["type"], "invalid_request_error");
    }
    let unknown = list("starting_after=pi_nope".into()).await;
    assert_eq!(unknown.body["error"]["code"], "resource_missing");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_runs_into_forgotten_intents_says_so_rather_than_end_short() {
    let sandbox = start(SandboxConfig {
        keep_intents: 2,
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let (kept, created) = paid(&client, &sandbox, "att_first").await;
    let whole = get(&client, &sandbox, "/v1/payment_intents").await;
    assert_eq!(whole.status, 200, "nothing forgotten yet");
    for attempt in ["att_second", "att_third"] {
        paid(&client, &sandbox, attempt).await;
    }
    assert_eq!(sandbox.forgotten().intents, 1);
    let window = format!("/v1/payment_intents?created%5Bgte%5D={}", created - 60);
    let gone = get(&client, &sandbox, &window).await;
    assert_eq!(gone.status, 410, "{}", gone.body);
    assert_eq!(gone.body["error"]["code"], "sandbox_forgotten");
    // A page that does not reach the oldest kept is whole; so is a window after the
    // forgotten ones.
    let page = get(&client, &sandbox, "/v1/payment_intents?limit=1").await;
    assert_eq!(
        (page.status, page.body["has_more"].as_bool()),
        (200, Some(true))
    );
    let later = get(
        &client,
        &sandbox,
        &format!("/v1/payment_intents?created%5Bgt%5D={}", unix_now() + 5),
    )
    .await;
    assert_eq!(later.status, 200, "{}", later.body);
    let retrieved = get(&client, &sandbox, &format!("/v1/payment_intents/{kept}")).await;
    assert_eq!(retrieved.status, 410);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refund_list_pages_as_the_intent_list_does() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    let (id, _) = paid(&client, &sandbox, "att_refunds").await;
    let (other, _) = paid(&client, &sandbox, "att_other").await;
    let mut refunds = Vec::new();
    for (intent, amount) in [(&id, "100"), (&other, "100"), (&id, "200"), (&id, "300")] {
        let form = [("payment_intent", intent.as_str()), ("amount", amount)];
        let made = stripe_post(&client, &sandbox, "/v1/refunds", None, &form)
            .await
            .expect("answered");
        assert_eq!(made.status, 200, "{}", made.body);
        if *intent == id {
            refunds.push(made.body["id"].as_str().expect("an id").to_owned());
        }
    }
    let list = |query: String| {
        let client = client.clone();
        let sandbox = &sandbox;
        async move { get(&client, sandbox, &format!("/v1/refunds?{query}")).await }
    };
    let first = list(format!("payment_intent={id}&limit=2")).await;
    assert_eq!(ids(&first.body), [refunds[2].clone(), refunds[1].clone()]);
    assert_eq!(first.body["has_more"], true);
    let next = list(format!(
        "payment_intent={id}&limit=2&starting_after={}",
        refunds[1]
    ))
    .await;
    assert_eq!(ids(&next.body), [refunds[0].clone()]);
    assert_eq!(next.body["has_more"], false);
    let back = list(format!(
        "payment_intent={id}&limit=1&ending_before={}",
        refunds[0]
    ))
    .await;
    assert_eq!(ids(&back.body), [refunds[1].clone()]);
    assert_eq!(back.body["has_more"], true);
    let everything = list("limit=100".into()).await;
    assert_eq!(
        ids(&everything.body).len(),
        4,
        "every refund without a filter"
    );
    let now = unix_now();
    let window = list(format!("payment_intent={id}&created%5Bgt%5D={}", now + 10)).await;
    assert!(ids(&window.body).is_empty(), "{}", window.body);
    let unknown = list("payment_intent=pi_nope".into()).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.body["error"]["code"], "resource_missing");
    sandbox.stop().await;
}

/// Now, in Unix seconds, as `created` counts.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}
