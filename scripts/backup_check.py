#!/usr/bin/env python3
"""Runs the backup and point-in-time recovery of docs/operations/backup.md: the scripts of
ops/backup/ that the page includes, against a throw-away PostgreSQL cluster serving payorch.

1. A cluster (initdb, as `postgres` under root) with ops/backup/postgresql.conf's settings,
   its archive folder and script path swapped for the work folder's; the two roles of
   docs/PRODUCTION.md, section 2. payorch serves the demo on it, paying through
   `payorch sandbox` run on its own, as a provider is: not restored, remembering.
2. base-backup.sh while payorch serves; five checkouts are paid; a sixth is at the provider
   (the sandbox's slow card) when the time is noted, and paid after it; five more are paid.
3. payorch stops (exit 0), the cluster is stopped for good, as if lost.
4. restore-pitr.sh into a new folder with `latest` (a lost server: all the archive holds);
   PostgreSQL starts on it; wait-recovered.sh until it is open for writes; payorch serves
   on it: all eleven orders are there and paid, and a new checkout is paid.
5. Again into another folder, up to the noted time (a mistake to undo): the five orders paid
   before the time are there and paid, the five after are not (404); the sixth's attempt is
   open in the restored database, and payorch's reconciler settles it from the provider:
   paid, by the reconciler; a retry of an after-the-time checkout's Idempotency-Key is a new
   payment (the second charge backup.md warns of); a new checkout is paid.
6. A new base backup of the restored database, then prune.sh keeping one: the first backup
   and the WAL before the new one's start are deleted.

The scripts are copied into the work folder, as the page has them installed, and run as
`postgres` when run as root; WAL is archived by archive-wal.sh as the server's
archive_command. One step is the check's own: `pg_switch_wal()` after the last checkout,
so that its segment is archived now rather than after archive_timeout.

Usage: scripts/backup_check.py  (as root in CI; exits non-zero with the reason on failure)
"""

import base64
import os
import shutil
import signal
import threading
import time
import uuid
from pathlib import Path

from payorch_serve import (ROOT, CheckFailed, Cluster, Serve, as_cluster_user, checkout, credentials,
                           give_to_cluster_user, http, paid, run, run_check)
from tls_proxy_check import free_port

NAME = "backup_check"
EACH_SIDE = 5
SLOW_MS = 3000  # the checkout in flight at the noted time is at the provider this long


def install_scripts(work):
    """ops/backup/*.sh into a folder the cluster's user can read, as the page installs them."""
    folder = work / "ops-backup"
    folder.mkdir()
    for script in sorted((ROOT / "ops/backup").glob("*.sh")):
        shutil.copy2(script, folder / script.name)
    return folder


def archive_settings(scripts, archive):
    """ops/backup/postgresql.conf with only the script's path and the archive's folder swapped."""
    text = (ROOT / "ops/backup/postgresql.conf").read_text()
    line = "archive_command = '/usr/local/sbin/payorch-archive-wal /var/backups/payorch/wal %p %f'"
    if text.count(line) != 1:
        raise CheckFailed(f"ops/backup/postgresql.conf should hold `{line}` once (the check swaps its paths)")
    return text.replace(line, f"archive_command = '{scripts / 'archive-wal.sh'} {archive} %p %f'")


class Provider:
    """`payorch sandbox` on its own, as a real provider is: it is not restored, and it
    remembers what it was asked before the restore. Its webhooks go to payorch's port, the
    same for every `serve` of the check."""

    def __init__(self, work):
        self.port, self.payorch_port = free_port(), free_port()
        self.master_key = work / "master_key"
        self.master_key.write_text("k1:" + base64.b64encode(os.urandom(32)).decode() + "\n")
        self.master_key.chmod(0o600)
        self.process = Serve("the sandbox provider", [
            "sandbox", "--bind", f"127.0.0.1:{self.port}", "--slow-ms", str(SLOW_MS),
            "--webhook-url", f"http://127.0.0.1:{self.payorch_port}/v1/webhooks/stripe",
        ], {}, work / "sandbox.log")

    def start(self):
        self.process.start()
        deadline = time.monotonic() + 60
        while "listening" not in self.process.log.read_text(errors="replace"):
            if time.monotonic() > deadline or self.process.process.poll() is not None:
                raise CheckFailed("the sandbox provider did not start", [self.process.log])
            time.sleep(0.2)
        return self


def serve(work, cluster, name, provider):
    process = Serve(name, ["serve", "--demo"], {
        "DATABASE_URL": cluster.url(user="payorch_app"),
        "PAYORCH_MIGRATION_DATABASE_URL": cluster.url(),
        "PAYORCH_DATA_DIR": str(work / "data"),
        "PAYORCH_BIND": f"127.0.0.1:{provider.payorch_port}",
        "PAYORCH_PROVIDER_URL": f"http://127.0.0.1:{provider.port}",
        "PAYORCH_PROVIDER_SECRET": "sk_test_sandbox",
        "PAYORCH_WEBHOOK_SECRET": "whsec_sandbox",
        "PAYORCH_MASTER_KEY_FILE": str(provider.master_key),
        # A provider call may take 5 s, a request holds its key 6 s: an attempt left open by
        # the restore is due for the reconciler soon after, not 30 s after it was made.
        "PAYORCH_PROVIDER_TIMEOUT_MS": "5000",
        "PAYORCH_IDEMPOTENCY_LEASE_SECS": "6",
    }, work / f"{name}.log").start()
    base = f"http://127.0.0.1:{provider.payorch_port}"
    process.wait_ready(base, within=180)
    return process, base


def pay(base, api_key, count, log, keys=None):
    """Pays `count` checkouts; their order ids (and their Idempotency-Keys into `keys`)."""
    orders = []
    for _ in range(count):
        key = f"backup-check-{uuid.uuid4()}"
        status, body = checkout(base, api_key, key=key)
        if not paid(status, body):
            raise CheckFailed(f"a checkout answered {status}: {body}", [log])
        orders.append(body["order"]["id"])
        if keys is not None:
            keys[body["order"]["id"]] = key
    return orders


def order_status(base, api_key, order):
    status, body, _ = http("GET", f"{base}/v1/orders/{order}", headers={"Authorization": f"Bearer {api_key}"})
    return status, body.get("status") if isinstance(body, dict) else body


def wait_archived(cluster, within=60):
    """Until the segment holding everything written so far is in the archive."""
    segment = cluster.sql("SELECT pg_walfile_name(pg_switch_wal())")
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        last = cluster.sql("SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")
        failed = int(cluster.sql("SELECT failed_count FROM pg_stat_archiver"))
        if last[:24] >= segment:
            return segment
        if failed > 0:
            raise CheckFailed(f"archive-wal.sh failed {failed} times (PostgreSQL's log says why)", [cluster.log])
        time.sleep(0.5)
    raise CheckFailed(f"segment {segment} not archived within {within} s", [cluster.log])


def prune(scripts, cluster, backups, archive, old_backup):
    """A new base backup of the restored database, then prune.sh keeping one: the old backup
    and every WAL segment before the new one's start go, the rest stays."""
    output = run(as_cluster_user(["sh", scripts / "base-backup.sh", backups]), "base-backup.sh (again)",
                 env=cluster.env(), logs=[cluster.log])
    new_backup = Path(output.strip().splitlines()[-1])
    print(run(as_cluster_user(["sh", scripts / "prune.sh", backups, archive, "1"]), "prune.sh",
              env=cluster.env()).rstrip())
    left = sorted(path.name for path in backups.iterdir())
    if left != [new_backup.name]:
        raise CheckFailed(f"after prune.sh keeping 1, the backups are {left}, not [{new_backup.name}]")
    label = (new_backup / "backup_label").read_text()
    first = label.split("(file ", 1)[1].split(")", 1)[0]
    # WAL segments (whole, or a timeline's last .partial); pg_archivecleanup leaves the small
    # .history and .backup files, as it should.
    segments = [path.name for path in archive.iterdir()
                if len(path.name.removesuffix(".partial")) == 24 and path.name[:24].isalnum()]
    older = [name for name in segments if name[8:24] < first[8:]]
    if older:
        raise CheckFailed(f"prune.sh left WAL older than the kept backup's start {first}: {sorted(older)}")
    if old_backup.exists():
        raise CheckFailed(f"prune.sh left the old base backup {old_backup}")
    print(f"{NAME}: prune.sh kept the new base backup and {len(segments)} archived files from {first} on")


def row_id(api_id):
    """The table's uuid of an API id: `ord_` and the uuid's 32 hex digits."""
    return str(uuid.UUID(hex=api_id.split("_", 1)[1]))


def wait_paid(base, api_key, order, log, within=60):
    """Seconds until the reconciler has found the order's payment at the provider."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        if order_status(base, api_key, order) == (200, "paid"):
            return time.monotonic() - started
        time.sleep(0.5)
    raise CheckFailed(f"{order}, open in the restored database, not paid within {within} s: "
                      f"the reconciler did not settle it from the provider", [log])


def check(work):
    scripts = install_scripts(work)
    archive, backups = work / "wal-archive", work / "backups"
    for folder in (archive, backups):
        folder.mkdir()
        give_to_cluster_user(folder)
    port = free_port()
    cluster = Cluster(work / "pg", port, work / "postgres.log")
    cluster.init(archive_settings(scripts, archive))
    cluster.start()
    clusters = [cluster]
    payorch = None
    provider = Provider(work)
    try:
        provider.start()
        cluster.sql("CREATE ROLE payorch_runtime NOLOGIN", "postgres")
        cluster.sql("CREATE ROLE payorch_app LOGIN IN ROLE payorch_runtime", "postgres")
        cluster.sql("CREATE DATABASE payorch", "postgres")
        payorch, base = serve(work, cluster, "serve-before", provider)
        api_key = credentials(work / "data")["api_key"]

        started = time.monotonic()
        output = run(as_cluster_user(["sh", scripts / "base-backup.sh", backups]), "base-backup.sh",
                     env=cluster.env(), logs=[cluster.log])
        backup = Path(output.strip().splitlines()[-1])
        print(f"{NAME}: base backup {backup.name} made and verified in {time.monotonic() - started:.1f} s")

        before = pay(base, api_key, EACH_SIDE, payorch.log)
        # One checkout is at the provider at the noted time: its attempt is in the database,
        # its outcome comes after.
        in_flight = {}
        thread = threading.Thread(target=lambda: in_flight.update(
            answer=checkout(base, api_key, method="pm_sandbox_slow")))
        thread.start()
        time.sleep(1.0)
        target = cluster.sql("SELECT clock_timestamp()")
        thread.join(timeout=60)
        status, body = in_flight.get("answer", (None, None))
        if not paid(status, body):
            raise CheckFailed(f"the slow checkout answered {status}: {body}", [payorch.log])
        straddling = body["order"]["id"]
        time.sleep(0.5)
        keys_after = {}
        after = pay(base, api_key, EACH_SIDE, payorch.log, keys_after)
        segment = wait_archived(cluster)
        print(f"{NAME}: {EACH_SIDE} checkouts paid before {target}, one at the provider then and paid after it "
              f"({straddling}), {EACH_SIDE} after; WAL archived up to {segment}")

        payorch.stop(signal.SIGTERM)
        cluster.stop()
        print(f"{NAME}: payorch stopped (exit 0); the cluster stopped for good, as if lost")

        # A lost server: everything the archive holds. Then a mistake to undo: up to the time.
        for name, upto, kept_after in (("latest", "latest", True), ("pitr", target, False)):
            started = time.monotonic()
            restored = Cluster(work / f"pg-{name}", port, work / f"postgres-{name}.log")
            restored.folder.mkdir(mode=0o700)  # the new, empty data folder, the cluster user's
            give_to_cluster_user(restored.folder)
            clusters.append(restored)
            print(run(as_cluster_user(["sh", scripts / "restore-pitr.sh", backup, archive, restored.folder, upto]),
                      "restore-pitr.sh").rstrip())
            restored.start()
            print(run(as_cluster_user(["sh", scripts / "wait-recovered.sh", "120"]), "wait-recovered.sh",
                      env=restored.env(), logs=[restored.log]).rstrip())
            print(f"{NAME}: restored ({upto}) and open for writes in {time.monotonic() - started:.1f} s")

            attempt = restored.sql(f"SELECT status FROM payment_attempts WHERE order_id = '{row_id(straddling)}'")
            if attempt not in (("succeeded",) if kept_after else ("created", "pending")):
                raise CheckFailed(f"restored to {upto}, the checkout at the provider at {target} has an attempt "
                                  f"{attempt!r}, not {'succeeded' if kept_after else 'open'}", [restored.log])
            payorch, base = serve(work, restored, f"serve-{name}", provider)
            found = {order: order_status(base, api_key, order) for order in before + after}
            missing = [order for order in before + (after if kept_after else []) if found[order] != (200, "paid")]
            kept = [] if kept_after else [order for order in after if found[order][0] != 404]
            if missing or kept:
                raise CheckFailed(f"after the restore to {upto}: orders that should be paid and are not: "
                                  f"{missing}; orders paid after the time still there: {kept}; answers: {found}",
                                  [payorch.log, restored.log])
            if kept_after:
                print(f"{NAME}: restored to the archive's end, all {2 * EACH_SIDE + 1} orders are there and paid")
            else:
                print(f"{NAME}: restored to {target}, the {EACH_SIDE} orders paid before it are there and paid, "
                      f"the {EACH_SIDE} after are not (404)")
            if kept_after:
                if order_status(base, api_key, straddling) != (200, "paid"):
                    raise CheckFailed(f"restored to the end, {straddling} is not paid", [payorch.log])
            else:
                waited = wait_paid(base, api_key, straddling, payorch.log)
                source = restored.sql(
                    "SELECT t.source FROM attempt_transitions t JOIN payment_attempts a ON a.id = t.attempt_id "
                    f"WHERE a.order_id = '{row_id(straddling)}' AND t.to_status = 'succeeded'")
                if source != "reconciler":
                    raise CheckFailed(f"{straddling} was settled by {source!r}, not by the reconciler", [payorch.log])
                print(f"{NAME}: the checkout at the provider at {target} was {attempt} in the restored database; "
                      f"the reconciler asked the provider, and it was paid {waited:.1f} s after payorch was ready")
            if not kept_after:
                # What backup.md warns of: a key first used after the target is forgotten, so
                # its retry is a new payment, a second charge at the provider.
                first = after[0]
                status, body = checkout(base, api_key, key=keys_after[first])
                if not paid(status, body) or body["order"]["id"] == first:
                    raise CheckFailed(f"the retry of {first}'s key after the restore answered {status}: {body}; "
                                      "backup.md says it is a new payment: correct the page if payorch now knows",
                                      [payorch.log])
                print(f"{NAME}: a retry of {first}'s Idempotency-Key is a new payment, "
                      f"{body['order']['id']}: a second charge, as backup.md warns")
            pay(base, api_key, 1, payorch.log)
            print(f"{NAME}: payorch is ready on the restored database and pays a new checkout")
            payorch.stop(signal.SIGTERM)
            if not kept_after:
                prune(scripts, restored, backups, archive, backup)
            restored.stop()
    finally:
        if payorch is not None:
            payorch.kill()
        provider.process.kill()
        for each in clusters:
            try:
                each.stop()
            except CheckFailed:
                pass


def main():
    run_check(NAME, check, "payorch-backup-check-")


if __name__ == "__main__":
    main()
