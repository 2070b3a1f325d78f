-- Merchant events (README, "Events and webhook endpoints"; docs/DESIGN.md, "The outbox").
--
-- The outbox is written by the database itself: a trigger on each resource table writes the
-- event of a change in the statement that makes the change, whoever makes it (a request,
-- our own provider answer, a webhook, the reconciler, support, a person at a psql prompt).
-- So there is no change without its event and no event without its change, and the unique
-- index `events_once` holds "exactly one event per change".
--
-- An event keeps the rows as they were at that moment (`snapshot`, `to_jsonb` of each row);
-- the API and the deliveries show them the way `GET` shows the resource, with the same code.
-- The request that caused a change names itself in the transaction-local setting
-- `payorch.request` (`{"id": …, "idempotency_key": …}`), which the keyed statements set; a
-- change made by anything else (webhook, reconciler, support) has none, and its event's
-- `request` is null.

CREATE DOMAIN event_type AS text
    CONSTRAINT event_type_known CHECK (VALUE IN (
        'payment.pending', 'payment.succeeded', 'payment.failed',
        'refund.succeeded', 'refund.failed',
        'order.paid', 'order.canceled', 'order.refunded'));

-- A UUIDv7 made in the database (the Rust side makes its own with `Uuid::now_v7`), so events
-- written by a trigger sort by time in their indexes like every other id.
CREATE FUNCTION uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    placing substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

CREATE TABLE events (
    id          uuid        NOT NULL DEFAULT uuid_v7() PRIMARY KEY,
    -- The order in which events were written: the list's order and its cursor.
    seq         bigint      GENERATED ALWAYS AS IDENTITY,
    merchant_id uuid        NOT NULL REFERENCES merchants (id),
    type        event_type  NOT NULL,
    -- The payment, refund or order the event is about, and its order (a payment's story).
    resource_id uuid        NOT NULL,
    order_id    uuid        NOT NULL,
    snapshot    jsonb       NOT NULL,
    request     jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX events_seq ON events (seq);
-- Each kind of change happens to a resource at most once (a payment is pending once, final
-- once; an order is paid, canceled or refunded once): one event each, never two.
CREATE UNIQUE INDEX events_once ON events (merchant_id, resource_id, type);
CREATE INDEX events_of_merchant ON events (merchant_id, seq);
CREATE INDEX events_of_order ON events (merchant_id, order_id);
CREATE INDEX events_age ON events (created_at);

CREATE DOMAIN endpoint_status AS text
    CONSTRAINT endpoint_status_known CHECK (VALUE IN ('enabled', 'disabled'));

CREATE TABLE webhook_endpoints (
    merchant_id           uuid            NOT NULL REFERENCES merchants (id),
    id                    uuid            NOT NULL,
    url                   text            NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    -- The merchant's own note (README, "Webhook endpoints").
    description           text            CHECK (length(description) <= 1000),
    -- Event types, or `*` for every type.
    enabled_events        text[]          NOT NULL CHECK (cardinality(enabled_events) > 0
        AND enabled_events <@ ARRAY['*', 'payment.pending', 'payment.succeeded', 'payment.failed',
            'refund.succeeded', 'refund.failed', 'order.paid', 'order.canceled', 'order.refunded']),
    -- `whsec_` and the base64 of the key's bytes (Standard Webhooks).
    secret                text            NOT NULL,
    -- After a rotation the old secret signs beside the new one until `previous_secret_until`.
    previous_secret       text,
    previous_secret_until timestamptz,
    status                endpoint_status NOT NULL DEFAULT 'enabled',
    disabled_reason       text,
    -- The first failed delivery since the last one that succeeded.
    failing_since         timestamptz,
    created_at            timestamptz     NOT NULL DEFAULT now(),
    updated_at            timestamptz     NOT NULL DEFAULT now(),
    -- A deleted endpoint is kept, hidden, so its deliveries stay in the payment's story.
    deleted_at            timestamptz,
    PRIMARY KEY (merchant_id, id),
    CHECK ((previous_secret IS NULL) = (previous_secret_until IS NULL)),
    CHECK ((status = 'disabled') = (disabled_reason IS NOT NULL))
);
CREATE INDEX webhook_endpoints_live ON webhook_endpoints (merchant_id)
    WHERE status = 'enabled' AND deleted_at IS NULL;

CREATE DOMAIN delivery_state AS text
    CONSTRAINT delivery_state_known CHECK (VALUE IN ('pending', 'succeeded', 'failed', 'canceled'));

-- One event to one endpoint, until it is delivered or given up.
CREATE TABLE event_deliveries (
    event_id        uuid           NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    endpoint_id     uuid           NOT NULL,
    merchant_id     uuid           NOT NULL,
    state           delivery_state NOT NULL DEFAULT 'pending',
    attempts        integer        NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- When a worker may take it next; a worker that takes it moves this past its send's
    -- time limit, so a worker that dies mid-send leaves it due again (at least once).
    next_attempt_at timestamptz    NOT NULL DEFAULT now(),
    created_at      timestamptz    NOT NULL DEFAULT now(),
    updated_at      timestamptz    NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, endpoint_id),
    FOREIGN KEY (merchant_id, endpoint_id) REFERENCES webhook_endpoints (merchant_id, id)
);
CREATE INDEX event_deliveries_due ON event_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX event_deliveries_of_endpoint ON event_deliveries (merchant_id, endpoint_id)
    WHERE state = 'pending';

-- Every send of a delivery: what the endpoint answered, or why nothing was sent.
CREATE TABLE delivery_attempts (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id     uuid        NOT NULL,
    endpoint_id  uuid        NOT NULL,
    attempted_at timestamptz NOT NULL DEFAULT now(),
    http_status  smallint,
    latency_ms   milliseconds NOT NULL,
    error        text,
    FOREIGN KEY (event_id, endpoint_id) REFERENCES event_deliveries (event_id, endpoint_id)
        ON DELETE CASCADE
);
CREATE INDEX delivery_attempts_of_delivery ON delivery_attempts (event_id, endpoint_id);

-- Writes one event, and one delivery to each live endpoint of the merchant subscribed to its
-- type, in the caller's statement.
CREATE FUNCTION events_emit(merchant uuid, kind event_type, resource uuid, of_order uuid,
                            snapshot jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    made uuid;
BEGIN
    INSERT INTO events (merchant_id, type, resource_id, order_id, snapshot, request)
    VALUES (merchant, kind, resource, of_order, snapshot,
            NULLIF(current_setting('payorch.request', true), '')::jsonb)
    RETURNING id INTO made;
    INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id)
    SELECT made, e.id, e.merchant_id FROM webhook_endpoints e
    WHERE e.merchant_id = merchant AND e.status = 'enabled' AND e.deleted_at IS NULL
      AND (kind = ANY (e.enabled_events) OR '*' = ANY (e.enabled_events));
END;
$$;

CREATE FUNCTION payment_attempts_emit_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM events_emit(NEW.merchant_id, 'payment.' || NEW.status, NEW.id, NEW.order_id,
        jsonb_build_object('payment', to_jsonb(NEW), 'refunds', COALESCE((
            SELECT jsonb_agg(to_jsonb(r) ORDER BY r.created_at) FROM refunds r
            WHERE r.merchant_id = NEW.merchant_id AND r.payment_id = NEW.id), '[]')));
    RETURN NULL;
END;
$$;

-- Named to sort before `payment_attempts_settle_order`: PostgreSQL fires a table's triggers
-- of one kind in name order, so `payment.succeeded` is written before `order.paid`.
CREATE TRIGGER payment_attempts_emit_event AFTER UPDATE OF status ON payment_attempts
    FOR EACH ROW WHEN (NEW.status <> 'created' AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION payment_attempts_emit_event();
CREATE TRIGGER payment_attempts_emit_event_made AFTER INSERT ON payment_attempts
    FOR EACH ROW WHEN (NEW.status <> 'created')
    EXECUTE FUNCTION payment_attempts_emit_event();

CREATE FUNCTION orders_emit_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM events_emit(NEW.merchant_id, 'order.' || NEW.status, NEW.id, NEW.id,
        jsonb_build_object('order', to_jsonb(NEW), 'payments', COALESCE((
            SELECT jsonb_agg(to_jsonb(a) ORDER BY a.created_at DESC) FROM payment_attempts a
            WHERE a.merchant_id = NEW.merchant_id AND a.order_id = NEW.id), '[]')));
    RETURN NULL;
END;
$$;

CREATE TRIGGER orders_emit_event AFTER UPDATE OF status ON orders
    FOR EACH ROW WHEN (NEW.status IN ('paid', 'canceled', 'refunded')
                       AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION orders_emit_event();

CREATE FUNCTION refunds_emit_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM events_emit(NEW.merchant_id, 'refund.' || NEW.status, NEW.id, NEW.order_id,
        jsonb_build_object('refund', to_jsonb(NEW)));
    RETURN NULL;
END;
$$;

-- Before `refunds_settle_order` by name: `refund.succeeded` is written before `order.refunded`.
CREATE TRIGGER refunds_emit_event AFTER UPDATE OF status ON refunds
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'failed') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION refunds_emit_event();
CREATE TRIGGER refunds_emit_event_made AFTER INSERT ON refunds
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'failed'))
    EXECUTE FUNCTION refunds_emit_event();

-- Webhook endpoints are made and their secrets rotated under an Idempotency-Key, as every
-- state-changing POST (README, "Webhook endpoints"; docs/DESIGN.md, "The write path").
ALTER DOMAIN key_operation DROP CONSTRAINT key_operation_known;
ALTER DOMAIN key_operation ADD CONSTRAINT key_operation_known CHECK (VALUE IN
    ('create_order', 'cancel_order', 'create_payment', 'checkout', 'create_refund',
     'create_webhook_endpoint', 'rotate_webhook_secret'));

-- At most 16 endpoints per merchant that are not deleted (enabled or disabled), held here so
-- that two registrations at once cannot both take the last place: the merchant's row is
-- locked first, and the count, taken after the lock by a statement of its own, sees every
-- endpoint committed before it (`events::endpoints::MAX_ENDPOINTS` says the same number).
CREATE FUNCTION webhook_endpoints_limit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM merchants WHERE id = NEW.merchant_id FOR NO KEY UPDATE;
    IF (SELECT count(*) FROM webhook_endpoints
        WHERE merchant_id = NEW.merchant_id AND deleted_at IS NULL) >= 16 THEN
        RAISE EXCEPTION 'merchant % has 16 webhook endpoints already', NEW.merchant_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_endpoints_limit';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER webhook_endpoints_limit BEFORE INSERT ON webhook_endpoints
    FOR EACH ROW EXECUTE FUNCTION webhook_endpoints_limit();
