-- Retries after a definite decline (docs/guides/declines.md, "Retries"): an attempt may now
-- follow a failed attempt of the same order, at the next provider of the route after a soft
-- decline or at the same provider with 3-D Secure after a decline asking for it; failover
-- (a provider provably not reached) records itself the same way. The merchant opts in on its
-- routing.
--
-- Wait at most 5 s for each table's lock, as migration 2026-11-27-000024 does: an ALTER of
-- payment_attempts stuck behind a long transaction would hold up every write queued behind
-- it. A migration that times out changes nothing; `payorch migrate` again applies it.
SET LOCAL lock_timeout = '5s';

-- Plain columns, their rules as NOT VALID table CHECKs, for migration 000024's reason: no
-- rewrite and no scan under the exclusive lock. Old rows have NULL / the default, which pass.
ALTER TABLE payment_attempts
    ADD COLUMN retry_of uuid,
    ADD COLUMN retry_reason text,
    ADD COLUMN three_d_secure text NOT NULL DEFAULT 'automatic';

-- A retry says why it was made, and only a retry does. The attempts failed over before this
-- migration have neither: they were made before anyone wrote down why.
ALTER TABLE payment_attempts
    ADD CONSTRAINT payment_attempts_retry_reason_known CHECK (
        retry_reason IN ('provider_unreached', 'soft_decline', 'authentication_required')
    ) NOT VALID,
    ADD CONSTRAINT payment_attempts_retry_has_reason CHECK (
        (retry_of IS NULL) = (retry_reason IS NULL)
    ) NOT VALID,
    ADD CONSTRAINT payment_attempts_three_d_secure_known CHECK (
        three_d_secure IN ('automatic', 'required')
    ) NOT VALID;

-- A retry follows a failed attempt of the same merchant and the same order, never a charge
-- whose outcome is open or unknown: the money rule (one intent, at most one charge) held by
-- the database as well as by `payments::attempts::retry`. A trigger rather than a composite
-- foreign key, which would need a new unique index over (merchant_id, order_id, id) built
-- under a lock that blocks writes; and a key cannot say "failed".
CREATE FUNCTION payment_attempts_retry_follows_failure() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.retry_of
          AND order_id = NEW.order_id AND status = 'failed';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'attempt % retries %, which is not a failed attempt of its order',
            NEW.id, NEW.retry_of
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_retry_follows_failure';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER payment_attempts_retry_follows_failure
    BEFORE INSERT OR UPDATE OF retry_of ON payment_attempts
    FOR EACH ROW WHEN (NEW.retry_of IS NOT NULL)
    EXECUTE FUNCTION payment_attempts_retry_follows_failure();

-- The per-card cap's index is built CONCURRENTLY by the next migration,
-- 2026-11-27-000025-1_card_declines_index, alone in its file.

-- The merchant's retry settings, part of its routing (`PUT /v1/merchants/{id}/routing`).
-- Retrying soft declines is off until the merchant turns it on: a retry elsewhere is a second
-- authorisation request the payer's bank sees, and the merchant's own retry logic, if it has
-- some, must be told first. A small table: plain CHECKs.
ALTER TABLE merchant_routing
    ADD COLUMN retry_soft_declines boolean NOT NULL DEFAULT false,
    ADD COLUMN retry_after_three_d_secure boolean NOT NULL DEFAULT false,
    ADD COLUMN max_attempts smallint NOT NULL DEFAULT 2
        CONSTRAINT merchant_routing_max_attempts CHECK (max_attempts BETWEEN 1 AND 4);
