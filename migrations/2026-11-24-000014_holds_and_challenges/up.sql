-- Cards as they are paid today (README, "3-D Secure", "Authorize now, capture later";
-- docs/DESIGN.md, "Holds and challenges"): a payment may stop for a 3-D Secure challenge, and
-- a manual-capture payment holds money that is captured, or released, later.
--
-- The attempt machine grows one way:
--   created → pending → succeeded | failed            (automatic capture, as before)
--   created | pending → authorized → succeeded | canceled    (a hold, then its capture or void)
--   created | pending → canceled                      (a challenge abandoned, a payment voided
--                                                      before it was authorized)
-- `authorized` is open (money held, not taken); `succeeded`, `failed` and `canceled` are final.
-- A capture or a void is a provider call of its own, with its own idempotency key and its own
-- unknown outcomes: a row of `hold_operations`, at most one live per hold.

CREATE DOMAIN capture_method AS text
    CONSTRAINT capture_method_known CHECK (VALUE IN ('automatic', 'manual'));

ALTER DOMAIN attempt_status DROP CONSTRAINT attempt_status_known;
ALTER DOMAIN attempt_status ADD CONSTRAINT attempt_status_known CHECK (VALUE IN
    ('created', 'pending', 'authorized', 'succeeded', 'failed', 'canceled'));
-- A timeline row's from_status: an open attempt, now including a hold.
ALTER DOMAIN open_attempt_status DROP CONSTRAINT open_attempt_status_known;
ALTER DOMAIN open_attempt_status ADD CONSTRAINT open_attempt_status_known CHECK (VALUE IN
    ('created', 'pending', 'authorized'));
ALTER DOMAIN order_status DROP CONSTRAINT order_status_known;
ALTER DOMAIN order_status ADD CONSTRAINT order_status_known CHECK (VALUE IN
    ('awaiting_payment', 'processing', 'authorized', 'paid', 'canceled', 'partially_refunded',
     'refunded'));
ALTER DOMAIN key_operation DROP CONSTRAINT key_operation_known;
ALTER DOMAIN key_operation ADD CONSTRAINT key_operation_known CHECK (VALUE IN
    ('create_order', 'cancel_order', 'create_payment', 'checkout', 'create_refund',
     'create_webhook_endpoint', 'rotate_webhook_secret', 'capture_payment', 'cancel_payment'));
ALTER DOMAIN provider_operation DROP CONSTRAINT provider_operation_known;
ALTER DOMAIN provider_operation ADD CONSTRAINT provider_operation_known CHECK (VALUE IN
    ('create', 'retrieve', 'search', 'create_refund', 'retrieve_refund', 'capture', 'cancel',
     'complete_action'));
ALTER DOMAIN provider_outcome DROP CONSTRAINT provider_outcome_known;
ALTER DOMAIN provider_outcome ADD CONSTRAINT provider_outcome_known CHECK (VALUE IN
    ('succeeded', 'failed', 'pending', 'unknown', 'not_found', 'unavailable', 'authorized',
     'requires_action', 'canceled'));
ALTER DOMAIN event_type DROP CONSTRAINT event_type_known;
ALTER DOMAIN event_type ADD CONSTRAINT event_type_known CHECK (VALUE IN (
    'payment.pending', 'payment.requires_action', 'payment.authorized', 'payment.succeeded',
    'payment.failed', 'payment.canceled',
    'refund.succeeded', 'refund.failed',
    'order.paid', 'order.canceled', 'order.refunded'));

-- Endpoints may subscribe to the new types.
ALTER TABLE webhook_endpoints
    DROP CONSTRAINT webhook_endpoints_enabled_events_check,
    ADD CONSTRAINT webhook_endpoints_enabled_events_check CHECK (cardinality(enabled_events) > 0
        AND enabled_events <@ ARRAY['*', 'payment.pending', 'payment.requires_action',
            'payment.authorized', 'payment.succeeded', 'payment.failed', 'payment.canceled',
            'refund.succeeded', 'refund.failed', 'order.paid', 'order.canceled', 'order.refunded']);

ALTER TABLE payment_attempts
    ADD COLUMN capture_method capture_method NOT NULL DEFAULT 'automatic',
    -- What a manual capture took (at most what was authorized: the attempt's amount); NULL
    -- until then. An automatic capture takes the whole amount and leaves it NULL.
    ADD COLUMN amount_captured amount_minor,
    -- The redirect the payer must follow while the provider waits for a challenge
    -- (`{url, return_url}`); kept after the challenge as part of the attempt's story.
    ADD COLUMN next_action json_object,
    -- Where payorch sends the payer back after a challenge (the client's `return_url`).
    ADD COLUMN return_url text,
    -- Until when the provider holds the money of an `authorized` attempt.
    ADD COLUMN authorized_until timestamptz,
    -- Why an attempt was canceled: `voided`, `challenge_abandoned`, `authorization_expired`, or
    -- the provider's own reason.
    ADD COLUMN cancellation_reason short_text,
    DROP CONSTRAINT payment_attempts_final_is_finished,
    DROP CONSTRAINT payment_attempts_open_is_checked,
    ADD CONSTRAINT payment_attempts_final_is_finished
        CHECK ((status IN ('succeeded', 'failed', 'canceled')) = (finished_at IS NOT NULL)),
    -- A hold is open work too: the reconciler looks at it before it expires.
    ADD CONSTRAINT payment_attempts_open_is_checked
        CHECK ((status IN ('created', 'pending', 'authorized')) = (next_check_at IS NOT NULL)),
    ADD CONSTRAINT payment_attempts_captured_within_authorized
        CHECK (amount_captured <= amount),
    ADD CONSTRAINT payment_attempts_captured_only_manual
        CHECK (amount_captured IS NULL OR (capture_method = 'manual' AND status = 'succeeded')),
    ADD CONSTRAINT payment_attempts_canceled_has_reason
        CHECK ((status = 'canceled') = (cancellation_reason IS NOT NULL));

-- Invariant 1 now counts an open hold: an order with money held has no second attempt.
DROP INDEX payment_attempts_one_open;
CREATE UNIQUE INDEX payment_attempts_one_open ON payment_attempts (merchant_id, order_id)
    WHERE status IN ('created', 'pending', 'authorized');
DROP INDEX payment_attempts_due;
CREATE INDEX payment_attempts_due ON payment_attempts (next_check_at)
    WHERE status IN ('created', 'pending', 'authorized');

-- Captures and voids of holds. One row is one provider call with its own key, resent with
-- the same key until the provider answers, like a refund (docs/DESIGN.md, "Holds and
-- challenges").
CREATE DOMAIN hold_operation_kind AS text
    CONSTRAINT hold_operation_kind_known CHECK (VALUE IN ('capture', 'void'));

CREATE TABLE hold_operations (
    merchant_id               uuid                NOT NULL,
    id                        uuid                NOT NULL,
    payment_id                uuid                NOT NULL,
    order_id                  uuid                NOT NULL,
    kind                      hold_operation_kind NOT NULL,
    status                    refund_status       NOT NULL,
    -- A capture's amount: NULL on insert means the whole hold (filled in by the trigger);
    -- always NULL for a void.
    amount                    amount_minor,
    currency                  currency_code       NOT NULL,
    provider                  provider_name       NOT NULL,
    -- Derived from the operation's id and never changed: every resend uses it.
    provider_idempotency_key  text                NOT NULL,
    failure_code              text,
    failure_message           text,
    -- Who asked: the merchant's API, support, or the reconciler voiding an expiring hold or
    -- an abandoned challenge.
    source                    transition_source   NOT NULL,
    reason                    short_text,
    -- The client's Idempotency-Key that asked for it, completed by whoever finishes it.
    idempotency_key           text,
    next_check_at             timestamptz,
    checks                    integer             NOT NULL DEFAULT 0,
    created_at                timestamptz         NOT NULL DEFAULT now(),
    updated_at                timestamptz         NOT NULL DEFAULT now(),
    finished_at               timestamptz,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, payment_id) REFERENCES payment_attempts (merchant_id, id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id),
    CONSTRAINT hold_operations_amount_for_capture CHECK ((kind = 'capture') = (amount IS NOT NULL)),
    CONSTRAINT hold_operations_final_is_finished
        CHECK ((status IN ('succeeded', 'failed')) = (finished_at IS NOT NULL)),
    CONSTRAINT hold_operations_open_is_checked
        CHECK ((status IN ('created', 'pending')) = (next_check_at IS NOT NULL)),
    CONSTRAINT hold_operations_failed_has_code
        CHECK ((status = 'failed') = (failure_code IS NOT NULL))
);

-- At most one capture per hold, and never a capture and a void of the same hold: one
-- operation per payment that has not definitively failed.
CREATE UNIQUE INDEX hold_operations_one_per_hold ON hold_operations (merchant_id, payment_id)
    WHERE status <> 'failed';
CREATE UNIQUE INDEX hold_operations_provider_key ON hold_operations (provider, provider_idempotency_key);
CREATE INDEX hold_operations_payment ON hold_operations (merchant_id, payment_id, created_at);
CREATE INDEX hold_operations_due ON hold_operations (next_check_at) WHERE status IN ('created', 'pending');
CREATE INDEX hold_operations_id ON hold_operations (id);

-- An operation starts `created`, on a payment that is `authorized` (a void also on one still
-- `pending`: a challenge abandoned), and a capture takes at most what was authorized. The
-- payment's row is locked (`FOR NO KEY UPDATE`), so two operations of one hold serialise and
-- the unique index above refuses the second.
CREATE FUNCTION hold_operations_check_hold() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    held payment_attempts;
BEGIN
    IF NEW.status <> 'created' THEN
        RAISE EXCEPTION 'a hold operation starts as created, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_start_created';
    END IF;
    SELECT * INTO held FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.payment_id FOR NO KEY UPDATE;
    IF NOT FOUND OR NOT (held.status = 'authorized'
                         OR (NEW.kind = 'void' AND held.status = 'pending')) THEN
        RAISE EXCEPTION 'payment attempt % is % and holds nothing to %', NEW.payment_id,
                COALESCE(held.status, 'missing'), NEW.kind
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_payment_held';
    END IF;
    IF NEW.kind = 'capture' THEN
        IF held.capture_method <> 'manual' THEN
            RAISE EXCEPTION 'payment attempt % is captured automatically', NEW.payment_id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_payment_held';
        END IF;
        NEW.amount := COALESCE(NEW.amount, held.amount);
        IF NEW.amount > held.amount THEN
            RAISE EXCEPTION 'payment attempt % authorized %, not %', NEW.payment_id, held.amount, NEW.amount
                USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_capture_within_hold';
        END IF;
    END IF;
    NEW.order_id := held.order_id;
    NEW.currency := held.currency;
    NEW.provider := held.provider;
    RETURN NEW;
END;
$$;

CREATE TRIGGER hold_operations_check_hold BEFORE INSERT ON hold_operations
    FOR EACH ROW EXECUTE FUNCTION hold_operations_check_hold();

-- created → pending → succeeded | failed, and created → succeeded | failed, like a refund.
CREATE FUNCTION hold_operations_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status IN ('succeeded', 'failed') THEN
        RAISE EXCEPTION 'hold operation % is % and final', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_final';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'created' AND NEW.status IN ('pending', 'succeeded', 'failed')) OR
        (OLD.status = 'pending' AND NEW.status IN ('succeeded', 'failed'))
    ) THEN
        RAISE EXCEPTION 'hold operation % cannot move from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_status_transition';
    END IF;
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id OR NEW.payment_id <> OLD.payment_id
       OR NEW.order_id <> OLD.order_id OR NEW.kind <> OLD.kind
       OR NEW.amount IS DISTINCT FROM OLD.amount OR NEW.currency <> OLD.currency
       OR NEW.provider <> OLD.provider
       OR NEW.provider_idempotency_key <> OLD.provider_idempotency_key
       OR NEW.source <> OLD.source OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'hold operation % may change only its status and what the provider said', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_immutable';
    END IF;
    NEW.updated_at := now();
    IF NEW.status IN ('succeeded', 'failed') THEN
        NEW.finished_at := now();
        NEW.next_check_at := NULL;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER hold_operations_guard_transition BEFORE UPDATE ON hold_operations
    FOR EACH ROW EXECUTE FUNCTION hold_operations_guard_transition();

-- The attempt machine above. A final attempt never changes again, but for `refund_held`, which
-- only the refunds' triggers set (as before). `amount_captured` is written once, by the move
-- authorized → succeeded; when the writer does not say, the live capture's amount, else the
-- whole hold (a webhook that tells of a capture carries no operation). Likewise a move to
-- `canceled` takes the reason of the live void, when payorch asked for one.
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
    IF OLD.status IN ('succeeded', 'failed', 'canceled') THEN
        RAISE EXCEPTION 'payment attempt % is % and final', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_final';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'created' AND NEW.status IN ('pending', 'authorized', 'succeeded', 'failed', 'canceled')) OR
        (OLD.status = 'pending' AND NEW.status IN ('authorized', 'succeeded', 'failed', 'canceled')) OR
        (OLD.status = 'authorized' AND NEW.status IN ('succeeded', 'canceled'))
    ) THEN
        RAISE EXCEPTION 'payment attempt % cannot move from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_status_transition';
    END IF;
    IF NEW.status = 'authorized' AND NEW.capture_method <> 'manual' THEN
        RAISE EXCEPTION 'payment attempt % is captured automatically and holds nothing', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_status_transition';
    END IF;
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id OR NEW.order_id <> OLD.order_id
       OR NEW.amount <> OLD.amount OR NEW.currency <> OLD.currency
       OR NEW.payment_method <> OLD.payment_method OR NEW.provider <> OLD.provider
       OR NEW.provider_idempotency_key <> OLD.provider_idempotency_key
       OR NEW.capture_method <> OLD.capture_method
       OR NEW.return_url IS DISTINCT FROM OLD.return_url
       OR NEW.created_at <> OLD.created_at
       OR (OLD.provider_payment_id IS NOT NULL
           AND NEW.provider_payment_id IS DISTINCT FROM OLD.provider_payment_id)
       OR (NEW.amount_captured IS DISTINCT FROM OLD.amount_captured
           AND NOT (OLD.status = 'authorized' AND NEW.status = 'succeeded')) THEN
        RAISE EXCEPTION 'payment attempt % may change only its status and what the provider said', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_immutable';
    END IF;
    IF OLD.status = 'authorized' AND NEW.status = 'succeeded' AND NEW.amount_captured IS NULL THEN
        NEW.amount_captured := COALESCE((
            SELECT o.amount FROM hold_operations o
            WHERE o.merchant_id = OLD.merchant_id AND o.payment_id = OLD.id
              AND o.kind = 'capture' AND o.status <> 'failed'), OLD.amount);
    END IF;
    -- A release payorch asked for says why, whoever tells of it first (the provider's webhook
    -- often arrives before the void's own answer).
    IF NEW.status = 'canceled' THEN
        NEW.cancellation_reason := COALESCE((
            SELECT o.reason FROM hold_operations o
            WHERE o.merchant_id = OLD.merchant_id AND o.payment_id = OLD.id
              AND o.kind = 'void' AND o.status <> 'failed'), NEW.cancellation_reason);
    END IF;
    NEW.updated_at := now();
    IF NEW.status IN ('succeeded', 'failed', 'canceled') THEN
        NEW.finished_at := now();
        NEW.next_check_at := NULL;
    END IF;
    RETURN NEW;
END;
$$;

-- The order state machine: a hold makes the order `authorized` (money held, nothing taken);
-- its capture pays it, and its void, like a failure, makes it payable again.
CREATE OR REPLACE FUNCTION orders_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'awaiting_payment' AND NEW.status IN ('processing', 'canceled')) OR
        (OLD.status = 'processing' AND NEW.status IN ('authorized', 'paid', 'awaiting_payment')) OR
        (OLD.status = 'authorized' AND NEW.status IN ('paid', 'awaiting_payment')) OR
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

-- The order follows its attempt, whichever path moved it.
CREATE OR REPLACE FUNCTION payment_attempts_settle_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE orders
        SET status = CASE NEW.status WHEN 'succeeded' THEN 'paid'
                                     WHEN 'authorized' THEN 'authorized'
                                     ELSE 'awaiting_payment' END
        WHERE merchant_id = NEW.merchant_id AND id = NEW.order_id
          AND status IN ('processing', 'authorized');
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order % of payment attempt % is not processing', NEW.order_id, NEW.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_order_processing';
    END IF;
    RETURN NULL;
END;
$$;

DROP TRIGGER payment_attempts_settle_order ON payment_attempts;
CREATE TRIGGER payment_attempts_settle_order AFTER UPDATE OF status ON payment_attempts
    FOR EACH ROW WHEN (NEW.status IN ('authorized', 'succeeded', 'failed', 'canceled')
                       AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION payment_attempts_settle_order();

-- A refund takes back at most what was captured: the whole amount of an automatic capture,
-- `amount_captured` of a manual one.
CREATE OR REPLACE FUNCTION refunds_hold_amount() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    left_to_refund bigint;
BEGIN
    IF NEW.status <> 'created' THEN
        RAISE EXCEPTION 'a refund starts as created, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_start_created';
    END IF;
    SELECT COALESCE(amount_captured, amount) - refund_held INTO left_to_refund FROM payment_attempts
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

-- An order is refunded once its refunds add up to what was captured.
CREATE OR REPLACE FUNCTION refunds_settle_order() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    refunded bigint;
    paid bigint;
BEGIN
    SELECT COALESCE(sum(amount), 0) INTO refunded FROM refunds
        WHERE merchant_id = NEW.merchant_id AND payment_id = NEW.payment_id AND status = 'succeeded';
    SELECT COALESCE(amount_captured, amount) INTO paid FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.payment_id;
    UPDATE orders
        SET status = CASE WHEN refunded >= paid THEN 'refunded' ELSE 'partially_refunded' END
        WHERE merchant_id = NEW.merchant_id AND id = NEW.order_id
          AND status IN ('paid', 'partially_refunded');
    RETURN NULL;
END;
$$;

-- A payment that stops for a challenge says so once: `payment.requires_action`, written in
-- the statement that records the redirect (after `payment.pending` when both are in one).
CREATE FUNCTION payment_attempts_emit_action() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM events_emit(NEW.merchant_id, 'payment.requires_action', NEW.id, NEW.order_id,
        jsonb_build_object('payment', to_jsonb(NEW), 'refunds', '[]'::jsonb));
    RETURN NULL;
END;
$$;

CREATE TRIGGER payment_attempts_emit_event_action AFTER UPDATE OF next_action ON payment_attempts
    FOR EACH ROW WHEN (OLD.next_action IS NULL AND NEW.next_action IS NOT NULL
                       AND NEW.status = 'pending')
    EXECUTE FUNCTION payment_attempts_emit_action();

-- A key whose payment holds money, or whose capture or void is not answered yet, is open
-- work: kept, never retired or reused (README, "Idempotency").
CREATE OR REPLACE FUNCTION idempotency_key_work_is_open(k idempotency_keys) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT k.state = 'in_flight' OR k.unresolved OR CASE k.resource_type
        WHEN 'payment_attempt' THEN EXISTS (
            SELECT 1 FROM payment_attempts a
            WHERE a.merchant_id = k.merchant_id AND a.id = k.resource_id
              AND a.status IN ('created', 'pending', 'authorized'))
        WHEN 'refund' THEN EXISTS (
            SELECT 1 FROM refunds r
            WHERE r.merchant_id = k.merchant_id AND r.id = k.resource_id
              AND r.status IN ('created', 'pending'))
        WHEN 'hold_operation' THEN EXISTS (
            SELECT 1 FROM hold_operations o
            WHERE o.merchant_id = k.merchant_id AND o.id = k.resource_id
              AND o.status IN ('created', 'pending'))
        ELSE false END
$$;

CREATE OR REPLACE FUNCTION idempotency_key_made_money_move(k idempotency_keys) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(k.resource_type IN ('payment_attempt', 'refund', 'hold_operation'), false)
$$;

-- A provider call about a capture or a void shows in its payment's story, beside the call.
ALTER TABLE provider_calls ADD COLUMN hold_operation_id uuid;
ALTER TABLE provider_calls ADD CONSTRAINT provider_calls_hold_operation
    FOREIGN KEY (merchant_id, hold_operation_id) REFERENCES hold_operations (merchant_id, id);
