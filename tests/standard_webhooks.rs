//! payorch's signature checked by code that is not payorch's: tests/standard_webhooks/verify.py,
//! which uses the reference library `standardwebhooks` from PyPI when it is importable (.ci/run
//! puts it on `cargo test`'s PATH and sets `PAYORCH_REQUIRE_STANDARDWEBHOOKS`, which makes
//! these tests insist on it) and a stdlib-only reading of the specification otherwise
//! (docs/guides/events.md, "Events and webhook endpoints").

use std::io::Write;
use std::process::{Command, Stdio};

use payorch::events::signing::{Secret, SigningSecrets};
use serde_json::{json, Value};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/standard_webhooks/verify.py"
);
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER_SECRET: &str = "whsec_dGhpcyBpcyBub3QgdGhlIHNlY3JldCBhdCBhbGw=";

/// The `webhook-signature` payorch sends for this delivery under `secret`: its own signer.
fn payorch_signs(secret: &str, id: &str, timestamp: i64, body: &str) -> String {
    Secret::parse(secret)
        .expect("a test secret")
        .sign(id, timestamp, body.as_bytes())
}

/// Whether the script verifies this delivery; it must say which verifier it used, and that
/// verifier must be the reference library when `PAYORCH_REQUIRE_STANDARDWEBHOOKS` is set.
fn script_verifies(secret: &str, id: &str, timestamp: i64, signature: &str, body: &str) -> bool {
    let input = json!({
        "secret": secret,
        "headers": {
            "webhook-id": id,
            "webhook-timestamp": timestamp.to_string(),
            "webhook-signature": signature,
        },
        "body": body,
    });
    let mut child = Command::new("python3")
        .arg(SCRIPT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs tests/standard_webhooks/verify.py");
    child
        .stdin
        .take()
        .expect("its stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write the delivery");
    let out = child.wait_with_output().expect("the script ends");
    let verdict: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "the script answers one JSON line ({err}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let verifier = verdict["verifier"].as_str().unwrap_or_default();
    println!("{verifier}: {verdict}");
    if std::env::var_os("PAYORCH_REQUIRE_STANDARDWEBHOOKS").is_some() {
        assert_eq!(
            verifier, "standardwebhooks",
            "PAYORCH_REQUIRE_STANDARDWEBHOOKS is set, yet the reference library was not imported"
        );
    } else {
        assert!(
            matches!(verifier, "standardwebhooks" | "stdlib"),
            "{verdict}"
        );
    }
    let verified = verdict["verified"] == true;
    assert_eq!(
        out.status.code(),
        Some(if verified { 0 } else { 1 }),
        "{verdict}"
    );
    verified
}

/// A body like payorch's, with text that is not ASCII: the signature is over its UTF-8 bytes.
fn body(id: &str) -> String {
    json!({
        "id": id,
        "object": "event",
        "type": "order.paid",
        "created": 1_790_000_000,
        "data": { "object": { "id": "ord_1", "object": "order", "status": "paid",
                              "description": "Crème brûlée × 2 — «merci»" } },
        "request": null,
    })
    .to_string()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[test]
fn a_delivery_signed_by_payorch_verifies() {
    let (id, timestamp) = ("evt_0192f3a4b5c6d7e8f9a0b1c2d3e4f5a6", now());
    let body = body(id);
    let signature = payorch_signs(SECRET, id, timestamp, &body);
    assert!(script_verifies(SECRET, id, timestamp, &signature, &body));
}

#[test]
fn a_changed_body_id_or_timestamp_is_refused() {
    let (id, timestamp) = ("evt_0192f3a4b5c6d7e8f9a0b1c2d3e4f5a6", now());
    let body = body(id);
    let signature = payorch_signs(SECRET, id, timestamp, &body);
    let tampered = body.replace("\"paid\"", "\"canceled\"");
    assert_ne!(tampered, body);
    assert!(!script_verifies(
        SECRET, id, timestamp, &signature, &tampered
    ));
    assert!(!script_verifies(
        SECRET,
        "evt_other",
        timestamp,
        &signature,
        &body
    ));
    assert!(!script_verifies(
        SECRET,
        id,
        timestamp - 1,
        &signature,
        &body
    ));
}

#[test]
fn a_signature_under_another_secret_is_refused() {
    let (id, timestamp) = ("evt_0192f3a4b5c6d7e8f9a0b1c2d3e4f5a6", now());
    let body = body(id);
    let signature = payorch_signs(OTHER_SECRET, id, timestamp, &body);
    assert!(!script_verifies(SECRET, id, timestamp, &signature, &body));
}

/// payorch's header while a rotated secret still signs: each of the two secrets verifies it;
/// once the old one has stopped signing, only the new one does.
#[test]
fn during_a_rotation_both_secrets_verify_the_header() {
    let (id, timestamp) = ("evt_0192f3a4b5c6d7e8f9a0b1c2d3e4f5a6", now());
    let body = body(id);
    let signed_now = chrono::Utc::now();
    let secrets = SigningSecrets {
        current: Secret::parse(OTHER_SECRET).expect("the new secret"),
        previous: Some((
            Secret::parse(SECRET).expect("the old secret"),
            signed_now + chrono::Duration::hours(24),
        )),
    };
    let both = secrets.header(id, timestamp, body.as_bytes(), signed_now);
    assert!(script_verifies(SECRET, id, timestamp, &both, &body));
    assert!(script_verifies(OTHER_SECRET, id, timestamp, &both, &body));
    let after = signed_now + chrono::Duration::hours(25);
    let new_only = secrets.header(id, timestamp, body.as_bytes(), after);
    assert!(script_verifies(
        OTHER_SECRET,
        id,
        timestamp,
        &new_only,
        &body
    ));
    assert!(!script_verifies(SECRET, id, timestamp, &new_only, &body));
}

#[test]
fn a_delivery_signed_an_hour_ago_is_refused() {
    let (id, timestamp) = ("evt_0192f3a4b5c6d7e8f9a0b1c2d3e4f5a6", now() - 3600);
    let body = body(id);
    let signature = payorch_signs(SECRET, id, timestamp, &body);
    assert!(!script_verifies(SECRET, id, timestamp, &signature, &body));
}
