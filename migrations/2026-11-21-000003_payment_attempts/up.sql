-- Payment attempts (one try to charge, one provider idempotency key), their timeline and the
-- log of every provider call. The invariants of docs/DESIGN.md, "Attempts" live here, so they
-- hold whatever writes the rows: the API, a webhook, the reconciler or a person at a psql
-- prompt.

CREATE TABLE payment_attempts (
    merchant_id               uuid        NOT NULL,
    id                        uuid        NOT NULL,
    order_id                  uuid        NOT NULL,
    status                    text        NOT NULL
                              CHECK (status IN ('created', 'pending', 'succeeded', 'failed')),
    -- Copied from the order when the attempt is made (the trigger below), so the charge and
    -- every resend of it carry exactly the same parameters.
    amount                    bigint      NOT NULL CHECK (amount > 0 AND amount <= 1000000000000),
    currency                  text        NOT NULL CHECK (currency ~ '^[a-z]{3}$'),
    payment_method            text        NOT NULL CHECK (length(payment_method) BETWEEN 1 AND 255),
    provider                  text        NOT NULL,
    -- Derived from the attempt id and never changed: every resend of this charge uses it.
    provider_idempotency_key  text        NOT NULL,
    provider_payment_id       text,
    failure_code              text,
    failure_message           text,
    -- The client's Idempotency-Key that made the attempt, so whoever finishes the attempt
    -- (a webhook, the reconciler) can complete that key too.
    idempotency_key           text,
    -- When the reconciler should ask the provider next; NULL once the attempt is final.
    next_check_at             timestamptz,
    checks                    integer     NOT NULL DEFAULT 0,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    finished_at               timestamptz,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id),
    CONSTRAINT payment_attempts_final_is_finished
        CHECK ((status IN ('succeeded', 'failed')) = (finished_at IS NOT NULL)),
    CONSTRAINT payment_attempts_open_is_checked
        CHECK ((status IN ('created', 'pending')) = (next_check_at IS NOT NULL)),
    CONSTRAINT payment_attempts_failed_has_code
        CHECK ((status = 'failed') = (failure_code IS NOT NULL))
);

-- Invariant 1: at most one attempt per order in created|pending.
CREATE UNIQUE INDEX payment_attempts_one_open ON payment_attempts (merchant_id, order_id)
    WHERE status IN ('created', 'pending');
-- Invariant 2: at most one succeeded attempt per order.
CREATE UNIQUE INDEX payment_attempts_one_succeeded ON payment_attempts (merchant_id, order_id)
    WHERE status = 'succeeded';
-- Invariant 4. The provider's key space and charge ids belong to one provider account shared
-- by every merchant, so these two are global rather than per merchant.
CREATE UNIQUE INDEX payment_attempts_provider_key ON payment_attempts (provider, provider_idempotency_key);
CREATE UNIQUE INDEX payment_attempts_provider_payment ON payment_attempts (provider, provider_payment_id);
-- The reconciler's queue.
CREATE INDEX payment_attempts_due ON payment_attempts (next_check_at)
    WHERE status IN ('created', 'pending');
-- An order's attempts, newest first; and lookups by id before the merchant is known
-- (support, webhooks).
CREATE INDEX payment_attempts_order ON payment_attempts (merchant_id, order_id, created_at DESC);
CREATE INDEX payment_attempts_id ON payment_attempts (id);

-- Invariant 5: a new attempt only while its order is awaiting_payment. Making the attempt
-- moves the order to processing in the same statement, so no writer can do one without the
-- other, and two concurrent attempts for one order serialise on the order row.
CREATE FUNCTION payment_attempts_claim_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status <> 'created' THEN
        RAISE EXCEPTION 'a payment attempt starts as created, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_start_created';
    END IF;
    UPDATE orders SET status = 'processing'
        WHERE merchant_id = NEW.merchant_id AND id = NEW.order_id AND status = 'awaiting_payment'
        RETURNING amount, currency INTO NEW.amount, NEW.currency;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order % is not awaiting payment', NEW.order_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_order_payable';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER payment_attempts_claim_order BEFORE INSERT ON payment_attempts
    FOR EACH ROW EXECUTE FUNCTION payment_attempts_claim_order();

-- Invariant 3: created → pending → succeeded | failed, and created → succeeded | failed.
-- A final attempt never changes again; what identifies the charge never changes at all.
CREATE FUNCTION payment_attempts_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER payment_attempts_guard_transition BEFORE UPDATE ON payment_attempts
    FOR EACH ROW EXECUTE FUNCTION payment_attempts_guard_transition();

-- The order follows its attempt: succeeded → paid, failed → awaiting_payment (the payer may
-- try again). In the attempt's own transaction, whichever path finished it.
CREATE FUNCTION payment_attempts_settle_order() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER payment_attempts_settle_order AFTER UPDATE OF status ON payment_attempts
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'failed') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION payment_attempts_settle_order();

-- The timeline: every transition of an attempt, written in the transition's transaction.
CREATE TABLE attempt_events (
    merchant_id  uuid        NOT NULL,
    id           bigint      GENERATED ALWAYS AS IDENTITY,
    attempt_id   uuid        NOT NULL,
    from_status  text        CHECK (from_status IN ('created', 'pending')),
    to_status    text        NOT NULL CHECK (to_status IN ('created', 'pending', 'succeeded', 'failed')),
    source       text        NOT NULL
                 CHECK (source IN ('api', 'provider_response', 'webhook', 'reconciler', 'support')),
    detail       text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts (merchant_id, id)
);

CREATE INDEX attempt_events_attempt ON attempt_events (merchant_id, attempt_id, id);

-- Every call to a provider about an attempt: the payment flow's create, the reconciler's
-- retrieve, resend and search.
CREATE TABLE provider_calls (
    merchant_id  uuid        NOT NULL,
    id           bigint      GENERATED ALWAYS AS IDENTITY,
    attempt_id   uuid        NOT NULL,
    operation    text        NOT NULL CHECK (operation IN ('create', 'retrieve', 'search')),
    source       text        NOT NULL CHECK (source IN ('api', 'reconciler', 'support')),
    outcome      text        NOT NULL
                 CHECK (outcome IN ('succeeded', 'failed', 'pending', 'unknown', 'not_found')),
    http_status  smallint,
    latency_ms   integer     NOT NULL CHECK (latency_ms >= 0),
    detail       text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts (merchant_id, id)
);

CREATE INDEX provider_calls_attempt ON provider_calls (merchant_id, attempt_id, id);
