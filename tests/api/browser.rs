//! Headless Chromium, driven over WebDriver (Debian's `chromium` and `chromium-driver`;
//! `.ci/run` installs them), for the tests of the pages payorch serves. Without them a browser
//! test says so and passes locally; under `CI=true` it fails instead, so CI always runs it.
//! Screenshots are saved under `target/tmp/screenshots/`.

pub mod cdp;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

const CHROMIUM: &str = "/usr/bin/chromium";
const DRIVER: &str = "/usr/bin/chromedriver";

/// A chromedriver process, stopped when dropped.
pub struct Driver {
    child: tokio::process::Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The browser, or `None` (and why) when this machine has none.
pub async fn browser() -> Option<(Driver, Client)> {
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

pub async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::write(screenshot_dir().join(format!("{name}.png")), png).unwrap();
}

/// Scrolls `#id` to the top of the window, for a screenshot of it.
pub async fn show(client: &Client, id: &str) {
    client
        .execute(
            "document.getElementById(arguments[0]).scrollIntoView()",
            vec![json!(id)],
        )
        .await
        .unwrap();
}

/// The text of `#id` once it contains `wanted`, within a deadline.
pub async fn text_with(client: &Client, id: &str, wanted: &str) -> String {
    text_within(client, id, wanted, Duration::from_secs(10)).await
}

/// [`text_with`] for what comes only after one of the page's own deadlines.
pub async fn text_within(client: &Client, id: &str, wanted: &str, limit: Duration) -> String {
    let deadline = tokio::time::Instant::now() + limit;
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

/// Sends a Chrome DevTools command to the page of `client`'s session (chromedriver's
/// `goog/cdp/execute`), e.g. to make the network fail for some URLs.
pub async fn devtools(driver: &Driver, client: &Client, command: &str, params: Value) -> Value {
    let session = client.session_id().await.unwrap().expect("a session");
    let response = reqwest::Client::new()
        .post(format!("{}/session/{session}/goog/cdp/execute", driver.url))
        .json(&json!({"cmd": command, "params": params}))
        .send()
        .await
        .expect("chromedriver answers");
    assert!(
        response.status().is_success(),
        "{command}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

/// Runs `script` in the page and returns what it returns.
pub async fn run(client: &Client, script: &str) -> Value {
    client
        .execute(script, vec![])
        .await
        .expect("the script runs")
}
