//! The sandbox's disputes (docs/guides/test-cards.md, "Disputes"): each way one opens (the
//! test payment methods, the knob, `--dispute-rate`), each move and each refused move, the
//! signed events and notifications that tell them (verified as payorch verifies them, with
//! payorch-wire), the merchant's answers through both faces, and the Stripe face's refusal
//! to refund a charge whose dispute holds its money.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use base64::Engine;
use chrono::Utc;
use common::{adyen_post, client, eventually, fast, get, start, stripe_post, SandboxConfig};
use payorch_sandbox::{DisputeStage, DisputeStatus, SandboxHandle};
use payorch_wire::adyen::NotificationRequestItem;
use payorch_wire::adyen_hmac::HmacKey;
use payorch_wire::signature;
use serde_json::{json, Value};

const ACCOUNT: &str = "PayorchECOM";
const DISPUTES: &str = "/ca/services/DisputeService/v30";

/// Each delivery: its `Stripe-Signature` (none for Adyen's) and its body.
type Kept = Arc<Mutex<Vec<(Option<String>, Vec<u8>)>>>;

/// A receiver that keeps each delivery's body and its `Stripe-Signature`.
struct Hook {
    url: String,
    kept: Kept,
}

impl Hook {
    async fn start() -> Hook {
        let kept: Kept = Arc::default();
        let into = kept.clone();
        let server = HttpServer::new(move || {
            let into = into.clone();
            App::new().default_service(web::to(move |req: HttpRequest, body: web::Bytes| {
                let into = into.clone();
                async move {
                    let signed = req
                        .headers()
                        .get("Stripe-Signature")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    into.lock()
                        .expect("not poisoned")
                        .push((signed, body.to_vec()));
                    HttpResponse::Ok().body("[accepted]")
                }
            }))
        })
        .workers(1)
        .disable_signals()
        .bind("127.0.0.1:0")
        .expect("binds");
        let url = format!("http://{}/", server.addrs()[0]);
        tokio::spawn(server.run());
        Hook { url, kept }
    }

    fn bodies(&self) -> Vec<(Option<String>, Value)> {
        self.kept
            .lock()
            .expect("not poisoned")
            .iter()
            .map(|(signed, body)| {
                (
                    signed.clone(),
                    serde_json::from_slice(body).unwrap_or(Value::Null),
                )
            })
            .collect()
    }

    /// Every Stripe dispute event's signature verifies with the sandbox's webhook secret.
    fn assert_stripe_signed(&self) {
        for (signed, body) in self.kept.lock().expect("not poisoned").iter() {
            let header = signed.as_deref().expect("a Stripe-Signature");
            signature::verify(
                body,
                header,
                &["whsec_sandbox"],
                Utc::now(),
                Duration::from_secs(300),
            )
            .expect("the event verifies");
        }
    }

    /// The types of the Stripe dispute events about payment `pi`, in the order received.
    fn dispute_events(&self, pi: &str) -> Vec<(String, Value)> {
        self.bodies()
            .into_iter()
            .map(|(_, event)| event)
            .filter(|event| event["data"]["object"]["object"] == "dispute")
            .filter(|event| event["data"]["object"]["payment_intent"] == pi)
            .map(|event| {
                (
                    event["type"].as_str().unwrap_or_default().to_owned(),
                    event["data"]["object"].clone(),
                )
            })
            .collect()
    }

    /// The Adyen notification items about payment `psp` whose code is a dispute's.
    fn dispute_items(&self, psp: &str) -> Vec<Value> {
        self.bodies()
            .into_iter()
            .flat_map(|(_, delivery)| {
                delivery["notificationItems"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|item| item["NotificationRequestItem"].clone())
            .filter(|item| item["originalReference"] == psp)
            .filter(|item| item["eventCode"] != "REFUND")
            .collect()
    }
}

fn config(stripe: &Hook, adyen: &Hook) -> SandboxConfig {
    SandboxConfig {
        webhook_url: Some(stripe.url.clone()),
        adyen_notification_url: Some(adyen.url.clone()),
        dispute_after_ms: 50,
        ..fast()
    }
}

async fn world() -> (SandboxHandle, Hook, Hook, reqwest::Client) {
    let stripe = Hook::start().await;
    let adyen = Hook::start().await;
    let sandbox = start(config(&stripe, &adyen)).await;
    (sandbox, stripe, adyen, client(Duration::from_secs(5)))
}

async fn stripe_charge(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    token: &str,
    attempt: &str,
) -> String {
    let paid = stripe_post(
        client,
        sandbox,
        "/v1/payment_intents",
        Some(attempt),
        &[
            ("amount", "1000"),
            ("currency", "usd"),
            ("payment_method", token),
            ("confirm", "true"),
            ("payment_method_types[]", "card"),
            ("metadata[attempt_id]", attempt),
        ],
    )
    .await
    .expect("answered");
    assert_eq!(paid.body["status"], "succeeded", "{}", paid.body);
    paid.body["id"].as_str().expect("an id").to_owned()
}

async fn adyen_charge(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    token: &str,
    reference: &str,
) -> String {
    let paid = adyen_post(
        client,
        sandbox,
        "/v71/payments",
        Some(reference),
        &json!({
            "amount": {"value": 4200, "currency": "EUR"},
            "reference": reference,
            "merchantAccount": ACCOUNT,
            "paymentMethod": {"type": "scheme", "storedPaymentMethodId": token},
        }),
    )
    .await
    .expect("answered");
    assert_eq!(paid.body["resultCode"], "Authorised", "{}", paid.body);
    paid.body["pspReference"]
        .as_str()
        .expect("a psp")
        .to_owned()
}

async fn knob(client: &reqwest::Client, sandbox: &SandboxHandle, body: Value) -> (u16, Value) {
    let answer = client
        .post(format!("{}/__sandbox/disputes", sandbox.base_url()))
        .bearer_auth(common::SECRET)
        .json(&body)
        .send()
        .await
        .expect("answered");
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

fn status_of(sandbox: &SandboxHandle, pi: &str) -> Option<(DisputeStatus, DisputeStage)> {
    sandbox
        .disputes()
        .into_iter()
        .rev()
        .find(|d| d.payment_intent == pi)
        .map(|d| (d.status, d.stage))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stripe_dispute_holds_the_money_until_the_winning_evidence_wins_it_back() {
    let (sandbox, hook, _, client) = world().await;
    let pi = stripe_charge(&client, &sandbox, "pm_card_createDispute", "at_1").await;
    let events = eventually("the dispute's money withdrawn", || {
        let events = hook.dispute_events(&pi);
        (events.len() >= 2).then_some(events)
    })
    .await;
    // Deliveries run side by side, so events arrive in any order, as Stripe's do.
    let mut kinds: Vec<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        ["charge.dispute.created", "charge.dispute.funds_withdrawn"]
    );
    let withdrawn = events
        .iter()
        .find(|(kind, _)| kind == "charge.dispute.funds_withdrawn")
        .map(|(_, dispute)| dispute.clone())
        .expect("withdrawn");
    let dispute = &events[0].1;
    let id = dispute["id"].as_str().expect("an id").to_owned();
    assert!(id.starts_with("du_"), "{id}");
    assert_eq!(dispute["status"], "needs_response");
    assert_eq!(dispute["reason"], "fraudulent");
    assert_eq!(dispute["amount"], 1000);
    assert!(dispute["evidence_details"]["due_by"].as_i64() > Some(0));
    assert_eq!(dispute["is_charge_refundable"], false);
    assert_eq!(withdrawn["balance_transactions"][0]["amount"], -1000);

    // Stripe refuses the refund while the dispute holds the money.
    let refund = [("payment_intent", pi.as_str()), ("amount", "100")];
    let refused = stripe_post(&client, &sandbox, "/v1/refunds", None, &refund)
        .await
        .expect("answered");
    assert_eq!(refused.status, 400);
    assert_eq!(refused.body["error"]["code"], "charge_disputed");
    assert!(sandbox.refunds().is_empty());

    let path = format!("/v1/disputes/{id}");
    let retrieved = get(&client, &sandbox, &path).await;
    assert_eq!(retrieved.body["status"], "needs_response");
    assert_eq!(retrieved.body["payment_intent"], pi.as_str());

    let evidence = [
        ("evidence[uncategorized_text]", "winning_evidence"),
        ("evidence[customer_name]", "A. Payer"),
    ];
    let submitted = stripe_post(&client, &sandbox, &path, Some("ev-1"), &evidence)
        .await
        .expect("answered");
    assert_eq!(submitted.status, 200, "{}", submitted.body);
    assert_eq!(submitted.body["status"], "under_review");
    assert_eq!(
        submitted.body["evidence"]["uncategorized_text"],
        "winning_evidence"
    );
    assert_eq!(submitted.body["evidence_details"]["submission_count"], 1);
    // A resend with the key gets the first answer, not a second submission.
    let again = stripe_post(&client, &sandbox, &path, Some("ev-1"), &evidence)
        .await
        .expect("answered");
    assert!(again.replayed);
    assert_eq!(again.bytes, submitted.bytes);

    eventually("the dispute won", || {
        (status_of(&sandbox, &pi) == Some((DisputeStatus::Won, DisputeStage::Chargeback)))
            .then_some(())
    })
    .await;
    let events = eventually("the dispute closed", || {
        let events = hook.dispute_events(&pi);
        (events.len() >= 5).then_some(events)
    })
    .await;
    let mut kinds: Vec<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "charge.dispute.closed",
            "charge.dispute.created",
            "charge.dispute.funds_reinstated",
            "charge.dispute.funds_withdrawn",
            "charge.dispute.updated",
        ]
    );
    hook.assert_stripe_signed();
    let money = sandbox.dispute_money();
    assert_eq!(
        money.iter().map(|m| m.amount).collect::<Vec<_>>(),
        [-1000, 1000]
    );
    let ledger = common::ledger(&client, &sandbox).await;
    assert_eq!(ledger["disputes"][0]["id"], id.as_str());
    assert_eq!(ledger["disputes"][0]["status"], "won");
    assert_eq!(ledger["disputes"][0]["money"][1]["kind"], "reinstated");

    // Won: the money is the merchant's again, and may be refunded.
    let refunded = stripe_post(&client, &sandbox, "/v1/refunds", None, &refund)
        .await
        .expect("answered");
    assert_eq!(refunded.status, 200, "{}", refunded.body);
    let listed = get(
        &client,
        &sandbox,
        &format!("/v1/disputes?payment_intent={pi}"),
    )
    .await;
    assert_eq!(listed.body["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(listed.body["data"][0]["status"], "won");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stripe_inquiry_holds_nothing_and_every_refused_move_is_refused() {
    let (sandbox, hook, _, client) = world().await;
    let pi = stripe_charge(&client, &sandbox, "pm_card_createDisputeInquiry", "at_2").await;
    let opened = eventually("the inquiry", || hook.dispute_events(&pi).pop()).await;
    assert_eq!(opened.0, "charge.dispute.created");
    assert_eq!(opened.1["status"], "warning_needs_response");
    let id = opened.1["id"].as_str().expect("an id").to_owned();
    // An inquiry takes no money: a refund goes through.
    let refund = [("payment_intent", pi.as_str()), ("amount", "100")];
    let refunded = stripe_post(&client, &sandbox, "/v1/refunds", None, &refund)
        .await
        .expect("answered");
    assert_eq!(refunded.status, 200, "{}", refunded.body);

    let close = format!("/v1/disputes/{id}/close");
    let closed = stripe_post(&client, &sandbox, &close, Some("close-1"), &[])
        .await
        .expect("answered");
    assert_eq!(closed.body["status"], "warning_closed");
    let again = stripe_post(&client, &sandbox, &close, Some("close-2"), &[])
        .await
        .expect("answered");
    assert_eq!(again.status, 400, "closed is final: {}", again.body);
    let late = stripe_post(
        &client,
        &sandbox,
        &format!("/v1/disputes/{id}"),
        None,
        &[("evidence[uncategorized_text]", "winning_evidence")],
    )
    .await
    .expect("answered");
    assert_eq!(late.status, 400);
    let unknown = stripe_post(
        &client,
        &sandbox,
        &format!("/v1/disputes/{id}"),
        None,
        &[("evidence[favourite_colour]", "blue")],
    )
    .await
    .expect("answered");
    assert_eq!(unknown.body["error"]["code"], "parameter_unknown");
    assert_eq!(
        get(&client, &sandbox, "/v1/disputes/du_nothing")
            .await
            .status,
        404
    );

    // The knob: a second dispute on the same charge, then the moves Stripe has not.
    let (status, second) = knob(
        &client,
        &sandbox,
        json!({"payment": pi, "action": "open", "amount": 900, "reason": "duplicate"}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["status"], "needs_response");
    assert_eq!(second["reason_code"], "12.6.1");
    let (status, _) = knob(
        &client,
        &sandbox,
        json!({"payment": pi, "action": "inquiry"}),
    )
    .await;
    assert_eq!(status, 400, "one open dispute per charge");
    let (status, lost) = knob(&client, &sandbox, json!({"payment": pi, "action": "lose"})).await;
    assert_eq!((status, lost["status"].as_str()), (200, Some("lost")));
    for refused in ["win", "second_chargeback", "prearbitration_won", "escalate"] {
        let (status, why) =
            knob(&client, &sandbox, json!({"payment": pi, "action": refused})).await;
        assert_eq!(status, 400, "{refused}: {why}");
    }
    let (status, _) = knob(&client, &sandbox, json!({"payment": pi, "action": "shrug"})).await;
    assert_eq!(status, 400);
    let (status, _) = knob(
        &client,
        &sandbox,
        json!({"payment": "pi_unknown", "action": "open"}),
    )
    .await;
    assert_eq!(status, 400);
    // The dispute's 900 is held after the 100 refunded: nothing more goes back.
    let refused = stripe_post(&client, &sandbox, "/v1/refunds", None, &refund)
        .await
        .expect("answered");
    assert_eq!(refused.body["error"]["code"], "charge_disputed");
    hook.assert_stripe_signed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adyen_tells_each_stage_in_a_signed_notification_and_still_refunds_a_disputed_payment() {
    let (sandbox, _, hook, client) = world().await;
    let psp = adyen_charge(
        &client,
        &sandbox,
        "pm_sandbox_dispute_second_chargeback",
        "at_3",
    )
    .await;
    let items = eventually("three notifications", || {
        let items = hook.dispute_items(&psp);
        (items.len() >= 3).then_some(items)
    })
    .await;
    let codes: Vec<&str> = items
        .iter()
        .filter_map(|i| i["eventCode"].as_str())
        .collect();
    assert_eq!(
        codes,
        ["CHARGEBACK", "CHARGEBACK_REVERSED", "SECOND_CHARGEBACK"]
    );
    let key = HmacKey::from_hex(sandbox.adyen_hmac_key().expose()).expect("a hex key");
    for item in &items {
        assert!(item["pspReference"]
            .as_str()
            .is_some_and(|r| r.starts_with("du_")));
        assert_eq!(item["merchantReference"], "at_3");
        assert_eq!(item["merchantAccountCode"], ACCOUNT);
        assert_eq!(item["amount"], json!({"value": 4200, "currency": "EUR"}));
        assert_eq!(item["additionalData"]["chargebackReasonCode"], "10.4");
        assert!(item["additionalData"]["defensePeriodEndsAt"].is_string());
        let parsed: NotificationRequestItem =
            serde_json::from_value(item.clone()).expect("an item");
        let signature = base64::engine::general_purpose::STANDARD
            .decode(
                item["additionalData"]["hmacSignature"]
                    .as_str()
                    .expect("signed"),
            )
            .expect("base64");
        assert!(key.verifies(&parsed, &signature), "{item}");
    }
    assert_eq!(items[0]["additionalData"]["disputeStatus"], "Unresponded");
    assert_eq!(items[0]["additionalData"]["defendable"], "true");
    assert_eq!(
        status_of(&sandbox, &psp),
        Some((DisputeStatus::Lost, DisputeStage::SecondChargeback))
    );

    // Adyen refunds what a chargeback already took: the double return payorch must prevent.
    let refund = adyen_post(
        &client,
        &sandbox,
        &format!("/v71/payments/{psp}/refunds"),
        Some("rf-1"),
        &json!({
            "merchantAccount": ACCOUNT,
            "amount": {"value": 4200, "currency": "EUR"},
            "reference": "rf_1",
        }),
    )
    .await
    .expect("answered");
    assert_eq!(refund.status, 201, "{}", refund.body);

    let (status, moved) = knob(
        &client,
        &sandbox,
        json!({"payment": psp, "action": "prearbitration_lost"}),
    )
    .await;
    assert_eq!(status, 200, "{moved}");
    assert_eq!(moved["stage"], "pre_arbitration");
    let last = eventually("PREARBITRATION_LOST", || {
        hook.dispute_items(&psp)
            .into_iter()
            .find(|i| i["eventCode"] == "PREARBITRATION_LOST")
    })
    .await;
    assert_eq!(last["additionalData"]["disputeStatus"], "Lost");
    let money = sandbox.dispute_money();
    assert_eq!(
        money.iter().map(|m| m.amount).collect::<Vec<_>>(),
        [-4200, 4200, -4200],
        "taken, reversed, taken again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adyen_dispute_service_defends_and_accepts() {
    let (sandbox, _, hook, client) = world().await;
    let service = |operation: &str, body: Value| {
        let client = client.clone();
        let url = format!("{}{DISPUTES}/{operation}", sandbox.base_url());
        async move {
            let answer = client
                .post(url)
                .header("X-API-Key", common::SECRET)
                .json(&body)
                .send()
                .await
                .expect("answered");
            assert_eq!(answer.status().as_u16(), 200);
            answer.json::<Value>().await.expect("JSON")
        }
    };
    let psp = adyen_charge(&client, &sandbox, "pm_card_createDispute", "at_4").await;
    let opened = eventually("CHARGEBACK", || hook.dispute_items(&psp).pop()).await;
    let dispute = opened["pspReference"]
        .as_str()
        .expect("a dispute")
        .to_owned();
    let named = json!({"merchantAccountCode": ACCOUNT, "disputePspReference": dispute});

    let reasons = service("retrieveApplicableDefenseReasons", named.clone()).await;
    assert_eq!(reasons["disputeServiceResult"]["success"], true);
    assert_eq!(reasons["defenseReasons"][1]["satisfied"], false);
    let mut supplied = named.clone();
    supplied["defenseDocuments"] = json!([{
        "content": base64::engine::general_purpose::STANDARD.encode("losing_evidence"),
        "contentType": "text/plain",
        "defenseDocumentTypeCode": "DefenseMaterial",
    }]);
    let answer = service("supplyDefenseDocument", supplied).await;
    assert_eq!(answer["disputeServiceResult"]["success"], true, "{answer}");
    let mut defended = named.clone();
    defended["defenseReasonCode"] = json!("NoSuchReason");
    let answer = service("defendDispute", defended.clone()).await;
    assert_eq!(answer["disputeServiceResult"]["success"], false);
    defended["defenseReasonCode"] = json!("SupplyDefenseMaterial");
    let answer = service("defendDispute", defended.clone()).await;
    assert_eq!(answer["disputeServiceResult"]["success"], true, "{answer}");
    assert_eq!(
        status_of(&sandbox, &psp).map(|s| s.0),
        Some(DisputeStatus::UnderReview)
    );
    let answer = service("defendDispute", defended).await;
    assert_eq!(
        answer["disputeServiceResult"]["success"], false,
        "defended once"
    );
    let lost = eventually("lost on its evidence", || {
        hook.dispute_items(&psp)
            .into_iter()
            .find(|i| i["additionalData"]["disputeStatus"] == "Lost")
    })
    .await;
    assert_eq!(lost["eventCode"], "CHARGEBACK");
    assert_eq!(lost["additionalData"]["defendable"], "false");

    // Accepting another.
    let psp = adyen_charge(&client, &sandbox, "pm_card_createDispute", "at_5").await;
    let opened = eventually("CHARGEBACK", || hook.dispute_items(&psp).pop()).await;
    let named = json!({
        "merchantAccountCode": ACCOUNT,
        "disputePspReference": opened["pspReference"],
    });
    let answer = service("acceptDispute", named.clone()).await;
    assert_eq!(answer["disputeServiceResult"]["success"], true, "{answer}");
    let accepted = eventually("accepted", || {
        hook.dispute_items(&psp)
            .into_iter()
            .find(|i| i["additionalData"]["disputeStatus"] == "Accepted")
    })
    .await;
    assert_eq!(accepted["eventCode"], "CHARGEBACK");
    let answer = service("acceptDispute", named).await;
    assert_eq!(answer["disputeServiceResult"]["success"], false);
    let unknown = service(
        "acceptDispute",
        json!({"merchantAccountCode": ACCOUNT, "disputePspReference": "du_none"}),
    )
    .await;
    assert_eq!(unknown["disputeServiceResult"]["success"], false);
    assert!(unknown["disputeServiceResult"]["errorMessage"].is_string());
}

/// The references disputed of 40 charges through a sandbox at `rate`.
async fn disputed_at(rate: f64, seed: u64) -> Vec<String> {
    let stripe = Hook::start().await;
    let adyen = Hook::start().await;
    let sandbox = start(SandboxConfig {
        dispute_rate: rate,
        mix_seed: seed,
        ..config(&stripe, &adyen)
    })
    .await;
    let client = client(Duration::from_secs(5));
    for i in 0..40 {
        stripe_charge(&client, &sandbox, "pm_card_visa", &format!("at_{i}")).await;
    }
    // Every draw is made when the charge succeeds; the disputes open 50 ms later.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut disputed: Vec<String> = sandbox
        .disputes()
        .into_iter()
        .filter_map(|d| d.attempt_id)
        .collect();
    disputed.sort();
    sandbox.stop().await;
    disputed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispute_rate_disputes_its_share_the_same_on_each_run_of_a_seed() {
    assert!(disputed_at(0.0, 7).await.is_empty());
    assert_eq!(disputed_at(1.0, 7).await.len(), 40);
    let first = disputed_at(0.5, 7).await;
    assert!((8..=32).contains(&first.len()), "{}", first.len());
    assert_eq!(disputed_at(0.5, 7).await, first, "a seed replays");
    assert_ne!(disputed_at(0.5, 8).await, first, "another seed draws anew");
}
