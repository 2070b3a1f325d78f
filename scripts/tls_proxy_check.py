#!/usr/bin/env python3
"""Runs ops/nginx/payorch.conf, the page docs/operations/tls-proxy.md shows, in front of
payorch, and pays through it, so the example cannot stop working unseen.

Debian's nginx (installed if missing) serves the example with only its ports, certificate
files and upstream port swapped for a throw-away pair, a self-signed certificate for the
example's own host name, pay.example.com. payorch runs the demo on a free port with
`--trusted-proxies 127.0.0.1/32`. Then, with curl and the certificate as its CA:

- one checkout is paid over https, sent from 127.0.0.2 with a made-up X-Forwarded-For;
  payorch's log must show the client as 127.0.0.2 over https, and the made-up address nowhere;
- plain http is answered with a redirect to https, and never reaches payorch;
- a body over payorch's 64 KiB is refused by nginx (413);
- nginx stops on `nginx -s quit`, payorch on SIGTERM, both exit 0.

Usage: scripts/tls_proxy_check.py  (as root in CI; exits non-zero with the reason on failure)
"""

import json
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from payorch_serve import ROOT, CheckFailed, Serve, credentials, ensure_debian_package, run, run_check

NAME = "tls_proxy_check"
HOST = "pay.example.com"
CLIENT = "127.0.0.2"  # not the proxy's address, so payorch's view of it shows
MADE_UP = "203.0.113.7"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ensure_nginx():
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        print(f"{NAME}: installing Debian's nginx")
        run(["apt-get", "update"], "apt-get update", timeout=600)
        try:
            run(["apt-get", "install", "-y", "--no-install-recommends", "nginx-light"], "installing nginx-light",
                timeout=600)
        except CheckFailed:
            # Debian from 13 has no nginx-light: its nginx is the same small build.
            run(["apt-get", "install", "-y", "--no-install-recommends", "nginx"], "installing nginx", timeout=600)
    return shutil.which("nginx") or "/usr/sbin/nginx"


def replaced_once(text, old, new):
    if text.count(old) != 1:
        raise CheckFailed(f"ops/nginx/payorch.conf should hold `{old}` once (the check swaps it), "
                          f"found {text.count(old)}: fix the example or this check")
    return text.replace(old, new)


def site_config(work, https_port, http_port, upstreams):
    """The example with only its ports, certificate files and upstream swapped."""
    text = (ROOT / "ops/nginx/payorch.conf").read_text()
    text = replaced_once(text, "listen 80;", f"listen 127.0.0.1:{http_port};")
    text = replaced_once(text, "listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;")
    text = replaced_once(text, "/etc/ssl/payorch/fullchain.pem", str(work / "cert.pem"))
    text = replaced_once(text, "/etc/ssl/payorch/privkey.pem", str(work / "key.pem"))
    line = "server 127.0.0.1:8080 max_fails=1 fail_timeout=5s;"
    servers = "\n    ".join(line.replace("8080", str(port)) for port in upstreams)
    return replaced_once(text, line, servers)


def main_config(work, site):
    """What Debian's /etc/nginx/nginx.conf is to the site, in the work folder."""
    temp = work / "nginx-temp"
    temp.mkdir()
    temp.chmod(0o777)  # the workers run as nobody
    return f"""
daemon off;
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log info;
events {{ worker_connections 512; }}
http {{
    access_log {work}/nginx-access.log;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    include {site};
}}
"""


class Nginx:
    def __init__(self, work, https_port, http_port, upstreams):
        self.work = work
        self.https_port = https_port
        self.binary = ensure_nginx()
        site = work / "payorch.conf"
        site.write_text(site_config(work, https_port, http_port, upstreams))
        self.conf = work / "nginx.conf"
        self.conf.write_text(main_config(work, site))
        self.error_log = work / "nginx-error.log"
        self.process = None

    def command(self, *more):
        return [self.binary, "-p", str(self.work), "-c", str(self.conf), *more]

    def start(self):
        run(self.command("-t"), "nginx -t on the example", logs=[self.error_log])
        out = open(self.work / "nginx.out", "wb")
        self.process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT)
        for _ in range(100):
            if self.process.poll() is not None:
                raise CheckFailed(f"nginx exited {self.process.returncode} at start",
                                  [self.work / "nginx.out", self.error_log])
            try:
                socket.create_connection(("127.0.0.1", self.https_port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise CheckFailed("nginx not listening after 10 s", [self.error_log])

    def stop(self):
        if self.process is None or self.process.poll() is not None:
            return
        run(self.command("-s", "quit"), "nginx -s quit", logs=[self.error_log])
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise CheckFailed("nginx still running 30 s after `nginx -s quit`", [self.error_log])
        if code != 0:
            raise CheckFailed(f"nginx exited {code} after `nginx -s quit`", [self.error_log])

    def kill(self):
        """After a failure: SIGTERM, on which the master stops its workers, then SIGKILL."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def self_signed_certificate(work):
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", work / "key.pem", "-out", work / "cert.pem", "-days", "2", "-subj", f"/CN={HOST}",
         "-addext", f"subjectAltName=DNS:{HOST},IP:127.0.0.1"], "making a self-signed certificate")


def curl(*args, port, scheme="https", body_file=None):
    """(status, answer's text, headers' text) of one curl call from CLIENT."""
    out = Path(tempfile.mktemp(prefix="tls-check-body-"))
    head = Path(tempfile.mktemp(prefix="tls-check-head-"))
    command = ["curl", "-sS", "--interface", CLIENT, "--resolve", f"{HOST}:{port}:127.0.0.1",
               "-o", out, "-D", head, "-w", "%{http_code}", *args]
    if body_file is not None:
        command += ["--data-binary", f"@{body_file}"]
    status = run(command, "curl").strip()
    answer = out.read_text(errors="replace") if out.exists() else ""
    headers = head.read_text(errors="replace") if head.exists() else ""
    out.unlink(missing_ok=True)
    head.unlink(missing_ok=True)
    return int(status), answer, headers


def keyed_requests(log):
    """The span of every keyed request payorch logged (JSON lines)."""
    spans = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("message") == "keyed request":
                spans.append(entry.get("span", {}))
    return spans


def check(work):
    ensure_debian_package("curl")
    ensure_debian_package("openssl")
    self_signed_certificate(work)
    https_port, http_port, payorch_port = free_port(), free_port(), free_port()
    data_dir = work / "data"
    log = work / "serve.log"
    serve = Serve("payorch", ["--log-json", "serve", "--trusted-proxies", "127.0.0.1/32",
                              "--public-url", f"https://{HOST}:{https_port}"],
                  {"PAYORCH_BIND": f"127.0.0.1:{payorch_port}", "PAYORCH_DATA_DIR": str(data_dir)}, log)
    nginx = Nginx(work, https_port, http_port, [payorch_port])
    try:
        serve.start()
        serve.wait_ready(f"http://127.0.0.1:{payorch_port}", within=180)
        api_key = credentials(data_dir)["api_key"]
        nginx.start()
        print(f"{NAME}: payorch on 127.0.0.1:{payorch_port}, nginx on https {https_port} and http {http_port}")

        base = f"https://{HOST}:{https_port}"
        request = work / "checkout.json"
        request.write_text('{"amount": 4200, "currency": "eur", "payment_method": "pm_card_visa"}')
        status, answer, headers = curl(
            "--cacert", work / "cert.pem", "-H", f"Authorization: Bearer {api_key}",
            "-H", "Idempotency-Key: tls-check-1", "-H", "Content-Type: application/json",
            "-H", f"X-Forwarded-For: {MADE_UP}", f"{base}/v1/checkout", port=https_port, body_file=request)
        if status != 201:
            raise CheckFailed(f"the checkout through nginx answered {status}: {answer}", [log, nginx.error_log])
        body = json.loads(answer)
        if body["payment"]["status"] != "succeeded" or body["order"]["status"] != "paid":
            raise CheckFailed(f"the checkout through nginx was not paid: {answer}", [log])
        if "strict-transport-security" not in headers.lower():
            raise CheckFailed(f"no Strict-Transport-Security on the https answer:\n{headers}")
        print(f"{NAME}: paid {body['order']['id']} over https with the self-signed CA")

        spans = keyed_requests(log)
        if len(spans) != 1:
            raise CheckFailed(f"payorch logged {len(spans)} keyed requests, not the one checkout", [log])
        seen = {name: spans[0].get(f"http.{name}") for name in ("client_ip", "scheme", "host")}
        if seen != {"client_ip": CLIENT, "scheme": "https", "host": HOST}:
            raise CheckFailed(f"payorch saw the checkout as {seen}, not from {CLIENT} over https to {HOST}: "
                              "are the forwarding headers and --trusted-proxies right?", [log])
        if MADE_UP in log.read_text(errors="replace"):
            raise CheckFailed(f"the made-up X-Forwarded-For {MADE_UP} reached payorch's log", [log])
        print(f"{NAME}: payorch saw client {CLIENT} over https (from X-Forwarded-For), "
              f"not the made-up {MADE_UP}")

        status, _, headers = curl("-H", f"Authorization: Bearer {api_key}", "-H", "Idempotency-Key: tls-check-2",
                                  "-H", "Content-Type: application/json", f"http://{HOST}:{http_port}/v1/checkout",
                                  port=http_port, body_file=request)
        location = next((line.split(":", 1)[1].strip() for line in headers.splitlines()
                         if line.lower().startswith("location:")), "")
        if status not in (301, 308) or not location.startswith(f"https://{HOST}/"):
            raise CheckFailed(f"plain http answered {status} (Location: {location!r}), not a redirect to https")
        if len(keyed_requests(log)) != 1:
            raise CheckFailed("the plain-http request reached payorch", [log])
        print(f"{NAME}: plain http answered {status} to {location}, payorch never saw it")

        big = work / "big.json"
        big.write_text('{"pad": "' + "x" * (64 * 1024) + '"}')
        status, _, _ = curl("--cacert", work / "cert.pem", "-H", "Content-Type: application/json",
                            f"{base}/v1/checkout", port=https_port, body_file=big)
        if status != 413:
            raise CheckFailed(f"a body over 64 KiB answered {status}, not nginx's 413")
        print(f"{NAME}: a body over 64 KiB was refused by nginx with 413")

        nginx.stop()
        serve.stop()
        print(f"{NAME}: nginx stopped on `nginx -s quit`, payorch on SIGTERM, both exit 0")
    finally:
        nginx.kill()
        serve.kill()


def main():
    run_check(NAME, check, "payorch-tls-check-")


if __name__ == "__main__":
    main()
