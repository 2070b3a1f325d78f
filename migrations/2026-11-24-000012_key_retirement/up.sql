-- The life of an Idempotency-Key past its TTL (README, "A key's life"; docs/DESIGN.md, "The
-- Idempotency-Key protocol"), held by the database as well as by the code:
--
--   in_flight → completed → (TTL) → deleted              a key that made an order or a cancel
--   in_flight → completed → (TTL) → expired → deleted    a key that made a payment or refund
--
-- A key that made a payment or refund is not deleted at its TTL but retired: `expired` keeps
-- only what the answer `409 idempotency_key_expired` needs (the resource it made), with
-- `expires_at` moved to the end of the horizon; the stored response goes. Only then may it be
-- deleted, and the key is free. Without this a late retry of a checkout makes a new order and a
-- second charge.
--
-- Whatever its age, a key is never retired or deleted while the work it made is open: an
-- attempt or refund still `created` or `pending`, or the key itself in flight.

ALTER DOMAIN key_state DROP CONSTRAINT key_state_known;
ALTER DOMAIN key_state ADD CONSTRAINT key_state_known
    CHECK (VALUE IN ('in_flight', 'completed', 'expired'));

-- The reaper's scan now also finds retired keys at the end of their horizon.
DROP INDEX idempotency_keys_expiry;
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at)
    WHERE state <> 'in_flight' AND NOT unresolved;

-- Whether the payment attempt or refund a key made is still open. Read from the resource
-- itself, not only from the key's own `unresolved` flag, so that no writer can get past it.
CREATE FUNCTION idempotency_key_work_is_open(k idempotency_keys) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT k.state = 'in_flight' OR k.unresolved OR CASE k.resource_type
        WHEN 'payment_attempt' THEN EXISTS (
            SELECT 1 FROM payment_attempts a
            WHERE a.merchant_id = k.merchant_id AND a.id = k.resource_id
              AND a.status IN ('created', 'pending'))
        WHEN 'refund' THEN EXISTS (
            SELECT 1 FROM refunds r
            WHERE r.merchant_id = k.merchant_id AND r.id = k.resource_id
              AND r.status IN ('created', 'pending'))
        ELSE false END
$$;

-- Whether a key made a payment or refund, and so must be retired before it is deleted.
CREATE FUNCTION idempotency_key_made_money_move(k idempotency_keys) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(k.resource_type IN ('payment_attempt', 'refund'), false)
$$;

CREATE FUNCTION idempotency_keys_guard_life() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF idempotency_key_work_is_open(OLD) THEN
        RAISE EXCEPTION 'idempotency key % of merchant % cannot be % while the work it made is open',
                OLD.key, OLD.merchant_id, CASE TG_OP WHEN 'DELETE' THEN 'deleted' ELSE 'expired' END
            USING ERRCODE = 'check_violation', CONSTRAINT = 'idempotency_keys_open_work_kept';
    END IF;
    IF TG_OP = 'DELETE' THEN
        IF idempotency_key_made_money_move(OLD) AND (OLD.state <> 'expired' OR OLD.expires_at > now()) THEN
            RAISE EXCEPTION 'idempotency key % of merchant % made a payment or refund: it is retired (expired) and deleted only at the end of its horizon',
                    OLD.key, OLD.merchant_id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'idempotency_keys_retired_before_deleted';
        END IF;
        RETURN OLD;
    END IF;
    -- An update that retires a key, or touches a retired one.
    IF OLD.state = 'expired' THEN
        RAISE EXCEPTION 'idempotency key % of merchant % is expired: it is never reused, only deleted',
                OLD.key, OLD.merchant_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'idempotency_keys_expired_is_final';
    END IF;
    IF OLD.state <> 'completed' OR NOT idempotency_key_made_money_move(OLD)
       OR NEW.merchant_id <> OLD.merchant_id OR NEW.key <> OLD.key
       OR NEW.resource_type IS DISTINCT FROM OLD.resource_type
       OR NEW.resource_id IS DISTINCT FROM OLD.resource_id THEN
        RAISE EXCEPTION 'idempotency key % of merchant % cannot be retired: only a completed key that made a payment or refund is, and it keeps naming what it made',
                OLD.key, OLD.merchant_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'idempotency_keys_retired_keeps_resource';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER idempotency_keys_guard_delete BEFORE DELETE ON idempotency_keys
    FOR EACH ROW EXECUTE FUNCTION idempotency_keys_guard_life();
-- Only updates to or from `expired` call the function: the hot path's updates do not.
CREATE TRIGGER idempotency_keys_guard_retire BEFORE UPDATE ON idempotency_keys
    FOR EACH ROW WHEN (OLD.state = 'expired' OR NEW.state = 'expired')
    EXECUTE FUNCTION idempotency_keys_guard_life();
