"""What the operations checks share: start `payorch serve`, wait until it is ready, pay a
checkout, stop it and see it exit 0; run a throw-away PostgreSQL cluster as the `postgres`
user when run as root (initdb refuses root, as CI runs).

Used by scripts/tls_proxy_check.py, scripts/backup_check.py and scripts/upgrade_check.py,
in the way scripts/readme_run.py starts the README's command. The binary is
`target/release/payorch` (CI builds it for readme_run.py), or the one `PAYORCH_BIN` names.
"""

import glob
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class CheckFailed(Exception):
    """What went wrong, said once by the check's `main`, with the logs that show why."""

    def __init__(self, message, logs=()):
        super().__init__(message)
        self.logs = [Path(log) for log in logs]


def report_and_exit(name, error):
    print(f"{name}: FAILED: {error}", file=sys.stderr)
    for log in error.logs:
        if log.exists():
            print(f"--- {log.name} (its end) ---", file=sys.stderr)
            print(log.read_text(errors="replace")[-5000:], file=sys.stderr)
    sys.exit(1)


def run_check(name, check, prefix):
    """Runs `check(work)` in a fresh folder the `postgres` user can enter (the clusters run as
    `postgres` under root), says a failure once with its logs, and how long a pass took."""
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=prefix))
    work.chmod(0o755)
    try:
        check(work)
    except CheckFailed as error:
        report_and_exit(name, error)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{name}: passed in {time.monotonic() - started:.1f} s")


def binary():
    path = Path(os.environ.get("PAYORCH_BIN") or ROOT / "target/release/payorch")
    if not path.exists():
        raise CheckFailed(f"no payorch binary at {path}: run `cargo build --release` first")
    return path


def ensure_debian_package(program, package=None):
    """`program` on PATH, installed from Debian's `package` (default: the same name) if missing."""
    if shutil.which(program) is None:
        print(f"installing {package or program} for {program}")
        run(["apt-get", "update"], "apt-get update", timeout=600)
        run(["apt-get", "install", "-y", "--no-install-recommends", package or program],
            f"installing {package or program}", timeout=600)


def pg_bin_dir():
    """The PostgreSQL server programs: the newest Debian package's, else initdb's on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
    if found:
        return Path(found[-1])
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise CheckFailed("no PostgreSQL server programs: apt-get install postgresql")


def as_cluster_user(command):
    """`command` as the user that may run a cluster: root may not, `postgres` does."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--"] + [str(part) for part in command]
    return [str(part) for part in command]


def give_to_cluster_user(path):
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def run(command, what, env=None, logs=(), timeout=300):
    """Runs `command`; its output is printed; a non-zero exit fails the check, saying `what`."""
    result = subprocess.run(
        [str(part) for part in command], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, timeout=timeout, check=False,
    )
    output = result.stdout.decode(errors="replace")
    if result.returncode != 0:
        raise CheckFailed(f"{what}: `{' '.join(map(str, command))}` exited {result.returncode}:\n{output}", logs)
    return output


def http(method, url, headers=None, body=None, timeout=30, context=None):
    """(status, JSON answer or text, headers); a connection error raises `OSError`."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            raw = response.read()
            return response.status, _decoded(raw), response.headers
    except urllib.error.HTTPError as err:
        return err.code, _decoded(err.read()), err.headers


def _decoded(raw):
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return raw.decode(errors="replace")


def checkout(base, api_key, key=None, context=None, headers=None, amount=4200, method="pm_card_visa"):
    """Pays one order, with the sandbox's good card unless told; (status, answer)."""
    status, body, _ = http(
        "POST",
        base + "/v1/checkout",
        headers={
            "Authorization": f"Bearer {api_key}",
            "Idempotency-Key": key or f"ops-check-{uuid.uuid4()}",
            "Content-Type": "application/json",
            **(headers or {}),
        },
        body={"amount": amount, "currency": "eur", "payment_method": method},
        context=context,
    )
    return status, body


def paid(status, body):
    return (
        status == 201 and isinstance(body, dict)
        and body["payment"]["status"] == "succeeded" and body["order"]["status"] == "paid"
    )


def https_context(ca_file):
    return ssl.create_default_context(cafile=str(ca_file))


class Serve:
    """One `payorch serve` process with its log file."""

    def __init__(self, name, args, env, log):
        self.name = name
        self.args = [str(arg) for arg in args]
        self.env = env
        self.log = Path(log)
        self.process = None

    def start(self):
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [str(binary()), *self.args], cwd=ROOT, env=dict(os.environ, **self.env),
                stdout=out, stderr=subprocess.STDOUT,
            )
        return self

    def wait_ready(self, base, within=120):
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise CheckFailed(f"{self.name} exited with {self.process.returncode} before it was ready", [self.log])
            try:
                status, _, _ = http("GET", base + "/health/ready", timeout=5)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.25)
        raise CheckFailed(f"{self.name} not ready on {base} within {within} s", [self.log])

    def stop(self, sig=signal.SIGTERM, within=60):
        """Stops it as a supervisor would; it must exit 0 within `within` seconds."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise CheckFailed(f"{self.name} still running {within} s after {sig.name}", [self.log])
        if code != 0:
            raise CheckFailed(f"{self.name} exited {code} after {sig.name}, not 0", [self.log])

    def kill(self):
        """After a failure: SIGTERM, so that the private cluster is stopped too, then SIGKILL."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def credentials(data_dir, within=120):
    """The demo's `credentials.json`, once `serve` has written it."""
    path = Path(data_dir) / "credentials.json"
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists():
            try:
                return json.loads(path.read_text())
            except ValueError:
                pass  # being written
        time.sleep(0.25)
    raise CheckFailed(f"no {path} within {within} s")


class Cluster:
    """A throw-away PostgreSQL cluster on a TCP port of the loopback address, trust auth."""

    def __init__(self, folder, port, log):
        self.folder = Path(folder)
        self.port = port
        self.log = Path(log)
        self.bin = pg_bin_dir()

    def url(self, database="payorch", user="payorch"):
        return f"postgres://{user}@127.0.0.1:{self.port}/{database}?sslmode=disable"

    def env(self):
        """libpq's variables for the ops scripts, which take the server from them."""
        return dict(
            os.environ, PATH=f"{self.bin}:{os.environ['PATH']}", PGHOST="127.0.0.1",
            PGPORT=str(self.port), PGUSER="payorch", PGDATABASE="payorch",
        )

    def init(self, settings=""):
        self.folder.mkdir(mode=0o700)
        give_to_cluster_user(self.folder)
        run(as_cluster_user([self.bin / "initdb", "-D", self.folder, "-U", "payorch", "--auth=trust", "-E", "UTF8",
                             "--locale=C"]), "initdb")
        with open(self.folder / "postgresql.conf", "a") as conf:
            conf.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n{settings}")

    def start(self):
        self.log.touch()
        give_to_cluster_user(self.log)
        run(as_cluster_user([self.bin / "pg_ctl", "-D", self.folder, "-l", self.log, "-w", "-t", "120", "start"]),
            f"starting the cluster in {self.folder}", logs=[self.log])

    def stop(self):
        if (self.folder / "postmaster.pid").exists():
            run(as_cluster_user([self.bin / "pg_ctl", "-D", self.folder, "-m", "fast", "-w", "stop"]),
                f"stopping the cluster in {self.folder}", logs=[self.log])

    def sql(self, statement, database="payorch"):
        return run([self.bin / "psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", self.url(database),
                    "-c", statement], f"psql: {statement}", logs=[self.log]).strip()
