-- The partition keeper's three functions (docs/DESIGN.md, "History partitioned by time";
-- `db::partitions` calls them from the reapers of every replica).
--
-- Creating and dropping a partition takes the table's owner, and the runtime role owns
-- nothing (migration 2026-11-27-000016_runtime_role; docs/PRODUCTION.md, section 2). So the
-- owner's functions do it for it, SECURITY DEFINER, and can do nothing else: create the
-- months ahead of this one, and drop a month whose every row is past a retention and whose
-- payments are all final. The runtime role could already delete those rows one by one.
SET LOCAL lock_timeout = '5s';

-- Every partition of the history: its table, its months (from, until; the legacy one from
-- nothing), read from the names the keeper gives (`<table>_YYYY_MM`, `<table>_legacy`);
-- not the DEFAULT partition of the webhooks dated outside the months (000032).
CREATE FUNCTION history_partitions()
RETURNS TABLE (table_name text, partition_name text, from_at timestamptz, until_at timestamptz)
LANGUAGE sql STABLE SET TimeZone = 'UTC' AS $$
    SELECT h.name, c.relname::text,
           CASE WHEN c.relname = h.name || '_legacy' THEN NULL
                ELSE to_date(right(c.relname, 7), 'YYYY_MM')::timestamp AT TIME ZONE 'UTC' END,
           CASE WHEN c.relname = h.name || '_legacy' THEN h.legacy_until
                ELSE (to_date(right(c.relname, 7), 'YYYY_MM')::timestamp AT TIME ZONE 'UTC')
                     + interval '1 month' END
    FROM history_tables h
    JOIN pg_class p ON p.relname = h.name AND p.relnamespace = 'public'::regnamespace
    JOIN pg_inherits i ON i.inhparent = p.oid
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
    ORDER BY h.name, 4
$$;

-- Creates the partitions of `table_name` for last month, this month and the `months` after
-- it (at most 24) that do not exist yet; how many it made. Idempotent, and safe with every
-- replica calling it at once: one at a time holds a transaction-scoped advisory lock (never
-- a session lock: payorch may sit behind a pooler in transaction mode) and the others make
-- nothing this round (0) rather than wait for it — the lock_timeout would cancel the wait
-- and fail their round; each looks before it creates. One table per call, so
-- one transaction never holds two tables' locks (a payment's statement writes several of
-- them, in an order of its own); the keeper calls it for each table, the events before
-- their deliveries before the deliveries' attempts: a month of deliveries references that
-- month of events, a month of delivery attempts that month of deliveries, as the legacy
-- partitions do.
CREATE FUNCTION history_create_ahead(table_name text, months integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp SET lock_timeout = '2s'
    -- Months are reckoned in UTC whatever the caller's session says.
    SET TimeZone = 'UTC' AS $$
DECLARE
    t record;
    first timestamptz := date_trunc('month', now(), 'UTC');
    m timestamptz;
    part text;
    made integer := 0;
BEGIN
    -- 0x68697374 ("hist"): the keeper's class of advisory locks. Taken by another replica's
    -- keeper: it is making or dropping months now, and the next round looks again.
    IF NOT pg_try_advisory_xact_lock(1751741300, 0) THEN
        RETURN 0;
    END IF;
    SELECT name, key_kind, legacy_until INTO t FROM history_tables WHERE name = table_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no history table %', table_name;
    END IF;
    BEGIN
        -- From last month (a provider may date a webhook a moment before it arrives), or
        -- the legacy partition's end if later: a month past is made again only when missing
        -- at its end (000032 run late, a keeper stopped), never one long dropped.
        FOR m IN SELECT generate_series(greatest(t.legacy_until, first - interval '1 month'),
                     first + make_interval(months => least(greatest(months, 0), 24)),
                     interval '1 month') LOOP
            CONTINUE WHEN m < t.legacy_until;
            part := t.name || '_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM');
            CONTINUE WHEN to_regclass(format('public.%I', part)) IS NOT NULL;
            IF t.key_kind = 'event_id' THEN
                EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                    part, t.name, history_uuid_at(m), history_uuid_at(m + interval '1 month'));
            ELSIF t.name = 'provider_webhooks' THEN
                -- Made beside the table, given the rows the DEFAULT partition holds of its
                -- month, then attached: the attach finds none of them left there.
                EXECUTE format('CREATE TABLE %I (LIKE provider_webhooks INCLUDING DEFAULTS
                    INCLUDING CONSTRAINTS)', part);
                EXECUTE format('WITH moved AS (DELETE FROM provider_webhooks_outside
                    WHERE provider_created_at >= %L AND provider_created_at < %L RETURNING *)
                    INSERT INTO %I SELECT * FROM moved', m, m + interval '1 month', part);
                EXECUTE format('ALTER TABLE provider_webhooks ATTACH PARTITION %I
                    FOR VALUES FROM (%L) TO (%L)', part, m, m + interval '1 month');
            ELSE
                EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                    part, t.name, m, m + interval '1 month');
            END IF;
            IF t.name = 'event_deliveries' THEN
                EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (event_id)
                    REFERENCES %I (id) ON DELETE CASCADE', part, part || '_event_fkey',
                    'merchant_events_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM'));
            ELSIF t.name = 'delivery_attempts' THEN
                EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (event_id, endpoint_id)
                    REFERENCES %I (event_id, endpoint_id) ON DELETE CASCADE', part,
                    part || '_delivery_fkey',
                    'event_deliveries_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM'));
            END IF;
            made := made + 1;
        END LOOP;
    END;
    RETURN made;
END
$$;

-- Drops at most one month of `family` ('events': a month of merchant events with its
-- deliveries and their attempts; 'provider_webhooks') whose every row is older than `keep`
-- and whose payments have all been final for longer than `keep` — the rule the row-by-row
-- reapers applied before (src/payments/webhooks/retention.rs). One row per month past `keep`
-- it looked at, oldest first: kept and why ('open payment': a payment of its rows is not
-- final, or not for long enough; 'busy': a transaction held a table past the lock_timeout,
-- or the lock would have deadlocked — the next round tries again), up to the one it dropped.
-- The keeper (`db::partitions::drop_expired`) calls it again while it drops one: each drop
-- is its own transaction, so its locks are let go before the next month is looked at. No
-- rows when another replica's keeper is at it. Never last month nor this month, whatever
-- `keep`: `history_create_ahead` makes both, and would make a dropped last month again.
--
-- The locks. The open-payment check of a month runs before any lock of the drop is asked
-- for. A drop takes ACCESS EXCLUSIVE on the parents, and every write of the table queues
-- behind that request while it waits, so it waits 100 ms at most (the lock_timeout), then
-- gives up as 'busy'. Writers and readers take these tables in orders of their own (the
-- delivery worker reads the deliveries before their events), so a drop can deadlock with
-- one: PostgreSQL cancels one side, and when it is the drop, that is 'busy' too.
CREATE FUNCTION history_drop_expired(family text, keep interval)
RETURNS TABLE (partition_name text, dropped boolean, reason text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp SET lock_timeout = '100ms'
    -- Months are reckoned in UTC whatever the caller's session says.
    SET TimeZone = 'UTC' AS $$
DECLARE
    cutoff timestamptz := now() - keep;
    p record;
    suffix text;
    open boolean;
BEGIN
    IF family NOT IN ('events', 'provider_webhooks') THEN
        RAISE EXCEPTION 'no history family %', family;
    END IF;
    -- Taken by another replica's keeper (the same lock as history_create_ahead's): it is
    -- at work now, and this one has nothing to do this round.
    IF NOT pg_try_advisory_xact_lock(1751741300, 0) THEN
        RETURN;
    END IF;
    FOR p IN SELECT * FROM history_partitions() h
             WHERE h.table_name = CASE family WHEN 'events' THEN 'merchant_events'
                                              ELSE 'provider_webhooks' END
               AND h.until_at <= cutoff AND h.until_at < date_trunc('month', now(), 'UTC')
             ORDER BY h.until_at LOOP
        suffix := substr(p.partition_name, length(p.table_name) + 1);
        partition_name := p.partition_name;
        BEGIN
            -- The payments the month's rows are about: an event is about an order's payment,
            -- refund or the order itself (the order's attempts); a webhook about its attempt.
            -- Open, or final for less than the retention, with their refunds and holds.
            EXECUTE format($q$SELECT EXISTS (
                SELECT 1 FROM %I x JOIN payment_attempts a ON a.merchant_id = x.merchant_id
                    AND %s
                WHERE a.finished_at IS NULL OR a.finished_at >= $1
                   OR EXISTS (SELECT 1 FROM refunds r WHERE r.merchant_id = a.merchant_id
                              AND r.payment_id = a.id
                              AND (r.finished_at IS NULL OR r.finished_at >= $1))
                   OR EXISTS (SELECT 1 FROM hold_operations o
                              WHERE o.merchant_id = a.merchant_id AND o.payment_id = a.id
                              AND (o.finished_at IS NULL OR o.finished_at >= $1)))$q$,
                p.partition_name,
                CASE family WHEN 'events' THEN 'a.order_id = x.order_id'
                            ELSE 'a.id = x.attempt_id' END) INTO open USING cutoff;
            IF NOT open THEN
                IF family = 'events' THEN
                    -- The three parents in the order their writers insert (an event, then
                    -- its deliveries, then their attempts); then the referencing months
                    -- first: their foreign keys name this one's events.
                    LOCK TABLE merchant_events, event_deliveries, delivery_attempts
                        IN ACCESS EXCLUSIVE MODE;
                    EXECUTE format('DROP TABLE %I', 'delivery_attempts' || suffix);
                    EXECUTE format('DROP TABLE %I', 'event_deliveries' || suffix);
                END IF;
                EXECUTE format('DROP TABLE %I', p.partition_name);
            END IF;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            dropped := false; reason := 'busy';
            RETURN NEXT;
            -- Its tables are held: a later month would wait on the same ones.
            EXIT;
        END;
        IF open THEN
            dropped := false; reason := 'open payment';
            RETURN NEXT;
        ELSE
            dropped := true; reason := NULL;
            RETURN NEXT;
            -- One month a transaction: the keeper calls again for the next.
            RETURN;
        END IF;
    END LOOP;
    IF family = 'provider_webhooks' THEN
        -- The webhooks dated outside the months, by the row: past `keep` since they came,
        -- their payment final as long (or about no payment of ours). Rows held by another
        -- transaction wait for the next round.
        BEGIN
            DELETE FROM provider_webhooks_outside w
            WHERE w.received_at < cutoff
              AND (w.attempt_id IS NULL OR (
                  EXISTS (SELECT 1 FROM payment_attempts a
                          WHERE a.merchant_id = w.merchant_id AND a.id = w.attempt_id
                            AND a.finished_at < cutoff)
                  AND NOT EXISTS (SELECT 1 FROM refunds r
                          WHERE r.merchant_id = w.merchant_id AND r.payment_id = w.attempt_id
                            AND (r.finished_at IS NULL OR r.finished_at >= cutoff))
                  AND NOT EXISTS (SELECT 1 FROM hold_operations o
                          WHERE o.merchant_id = w.merchant_id AND o.payment_id = w.attempt_id
                            AND (o.finished_at IS NULL OR o.finished_at >= cutoff))));
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            NULL;
        END;
    END IF;
END
$$;

REVOKE ALL ON FUNCTION history_create_ahead(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION history_drop_expired(text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION history_create_ahead(text, integer) TO payorch_runtime;
GRANT EXECUTE ON FUNCTION history_drop_expired(text, interval) TO payorch_runtime;

-- The months ahead exist from the start: the keeper's first round need not come before the
-- first write of a month.
SELECT history_create_ahead(name, 3) FROM history_tables
ORDER BY array_position(ARRAY['merchant_events', 'event_deliveries', 'delivery_attempts'], name),
    name;
