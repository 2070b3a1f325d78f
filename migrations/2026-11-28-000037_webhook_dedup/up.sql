-- One row per provider event, whatever time the copies carry (docs/DESIGN.md, "History
-- partitioned by time").
--
-- provider_webhooks is partitioned by the provider's own time of the event, and its unique
-- index holds that time: two copies of one event dated differently would land in two rows
-- (two months), or fail on the legacy partition's older unique index. Stripe signs `created`
-- with the rest of the event, but Adyen's HMAC does not cover `eventDate`, and a notification
-- without one is dated on arrival. So the dedup does not rest on the time: writers of one
-- (provider, provider_event_id) take turns on a transaction-scoped advisory lock (never a
-- session lock: payorch may sit behind a pooler in transaction mode), then look in every
-- partition; a copy already recorded is skipped, as `ON CONFLICT DO NOTHING` skips it (every
-- writer's insert is one), and the writer counts a redelivery as before. A read committed
-- statement after the lock sees the committed first writer. The row itself is not counted
-- (`w.id <> NEW.id`): the keeper moves a month's rows out of the DEFAULT partition by
-- inserting them again.
CREATE FUNCTION provider_webhooks_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- 0x77686b73 ("whks"): the class of these advisory locks (two-int form, apart from the
    -- bigint keys of the migration lock and the others, and the events' "once").
    PERFORM pg_advisory_xact_lock(2003332979,
        hashtext(NEW.provider || '/' || NEW.provider_event_id));
    IF EXISTS (SELECT 1 FROM provider_webhooks w WHERE w.provider = NEW.provider
               AND w.provider_event_id = NEW.provider_event_id AND w.id <> NEW.id) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER provider_webhooks_once BEFORE INSERT ON provider_webhooks
    FOR EACH ROW EXECUTE FUNCTION provider_webhooks_once();
