#!/usr/bin/env python3
"""Measures retention two ways on the same rows: today's reaper, which deletes the events past
their retention 500 at a time (src/events/reaper.rs), against dropping a month's partition as
the partition keeper does (`history_drop_expired`, migration 2026-11-28-000033_history_keeper).
docs/SCALING.md, "Retention: dropping a month against deleting its rows", holds the method and
the figures.

For each size N, on a throw-away PostgreSQL cluster (as `postgres` under root) with the
settings of docs/SCALING.md, "PostgreSQL settings" (`max_wal_size` lowered to fit the disk):

1. `merchant_events` and `event_deliveries` with the columns and indexes of src/db/schema.sql
   (one delivery per event), N events (four an order) spread evenly over the three calendar
   months before this one, each with a payment snapshot of about `--snapshot-bytes` of JSON,
   and the orders' payment attempts, finished. The rows are a function of their number alone,
   so both variants hold the same rows. They are written under `wal_level = minimal` in the
   transaction that creates the tables (no WAL: a quicker fill), vacuumed and analyzed; the
   cluster then restarts with `wal_level = replica`, as a server with a standby runs, and
   checkpoints.
2. A stream of single-event inserts (`pgbench`, one connection, `--insert-rate` a second, the
   event and its delivery as `events_emit` writes them) runs throughout: its latency alone
   first (the baseline), then while the oldest month goes.
3. Plain tables, as before the partitions: the reaper's statement, batches of 500 in
   `created_at` order, each its own transaction, the deliveries going by `ON DELETE CASCADE`,
   until the month is gone. Timed; the WAL written (`pg_current_wal_lsn` before and after, less
   the insert stream's share at its baseline rate); both tables' size with indexes and TOAST
   before, after, and after a `VACUUM` (the files do not shrink: the space is reused by later
   rows, not returned).
4. The tables partitioned as migration 000032 makes them: RANGE over the event's id (a uuid
   v7, its month in its first 48 bits), the deliveries over their event's id with the same
   bounds and a foreign key from each month of deliveries to that month of events; the unique
   (merchant_id, resource_id, type) a trigger's lookup. The same oldest month goes as the
   keeper drops it: its check that every payment of the month is final (a read over the
   month, measured on its own), then, under `lock_timeout`, an ACCESS EXCLUSIVE lock on both
   parents in the writers' order and `DROP TABLE` of the month's deliveries and events. The
   next month goes by `DETACH PARTITION … CONCURRENTLY` and `DROP TABLE`, the way that takes no
   lock on the parents, for comparison. The same measures.

Prints one Markdown table. Before each size it checks the disk: what the size will take,
estimated from the smaller sizes measured first, must leave `--keep-free-gb` free; while it
runs, the cluster is stopped at once if the free space falls under that.

Usage: scripts/retention_bench.py [--rows 1000000 10000000] [--snapshot-bytes 2048] [--lean]
       [--insert-rate 200] [--baseline-secs 20] [--keep-free-gb 15] [--smoke]
`--smoke` (CI): 20,000 rows, a short baseline; checks that every step still runs and that the
rows gone are the month's, not the figures.
"""

import argparse
import datetime
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from payorch_serve import CheckFailed, Cluster, as_cluster_user, give_to_cluster_user, report_and_exit
from tls_proxy_check import free_port

NAME = "retention_bench"
BATCH = 500  # src/events/reaper.rs, EventReaperSettings::default
MERCHANTS = 50
# docs/SCALING.md, "PostgreSQL settings", but for max_wal_size: WAL up to it stays on disk,
# and the disk must hold the largest size's tables beside it.
SETTINGS = """
shared_buffers = 2GB
effective_cache_size = 12GB
maintenance_work_mem = 512MB
wal_buffers = 64MB
max_wal_size = 1GB
min_wal_size = 1GB
checkpoint_timeout = 15min
checkpoint_completion_target = 0.9
random_page_cost = 1.1
autovacuum_vacuum_scale_factor = 0.02
autovacuum_analyze_scale_factor = 0.02
autovacuum_vacuum_insert_scale_factor = 0.05
wal_level = minimal
max_wal_senders = 0
"""

# src/db/schema.sql's domains and uuid_v7(), as they are.
COMMON = """
CREATE DOMAIN event_type AS text
    CONSTRAINT event_type_known CHECK (VALUE = ANY (ARRAY['payment.pending', 'payment.requires_action',
      'payment.authorized', 'payment.succeeded', 'payment.failed', 'payment.canceled', 'refund.succeeded',
      'refund.failed', 'order.paid', 'order.canceled', 'order.refunded']));
CREATE DOMAIN delivery_state AS text
    CONSTRAINT delivery_state_known CHECK (VALUE = ANY (ARRAY['pending', 'succeeded', 'failed', 'canceled']));
CREATE FUNCTION uuid_v7() RETURNS uuid LANGUAGE sql AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
        placing substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
-- Migration 2026-11-28-000031_history_bounds: a month's first uuid v7, for the bounds.
CREATE FUNCTION history_uuid_at(at timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
    SELECT (lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0')
            || '00000000000000000000')::uuid
$$;
CREATE TABLE merchants (id uuid PRIMARY KEY);
CREATE TABLE webhook_endpoints (merchant_id uuid NOT NULL REFERENCES merchants(id), id uuid NOT NULL,
    PRIMARY KEY (merchant_id, id));
INSERT INTO merchants SELECT md5('merchant' || m)::uuid FROM generate_series(1, %(merchants)d) m;
INSERT INTO webhook_endpoints SELECT id, md5('endpoint' || id)::uuid FROM merchants;
-- What the keeper's check reads of src/db/schema.sql's payment_attempts, refunds and
-- hold_operations, with the indexes on those columns; one attempt an order, finished two
-- seconds after its first event. No refunds nor hold operations: their lookups are by index.
CREATE TABLE payment_attempts (merchant_id uuid NOT NULL, id uuid NOT NULL, order_id uuid NOT NULL,
    status text NOT NULL, finished_at timestamptz, created_at timestamptz NOT NULL,
    PRIMARY KEY (merchant_id, id));
CREATE TABLE refunds (merchant_id uuid NOT NULL, id uuid NOT NULL, payment_id uuid NOT NULL,
    finished_at timestamptz, created_at timestamptz NOT NULL, PRIMARY KEY (merchant_id, id));
CREATE INDEX refunds_payment ON refunds (merchant_id, payment_id, created_at);
CREATE TABLE hold_operations (merchant_id uuid NOT NULL, id uuid NOT NULL, payment_id uuid NOT NULL,
    finished_at timestamptz, created_at timestamptz NOT NULL);
CREATE INDEX hold_operations_payment ON hold_operations (merchant_id, payment_id, created_at);
INSERT INTO payment_attempts
SELECT md5('merchant' || (1 + k %% %(merchants)d))::uuid, md5('attempt' || k)::uuid, md5('order' || k)::uuid,
       'succeeded', at + interval '2 seconds', at
FROM generate_series(0, (%(rows)d - 1) / 4) k,
     LATERAL (SELECT timestamptz '%(start)s' + (timestamptz '%(end)s' - timestamptz '%(start)s') * (4 * k) / %(rows)d
              AS at) t;
CREATE INDEX payment_attempts_order ON payment_attempts (order_id, created_at DESC);
CREATE UNIQUE INDEX payment_attempts_one_succeeded ON payment_attempts (merchant_id, order_id)
    WHERE status = 'succeeded';
"""

# The columns of src/db/schema.sql's merchant_events and event_deliveries; {partition} is
# empty on the plain tables, migration 000032's RANGE on the partitioned ones. The foreign
# keys come after the rows (one check of them all, not one a row).
TABLES = """
CREATE TABLE merchant_events (
    id uuid DEFAULT uuid_v7() NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    merchant_id uuid NOT NULL,
    type event_type NOT NULL,
    resource_id uuid NOT NULL,
    order_id uuid NOT NULL,
    snapshot jsonb NOT NULL,
    request jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    PRIMARY KEY (id)
){events_partition};
CREATE TABLE event_deliveries (
    event_id uuid NOT NULL,
    endpoint_id uuid NOT NULL,
    merchant_id uuid NOT NULL,
    state delivery_state DEFAULT 'pending' NOT NULL,
    attempts integer DEFAULT 0 NOT NULL CHECK (attempts >= 0),
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    PRIMARY KEY (event_id, endpoint_id)
){deliveries_partition};
"""

# src/db/schema.sql's indexes. On the partitioned tables (migration 000032) the two unique
# ones cannot be (a unique index must hold the partition key): plain indexes, and the
# trigger below for "once".
INDEXES = """
CREATE INDEX merchant_events_age ON merchant_events (created_at);
CREATE INDEX merchant_events_of_merchant ON merchant_events (merchant_id, seq);
CREATE INDEX merchant_events_of_order ON merchant_events (merchant_id, order_id);
CREATE {unique}INDEX merchant_events_once ON merchant_events (merchant_id, resource_id, type);
CREATE {unique}INDEX merchant_events_seq ON merchant_events (seq);
CREATE INDEX event_deliveries_due ON event_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX event_deliveries_of_endpoint ON event_deliveries (merchant_id, endpoint_id) WHERE state = 'pending';
ALTER TABLE merchant_events ADD FOREIGN KEY (merchant_id) REFERENCES merchants(id);
ALTER TABLE event_deliveries ADD FOREIGN KEY (merchant_id, endpoint_id) REFERENCES webhook_endpoints(merchant_id, id);
"""
PLAIN_KEY = """
ALTER TABLE event_deliveries ADD FOREIGN KEY (event_id) REFERENCES merchant_events(id) ON DELETE CASCADE;
"""
# The keeper's months (history_create_ahead): each month of deliveries references that month
# of events.
MONTH = """
CREATE TABLE merchant_events_{suffix} PARTITION OF merchant_events
    FOR VALUES FROM (history_uuid_at('{start}')) TO (history_uuid_at('{end}'));
CREATE TABLE event_deliveries_{suffix} PARTITION OF event_deliveries
    FOR VALUES FROM (history_uuid_at('{start}')) TO (history_uuid_at('{end}'));
"""
MONTH_KEY = """
ALTER TABLE event_deliveries_{suffix} ADD CONSTRAINT event_deliveries_{suffix}_event_fkey
    FOREIGN KEY (event_id) REFERENCES merchant_events_{suffix} (id) ON DELETE CASCADE;
"""
# Migration 000032's merchant_events_once, as it is.
ONCE = """
CREATE FUNCTION merchant_events_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1869508453,
        hashtext(NEW.merchant_id::text || '/' || NEW.resource_id::text || '/' || NEW.type));
    IF EXISTS (SELECT 1 FROM merchant_events e WHERE e.merchant_id = NEW.merchant_id
               AND e.resource_id = NEW.resource_id AND e.type = NEW.type) THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "merchant_events_once"'
            USING ERRCODE = 'unique_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER merchant_events_once BEFORE INSERT ON merchant_events
    FOR EACH ROW EXECUTE FUNCTION merchant_events_once();
"""

# A payment snapshot as an event keeps it (src/payments/snapshot.rs's order, attempts and
# refunds), its identifiers per row; `pad` grows the order's metadata to the size asked.
SNAPSHOT = """jsonb_build_object(
  'object', 'payment', 'id', resource_id, 'status', 'succeeded', 'amount', 4200 + (i % 9000),
  'currency', 'EUR', 'captured_amount', 4200 + (i % 9000), 'refunded_amount', 0,
  'created_at', created_at, 'updated_at', created_at + interval '2 seconds',
  'order', jsonb_build_object('id', order_id, 'status', 'paid', 'amount', 4200 + (i % 9000),
     'currency', 'EUR', 'description', 'Order ' || i || ' of the demo shop',
     'customer', jsonb_build_object('email', 'customer' || (i % 100000) || '@example.com',
        'name', 'Customer ' || (i % 100000), 'country', 'DE'),
     'lines', jsonb_build_array(
        jsonb_build_object('sku', 'SKU-' || (i % 977), 'name', 'Item ' || (i % 977), 'quantity', 1 + i % 3,
                           'unit_amount', 1400, 'tax_rate', '19.00'),
        jsonb_build_object('sku', 'SKU-' || (i % 113), 'name', 'Shipping', 'quantity', 1, 'unit_amount', 490,
                           'tax_rate', '19.00')),
     'metadata', jsonb_build_object('cart', md5(i::text), 'campaign', 'autumn', 'pad', pad)),
  'attempts', jsonb_build_array(jsonb_build_object(
     'id', md5('attempt' || i)::uuid, 'provider', 'stripe', 'status', 'succeeded', 'amount', 4200 + (i % 9000),
     'provider_reference', 'pi_' || md5('pi' || i), 'method', jsonb_build_object('type', 'card',
        'brand', 'visa', 'last4', lpad((i % 10000)::text, 4, '0'), 'exp_month', 1 + i % 12, 'exp_year', 2030),
     'three_d_secure', jsonb_build_object('required', false, 'outcome', null),
     'decline', null, 'created_at', created_at, 'updated_at', created_at + interval '2 seconds')),
  'refunds', '[]'::jsonb, 'disputes', '[]'::jsonb)"""

# Below about 1,300 bytes the payment keeps only its own fields, below 220 only its id and
# status (--lean): a 10 M-row run at the full size needs more disk than a shared machine
# has (docs/SCALING.md says which runs used which).
TINY_SNAPSHOT = """jsonb_build_object('object', 'payment', 'id', resource_id, 'status', 'succeeded')"""
SMALL_SNAPSHOT = """jsonb_build_object(
  'object', 'payment', 'id', resource_id, 'status', 'succeeded', 'amount', 4200 + (i % 9000),
  'currency', 'EUR', 'order_id', order_id, 'created_at', created_at, 'pad', pad)"""
FULL_BYTES, SMALL_BYTES = 1280, 220  # each without its pad, as JSON text

# The request an event keeps (the API call that made it); NULL under --lean, as for an event a
# provider's webhook made.
REQUEST = """jsonb_build_object('method', 'POST', 'path', '/v1/orders/' || md5('order' || (i / 4))::uuid || '/pay',
                       'key', md5('key' || i))"""

FILL = """
INSERT INTO merchant_events (id, merchant_id, type, resource_id, order_id, snapshot, request, created_at)
SELECT id, merchant_id, type, resource_id, order_id, {snapshot}, request, created_at
FROM (
  SELECT i, created_at,
    encode(set_bit(set_bit(overlay(decode(md5('event' || i), 'hex')
        placing substring(int8send((extract(epoch FROM created_at) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid AS id,
    md5('merchant' || (1 + (i / 4) % {merchants}))::uuid AS merchant_id,
    (ARRAY['payment.pending', 'payment.authorized', 'payment.succeeded', 'order.paid'])[1 + i % 4] AS type,
    md5('resource' || (i / 4))::uuid AS resource_id,
    md5('order' || (i / 4))::uuid AS order_id,
    {request} AS request,
    rpad('', {pad}, md5(i::text)) AS pad
  FROM generate_series(0, {rows} - 1) i,
       LATERAL (SELECT timestamptz '{start}' + (timestamptz '{end}' - timestamptz '{start}') * i / {rows}
                AS created_at) t
) g;
INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id, state, attempts, next_attempt_at, created_at,
                              updated_at)
SELECT e.id, w.id, e.merchant_id, 'succeeded', 1, e.created_at, e.created_at, e.created_at + interval '1 second'
FROM merchant_events e JOIN webhook_endpoints w ON w.merchant_id = e.merchant_id;
"""

# events_emit of src/db/schema.sql: an event and its delivery, one transaction.
EMIT = """
CREATE FUNCTION bench_emit(pad text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE made uuid; at timestamptz; merchant uuid := md5('merchant' || (1 + (random() * 49)::int))::uuid;
BEGIN
  INSERT INTO merchant_events (merchant_id, type, resource_id, order_id, snapshot)
  SELECT merchant, 'payment.succeeded', gen_random_uuid(), gen_random_uuid(), snapshot
  FROM bench_snapshot RETURNING id, created_at INTO made, at;
  INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id, created_at)
  SELECT made, w.id, w.merchant_id, at FROM webhook_endpoints w WHERE w.merchant_id = merchant;
END $$;
"""

# The reaper's statement (src/events/reaper.rs, tests/sql/reap_merchant_events.sql), its
# retention a fixed instant; each batch commits before the next, as each is its own
# transaction there.
REAP = """
DO $$
DECLARE gone bigint;
BEGIN
  LOOP
    DELETE FROM merchant_events e USING (
        SELECT id FROM merchant_events
        WHERE created_at < timestamptz '{cutoff}'
        ORDER BY created_at LIMIT {batch} FOR UPDATE SKIP LOCKED) old
    WHERE e.id = old.id;
    GET DIAGNOSTICS gone = ROW_COUNT;
    COMMIT;
    EXIT WHEN gone < {batch};
  END LOOP;
END $$;
"""

# The keeper's check (history_drop_expired, migration 000033) that every payment of the
# month's events has been final since before `cutoff`, as it is: it reads the whole month.
KEEPER_CHECK = """
SELECT EXISTS (
    SELECT 1 FROM merchant_events_{suffix} e JOIN payment_attempts a
        ON a.merchant_id = e.merchant_id AND a.order_id = e.order_id
    WHERE a.finished_at IS NULL OR a.finished_at >= '{cutoff}'
       OR EXISTS (SELECT 1 FROM refunds r WHERE r.merchant_id = a.merchant_id
                  AND r.payment_id = a.id
                  AND (r.finished_at IS NULL OR r.finished_at >= '{cutoff}'))
       OR EXISTS (SELECT 1 FROM hold_operations o WHERE o.merchant_id = a.merchant_id
                  AND o.payment_id = a.id
                  AND (o.finished_at IS NULL OR o.finished_at >= '{cutoff}')));
"""
# The keeper's drop, as it is: both parents locked in the order their writers take them (a
# bare DROP TABLE of the deliveries' month locks its events' month after itself, the reverse
# of an insert's order: it deadlocked with the insert stream here, the insert the victim), the
# deliveries' month first, whose foreign key names the events' month.
KEEPER_DROP = """
BEGIN;
SET LOCAL lock_timeout = '2s';
SELECT pg_advisory_xact_lock(1751741300, 0);
LOCK TABLE merchant_events, event_deliveries IN ACCESS EXCLUSIVE MODE;
DROP TABLE event_deliveries_{suffix};
DROP TABLE merchant_events_{suffix};
COMMIT;
"""
# The way that takes no lock on the parents: each month detached without blocking writers
# (two transactions each, waiting out those that may see it), then dropped.
DETACH_DROP = """
ALTER TABLE event_deliveries DETACH PARTITION event_deliveries_{suffix} CONCURRENTLY;
DROP TABLE event_deliveries_{suffix};
ALTER TABLE merchant_events DETACH PARTITION merchant_events_{suffix} CONCURRENTLY;
DROP TABLE merchant_events_{suffix};
"""

SIZE = """SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
WHERE c.relkind IN ('r', 'p') AND c.relnamespace = 'public'::regnamespace
  AND (c.relname LIKE 'merchant_events%' OR c.relname LIKE 'event_deliveries%')"""


STARTED = time.monotonic()


def say(what):
    """Progress on stderr: a 10 M run takes most of an hour."""
    print(f"{NAME}: {time.monotonic() - STARTED:6.0f} s  {what}", file=sys.stderr, flush=True)


def months_before(first, count):
    """The first day of each of the `count` months before `first`, oldest first, and `first`."""
    days = []
    year, month = first.year, first.month
    for _ in range(count):
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
        days.append(datetime.date(year, month, 1))
    return list(reversed(days)) + [first]


def next_month(day):
    return datetime.date(day.year + (day.month == 12), day.month % 12 + 1, 1)


class Bench:
    def __init__(self, work, rows, args):
        self.work, self.rows, self.args = work, rows, args
        self.cluster = Cluster(work / f"pg-{rows}", free_port(), work / f"postgres-{rows}.log")
        this_month = datetime.date.today().replace(day=1)
        self.months = months_before(this_month, 3)  # three months of history, then this month
        self.cutoff = self.months[1]  # the oldest month goes
        self.pgbench = self.cluster.bin / "pgbench"

    def psql(self, sql, timeout=None):
        result = subprocess.run(
            [str(self.cluster.bin / "psql"), "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.cluster.url()],
            input=sql.encode(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        output = result.stdout.decode(errors="replace")
        if result.returncode != 0:
            raise CheckFailed(f"psql exited {result.returncode}: {output}\n{sql[:2000]}", [self.cluster.log])
        return output.strip()

    def value(self, sql):
        return int(float(self.psql(sql)))

    def start(self):
        # CI's smoke run on a small machine: PostgreSQL's default shared_buffers.
        self.cluster.init(SETTINGS.replace("2GB\nef", "128MB\nef") if self.args.smoke else SETTINGS)
        self.cluster.start()
        self.cluster.sql("CREATE DATABASE payorch", "postgres")
        self.psql("BEGIN;\n" + COMMON % {"merchants": MERCHANTS, "rows": self.rows, "start": self.months[0],
                                         "end": self.months[-1]} + "\nCOMMIT;")

    def restart(self, wal_level):
        senders = 10 if wal_level == "replica" else 0
        self.psql(f"ALTER SYSTEM SET wal_level = {wal_level}; ALTER SYSTEM SET max_wal_senders = {senders};")
        self.cluster.stop()
        self.cluster.start()

    def fill(self, partitioned):
        """The tables, their rows and indexes, in one transaction under wal_level = minimal."""
        full = self.args.snapshot_bytes >= FULL_BYTES
        pad = max(0, self.args.snapshot_bytes - (FULL_BYTES if full else SMALL_BYTES))
        sql = ["BEGIN;"]
        if partitioned:
            sql.append(TABLES.format(events_partition=" PARTITION BY RANGE (id)",
                                     deliveries_partition=" PARTITION BY RANGE (event_id)"))
            for start in self.months + [next_month(self.months[-1])]:
                sql.append(MONTH.format(suffix=f"{start:%Y_%m}", start=start, end=next_month(start)))
        else:
            sql.append(TABLES.format(events_partition="", deliveries_partition=""))
        snapshot = SNAPSHOT if full else SMALL_SNAPSHOT if self.args.snapshot_bytes >= SMALL_BYTES else TINY_SNAPSHOT
        sql.append(FILL.format(snapshot=snapshot, merchants=MERCHANTS, rows=self.rows,
                               pad=pad, request="NULL::jsonb" if self.args.lean else REQUEST,
                               start=self.months[0], end=self.months[-1]))
        sql.append(INDEXES.format(unique="" if partitioned else "UNIQUE "))
        if partitioned:
            for start in self.months + [next_month(self.months[-1])]:
                sql.append(MONTH_KEY.format(suffix=f"{start:%Y_%m}"))
            sql.append(ONCE)
        else:
            sql.append(PLAIN_KEY)
        sql.append("CREATE TABLE bench_snapshot AS SELECT snapshot FROM merchant_events "
                   "ORDER BY created_at DESC LIMIT 1;")
        sql.append(EMIT)
        sql.append("COMMIT; VACUUM (ANALYZE);")
        say(f"{self.rows:,} rows: filling the {'partitioned' if partitioned else 'plain'} tables")
        self.psql("\n".join(sql))

    def drop(self):
        self.psql("DROP TABLE event_deliveries, merchant_events, bench_snapshot; DROP FUNCTION bench_emit(text);")

    def month_rows(self, month):
        return self.value(f"SELECT count(*) FROM merchant_events WHERE created_at >= '{month}' "
                          f"AND created_at < '{next_month(month)}'")

    def wal(self):
        return self.psql("SELECT pg_current_wal_lsn()")

    def wal_since(self, lsn):
        return self.value(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{lsn}')")

    def measure(self, label, statements):
        """Runs `statements` (psql input) under the insert stream; its figures."""
        say(f"{self.rows:,} rows: {label}")
        stream = InsertStream(self)
        stream.start()
        time.sleep(self.args.baseline_secs)
        baseline_lsn, baseline_at = self.wal(), time.monotonic()
        time.sleep(min(5, self.args.baseline_secs))
        stream_wal_per_sec = self.wal_since(baseline_lsn) / (time.monotonic() - baseline_at)
        size_before = self.value(SIZE)
        lsn = self.wal()
        began_epoch, began = time.time(), time.monotonic()
        output = self.psql(statements)
        took = time.monotonic() - began
        ended_epoch = time.time()
        wal = self.wal_since(lsn) - stream_wal_per_sec * took
        time.sleep(self.args.tail_secs)
        stream.stop()
        size_after = self.value(SIZE)
        self.psql("VACUUM")
        size_vacuumed = self.value(SIZE)
        # An operation of milliseconds meets few inserts: those of the two seconds from its
        # start count as "during" it when it is shorter.
        during = stream.latencies(began_epoch, max(ended_epoch, began_epoch + self.args.tail_secs))
        baseline = stream.latencies(0, began_epoch)
        return dict(label=label, output=output, seconds=took, wal=max(0, wal), size_before=size_before,
                    size_after=size_after, size_vacuumed=size_vacuumed, baseline=baseline, during=during)


class InsertStream:
    """pgbench, one connection, `--insert-rate` events a second, in runs of a few seconds (its
    per-transaction log is complete only when a run ends) until stopped."""

    def __init__(self, bench):
        self.bench = bench
        self.folder = Path(tempfile.mkdtemp(prefix="stream-", dir=bench.work))
        (self.folder / "emit.sql").write_text("SELECT bench_emit('');\n")
        self.stopping = threading.Event()
        self.errors = []
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopping.set()
        self.thread.join()
        if self.errors:
            raise CheckFailed("the insert stream failed:\n" + "\n".join(self.errors[:3]), [self.bench.cluster.log])

    def loop(self):
        run = 0
        while not self.stopping.is_set():
            run += 1
            result = subprocess.run(
                [str(self.bench.pgbench), "-n", "-c", "1", "-j", "1", "-R", str(self.bench.args.insert_rate),
                 "-T", str(self.bench.args.chunk_secs), "-f", "emit.sql", "-l", "--failures-detailed",
                 "--log-prefix", f"run{run}", self.bench.cluster.url()],
                cwd=self.folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
            # pgbench counts a deadlock's victim as a failed transaction, logs it and goes on
            # (its exit status then is not 0): the table shows them. Anything else stops it.
            output = result.stdout.decode(errors="replace")
            if result.returncode != 0 and "number of failed transactions" not in output:
                self.errors.append(output)
                return

    def latencies(self, since_epoch, until_epoch):
        """Milliseconds of the inserts that started in [since, until), and how many of them failed:
        pgbench logs when each ended and how long it took (with `-R`, from when it was due), or
        why it failed (a deadlock) and no start, counted by when it ended."""
        found, failed = [], 0
        for log in self.folder.glob("run*"):
            for line in log.read_text().splitlines():
                fields = line.split()
                if not fields[2].isdigit():
                    failed += since_epoch <= int(fields[4]) + int(fields[5]) / 1e6 < until_epoch
                    continue
                took_us, ended = int(fields[2]), int(fields[4]) + int(fields[5]) / 1e6
                started = ended - took_us / 1e6
                if since_epoch <= started < until_epoch:
                    found.append(took_us / 1000)
        return found, failed


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def check_disk(work, need, keep_free_gb):
    free = shutil.disk_usage(work).free
    if free - need < keep_free_gb * 2**30:
        raise CheckFailed(f"the disk has {free / 2**30:.1f} GB free; this size needs about {need / 2**30:.1f} GB "
                          f"and {keep_free_gb} GB must stay free: lower --snapshot-bytes or --rows")


class DiskWatch:
    """Stops the cluster at once (`pg_ctl stop -m immediate`) if the disk's free space falls
    under `keep_free_gb` while a size runs: others share the disk, and the estimate is one."""

    def __init__(self, work, cluster, keep_free_gb):
        self.work, self.cluster, self.keep_free = work, cluster, keep_free_gb * 2**30
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stopping.wait(2):
            if shutil.disk_usage(self.work).free < self.keep_free:
                say("the disk is nearly full: stopping the cluster")
                subprocess.run(as_cluster_user([self.cluster.bin / "pg_ctl", "-D", self.cluster.folder, "-m",
                                                "immediate", "stop"]), check=False)
                return

    def stop(self):
        self.stopping.set()
        self.thread.join()


def run_size(work, rows, args, bytes_per_row, results, notes):
    bench = Bench(work, rows, args)
    # Only one variant's tables exist at a time, plus max_wal_size of WAL and the insert stream.
    check_disk(work, rows * bytes_per_row + 1.5 * 2**30, args.keep_free_gb)
    bench.start()
    watch = DiskWatch(work, bench.cluster, args.keep_free_gb)
    try:
        bench.fill(partitioned=False)
        month = bench.month_rows(bench.months[0])
        text, stored = bench.psql("SELECT round(avg(length(snapshot::text))) || ' ' || round(avg(pg_column_size("
                                  "snapshot))) FROM (SELECT snapshot FROM merchant_events LIMIT 10000) s").split()
        bench.restart("replica")
        bench.psql("CHECKPOINT")
        per_row = bench.value(SIZE) / rows
        notes.append(f"{rows:,} rows: snapshots of {int(text):,} bytes of JSON, {int(stored):,} stored "
                     f"(compressed); {per_row:,.0f} bytes an event with its delivery and every index.")
        deleted = bench.measure("plain: the reaper's batched DELETE", REAP.format(cutoff=bench.cutoff, batch=BATCH))
        deleted.pop("output")
        if bench.month_rows(bench.months[0]) != 0 or bench.value(
                f"SELECT count(*) FROM event_deliveries WHERE created_at < '{bench.cutoff}'") != 0:
            raise CheckFailed("rows of the oldest month are left after the reaper's deletes")
        results.append(dict(deleted, rows=rows, month=month))
        bench.drop()

        bench.restart("minimal")
        bench.fill(partitioned=True)
        if bench.month_rows(bench.months[0]) != month:
            raise CheckFailed("the partitioned tables do not hold the same oldest month")
        bench.restart("replica")
        bench.psql("CHECKPOINT")
        oldest, second = (f"{m:%Y_%m}" for m in bench.months[:2])
        # Every attempt of the oldest month finished two seconds after its order's first event.
        check = KEEPER_CHECK.format(suffix=oldest, cutoff=bench.cutoff + datetime.timedelta(days=1))
        checked = bench.measure("partitioned: the keeper's check that its payments are final (a read)", check)
        if checked.pop("output") != "f":
            raise CheckFailed("the keeper's check found a payment of the oldest month open")
        results.append(dict(checked, rows=rows, month=month, read=True))
        dropped = bench.measure("partitioned: the keeper's drop (ACCESS EXCLUSIVE on both parents)",
                                KEEPER_DROP.format(suffix=oldest))
        results.append(dict(dropped, rows=rows, month=month))
        second_month = bench.month_rows(bench.months[1])
        detached = bench.measure("partitioned: DETACH CONCURRENTLY, then DROP", DETACH_DROP.format(suffix=second))
        results.append(dict(detached, rows=rows, month=second_month))
        if bench.value(f"SELECT count(*) FROM merchant_events WHERE created_at < '{bench.months[2]}'") != 0:
            raise CheckFailed("rows of the dropped months are still there")
        return per_row
    finally:
        watch.stop()
        try:
            bench.cluster.stop()
        except (CheckFailed, subprocess.SubprocessError):
            subprocess.run(as_cluster_user([bench.cluster.bin / "pg_ctl", "-D", bench.cluster.folder, "-m",
                                            "immediate", "-w", "stop"]), check=False)
        shutil.rmtree(bench.cluster.folder, ignore_errors=True)


def table(results, notes, args):
    gib, mib = 2**30, 2**20

    lines = [
        f"Inserts {args.insert_rate}/s on one connection "
        f"throughout; p50/p99/max of the inserts started while it ran (at least its first 2 s).",
        "",
        "| rows | retention | rows gone | took | WAL | tables + indexes before → after → after VACUUM "
        "| inserts p50 / p99 / max, baseline | inserts p50 / p99 / max, during |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        def size(b):
            return f"{b / gib:.2f} GB" if b >= gib else f"{b / mib:.0f} MB" if b >= mib else f"{b / 1024:.0f} kB"

        def lat(measured):
            v, failed = measured
            said = (f"{percentile(v, 50):.1f} / {percentile(v, 99):.1f} / {max(v):.0f} ms (n={len(v)})"
                    if v else "no inserts")
            return said + (f", **{failed} failed**" if failed else "")

        lines.append(
            f"| {r['rows']:,} | {r['label']} | {'none (reads ' if r.get('read') else ''}{r['month']:,}"
            f"{')' if r.get('read') else ''} | {r['seconds']:.2f} s | {size(r['wal'])} | "
            f"{size(r['size_before'])} → {size(r['size_after'])} → {size(r['size_vacuumed'])} | "
            f"{lat(r['baseline'])} | {lat(r['during'])} |")
    return "\n".join(lines + [""] + notes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--snapshot-bytes", type=int, default=2048)
    parser.add_argument("--insert-rate", type=int, default=200)
    parser.add_argument("--baseline-secs", type=float, default=20)
    parser.add_argument("--keep-free-gb", type=float, default=15)
    parser.add_argument("--lean", action="store_true",
                        help="the smallest rows: no request, a snapshot of only the payment's id and status "
                             "(10 M rows on a small disk)")
    parser.add_argument("--smoke", action="store_true", help="20,000 rows, a short baseline (CI)")
    args = parser.parse_args()
    # After each operation the stream runs this long more: "during" is at least this window.
    # It runs in pgbench runs of chunk_secs (a run's log is whole only when it ends).
    args.tail_secs, args.chunk_secs = 2.0, 3
    # A stopped run still stops its cluster and removes its folder (the `finally`s).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if args.lean:
        args.snapshot_bytes = 0
    if args.smoke:
        args.rows, args.baseline_secs, args.keep_free_gb, args.tail_secs, args.chunk_secs = [20_000], 1, 2, 0.5, 1
    work = Path(tempfile.mkdtemp(prefix="payorch-retention-bench-"))
    work.chmod(0o755)
    give_to_cluster_user(work)
    results, notes = [], []
    # Before anything is measured: about 600 bytes of columns and indexes (624 measured with
    # --lean), half the snapshot once compressed, 150 for the request (1,760 measured at 2 KB).
    bytes_per_row = 650 + 0.55 * args.snapshot_bytes + (0 if args.lean else 150)
    try:
        for rows in sorted(args.rows):
            bytes_per_row = 1.05 * run_size(work, rows, args, bytes_per_row, results, notes)
            say(f"{rows:,} rows done: {bytes_per_row / 1.05:,.0f} bytes a row with its delivery and indexes")
    except CheckFailed as error:
        if results:
            print(table(results, notes, args))
        report_and_exit(NAME, error)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(table(results, notes, args))
    say("done")


if __name__ == "__main__":
    main()
