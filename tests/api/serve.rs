//! `payorch serve` as a user runs it: the real binary, its own private cluster, real signals.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use payorch::credentials::{self, Credentials};

use crate::helpers::{payorch_bin, sandbox_process, temp_dir, TestDatabase, TEST_MASTER_KEY};

fn serve(data_dir: &Path) -> tokio::process::Child {
    tokio::process::Command::new(payorch_bin())
        .args(["serve", "--bind", "127.0.0.1:0", "--workers", "1"])
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start payorch serve")
}

/// Waits until the credentials file names a server that answers ready.
pub async fn wait_ready(data_dir: &Path, not_before: &str) -> Credentials {
    let path = credentials::path_in(data_dir);
    let client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if let Some(creds) = credentials::read(&path).filter(|c| c.base_url != not_before) {
            let ready = client
                .get(format!("{}/health/ready", creds.base_url))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            if ready {
                return creds;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("serve did not answer ready within 60 s");
}

/// The status of a GET of `path` on the server `creds` names, with `secret`.
async fn status_as(creds: &Credentials, secret: &str, path: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{}{path}", creds.base_url))
        .bearer_auth(secret)
        .send()
        .await
        .expect("the server answers")
        .status()
        .as_u16()
}

pub async fn terminate(mut child: tokio::process::Child) {
    let pid = child.id().expect("a running child") as i32;
    // SAFETY: sends SIGTERM to our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("serve exits within 30 s of SIGTERM")
        .unwrap();
    assert!(status.success(), "clean exit: {status}");
}

#[tokio::test]
async fn serve_starts_its_cluster_writes_credentials_and_reuses_both_on_restart() {
    let data_dir = temp_dir("serve");
    let first = serve(&data_dir);
    let creds = wait_ready(&data_dir, "").await;

    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(credentials::path_in(&data_dir))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let merchant = format!("/v1/merchants/{}", creds.merchant_id);
    assert_eq!(status_as(&creds, &creds.api_key, &merchant).await, 200);
    assert_eq!(status_as(&creds, "sk_mer_wrong", &merchant).await, 401);
    let client = reqwest::Client::new();

    // The in-process sandbox provider is up, and webhooks have a secret.
    let sandbox_url = creds.sandbox_url.clone().expect("an in-process sandbox");
    let ledger = client
        .get(format!("{sandbox_url}/__sandbox/ledger"))
        .send()
        .await
        .unwrap();
    assert_eq!(ledger.status(), 200);
    assert!(creds
        .webhook_secret
        .as_deref()
        .unwrap()
        .starts_with("whsec_"));

    terminate(first).await;
    let pid_files: Vec<_> = walk(&data_dir, "postmaster.pid");
    assert!(
        pid_files.is_empty(),
        "the cluster stopped with serve: {pid_files:?}"
    );

    // Second start: same cluster, same secrets, the newly bound address.
    let second = serve(&data_dir);
    let again = wait_ready(&data_dir, &creds.base_url).await;
    assert_eq!(again.api_key, creds.api_key);
    assert_eq!(again.support_key, creds.support_key);
    assert_eq!(again.merchant_id, creds.merchant_id);
    assert_eq!(again.webhook_secret, creds.webhook_secret);
    let merchants: serde_json::Value = client
        .get(format!("{}/v1/support/merchants", again.base_url))
        .bearer_auth(&again.support_key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        merchants["data"].as_array().unwrap().len(),
        1,
        "no second demo merchant"
    );
    terminate(second).await;
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[tokio::test]
async fn missing_postgres_binaries_is_one_clear_error_line() {
    let data_dir = temp_dir("nobin");
    let empty = temp_dir("nobin-bin");
    let output = tokio::process::Command::new(payorch_bin())
        .arg("migrate")
        .arg("--data-dir")
        .arg(&data_dir)
        .env_remove("DATABASE_URL")
        .env(payorch::db::cluster::BIN_DIR_ENV, &empty)
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("initdb"), "{stderr}");
    assert!(lines[0].contains("DATABASE_URL"), "{stderr}");
    let _ = std::fs::remove_dir_all(&data_dir);
    let _ = std::fs::remove_dir_all(&empty);
}

fn walk(dir: &Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path, name));
        } else if entry.file_name() == name {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn sandbox_runs_alone_and_charges_as_the_table_says() {
    let (child, url) = sandbox_process(&["--secret", "sk_test_alone"]).await;
    let client = reqwest::Client::new();
    let charge = |pm: &'static str, key: &'static str| {
        client
            .post(format!("{url}/v1/payment_intents"))
            .bearer_auth("sk_test_alone")
            .header("Idempotency-Key", key)
            .form(&[
                ("amount", "1000"),
                ("currency", "eur"),
                ("payment_method", pm),
                ("confirm", "true"),
                ("payment_method_types[0]", "card"),
                ("metadata[attempt_id]", key),
            ])
            .send()
    };
    let ok = charge("pm_card_visa", "a1").await.unwrap();
    assert_eq!(ok.status(), 200);
    let ok: serde_json::Value = ok.json().await.unwrap();
    assert_eq!(ok["status"], "succeeded");
    let declined = charge("pm_card_chargeDeclined", "a2").await.unwrap();
    assert_eq!(declined.status(), 402);
    let ledger: serde_json::Value = client
        .get(format!("{url}/__sandbox/ledger"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let charged: Vec<_> = ledger["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["status"] == "succeeded")
        .collect();
    assert_eq!(charged.len(), 1);
    assert_eq!(charged[0]["idempotency_key"], "a1");
    terminate(child).await;
}

fn serve_on_url(data_dir: &Path, database_url: &str, extra: &[&str]) -> tokio::process::Child {
    serve_with_workers(data_dir, database_url, 1, extra)
}

fn serve_with_workers(
    data_dir: &Path,
    database_url: &str,
    workers: usize,
    extra: &[&str],
) -> tokio::process::Child {
    tokio::process::Command::new(payorch_bin())
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--workers",
            &workers.to_string(),
        ])
        .args(extra)
        .arg("--data-dir")
        .arg(data_dir)
        .env("DATABASE_URL", database_url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start payorch serve")
}

async fn merchant_count(db: &TestDatabase) -> i64 {
    db.count("merchants").await
}

#[tokio::test]
async fn serve_on_a_database_url_from_an_empty_folder_keeps_its_demo_keys() {
    let db = TestDatabase::empty().await;
    // The data folder does not exist yet: serve makes it.
    let data_dir = temp_dir("serve-url").join("not-yet");
    let first = serve_on_url(&data_dir, &db.url, &[]);
    let creds = wait_ready(&data_dir, "").await;
    let merchant = format!("/v1/merchants/{}", creds.merchant_id);
    assert_eq!(status_as(&creds, &creds.api_key, &merchant).await, 200);
    // With its demo merchant, `serve` runs the checkout demo as that merchant.
    let demo_order: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/checkout/demo/orders", creds.base_url))
        .header("Idempotency-Key", "serve-demo")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(demo_order["merchant_id"], creds.merchant_id.to_string());
    terminate(first).await;

    let second = serve_on_url(&data_dir, &db.url, &[]);
    let again = wait_ready(&data_dir, &creds.base_url).await;
    assert_eq!(again.api_key, creds.api_key);
    assert_eq!(again.merchant_id, creds.merchant_id);
    assert_eq!(merchant_count(&db).await, 1);
    terminate(second).await;
    let _ = std::fs::remove_dir_all(data_dir.parent().unwrap());
}

#[tokio::test]
async fn no_demo_merchant_is_kept_when_its_keys_cannot_be_saved() {
    let db = TestDatabase::empty().await;
    // A file where the data folder should be: the credentials cannot be written.
    let parent = temp_dir("serve-unwritable");
    let data_dir = parent.join("a-file");
    std::fs::write(&data_dir, b"not a folder").unwrap();
    let mut child = serve_on_url(&data_dir, &db.url, &[]);
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("serve gives up when it cannot save the demo keys")
        .unwrap();
    assert!(!status.success());
    assert_eq!(
        merchant_count(&db).await,
        0,
        "a merchant whose secret was never saved is not committed"
    );

    // Once the folder can be written, the next start makes the demo account as on day one.
    std::fs::remove_file(&data_dir).unwrap();
    let child = serve_on_url(&data_dir, &db.url, &[]);
    let creds = wait_ready(&data_dir, "").await;
    assert_eq!(merchant_count(&db).await, 1);
    terminate(child).await;

    // Lost credentials: `--new-demo-keys` mints fresh keys for the same demo merchant.
    std::fs::remove_file(credentials::path_in(&data_dir)).unwrap();
    let child = serve_on_url(&data_dir, &db.url, &["--new-demo-keys"]);
    let fresh = wait_ready(&data_dir, &creds.base_url).await;
    assert_eq!(fresh.merchant_id, creds.merchant_id);
    assert_ne!(fresh.api_key, creds.api_key);
    assert_ne!(fresh.support_key, creds.support_key);
    let merchant = format!("/v1/merchants/{}", fresh.merchant_id);
    assert_eq!(status_as(&fresh, &fresh.api_key, &merchant).await, 200);
    let support = "/v1/support/merchants";
    assert_eq!(status_as(&fresh, &fresh.support_key, support).await, 200);
    assert_eq!(merchant_count(&db).await, 1, "no second demo merchant");
    terminate(child).await;
    let _ = std::fs::remove_dir_all(&parent);
}

/// One client of the drain test: checkouts on one keep-alive connection until the server
/// stops answering. Every key it sent, and the status of each answer it got.
async fn checkouts_until_stopped(
    creds: Credentials,
    method: &'static str,
    prefix: String,
    stop_after: Option<usize>,
) -> Vec<(String, Option<u16>)> {
    let client = reqwest::Client::new();
    let mut sent = Vec::new();
    for n in 0.. {
        if stop_after.is_some_and(|last| n >= last) {
            break;
        }
        let key = format!("{prefix}-{n}");
        let answer = client
            .post(format!("{}/v1/checkout", creds.base_url))
            .bearer_auth(&creds.api_key)
            .header("Idempotency-Key", &key)
            .json(&serde_json::json!({"amount": 100, "currency": "eur", "payment_method": method}))
            .timeout(Duration::from_secs(30))
            .send()
            .await;
        let status = answer.ok().map(|r| r.status().as_u16());
        sent.push((key, status));
        if status.is_none() {
            break;
        }
    }
    sent
}

/// Each HTTP worker has its own runtime, and a stopping server ends an idle worker's at once:
/// the connections it opened (to the provider, to the database) must not die with it under a
/// checkout another worker is still draining (src/lasting.rs). Before, such a checkout was
/// answered `201` with its payment `pending` and its attempt left open. The server hands new
/// connections to its workers in turn, so after one quick checkout, then after two, the slow
/// one lands once on the worker that did not open the pools' connections.
#[tokio::test]
async fn a_sigterm_with_an_idle_worker_cuts_no_checkout() {
    for quick_first in 1..=2 {
        stop_with_an_idle_worker(quick_first).await;
    }
}

async fn stop_with_an_idle_worker(quick_first: usize) {
    let db = TestDatabase::empty().await;
    let round = quick_first;
    let data_dir = temp_dir(&format!("serve-idle-worker-{round}"));
    let mut child = serve_with_workers(&data_dir, &db.url, 2, &["--sandbox-slow-ms", "3000"]);
    let creds = wait_ready(&data_dir, "").await;
    // Quick checkouts, each on a connection of its own, opening provider and database
    // connections into the shared pools.
    for i in 0..quick_first {
        let sent =
            checkouts_until_stopped(creds.clone(), "pm_card_visa", format!("warm{i}"), Some(1));
        assert_eq!(sent.await[0].1, Some(201));
    }
    let slow = tokio::spawn(checkouts_until_stopped(
        creds.clone(),
        "pm_sandbox_slow",
        "slow".to_owned(),
        Some(1),
    ));
    let at_provider = "payment_attempts WHERE status IN ('created', 'pending')";
    assert!(
        crate::helpers::eventually(Duration::from_secs(20), || async {
            db.count(at_provider).await == 1
        })
        .await,
        "the slow checkout is at the provider"
    );
    let pid = child.id().expect("a running child") as i32;
    // SAFETY: sends SIGTERM to our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };

    let sent = slow.await.unwrap();
    assert_eq!(
        sent[0].1,
        Some(201),
        "round {round}: the slow checkout is answered"
    );
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("serve exits once drained")
        .unwrap();
    assert!(status.success(), "round {round}: clean exit: {status}");
    assert_eq!(
        db.count(at_provider).await,
        0,
        "round {round}: no attempt left open"
    );
    let paid = "payment_attempts WHERE status = 'succeeded' AND payment_method = 'pm_sandbox_slow'";
    assert_eq!(
        db.count(paid).await,
        1,
        "round {round}: the slow checkout was paid"
    );
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[tokio::test]
async fn a_sigterm_under_load_cuts_no_checkout() {
    let db = TestDatabase::empty().await;
    let data_dir = temp_dir("serve-drain");
    // Provider calls that take 12 s at the in-process sandbox, under a provider timeout of
    // 15 s: longer than the 10 s a stopping server used to wait. The drain's default, 20 s,
    // is longer than that timeout and the pool's 2 s.
    let mut child = serve_on_url(
        &data_dir,
        &db.url,
        &[
            "--sandbox-slow-ms",
            "12000",
            "--provider-timeout-ms",
            "15000",
            "--idempotency-lease-secs",
            "40",
        ],
    );
    let creds = wait_ready(&data_dir, "").await;
    // Checkouts of that slow kind, and a steady stream of quick ones on keep-alive
    // connections.
    let slow: Vec<_> = (0..4)
        .map(|i| {
            tokio::spawn(checkouts_until_stopped(
                creds.clone(),
                "pm_sandbox_slow",
                format!("slow{i}"),
                Some(1),
            ))
        })
        .collect();
    let quick: Vec<_> = (0..4)
        .map(|i| {
            tokio::spawn(checkouts_until_stopped(
                creds.clone(),
                "pm_card_visa",
                format!("quick{i}"),
                None,
            ))
        })
        .collect();
    let at_provider = "payment_attempts WHERE status IN ('created', 'pending') \
                       AND payment_method = 'pm_sandbox_slow'";
    assert!(
        crate::helpers::eventually(Duration::from_secs(20), || async {
            db.count(at_provider).await == 4
        })
        .await,
        "the slow checkouts are at the provider"
    );
    let pid = child.id().expect("a running child") as i32;
    // SAFETY: sends SIGTERM to our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };

    // Every checkout in flight at the signal is answered, the slow ones included: the
    // in-process sandbox is kept up until they are done.
    for client in slow {
        let sent = client.await.unwrap();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].1, Some(201), "a slow checkout in flight: {sent:?}");
    }
    let mut answered = std::collections::BTreeSet::new();
    for client in quick {
        for (key, status) in client.await.unwrap() {
            match status {
                Some(201) => {
                    answered.insert(key);
                }
                Some(other) => panic!("{key} answered {other} while stopping"),
                // Sent after the server stopped reading: refused or never read.
                None => {}
            }
        }
    }
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("serve exits once drained")
        .unwrap();
    assert!(status.success(), "clean exit: {status}");

    // Nothing cut: every key the database knows was answered, and every attempt is final.
    let open = "payment_attempts WHERE status IN ('created', 'pending')";
    assert_eq!(db.count(open).await, 0, "no attempt left open");
    let in_flight = "idempotency_keys WHERE state = 'in_flight'";
    assert_eq!(db.count(in_flight).await, 0, "no key left in flight");
    let quick_keys = "idempotency_keys WHERE key LIKE 'quick%'";
    assert_eq!(
        db.count(quick_keys).await,
        answered.len() as i64,
        "every quick checkout the server took was answered"
    );
    assert!(!answered.is_empty());
    let _ = std::fs::remove_dir_all(&data_dir);
}

/// `serve` with a real provider (here a sandbox in its own process, spoken to as Stripe, its
/// secret in a file as an operator gives it) and no `--demo`, its first line on stdout: the
/// address it listens on.
async fn serve_without_demo(
    data_dir: &Path,
    database_url: &str,
    provider_url: &str,
    more: &[&str],
) -> (tokio::process::Child, Option<String>) {
    let mut child = tokio::process::Command::new(payorch_bin())
        .args(["serve", "--bind", "127.0.0.1:0", "--workers", "1"])
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--provider-url", provider_url])
        .args(more)
        .env("PAYORCH_PROVIDER_SECRET_FILE", secret_file(data_dir))
        .env("PAYORCH_MASTER_KEY", TEST_MASTER_KEY)
        .env("DATABASE_URL", database_url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start payorch serve");
    let base_url = listening_on(&mut child).await;
    (child, base_url)
}

/// The address `serve` (spawned with its stdout piped) says it listens on in its first line;
/// `None` when it exits before saying it.
pub async fn listening_on(child: &mut tokio::process::Child) -> Option<String> {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("serve says where it listens, or exits")
        .unwrap();
    first.and_then(|line| {
        line.strip_prefix("payorch listening on ")
            .map(str::to_owned)
    })
}

/// A file holding the provider's secret, beside (not in) `data_dir`, with a trailing newline
/// as `echo` writes it.
fn secret_file(data_dir: &Path) -> std::path::PathBuf {
    let file = data_dir.with_extension("provider-secret");
    std::fs::write(&file, "sk_test_no_demo\n").unwrap();
    file
}

/// With a real provider an empty database gets no demo: no merchant, no support key, no
/// credentials file, and the anonymous checkout demo off. Only `--demo` turns it on.
#[tokio::test]
async fn with_a_real_provider_there_is_no_demo_unless_asked() {
    let (_sandbox, sandbox_url) = sandbox_process(&["--secret", "sk_test_no_demo"]).await;
    let db = TestDatabase::empty().await;
    let data_dir = temp_dir("serve-no-demo");
    let (child, base_url) = serve_without_demo(&data_dir, &db.url, &sandbox_url, &[]).await;
    let base_url = base_url.expect("serve listens");
    let client = reqwest::Client::new();
    for (method, path) in [
        ("POST", "/checkout/demo/orders".to_string()),
        (
            "GET",
            format!(
                "/checkout/demo/orders/ord_{}",
                uuid::Uuid::now_v7().simple()
            ),
        ),
    ] {
        let off = client
            .request(method.parse().unwrap(), format!("{base_url}{path}"))
            .header("Idempotency-Key", "no-demo")
            .send()
            .await
            .unwrap();
        assert_eq!(off.status(), 404, "{method} {path}");
        let problem: serde_json::Value = off.json().await.unwrap();
        assert_eq!(problem["code"], "demo_checkout_off", "{problem}");
    }
    assert_eq!(db.count("merchants").await, 0);
    assert_eq!(db.count("api_keys").await, 0, "no key but an operator's");
    assert!(!credentials::path_in(&data_dir).exists());
    terminate(child).await;

    // Demo keys are the demo's: asked for without it, serve refuses to start.
    let (mut refused, listening) =
        serve_without_demo(&data_dir, &db.url, &sandbox_url, &["--new-demo-keys"]).await;
    assert_eq!(listening, None);
    let status = tokio::time::timeout(Duration::from_secs(30), refused.wait())
        .await
        .expect("serve exits")
        .unwrap();
    assert!(!status.success());
    assert_eq!(db.count("api_keys").await, 0);

    // `--demo`: the operator asked for it.
    let (child, base_url) = serve_without_demo(&data_dir, &db.url, &sandbox_url, &["--demo"]).await;
    let creds = wait_ready(&data_dir, "").await;
    assert_eq!(Some(creds.base_url.clone()), base_url);
    let demo_order = client
        .post(format!("{}/checkout/demo/orders", creds.base_url))
        .header("Idempotency-Key", "asked-for-demo")
        .send()
        .await
        .unwrap();
    assert_eq!(demo_order.status(), 201);
    // The provider took the secret from its file: the charge went through.
    let demo_order: serde_json::Value = demo_order.json().await.unwrap();
    let paid: serde_json::Value = client
        .post(format!(
            "{}/checkout/demo/orders/{}/payments",
            creds.base_url,
            demo_order["id"].as_str().unwrap()
        ))
        .header("Idempotency-Key", "asked-for-demo-pay")
        .json(&serde_json::json!({"payment_method": "pm_card_visa"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(paid["status"], "succeeded", "{paid}");
    terminate(child).await;
    let _ = std::fs::remove_dir_all(&data_dir);
}
