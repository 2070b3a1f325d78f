//! The sandbox driven by the providers' own SDKs, as an outside integrator would test it:
//! tests/provider_libraries/stripe_flows.py runs Stripe's PaymentIntents flows through the
//! official `stripe` library and verifies each webhook with `stripe.Webhook.construct_event`;
//! tests/provider_libraries/adyen_flows.py runs Adyen's Checkout v71 flows through the
//! official `Adyen` library and verifies each notification's HMAC with `Adyen.util`. Neither
//! library is patched: each is pointed at the sandbox by its own documented setting (docs/operations/commands.md,
//! "Commands": the sandbox speaks the protocols "closely enough for Stripe's own SDKs").
//!
//! Each test starts a sandbox in-process, runs its script with `python3` from `PATH`, points
//! the sandbox's webhooks or notifications at the receiver the script opened (the script
//! prints its address, then waits for a line on stdin), and fails with the script's output
//! when any flow failed. Without the libraries importable the tests are skipped, saying so,
//! unless `PAYORCH_REQUIRE_PROVIDER_LIBRARIES` is set: .ci/run installs the pinned versions
//! into the venv whose `python3` comes first on `cargo test`'s PATH, and sets it.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use payorch_sandbox::{self as sandbox, SandboxConfig, SandboxHandle};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

const REQUIRE: &str = "PAYORCH_REQUIRE_PROVIDER_LIBRARIES";
const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/provider_libraries");
const API_KEY: &str = "sk_test_provider_libraries";
const WEBHOOK_SECRET: &str = "whsec_provider_libraries";
const ADYEN_HMAC_KEY: &str = "6b1f0c7e9d2a4b3c8e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5061728394a5b";
/// Far more than a run takes (seconds): a hung script fails the test rather than CI.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// Which face a script drives, and so which of the sandbox's deliveries its receiver takes.
#[derive(Clone, Copy)]
enum Face {
    Stripe,
    Adyen,
}

impl Face {
    fn script(self) -> String {
        match self {
            Self::Stripe => format!("{SCRIPTS}/stripe_flows.py"),
            Self::Adyen => format!("{SCRIPTS}/adyen_flows.py"),
        }
    }

    /// The PyPI package the script uses, as Python imports it.
    fn module(self) -> &'static str {
        match self {
            Self::Stripe => "stripe",
            Self::Adyen => "Adyen",
        }
    }

    /// Sends this face's deliveries to the receiver at `url`.
    fn point(self, sandbox: &SandboxHandle, url: &str) {
        match self {
            Self::Stripe => sandbox.set_webhook_url(Some(format!("{url}/stripe/webhooks"))),
            Self::Adyen => sandbox.set_notification_url(Some(format!("{url}/adyen/notifications"))),
        }
    }
}

/// Whether the library can be used: `Err` says why not.
fn importable(module: &str) -> Result<(), String> {
    let out = std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .map_err(|err| format!("python3 does not run ({err})"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "python3 cannot import {module}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Short delays and webhooks at once, so the scripts wait on nothing but the sandbox.
fn config() -> SandboxConfig {
    SandboxConfig {
        secret: API_KEY.into(),
        webhook_secret: WEBHOOK_SECRET.into(),
        adyen_hmac_key: ADYEN_HMAC_KEY.into(),
        slow_ms: 300,
        processing_ms: 200,
        webhook_retry_ms: 50,
        webhook_delay_ms: 0,
        ..SandboxConfig::default()
    }
}

/// Runs `face`'s script against a sandbox of its own; its whole output, or why it failed.
async fn run_script(face: Face) -> Result<String, String> {
    let sandbox = sandbox::start(config()).await.expect("sandbox starts");
    let mut child = Command::new("python3")
        .arg(face.script())
        .env("SANDBOX_URL", sandbox.base_url())
        .env("SANDBOX_API_KEY", API_KEY)
        .env("STRIPE_WEBHOOK_SECRET", WEBHOOK_SECRET)
        .env("ADYEN_HMAC_KEY", ADYEN_HMAC_KEY)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs the script");
    let mut stderr = child.stderr.take().expect("its stderr");
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let mut stdin = child.stdin.take().expect("its stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("its stdout")).lines();
    let mut transcript = String::new();
    let talk = async {
        // The receiver's address comes first; the flows wait until it is the sandbox's
        // destination, so no delivery is sent before anyone listens.
        while let Some(line) = lines.next_line().await? {
            transcript.push_str(&line);
            transcript.push('\n');
            if let Some(url) = line.strip_prefix("receiver ") {
                face.point(&sandbox, url.trim());
                stdin.write_all(b"go\n").await?;
                stdin.flush().await?;
                break;
            }
        }
        while let Some(line) = lines.next_line().await? {
            transcript.push_str(&line);
            transcript.push('\n');
        }
        child.wait().await
    };
    let outcome = tokio::time::timeout(SCRIPT_TIMEOUT, talk).await;
    if outcome.is_err() {
        let _ = child.kill().await;
    }
    let errors = errors.await.unwrap_or_default();
    let ledger = sandbox.ledger();
    sandbox.stop().await;
    let output = format!("{transcript}{errors}");
    match outcome {
        Err(_) => Err(format!("no end within {SCRIPT_TIMEOUT:?}:\n{output}")),
        Ok(Err(err)) => Err(format!("talking to the script failed ({err}):\n{output}")),
        Ok(Ok(status)) if !status.success() => Err(format!("{status}:\n{output}")),
        Ok(Ok(_)) => {
            // What the library's resends under one key came to: one charge each at most.
            let mut charges: HashMap<&str, usize> = HashMap::new();
            for entry in ledger.iter().filter(|entry| entry.is_charged()) {
                if let Some(key) = entry.idempotency_key.as_deref() {
                    *charges.entry(key).or_default() += 1;
                }
            }
            match charges.iter().find(|(_, count)| **count > 1) {
                Some((key, count)) => Err(format!("key {key} charged {count} times:\n{output}")),
                None => Ok(output),
            }
        }
    }
}

/// Skips (or, under `PAYORCH_REQUIRE_PROVIDER_LIBRARIES`, fails) without the library, else
/// runs the script and fails with its output when it fails.
async fn library_drives_the_sandbox(face: Face) {
    if let Err(why) = importable(face.module()) {
        assert!(
            std::env::var_os(REQUIRE).is_none(),
            "{REQUIRE} is set, yet {why}"
        );
        println!(
            "skipped: {why}; `pip install` the versions .ci/run pins to run this test, and \
             set {REQUIRE}=1 to insist on them"
        );
        return;
    }
    let started = Instant::now();
    match run_script(face).await {
        Ok(output) => println!("{output}({:.1?})", started.elapsed()),
        Err(failure) => panic!("{} failed: {failure}", face.script()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stripe_library_drives_the_sandbox() {
    library_drives_the_sandbox(Face::Stripe).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adyen_library_drives_the_sandbox() {
    library_drives_the_sandbox(Face::Adyen).await;
}
