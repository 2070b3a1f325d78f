//! A provider answer that contradicts payorch's records (issue #39; docs/DESIGN.md, "What
//! proves what"): an answer naming a charge that another attempt already holds moves
//! nothing, is never a 500 nor a failed reconciler round, and lists the attempt for a human
//! with the evidence in its provider calls.

use std::time::Duration;

use diesel_async::RunQueryDsl;
use serde_json::Value;

use crate::helpers::{eventually, TestApp};
use crate::payments::checkout_body;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_naming_another_attempts_charge_goes_to_a_human_not_a_500() {
    let app = TestApp::spawn().await;
    // No webhooks: only the reconciler learns what the lost answer said.
    app.sandbox.set_webhook_url(None);
    // An attempt the sandbox refuses before making an intent: failed, with no charge id.
    let refused = app
        .checkout("contradicted-other", &checkout_body("pm_no_such_method"))
        .await;
    assert_eq!(refused.status(), 201);
    let refused: Value = refused.json().await.unwrap();
    let other = refused["payment"]["id"].as_str().unwrap().to_owned();
    assert_eq!(refused["payment"]["status"], "failed", "{refused}");

    // A charge whose answer is lost: the attempt stays pending without an id.
    let lost = app
        .checkout("contradicted", &checkout_body("pm_sandbox_lost_response"))
        .await;
    assert_eq!(lost.status(), 201);
    let lost: Value = lost.json().await.unwrap();
    let id = lost["payment"]["id"].as_str().unwrap().to_owned();
    assert_eq!(lost["payment"]["status"], "pending", "{lost}");
    let charge = app
        .sandbox
        .ledger()
        .into_iter()
        .find(|c| c.attempt_id.as_deref() == Some(id.as_str()))
        .expect("the sandbox charged it");

    // payorch's records now say the charge is the other attempt's: the provider's truth
    // about this attempt contradicts them.
    // A final attempt is frozen by a trigger, so the forgery goes around the triggers, as
    // only a test (or a bug) could.
    let mut conn = app.db.connect().await;
    let other_uuid = other.trim_start_matches("pay_");
    for sql in [
        "SET session_replication_role = replica".to_owned(),
        format!(
            "UPDATE payment_attempts SET provider_payment_id = '{}' WHERE id = '{other_uuid}'",
            charge.provider_id
        ),
        "SET session_replication_role = origin".to_owned(),
    ] {
        diesel::sql_query(sql)
            .execute(&mut conn)
            .await
            .expect("give the charge id to the other attempt");
    }

    // The reconciler asks (a same-key resend answers the charge), and lists it for a human.
    let listed = eventually(Duration::from_secs(20), || async {
        let needs: Value = app
            .get_as(&app.support_key, "/v1/support/needs-a-human")
            .await
            .json()
            .await
            .unwrap();
        needs["contradicted"]
            .as_array()
            .is_some_and(|list| list.iter().any(|p| p["id"] == id.as_str()))
    })
    .await;
    assert!(listed, "never listed as contradicted");
    let payment: Value = app
        .get_as(&app.support_key, &format!("/v1/support/payments/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(payment["payment"]["status"], "pending", "{payment}");
    let calls = payment["provider_calls"].as_array().expect("calls");
    assert!(
        calls.iter().any(|c| c["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("contradiction:") && d.contains(&charge.provider_id))),
        "{payment}"
    );
    // The checkout's own key still replays: no 500 anywhere.
    let again = app
        .checkout("contradicted", &checkout_body("pm_sandbox_lost_response"))
        .await;
    assert!(
        again.status().is_success() || again.status() == 409,
        "{}",
        again.status()
    );
}
