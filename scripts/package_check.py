#!/usr/bin/env python3
"""Builds payorch's Debian package, installs it, pays one checkout through it, removes it.

What docs/operations/install.md promises, as root on a Debian machine (CI's container):

1. `cargo deb` builds the .deb (cargo-deb, pinned in .ci/run); `systemd-analyze verify`
   checks its unit, and lintian reads the package when it is installed (findings printed).
2. `dpkg -i`: the binary, the system user `payorch`, /etc/payorch/payorch.env a conffile
   of mode 0640 root:payorch, the unit enabled and not started.
3. Unconfigured, the unit refuses to start and says why (no private cluster, no demo).
4. A throw-away PostgreSQL cluster with the two roles docs/PRODUCTION.md, section 2 asks
   for, and `payorch sandbox` in a process of its own as the provider (there is no network;
   the in-process one would be the demo): the secrets go in files, the configuration names
   them, `payorch migrate` and `payorch merchant create` run as the install page writes.
5. The service starts as the unit says: systemd is not PID 1 in a container, so the unit's
   User, Environment, EnvironmentFile, WorkingDirectory, StateDirectory, UMask,
   NoNewPrivileges, ExecStartPre and ExecStart are read from the installed unit file and
   followed (setpriv), so it is the unit that is tested, not a copy of it. One checkout is
   paid and read back; readiness says the role owns nothing; SIGTERM stops it, exit 0.
6. `dpkg -i` once more, as an upgrade: the edited configuration and its mode kept.
7. `dpkg -r` then `dpkg -P`: nothing of the package is left, the state directory gone, the
   database untouched, only the operator's own files in /etc/payorch (removed here after).

The time of each step is printed. The unit's hardening (ProtectSystem and the rest) needs a
running systemd and is not exercised here; `systemd-analyze security --offline` scores it.

Usage: scripts/package_check.py [--deb FILE]  (as root; --deb skips the build)
"""

import argparse
import grp
import hashlib
import hmac
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UNIT = Path("/usr/lib/systemd/system/payorch.service")
CONF_DIR = Path("/etc/payorch")
CONF = CONF_DIR / "payorch.env"
STATE = Path("/var/lib/payorch")
WANTS = Path("/etc/systemd/system/multi-user.target.wants/payorch.service")
# The PATH systemd gives a system service.
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
READY_WITHIN_SECS = 60

timings = []
cleanups = []


def fail(message, log=None):
    print(f"package_check: FAILED: {message}", file=sys.stderr)
    if log is not None and Path(log).exists():
        print(f"--- {log} ---", file=sys.stderr)
        print(Path(log).read_text(errors="replace")[-6000:], file=sys.stderr)
    raise SystemExit(1)


def say(message):
    print(f"package_check: {message}", flush=True)


class step:
    """Times a step of the check: `with step("name"): …`."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        say(f"--- {self.name}")
        self.start = time.monotonic()

    def __exit__(self, *exc):
        took = time.monotonic() - self.start
        timings.append((self.name, took))
        if exc[0] is None:
            say(f"{self.name}: {took:.1f} s")


def run(command, check=True, **kwargs):
    """Runs `command`, its output captured; on failure prints it and stops."""
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if check and done.returncode != 0:
        fail(f"{shlex.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, headers=None, body=None, timeout=30):
    # Bytes are sent as they are (a signed webhook's body must be the bytes signed).
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as err:
        text = err.read()
        try:
            return err.code, json.loads(text or b"null")
        except ValueError:
            return err.code, text.decode(errors="replace")
    except (urllib.error.URLError, ConnectionError):
        return None, None


# --- the unit file, read as systemd reads it -------------------------------------------


def unit_service_section(path):
    """`{key: [values…]}` of the unit's [Service] section, in order, comments dropped."""
    section, values = None, {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            key, _, value = line.partition("=")
            values.setdefault(key.strip(), []).append(value.strip())
    return values


def one(unit, key):
    values = unit.get(key, [])
    if len(values) != 1:
        fail(f"the unit should set {key} once, it sets {values}")
    return values[0]


def time_span(value):
    """Seconds of a systemd time span: `45`, `45s`, `1min 30s`, `500ms`, `infinity` (None)."""
    if value.strip() == "infinity":
        return None
    units = {"": 1, "us": 1e-6, "ms": 1e-3, "s": 1, "sec": 1, "m": 60, "min": 60,
             "h": 3600, "hr": 3600, "d": 86400}
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value)
    if not parts or re.sub(r"[\d.\sa-z]", "", value) or any(unit not in units for _, unit in parts):
        fail(f"not a systemd time span: {value!r}")
    return sum(float(number) * units[unit] for number, unit in parts)


def environment_file(path):
    """The variables of a systemd EnvironmentFile: NAME=value lines, `#`/`;` comments, a
    value in single or double quotes taken inside them (what the shipped file may use)."""
    env = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        name, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.strip()):
            fail(f"{path}:{number} is no NAME=value line: {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[name.strip()] = value
    return env


def service_environment(unit, user):
    """What systemd gives the unit's processes: its own few variables, Environment=, then
    EnvironmentFile= (which wins)."""
    account = pwd.getpwnam(user)
    env = {
        "PATH": SYSTEMD_PATH,
        "LANG": "C.UTF-8",
        "HOME": account.pw_dir,
        "USER": user,
        "LOGNAME": user,
        "SHELL": account.pw_shell,
    }
    for assignment in unit.get("Environment", []):
        for word in shlex.split(assignment):
            name, _, value = word.partition("=")
            env[name] = value
    for name in unit.get("EnvironmentFile", []):
        optional = name.startswith("-")
        path = Path(name.lstrip("-"))
        if path.exists():
            env.update(environment_file(path))
        elif not optional:
            fail(f"the unit's EnvironmentFile {path} does not exist")
    return env


class Service:
    """The installed unit, started as systemd would start it on a machine without systemd."""

    def __init__(self, log):
        self.unit = unit_service_section(UNIT)
        self.user = one(self.unit, "User")
        self.group = one(self.unit, "Group")
        self.log = log
        self.process = None

    def prepare(self):
        """StateDirectory= and its mode, owned by the unit's user, as systemd makes it."""
        for name in self.unit.get("StateDirectory", []):
            path = Path("/var/lib") / name
            path.mkdir(exist_ok=True)
            shutil.chown(path, self.user, self.group)
            mode = self.unit.get("StateDirectoryMode", ["0755"])[-1]
            path.chmod(int(mode, 8))

    def command(self, line):
        """An Exec line as the unit's user: its groups, no new privileges when asked."""
        words = shlex.split(line.lstrip("-@:+!"))
        wrap = ["setpriv", f"--reuid={self.user}", f"--regid={self.group}", "--init-groups"]
        if self.unit.get("NoNewPrivileges", ["no"])[-1] == "yes":
            wrap.append("--no-new-privs")
        return wrap + words

    def popen(self, line, out):
        umask = int(self.unit.get("UMask", ["0022"])[-1], 8)
        return subprocess.Popen(
            self.command(line),
            env=service_environment(self.unit, self.user),
            cwd=self.unit.get("WorkingDirectory", ["/"])[-1],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: os.umask(umask),
        )

    def start(self):
        """ExecStartPre= lines in order (one failing stops the start, as in systemd), then
        ExecStart=; the exit code of the failing ExecStartPre, or None once started."""
        self.prepare()
        with open(self.log, "ab") as out:
            for line in self.unit.get("ExecStartPre", []):
                code = self.popen(line, out).wait(timeout=60)
                if code != 0 and not line.startswith("-"):
                    return code
            self.process = self.popen(one(self.unit, "ExecStart"), out)
        return None

    def stop(self):
        """KillSignal= to the main process, waiting at most TimeoutStopSec=; its exit code."""
        signame = self.unit.get("KillSignal", ["SIGTERM"])[-1]
        timeout = time_span(self.unit.get("TimeoutStopSec", ["90"])[-1])
        self.process.send_signal(getattr(signal, signame))
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            fail(f"still running {timeout} s (TimeoutStopSec) after {signame}", self.log)


def admin(command, env_file=CONF):
    """An admin command as docs/operations/install.md writes it: as the service's user,
    with the service's configuration."""
    script = f"set -a; . {env_file}; exec {command}"
    return run(["runuser", "-u", "payorch", "--", "sh", "-c", script])


# --- a throw-away PostgreSQL ------------------------------------------------------------


def postgres_bin():
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if not found:
        fail("no PostgreSQL server: apt-get install postgresql")
    return found[-1].parent


class Cluster:
    """A cluster of its own in a temporary folder, on a free port, as `postgres`; the
    roles of docs/PRODUCTION.md, section 2, passwords over TCP (scram-sha-256)."""

    def __init__(self, work):
        self.bin = postgres_bin()
        self.dir = work / "pg"
        self.socket_dir = work / "pg-socket"
        self.port = free_port()
        self.owner_password = uuid.uuid4().hex
        self.app_password = uuid.uuid4().hex

    def as_postgres(self, command, **kwargs):
        return run(["runuser", "-u", "postgres", "--"] + command, **kwargs)

    def start(self):
        for folder in (self.dir, self.socket_dir):
            folder.mkdir()
            shutil.chown(folder, "postgres", "postgres")
        self.as_postgres([str(self.bin / "initdb"), "-D", str(self.dir), "-U", "postgres",
                          "--auth-local=peer", "--auth-host=scram-sha-256"])
        options = f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1"
        self.as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.dir), "-o", options,
                          "-l", str(self.dir / "log"), "-w", "start"])
        cleanups.append(self.stop)
        self.sql(
            f"CREATE ROLE payorch_owner LOGIN PASSWORD '{self.owner_password}';",
            "CREATE DATABASE payorch OWNER payorch_owner;",
            "CREATE ROLE payorch_runtime NOLOGIN;",
            f"CREATE ROLE payorch_app LOGIN PASSWORD '{self.app_password}' IN ROLE payorch_runtime;",
        )

    def sql(self, *statements, database="postgres"):
        command = [str(self.bin / "psql"), "-h", str(self.socket_dir), "-p", str(self.port),
                   "-d", database, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"]
        for statement in statements:
            command += ["-c", statement]
        return self.as_postgres(command).stdout.strip()

    def url(self, role, password):
        return f"postgres://{role}:{password}@127.0.0.1:{self.port}/payorch"

    def stop(self):
        self.as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.dir), "-m", "fast", "-w", "stop"],
                         check=False)


# --- the steps ---------------------------------------------------------------------------


def build(output):
    with step("cargo deb (the release build and the package)"):
        run(["cargo", "deb", "--locked", "--output", str(output)], cwd=ROOT)
    debs = sorted(output.glob("payorch_*.deb"))
    if len(debs) != 1:
        fail(f"cargo deb made {debs} in {output}")
    return debs[0]


def inspect(deb):
    with step("the package's contents"):
        contents = run(["dpkg-deb", "--contents", str(deb)]).stdout
        for path in ("usr/bin/payorch", "usr/lib/systemd/system/payorch.service",
                     "etc/payorch/payorch.env", "usr/lib/payorch/check-config",
                     "usr/share/doc/payorch/install.md", "usr/share/doc/payorch/copyright"):
            if not re.search(rf"\s(\./)?{re.escape(path)}$", contents, re.M):
                fail(f"the package lacks {path}:\n{contents}")
        info = run(["dpkg-deb", "--info", str(deb)]).stdout
        for needed in ("Depends:", "adduser", "postinst", "postrm", "prerm"):
            if needed not in info:
                fail(f"the package's control says no {needed!r}:\n{info}")
        size = deb.stat().st_size / 1e6
        say(f"{deb.name}: {size:.1f} MB")
    if shutil.which("lintian"):
        with step("lintian (findings printed, not failing)"):
            findings = run(["lintian", "--tag-display-limit", "0", str(deb)], check=False)
            print(findings.stdout + findings.stderr or "lintian: no findings")


def _comm(proc):
    try:
        return (proc / "comm").read_text().strip()
    except OSError:
        return None


def install(deb):
    with step("dpkg -i"):
        if run(["dpkg-query", "-W", "-f=${Status}", "payorch"], check=False).stdout.startswith("install"):
            fail("payorch is already installed here: dpkg -P payorch first")
        cleanups.append(lambda: run(["dpkg", "-P", "payorch"], check=False))
        out = run(["dpkg", "-i", str(deb)]).stdout
        if "not started" not in out:
            fail(f"the postinst did not say the service is left unstarted:\n{out}")
        user = pwd.getpwnam("payorch")
        if user.pw_uid >= 1000 or user.pw_shell not in ("/usr/sbin/nologin", "/bin/false"):
            fail(f"payorch is no system user without a shell: {user}")
        info = CONF.stat()
        if (stat.S_IMODE(info.st_mode), info.st_uid, grp.getgrgid(info.st_gid).gr_name) != (0o640, 0, "payorch"):
            fail(f"{CONF} is {oct(info.st_mode)} {info.st_uid}:{info.st_gid}, not 0640 root:payorch")
        conffiles = run(["dpkg-query", "-W", "-f=${Conffiles}", "payorch"]).stdout
        if str(CONF) not in conffiles:
            fail(f"{CONF} is no conffile: {conffiles!r}")
        if not WANTS.is_symlink():
            fail(f"the unit is not enabled: no {WANTS}")
        running = [p for p in Path("/proc").iterdir()
                   if p.name.isdigit() and (p / "comm").exists() and _comm(p) == "payorch"]
        if running:
            fail("a payorch process runs right after the install: it should wait to be configured")
    with step("systemd-analyze verify"):
        if shutil.which("systemd-analyze"):
            verify = run(["systemd-analyze", "verify", str(UNIT)], check=False)
            # Offline, systemd-analyze also complains of units it cannot see (the
            # postgresql.service we order after): only payorch.service's own lines count.
            own = [line for line in (verify.stdout + verify.stderr).splitlines() if "payorch.service" in line]
            if verify.returncode != 0 or own:
                fail(f"systemd-analyze verify {UNIT}:\n{verify.stdout}{verify.stderr}")
            security = run(["systemd-analyze", "security", "--offline=yes", str(UNIT)], check=False)
            overall = [line for line in security.stdout.splitlines() if "Overall exposure" in line]
            say(f"systemd-analyze security: {overall[-1].strip() if overall else security.stderr.strip()}")
        else:
            say("no systemd-analyze here (apt-get install systemd): the unit is not verified")


def start_refused(log, reason, what):
    """Starts the unit as installed and expects check-config's refusal: exit 78 (EX_CONFIG)
    with `reason` in what it said. The service and what it said."""
    service = Service(log)
    code = service.start()
    said = log.read_text(errors="replace")
    if code != 78 or reason not in said:
        if service.process:
            service.process.kill()
        fail(f"{what} gave {code}, not 78 with the reason", log)
    return service, said


def refuses_unconfigured(work):
    with step("unconfigured, the unit refuses to start"):
        service, said = start_refused(work / "unconfigured.log", "not configured", "an unconfigured start")
        if list(STATE.iterdir()):
            fail(f"an unconfigured start wrote {list(STATE.iterdir())}")
        # Refused for good: systemd must not restart it every RestartSec for ever.
        if "78" not in service.unit.get("RestartPreventExitStatus", [""])[-1].split():
            fail(f"the unit restarts after check-config's 78: RestartPreventExitStatus is "
                 f"{service.unit.get('RestartPreventExitStatus')}")
        say(f"refused, exit 78 (not restarted): {said.strip()[:120]}…")


def refuses_without_webhook_secret(work):
    """A provider by URL without its webhooks' secret: `serve` would make a random one at
    each start and every provider webhook would fail its signature, so the start is refused."""
    with step("a provider without its webhook secret: refused"):
        _, said = start_refused(work / "no-webhook-secret.log", "webhook secret",
                                "a start without PAYORCH_WEBHOOK_SECRET_FILE")
        say(f"refused, exit 78: {said.strip()[-100:]}")


def configure(cluster, sandbox_url, provider_secret, work):
    """What the operator does: secrets in files of their own, the configuration naming them
    (first without the webhook secret, which the unit must refuse)."""
    secrets = {
        "database_url": cluster.url("payorch_app", cluster.app_password),
        "migration_database_url": cluster.url("payorch_owner", cluster.owner_password),
        "provider_secret": provider_secret,
        "webhook_secret": "whsec_" + uuid.uuid4().hex,
    }
    for name, value in secrets.items():
        path = CONF_DIR / name
        path.write_text(value + "\n")
        shutil.chown(path, "root", "payorch")
        path.chmod(0o640)
    # The master key, by docs/PRODUCTION.md's command (section 5), then readable by the service.
    run(["sh", "-c", 'echo "k1:$(head -c 32 /dev/urandom | base64)" > /etc/payorch/master_key '
         "&& chmod 600 /etc/payorch/master_key"])
    shutil.chown(CONF_DIR / "master_key", "root", "payorch")
    (CONF_DIR / "master_key").chmod(0o640)
    port = free_port()

    def edit(settings):
        text = CONF.read_text()
        for name, value in settings.items():
            # Uncommented where the shipped file has the line, as an operator edits it.
            text, count = re.subn(rf"^#?{name}=.*$", f"{name}={value}", text, count=1, flags=re.M)
            if count != 1:
                fail(f"the shipped {CONF} has no line for {name}")
        CONF.write_text(text)

    edit({
        "DATABASE_URL_FILE": "/etc/payorch/database_url",
        "PAYORCH_MIGRATION_DATABASE_URL_FILE": "/etc/payorch/migration_database_url",
        "PAYORCH_PROVIDER_URL": sandbox_url,
        "PAYORCH_PROVIDER_SECRET_FILE": "/etc/payorch/provider_secret",
        "PAYORCH_MASTER_KEY_FILE": "/etc/payorch/master_key",
        "PAYORCH_BIND": f"127.0.0.1:{port}",
    })
    refuses_without_webhook_secret(work)
    edit({"PAYORCH_WEBHOOK_SECRET_FILE": "/etc/payorch/webhook_secret"})
    return f"http://127.0.0.1:{port}"


def start_sandbox(work, provider_secret):
    """`payorch sandbox`, the installed binary, as nobody: the Stripe-protocol provider."""
    log = work / "sandbox.log"
    out = open(log, "wb")
    process = subprocess.Popen(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
         "/usr/bin/payorch", "sandbox", "--bind", "127.0.0.1:0", "--secret", provider_secret],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=out,
    )
    cleanups.append(lambda: (process.kill(), process.wait()))
    first = process.stdout.readline().decode().strip()
    url = first.rsplit(" ", 1)[-1]
    if not url.startswith("http://127.0.0.1:"):
        fail(f"the sandbox said {first!r}", log)
    return url


def pay_one_checkout(work, base):
    with step("payorch migrate and merchant create, as the install page writes them"):
        migrated = admin("payorch migrate").stdout.strip()
        say(f"payorch migrate: {migrated[:100]}")
        merchant = json.loads(admin("payorch merchant create --name 'Package check' --json").stdout)
    with step("the service started by its unit, one checkout paid through it"):
        log = work / "serve.log"
        service = Service(log)
        if service.start() is not None:
            fail("the configured unit's ExecStartPre refused to start", log)
        cleanups.append(lambda: service.process.poll() is None and service.process.kill())
        deadline = time.monotonic() + READY_WITHIN_SECS
        while True:
            if service.process.poll() is not None:
                fail(f"payorch serve exited {service.process.returncode}", log)
            status, ready = http("GET", base + "/health/ready", timeout=5)
            if status == 200:
                break
            if time.monotonic() > deadline:
                fail(f"not ready within {READY_WITHIN_SECS} s: {status} {ready}", log)
            time.sleep(0.3)
        if ready.get("database_role") != "owns_nothing":
            fail(f"ready, but the role it serves as: {ready}", log)
        key = merchant["api_key"]
        status, body = http(
            "POST", base + "/v1/checkout",
            headers={"Authorization": f"Bearer {key}", "Idempotency-Key": f"package-check-{uuid.uuid4()}",
                     "Content-Type": "application/json"},
            body={"amount": 4200, "currency": "eur", "payment_method": "pm_card_visa"},
        )
        if status != 201 or body["payment"]["status"] != "succeeded" or body["order"]["status"] != "paid":
            fail(f"the checkout answered {status}: {body}", log)
        payment = body["payment"]["id"]
        status, read = http("GET", f"{base}/v1/payments/{payment}", headers={"Authorization": f"Bearer {key}"})
        if status != 200 or read["status"] != "succeeded":
            fail(f"GET /v1/payments/{payment} answered {status}: {read}", log)
        # The provider's webhook for it, signed with the configured secret as Stripe signs
        # (fixtures/webhooks/sign.py): answered 200, so the secret is the one serve checks.
        event = json.dumps({
            "id": f"evt_package_check_{uuid.uuid4().hex}", "object": "event",
            "type": "payment_intent.succeeded", "created": int(time.time()),
            "data": {"object": {
                "id": read["provider_payment_id"], "object": "payment_intent",
                "amount": read["amount"], "amount_received": read["amount"],
                "currency": read["currency"], "status": "succeeded",
                "metadata": {"attempt_id": payment, "order_id": read["order_id"],
                             "merchant_id": read["merchant_id"]},
            }},
        })
        secret = (CONF_DIR / "webhook_secret").read_text().strip()
        stamp = int(time.time())
        mac = hmac.new(secret.encode(), f"{stamp}.{event}".encode(), hashlib.sha256).hexdigest()
        status, received = http(
            "POST", f"{base}/v1/webhooks/{read['provider']}",
            headers={"Stripe-Signature": f"t={stamp},v1={mac}", "Content-Type": "application/json"},
            body=event.encode(),
        )
        if status != 200:
            fail(f"a webhook signed with PAYORCH_WEBHOOK_SECRET_FILE's secret answered {status}: {received}", log)
        status, demo = http("POST", base + "/checkout/demo/orders", headers={"Idempotency-Key": "package-check"})
        if status != 404:
            fail(f"the demo checkout answered {status}, not 404: {demo}", log)
        say(f"paid {body['order']['id']} with {payment}: succeeded; its signed webhook: 200; no demo")
    with step("SIGTERM: a graceful stop, a checkout in progress answered"):
        # pm_sandbox_slow: the provider answers after 3 s (`payorch sandbox`'s default); the
        # stop comes 1 s into it, and the drain must still answer it.
        answers = []
        slow = threading.Thread(target=lambda: answers.append(http(
            "POST", base + "/v1/checkout",
            headers={"Authorization": f"Bearer {key}", "Idempotency-Key": f"package-check-{uuid.uuid4()}",
                     "Content-Type": "application/json"},
            body={"amount": 4300, "currency": "eur", "payment_method": "pm_sandbox_slow"},
        )))
        slow.start()
        time.sleep(1)
        code = service.stop()
        slow.join()
        if code != 0 or "stopped" not in log.read_text(errors="replace"):
            fail(f"exited {code} after the unit's KillSignal, not 0 with its last words", log)
        # docs/operations/running.md, "Stopping and rolling deploys": every checkout the
        # server took is answered, none left open. `pending` here means the stop cut its
        # call to the provider (the reconciler settles it after the restart).
        status, body = answers[0]
        if status != 201 or body["payment"]["status"] != "succeeded":
            fail(f"the checkout in progress at the stop was answered {status}, its payment "
                 f"{body['payment']['status'] if status == 201 else body}: the stop cut it", log)
        left = sorted(p.name for p in STATE.iterdir())
        say(f"exit 0; in {STATE}: {left or 'nothing'}")
    return payment


def reinstall(deb):
    """The package installed over itself, as an upgrade is: the postinst's upgrade branch
    keeps the operator's edited configuration and its modes, and says nothing of a first
    install."""
    with step("dpkg -i again: an upgrade keeps the configuration"):
        edited = CONF.read_text()
        out = run(["dpkg", "-i", str(deb)]).stdout
        if "not started" in out:
            fail(f"the postinst took the upgrade for a first install:\n{out}")
        info = CONF.stat()
        if CONF.read_text() != edited or stat.S_IMODE(info.st_mode) != 0o640 \
                or grp.getgrgid(info.st_gid).gr_name != "payorch":
            fail(f"the upgrade changed {CONF} or its mode ({oct(info.st_mode)})")


def remove(cluster, payment, own_files):
    with step("dpkg -r, then dpkg -P"):
        run(["dpkg", "-r", "payorch"])
        if Path("/usr/bin/payorch").exists() or UNIT.exists():
            fail("dpkg -r left the binary or the unit")
        if not CONF.exists():
            fail(f"dpkg -r removed {CONF}: a removal keeps the configuration until purge")
        run(["dpkg", "-P", "payorch"])
        left = [p for p in (CONF, STATE, UNIT, WANTS, Path("/usr/lib/payorch"),
                            Path("/usr/share/doc/payorch"), Path("/etc/systemd/system/payorch.service"))
                if p.exists() or p.is_symlink()]
        if left:
            fail(f"dpkg -P left {left}")
        kept = sorted(p.name for p in CONF_DIR.iterdir()) if CONF_DIR.exists() else []
        if kept != sorted(own_files):
            fail(f"after the purge {CONF_DIR} holds {kept}, not just the operator's {sorted(own_files)}")
        # An API id is its row's uuid after a prefix: pay_<32 hex digits>.
        row = payment.removeprefix("pay_")
        status = cluster.sql(f"SELECT status FROM payment_attempts WHERE id = '{row}'", database="payorch")
        if status != "succeeded":
            fail(f"the database after the purge says {status!r} of {payment}")
        say(f"purged; the database still has {payment} succeeded; {CONF_DIR} keeps only {kept}")
        for name in kept:
            (CONF_DIR / name).unlink()
        CONF_DIR.rmdir()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deb", type=Path, help="a .deb already built: skip `cargo deb`")
    args = parser.parse_args()
    if os.geteuid() != 0:
        fail("run as root: it installs a package")
    if CONF_DIR.exists() or STATE.exists():
        fail(f"{CONF_DIR} or {STATE} exists already: this machine has a payorch of its own")
    had_user = True
    try:
        pwd.getpwnam("payorch")
    except KeyError:
        had_user = False
    work = Path(tempfile.mkdtemp(prefix="payorch-package-check-"))
    work.chmod(0o755)
    try:
        deb = args.deb or build(work / "deb")
        inspect(deb)
        install(deb)
        refuses_unconfigured(work)
        with step("a PostgreSQL of its own, the two roles, the sandbox as the provider"):
            cluster = Cluster(work)
            cluster.start()
            provider_secret = "sk_test_" + uuid.uuid4().hex
            sandbox_url = start_sandbox(work, provider_secret)
            base = configure(cluster, sandbox_url, provider_secret, work)
        payment = pay_one_checkout(work, base)
        reinstall(deb)
        own_files = [p.name for p in CONF_DIR.iterdir() if p != CONF]
        remove(cluster, payment, own_files)
        cleanups.pop(0)  # the purge is done
    finally:
        for cleanup in reversed(cleanups):
            try:
                cleanup()
            except Exception as err:  # noqa: BLE001 - a cleanup's failure must not hide the first
                print(f"package_check: cleanup: {err}", file=sys.stderr)
        # The system user is Debian's practice to keep; the check leaves the machine as it found it.
        if not had_user:
            for command in (["deluser", "--system", "payorch"],
                            ["delgroup", "--system", "--only-if-empty", "payorch"]):
                subprocess.run(command, check=False, capture_output=True)
        # The secrets' files the check wrote as the operator, when it stopped before removing
        # them (there was no /etc/payorch before it: see above).
        shutil.rmtree(CONF_DIR, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    say("timings: " + ", ".join(f"{name} {took:.1f} s" for name, took in timings))
    say("ok")


if __name__ == "__main__":
    main()
