-- History partitioned by time, step 1 of 3 (docs/DESIGN.md, "History partitioned by time").
--
-- Six tables that only grow become monthly partitions (migration 2026-11-28-000032): the
-- merchant events and their deliveries, the providers' webhooks, the attempts' and refunds'
-- timelines. No row is copied: each table as it is becomes its partitioned parent's "legacy"
-- partition, covering everything before a bound. ATTACH PARTITION scans the table to prove
-- its rows fit that bound, under a lock that stops every write, unless a VALIDATEd CHECK of
-- the table already proves it. So this step names the bound and adds the CHECKs NOT VALID (a
-- moment's lock each, no scan); the next (000031-1) validates them, scanning under SHARE
-- UPDATE EXCLUSIVE, which lets every write through; the one after attaches without a scan.
--
-- The bound is the first instant of the month after next (UTC), fixed when this runs and
-- kept in `history_tables`: the legacy partition takes the writes until then, and the
-- monthly partitions start there. It leaves a month or more for 000032 to run (it normally
-- runs in the same `migrate`): past the bound, the CHECKs refuse new rows.
SET LOCAL lock_timeout = '5s';

-- The uuid v7 of an instant's first millisecond, the rest zero: every uuid v7 made at or
-- after that instant compares greater (uuids compare bytewise, and a v7's first 48 bits are
-- its milliseconds), every one made before compares less. Month bounds of tables keyed by
-- event id.
CREATE FUNCTION history_uuid_at(at timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
    SELECT (lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0')
            || '00000000000000000000')::uuid
$$;

-- The partitioned history: each table, what it is partitioned by, and where its legacy
-- partition ends. Read by the partition keeper (`db::partitions`).
CREATE TABLE history_tables (
    name         text        PRIMARY KEY,
    -- 'event_id': RANGE over a uuid v7 (bounds from history_uuid_at); 'time': over a
    -- timestamptz. Written by this migration only.
    key_kind     text        NOT NULL,
    legacy_until timestamptz NOT NULL
);
-- The keeper's functions run as the owner and trust what this table says (which tables,
-- their bounds): the runtime role may read it, as every table (000016's default
-- privileges), but not change it.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON history_tables FROM payorch_runtime;

INSERT INTO history_tables (name, key_kind, legacy_until)
SELECT t.name, t.kind,
       (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '2 months') AT TIME ZONE 'UTC'
FROM (VALUES ('merchant_events', 'event_id'), ('event_deliveries', 'event_id'),
             ('delivery_attempts', 'event_id'), ('provider_webhooks', 'time'),
             ('attempt_transitions', 'time'), ('refund_transitions', 'time')) AS t (name, kind);

-- The CHECKs, in the very words of the partition bounds 000032 gives (FROM MINVALUE TO the
-- bound), so that ATTACH finds them proven.
DO $$
DECLARE
    until timestamptz := (SELECT legacy_until FROM history_tables WHERE name = 'merchant_events');
    id_until uuid := history_uuid_at(until);
BEGIN
    EXECUTE format('ALTER TABLE merchant_events ADD CONSTRAINT merchant_events_legacy_bound
        CHECK (id < %L::uuid) NOT VALID', id_until);
    EXECUTE format('ALTER TABLE event_deliveries ADD CONSTRAINT event_deliveries_legacy_bound
        CHECK (event_id < %L::uuid) NOT VALID', id_until);
    EXECUTE format('ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_legacy_bound
        CHECK (event_id < %L::uuid) NOT VALID', id_until);
    -- A webhook's partition is its provider's own time of the event (Stripe's `created`,
    -- Adyen's `eventDate`), the same on every redelivery: every writer sets it, but the
    -- column was nullable, so the CHECK proves it is set too (000031-1 fills the old gaps).
    EXECUTE format('ALTER TABLE provider_webhooks ADD CONSTRAINT provider_webhooks_legacy_bound
        CHECK (provider_created_at IS NOT NULL AND provider_created_at < %L::timestamptz)
        NOT VALID', until);
    EXECUTE format('ALTER TABLE attempt_transitions ADD CONSTRAINT attempt_transitions_legacy_bound
        CHECK (created_at < %L::timestamptz) NOT VALID', until);
    EXECUTE format('ALTER TABLE refund_transitions ADD CONSTRAINT refund_transitions_legacy_bound
        CHECK (created_at < %L::timestamptz) NOT VALID', until);
END
$$;
