-- Refunds (README, "Refunds"; docs/DESIGN.md, "Refunds"). The rule that matters, never more
-- back than was taken, is held here whatever writes the rows: every refund that is not
-- `failed` holds its amount on its payment's row (`payment_attempts.refund_held`), the
-- insert trigger keeps what is held within the payment's amount, and concurrent refunds of
-- one payment serialise on that row. A failed refund gives its amount back in the same statement.

CREATE DOMAIN refund_status AS text
    CONSTRAINT refund_status_known CHECK (VALUE IN ('created', 'pending', 'succeeded', 'failed'));
CREATE DOMAIN open_refund_status AS text
    CONSTRAINT open_refund_status_known CHECK (VALUE IN ('created', 'pending'));
CREATE DOMAIN held_amount AS bigint
    CONSTRAINT held_amount_not_negative CHECK (VALUE >= 0);

ALTER DOMAIN order_status DROP CONSTRAINT order_status_known;
ALTER DOMAIN order_status ADD CONSTRAINT order_status_known CHECK (VALUE IN
    ('awaiting_payment', 'processing', 'paid', 'canceled', 'partially_refunded', 'refunded'));
ALTER DOMAIN key_operation DROP CONSTRAINT key_operation_known;
ALTER DOMAIN key_operation ADD CONSTRAINT key_operation_known CHECK (VALUE IN
    ('create_order', 'cancel_order', 'create_payment', 'checkout', 'create_refund'));
ALTER DOMAIN provider_operation DROP CONSTRAINT provider_operation_known;
ALTER DOMAIN provider_operation ADD CONSTRAINT provider_operation_known CHECK (VALUE IN
    ('create', 'retrieve', 'search', 'create_refund', 'retrieve_refund'));

-- What the payment's refunds hold: succeeded ones and those whose outcome is not known yet.
-- Kept within the payment's amount by `refunds_hold_amount` below, the only writer (a table
-- CHECK would be re-planned in every statement of the checkout's hot path).
ALTER TABLE payment_attempts ADD COLUMN refund_held held_amount NOT NULL DEFAULT 0;

-- The attempt guard of `…000003_payment_attempts`, now letting a final attempt's
-- `refund_held` change, and only from the refunds' triggers (a person at a psql prompt who
-- sets it by hand is refused like any other change of a final attempt).
CREATE OR REPLACE FUNCTION payment_attempts_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rest payment_attempts;
BEGIN
    IF NEW.refund_held IS DISTINCT FROM OLD.refund_held THEN
        rest := NEW;
        rest.refund_held := OLD.refund_held;
        IF pg_trigger_depth() < 2 OR OLD.status <> 'succeeded' OR rest IS DISTINCT FROM OLD THEN
            RAISE EXCEPTION 'the refunds of payment attempt % hold its refund_held; nothing else sets it', OLD.id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_refund_held_by_refunds';
        END IF;
        RETURN NEW;
    END IF;
    IF OLD.status IN ('succeeded', 'failed') THEN
        RAISE EXCEPTION 'payment attempt % is % and final', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_final';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'created' AND NEW.status IN ('pending', 'succeeded', 'failed')) OR
        (OLD.status = 'pending' AND NEW.status IN ('succeeded', 'failed'))
    ) THEN
        RAISE EXCEPTION 'payment attempt % cannot move from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_status_transition';
    END IF;
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id OR NEW.order_id <> OLD.order_id
       OR NEW.amount <> OLD.amount OR NEW.currency <> OLD.currency
       OR NEW.payment_method <> OLD.payment_method OR NEW.provider <> OLD.provider
       OR NEW.provider_idempotency_key <> OLD.provider_idempotency_key
       OR NEW.created_at <> OLD.created_at
       OR (OLD.provider_payment_id IS NOT NULL
           AND NEW.provider_payment_id IS DISTINCT FROM OLD.provider_payment_id) THEN
        RAISE EXCEPTION 'payment attempt % may change only its status and what the provider said', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_immutable';
    END IF;
    NEW.updated_at := now();
    IF NEW.status IN ('succeeded', 'failed') THEN
        NEW.finished_at := now();
        NEW.next_check_at := NULL;
    END IF;
    RETURN NEW;
END;
$$;

-- The order state machine of `…000002`, with refunds: paid → partially_refunded → refunded,
-- and paid → refunded at once.
CREATE OR REPLACE FUNCTION orders_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'awaiting_payment' AND NEW.status IN ('processing', 'canceled')) OR
        (OLD.status = 'processing' AND NEW.status IN ('paid', 'awaiting_payment')) OR
        (OLD.status = 'paid' AND NEW.status IN ('partially_refunded', 'refunded')) OR
        (OLD.status = 'partially_refunded' AND NEW.status = 'refunded')
    ) THEN
        RAISE EXCEPTION 'order % cannot move from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'orders_status_transition';
    END IF;
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id
       OR NEW.amount <> OLD.amount OR NEW.currency <> OLD.currency THEN
        RAISE EXCEPTION 'order % is immutable but for its status', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'orders_immutable';
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END;
$$;

CREATE TABLE refunds (
    merchant_id               uuid          NOT NULL,
    id                        uuid          NOT NULL,
    -- The succeeded attempt refunded, and its order (copied by the trigger below).
    payment_id                uuid          NOT NULL,
    order_id                  uuid          NOT NULL,
    status                    refund_status NOT NULL,
    -- NULL on insert means "what is left", filled in by the trigger under the payment's lock.
    amount                    amount_minor  NOT NULL,
    currency                  currency_code NOT NULL,
    reason                    description_text,
    provider                  text          NOT NULL,
    -- Derived from the refund id and never changed: every resend of this refund uses it.
    provider_idempotency_key  text          NOT NULL,
    provider_refund_id        text,
    failure_code              text,
    failure_message           text,
    -- The client's Idempotency-Key that made it, so whoever finishes it completes that key.
    idempotency_key           text,
    next_check_at             timestamptz,
    checks                    integer       NOT NULL DEFAULT 0,
    created_at                timestamptz   NOT NULL DEFAULT now(),
    updated_at                timestamptz   NOT NULL DEFAULT now(),
    finished_at               timestamptz,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, payment_id) REFERENCES payment_attempts (merchant_id, id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id),
    CONSTRAINT refunds_final_is_finished
        CHECK ((status IN ('succeeded', 'failed')) = (finished_at IS NOT NULL)),
    CONSTRAINT refunds_open_is_checked
        CHECK ((status IN ('created', 'pending')) = (next_check_at IS NOT NULL)),
    CONSTRAINT refunds_failed_has_code
        CHECK ((status = 'failed') = (failure_code IS NOT NULL))
);

CREATE UNIQUE INDEX refunds_provider_key ON refunds (provider, provider_idempotency_key);
CREATE UNIQUE INDEX refunds_provider_refund ON refunds (provider, provider_refund_id);
CREATE INDEX refunds_payment ON refunds (merchant_id, payment_id, created_at);
CREATE INDEX refunds_due ON refunds (next_check_at) WHERE status IN ('created', 'pending');
CREATE INDEX refunds_id ON refunds (id);

-- A refund starts `created`, of a `succeeded` payment, within what is left of it, and holds
-- its amount on the payment's row in the same statement. Two refunds of one payment wait for
-- each other on that row (`FOR NO KEY UPDATE`), so each counts what the other holds.
CREATE FUNCTION refunds_hold_amount() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    left_to_refund bigint;
BEGIN
    IF NEW.status <> 'created' THEN
        RAISE EXCEPTION 'a refund starts as created, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_start_created';
    END IF;
    SELECT amount - refund_held INTO left_to_refund FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.payment_id AND status = 'succeeded'
        FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'payment attempt % is not succeeded', NEW.payment_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_payment_refundable';
    END IF;
    IF NEW.amount IS NULL AND left_to_refund > 0 THEN
        NEW.amount := left_to_refund;
    END IF;
    IF NEW.amount IS NULL OR NEW.amount > left_to_refund THEN
        RAISE EXCEPTION 'payment attempt % has % left to refund', NEW.payment_id, left_to_refund
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_within_payment';
    END IF;
    UPDATE payment_attempts SET refund_held = refund_held + NEW.amount
        WHERE merchant_id = NEW.merchant_id AND id = NEW.payment_id
        RETURNING currency, order_id INTO NEW.currency, NEW.order_id;
    RETURN NEW;
END;
$$;

CREATE TRIGGER refunds_hold_amount BEFORE INSERT ON refunds
    FOR EACH ROW EXECUTE FUNCTION refunds_hold_amount();

-- created → pending → succeeded | failed, and created → succeeded | failed; a final refund
-- never changes again. A refund that fails gives back what it held.
CREATE FUNCTION refunds_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status IN ('succeeded', 'failed') THEN
        RAISE EXCEPTION 'refund % is % and final', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_final';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'created' AND NEW.status IN ('pending', 'succeeded', 'failed')) OR
        (OLD.status = 'pending' AND NEW.status IN ('succeeded', 'failed'))
    ) THEN
        RAISE EXCEPTION 'refund % cannot move from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_status_transition';
    END IF;
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id OR NEW.payment_id <> OLD.payment_id
       OR NEW.order_id <> OLD.order_id OR NEW.amount <> OLD.amount OR NEW.currency <> OLD.currency
       OR NEW.provider <> OLD.provider
       OR NEW.provider_idempotency_key <> OLD.provider_idempotency_key
       OR NEW.created_at <> OLD.created_at
       OR (OLD.provider_refund_id IS NOT NULL
           AND NEW.provider_refund_id IS DISTINCT FROM OLD.provider_refund_id) THEN
        RAISE EXCEPTION 'refund % may change only its status and what the provider said', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_immutable';
    END IF;
    NEW.updated_at := now();
    IF NEW.status IN ('succeeded', 'failed') THEN
        NEW.finished_at := now();
        NEW.next_check_at := NULL;
    END IF;
    IF NEW.status = 'failed' THEN
        UPDATE payment_attempts SET refund_held = refund_held - OLD.amount
            WHERE merchant_id = OLD.merchant_id AND id = OLD.payment_id;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER refunds_guard_transition BEFORE UPDATE ON refunds
    FOR EACH ROW EXECUTE FUNCTION refunds_guard_transition();

-- The order follows its refunds: partially_refunded, then refunded once succeeded refunds
-- add up to the payment.
CREATE FUNCTION refunds_settle_order() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    refunded bigint;
    paid bigint;
BEGIN
    SELECT COALESCE(sum(amount), 0) INTO refunded FROM refunds
        WHERE merchant_id = NEW.merchant_id AND payment_id = NEW.payment_id AND status = 'succeeded';
    SELECT amount INTO paid FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.payment_id;
    UPDATE orders
        SET status = CASE WHEN refunded >= paid THEN 'refunded' ELSE 'partially_refunded' END
        WHERE merchant_id = NEW.merchant_id AND id = NEW.order_id
          AND status IN ('paid', 'partially_refunded');
    RETURN NULL;
END;
$$;

CREATE TRIGGER refunds_settle_order AFTER UPDATE OF status ON refunds
    FOR EACH ROW WHEN (NEW.status = 'succeeded' AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION refunds_settle_order();

-- A refund's timeline, like an attempt's.
CREATE TABLE refund_events (
    merchant_id  uuid               NOT NULL,
    id           bigint             GENERATED ALWAYS AS IDENTITY,
    refund_id    uuid               NOT NULL,
    from_status  open_refund_status,
    to_status    refund_status      NOT NULL,
    source       transition_source  NOT NULL,
    detail       text,
    created_at   timestamptz        NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, refund_id) REFERENCES refunds (merchant_id, id)
);

CREATE INDEX refund_events_refund ON refund_events (merchant_id, refund_id, id);

-- A provider call about a refund is also about its payment: it shows in the payment's story.
ALTER TABLE provider_calls ADD COLUMN refund_id uuid;
ALTER TABLE provider_calls ADD CONSTRAINT provider_calls_refund
    FOREIGN KEY (merchant_id, refund_id) REFERENCES refunds (merchant_id, id);
