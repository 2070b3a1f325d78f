-- Orders (what the payer buys) and the Idempotency-Key records of state-changing requests.
-- Both are merchant data: merchant_id leads every key, so tenancy holds in SQL and the
-- tables can be distributed by merchant.

CREATE TABLE orders (
    merchant_id         uuid        NOT NULL REFERENCES merchants (id),
    id                  uuid        NOT NULL,
    amount              bigint      NOT NULL CHECK (amount > 0 AND amount <= 1000000000000),
    currency            text        NOT NULL CHECK (currency ~ '^[a-z]{3}$'),
    status              text        NOT NULL DEFAULT 'awaiting_payment'
                        CHECK (status IN ('awaiting_payment', 'processing', 'paid', 'canceled')),
    merchant_reference  text        CHECK (length(merchant_reference) BETWEEN 1 AND 255),
    description         text        CHECK (length(description) <= 1000),
    metadata            jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, id),
    -- For ever, not only while an idempotency key lives.
    CONSTRAINT orders_merchant_reference_key UNIQUE (merchant_id, merchant_reference)
);

-- Support looks orders up by id before it knows the merchant.
CREATE INDEX orders_id ON orders (id);

-- The order state machine, held by the database whatever writes the row:
-- awaiting_payment → processing → paid; processing → awaiting_payment (its attempt failed);
-- awaiting_payment → canceled. paid and canceled are terminal.
CREATE FUNCTION orders_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER orders_guard_transition BEFORE UPDATE ON orders
    FOR EACH ROW EXECUTE FUNCTION orders_guard_transition();

CREATE TABLE idempotency_keys (
    merchant_id      uuid        NOT NULL REFERENCES merchants (id),
    key              text        NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    operation        text        NOT NULL
                     CHECK (operation IN ('create_order', 'cancel_order', 'create_payment', 'checkout')),
    -- SHA-256 of method, path and canonical JSON body.
    fingerprint      bytea       NOT NULL CHECK (octet_length(fingerprint) = 32),
    state            text        NOT NULL CHECK (state IN ('in_flight', 'completed')),
    -- While in flight: the request that holds the key until then; a retry after it takes over.
    locked_until     timestamptz,
    -- How far a multi-step operation got, so a takeover resumes instead of redoing.
    recovery_point   text        NOT NULL DEFAULT 'started',
    resource_type    text,
    resource_id      uuid,
    response_status  smallint,
    response_body    jsonb,
    -- The work behind a completed key may still be open (a pending payment); such a key is
    -- never reaped, whatever its age.
    unresolved       boolean     NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    PRIMARY KEY (merchant_id, key),
    CONSTRAINT idempotency_keys_completed_has_response
        CHECK ((state = 'completed') = (response_status IS NOT NULL)),
    CONSTRAINT idempotency_keys_in_flight_has_lease
        CHECK (state <> 'in_flight' OR locked_until IS NOT NULL)
);

-- The reaper's scan, and the per-merchant rate of new keys.
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at) WHERE state = 'completed' AND NOT unresolved;
CREATE INDEX idempotency_keys_recent ON idempotency_keys (merchant_id, created_at);
