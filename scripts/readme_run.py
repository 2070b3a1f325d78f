#!/usr/bin/env python3
"""Runs the README's run command as the README writes it, so the README cannot lie.

The command is read from the README's text (the first indented `cargo run` line after
"Run it"), not copied here. It runs on a free port (`PAYORCH_BIND=127.0.0.1:0`) and a
temporary data dir (`PAYORCH_DATA_DIR`); then this script waits for `/health/ready`, pays one
checkout with the demo key from `credentials.json`, stops the server with SIGINT (Ctrl-C) and
checks that it exits 0 and leaves no PostgreSQL process behind.

Usage: scripts/readme_run.py  (from anywhere; exits non-zero with the reason on failure)
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READY_WITHIN_SECS = 2400  # a clean clone's first `cargo run --release` compiles everything
STOP_WITHIN_SECS = 60


def fail(message, log=None):
    print(f"readme_run: {message}", file=sys.stderr)
    if log is not None and log.exists():
        print("--- the server's output ---", file=sys.stderr)
        print(log.read_text(errors="replace")[-6000:], file=sys.stderr)
    sys.exit(1)


def run_command_of_readme():
    lines = (ROOT / "README.md").read_text().splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("Run it"))
    except StopIteration:
        fail("the README has no paragraph starting with 'Run it'")
    for line in lines[start:]:
        if line.startswith("    cargo run "):
            return shlex.split(line.strip())
    fail("the README has no indented `cargo run` line after 'Run it'")


def processes():
    """`{pid: (parent pid, command line)}` of every running process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), 0)
        found[int(entry.name)] = (ppid, cmdline)
    return found


def cluster_pids(folder):
    """The PostgreSQL server running in `folder` (its command line names it) and its children."""
    running = processes()
    servers = {pid for pid, (_, cmdline) in running.items() if "postgres" in cmdline and str(folder) in cmdline}
    return servers | {pid for pid, (ppid, _) in running.items() if ppid in servers}


def http(method, url, headers=None, body=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def main():
    command = run_command_of_readme()
    print(f"readme_run: the README's run command: {shlex.join(command)}")
    work = Path(tempfile.mkdtemp(prefix="payorch-readme-run-"))
    # As root the cluster runs as `postgres`, which must be able to enter the data dir.
    work.chmod(0o755)
    data_dir = work / "data"
    log = work / "serve.log"
    env = dict(os.environ, PAYORCH_BIND="127.0.0.1:0", PAYORCH_DATA_DIR=str(data_dir))
    with open(log, "wb") as out:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    # Ready: credentials.json names the bound address once the server listens.
    credentials_file = data_dir / "credentials.json"
    deadline = time.monotonic() + READY_WITHIN_SECS
    credentials = None
    while time.monotonic() < deadline:
        if server.poll() is not None:
            fail(f"the server exited with {server.returncode} before it was ready", log)
        if credentials_file.exists() and "payorch listening on" in log.read_text(errors="replace"):
            credentials = json.loads(credentials_file.read_text())
            status, _ = http("GET", credentials["base_url"] + "/health/ready")
            if status == 200:
                break
        time.sleep(0.5)
    else:
        server.kill()
        fail(f"not ready within {READY_WITHIN_SECS} s", log)
    base = credentials["base_url"]
    cluster = cluster_pids(work)
    if not cluster:
        server.send_signal(signal.SIGINT)
        fail(f"ready, but no PostgreSQL server runs under {work}", log)
    print(f"readme_run: ready on {base}, its private cluster is {len(cluster)} processes")

    status, body = http(
        "POST",
        base + "/v1/checkout",
        headers={
            "Authorization": f"Bearer {credentials['api_key']}",
            "Idempotency-Key": f"readme-run-{uuid.uuid4()}",
            "Content-Type": "application/json",
        },
        body={"amount": 4200, "currency": "eur", "payment_method": "pm_card_visa"},
    )
    if status != 201 or body["payment"]["status"] != "succeeded" or body["order"]["status"] != "paid":
        server.send_signal(signal.SIGINT)
        fail(f"the checkout answered {status}: {body}", log)
    print(f"readme_run: paid {body['order']['id']} with {body['payment']['id']}")

    server.send_signal(signal.SIGINT)
    try:
        code = server.wait(timeout=STOP_WITHIN_SECS)
    except subprocess.TimeoutExpired:
        server.kill()
        fail(f"still running {STOP_WITHIN_SECS} s after SIGINT", log)
    if code != 0:
        fail(f"exited with {code} after SIGINT, not 0", log)
    # Every process of the cluster goes with the server (the postmaster's children a moment
    # after it); pids are not reused that fast.
    alive = set(processes())
    for _ in range(40):
        left = (cluster & alive) | cluster_pids(work)
        if not left:
            break
        time.sleep(0.25)
        alive = set(processes())
    if left:
        fail(f"PostgreSQL processes left behind: {sorted(left)}", log)
    print("readme_run: stopped with SIGINT, exit 0, no PostgreSQL process left")
    subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
