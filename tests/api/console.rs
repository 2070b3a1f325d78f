//! `/console` in headless Chromium, driven over WebDriver (Debian's `chromium` and
//! `chromium-driver`; `.ci/run` installs them). Without them the test says so and passes
//! locally; under `CI=true` it fails instead, so CI always runs it. Screenshots of each state
//! are saved under `target/tmp/screenshots/`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::helpers::TestApp;
use crate::payments::Route;

const CHROMIUM: &str = "/usr/bin/chromium";
const DRIVER: &str = "/usr/bin/chromedriver";

/// A chromedriver process, stopped when dropped.
struct Driver {
    child: tokio::process::Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The browser, or `None` (and why) when this machine has none.
async fn browser() -> Option<(Driver, Client)> {
    if !Path::new(CHROMIUM).exists() || !Path::new(DRIVER).exists() {
        let why = "chromium and chromium-driver are not installed \
                   (apt-get install -y chromium chromium-driver)";
        assert!(
            std::env::var("CI").is_err(),
            "CI must run the browser tests: {why}"
        );
        eprintln!("skipped: {why}");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = tokio::process::Command::new(DRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver starts");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let profile = crate::helpers::temp_dir("chromium-profile");
    let capabilities = json!({
        "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,800",
                format!("--user-data-dir={}", profile.display()),
            ]
        }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        // Plain HTTP to a driver on loopback: no TLS stack needed.
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let connected = ClientBuilder::new(connector)
            .capabilities(capabilities.as_object().unwrap().clone())
            .connect(&driver.url)
            .await;
        match connected {
            Ok(client) => return Some((driver, client)),
            Err(err) if tokio::time::Instant::now() < deadline => {
                eprintln!("waiting for chromedriver: {err}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(err) => panic!("chromedriver did not answer: {err}"),
        }
    }
}

fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::write(screenshot_dir().join(format!("{name}.png")), png).unwrap();
}

/// Scrolls `#id` to the top of the window, for a screenshot of it.
async fn show(client: &Client, id: &str) {
    client
        .execute(
            "document.getElementById(arguments[0]).scrollIntoView()",
            vec![json!(id)],
        )
        .await
        .unwrap();
}

/// The text of `#id` once it contains `wanted`, within a deadline.
async fn text_with(client: &Client, id: &str, wanted: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut text = String::new();
    while tokio::time::Instant::now() < deadline {
        if let Ok(element) = client.find(Locator::Id(id)).await {
            text = element.text().await.unwrap_or_default();
            if text.contains(wanted) {
                return text;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("#{id} never showed {wanted:?}; it shows {text:?}");
}

#[tokio::test]
async fn a_support_person_finds_a_stuck_payment_sees_its_story_and_reconciles_it() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_secs(3600);
        config.settings.reconciler.alert_after = Duration::ZERO;
    })
    .await;
    app.sandbox.set_webhook_url(None);
    let (_, pending) = app
        .pay(Route::Checkout, "browser-lost", "pm_sandbox_lost_response")
        .await;
    assert_eq!(pending["status"], "pending");
    let id = pending["id"].as_str().unwrap();

    client.goto(&app.url("/console")).await.unwrap();
    let key = client.find(Locator::Id("key")).await.unwrap();
    key.send_keys(&app.support_key).await.unwrap();
    screenshot(&client, "console-1-key").await;
    key.send_keys("\u{E007}").await.unwrap(); // Enter submits the form.
    let attention = text_with(&client, "attention-lists", id).await;
    assert!(
        attention.contains("Open past the alert age (1)"),
        "{attention}"
    );
    screenshot(&client, "console-2-needs-a-human").await;

    let query = client.find(Locator::Id("query")).await.unwrap();
    query.send_keys("browser-lost").await.unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    let timeline = text_with(&client, "timeline", "provider call").await;
    assert!(
        timeline.contains("pending by provider_response"),
        "{timeline}"
    );
    assert!(timeline.contains("create by api: unknown"), "{timeline}");
    let summary = text_with(&client, "summary", id).await;
    assert!(summary.contains("browser-lost"), "{summary}");
    show(&client, "story").await;
    screenshot(&client, "console-3-story-pending").await;

    client
        .find(Locator::Id("reconcile"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let result = text_with(&client, "reconcile-result", "succeeded").await;
    assert!(result.contains("the payment succeeded"), "{result}");
    let timeline = text_with(&client, "timeline", "succeeded by support").await;
    assert!(timeline.contains("asked by support key"), "{timeline}");
    let results = text_with(&client, "result-list", "succeeded").await;
    assert!(
        !results.contains("pending"),
        "the list is refreshed: {results}"
    );
    show(&client, "story").await;
    screenshot(&client, "console-4-reconciled").await;
    assert_eq!(app.charges_for(id), 1);

    // The key never reaches a URL.
    let url = client.current_url().await.unwrap();
    assert!(!url.as_str().contains("sk_sup"), "{url}");

    client.set_window_size(390, 844).await.unwrap();
    screenshot(&client, "console-5-phone").await;
    client.close().await.unwrap();
}
