"""What the two provider-library scripts share (stripe_flows.py, adyen_flows.py).

Each script is run by tests/provider_libraries.rs against a sandbox it started
(`payorch sandbox`, docs/guides/test-cards.md "The sandbox"): the script opens a receiver for the sandbox's
webhooks or notifications, prints its address on a line of its own, waits for the test to
point the sandbox at it, runs its flows through the provider's own library, and exits 1 if
any check failed, naming each one.

Everything here is the standard library: the providers' libraries are used by the scripts
themselves, unpatched, through their documented configuration.
"""

import json
import os
import re
import sys
import threading
import time
import traceback
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The sandbox is on this machine; no proxy of the environment may stand in between.
os.environ["NO_PROXY"] = "127.0.0.1,localhost"
os.environ["no_proxy"] = "127.0.0.1,localhost"


def setting(name):
    """A setting the Rust test passes in the environment."""
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set: run this through `cargo test --test provider_libraries`")
    return value


class CheckFailed(Exception):
    """A check of a flow that did not hold."""


def expect(condition, what):
    """Fails the current flow with `what` unless `condition` holds (not `assert`, which
    `python3 -O` would drop)."""
    if not condition:
        raise CheckFailed(what)


def wait_for(what, probe, timeout=10.0, every=0.05):
    """Polls `probe` until it returns something truthy; fails with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise CheckFailed(f"{what}: not within {timeout:.0f} s")
        time.sleep(every)


class Receiver:
    """An HTTP server on a free port of 127.0.0.1 standing in for the merchant: `handle`
    answers each POST as `(status, content_type, body)`, and a GET (a shopper sent back by
    a challenge page) is kept with its query and answered with a small page."""

    def __init__(self, handle):
        self.returns = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                try:
                    status, content_type, answer = handle(self.path, self.headers, body)
                except Exception:  # noqa: BLE001 - a receiver bug must show, not hang
                    traceback.print_exc()
                    status, content_type, answer = 500, "text/plain", b"receiver error"
                self._answer(status, content_type, answer)

            def do_GET(self):
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                with receiver.lock:
                    receiver.returns.append({"path": self.path, "query": query})
                self._answer(200, "text/html", b"<p>Back at the shop.</p>")

            def _answer(self, status, content_type, body):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_until_pointed_at(self):
        """Tells the Rust test where the receiver is and waits for its word that the sandbox
        now delivers here: `receiver <url>` on stdout, then one line on stdin."""
        print(f"receiver {self.url}", flush=True)
        if not sys.stdin.readline():
            sys.exit("the test closed stdin before pointing the sandbox at the receiver")

    def returned(self, marker):
        """The query of the shopper's return whose path holds `marker`, once it came."""
        with self.lock:
            for visit in self.returns:
                if marker in visit["path"]:
                    return visit["query"]
        return None

    def close(self):
        self.server.shutdown()


def pass_challenge(page_url, button="complete"):
    """Does what a shopper's browser does on the sandbox's 3-D Secure page, whose buttons
    are forms (docs/guides/test-cards.md, "The sandbox" and "3-D Secure"): loads the page, submits the form of
    `button`, and follows the redirect back to the merchant's return URL. Returns the
    page's status and the URL the browser ended at."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(page_url, timeout=10) as page:
        html = page.read().decode("utf-8")
        status = page.status
    match = re.search(
        r'<form[^>]*action="([^"]+)"[^>]*>\s*<button[^>]*id="' + re.escape(button) + '"', html
    )
    expect(match, f"the challenge page at {page_url} has a form with a `{button}` button: {html}")
    action = urllib.parse.urljoin(page_url, match.group(1))
    # A form POST; urllib follows the 303 to the return URL with a GET, as a browser does.
    with opener.open(urllib.request.Request(action, data=b"", method="POST"), timeout=10) as back:
        back.read()
        return status, back.geturl()


class Flows:
    """Runs each flow, records what failed and why, and goes on with the next one, so a run
    names every flow that fails and not only the first."""

    def __init__(self, library):
        self.library = library
        self.failed = []
        self.passed = 0

    def run(self, name, flow, *args):
        """Runs `flow(*args)`; a text it returns is printed with its `ok`."""
        started = time.monotonic()
        try:
            result = flow(*args)
        except Exception as error:  # noqa: BLE001 - every failure is reported, then counted
            detail = str(error) if isinstance(error, CheckFailed) else traceback.format_exc()
            self.failed.append(name)
            print(f"FAIL {self.library}: {name}: {detail}", flush=True)
            return None
        self.passed += 1
        note = f"; {result}" if isinstance(result, str) else ""
        print(f"ok   {self.library}: {name} ({time.monotonic() - started:.2f} s{note})", flush=True)
        return result

    def finish(self):
        """Exit status for the script: 0 when every flow passed."""
        total = self.passed + len(self.failed)
        if self.failed:
            print(f"{self.library}: {len(self.failed)} of {total} flows failed: "
                  + ", ".join(self.failed), flush=True)
            return 1
        print(f"{self.library}: all {total} flows passed", flush=True)
        return 0


def compact(value):
    """A short JSON rendering for failure messages."""
    return json.dumps(value, sort_keys=True, default=str)[:2000]
