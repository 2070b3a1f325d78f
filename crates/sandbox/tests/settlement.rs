//! The sandbox's settlement records (docs/guides/test-cards.md, "Settlement records"): the
//! Stripe face's balance transactions answer as Stripe's published contract says a list of
//! them is, a charge and its refund each listed once with the intent they are of and
//! payorch's metadata; an Adyen batch not closed is `404`.

mod common;

use std::time::Duration;

use common::{client, fast, get, start, stripe_post};
use payorch_contract::{report, Contract};
use serde_json::Value;

#[tokio::test]
async fn a_charge_and_its_refund_are_booked_as_the_contract_says() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    let charged = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("settle-1"),
        &[
            ("amount", "4200"),
            ("currency", "eur"),
            ("payment_method", "pm_card_visa"),
            ("payment_method_types[0]", "card"),
            ("confirm", "true"),
            ("metadata[attempt_id]", "pay_1"),
        ],
    )
    .await
    .expect("charged");
    assert_eq!(charged.status, 200, "{}", charged.body);
    let intent = charged.body["id"].as_str().unwrap().to_owned();
    let refunded = stripe_post(
        &client,
        &sandbox,
        "/v1/refunds",
        Some("settle-2"),
        &[
            ("payment_intent", intent.as_str()),
            ("amount", "1000"),
            ("metadata[refund_id]", "re_1"),
        ],
    )
    .await
    .expect("refunded");
    assert_eq!(refunded.status, 200, "{}", refunded.body);

    let stripe = Contract::stripe();
    let listed = get(&client, &sandbox, "/v1/balance_transactions?limit=10").await;
    if let Err(v) = stripe.validate_response(
        "GET",
        "/v1/balance_transactions",
        listed.status,
        &listed.bytes,
    ) {
        panic!("{}\n{}", report(&v), listed.body);
    }
    let data = listed.body["data"].as_array().unwrap();
    let kinds: Vec<(&str, i64)> = data
        .iter()
        .map(|t| (t["type"].as_str().unwrap(), t["amount"].as_i64().unwrap()))
        .collect();
    assert_eq!(kinds, vec![("refund", -1000), ("charge", 4200)], "{data:?}");

    let expanded = get(
        &client,
        &sandbox,
        "/v1/balance_transactions?expand%5B%5D=data.source",
    )
    .await;
    // Expanded, each source is the sandbox's short object (id, object, amount, currency,
    // payment_intent, metadata), not Stripe's whole charge, refund or dispute: the contract
    // refuses it, and only this unexpanded list is held to it.
    let sources: Vec<&Value> = expanded.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["source"])
        .collect();
    assert!(sources
        .iter()
        .all(|s| s["payment_intent"] == intent.as_str()));
    assert_eq!(sources[0]["metadata"]["refund_id"], "re_1");
    assert_eq!(sources[1]["metadata"]["attempt_id"], "pay_1");

    // The Adyen face books nothing of a Stripe charge; a batch not closed is not there.
    let path = "/reports/download/MerchantAccount/Acc/settlement_detail_report_batch_1.csv";
    assert_eq!(get(&client, &sandbox, path).await.status, 404);
}
