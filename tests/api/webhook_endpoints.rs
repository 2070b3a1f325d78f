//! Webhook endpoints (docs/guides/events.md, "Webhook endpoints"): made and rotated under an Idempotency-Key
//! like every POST, their secret shown only to the request that made it, read by their
//! merchant and support, soft-deleted with their pending deliveries canceled.

use payorch::events::endpoints::sealed::SealedSecret;
use payorch::events::safe_url::UrlPolicy;
use payorch::events::EventType;
use payorch::ids::EndpointId;
use payorch::sealing::MasterKeys;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, TestApp, TEST_MASTER_KEY};
use crate::payments::Route;

const URL: &str = "https://shop.example/webhooks/payorch";

/// An app with this URL policy (the tests' own default takes `http://` to loopback).
async fn with_urls(urls: UrlPolicy) -> TestApp {
    TestApp::spawn_with(|settings| settings.delivery.urls = urls).await
}

impl TestApp {
    async fn create_endpoint(&self, key: &str, body: Value) -> reqwest::Response {
        self.post_keyed(
            &self.merchant_key,
            "/v1/webhook_endpoints",
            Some(key),
            Some(body.to_string()),
        )
        .await
    }

    /// An endpoint that must be made: its `201` body.
    async fn endpoint(&self, key: &str, body: Value) -> Value {
        let response = self.create_endpoint(key, body).await;
        assert_eq!(response.status(), 201);
        assert!(response.headers().get("idempotent-replayed").is_none());
        response.json().await.unwrap()
    }

    async fn rotate(&self, id: &str, key: &str) -> reqwest::Response {
        self.post_keyed(
            &self.merchant_key,
            &format!("/v1/webhook_endpoints/{id}/rotate_secret"),
            Some(key),
            None,
        )
        .await
    }

    async fn delete_as(&self, secret: &str, path: &str) -> reqwest::Response {
        self.client
            .delete(self.url(path))
            .bearer_auth(secret)
            .send()
            .await
            .expect("request sent")
    }

    /// The endpoint's secrets as stored, each opened under the tests' master key (and checked
    /// sealed: the clear secret is nowhere in the column): `(secret, previous_secret,
    /// previous_secret_until - updated_at in seconds)`.
    async fn stored_secrets(&self, id: &str) -> (String, Option<String>, Option<f64>) {
        #[derive(diesel::QueryableByName)]
        struct Row {
            #[diesel(sql_type = diesel::sql_types::Text)]
            secret: String,
            #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
            previous_secret: Option<String>,
            #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Double>)]
            window: Option<f64>,
        }
        let uuid = id.strip_prefix("we_").unwrap();
        let mut conn = self.db.connect().await;
        let row: Row = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(format!(
                "SELECT secret, previous_secret,
                        extract(epoch FROM previous_secret_until - updated_at)::float8 AS window
                 FROM webhook_endpoints WHERE id = '{uuid}'"
            )),
            &mut conn,
        )
        .await
        .unwrap();
        let keys = MasterKeys::parse(TEST_MASTER_KEY).unwrap();
        let endpoint = EndpointId(uuid.parse().unwrap());
        let open = |stored: String| {
            assert!(stored.starts_with("v1:test:"), "{stored}");
            let secret = SealedSecret::from(stored.clone())
                .open(&keys, endpoint)
                .expect("it opens under the master key");
            assert!(!stored.contains(&secret.expose()[6..]), "{stored}");
            secret.expose().to_owned()
        };
        (open(row.secret), row.previous_secret.map(open), row.window)
    }
}

fn id_of(endpoint: &Value) -> &str {
    endpoint["id"].as_str().unwrap()
}

#[tokio::test]
async fn an_endpoint_is_made_with_its_secret_shown_once_and_read_without_it() {
    let app = TestApp::spawn().await;
    let first = app
        .endpoint(
            "we-1",
            json!({"url": URL, "enabled_events": ["payment.succeeded", "order.refunded"],
                   "description": "orders"}),
        )
        .await;
    assert_eq!(first["object"], "webhook_endpoint");
    assert!(id_of(&first).starts_with("we_"));
    assert_eq!(first["url"], URL);
    assert_eq!(first["description"], "orders");
    assert_eq!(
        first["enabled_events"],
        json!(["payment.succeeded", "order.refunded"])
    );
    assert_eq!(first["status"], "enabled");
    assert_eq!(first["disabled_reason"], Value::Null);
    assert_eq!(first["deleted"], false);
    assert_eq!(first["merchant_id"], app.merchant_id.to_string());
    let secret = first["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert_eq!(app.stored_secrets(id_of(&first)).await.0, secret);

    let second = app
        .endpoint("we-2", json!({"url": URL, "enabled_events": ["*"]}))
        .await;
    assert_eq!(second["enabled_events"], json!(["*"]));
    assert_ne!(second["secret"], first["secret"]);

    let shown = app
        .get_as(
            &app.merchant_key,
            &format!("/v1/webhook_endpoints/{}", id_of(&first)),
        )
        .await;
    assert_eq!(shown.status(), 200);
    let shown: Value = shown.json().await.unwrap();
    assert_eq!(shown["id"], first["id"]);
    assert_eq!(shown["url"], URL);
    assert!(shown.get("secret").is_none(), "{shown}");

    let list: Value = app
        .get_as(&app.merchant_key, "/v1/webhook_endpoints")
        .await
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = list["data"].as_array().unwrap().iter().map(id_of).collect();
    assert_eq!(ids, [id_of(&second), id_of(&first)], "newest first");
    assert!(list["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e.get("secret").is_none()));
}

#[tokio::test]
async fn bad_fields_are_each_named_and_nothing_is_made() {
    let app = with_urls(UrlPolicy::default()).await;
    let events = json!(["payment.succeeded"]);
    for (body, field, says) in [
        (json!({"enabled_events": events}), "/url", "is required"),
        (json!({"url": URL}), "/enabled_events", "order.refunded"),
        (
            json!({"url": "shop.example/hook", "enabled_events": events}),
            "/url",
            "absolute URL",
        ),
        (
            json!({"url": "ftp://shop.example/hook", "enabled_events": events}),
            "/url",
            "https",
        ),
        (
            json!({"url": "https://me:pw@shop.example/hook", "enabled_events": events}),
            "/url",
            "user name or password",
        ),
        (
            json!({"url": "http://shop.example/hook", "enabled_events": events}),
            "/url",
            "--allow-http-webhooks",
        ),
        (
            json!({"url": "http://127.0.0.1:8090/hook", "enabled_events": events}),
            "/url",
            "--allow-http-webhooks",
        ),
        (
            json!({"url": "https://10.0.0.5/hook", "enabled_events": events}),
            "/url",
            "--allow-private-webhook-addresses",
        ),
        (
            json!({"url": "https://169.254.169.254/latest/meta-data", "enabled_events": events}),
            "/url",
            "metadata",
        ),
        (
            json!({"url": format!("https://shop.example/{}", "x".repeat(2100)),
                   "enabled_events": events}),
            "/url",
            "at most 2048",
        ),
        (
            json!({"url": URL, "enabled_events": []}),
            "/enabled_events",
            "at least one",
        ),
        (
            json!({"url": URL, "enabled_events": ["payment.succeeded", "payment.lost"]}),
            "/enabled_events/1",
            "payment.pending, payment.requires_action",
        ),
        (
            json!({"url": URL, "enabled_events": ["*", "payment.succeeded"]}),
            "/enabled_events",
            "alone",
        ),
        (
            json!({"url": URL, "enabled_events": events, "description": "x".repeat(1001)}),
            "/description",
            "at most 1000",
        ),
    ] {
        let response = app.create_endpoint("bad", body.clone()).await;
        let problem = assert_problem(response, 422, "validation_failed").await;
        let errors = problem["errors"].as_array().unwrap();
        assert!(
            errors
                .iter()
                .any(|e| e["field"] == field && e["message"].as_str().unwrap().contains(says)),
            "{body}: {problem}"
        );
    }
    // Both fields missing: both named at once.
    let problem = assert_problem(
        app.create_endpoint("bad", json!({})).await,
        422,
        "validation_failed",
    )
    .await;
    assert_eq!(problem["errors"].as_array().unwrap().len(), 2, "{problem}");
    // Wrong types and unknown fields are not a validation of values but a malformed body.
    for body in [
        json!({"url": URL, "enabled_events": "payment.succeeded"}),
        json!({"url": URL, "enabled_events": ["*"], "secret": "whsec_mine"}),
    ] {
        assert_problem(
            app.create_endpoint("bad", body).await,
            400,
            "invalid_request",
        )
        .await;
    }
    assert_eq!(app.db.count("webhook_endpoints").await, 0);
    assert_eq!(app.db.count("idempotency_keys").await, 0);
}

#[tokio::test]
async fn http_to_loopback_and_private_addresses_only_with_their_flags() {
    let app = with_urls(UrlPolicy {
        allow_http: true,
        allow_private: false,
    })
    .await;
    app.endpoint(
        "local",
        json!({"url": "http://127.0.0.1:8090/hook", "enabled_events": ["*"]}),
    )
    .await;
    let response = app
        .create_endpoint(
            "private",
            json!({"url": "https://10.0.0.5/hook", "enabled_events": ["*"]}),
        )
        .await;
    assert_problem(response, 422, "validation_failed").await;

    let app = with_urls(UrlPolicy {
        allow_http: false,
        allow_private: true,
    })
    .await;
    app.endpoint(
        "private",
        json!({"url": "https://10.0.0.5/hook", "enabled_events": ["*"]}),
    )
    .await;
    let response = app
        .create_endpoint(
            "local",
            json!({"url": "http://127.0.0.1:8090/hook", "enabled_events": ["*"]}),
        )
        .await;
    assert_problem(response, 422, "validation_failed").await;
}

#[tokio::test]
async fn a_retry_replays_the_endpoint_with_its_secret_and_another_body_is_refused() {
    let app = TestApp::spawn().await;
    let body = json!({"url": URL, "enabled_events": ["*"]});
    let made = app.endpoint("once", body.clone()).await;

    let again = app.create_endpoint("once", body.clone()).await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again, made, "the same answer, secret and all");
    assert_eq!(app.db.count("webhook_endpoints").await, 1);

    let other = json!({"url": URL, "enabled_events": ["payment.succeeded"]});
    assert_problem(
        app.create_endpoint("once", other).await,
        422,
        "idempotency_key_reused",
    )
    .await;
    assert_eq!(app.db.count("webhook_endpoints").await, 1);

    // Rotated since, a replay shows the secret that signs now, not the one it made.
    let rotated: Value = app
        .rotate(id_of(&made), "rotate")
        .await
        .json()
        .await
        .unwrap();
    let replayed: Value = app
        .create_endpoint("once", body.clone())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(replayed["secret"], rotated["secret"]);
    assert_ne!(replayed["secret"], made["secret"]);

    // Deleted since, it shows the endpoint deleted and no secret.
    let deleted = app
        .delete_as(
            &app.merchant_key,
            &format!("/v1/webhook_endpoints/{}", id_of(&made)),
        )
        .await;
    assert_eq!(deleted.status(), 200);
    let replayed = app.create_endpoint("once", body).await;
    assert_eq!(replayed.status(), 201);
    let replayed: Value = replayed.json().await.unwrap();
    assert_eq!(replayed["deleted"], true);
    assert!(replayed.get("secret").is_none(), "{replayed}");
    assert_eq!(app.db.count("webhook_endpoints").await, 1);
}

#[tokio::test]
async fn a_rotation_keeps_the_old_secret_signing_for_24_hours() {
    let app = TestApp::spawn().await;
    let made = app
        .endpoint("made", json!({"url": URL, "enabled_events": ["*"]}))
        .await;
    let id = id_of(&made);
    let old = made["secret"].as_str().unwrap();
    assert_eq!(made["previous_secret_expires_at"], Value::Null);

    let response = app.rotate(id, "rotate-1").await;
    assert_eq!(response.status(), 200);
    let rotated: Value = response.json().await.unwrap();
    let new = rotated["secret"].as_str().unwrap();
    assert!(new.starts_with("whsec_") && new != old, "{new}");
    assert!(rotated["previous_secret_expires_at"].is_string());
    let (secret, previous, window) = app.stored_secrets(id).await;
    assert_eq!(secret, new);
    assert_eq!(previous.as_deref(), Some(old));
    assert_eq!(window, Some(24.0 * 3600.0));

    // A retry of the rotation replays it: no third secret.
    let again = app.rotate(id, "rotate-1").await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["secret"], new);
    assert_eq!(app.stored_secrets(id).await.0, new);

    // A second rotation replaces the previous secret: the one just replaced keeps signing.
    let newest: Value = app.rotate(id, "rotate-2").await.json().await.unwrap();
    let (secret, previous, _) = app.stored_secrets(id).await;
    assert_eq!(Some(secret.as_str()), newest["secret"].as_str());
    assert_eq!(previous.as_deref(), Some(new));

    let shown: Value = app
        .get_as(&app.merchant_key, &format!("/v1/webhook_endpoints/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert!(shown.get("secret").is_none(), "{shown}");
    assert_problem(
        app.rotate("we_00000000000070008000000000000000", "rotate-3")
            .await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn deleting_cancels_its_pending_deliveries_and_hides_it() {
    let app = TestApp::spawn().await;
    let made = app
        .endpoint("made", json!({"url": URL, "enabled_events": ["*"]}))
        .await;
    let id = id_of(&made);
    let uuid = id.strip_prefix("we_").unwrap();
    let (status, _) = app.pay(Route::Checkout, "pay", "pm_card_visa").await;
    assert_eq!(status, 201);
    let of_endpoint = |state: &str| {
        format!("event_deliveries WHERE endpoint_id = '{uuid}' AND state = '{state}'")
    };
    assert!(app.db.count(&of_endpoint("pending")).await > 0);

    let response = app
        .delete_as(&app.merchant_key, &format!("/v1/webhook_endpoints/{id}"))
        .await;
    assert_eq!(response.status(), 200);
    let deleted: Value = response.json().await.unwrap();
    assert_eq!(deleted["id"], id);
    assert_eq!(deleted["deleted"], true);
    assert_eq!(deleted["status"], "enabled", "its status stays");
    assert!(deleted.get("secret").is_none(), "{deleted}");
    assert_eq!(app.db.count(&of_endpoint("pending")).await, 0);
    assert!(app.db.count(&of_endpoint("canceled")).await > 0);
    assert_eq!(
        app.db
            .count(&format!(
                "webhook_endpoints WHERE id = '{uuid}' AND deleted_at IS NOT NULL"
            ))
            .await,
        1
    );

    let path = format!("/v1/webhook_endpoints/{id}");
    assert_problem(app.get_as(&app.merchant_key, &path).await, 404, "not_found").await;
    assert_problem(
        app.delete_as(&app.merchant_key, &path).await,
        404,
        "not_found",
    )
    .await;
    let list: Value = app
        .get_as(&app.merchant_key, "/v1/webhook_endpoints")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["data"], json!([]));
    assert_problem(app.rotate(id, "rotate").await, 404, "not_found").await;
}

#[tokio::test]
async fn another_merchants_endpoint_is_not_there_and_support_reads_every_one() {
    let app = TestApp::spawn().await;
    let made = app
        .endpoint("made", json!({"url": URL, "enabled_events": ["*"]}))
        .await;
    let path = format!("/v1/webhook_endpoints/{}", id_of(&made));
    let (other_id, other) = app.other_merchant().await;

    assert_problem(app.get_as(&other, &path).await, 404, "not_found").await;
    assert_problem(app.delete_as(&other, &path).await, 404, "not_found").await;
    let rotate = app
        .post_keyed(&other, &format!("{path}/rotate_secret"), Some("r"), None)
        .await;
    assert_problem(rotate, 404, "not_found").await;
    let theirs: Value = app
        .get_as(&other, "/v1/webhook_endpoints")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(theirs["data"], json!([]));
    let asked: Value = app
        .get_as(
            &other,
            &format!("/v1/webhook_endpoints?merchant_id={}", app.merchant_id),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(asked["data"], json!([]));

    let shown = app.get_as(&app.support_key, &path).await;
    assert_eq!(shown.status(), 200);
    let shown: Value = shown.json().await.unwrap();
    assert!(shown.get("secret").is_none(), "{shown}");
    let listed: Value = app
        .get_as(
            &app.support_key,
            &format!("/v1/webhook_endpoints?merchant_id={}", app.merchant_id),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["data"][0]["id"], made["id"]);
    let none: Value = app
        .get_as(
            &app.support_key,
            &format!("/v1/webhook_endpoints?merchant_id={other_id}"),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(none["data"], json!([]));
    assert_problem(
        app.get_as(&app.support_key, "/v1/webhook_endpoints").await,
        422,
        "validation_failed",
    )
    .await;
    assert_problem(
        app.get_as(&app.support_key, "/v1/webhook_endpoints?merchant_id=nope")
            .await,
        422,
        "validation_failed",
    )
    .await;

    // Support reads, never writes.
    assert_problem(
        app.delete_as(&app.support_key, &path).await,
        403,
        "forbidden",
    )
    .await;
    let create = app
        .post_keyed(
            &app.support_key,
            "/v1/webhook_endpoints",
            Some("s"),
            Some(json!({"url": URL, "enabled_events": ["*"]}).to_string()),
        )
        .await;
    assert_problem(create, 403, "forbidden").await;
    assert_problem(
        app.post_keyed(
            &app.support_key,
            &format!("{path}/rotate_secret"),
            Some("s"),
            None,
        )
        .await,
        403,
        "forbidden",
    )
    .await;
}

#[tokio::test]
async fn a_merchant_has_at_most_16_endpoints_and_a_refused_key_is_not_spent() {
    let app = TestApp::spawn().await;
    let body = json!({"url": URL, "enabled_events": ["*"]});
    let mut first = None;
    for n in 0..16 {
        let made = app.endpoint(&format!("we-{n}"), body.clone()).await;
        first.get_or_insert(made);
    }
    let problem = assert_problem(
        app.create_endpoint("we-16", body.clone()).await,
        409,
        "webhook_endpoint_limit",
    )
    .await;
    assert_eq!(problem["limit"], 16);
    assert_eq!(app.db.count("webhook_endpoints").await, 16);

    let first = first.unwrap();
    let deleted = app
        .delete_as(
            &app.merchant_key,
            &format!("/v1/webhook_endpoints/{}", id_of(&first)),
        )
        .await;
    assert_eq!(deleted.status(), 200);
    // Nothing was recorded under the refused key: it makes the endpoint now.
    app.endpoint("we-16", body).await;
}

/// The document lists every route with the statuses it answers, and the body as validated.
#[tokio::test]
async fn the_routes_are_documented_as_they_answer() {
    let app = TestApp::spawn().await;
    let doc: Value = app.get("/openapi.json").await.json().await.unwrap();
    for (method, path, statuses) in [
        (
            "post",
            "/v1/webhook_endpoints",
            &["201", "403", "409", "422", "429"][..],
        ),
        ("get", "/v1/webhook_endpoints", &["200", "401", "422"][..]),
        ("get", "/v1/webhook_endpoints/{id}", &["200", "404"][..]),
        (
            "delete",
            "/v1/webhook_endpoints/{id}",
            &["200", "403", "404"][..],
        ),
        (
            "post",
            "/v1/webhook_endpoints/{id}/rotate_secret",
            &["200", "403", "404", "409", "422"][..],
        ),
    ] {
        let responses = doc["paths"][path][method]["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{method} {path} is documented"));
        for status in statuses {
            assert!(responses.contains_key(*status), "{method} {path} {status}");
        }
        for (status, response) in responses {
            if status.starts_with('4') || status.starts_with('5') {
                assert!(
                    response["content"]["application/problem+json"].is_object(),
                    "{method} {path} {status}"
                );
            }
        }
    }
    let body = &doc["components"]["schemas"]["CreateEndpointBody"];
    assert_eq!(body["required"], json!(["url", "enabled_events"]));
    assert_eq!(body["additionalProperties"], false);
    assert_eq!(body["properties"]["url"]["maxLength"], 2048);
    let types = body["properties"]["enabled_events"]["items"]["enum"]
        .as_array()
        .unwrap();
    // Every event type, and `*` for all of them.
    assert_eq!(types.len(), EventType::ALL.len() + 1, "{types:?}");
    assert!(types.contains(&json!("*")) && types.contains(&json!("order.refunded")));
    let view = &doc["components"]["schemas"]["WebhookEndpoint"]["properties"];
    for field in ["id", "url", "enabled_events", "status", "secret", "deleted"] {
        assert!(view[field].is_object(), "WebhookEndpoint.{field}");
    }
}

/// Issue #40: an answer holding a secret shown once, like every API answer, is kept by no
/// cache along the way and is never sniffed for another type; the pages' assets keep their
/// own caching.
#[tokio::test]
async fn answers_are_not_stored_by_caches_nor_sniffed() {
    let app = TestApp::spawn().await;
    let made = app
        .create_endpoint("no-store", json!({"url": URL, "enabled_events": ["*"]}))
        .await;
    assert_eq!(made.status(), 201);
    let read = app
        .get_as(
            &app.merchant_key,
            "/v1/orders/ord_00000000000000000000000000000000",
        )
        .await;
    assert_eq!(read.status(), 404);
    for response in [&made, &read] {
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        assert_eq!(header("cache-control").as_deref(), Some("no-store"));
        assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
    }
    let script = app.get("/checkout/checkout.js").await;
    assert_eq!(script.status(), 200);
    assert_eq!(script.headers()["cache-control"], "no-cache");
    assert_eq!(script.headers()["x-content-type-options"], "nosniff");
}
