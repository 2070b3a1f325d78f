#!/usr/bin/env python3
"""Runs the upgrade of docs/operations/upgrades.md under load: its scripts, as the page
includes them, against two replicas behind the nginx of docs/operations/tls-proxy.md.

A throw-away PostgreSQL cluster with the two roles of docs/PRODUCTION.md, section 2 (the
owner that migrates, the runtime login that serves); ops/upgrade/migrate.sh applies the
migrations from the service's environment file; two `payorch serve` replicas (the demo, each
with its in-process sandbox) share the database; ops/nginx/payorch.conf, with both replicas
as its upstream, is in front. While three clients pay checkouts back to back over https
(and four more with the sandbox's slow card, so that a replica stops with checkouts in hand),
ops/upgrade/rolling-restart.sh restarts the replicas one at a time (the same binary stands in
for the next release). Then: no checkout failed, none got a connection error, every one
answered was paid exactly once in the database, no attempt is left open, each replica
exited 0 on SIGTERM and served again.

Usage: scripts/upgrade_check.py  (as root in CI; exits non-zero with the reason on failure)
"""

import os
import re
import signal
import subprocess
import threading
import time
from datetime import datetime
from pathlib import Path

from payorch_serve import (ROOT, CheckFailed, Cluster, binary, checkout, credentials, ensure_debian_package, http,
                           https_context, paid, run, run_check)
from tls_proxy_check import Nginx, free_port, self_signed_certificate

NAME = "upgrade_check"
CLIENTS = 3
# More clients pay with the sandbox's slow card (3 s at the provider), so that replicas are
# stopped with checkouts in hand: the drain must answer them, not drop them.
SLOW_METHOD = "pm_sandbox_slow"
SLOW_CLIENTS = 4
REPLICAS = ("replica-a", "replica-b")

RUN_REPLICA = """#!/bin/sh
# One replica, as a service manager runs it: its exit status is kept for the check.
set -a
. {work}/payorch.env
set +a
export PAYORCH_BIND=127.0.0.1:{port}
rm -f {work}/{name}.exit
"{binary}" serve --trusted-proxies 127.0.0.1/32 >>{work}/{name}.log 2>&1 &
echo $! >{work}/{name}.pid
wait $!
echo $? >{work}/{name}.exit
"""

# What `systemctl restart` does for the unit: SIGTERM, wait for the exit, start again.
RESTART = """#!/bin/sh
set -eu
name=$1
pid=$(cat {work}/$name.pid)
rm -f {work}/$name.exit
kill -TERM "$pid"
waited=0
until [ -s {work}/$name.exit ]; do
    waited=$((waited + 1))
    [ $waited -lt 600 ] || {{ echo "$name still running 60 s after SIGTERM" >&2; exit 1; }}
    sleep 0.1
done
code=$(cat {work}/$name.exit)
[ "$code" = 0 ] || {{ echo "$name exited $code after SIGTERM, not 0" >&2; exit 1; }}
echo "$name stopped after SIGTERM, exit 0"
echo "$name" >>{work}/restarted
setsid sh {work}/$name.run.sh </dev/null >/dev/null 2>&1 &
"""


class Replicas:
    def __init__(self, work, ports):
        self.work = work
        self.ports = dict(zip(REPLICAS, ports))
        for name, port in self.ports.items():
            script = work / f"{name}.run.sh"
            script.write_text(RUN_REPLICA.format(work=work, port=port, binary=binary(), name=name))
        self.restart = work / "restart.sh"
        self.restart.write_text(RESTART.format(work=work))

    def url(self, name):
        return f"http://127.0.0.1:{self.ports[name]}"

    def log(self, name):
        return self.work / f"{name}.log"

    def start(self, name):
        subprocess.Popen(["setsid", "sh", str(self.work / f"{name}.run.sh")], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (self.work / f"{name}.exit").exists():
                raise CheckFailed(f"{name} exited before it was ready", [self.log(name)])
            try:
                if http("GET", self.url(name) + "/health/ready", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.25)
        raise CheckFailed(f"{name} not ready within 120 s", [self.log(name)])

    def pid(self, name):
        path = self.work / f"{name}.pid"
        return int(path.read_text()) if path.exists() and path.read_text().strip() else None

    def stop_all(self):
        for name in REPLICAS:
            if self.pid(name) is not None and not (self.work / f"{name}.exit").exists():
                os.kill(self.pid(name), signal.SIGTERM)
        for name in REPLICAS:
            exit_file = self.work / f"{name}.exit"
            deadline = time.monotonic() + 60
            while not (exit_file.exists() and exit_file.read_text().strip()):
                if time.monotonic() > deadline:
                    raise CheckFailed(f"{name} still running 60 s after SIGTERM", [self.log(name)])
                time.sleep(0.1)
            if exit_file.read_text().strip() != "0":
                raise CheckFailed(f"{name} exited {exit_file.read_text().strip()} after SIGTERM", [self.log(name)])

    def kill_all(self):
        """After a failure: whatever still runs is stopped, SIGTERM first so that it lets go of
        the database, then SIGKILL."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            alive = []
            for name in REPLICAS:
                pid = self.pid(name)
                try:
                    if pid is not None:
                        os.kill(pid, sig)
                        alive.append(pid)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 30
            while alive and time.monotonic() < deadline:
                alive = [pid for pid in alive if Path(f"/proc/{pid}").exists()
                         and "zombie" not in Path(f"/proc/{pid}/status").read_text(errors="replace")]
                time.sleep(0.2)


class Load:
    """Clients paying checkouts back to back through nginx until told to stop."""

    def __init__(self, base, api_key, context):
        self.base, self.api_key, self.context = base, api_key, context
        self.stopping = threading.Event()
        self.paid = 0
        self.failures = []
        self.lock = threading.Lock()
        self.slow_paid = 0
        self.threads = [threading.Thread(target=self.client, args=(n, "pm_card_visa"), daemon=True)
                        for n in range(CLIENTS)]
        self.threads += [threading.Thread(target=self.client, args=(CLIENTS + n, SLOW_METHOD), daemon=True)
                         for n in range(SLOW_CLIENTS)]

    def client(self, number, method):
        count = 0
        while not self.stopping.is_set():
            count += 1
            key = f"upgrade-check-{number}-{count}"
            try:
                status, body = checkout(self.base, self.api_key, key=key, context=self.context, method=method)
                outcome = None if paid(status, body) else f"{key}: {status} {' '.join(str(body).split())[:200]}"
            except OSError as err:
                outcome = f"{key}: connection error: {err}"
            with self.lock:
                if outcome is None:
                    self.paid += 1
                    self.slow_paid += method == SLOW_METHOD
                else:
                    self.failures.append(outcome)

    def start(self):
        for thread in self.threads:
            thread.start()

    def stop(self):
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=60)


def drains(log):
    """Seconds from each "stopping" line of a replica's log to its "stopped" line: a drain
    that had a slow checkout in hand lasts until that checkout is answered."""
    found, began = [], None
    for line in log.read_text(errors="replace").splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)  # a terminal's colours, if any
        stamp = line.split(" ", 1)[0]
        if "stopping: no new connections" in line:
            began = stamp
        elif "stopped: every request in progress" in line and began:
            found.append((datetime.fromisoformat(stamp.rstrip("Z")) - datetime.fromisoformat(began.rstrip("Z")))
                         .total_seconds())
            began = None
    return found


def check(work):
    ensure_debian_package("curl")  # rolling-restart.sh asks /health/ready with it
    cluster = Cluster(work / "pg", free_port(), work / "postgres.log")
    cluster.init()
    cluster.start()
    nginx = None
    replicas = None
    try:
        # docs/PRODUCTION.md, section 2: the owner migrates, the runtime login serves.
        cluster.sql("CREATE ROLE payorch_runtime NOLOGIN", "postgres")
        cluster.sql("CREATE ROLE payorch_app LOGIN IN ROLE payorch_runtime", "postgres")
        cluster.sql("CREATE DATABASE payorch", "postgres")
        env_file = work / "payorch.env"
        env_file.write_text(
            f"DATABASE_URL='{cluster.url(user='payorch_app')}'\n"
            f"PAYORCH_MIGRATION_DATABASE_URL='{cluster.url()}'\n"
            f"PAYORCH_DATA_DIR={work / 'data'}\n"
        )
        started = time.monotonic()
        print(run(["sh", ROOT / "ops/upgrade/migrate.sh", env_file, binary()], "ops/upgrade/migrate.sh",
                  logs=[cluster.log]).rstrip())
        print(f"{NAME}: migrated in {time.monotonic() - started:.1f} s")

        replicas = Replicas(work, [free_port(), free_port()])
        for name in REPLICAS:  # one at a time: the first makes the demo's keys, the second reads them
            replicas.start(name)
        api_key = credentials(work / "data")["api_key"]
        first_pids = {name: replicas.pid(name) for name in REPLICAS}

        self_signed_certificate(work)
        https_port = free_port()
        nginx = Nginx(work, https_port, free_port(), replicas.ports.values()).start()
        print(f"{NAME}: {', '.join(f'{n} on {replicas.url(n)}' for n in REPLICAS)}, nginx on https {https_port}")

        load = Load(f"https://127.0.0.1:{https_port}", api_key, https_context(work / "cert.pem"))
        load.start()
        time.sleep(2)
        before = load.paid
        started = time.monotonic()
        restart_env = dict(os.environ, RESTART_COMMAND=f'sh {replicas.restart} "$1"', READY_WITHIN_SECS="120")
        try:
            output = run(["sh", ROOT / "ops/upgrade/rolling-restart.sh",
                          *(f"{name}={replicas.url(name)}" for name in REPLICAS)],
                         "ops/upgrade/rolling-restart.sh", env=restart_env,
                         logs=[replicas.log(n) for n in REPLICAS] + [nginx.error_log])
        finally:
            during = load.paid - before
            rolled_in = time.monotonic() - started
            time.sleep(2)
            load.stop()
        print(output.rstrip())
        print(f"{NAME}: rolled both replicas in {rolled_in:.1f} s; {during} checkouts paid meanwhile, "
              f"{load.paid} in all by {CLIENTS + SLOW_CLIENTS} clients ({load.slow_paid} with the slow card)")

        if load.failures:
            shown = "\n  ".join(load.failures[:10])
            raise CheckFailed(f"{len(load.failures)} of {load.paid + len(load.failures)} checkouts failed "
                              f"during the rolling restart:\n  {shown}",
                              [nginx.error_log] + [replicas.log(n) for n in REPLICAS])
        if during < 5 or load.slow_paid < 3:
            raise CheckFailed(f"only {during} checkouts were paid during the restart, {load.slow_paid} with the "
                              "slow card: the load did not run")
        print(f"{NAME}: each drain, SIGTERM to exit: "
              + ", ".join(f"{name} {drain:.1f} s" for name in REPLICAS for drain in drains(replicas.log(name))))
        for name in REPLICAS:
            if replicas.pid(name) == first_pids[name]:
                raise CheckFailed(f"{name} was not restarted (same pid {first_pids[name]})")
        restarted = (work / "restarted").read_text().split()
        if restarted != list(REPLICAS):
            raise CheckFailed(f"the replicas were restarted in the order {restarted}, not one each in turn")

        # Every checkout answered paid is one paid order, and nothing is left half-done.
        deadline = time.monotonic() + 30
        while True:
            open_attempts = int(cluster.sql("SELECT count(*) FROM payment_attempts WHERE status IN ('created', 'pending')"))
            if open_attempts == 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        if open_attempts:
            raise CheckFailed(f"{open_attempts} payment attempts left open after the rolling restart")
        orders = int(cluster.sql("SELECT count(*) FROM orders WHERE status = 'paid'"))
        succeeded = int(cluster.sql("SELECT count(*) FROM payment_attempts WHERE status = 'succeeded'"))
        if orders != load.paid or succeeded != load.paid:
            raise CheckFailed(f"{load.paid} checkouts answered paid, but the database has {orders} paid orders "
                              f"and {succeeded} succeeded attempts")
        moved = sum(1 for line in nginx.error_log.read_text(errors="replace").splitlines()
                    if "while connecting to upstream" in line or "prematurely closed" in line
                    or "while reading response header from upstream" in line)
        print(f"{NAME}: {load.paid} checkouts, {load.paid} paid orders, 0 failed, 0 open attempts; "
              f"nginx passed {moved} requests on to the other replica")

        nginx.stop()
        replicas.stop_all()
        cluster.stop()
        print(f"{NAME}: nginx, both replicas (exit 0 on SIGTERM) and the cluster stopped")
    finally:
        if nginx is not None:
            nginx.kill()
        if replicas is not None:
            replicas.kill_all()
        try:
            cluster.stop()
        except CheckFailed:
            pass


def main():
    run_check(NAME, check, "payorch-upgrade-check-")


if __name__ == "__main__":
    main()
