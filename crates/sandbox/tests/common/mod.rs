//! What the sandbox's own tests share: a sandbox with short delays, raw requests to either
//! face, and a receiver that keeps every webhook or notification it is sent.

#![allow(dead_code)] // each test file uses its own part

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpResponse, HttpServer};
pub use payorch_sandbox::SandboxConfig;
use payorch_sandbox::{self as sandbox, SandboxHandle};
use serde_json::Value;

pub const SECRET: &str = "sk_test_sandbox";

/// Short delays, webhooks at once, search without its lag (tests/stripe_lists.rs has its
/// own), so each test runs in moments.
pub fn fast() -> SandboxConfig {
    SandboxConfig {
        slow_ms: 300,
        processing_ms: 200,
        webhook_retry_ms: 50,
        webhook_delay_ms: 0,
        search_lag_secs: 0,
        ..SandboxConfig::default()
    }
}

pub async fn start(config: SandboxConfig) -> SandboxHandle {
    sandbox::start(config).await.expect("sandbox starts")
}

/// A client that does not follow redirects (the challenge answers `303`) and gives up on a
/// request that is never answered after `timeout`.
pub fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()
        .expect("client")
}

/// An answer: its status, its body as JSON (`Null` when it is not), and whether it says it
/// is a replay.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub bytes: Vec<u8>,
    pub replayed: bool,
}

async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status().as_u16();
    let replayed = response.headers().contains_key("Idempotent-Replayed");
    let bytes = response.bytes().await.expect("body").to_vec();
    Answer {
        status,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        bytes,
        replayed,
    }
}

/// A form POST to the Stripe face, under `key` if any; `None` when no answer came in time.
pub async fn stripe_post(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    path: &str,
    key: Option<&str>,
    form: &[(&str, &str)],
) -> Option<Answer> {
    stripe_post_at(client, &sandbox.base_url(), path, key, form).await
}

/// [`stripe_post`] to the sandbox at `base`.
pub async fn stripe_post_at(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    key: Option<&str>,
    form: &[(&str, &str)],
) -> Option<Answer> {
    let mut request = client
        .post(format!("{base}{path}"))
        .bearer_auth(SECRET)
        .form(form);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    Some(answer(request.send().await.ok()?).await)
}

/// A JSON POST to the Adyen face, under `key` if any; `None` when no answer came in time.
pub async fn adyen_post(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    path: &str,
    key: Option<&str>,
    body: &Value,
) -> Option<Answer> {
    let mut request = client
        .post(format!("{}{path}", sandbox.base_url()))
        .header("X-API-Key", SECRET)
        .json(body);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    Some(answer(request.send().await.ok()?).await)
}

/// A GET of `path` on either face (`api_key` for the Adyen face, else the Stripe secret).
pub async fn get(client: &reqwest::Client, sandbox: &SandboxHandle, path: &str) -> Answer {
    let response = client
        .get(format!("{}{path}", sandbox.base_url()))
        .bearer_auth(SECRET)
        .header("X-API-Key", SECRET)
        .send()
        .await
        .expect("sandbox answers");
    answer(response).await
}

/// A POST with no body, as a browser's form sends one (the challenge page's buttons).
pub async fn press(client: &reqwest::Client, url: &str) -> reqwest::Response {
    client.post(url).send().await.expect("the page answers")
}

/// Where a `303` sends the browser.
pub fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .expect("a Location")
        .to_owned()
}

/// The ledger as `GET /__sandbox/ledger` shows it.
pub async fn ledger(client: &reqwest::Client, sandbox: &SandboxHandle) -> Value {
    get(client, sandbox, "/__sandbox/ledger").await.body
}

/// A server that answers every POST `200` and keeps its JSON body.
pub struct Receiver {
    pub url: String,
    received: Arc<Mutex<Vec<Value>>>,
    server: actix_web::dev::ServerHandle,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let received: Arc<Mutex<Vec<Value>>> = Arc::default();
        let kept = received.clone();
        let server = HttpServer::new(move || {
            let kept = kept.clone();
            App::new().default_service(web::to(move |body: web::Bytes| {
                let kept = kept.clone();
                async move {
                    if let Ok(value) = serde_json::from_slice(&body) {
                        kept.lock().expect("not poisoned").push(value);
                    }
                    HttpResponse::Ok().body("[accepted]")
                }
            }))
        })
        .workers(1)
        .disable_signals()
        .bind("127.0.0.1:0")
        .expect("binds");
        let addr = server.addrs()[0];
        let server = server.run();
        let handle = server.handle();
        tokio::spawn(server);
        Receiver {
            url: format!("http://{addr}/"),
            received,
            server: handle,
        }
    }

    /// Every body received so far.
    pub fn received(&self) -> Vec<Value> {
        self.received.lock().expect("not poisoned").clone()
    }

    /// The `type`s of the Stripe events received about intent `id`, sorted: deliveries run
    /// side by side, so they arrive in any order, as Stripe's do.
    pub fn stripe_events(&self, id: &str) -> Vec<String> {
        let mut events: Vec<String> = self
            .received()
            .iter()
            .filter(|event| event["data"]["object"]["id"] == id)
            .map(|event| event["type"].as_str().unwrap_or_default().to_owned())
            .collect();
        events.sort();
        events
    }

    /// The Adyen notification items received about payment `psp` (as the payment or as the
    /// original of a modification), in order.
    pub fn adyen_items(&self, psp: &str) -> Vec<Value> {
        self.received()
            .iter()
            .flat_map(|delivery| {
                delivery["notificationItems"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|item| item["NotificationRequestItem"].clone())
            .filter(|item| item["pspReference"] == psp || item["originalReference"] == psp)
            .collect()
    }

    pub async fn stop(&self) {
        self.server.stop(false).await;
    }
}

/// Polls `probe` until it gives a value, for up to 5 s.
pub async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
