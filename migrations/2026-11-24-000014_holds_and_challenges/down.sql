-- Back to the machine of `…000013`: holds, challenges and their operations gone. Attempts
-- or orders in a status that machine does not know must be dealt with by hand first (the
-- domains' constraints refuse to come back while such rows exist).
ALTER TABLE provider_calls DROP CONSTRAINT provider_calls_hold_operation;
ALTER TABLE provider_calls DROP COLUMN hold_operation_id;
DROP TRIGGER payment_attempts_emit_event_action ON payment_attempts;
DROP FUNCTION payment_attempts_emit_action();
DROP TABLE hold_operations;
DROP FUNCTION hold_operations_guard_transition();
DROP FUNCTION hold_operations_check_hold();
DROP DOMAIN hold_operation_kind;

DROP TRIGGER payment_attempts_settle_order ON payment_attempts;
CREATE TRIGGER payment_attempts_settle_order AFTER UPDATE OF status ON payment_attempts
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'failed') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION payment_attempts_settle_order();
CREATE OR REPLACE FUNCTION payment_attempts_settle_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE orders
        SET status = CASE NEW.status WHEN 'succeeded' THEN 'paid' ELSE 'awaiting_payment' END
        WHERE merchant_id = NEW.merchant_id AND id = NEW.order_id AND status = 'processing';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order % of payment attempt % is not processing', NEW.order_id, NEW.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_order_processing';
    END IF;
    RETURN NULL;
END;
$$;

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

CREATE OR REPLACE FUNCTION refunds_hold_amount() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION refunds_settle_order() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION idempotency_key_work_is_open(k idempotency_keys) RETURNS boolean
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

CREATE OR REPLACE FUNCTION idempotency_key_made_money_move(k idempotency_keys) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(k.resource_type IN ('payment_attempt', 'refund'), false)
$$;

DROP INDEX payment_attempts_one_open;
CREATE UNIQUE INDEX payment_attempts_one_open ON payment_attempts (merchant_id, order_id)
    WHERE status IN ('created', 'pending');
DROP INDEX payment_attempts_due;
CREATE INDEX payment_attempts_due ON payment_attempts (next_check_at)
    WHERE status IN ('created', 'pending');
ALTER TABLE payment_attempts
    DROP CONSTRAINT payment_attempts_canceled_has_reason,
    DROP CONSTRAINT payment_attempts_captured_only_manual,
    DROP CONSTRAINT payment_attempts_captured_within_authorized,
    DROP CONSTRAINT payment_attempts_open_is_checked,
    DROP CONSTRAINT payment_attempts_final_is_finished,
    ADD CONSTRAINT payment_attempts_final_is_finished
        CHECK ((status IN ('succeeded', 'failed')) = (finished_at IS NOT NULL)),
    ADD CONSTRAINT payment_attempts_open_is_checked
        CHECK ((status IN ('created', 'pending')) = (next_check_at IS NOT NULL)),
    DROP COLUMN cancellation_reason,
    DROP COLUMN authorized_until,
    DROP COLUMN return_url,
    DROP COLUMN next_action,
    DROP COLUMN amount_captured,
    DROP COLUMN capture_method;
DROP DOMAIN capture_method;

ALTER TABLE webhook_endpoints
    DROP CONSTRAINT webhook_endpoints_enabled_events_check,
    ADD CONSTRAINT webhook_endpoints_enabled_events_check CHECK (cardinality(enabled_events) > 0
        AND enabled_events <@ ARRAY['*', 'payment.pending', 'payment.succeeded', 'payment.failed',
            'refund.succeeded', 'refund.failed', 'order.paid', 'order.canceled', 'order.refunded']);
ALTER DOMAIN event_type DROP CONSTRAINT event_type_known;
ALTER DOMAIN event_type ADD CONSTRAINT event_type_known CHECK (VALUE IN (
    'payment.pending', 'payment.succeeded', 'payment.failed',
    'refund.succeeded', 'refund.failed',
    'order.paid', 'order.canceled', 'order.refunded'));
ALTER DOMAIN provider_outcome DROP CONSTRAINT provider_outcome_known;
ALTER DOMAIN provider_outcome ADD CONSTRAINT provider_outcome_known
    CHECK (VALUE IN ('succeeded', 'failed', 'pending', 'unknown', 'not_found', 'unavailable'));
ALTER DOMAIN provider_operation DROP CONSTRAINT provider_operation_known;
ALTER DOMAIN provider_operation ADD CONSTRAINT provider_operation_known CHECK (VALUE IN
    ('create', 'retrieve', 'search', 'create_refund', 'retrieve_refund'));
ALTER DOMAIN key_operation DROP CONSTRAINT key_operation_known;
ALTER DOMAIN key_operation ADD CONSTRAINT key_operation_known CHECK (VALUE IN
    ('create_order', 'cancel_order', 'create_payment', 'checkout', 'create_refund',
     'create_webhook_endpoint', 'rotate_webhook_secret'));
ALTER DOMAIN order_status DROP CONSTRAINT order_status_known;
ALTER DOMAIN order_status ADD CONSTRAINT order_status_known CHECK (VALUE IN
    ('awaiting_payment', 'processing', 'paid', 'canceled', 'partially_refunded', 'refunded'));
ALTER DOMAIN open_attempt_status DROP CONSTRAINT open_attempt_status_known;
ALTER DOMAIN open_attempt_status ADD CONSTRAINT open_attempt_status_known CHECK (VALUE IN
    ('created', 'pending'));
ALTER DOMAIN attempt_status DROP CONSTRAINT attempt_status_known;
ALTER DOMAIN attempt_status ADD CONSTRAINT attempt_status_known CHECK (VALUE IN
    ('created', 'pending', 'succeeded', 'failed'));
