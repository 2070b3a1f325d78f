//! Keys with a life (docs/operations/commands.md, "Commands"; docs/PRODUCTION.md, section 3): several keys per
//! merchant, rotation with an overlap, revocation honoured by every replica within a second,
//! `last_used_at`; support keys with a role, and every support write audited.

use std::process::Stdio;
use std::time::Duration;

use diesel_async::RunQueryDsl;
use payorch::accounts::life::{self, KeyFilter};
use payorch::accounts::{self, KeyOwner, SupportRole};
use payorch::ids::ApiKeyId;
use serde_json::{json, Value};

use crate::helpers::{
    assert_problem, assert_refused_by, eventually, payorch_bin, TestApp, TestDatabase,
};
use crate::payments::Route;

/// An app whose auth cache would remember a live key for a minute: only the key poll can
/// make a replica refuse a revoked key sooner.
async fn app_with_a_long_auth_cache() -> TestApp {
    TestApp::spawn_with(|settings| settings.auth_cache_ttl = Duration::from_secs(60)).await
}

async fn get_on(app: &TestApp, base_url: &str, secret: &str, path: &str) -> reqwest::Response {
    app.client
        .get(format!("{base_url}{path}"))
        .bearer_auth(secret)
        .send()
        .await
        .expect("request sent")
}

/// Whether `secret` is refused `401` on `base_url`, as an unknown key is.
async fn refused(app: &TestApp, base_url: &str, secret: &str) -> bool {
    let path = format!("/v1/merchants/{}", app.merchant_id);
    get_on(app, base_url, secret, &path).await.status() == 401
}

#[tokio::test]
async fn a_revoked_key_is_refused_by_every_replica_within_a_second() {
    let app = app_with_a_long_auth_cache().await;
    let (replica, _handle) = app.replica().await;
    let mut conn = app.db.connect().await;
    let (_, second) =
        life::create_key(&mut conn, KeyOwner::Merchant(app.merchant_id), "second key")
            .await
            .unwrap();
    // Both replicas have both keys in their caches.
    for base in [&app.base_url, &replica] {
        for secret in [&app.merchant_key, &second.secret] {
            assert!(!refused(&app, base, secret).await);
        }
    }
    life::revoke_key(&mut conn, second.key_id).await.unwrap();
    for base in [&app.base_url, &replica] {
        assert!(
            eventually(Duration::from_secs(2), || refused(
                &app,
                base,
                &second.secret
            ))
            .await,
            "{base} still takes the revoked key"
        );
    }
    // The merchant's other key works on.
    assert!(!refused(&app, &replica, &app.merchant_key).await);

    // Revoked by hand in SQL, as before there was a command: honoured alike.
    diesel::sql_query(
        "UPDATE api_keys SET revoked_at = now() WHERE role = 'merchant' AND revoked_at IS NULL",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    assert!(
        eventually(Duration::from_secs(2), || refused(
            &app,
            &replica,
            &app.merchant_key
        ))
        .await
    );
}

/// A revocation made by hand in a transaction held open longer than the poll's margin: every
/// replica refuses the key soon after the COMMIT, however long after its UPDATE that was.
#[tokio::test]
async fn a_revocation_committed_long_after_its_update_is_honoured_by_every_replica() {
    let app = app_with_a_long_auth_cache().await;
    let (replica, _handle) = app.replica().await;
    let mut conn = app.db.connect().await;
    let (_, key) = life::create_key(&mut conn, KeyOwner::Merchant(app.merchant_id), "held")
        .await
        .unwrap();
    for base in [&app.base_url, &replica] {
        assert!(!refused(&app, base, &key.secret).await);
    }
    // Its use written by both replicas first, so that no write of theirs waits on the row the
    // transaction below holds (see the next test).
    assert!(
        eventually(Duration::from_secs(2), || async {
            let mut conn = app.db.connect().await;
            let key = life::find_key(&mut conn, key.key_id).await.unwrap();
            key.is_some_and(|key| key.last_used_at.is_some())
        })
        .await
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    diesel::sql_query("BEGIN").execute(&mut conn).await.unwrap();
    diesel::sql_query("UPDATE api_keys SET revoked_at = now() WHERE id = $1")
        .bind::<diesel::sql_types::Uuid, _>(key.key_id.0)
        .execute(&mut conn)
        .await
        .unwrap();
    tokio::time::sleep(accounts::sync::MARGIN + Duration::from_secs(1)).await;
    for base in [&app.base_url, &replica] {
        assert!(
            !refused(&app, base, &key.secret).await,
            "not revoked before the commit"
        );
    }
    diesel::sql_query("COMMIT")
        .execute(&mut conn)
        .await
        .unwrap();
    for base in [&app.base_url, &replica] {
        assert!(
            eventually(Duration::from_secs(2), || refused(&app, base, &key.secret)).await,
            "{base} still takes the key revoked by the committed transaction"
        );
    }
}

/// A hand transaction holding a key's row while that key is used: its `last_used_at` waits,
/// the revocation of another key does not.
#[tokio::test]
async fn a_locked_key_row_holds_up_neither_revocations_nor_other_keys_last_use() {
    let app = app_with_a_long_auth_cache().await;
    let (replica, _handle) = app.replica().await;
    let mut conn = app.db.connect().await;
    let owner = KeyOwner::Merchant(app.merchant_id);
    let (_, locked) = life::create_key(&mut conn, owner, "locked").await.unwrap();
    let (_, revoked) = life::create_key(&mut conn, owner, "revoked").await.unwrap();
    let (_, other) = life::create_key(&mut conn, owner, "other").await.unwrap();
    for base in [&app.base_url, &replica] {
        assert!(!refused(&app, base, &revoked.secret).await);
    }

    let mut holder = app.db.connect().await;
    diesel::sql_query("BEGIN")
        .execute(&mut holder)
        .await
        .unwrap();
    diesel::sql_query("SELECT id FROM api_keys WHERE id = $1 FOR UPDATE")
        .bind::<diesel::sql_types::Uuid, _>(locked.key_id.0)
        .execute(&mut holder)
        .await
        .unwrap();
    for base in [&app.base_url, &replica] {
        assert!(!refused(&app, base, &locked.secret).await);
        assert!(!refused(&app, base, &other.secret).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    life::revoke_key(&mut conn, revoked.key_id).await.unwrap();
    for base in [&app.base_url, &replica] {
        assert!(
            eventually(Duration::from_secs(2), || refused(
                &app,
                base,
                &revoked.secret
            ))
            .await,
            "{base} still takes the revoked key while another key's row is locked"
        );
    }
    let last_used = |id: ApiKeyId| {
        let db = &app.db;
        async move {
            let mut conn = db.connect().await;
            life::find_key(&mut conn, id)
                .await
                .unwrap()
                .unwrap()
                .last_used_at
        }
    };
    assert!(
        eventually(Duration::from_secs(2), || async {
            last_used(other.key_id).await.is_some()
        })
        .await,
        "the other key's use is written"
    );
    assert_eq!(last_used(locked.key_id).await, None, "the row is locked");

    diesel::sql_query("COMMIT")
        .execute(&mut holder)
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || async {
            last_used(locked.key_id).await.is_some()
        })
        .await,
        "written once the row is free"
    );
}

#[tokio::test]
async fn a_rotated_key_works_for_the_overlap_then_is_refused_like_a_revoked_one() {
    let app = app_with_a_long_auth_cache().await;
    let (replica, _handle) = app.replica().await;
    let mut conn = app.db.connect().await;
    let first = life::list_keys(&mut conn, KeyFilter::Merchant(app.merchant_id))
        .await
        .unwrap()[0]
        .id;
    assert!(!refused(&app, &replica, &app.merchant_key).await);

    // With a day's overlap both keys work, and the old one knows when it ends.
    let (old, made, new) = life::rotate_key(&mut conn, first, Duration::from_secs(86_400))
        .await
        .unwrap();
    let ends_in = old.expires_at.unwrap() - chrono::Utc::now();
    assert!(ends_in > chrono::Duration::hours(23) && ends_in <= chrono::Duration::hours(24));
    assert_eq!(made.rotated_from, Some(first));
    assert_eq!(made.merchant_id, Some(app.merchant_id));
    assert!(!refused(&app, &replica, &app.merchant_key).await);
    assert!(!refused(&app, &replica, &new.secret).await);

    // Rotated again with no overlap: the key just made ends at once, on every replica.
    let (_, _, newest) = life::rotate_key(&mut conn, made.id, Duration::ZERO)
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(2), || refused(
            &app,
            &replica,
            &new.secret
        ))
        .await
    );
    assert!(!refused(&app, &replica, &newest.secret).await);

    // An expired key's answer is a revoked key's, word for word.
    diesel::sql_query("UPDATE api_keys SET expires_at = now() WHERE id = $1")
        .bind::<diesel::sql_types::Uuid, _>(first.0)
        .execute(&mut conn)
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(2), || refused(
            &app,
            &replica,
            &app.merchant_key
        ))
        .await
    );
    let path = format!("/v1/merchants/{}", app.merchant_id);
    let expired = assert_problem(
        get_on(&app, &replica, &app.merchant_key, &path).await,
        401,
        "unauthenticated",
    )
    .await;
    let unknown = assert_problem(
        get_on(&app, &replica, "sk_mer_never_made", &path).await,
        401,
        "unauthenticated",
    )
    .await;
    assert_eq!(expired["detail"], unknown["detail"]);

    // Neither a revoked nor an expired key can be rotated.
    assert!(matches!(
        life::rotate_key(&mut conn, first, Duration::ZERO).await,
        Err(life::KeyLifeError::Expired(_))
    ));
    life::revoke_key(&mut conn, newest.key_id).await.unwrap();
    assert!(matches!(
        life::rotate_key(&mut conn, newest.key_id, Duration::ZERO).await,
        Err(life::KeyLifeError::Revoked(_))
    ));
}

#[tokio::test]
async fn a_revocation_is_for_good_and_a_key_s_identity_never_changes() {
    let app = TestApp::spawn().await;
    let mut conn = app.db.connect().await;
    assert_refused_by(
        &mut conn,
        "UPDATE api_keys SET role = 'support', merchant_id = NULL, support_role = 'operate' \
         WHERE role = 'merchant'",
        "api_keys_identity_fixed",
    )
    .await;
    diesel::sql_query("UPDATE api_keys SET revoked_at = now()")
        .execute(&mut conn)
        .await
        .unwrap();
    // A support key's role is its identity too: another role is another key.
    assert_refused_by(
        &mut conn,
        "UPDATE api_keys SET support_role = 'read' WHERE role = 'support'",
        "api_keys_identity_fixed",
    )
    .await;
    assert_refused_by(
        &mut conn,
        "UPDATE api_keys SET revoked_at = NULL",
        "api_keys_revoked_for_good",
    )
    .await;
    assert_refused_by(
        &mut conn,
        "INSERT INTO api_keys (id, secret_sha256, role, name) \
         VALUES (gen_random_uuid(), sha256('x'), 'support', 'no role')",
        "api_keys_support_role",
    )
    .await;
}

#[tokio::test]
async fn last_used_at_is_written_off_the_request_path() {
    let app = TestApp::spawn().await;
    let mut conn = app.db.connect().await;
    let keys = life::list_keys(&mut conn, KeyFilter::All).await.unwrap();
    assert!(keys.iter().all(|k| k.last_used_at.is_none()));
    let path = format!("/v1/merchants/{}", app.merchant_id);
    for _ in 0..3 {
        assert_eq!(app.get_as(&app.merchant_key, &path).await.status(), 200);
    }
    let used = || async {
        let keys = life::list_keys(&mut app.db.connect().await, KeyFilter::All)
            .await
            .unwrap();
        keys.iter()
            .filter(|k| k.last_used_at.is_some())
            .map(|k| k.merchant_id)
            .collect::<Vec<_>>()
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            !used().await.is_empty()
        })
        .await
    );
    // Only the merchant's key was used; the support key was not.
    assert_eq!(used().await, vec![Some(app.merchant_id)]);
}

/// `payorch <args>` against the test database; its stdout, which must be a success.
async fn payorch(app: &TestApp, args: &[&str]) -> String {
    let output = tokio::process::Command::new(payorch_bin())
        .args(args)
        .env("DATABASE_URL", &app.db.url)
        .env_remove("PAYORCH_MIGRATION_DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("run payorch");
    assert!(
        output.status.success(),
        "payorch {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn json_of(out: &str) -> Value {
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test]
async fn the_keys_command_lists_creates_rotates_and_revokes() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant_id.to_string();

    // A second key for the merchant: its secret printed once, and it works at once.
    let made = json_of(
        &payorch(
            &app,
            &[
                "keys",
                "create",
                "--merchant",
                &merchant,
                "--name",
                "deploy 2",
                "--json",
            ],
        )
        .await,
    );
    let second = made["secret"].as_str().unwrap().to_string();
    let second_id = made["key"]["id"].as_str().unwrap().to_string();
    assert!(second.starts_with("sk_mer_"));
    assert!(!refused(&app, &app.base_url, &second).await);

    // The list shows both keys and neither a secret nor its hash.
    let listed = payorch(&app, &["keys", "list", "--merchant", &merchant, "--json"]).await;
    let hash = hex::encode(accounts::secret_hash(&second));
    for hidden in [second.as_str(), app.merchant_key.as_str(), hash.as_str()] {
        assert!(
            !listed.contains(hidden),
            "the list shows a secret: {listed}"
        );
    }
    let listed = json_of(&listed);
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Test merchant", "deploy 2"]);
    for column in [
        "id",
        "role",
        "merchant_id",
        "name",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ] {
        assert!(listed[1].get(column).is_some(), "no {column}: {listed}");
    }
    let table = payorch(&app, &["keys", "list"]).await;
    assert!(
        table.contains(&second_id) && table.contains("support:operate"),
        "{table}"
    );

    // Rotated with no overlap: the new key works, the old one is refused.
    let rotated = json_of(
        &payorch(
            &app,
            &[
                "keys",
                "rotate",
                &second_id,
                "--overlap-secs",
                "0",
                "--json",
            ],
        )
        .await,
    );
    let third = rotated["secret"].as_str().unwrap().to_string();
    assert_eq!(rotated["key"]["rotated_from"], second_id);
    assert_eq!(rotated["key"]["name"], "deploy 2");
    assert!(
        eventually(Duration::from_secs(2), || refused(
            &app,
            &app.base_url,
            &second
        ))
        .await
    );
    assert!(!refused(&app, &app.base_url, &third).await);

    // Revoked: refused, and revoking again says so.
    let third_id = rotated["key"]["id"].as_str().unwrap().to_string();
    let revoked = json_of(&payorch(&app, &["keys", "revoke", &third_id, "--json"]).await);
    assert!(revoked["key"]["revoked_at"].is_string());
    assert!(
        eventually(Duration::from_secs(2), || refused(
            &app,
            &app.base_url,
            &third
        ))
        .await
    );
    let again = tokio::process::Command::new(payorch_bin())
        .args(["keys", "revoke", &third_id])
        .env("DATABASE_URL", &app.db.url)
        .output()
        .await
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already revoked"));
}

#[tokio::test]
async fn a_new_support_key_is_read_only_unless_it_is_given_operate() {
    let app = TestApp::spawn().await;
    let by_alias =
        json_of(&payorch(&app, &["support-key", "create", "--name", "Ada", "--json"]).await);
    assert_eq!(by_alias["role"], "read");
    let read = json_of(
        &payorch(
            &app,
            &["keys", "create", "--support", "--name", "Grace", "--json"],
        )
        .await,
    );
    assert_eq!(read["key"]["support_role"], "read");
    let operate = json_of(
        &payorch(
            &app,
            &[
                "keys",
                "create",
                "--support",
                "--role",
                "operate",
                "--name",
                "Linus",
                "--json",
            ],
        )
        .await,
    );
    assert_eq!(operate["key"]["support_role"], "operate");
    let mut conn = app.db.connect().await;
    let support = life::list_keys(&mut conn, KeyFilter::Support)
        .await
        .unwrap();
    let roles: Vec<(String, Option<SupportRole>)> = support
        .into_iter()
        .map(|k| (k.name, k.support_role))
        .collect();
    assert_eq!(
        roles,
        [
            ("Test support".to_string(), Some(SupportRole::Operate)),
            ("Ada".to_string(), Some(SupportRole::Read)),
            ("Grace".to_string(), Some(SupportRole::Read)),
            ("Linus".to_string(), Some(SupportRole::Operate)),
        ]
    );
}

/// A manual-capture checkout: a payment holding money, which support may void.
async fn held(app: &TestApp) -> Value {
    let body = json!({"amount": 4200, "currency": "eur", "payment_method": "pm_card_visa",
                      "capture_method": "manual"});
    let response = app.checkout("held-for-support", &body).await;
    assert_eq!(response.status(), 201);
    response.json::<Value>().await.unwrap()["payment"].clone()
}

async fn support_post(app: &TestApp, secret: &str, path: &str) -> reqwest::Response {
    app.post_keyed(secret, path, None, None).await
}

async fn put_routing(app: &TestApp, secret: &str, body: &Value) -> reqwest::Response {
    app.client
        .put(app.url(&format!("/v1/merchants/{}/routing", app.merchant_id)))
        .bearer_auth(secret)
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_read_only_support_key_reads_everything_and_writes_nothing() {
    let app = TestApp::spawn().await;
    let mut conn = app.db.connect().await;
    let reader = accounts::create_support_key(&mut conn, "Reader", SupportRole::Read)
        .await
        .unwrap()
        .secret;
    let payment = held(&app).await;
    let id = payment["id"].as_str().unwrap();
    let (_, paid) = app
        .pay(Route::Checkout, "paid-for-refund", "pm_card_visa")
        .await;
    let refund: Value = app
        .refunded(paid["id"].as_str().unwrap(), "refund-1", json!({}))
        .await;
    let refund_id = refund["id"].as_str().unwrap();
    let event: Value = app
        .get_as(&app.merchant_key, "/v1/events?limit=1")
        .await
        .json()
        .await
        .unwrap();
    let event_id = event["data"][0]["id"].as_str().unwrap();

    // Reads are allowed.
    let story = app
        .get_as(&reader, &format!("/v1/support/payments/{id}"))
        .await;
    assert_eq!(story.status(), 200);

    // Every write is refused, by name of the role it needs, and nothing moves.
    for path in [
        format!("/v1/support/payments/{id}/reconcile"),
        format!("/v1/support/payments/{id}/void"),
        format!("/v1/support/refunds/{refund_id}/reconcile"),
        format!("/v1/support/events/{event_id}/redeliver"),
    ] {
        let body = assert_problem(support_post(&app, &reader, &path).await, 403, "forbidden").await;
        assert!(
            body["detail"].as_str().unwrap().contains("operate role"),
            "{path}: {body}"
        );
    }
    let configured: Value = app
        .get_as(
            &reader,
            &format!("/v1/merchants/{}/routing", app.merchant_id),
        )
        .await
        .json()
        .await
        .unwrap();
    let routing = json!({"providers": configured["configured"]});
    let body = assert_problem(put_routing(&app, &reader, &routing).await, 403, "forbidden").await;
    assert!(body["detail"].as_str().unwrap().contains("operate role"));

    assert_eq!(app.payment(id).await["status"], payment["status"]);
    assert_eq!(app.db.count("merchant_routing").await, 0);
    assert_eq!(app.db.count("support_actions").await, 0);
    assert!(app
        .sandbox
        .voids()
        .iter()
        .all(|v| v.attempt_id.as_deref() != Some(id)));
}

#[tokio::test]
async fn every_support_write_is_audited_and_shown_in_the_payment_s_story() {
    let app = TestApp::spawn().await;
    let payment = held(&app).await;
    let id = payment["id"].as_str().unwrap();
    let before = payment["status"].as_str().unwrap().to_string();

    let response = support_post(
        &app,
        &app.support_key,
        &format!("/v1/support/payments/{id}/reconcile"),
    )
    .await;
    assert_eq!(response.status(), 200);
    let response = support_post(
        &app,
        &app.support_key,
        &format!("/v1/support/payments/{id}/void"),
    )
    .await;
    assert_eq!(response.status(), 200);
    // Pressed again: refused, and audited as asked and refused.
    let response = support_post(
        &app,
        &app.support_key,
        &format!("/v1/support/payments/{id}/void"),
    )
    .await;
    assert_problem(response, 409, "payment_not_cancelable").await;

    let story = app
        .get_as(&app.support_key, &format!("/v1/support/payments/{id}"))
        .await
        .json::<Value>()
        .await
        .unwrap();
    let actions = story["support_actions"].as_array().unwrap();
    let seen: Vec<(&str, &Value, &Value)> = actions
        .iter()
        .map(|a| (a["action"].as_str().unwrap(), &a["before"], &a["after"]))
        .collect();
    assert_eq!(
        seen,
        [
            (
                "reconcile_payment",
                &json!({"status": before}),
                &json!({"status": before})
            ),
            (
                "void_payment",
                &json!({"status": before}),
                &json!({"status": "canceled", "void": "succeeded"})
            ),
            (
                "void_payment",
                &json!({"status": "canceled"}),
                &json!({"error": "payment_not_cancelable"})
            ),
        ]
    );
    for action in actions {
        assert_eq!(action["key_name"], "Test support");
        assert_eq!(action["role"], "operate");
        assert_eq!(action["target_id"], id);
        assert!(action["key_id"].as_str().unwrap().starts_with("key_"));
        assert!(action["at"].is_string());
        assert_eq!(action["outcome"], "recorded");
        assert!(action["answered_at"].as_str().unwrap() >= action["at"].as_str().unwrap());
    }
    // Each is two rows: the ask, written before the provider was asked, and its outcome.
    assert_eq!(
        app.db
            .count(
                "support_actions a WHERE a.after = '{\"outcome\": \"asked\"}' \
                 AND a.answers IS NULL AND a.before IS NOT NULL \
                 AND EXISTS (SELECT 1 FROM support_actions o WHERE o.answers = a.id \
                             AND o.at >= a.at AND o.before = a.before)"
            )
            .await,
        3
    );

    // A routing change is audited in its own transaction, with the routing before and after.
    let configured: Value = app
        .get_as(
            &app.support_key,
            &format!("/v1/merchants/{}/routing", app.merchant_id),
        )
        .await
        .json()
        .await
        .unwrap();
    let mut order: Vec<Value> = configured["configured"].as_array().unwrap().clone();
    for _ in 0..2 {
        order.reverse();
        let response = put_routing(&app, &app.support_key, &json!({"providers": order})).await;
        assert_eq!(response.status(), 200);
    }
    #[derive(diesel::QueryableByName)]
    struct Audited {
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Jsonb>)]
        before: Option<Value>,
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Jsonb>)]
        after: Option<Value>,
    }
    let mut conn = app.db.connect().await;
    let changes: Vec<Audited> = diesel::sql_query(
        "SELECT before, after FROM support_actions WHERE action = 'change_routing' ORDER BY at, id",
    )
    .load(&mut conn)
    .await
    .unwrap();
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[0].before, None, "the default routing, none stored");
    assert_eq!(changes[1].before, changes[0].after);
    assert_eq!(
        changes[1].after.as_ref().unwrap()["providers"],
        json!(order)
    );

    // The audit is append-only, whoever asks.
    assert_refused_by(
        &mut conn,
        "UPDATE support_actions SET key_name = 'someone else'",
        "support_actions_append_only",
    )
    .await;
    assert_refused_by(
        &mut conn,
        "DELETE FROM support_actions",
        "support_actions_append_only",
    )
    .await;
    assert_eq!(app.db.count("support_actions").await, 3 * 2 + 2);
}

#[tokio::test]
async fn a_refund_reconcile_and_a_redelivery_are_audited_on_the_order() {
    let app = TestApp::spawn().await;
    let (_, paid) = app.pay(Route::Checkout, "audited", "pm_card_visa").await;
    let id = paid["id"].as_str().unwrap();
    let refund = app.refunded(id, "refund-audited", json!({})).await;
    let refund_id = refund["id"].as_str().unwrap();
    let response = support_post(
        &app,
        &app.support_key,
        &format!("/v1/support/refunds/{refund_id}/reconcile"),
    )
    .await;
    assert_eq!(response.status(), 200);
    let story: Value = app
        .get_as(&app.support_key, &format!("/v1/support/payments/{id}"))
        .await
        .json()
        .await
        .unwrap();
    let event_id = story["events"][0]["id"].as_str().unwrap().to_string();
    let response = support_post(
        &app,
        &app.support_key,
        &format!("/v1/support/events/{event_id}/redeliver"),
    )
    .await;
    assert_eq!(response.status(), 200);

    let story: Value = app
        .get_as(&app.support_key, &format!("/v1/support/payments/{id}"))
        .await
        .json()
        .await
        .unwrap();
    let actions = story["support_actions"].as_array().unwrap();
    assert_eq!(actions.len(), 2, "{story}");
    assert_eq!(actions[0]["action"], "reconcile_refund");
    assert_eq!(actions[0]["target_kind"], "refund");
    assert_eq!(actions[0]["target_id"], refund_id);
    assert_eq!(actions[0]["before"]["status"], refund["status"]);
    assert!(actions[0]["after"]["status"].is_string());
    assert_eq!(actions[1]["action"], "redeliver_event");
    assert_eq!(actions[1]["target_kind"], "event");
    assert_eq!(actions[1]["target_id"], event_id);
    assert!(actions[1]["after"]["deliveries_due"].is_number());
    assert!(
        actions.iter().all(|a| a["outcome"] == "recorded"),
        "{story}"
    );
    // The refund's reconcile is its ask and its outcome; the redelivery one row, written with it.
    assert_eq!(app.db.count("support_actions").await, 2 + 1);
}

#[tokio::test]
async fn an_unknown_key_or_merchant_is_named() {
    let app = TestApp::spawn().await;
    let mut conn = app.db.connect().await;
    let missing = ApiKeyId::new();
    assert!(matches!(
        life::revoke_key(&mut conn, missing).await,
        Err(life::KeyLifeError::NotFound(id)) if id == missing
    ));
    assert!(matches!(
        life::create_key(
            &mut conn,
            KeyOwner::Merchant(payorch::ids::MerchantId::new()),
            "x"
        )
        .await,
        Err(life::KeyLifeError::NoSuchMerchant(_))
    ));
}

#[tokio::test]
async fn support_keys_made_before_roles_keep_acting_after_the_upgrade() {
    use payorch::db::migrations::run_migrations;

    // The database as it was before this migration, with a support key of that time.
    let db = TestDatabase::empty().await;
    migrate_before(&db.url, "20261127000017").await;
    let mut conn = db.connect().await;
    diesel::sql_query(
        "INSERT INTO api_keys (id, secret_sha256, role, name) \
         VALUES (gen_random_uuid(), sha256('before roles'), 'support', 'Before roles')",
    )
    .execute(&mut conn)
    .await
    .unwrap();

    run_migrations(&db.url).await.unwrap();
    let keys = life::list_keys(&mut conn, KeyFilter::Support)
        .await
        .unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].support_role, Some(SupportRole::Operate));
}

/// Migrated by an owner whose default privileges grant the runtime role nothing (another
/// role than the one that ran migration 16): the runtime role may still read and add to the
/// support audit, and only that.
#[tokio::test]
async fn the_runtime_role_may_add_to_the_audit_whoever_migrates() {
    use diesel::sql_types::{Bool, Text};
    use payorch::db::migrations::run_migrations;

    #[derive(diesel::QueryableByName)]
    struct Granted {
        #[diesel(sql_type = Bool)]
        granted: bool,
    }

    let db = TestDatabase::empty().await;
    migrate_before(&db.url, "20261127000017").await;
    let mut conn = db.connect().await;
    diesel::sql_query(
        "ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM payorch_runtime",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    run_migrations(&db.url).await.unwrap();

    for (privilege, expected) in [
        ("SELECT", true),
        ("INSERT", true),
        ("UPDATE", false),
        ("DELETE", false),
        ("TRUNCATE", false),
    ] {
        let Granted { granted } = diesel::sql_query(
            "SELECT has_table_privilege('payorch_runtime', 'support_actions', $1) AS granted",
        )
        .bind::<Text, _>(privilege)
        .get_result(&mut conn)
        .await
        .unwrap();
        assert_eq!(granted, expected, "{privilege} on support_actions");
    }
}

/// The console shows what support did in the payment's story, and tells a read-only key
/// which role a write needs.
#[tokio::test]
async fn the_console_shows_support_actions_and_refuses_a_read_only_key_by_name() {
    use crate::browser::{browser, screenshot, show, text_with};
    use fantoccini::Locator;

    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let reader =
        accounts::create_support_key(&mut app.db.connect().await, "Reader", SupportRole::Read)
            .await
            .unwrap()
            .secret;
    let payment = held(&app).await;
    let id = payment["id"].as_str().unwrap().to_owned();

    // A read-only key sees the story and is told which role the void needs.
    client.goto(&app.url("/console")).await.unwrap();
    let key = client.find(Locator::Id("key")).await.unwrap();
    key.send_keys(&reader).await.unwrap();
    key.send_keys("\u{E007}").await.unwrap();
    let query = client.find(Locator::Id("query")).await.unwrap();
    query.send_keys(&id).await.unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    text_with(&client, "support-actions", "none").await;
    client
        .find(Locator::Id("void-hold"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    text_with(&client, "void-result", "operate role").await;
    assert_eq!(app.payment(&id).await["status"], "authorized");

    // Voided by the operator key: the story lists who did it, before and after.
    let response = support_post(
        &app,
        &app.support_key,
        &format!("/v1/support/payments/{id}/void"),
    )
    .await;
    assert_eq!(response.status(), 200);
    // Found again, as the read-only key still may.
    let query = client.find(Locator::Id("query")).await.unwrap();
    query.clear().await.unwrap();
    query.send_keys(&id).await.unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    let shown = text_with(&client, "support-actions", "void payment").await;
    assert!(
        shown.contains(
            "by Test support (operate): status authorized → status canceled, void succeeded"
        ),
        "{shown}"
    );

    // An action whose outcome was never recorded is shown as asked, outcome unknown.
    let mut conn = app.db.connect().await;
    refuse_audit_rows(
        &mut conn,
        r#"NEW.after IS DISTINCT FROM '{"outcome": "asked"}'"#,
    )
    .await;
    let response = support_post(
        &app,
        &app.support_key,
        &format!("/v1/support/payments/{id}/reconcile"),
    )
    .await;
    assert_eq!(response.status(), 200);
    allow_audit_rows(&mut conn).await;
    let query = client.find(Locator::Id("query")).await.unwrap();
    query.clear().await.unwrap();
    query.send_keys(&id).await.unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    let shown = text_with(&client, "support-actions", "reconcile payment").await;
    assert!(
        shown.contains("by Test support (operate): status canceled → asked, outcome unknown"),
        "{shown}"
    );
    show(&client, "support-actions").await;
    screenshot(&client, "console-support-actions").await;
    client.close().await.unwrap();
}

#[tokio::test]
async fn the_openapi_document_shows_support_actions_and_the_role_a_write_needs() {
    let app = TestApp::spawn().await;
    let doc: Value = app.get("/openapi.json").await.json().await.unwrap();
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["Story"]["properties"]["support_actions"]["items"]["$ref"],
        "#/components/schemas/SupportAction"
    );
    for field in [
        "key_id",
        "key_name",
        "role",
        "action",
        "target_kind",
        "target_id",
        "at",
        "outcome",
        "answered_at",
    ] {
        assert!(
            schemas["SupportAction"]["properties"].get(field).is_some(),
            "SupportAction lacks {field}"
        );
    }
    for (method, path) in [
        ("post", "/v1/support/payments/{id}/reconcile"),
        ("post", "/v1/support/payments/{id}/void"),
        ("post", "/v1/support/refunds/{id}/reconcile"),
        ("post", "/v1/support/events/{id}/redeliver"),
        ("put", "/v1/merchants/{id}/routing"),
    ] {
        let forbidden = &doc["paths"][path][method]["responses"]["403"]["description"];
        assert!(
            forbidden
                .as_str()
                .unwrap_or_default()
                .contains("`operate` role"),
            "{method} {path}: {forbidden}"
        );
    }
}

/// Every action the code audits is one the table takes, on the kind of target the code names;
/// anything else is refused by the database.
#[tokio::test]
async fn every_audited_action_is_one_the_database_takes() {
    use payorch::ids::OrderId;
    use payorch::payments::support::audit::{self, Action, Actor, Done};

    let app = TestApp::spawn().await;
    let mut conn = app.db.connect().await;
    let key = life::list_keys(&mut conn, KeyFilter::Support)
        .await
        .unwrap()[0]
        .clone();
    let actor = Actor {
        key_id: key.id,
        key_name: key.name,
        role: SupportRole::Operate,
    };
    let done = |action: Action| Done {
        action,
        target_id: uuid::Uuid::now_v7(),
        merchant_id: app.merchant_id,
        order_id: (action != Action::ChangeRouting).then(OrderId::new),
        before: None,
        after: Some(json!({})),
    };
    for action in Action::ALL {
        if action.is_asked_first() {
            let asked = audit::ask(&mut conn, &actor, done(action))
                .await
                .unwrap_or_else(|e| panic!("{action:?} asked: {e}"));
            audit::answer(&mut conn, asked, json!({}))
                .await
                .unwrap_or_else(|e| panic!("{action:?} answered: {e}"));
        } else {
            audit::record(&mut conn, &actor, done(action))
                .await
                .unwrap_or_else(|e| panic!("{action:?}: {e}"));
        }
    }
    assert_refused_by(
        &mut conn,
        &format!(
            "INSERT INTO support_actions (id, key_id, key_name, support_role, action, \
             target_kind, target_id, merchant_id, order_id) VALUES (gen_random_uuid(), \
             '{}', 'x', 'operate', 'void_payment', 'refund', gen_random_uuid(), '{}', \
             gen_random_uuid())",
            actor.key_id.0, app.merchant_id.0
        ),
        "support_actions_action_target",
    )
    .await;

    // A provider-driven action's outcome with no ask before it, and a one-row action that
    // says it was only asked, are refused.
    let row = |action: &str, kind: &str, after: &str, answers: &str| {
        format!(
            "INSERT INTO support_actions (id, key_id, key_name, support_role, action, \
             target_kind, target_id, merchant_id, order_id, after, answers) \
             SELECT gen_random_uuid(), '{}', 'x', 'operate', '{action}', '{kind}', \
             gen_random_uuid(), '{}', gen_random_uuid(), '{after}', {answers}",
            actor.key_id.0, app.merchant_id.0
        )
    };
    assert_refused_by(
        &mut conn,
        &row(
            "void_payment",
            "payment",
            r#"{"status": "canceled"}"#,
            "NULL",
        ),
        "support_actions_asked_first",
    )
    .await;
    assert_refused_by(
        &mut conn,
        &row(
            "redeliver_event",
            "event",
            r#"{"outcome": "asked"}"#,
            "NULL",
        ),
        "support_actions_asked_first",
    )
    .await;
    // An ask is answered once, by an outcome of its own key, action and target.
    let answer_to = |action: &str, target: &str, answered: bool| {
        format!(
            "INSERT INTO support_actions (id, key_id, key_name, support_role, action, \
             target_kind, target_id, merchant_id, order_id, after, answers) \
             SELECT gen_random_uuid(), key_id, key_name, support_role, '{action}', target_kind, \
             {target}, merchant_id, order_id, '{{}}', id FROM support_actions a \
             WHERE action = 'void_payment' AND answers IS NULL AND {} \
             EXISTS (SELECT 1 FROM support_actions o WHERE o.answers = a.id)",
            if answered { "" } else { "NOT" }
        )
    };
    assert_refused_by(
        &mut conn,
        &answer_to("void_payment", "target_id", true),
        "support_actions_one_outcome",
    )
    .await;
    let _unanswered = audit::ask(&mut conn, &actor, done(Action::VoidPayment))
        .await
        .unwrap();
    assert_refused_by(
        &mut conn,
        &answer_to("reconcile_payment", "target_id", false),
        "support_actions_answers",
    )
    .await;
    assert_refused_by(
        &mut conn,
        &answer_to("void_payment", "gen_random_uuid()", false),
        "support_actions_answers",
    )
    .await;
    assert_eq!(app.db.count("support_actions").await, 3 * 2 + 2 + 1);
}

/// Makes the database refuse the `support_actions` rows for which `when` holds (an SQL
/// condition on `NEW`), as an outage or a crash at that write would leave them unwritten.
async fn refuse_audit_rows(conn: &mut payorch::db::PgConn, when: &str) {
    for sql in [
        "CREATE OR REPLACE FUNCTION refuse_audit_row() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'the audit cannot be written'; END; $$"
            .to_owned(),
        "DROP TRIGGER IF EXISTS refuse_audit_row ON support_actions".to_owned(),
        format!(
            "CREATE TRIGGER refuse_audit_row BEFORE INSERT ON support_actions FOR EACH ROW \
             WHEN ({when}) EXECUTE FUNCTION refuse_audit_row()"
        ),
    ] {
        diesel::sql_query(&sql)
            .execute(conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

async fn allow_audit_rows(conn: &mut payorch::db::PgConn) {
    diesel::sql_query("DROP TRIGGER refuse_audit_row ON support_actions")
        .execute(conn)
        .await
        .unwrap();
}

/// A void, a reconcile or a redelivery whose audit cannot be written is not done: the caller
/// is told so, and nothing moved.
#[tokio::test]
async fn a_support_action_is_not_taken_when_its_audit_cannot_be_written() {
    let app = TestApp::spawn().await;
    let payment = held(&app).await;
    let id = payment["id"].as_str().unwrap();
    let story: Value = app
        .get_as(&app.support_key, &format!("/v1/support/payments/{id}"))
        .await
        .json()
        .await
        .unwrap();
    let event_id = story["events"][0]["id"]
        .as_str()
        .expect("an event")
        .to_owned();
    let deliveries_of_event = format!(
        "event_deliveries WHERE event_id = '{}'",
        event_id.parse::<payorch::ids::EventId>().unwrap().0
    );
    let mut conn = app.db.connect().await;
    // An endpoint made after the events, so a redelivery would give it a delivery.
    let endpoint = uuid::Uuid::now_v7();
    diesel::sql_query(format!(
        "INSERT INTO webhook_endpoints (merchant_id, id, url, enabled_events, secret) \
         VALUES ('{}', '{endpoint}', 'https://endpoint.invalid/', ARRAY['*'], '{}')",
        app.merchant_id.0,
        crate::helpers::sealed_secret(
            payorch::ids::EndpointId(endpoint),
            &payorch::events::signing::Secret::generate()
        ),
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    let provider_calls = app.db.count("provider_calls").await;
    refuse_audit_rows(&mut conn, "true").await;

    for path in [
        format!("/v1/support/payments/{id}/void"),
        format!("/v1/support/payments/{id}/reconcile"),
        format!("/v1/support/events/{event_id}/redeliver"),
    ] {
        let response = support_post(&app, &app.support_key, &path).await;
        assert_problem(response, 500, "internal_error").await;
    }
    assert_eq!(app.payment(id).await["status"], "authorized");
    assert!(app
        .sandbox
        .voids()
        .iter()
        .all(|v| v.attempt_id.as_deref() != Some(id)));
    assert_eq!(app.db.count("provider_calls").await, provider_calls);
    assert_eq!(app.db.count(&deliveries_of_event).await, 0);
    assert_eq!(app.db.count("support_actions").await, 0);

    // Once the audit can be written, the same void is done, and on record.
    allow_audit_rows(&mut conn).await;
    let response = support_post(
        &app,
        &app.support_key,
        &format!("/v1/support/payments/{id}/void"),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(app.payment(id).await["status"], "canceled");
    let path = format!("/v1/support/events/{event_id}/redeliver");
    let response = support_post(&app, &app.support_key, &path).await;
    assert_eq!(response.status(), 200);
    assert_eq!(app.db.count(&deliveries_of_event).await, 1);
    assert_eq!(app.db.count("support_actions").await, 2 + 1);
}

/// A provider-driven action is on record before it is taken: when its outcome is never
/// written (the process stopped, the database went away), the story still shows it, as
/// asked with its outcome unknown.
#[tokio::test]
async fn an_action_whose_outcome_never_came_is_shown_asked_with_its_outcome_unknown() {
    let app = TestApp::spawn().await;
    let payment = held(&app).await;
    let id = payment["id"].as_str().unwrap();
    let mut conn = app.db.connect().await;
    refuse_audit_rows(
        &mut conn,
        r#"NEW.after IS DISTINCT FROM '{"outcome": "asked"}'"#,
    )
    .await;

    // The void is done (the caller is told what it did), its outcome never recorded.
    let response = support_post(
        &app,
        &app.support_key,
        &format!("/v1/support/payments/{id}/void"),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(app.payment(id).await["status"], "canceled");
    assert!(app
        .sandbox
        .voids()
        .iter()
        .any(|v| v.attempt_id.as_deref() == Some(id)));
    allow_audit_rows(&mut conn).await;

    let story: Value = app
        .get_as(&app.support_key, &format!("/v1/support/payments/{id}"))
        .await
        .json()
        .await
        .unwrap();
    let actions = story["support_actions"].as_array().unwrap();
    assert_eq!(actions.len(), 1, "{story}");
    assert_eq!(actions[0]["action"], "void_payment");
    assert_eq!(actions[0]["key_name"], "Test support");
    assert_eq!(actions[0]["before"], json!({"status": "authorized"}));
    assert_eq!(actions[0]["outcome"], "unknown");
    assert_eq!(actions[0]["after"], Value::Null);
    assert_eq!(actions[0]["answered_at"], Value::Null);
    assert_eq!(app.db.count("support_actions").await, 1);

    // Pressed again, the second void is refused and fully on record; the first stays unknown.
    let response = support_post(
        &app,
        &app.support_key,
        &format!("/v1/support/payments/{id}/void"),
    )
    .await;
    assert_problem(response, 409, "payment_not_cancelable").await;
    let story: Value = app
        .get_as(&app.support_key, &format!("/v1/support/payments/{id}"))
        .await
        .json()
        .await
        .unwrap();
    let outcomes: Vec<(&Value, &Value)> = story["support_actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (&a["outcome"], &a["after"]))
        .collect();
    assert_eq!(
        outcomes,
        [
            (&json!("unknown"), &Value::Null),
            (
                &json!("recorded"),
                &json!({"error": "payment_not_cancelable"})
            ),
        ]
    );
}

/// Migrates the database at `url` up to, not including, the migration of `version`.
async fn migrate_before(url: &str, version: &'static str) {
    use diesel::Connection;
    use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
    use diesel_migrations::MigrationHarness;
    use payorch::db::migrations::MIGRATIONS;

    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut conn = AsyncConnectionWrapper::<payorch::db::PgConn>::establish(&url).unwrap();
        loop {
            let pending = conn.pending_migrations(MIGRATIONS).unwrap();
            let next = <[_]>::first(&pending).expect("this migration is among them");
            if next.name().version().to_string().as_str() >= version {
                return;
            }
            conn.run_next_migration(MIGRATIONS).unwrap();
        }
    })
    .await
    .unwrap();
}
