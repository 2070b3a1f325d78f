//! Routing by success (docs/guides/routing.md, "Routing by success"): two sandbox providers,
//! `a` (spoken to as Stripe) and `b` (as Adyen), each drawing approvals and soft declines
//! from its face's mix. After `a`'s approval rate falls, most payments go to `b`; the scores
//! are read from the database, so a second replica shows the same.

use std::time::Duration;

use diesel_async::RunQueryDsl;
use fantoccini::Locator;
use serde_json::{json, Value};

use payorch::db::migrations::run_migrations;
use payorch::providers::circuit::CircuitSettings;
use payorch_sandbox::{Face, Mix};

use crate::browser::{browser, screenshot, show, text_with};
use crate::helpers::{eventually, TestApp, TestDatabase};

/// Approves `approval`, and declines the rest softly: every outcome is scored.
fn mix(approval: f64) -> Mix {
    Mix::parse(&format!(
        "approval={approval},soft=1,hard=0,authentication_required=0"
    ))
    .expect("a mix")
}

/// Two sandbox providers, the merchant's route `providers` ordered by success.
async fn routed_by_success(providers: &[&str]) -> TestApp {
    let app = TestApp::spawn_config(|config| {
        config.two_providers = Some(CircuitSettings {
            threshold: 1000,
            cool_down: Duration::from_secs(60),
        })
    })
    .await;
    let set = app
        .client
        .put(app.url(&format!("/v1/merchants/{}/routing", app.merchant_id)))
        .bearer_auth(&app.support_key)
        .json(&json!({"providers": providers, "strategy": "success_rate"}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let set: Value = set.json().await.unwrap();
    assert_eq!(set["strategy"], "success_rate", "{set}");
    app
}

/// `n` checkouts one after another, paced so the scores are read again while they run: how
/// many were first tried at `a` (no retry is on, and nobody is unreached, so the payment's
/// provider is the first tried).
async fn first_at_a(app: &TestApp, label: &str, n: usize) -> usize {
    let mut at_a = 0;
    for i in 0..n {
        let body = json!({"amount": 1000, "currency": "eur", "payment_method": "pm_sandbox_mix"});
        let paid: Value = app
            .checkout(&format!("{label}-{i}"), &body)
            .await
            .json()
            .await
            .unwrap();
        let provider = &paid["payment"]["provider"];
        assert!(provider == "a" || provider == "b", "{paid}");
        at_a += usize::from(provider == "a");
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    at_a
}

/// `provider`'s score in eur as `base_url` shows it.
async fn score(app: &TestApp, base_url: &str, provider: &str) -> Value {
    let scores: Value = app
        .client
        .get(format!("{base_url}/v1/support/routing/scores"))
        .bearer_auth(&app.support_key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    scores["scores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["provider"] == provider && s["currency"] == "eur")
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn payments_move_away_from_a_provider_whose_approvals_fall() {
    let app = routed_by_success(&["a", "b"]).await;
    let b = &app.second.as_ref().expect("two providers").sandbox;
    app.sandbox.set_mix(Face::Stripe, mix(0.95));
    b.set_mix(Face::Adyen, mix(0.8));

    // Both judged: a, the better, takes most payments (b gets the exploration's 10 %).
    let before = first_at_a(&app, "before", 40).await;
    assert!(before >= 24, "{before} of 40 first at a");

    app.sandbox.set_mix(Face::Stripe, mix(0.2));
    // A few payments to notice, then a is behind b (or eliminated): only exploration and
    // probes reach it.
    first_at_a(&app, "noticing", 20).await;
    let after = first_at_a(&app, "after", 40).await;
    assert!(after <= 10, "{after} of 40 first at a after its fall");

    // The scores come from the database: a replica that made none of these payments shows
    // the same as the one that made them, once both have read them again.
    let (replica, handle) = app.replica().await;
    let same = eventually(Duration::from_secs(5), || async {
        let (here, there) = (
            score(&app, &app.base_url, "a").await,
            score(&app, &replica, "a").await,
        );
        here == there && here["scored"].as_u64().unwrap_or(0) > 0
    })
    .await;
    assert!(same, "both replicas show a's score");
    let a = score(&app, &replica, "a").await;
    let b_score = score(&app, &replica, "b").await;
    assert!(
        a["rate"].as_f64().unwrap() < b_score["rate"].as_f64().unwrap(),
        "a {a}, b {b_score}"
    );
    handle.stop(true).await;

    // The gauges say what the scores say: both are of the same attempts once the replica has
    // read them again after the last one settled (a late answer may still move one), so they
    // are compared until they agree, for at most 10 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = app.get("/metrics").await.text().await.unwrap();
        let mut agree = true;
        for provider in ["a", "b"] {
            let shown = score(&app, &app.base_url, provider).await;
            let rate = shown["rate"].as_f64().unwrap();
            let scored = shown["scored"].as_f64().unwrap();
            let eliminated = f64::from(u8::from(!shown["eliminated_since"].is_null()));
            let shows = |name: &str| gauge(&text, name, provider);
            agree &= shows("payorch_provider_approval_rate")
                .is_some_and(|g| (g - rate).abs() < 1e-9)
                && shows("payorch_provider_scored_outcomes") == Some(scored)
                && shows("payorch_provider_eliminated") == Some(eliminated);
        }
        if agree || std::time::Instant::now() >= deadline {
            assert!(agree, "the gauges never agreed with the scores:\n{text}");
            break text;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let age = text
        .lines()
        .find_map(|l| l.strip_prefix("payorch_provider_scores_age_seconds "))
        .and_then(|v| v.parse::<f64>().ok());
    assert!(age.is_some_and(|age| (0.0..5.0).contains(&age)), "{text}");
}

/// The value of `name`{provider, currency="eur"} in a /metrics text.
fn gauge(text: &str, name: &str, provider: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| {
            l.contains(&format!("provider=\"{provider}\"")) && l.contains("currency=\"eur\"")
        })
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test]
async fn the_cards_declines_are_never_scored() {
    // a alone: the declines below cannot be explored to b and leave a's score unchecked.
    let app = routed_by_success(&["a"]).await;
    app.sandbox.set_mix(Face::Stripe, mix(1.0));
    let at_a = first_at_a(&app, "approved", 12).await as u64;
    let scored = |s: Value| s["scored"].as_u64().unwrap_or(0);
    assert!(
        eventually(Duration::from_secs(5), || async {
            scored(score(&app, &app.base_url, "a").await) == at_a
        })
        .await
    );
    // A hard decline and one asking for 3-D Secure, the card's doing: neither moves a's
    // score. (An open attempt's outcome is not scored either, until it is known:
    // `payments::success_scores`' unit tests.)
    for (i, method) in [
        "pm_card_chargeDeclinedLostCard",
        "pm_sandbox_decline_authentication_required",
    ]
    .iter()
    .enumerate()
    {
        let body = json!({"amount": 1000, "currency": "eur", "payment_method": method});
        let paid: Value = app
            .checkout(&format!("unscored-{i}"), &body)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(paid["payment"]["status"], "failed", "{paid}");
        assert_eq!(paid["payment"]["provider"], "a", "{paid}");
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let a = score(&app, &app.base_url, "a").await;
    assert_eq!(
        (scored(a.clone()), a["approved"].as_u64()),
        (at_a, Some(at_a)),
        "{a}"
    );
}

#[tokio::test]
async fn the_console_shows_the_scores() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    for i in 0..12 {
        let method = if i < 3 {
            "pm_card_chargeDeclined"
        } else {
            "pm_card_visa"
        };
        let body = json!({"amount": 1000, "currency": "eur", "payment_method": method});
        assert_eq!(
            app.checkout(&format!("console-{i}"), &body).await.status(),
            201
        );
    }
    let read = eventually(Duration::from_secs(5), || async {
        score(&app, &app.base_url, "stripe").await["scored"] == 12
    })
    .await;
    assert!(read, "the scores were read");

    client.goto(&app.url("/console")).await.unwrap();
    let key = client.find(Locator::Id("key")).await.unwrap();
    key.send_keys(&app.support_key).await.unwrap();
    key.send_keys("\u{E007}").await.unwrap();
    let row = text_with(&client, "scores-list", "stripe").await;
    assert!(row.contains("stripe EUR 75 % 9 of 12 (window 20)"), "{row}");
    show(&client, "scores").await;
    screenshot(&client, "console-success-scores").await;
}

/// The scores' statement reads `payment_attempts` only through the index made for it: its
/// predicate is the index's, so the planner may use it (sequential scans off, so a small
/// table's cheaper scan does not hide a predicate it cannot match), and it skips from pair to
/// pair by the index's own order.
#[tokio::test]
async fn the_scores_are_read_through_their_index() {
    #[derive(diesel::QueryableByName)]
    struct Plan {
        #[diesel(sql_type = diesel::sql_types::Text, column_name = "QUERY PLAN")]
        line: String,
    }
    let app = TestApp::spawn().await;
    let statement = include_str!("../sql/success_scores.sql").replace("$1", "20");
    let mut conn = app.db.connect().await;
    diesel::sql_query("SET enable_seqscan = off")
        .execute(&mut conn)
        .await
        .unwrap();
    let plan: Vec<Plan> = diesel::sql_query(format!("EXPLAIN {statement}"))
        .load(&mut conn)
        .await
        .unwrap();
    let plan: Vec<String> = plan.into_iter().map(|p| p.line).collect();
    let scans: Vec<&String> = plan
        .iter()
        .filter(|l| l.contains("Scan") && l.contains("payment_attempts"))
        .collect();
    assert_eq!(scans.len(), 3, "{plan:#?}");
    assert!(
        scans
            .iter()
            .all(|l| l.contains("using payment_attempts_scored")),
        "{plan:#?}"
    );
    // The skip to the next pair is a condition of the index, not a filter over all of it.
    assert!(
        plan.iter()
            .any(|l| l.contains("Index Cond: (ROW(provider, currency) > ROW(")),
        "{plan:#?}"
    );
}

/// The scores' index is built CONCURRENTLY (migration 2026-11-27-000027-1), which leaves an
/// INVALID index behind if the build fails; the migrations as they run leave a valid one.
#[tokio::test]
async fn the_scores_index_built_concurrently_is_valid() {
    #[derive(diesel::QueryableByName)]
    struct Index {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        valid: bool,
    }
    let db = TestDatabase::empty().await;
    run_migrations(&db.url).await.unwrap();
    let mut conn = db.connect().await;
    let index: Vec<Index> = diesel::sql_query(
        "SELECT indisvalid AS valid FROM pg_index \
         WHERE indrelid = 'payment_attempts'::regclass \
           AND indexrelid::regclass::text = 'payment_attempts_scored'",
    )
    .load(&mut conn)
    .await
    .unwrap();
    assert_eq!(index.iter().map(|i| i.valid).collect::<Vec<_>>(), [true]);
}

/// The numbers docs/guides/routing.md, "Routing by success" gives, replayed without a server:
/// `a` approving 90 % and `b` 80 % (every decline soft, so every outcome scored), `a` falling
/// to 30 % after 300 payments and back at 90 % after 600, one payment a second and the
/// scores read again before each. Over 20 seeds: how many payments after the fall until
/// fewer than 4 of the last 20 went first to `a`, and after the recovery until more than 8
/// did (the chaos driver's `routing` run judges the same way).
#[test]
fn traffic_leaves_a_falling_provider_and_comes_back_within_the_documented_payments() {
    use chrono::{Duration as Span, TimeZone, Utc};
    use payorch::payments::success_routing::{order, Outcome, Probes, Score, Scores};
    use rand::{Rng, SeedableRng};

    let (mut left, mut back) = (Vec::new(), Vec::new());
    for seed in 0..20 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut probes = Probes::default();
        let mut outcomes: [Vec<Outcome>; 2] = Default::default();
        let mut firsts = Vec::new();
        for n in 0..1200 {
            let now = Utc.with_ymd_and_hms(2026, 11, 27, 12, 0, 0).unwrap() + Span::seconds(n);
            let rate_a = if (300..600).contains(&n) { 0.3 } else { 0.9 };
            let scores = Scores {
                by: ["a", "b"]
                    .iter()
                    .zip(&outcomes)
                    .map(|(p, o)| ((p.to_string(), "eur".into()), Score::of(o, now)))
                    .collect(),
            };
            let first = order(&["a", "b"], "eur", &scores, &mut probes, now, &mut rng)[0];
            let approved = rng.random_bool(if first == 0 { rate_a } else { 0.8 });
            outcomes[first].insert(0, Outcome { approved, at: now });
            firsts.push(first == 0);
        }
        let at_a = |end: usize| firsts[end - 20..end].iter().filter(|a| **a).count();
        left.push((320..=600).find(|&end| at_a(end) < 4).map(|end| end - 300));
        back.push((620..=1200).find(|&end| at_a(end) > 8).map(|end| end - 600));
    }
    // Each count includes the 20 payments of the window that judges it.
    let worst = |v: &[Option<usize>]| v.iter().map(|n| n.unwrap_or(usize::MAX)).max().unwrap();
    let mean =
        |v: &[Option<usize>]| v.iter().map(|n| n.unwrap_or(usize::MAX)).sum::<usize>() / v.len();
    let (left_mean, left_worst, back_mean, back_worst) =
        (mean(&left), worst(&left), mean(&back), worst(&back));
    eprintln!("left after {left_mean} (worst {left_worst}), back after {back_mean} (worst {back_worst}) payments");
    assert!(left_worst <= 50, "{left:?}");
    assert!(back_worst <= 400, "{back:?}");
}
