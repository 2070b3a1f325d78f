//! docs/PRODUCTION.md's checklist, followed as an operator follows it, with the real binary: a
//! database over `verify-full` with a runtime role that owns nothing and the owner migrating;
//! every secret from a file; keys made per person with the least role; a real provider (a
//! sandbox in a process of its own, spoken to as Stripe); metrics behind a token. Then what
//! the checklist promises is checked from outside, as an attacker and as each user would.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use payorch::db::cluster::CLUSTER_RUNTIME_USER;
use payorch::db::create_database_if_missing;

use crate::database_tls::{sessions_of, TlsCluster};
use crate::helpers::{eventually, payorch_bin, sandbox_process, temp_dir, TEST_MASTER_KEY};
use crate::serve::listening_on;

const PROVIDER_SECRET: &str = "sk_test_checklist";
const WEBHOOK_SECRET: &str = "whsec_checklist";
const METRICS_TOKEN: &str = "metrics-token-checklist";

/// A secret file as an operator writes one: `echo … > file; chmod 600 file`.
fn secret_file(dir: &Path, name: &str, secret: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("{secret}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// The environment every command of the deployment gets: secrets as files only.
fn environment(secrets: &Path) -> Vec<(&'static str, PathBuf)> {
    vec![
        ("DATABASE_URL_FILE", secrets.join("database_url")),
        (
            "PAYORCH_MIGRATION_DATABASE_URL_FILE",
            secrets.join("migration_database_url"),
        ),
        (
            "PAYORCH_PROVIDER_SECRET_FILE",
            secrets.join("provider_secret"),
        ),
        (
            "PAYORCH_WEBHOOK_SECRET_FILE",
            secrets.join("webhook_secret"),
        ),
        ("PAYORCH_MASTER_KEY_FILE", secrets.join("master_key")),
        ("PAYORCH_METRICS_TOKEN_FILE", secrets.join("metrics_token")),
    ]
}

/// `payorch <args> --json` with the deployment's environment; its JSON answer.
async fn admin(secrets: &Path, data_dir: &Path, args: &[&str]) -> Value {
    let output = tokio::process::Command::new(payorch_bin())
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--json")
        .envs(environment(secrets))
        .env_remove("DATABASE_URL")
        .output()
        .await
        .expect("run payorch");
    assert!(
        output.status.success(),
        "payorch {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("a JSON answer")
}

#[tokio::test]
async fn an_operator_following_the_checklist_gets_a_server_safe_on_the_internet() {
    // 2. The database: TLS verified against the operator's CA, a runtime login that owns
    // nothing, the owner for migrations.
    let database = TlsCluster::start("checklist-db").await;
    create_database_if_missing(&database.socket_url("postgres"), "payorch")
        .await
        .expect("create the database");
    let mut superuser = payorch::db::connect(&database.socket_url("postgres"))
        .await
        .expect("the superuser");
    payorch::db::roles::create_runtime_login(&mut superuser, CLUSTER_RUNTIME_USER)
        .await
        .expect("the runtime login");
    drop(superuser);
    let tls = database.verify_full(&database.ca_file);

    // 5. Every secret in a file.
    let secrets = temp_dir("checklist-secrets");
    secret_file(
        &secrets,
        "database_url",
        &database.tcp_url(CLUSTER_RUNTIME_USER, "localhost", &tls),
    );
    secret_file(
        &secrets,
        "migration_database_url",
        &database.tcp_url("payorch", "localhost", &tls),
    );
    secret_file(&secrets, "provider_secret", PROVIDER_SECRET);
    secret_file(&secrets, "webhook_secret", WEBHOOK_SECRET);
    secret_file(&secrets, "master_key", TEST_MASTER_KEY);
    secret_file(&secrets, "metrics_token", METRICS_TOKEN);
    let data_dir = temp_dir("checklist-data");

    // 3. Keys made by the operator: the merchant's, and one per support person with the least
    // role each needs.
    let merchant = admin(
        &secrets,
        &data_dir,
        &["merchant", "create", "--name", "Shop"],
    )
    .await;
    let merchant_key = merchant["api_key"].as_str().unwrap().to_owned();
    let reader = admin(
        &secrets,
        &data_dir,
        &[
            "keys",
            "create",
            "--support",
            "--role",
            "read",
            "--name",
            "Ada",
        ],
    )
    .await;
    let reader_key = reader["secret"].as_str().unwrap().to_owned();
    let operator = admin(
        &secrets,
        &data_dir,
        &[
            "keys",
            "create",
            "--support",
            "--role",
            "operate",
            "--name",
            "Ben",
        ],
    )
    .await;
    let operator_key = operator["secret"].as_str().unwrap().to_owned();

    // 1 and 7. A real provider over a loopback URL (its secret from a file), no demo, metrics
    // behind a token.
    let (_provider, provider_url) = sandbox_process(&["--secret", PROVIDER_SECRET]).await;
    let log = data_dir.with_extension("log");
    let mut serve = tokio::process::Command::new(payorch_bin())
        .args(["serve", "--bind", "127.0.0.1:0", "--workers", "1"])
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["--provider-url", &provider_url])
        .envs(environment(&secrets))
        .env_remove("DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .expect("start payorch serve");
    let base = listening_on(&mut serve)
        .await
        .unwrap_or_else(|| panic!("serve stopped: {}", std::fs::read_to_string(&log).unwrap()));
    let http = reqwest::Client::new();
    let get = |path: &str, secret: Option<&str>| {
        let mut request = http.get(format!("{base}{path}"));
        if let Some(secret) = secret {
            request = request.bearer_auth(secret);
        }
        request.send()
    };

    // No demo: no file of keys, no anonymous route.
    assert!(!payorch::credentials::path_in(&data_dir).exists());
    let demo = http
        .post(format!("{base}/checkout/demo/orders"))
        .header("Idempotency-Key", "checklist-demo")
        .send()
        .await
        .unwrap();
    assert_eq!(demo.status(), 404);

    // The database link: every session encrypted, the role owning nothing.
    let ready: Value = get("/health/ready", None)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["database_role"], "owns_nothing", "{ready}");
    let (sessions, encrypted) = sessions_of(&database, "payorch").await;
    assert!(sessions >= 1);
    assert_eq!(encrypted, sessions, "every session of serve is encrypted");

    // Metrics for the holder of the token only.
    assert_eq!(get("/metrics", None).await.unwrap().status(), 401);
    assert_eq!(
        get("/metrics", Some(&merchant_key)).await.unwrap().status(),
        401
    );
    assert_eq!(
        get("/metrics", Some(METRICS_TOKEN)).await.unwrap().status(),
        200
    );

    // The merchant pays through the provider, with the secret from its file; reads carry the
    // limits' fields.
    let paid: Value = http
        .post(format!("{base}/v1/checkout"))
        .bearer_auth(&merchant_key)
        .header("Idempotency-Key", "checklist-pay")
        .json(&json!({"amount": 1500, "currency": "eur", "payment_method": "pm_card_visa"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(paid["payment"]["status"], "succeeded", "{paid}");
    let payment_id = paid["payment"]["id"].as_str().unwrap().to_owned();
    let read = get(&format!("/v1/payments/{payment_id}"), Some(&merchant_key))
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    assert!(read.headers().contains_key("ratelimit-policy"));

    // A webhook endpoint's secret, shown once, is kept sealed.
    let endpoint: Value = http
        .post(format!("{base}/v1/webhook_endpoints"))
        .bearer_auth(&merchant_key)
        .header("Idempotency-Key", "checklist-endpoint")
        .json(&json!({"url": "https://93.184.216.34/payorch-events", "enabled_events": ["*"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let shown = endpoint["secret"]
        .as_str()
        .unwrap_or_else(|| panic!("the secret, shown once: {endpoint}"));
    let (owner, connection) =
        tokio_postgres::connect(&database.socket_url("payorch"), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    let stored: String = owner
        .query_one("SELECT secret FROM webhook_endpoints", &[])
        .await
        .unwrap()
        .get(0);
    assert!(stored.starts_with("v1:"), "sealed: {stored}");
    let bare = shown.trim_start_matches("whsec_");
    assert!(
        !stored.contains(bare),
        "the stored secret is not the secret"
    );

    // Support: the reader reads and cannot act; the operator acts, and the story says who.
    let story = format!("/v1/support/payments/{payment_id}");
    assert_eq!(get(&story, Some(&reader_key)).await.unwrap().status(), 200);
    let reconcile = format!("{base}/v1/support/payments/{payment_id}/reconcile");
    let refused = http
        .post(&reconcile)
        .bearer_auth(&reader_key)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let done = http
        .post(&reconcile)
        .bearer_auth(&operator_key)
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), 200);
    let told: Value = get(&story, Some(&reader_key))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let actions = told["support_actions"].as_array().expect("the audit");
    assert!(
        actions.iter().any(|a| a.to_string().contains("Ben")),
        "the story names who acted: {told}"
    );

    // A key revoked by the operator stops working at once.
    let reader_id = reader["key"]["id"].as_str().unwrap().to_owned();
    admin(&secrets, &data_dir, &["keys", "revoke", &reader_id]).await;
    assert!(
        eventually(Duration::from_secs(3), || async {
            get(&story, Some(&reader_key)).await.unwrap().status() == 401
        })
        .await,
        "a revoked key is refused"
    );

    // Nothing secret was on a command line, so serve warned of none.
    serve.kill().await.unwrap();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains("on the command line"), "{logged}");
    for secret in [
        PROVIDER_SECRET,
        WEBHOOK_SECRET,
        METRICS_TOKEN,
        &merchant_key,
    ] {
        assert!(!logged.contains(secret), "the log shows a secret");
    }
    let _ = std::fs::remove_dir_all(&data_dir);
    let _ = std::fs::remove_dir_all(&secrets);
}
