#!/usr/bin/env python3
"""Follows docs/quickstart.md alone, as a newcomer would, and times it: the page's run command,
then every line of its "Trying it" block run by bash as written, so the Quickstart cannot lie.

The run command is the page's indented `cargo run` line under "Run it"; the block is the
indented code under "Trying it". Both are read from the page, not copied here. The server
runs from the repository's root, as the page says, with its data dir in a temporary folder
that stands for the repository's `.payorch/` (the block runs there, so its
`.payorch/credentials.json` is the server's own). The address is the page's
`127.0.0.1:8080`; when something else holds that port, a free one is used and the block's
`127.0.0.1:8080` read as it, which the output says.

Every `curl` of the block fails on an HTTP error (`--fail-with-body`), so a wrong path or
key fails the run. Passes when the server says it listens where the page says, the
credentials file has the fields the page names, the merchant read is the demo merchant, the
block's checkout answers a paid order with a succeeded payment, `/health/ready` says ready,
`/openapi.json` is an OpenAPI document, and Ctrl-C stops the server and its cluster; prints
how long the first checkout took from the run command (a clean checkout's first build
included, when there was one to do). The server gets the caller's environment without its
database and payorch settings, as a newcomer's shell would have none.

Usage: scripts/quickstart_run.py  (from anywhere; exits non-zero with the reason on failure)
"""

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from readme_run import cluster_pids

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "quickstart.md"
ADDRESS = "127.0.0.1:8080"
READY_WITHIN_SECS = 2400  # a clean checkout's first `cargo run --release` compiles everything
STOP_WITHIN_SECS = 60


def fail(message, log=None):
    print(f"quickstart_run: {message}", file=sys.stderr)
    if log is not None and log.exists():
        print("--- the server's output (its end) ---", file=sys.stderr)
        print(log.read_text(errors="replace")[-6000:], file=sys.stderr)
    sys.exit(1)


def section(lines, title):
    """The lines of the `## title` section, up to the next heading of its level or above."""
    try:
        start = lines.index(f"## {title}") + 1
    except ValueError:
        fail(f"{PAGE.relative_to(ROOT)} has no section \"## {title}\"")
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def indented_block(lines, title):
    """The section's indented code, first block only, with its indent taken off."""
    block = []
    for line in section(lines, title):
        if line.startswith("    "):
            block.append(line[4:])
        elif block and line.strip():
            break
    if not block:
        fail(f"\"{title}\" in {PAGE.relative_to(ROOT)} has no indented command block")
    return block


def port_is_free(address):
    host, port = address.rsplit(":", 1)
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, int(port)))
        except OSError:
            return False
    return True


def free_address():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def json_values(text):
    """Every JSON value in `text`, in order: curl adds no newline after a body, so the
    block's answers run into each other on one line."""
    decoder = json.JSONDecoder()
    values, at = [], 0
    while at < len(text):
        start = text.find("{", at)
        if start < 0:
            break
        try:
            value, at = decoder.raw_decode(text, start)
            values.append(value)
        except ValueError:
            at = start + 1
    return values


def main():
    lines = PAGE.read_text().splitlines()
    run = [line for line in indented_block(lines, "Run it") if line.startswith("cargo run ")]
    if not run:
        fail("\"Run it\" has no indented `cargo run` line")
    command = shlex.split(run[0])
    trying = "\n".join(indented_block(lines, "Trying it"))

    address = ADDRESS
    if not port_is_free(ADDRESS):
        address = free_address()
        print(f"quickstart_run: {ADDRESS} is taken here; the server and the block use {address}")
        trying = trying.replace(ADDRESS, address)

    work = Path(tempfile.mkdtemp(prefix="payorch-quickstart-"))
    # As root the cluster runs as `postgres`, which must be able to enter the data dir.
    work.chmod(0o755)
    data_dir = work / ".payorch"
    log = work / "serve.log"
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PAYORCH_") and name not in ("DATABASE_URL", "RUST_LOG")
    }
    env.update(PAYORCH_BIND=address, PAYORCH_DATA_DIR=str(data_dir))
    print(f"quickstart_run: the page's run command: {shlex.join(command)}")
    started = time.monotonic()
    with open(log, "wb") as out:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    # Ready as the page says: it prints `payorch listening on http://127.0.0.1:8080`.
    banner = f"payorch listening on http://{address}"
    deadline = started + READY_WITHIN_SECS
    while banner not in log.read_text(errors="replace"):
        if server.poll() is not None:
            fail(f"the server exited with {server.returncode} before it was ready", log)
        if time.monotonic() > deadline:
            server.kill()
            fail(f"no `{banner}` within {READY_WITHIN_SECS} s", log)
        time.sleep(0.25)
    listening = time.monotonic() - started

    def stop():
        server.send_signal(signal.SIGINT)
        try:
            return server.wait(timeout=STOP_WITHIN_SECS)
        except subprocess.TimeoutExpired:
            server.kill()
            fail(f"still running {STOP_WITHIN_SECS} s after SIGINT", log)

    # The block as the page writes it, line by line, stopping at the first that fails; an
    # HTTP error is a failure, as a reader would see it.
    fail_on_http_errors = 'curl() { command curl --silent --show-error --fail-with-body "$@"; }\n'
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", fail_on_http_errors + trying],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    paid_after = time.monotonic() - started
    if result.returncode != 0:
        stop()
        fail(f"the block failed ({result.returncode}):\n{result.stdout}\n{result.stderr}", log)

    answers = json_values(result.stdout)
    credentials = json.loads((data_dir / "credentials.json").read_text())
    named = ["merchant_id", "api_key", "support_key", "base_url"]
    missing = [field for field in named if not credentials.get(field)]
    if missing:
        stop()
        fail(f"credentials.json lacks what the page names: {missing}", log)
    merchants = [a for a in answers if isinstance(a, dict) and a.get("id") == credentials["merchant_id"]]
    if not merchants:
        stop()
        fail(f"the block's merchant read did not answer the demo merchant:\n{result.stdout[:2000]}", log)
    if not any(isinstance(a, dict) and str(a.get("openapi", "")).startswith("3.") for a in answers):
        stop()
        fail("the block's /openapi.json did not answer an OpenAPI 3 document", log)
    checkouts = [a for a in answers if isinstance(a, dict) and "order" in a and "payment" in a]
    if len(checkouts) != 1:
        stop()
        fail(f"expected one checkout answer in the block's output, found {len(checkouts)}:\n{result.stdout}", log)
    checkout = checkouts[0]
    if checkout["order"]["status"] != "paid" or checkout["payment"]["status"] != "succeeded":
        stop()
        fail(f"the checkout did not pay: {checkout}", log)
    ready = [a for a in answers if isinstance(a, dict) and a.get("status") == "ready"]
    if not ready:
        stop()
        fail(f"/health/ready did not answer ready:\n{result.stdout}", log)

    code = stop()
    if code != 0:
        fail(f"exited with {code} after SIGINT, not 0", log)
    # "Ctrl-C stops it and its cluster": no postgres of this data dir is left.
    for _ in range(40):
        left = cluster_pids(data_dir)
        if not left:
            break
        time.sleep(0.25)
    else:
        fail(f"PostgreSQL processes left behind after Ctrl-C: {left}", log)
    print(
        f"quickstart_run: paid {checkout['order']['id']} by the page's commands; listening "
        f"{listening:.1f} s after the run command, the first checkout paid {paid_after:.1f} s after it"
    )
    subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
