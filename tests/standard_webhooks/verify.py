#!/usr/bin/env python3
"""Verifies one webhook delivery the way a merchant's Python would, independently of payorch.

Reads one JSON object on stdin: {"secret": "whsec_…", "headers": {name: value}, "body": "…"}
(the body as the exact text that was sent). Verifies it as the Standard Webhooks
specification v1 says (docs/guides/events.md, "Events and webhook endpoints"), with the reference library
`standardwebhooks` from PyPI when it is importable — .ci/run installs it, pinned, in the venv
`cargo test` runs with — and otherwise with the few lines of the standard library below, so
that `cargo test` on a machine without the package still checks the signature against code
that is not payorch's.

Prints one JSON line, {"verifier": "standardwebhooks" | "stdlib", "verified": bool,
"error": str | null}, and exits 0 when verified, 1 when refused, 2 when the input is not
what it should be. The test that runs it is tests/standard_webhooks.rs.
"""

import base64
import hashlib
import hmac
import json
import sys
import time

# The specification's default; docs/guides/events.md promises receivers may use it.
TOLERANCE_SECONDS = 5 * 60


def verify_stdlib(secret, headers, body):
    """The specification, written out: raises ValueError when the delivery is refused."""
    headers = {name.lower(): value for name, value in headers.items()}
    msg_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not (msg_id and timestamp and signatures):
        raise ValueError("missing required headers")
    if not timestamp.isascii() or not timestamp.isdigit():
        raise ValueError("webhook-timestamp is not Unix seconds")
    if abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
        raise ValueError("webhook-timestamp outside the tolerance")
    if secret.startswith("whsec_"):
        secret = secret[len("whsec_"):]
    key = base64.b64decode(secret, validate=True)
    signed = f"{msg_id}.{timestamp}.{body}".encode()
    expected = hmac.new(key, signed, hashlib.sha256).digest()
    for entry in signatures.split(" "):
        version, _, encoded = entry.partition(",")
        if version != "v1":
            continue
        try:
            candidate = base64.b64decode(encoded, validate=True)
        except ValueError:
            continue
        if hmac.compare_digest(expected, candidate):
            return
    raise ValueError("no matching signature")


def main():
    try:
        delivery = json.load(sys.stdin)
        secret, headers, body = delivery["secret"], delivery["headers"], delivery["body"]
    except (ValueError, KeyError, TypeError) as err:
        print(json.dumps({"error": f"bad input: {err}"}))
        return 2
    try:
        from standardwebhooks.webhooks import Webhook
    except ImportError:
        verifier = "stdlib"
        verify = verify_stdlib
    else:
        verifier = "standardwebhooks"

        def verify(secret, headers, body):
            Webhook(secret).verify(body, headers, json_parse=False)

    try:
        verify(secret, headers, body)
    # The library raises its own WebhookVerificationError, and a ValueError (binascii.Error)
    # on a signature that is not base64: every one of them is a refusal.
    except Exception as err:  # noqa: BLE001
        print(json.dumps({"verifier": verifier, "verified": False, "error": str(err)}))
        return 1
    print(json.dumps({"verifier": verifier, "verified": True, "error": None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
