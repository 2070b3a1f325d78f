-- History partitioned by time, step 3 of 3 (docs/DESIGN.md, "History partitioned by time").
--
-- Each of the six tables is renamed `<name>_legacy`, a parent partitioned by RANGE takes its
-- name, and the old table is attached as the parent's partition FROM (MINVALUE) TO the bound
-- 000031 fixed (`history_tables.legacy_until`). No row moves. ATTACH skips its scan because
-- 000031-1 validated a CHECK in the same words as the bound, and adopts the old table's
-- indexes and foreign keys wherever the parent's are the same; where the parent's cannot be
-- (a unique index must hold the partition key), the parent's is made ON ONLY the parent: a
-- model each new month copies, while the legacy partition keeps answering through its own.
-- Everything here takes ACCESS EXCLUSIVE on the six tables, each a moment (renames, catalog
-- rows): the whole step is a few milliseconds whatever the tables hold (docs/SCALING.md,
-- "History partitioned by time", has the figures), behind a lock_timeout so that it gives up
-- rather than queue every write behind a long transaction.
--
-- The API's statements are unchanged: they name the parents, which have the old names.
-- The keeper (`db::partitions`, migration 000033) creates the months ahead and drops them.
SET LOCAL lock_timeout = '5s';

-- ---------------------------------------------------------------- merchant_events
-- RANGE (id): an event's id is a uuid v7 (`uuid_v7()`, the column's default), so its month
-- is in its first 48 bits and the primary key (id) stays global, which lets a delivery name
-- its event by id alone.
ALTER TABLE merchant_events RENAME TO merchant_events_legacy;
ALTER INDEX merchant_events_pkey RENAME TO merchant_events_legacy_pkey;
ALTER INDEX merchant_events_age RENAME TO merchant_events_legacy_age;
ALTER INDEX merchant_events_of_merchant RENAME TO merchant_events_legacy_of_merchant;
ALTER INDEX merchant_events_of_order RENAME TO merchant_events_legacy_of_order;
ALTER INDEX merchant_events_once RENAME TO merchant_events_legacy_once;
ALTER INDEX merchant_events_seq RENAME TO merchant_events_legacy_seq;
ALTER SEQUENCE merchant_events_seq_seq RENAME TO merchant_events_legacy_seq_seq;

CREATE TABLE merchant_events (
    id          uuid        NOT NULL DEFAULT uuid_v7(),
    seq         bigint      GENERATED ALWAYS AS IDENTITY,
    merchant_id uuid        NOT NULL,
    type        event_type  NOT NULL,
    resource_id uuid        NOT NULL,
    order_id    uuid        NOT NULL,
    snapshot    jsonb       NOT NULL,
    request     jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT merchant_events_pkey PRIMARY KEY (id),
    CONSTRAINT merchant_events_merchant_fkey FOREIGN KEY (merchant_id) REFERENCES merchants (id)
) PARTITION BY RANGE (id);

-- ---------------------------------------------------------------- event_deliveries
-- RANGE (event_id), the same bounds: a delivery is in its event's month, so its primary key
-- (event_id, endpoint_id) stays as it was, and each month's deliveries reference that month's
-- events (a foreign key per partition, the keeper's; the legacy partition keeps its own to
-- the legacy events): a month of events and its deliveries go together.
ALTER TABLE event_deliveries RENAME TO event_deliveries_legacy;
ALTER INDEX event_deliveries_pkey RENAME TO event_deliveries_legacy_pkey;
ALTER INDEX event_deliveries_due RENAME TO event_deliveries_legacy_due;
ALTER INDEX event_deliveries_of_endpoint RENAME TO event_deliveries_legacy_of_endpoint;

CREATE TABLE event_deliveries (
    event_id        uuid           NOT NULL,
    endpoint_id     uuid           NOT NULL,
    merchant_id     uuid           NOT NULL,
    state           delivery_state NOT NULL DEFAULT 'pending',
    attempts        integer        NOT NULL DEFAULT 0,
    next_attempt_at timestamptz    NOT NULL DEFAULT now(),
    created_at      timestamptz    NOT NULL DEFAULT now(),
    updated_at      timestamptz    NOT NULL DEFAULT now(),
    CONSTRAINT event_deliveries_attempts_check CHECK (attempts >= 0),
    CONSTRAINT event_deliveries_merchant_id_endpoint_id_fkey FOREIGN KEY (merchant_id, endpoint_id)
        REFERENCES webhook_endpoints (merchant_id, id),
    CONSTRAINT event_deliveries_pkey PRIMARY KEY (event_id, endpoint_id)
) PARTITION BY RANGE (event_id);

-- ---------------------------------------------------------------- delivery_attempts
-- RANGE (event_id) too. Its id is an identity, unique by construction; each month's partition
-- has the unique (event_id, id) the parent's model gives it, the legacy one its primary key (id).
ALTER TABLE delivery_attempts RENAME TO delivery_attempts_legacy;
ALTER INDEX delivery_attempts_pkey RENAME TO delivery_attempts_legacy_pkey;
ALTER INDEX delivery_attempts_of_delivery RENAME TO delivery_attempts_legacy_of_delivery;
ALTER SEQUENCE delivery_attempts_id_seq RENAME TO delivery_attempts_legacy_id_seq;

CREATE TABLE delivery_attempts (
    id           bigint       GENERATED ALWAYS AS IDENTITY,
    event_id     uuid         NOT NULL,
    endpoint_id  uuid         NOT NULL,
    attempted_at timestamptz  NOT NULL DEFAULT now(),
    http_status  smallint,
    latency_ms   milliseconds NOT NULL,
    error        text
) PARTITION BY RANGE (event_id);

-- ---------------------------------------------------------------- provider_webhooks
-- RANGE (provider_created_at): the provider's own time of the event, the same on every
-- redelivery, so a redelivery lands in its first copy's partition and the unique
-- (provider, provider_event_id, provider_created_at) refuses it there: the dedup stays exact.
-- The legacy partition also keeps its unique (provider, provider_event_id).
ALTER TABLE provider_webhooks RENAME TO provider_webhooks_legacy;
ALTER INDEX provider_webhooks_pkey RENAME TO provider_webhooks_legacy_pkey;
ALTER INDEX provider_webhooks_provider_event_key RENAME TO provider_webhooks_legacy_provider_event_key;
ALTER INDEX provider_webhooks_event_key RENAME TO provider_webhooks_legacy_event_key;
ALTER INDEX provider_webhooks_age RENAME TO provider_webhooks_legacy_age;
ALTER INDEX provider_webhooks_attempt RENAME TO provider_webhooks_legacy_attempt;
ALTER INDEX provider_webhooks_conflicts RENAME TO provider_webhooks_legacy_conflicts;
ALTER INDEX provider_webhooks_unkept RENAME TO provider_webhooks_legacy_unkept;

CREATE TABLE provider_webhooks (
    id                  uuid           NOT NULL,
    provider            text           NOT NULL,
    provider_event_id   short_text     NOT NULL,
    event_type          text           NOT NULL,
    outcome             webhook_outcome NOT NULL,
    detail              text,
    merchant_id         uuid,
    attempt_id          uuid,
    payload             jsonb          NOT NULL,
    provider_created_at timestamptz    NOT NULL,
    received_at         timestamptz    NOT NULL DEFAULT now(),
    deliveries          delivery_count NOT NULL DEFAULT 1,
    payload_kept        boolean        NOT NULL DEFAULT false,
    CONSTRAINT provider_webhooks_attempt_fk FOREIGN KEY (merchant_id, attempt_id)
        REFERENCES payment_attempts (merchant_id, id),
    CONSTRAINT provider_webhooks_attempt_known
        CHECK (outcome IN ('unknown_attempt', 'ignored') OR attempt_id IS NOT NULL),
    CONSTRAINT provider_webhooks_unknown_has_no_attempt
        CHECK (outcome <> 'unknown_attempt' OR attempt_id IS NULL)
) PARTITION BY RANGE (provider_created_at);

-- ---------------------------------------------------------------- the timelines
-- RANGE (created_at); an identity id, unique by construction, with the partition key in the
-- months' unique index.
ALTER TABLE attempt_transitions RENAME TO attempt_transitions_legacy;
ALTER INDEX attempt_transitions_pkey RENAME TO attempt_transitions_legacy_pkey;
ALTER INDEX attempt_transitions_attempt RENAME TO attempt_transitions_legacy_attempt;
ALTER SEQUENCE attempt_transitions_id_seq RENAME TO attempt_transitions_legacy_id_seq;

CREATE TABLE attempt_transitions (
    merchant_id uuid                NOT NULL,
    id          bigint              GENERATED ALWAYS AS IDENTITY,
    attempt_id  uuid                NOT NULL,
    from_status open_attempt_status,
    to_status   attempt_status      NOT NULL,
    source      transition_source   NOT NULL,
    detail      text,
    created_at  timestamptz         NOT NULL DEFAULT now(),
    CONSTRAINT attempt_transitions_attempt_fkey FOREIGN KEY (merchant_id, attempt_id)
        REFERENCES payment_attempts (merchant_id, id)
) PARTITION BY RANGE (created_at);

ALTER TABLE refund_transitions RENAME TO refund_transitions_legacy;
ALTER INDEX refund_transitions_pkey RENAME TO refund_transitions_legacy_pkey;
ALTER INDEX refund_transitions_refund RENAME TO refund_transitions_legacy_refund;
ALTER SEQUENCE refund_transitions_id_seq RENAME TO refund_transitions_legacy_id_seq;

CREATE TABLE refund_transitions (
    merchant_id uuid               NOT NULL,
    id          bigint             GENERATED ALWAYS AS IDENTITY,
    refund_id   uuid               NOT NULL,
    from_status open_refund_status,
    to_status   refund_status      NOT NULL,
    source      transition_source  NOT NULL,
    detail      text,
    created_at  timestamptz        NOT NULL DEFAULT now(),
    CONSTRAINT refund_transitions_refund_fkey FOREIGN KEY (merchant_id, refund_id)
        REFERENCES refunds (merchant_id, id)
) PARTITION BY RANGE (created_at);

-- ---------------------------------------------------------------- attach, adopt, continue
DO $$
DECLARE
    until timestamptz := (SELECT legacy_until FROM history_tables WHERE name = 'merchant_events');
    t record;
BEGIN
    -- NOT NULL as the parent's column: proven by the validated CHECK, no scan.
    ALTER TABLE provider_webhooks_legacy ALTER COLUMN provider_created_at SET NOT NULL;
    FOR t IN SELECT name, key_kind FROM history_tables LOOP
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)',
            t.name, t.name || '_legacy',
            CASE t.key_kind WHEN 'event_id' THEN history_uuid_at(until)::text ELSE until::text END);
        -- The CHECK did its work; the partition bound holds the same from now on.
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t.name || '_legacy',
            t.name || '_legacy_bound');
    END LOOP;
    -- Each identity continues where the old table's sequence stands (nothing else writes
    -- these tables while this transaction holds them).
    EXECUTE format('ALTER TABLE merchant_events ALTER COLUMN seq RESTART WITH %s',
        (SELECT last_value + 1 FROM merchant_events_legacy_seq_seq));
    EXECUTE format('ALTER TABLE delivery_attempts ALTER COLUMN id RESTART WITH %s',
        (SELECT last_value + 1 FROM delivery_attempts_legacy_id_seq));
    EXECUTE format('ALTER TABLE attempt_transitions ALTER COLUMN id RESTART WITH %s',
        (SELECT last_value + 1 FROM attempt_transitions_legacy_id_seq));
    EXECUTE format('ALTER TABLE refund_transitions ALTER COLUMN id RESTART WITH %s',
        (SELECT last_value + 1 FROM refund_transitions_legacy_id_seq));
END
$$;

-- A provider may date an event outside the months kept: its clock, or a test's fixture
-- dated years ahead. Such webhooks go to the DEFAULT partition, where the same unique index
-- dedups them; the keeper moves a month's rows out of it when it makes that month, and
-- deletes its rows past the retention one by one, the rule the reaper applied before — it
-- holds nearly none. Without it, such a webhook could not be recorded (a 500 the provider
-- would retry for days).
CREATE TABLE provider_webhooks_outside PARTITION OF provider_webhooks DEFAULT;

-- The parents' indexes. Where the legacy table has the same index, CREATE INDEX adopts it
-- (no build); `ON ONLY` ones are the models of the months (see above).
CREATE INDEX merchant_events_age ON merchant_events (created_at);
CREATE INDEX merchant_events_of_merchant ON merchant_events (merchant_id, seq);
CREATE INDEX merchant_events_of_order ON merchant_events (merchant_id, order_id);
-- seq comes from the identity, unique by construction: a plain index for its readers
-- (support's list, src/events/list.rs).
CREATE INDEX merchant_events_seq ON ONLY merchant_events (seq);
-- One event per (resource, type): the trigger below, reading this index.
CREATE INDEX merchant_events_once ON ONLY merchant_events (merchant_id, resource_id, type);

CREATE INDEX event_deliveries_due ON event_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX event_deliveries_of_endpoint ON event_deliveries (merchant_id, endpoint_id)
    WHERE state = 'pending';

CREATE UNIQUE INDEX delivery_attempts_key ON ONLY delivery_attempts (event_id, id);
CREATE INDEX delivery_attempts_of_delivery ON delivery_attempts (event_id, endpoint_id);

CREATE UNIQUE INDEX provider_webhooks_event_key
    ON provider_webhooks (provider, provider_event_id, provider_created_at);
CREATE UNIQUE INDEX provider_webhooks_key ON ONLY provider_webhooks (id, provider_created_at);
CREATE INDEX provider_webhooks_age ON provider_webhooks (received_at);
CREATE INDEX provider_webhooks_attempt ON provider_webhooks (merchant_id, attempt_id, received_at)
    WHERE attempt_id IS NOT NULL;
CREATE INDEX provider_webhooks_conflicts ON provider_webhooks (received_at)
    WHERE outcome = 'conflict';
CREATE INDEX provider_webhooks_unkept ON provider_webhooks (received_at) WHERE NOT payload_kept;

CREATE UNIQUE INDEX attempt_transitions_key ON ONLY attempt_transitions (merchant_id, id, created_at);
CREATE INDEX attempt_transitions_attempt ON attempt_transitions (merchant_id, attempt_id, id);
CREATE UNIQUE INDEX refund_transitions_key ON ONLY refund_transitions (merchant_id, id, created_at);
CREATE INDEX refund_transitions_refund ON refund_transitions (merchant_id, refund_id, id);

-- "Exactly one event per change" (migration 2026-11-24-000013): the unique index
-- (merchant_id, resource_id, type) cannot be global on a table partitioned by id. The
-- one-way guards of the attempts', refunds', orders' and disputes' statuses already make
-- each emitting change happen once; this trigger still refuses a second event of a
-- (merchant, resource, type) in any month, with the old index's error: it serializes the
-- writers of one key on a transaction-scoped advisory lock (never a session lock: payorch
-- may sit behind a pooler in transaction mode), then looks in every partition. A read
-- committed statement after the lock sees the committed first writer. Events dropped with
-- their month are no longer seen, as the old index stopped seeing events the reaper deleted.
CREATE FUNCTION merchant_events_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- 0x6f6e6365 ("once"): the class of these advisory locks (two-int form, apart from the
    -- bigint keys of the migration lock and the others).
    PERFORM pg_advisory_xact_lock(1869508453,
        hashtext(NEW.merchant_id::text || '/' || NEW.resource_id::text || '/' || NEW.type));
    IF EXISTS (SELECT 1 FROM merchant_events e WHERE e.merchant_id = NEW.merchant_id
               AND e.resource_id = NEW.resource_id AND e.type = NEW.type) THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "merchant_events_once"'
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'merchant_events_once',
                  TABLE = 'merchant_events',
                  DETAIL = format('Key (merchant_id, resource_id, type)=(%s, %s, %s) already exists.',
                                  NEW.merchant_id, NEW.resource_id, NEW.type);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER merchant_events_once BEFORE INSERT ON merchant_events
    FOR EACH ROW EXECUTE FUNCTION merchant_events_once();

-- The old names 000022 kept as views for one release followed the renames to the legacy
-- tables: they name the parents again.
CREATE OR REPLACE VIEW attempt_events AS SELECT * FROM attempt_transitions;
CREATE OR REPLACE VIEW refund_events AS SELECT * FROM refund_transitions;
CREATE OR REPLACE VIEW webhook_events AS SELECT * FROM provider_webhooks;
CREATE OR REPLACE VIEW events AS SELECT * FROM merchant_events;
