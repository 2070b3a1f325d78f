//! Approval rates, decline mixes and outages per face (docs/guides/test-cards.md, "Approval
//! rates and outages"), over HTTP: each answer is the draw the seed and the key give, so the
//! shares hold within binomial bounds; a resend under a key gets the first answer; the same
//! key meets the same decline through both faces; a mix changed at run time holds from the
//! next charge; each outage does what it says to the ledger.

mod common;

use std::time::Duration;

use common::{adyen_post, client, fast, start, Answer, SECRET};
use payorch_sandbox::{Drawn, Face, Mix, Outage, SandboxConfig, SandboxHandle, DECLINES};
use serde_json::json;

const SEED: u64 = 43;

fn config(stripe: &str, adyen: &str) -> SandboxConfig {
    SandboxConfig {
        stripe_mix: Mix::parse(stripe).expect("stripe mix"),
        adyen_mix: Mix::parse(adyen).expect("adyen mix"),
        mix_seed: SEED,
        ..fast()
    }
}

async fn stripe_charge(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    token: &str,
    key: &str,
) -> Option<Answer> {
    let form = [
        ("amount", "1000"),
        ("currency", "eur"),
        ("payment_method", token),
        ("confirm", "true"),
        ("payment_method_types[0]", "card"),
        ("metadata[attempt_id]", key),
    ];
    // Not `common::stripe_post`: a dropped connection may fail the body after its head,
    // which is no answer either.
    let response = client
        .post(format!("{}/v1/payment_intents", sandbox.base_url()))
        .bearer_auth(SECRET)
        .header("Idempotency-Key", key)
        .form(&form)
        .send()
        .await
        .ok()?;
    let status = response.status().as_u16();
    let replayed = response.headers().contains_key("Idempotent-Replayed");
    let bytes = response.bytes().await.ok()?.to_vec();
    Some(Answer {
        status,
        body: serde_json::from_slice(&bytes).unwrap_or_default(),
        bytes,
        replayed,
    })
}

async fn adyen_charge(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    token: &str,
    key: &str,
) -> Option<Answer> {
    let body = json!({
        "amount": {"value": 1000, "currency": "EUR"},
        "reference": key,
        "merchantAccount": "PayorchECOM",
        "paymentMethod": {"type": "scheme", "storedPaymentMethodId": token},
    });
    adyen_post(client, sandbox, "/v71/payments", Some(key), &body).await
}

/// What a Stripe-face answer says: approved, the decline row it names, or an outage.
fn read_stripe(answer: Option<&Answer>) -> Drawn {
    let Some(answer) = answer else {
        return Drawn::Outage(Outage::Timeout);
    };
    match answer.status {
        200 => Drawn::Approved,
        402 => {
            let error = &answer.body["error"];
            let row = DECLINES
                .iter()
                .find(|d| {
                    error["code"] == d.code && error["decline_code"].as_str() == d.decline_code
                })
                .unwrap_or_else(|| panic!("no row says {error}"));
            Drawn::Declined(row)
        }
        403 => Drawn::Outage(Outage::Refused),
        500 => Drawn::Outage(Outage::ErrorBefore),
        other => panic!("{other}: {}", answer.body),
    }
}

/// Within 4.5 standard deviations of a binomial share (the seed is fixed, so the test does
/// not flicker; a wrong rate is far outside).
fn near(observed: usize, p: f64, n: usize) {
    let share = observed as f64 / n as f64;
    let sd = (p * (1.0 - p) / n as f64).sqrt();
    assert!(
        (share - p).abs() <= 4.5 * sd + 1e-9,
        "{observed} of {n} is not {p} ± {}",
        4.5 * sd
    );
}

fn approved(drawn: &[Drawn]) -> usize {
    drawn.iter().filter(|d| **d == Drawn::Approved).count()
}

#[tokio::test]
async fn an_ordinary_card_is_approved_at_the_face_s_rate_and_a_resend_gets_the_first_answer() {
    let written = "approval=0.7,soft=0.5,hard=0.3,authentication_required=0.2";
    let sandbox = start(config(written, "")).await;
    let client = client(Duration::from_secs(5));
    let mix = Mix::parse(written).expect("mix");
    let n = 400;
    let mut drawn = Vec::new();
    for i in 0..n {
        let key = format!("rate-{i}");
        let first = stripe_charge(&client, &sandbox, "pm_card_visa", &key).await;
        let answer = read_stripe(first.as_ref());
        assert_eq!(answer, mix.draw(SEED, Some(&key), None), "{key}");
        let again = stripe_charge(&client, &sandbox, "pm_card_visa", &key)
            .await
            .expect("answered");
        let first = first.expect("answered");
        assert!(again.replayed, "{key}");
        assert_eq!(
            (again.status, &again.bytes),
            (first.status, &first.bytes),
            "{key}"
        );
        drawn.push(answer);
    }
    near(approved(&drawn), 0.7, n);
    let class = |tokens: &[&str]| {
        drawn
            .iter()
            .filter(|d| matches!(d, Drawn::Declined(row) if tokens.contains(&row.token.unwrap_or_default())))
            .count()
    };
    near(class(payorch_sandbox::SOFT), 0.3 * 0.5, n);
    near(class(payorch_sandbox::HARD), 0.3 * 0.3, n);
    near(class(payorch_sandbox::AUTHENTICATION), 0.3 * 0.2, n);
    // What was approved is charged, and nothing else.
    let charged = sandbox.ledger().iter().filter(|e| e.is_charged()).count();
    assert_eq!(charged, approved(&drawn));

    // The Adyen face of the same sandbox keeps its own mix: every card approved.
    for i in 0..20 {
        let answer = adyen_charge(&client, &sandbox, "pm_card_visa", &format!("plain-{i}"))
            .await
            .expect("answered");
        assert_eq!(answer.body["resultCode"], "Authorised", "{}", answer.body);
    }
    sandbox.stop().await;
}

#[tokio::test]
async fn the_same_key_meets_the_same_decline_through_both_faces() {
    let written = "approval=0.4,soft=0.4,hard=0.4,authentication_required=0.2";
    // Two sandboxes, one face each, as two providers of a route: a key is one charge's.
    let stripe = start(config(written, written)).await;
    let adyen = start(config(written, written)).await;
    let client = client(Duration::from_secs(5));
    let mut declines = 0;
    for i in 0..150 {
        let key = format!("both-{i}");
        let through_stripe = read_stripe(
            stripe_charge(&client, &stripe, "pm_card_visa", &key)
                .await
                .as_ref(),
        );
        let answer = adyen_charge(&client, &adyen, "pm_card_visa", &key)
            .await
            .expect("answered");
        match through_stripe {
            Drawn::Approved => assert_eq!(answer.body["resultCode"], "Authorised", "{key}"),
            Drawn::Declined(row) => {
                declines += 1;
                assert_eq!(answer.body["resultCode"], "Refused", "{key}");
                assert_eq!(answer.body["refusalReasonCode"], row.adyen.code, "{key}");
                assert_eq!(answer.body["refusalReason"], row.adyen.reason, "{key}");
                assert_eq!(
                    answer.body["additionalData"]
                        .get("refusalReasonRaw")
                        .and_then(|v| v.as_str()),
                    row.adyen.raw,
                    "{key}"
                );
            }
            Drawn::Outage(outage) => panic!("{key}: no outage asked for, got {outage:?}"),
        }
    }
    assert!(declines > 50, "{declines}");
    stripe.stop().await;
    adyen.stop().await;
}

#[tokio::test]
async fn a_mix_changed_at_run_time_holds_from_the_next_charge() {
    let sandbox = start(config("approval=0.9", "")).await;
    let client = client(Duration::from_secs(5));
    let n = 300;
    let mut before = Vec::new();
    for i in 0..n {
        let answer = stripe_charge(&client, &sandbox, "pm_card_visa", &format!("before-{i}")).await;
        before.push(read_stripe(answer.as_ref()));
    }
    near(approved(&before), 0.9, n);

    // Through the control endpoint, as a run outside the process does: only the parts named
    // change.
    let changed = client
        .post(format!("{}/__sandbox/mix/stripe", sandbox.base_url()))
        .bearer_auth(SECRET)
        .body("approval=0.3")
        .send()
        .await
        .expect("answered");
    assert_eq!(changed.status(), 200);
    let changed: serde_json::Value = changed.json().await.expect("json");
    assert_eq!(
        Mix::parse(changed["mix"].as_str().expect("mix")).expect("mix"),
        Mix::parse("approval=0.3").expect("mix")
    );
    assert_eq!(sandbox.mix(Face::Stripe).approval, 0.3);
    let mut after = Vec::new();
    for i in 0..n {
        let answer = stripe_charge(&client, &sandbox, "pm_card_visa", &format!("after-{i}")).await;
        after.push(read_stripe(answer.as_ref()));
    }
    near(approved(&after), 0.3, n);
    // A key charged before the change still gets its first answer.
    let replay = stripe_charge(&client, &sandbox, "pm_card_visa", "before-0")
        .await
        .expect("answered");
    assert!(replay.replayed);
    assert_eq!(read_stripe(Some(&replay)), before[0]);

    // And back, through the handle.
    sandbox.set_mix(Face::Stripe, Mix::default());
    let answer = stripe_charge(&client, &sandbox, "pm_card_visa", "recovered").await;
    assert_eq!(read_stripe(answer.as_ref()), Drawn::Approved);

    let refused = client
        .post(format!("{}/__sandbox/mix/stripe", sandbox.base_url()))
        .bearer_auth(SECRET)
        .body("approval=3")
        .send()
        .await
        .expect("answered");
    assert_eq!(refused.status(), 400);
    let unknown = client
        .get(format!("{}/__sandbox/mix/paypal", sandbox.base_url()))
        .bearer_auth(SECRET)
        .send()
        .await
        .expect("answered");
    assert_eq!(unknown.status(), 404);
    sandbox.stop().await;
}

#[tokio::test]
async fn a_mix_token_draws_at_its_own_rate_on_a_plain_face() {
    let sandbox = start(config("", "")).await;
    let client = client(Duration::from_secs(5));
    let n = 300;
    let mut stripe = Vec::new();
    let mut adyen = 0;
    for i in 0..n {
        let key = format!("token-{i}");
        let answer = stripe_charge(&client, &sandbox, "pm_sandbox_mix_30", &key).await;
        stripe.push(read_stripe(answer.as_ref()));
        let answer = adyen_charge(&client, &sandbox, "pm_sandbox_mix_30", &format!("a-{key}"))
            .await
            .expect("answered");
        adyen += usize::from(answer.body["resultCode"] == "Authorised");
    }
    near(approved(&stripe), 0.3, n);
    near(adyen, 0.3, n);
    // The face's ordinary cards are untouched.
    let answer = stripe_charge(&client, &sandbox, "pm_card_visa", "plain").await;
    assert_eq!(read_stripe(answer.as_ref()), Drawn::Approved);
    sandbox.stop().await;
}

/// Each outage through the Stripe face: `refused` and `error_before` charge nothing;
/// `error_after`, `timeout`, `dropped` and `late_approval` charge, and a resend under the key tells what
/// Stripe keeps (the `500` for `error_after`, the decline for `late_approval`, the charge for
/// the others).
#[tokio::test]
async fn each_outage_does_what_it_says_to_the_ledger() {
    let sandbox = start(config("", "")).await;
    let client = client(Duration::from_millis(700));
    for (outage, first, charged, resent) in [
        (Outage::Refused, Some(403), false, Some(403)),
        (Outage::ErrorBefore, Some(500), false, Some(500)),
        (Outage::ErrorAfter, Some(500), true, Some(500)),
        (Outage::Timeout, None, true, Some(200)),
        (Outage::Dropped, None, true, Some(200)),
        // Declined in words, charged in the ledger (its webhook tells so later).
        (Outage::LateApproval, Some(402), true, Some(402)),
    ] {
        let mix = Mix {
            outage: 1.0,
            outages: vec![outage],
            ..Mix::default()
        };
        sandbox.set_mix(Face::Stripe, mix);
        let key = format!("outage-{}", outage.word());
        let answer = stripe_charge(&client, &sandbox, "pm_card_visa", &key).await;
        assert_eq!(answer.map(|a| a.status), first, "{outage:?}");
        let in_ledger = sandbox
            .ledger()
            .iter()
            .any(|e| e.attempt_id.as_deref() == Some(key.as_str()) && e.is_charged());
        assert_eq!(in_ledger, charged, "{outage:?}");
        // The outage over, a resend under the key gets what the provider kept.
        sandbox.set_mix(Face::Stripe, Mix::default());
        let again = stripe_charge(&client, &sandbox, "pm_card_visa", &key).await;
        let again = again.map(|a| a.status);
        let expected = if outage == Outage::Refused {
            Some(200)
        } else {
            resent
        };
        assert_eq!(again, expected, "{outage:?} resent");
    }
    // A key answered before the outage replays its answer through it.
    sandbox.set_mix(
        Face::Stripe,
        Mix::parse("outage=1,outages=refused").expect("mix"),
    );
    let replay = stripe_charge(&client, &sandbox, "pm_card_visa", "outage-timeout")
        .await
        .expect("answered");
    assert_eq!((replay.status, replay.replayed), (200, true));
    let fresh = stripe_charge(&client, &sandbox, "pm_card_visa", "outage-fresh")
        .await
        .expect("answered");
    assert_eq!(fresh.status, 403);
    sandbox.stop().await;
}
