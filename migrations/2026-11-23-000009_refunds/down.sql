ALTER TABLE provider_calls DROP CONSTRAINT provider_calls_refund;
ALTER TABLE provider_calls DROP COLUMN refund_id;
DROP TABLE refund_events;
DROP TABLE refunds;
DROP FUNCTION refunds_settle_order();
DROP FUNCTION refunds_guard_transition();
DROP FUNCTION refunds_hold_amount();
ALTER TABLE payment_attempts DROP COLUMN refund_held;
-- The guards as `…000002` and `…000003` made them.
CREATE OR REPLACE FUNCTION payment_attempts_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
CREATE OR REPLACE FUNCTION orders_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'awaiting_payment' AND NEW.status IN ('processing', 'canceled')) OR
        (OLD.status = 'processing' AND NEW.status IN ('paid', 'awaiting_payment'))
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
ALTER DOMAIN provider_operation DROP CONSTRAINT provider_operation_known;
ALTER DOMAIN provider_operation ADD CONSTRAINT provider_operation_known CHECK (VALUE IN
    ('create', 'retrieve', 'search'));
ALTER DOMAIN key_operation DROP CONSTRAINT key_operation_known;
ALTER DOMAIN key_operation ADD CONSTRAINT key_operation_known CHECK (VALUE IN
    ('create_order', 'cancel_order', 'create_payment', 'checkout'));
ALTER DOMAIN order_status DROP CONSTRAINT order_status_known;
ALTER DOMAIN order_status ADD CONSTRAINT order_status_known CHECK (VALUE IN
    ('awaiting_payment', 'processing', 'paid', 'canceled'));
DROP DOMAIN held_amount;
DROP DOMAIN open_refund_status;
DROP DOMAIN refund_status;
