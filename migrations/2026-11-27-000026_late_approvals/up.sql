-- Late approvals (docs/guides/declines.md, "Late approvals"): a provider says it approved a
-- charge payorch holds as failed (told by its webhook or notification). payorch told the merchant
-- nothing was taken, and a retry may have charged the payer at another provider since: the
-- money is given back at once, by a void of the hold or a refund of the capture, the
-- merchant is told, and support lists every one for a human to confirm with the provider.
--
-- A new table, so nothing here waits on a lock of a busy table but the foreign keys' brief
-- SHARE ROW EXCLUSIVE on payment_attempts and orders; bounded as migration 000024 bounds its.
SET LOCAL lock_timeout = '5s';

-- What the provider said it did: holds the money (`authorized`, a manual capture's hold) or
-- took it (`succeeded`). Which one decides the undo: a void of a hold, a refund of a capture.
CREATE DOMAIN late_approval_kind AS text
    CONSTRAINT late_approval_kind_known CHECK (VALUE IN ('authorized', 'succeeded'));

-- undoing → voided | refunded | undo_failed, one way (`late_approvals_guard_transition`).
CREATE DOMAIN late_approval_status AS text
    CONSTRAINT late_approval_status_known
    CHECK (VALUE IN ('undoing', 'voided', 'refunded', 'undo_failed'));

-- Who told: the provider's webhook (or notification), the one way payorch learns of a late
-- approval today: the reconciler looks only at attempts still open, and an answer to payorch's
-- own request about an attempt already failed is dropped. A later way adds its word here.
-- A list of one, written as a list: `IN ('webhook')` would be stored as `= 'webhook'`, which
-- tests/api/schema_mirrors.rs cannot hold to `LateSource` as it holds every other list.
CREATE DOMAIN late_approval_source AS text
    CONSTRAINT late_approval_source_known CHECK (VALUE = ANY (ARRAY['webhook']));

CREATE TABLE late_approvals (
    merchant_id         uuid                 NOT NULL,
    id                  uuid                 NOT NULL,
    attempt_id          uuid                 NOT NULL,
    order_id            uuid                 NOT NULL,
    provider            provider_name        NOT NULL,
    -- The provider's charge the approval is about: the one voided or refunded.
    provider_payment_id text                 NOT NULL,
    amount              amount_minor         NOT NULL,
    currency            currency_code        NOT NULL,
    approved_as         late_approval_kind   NOT NULL,
    source              late_approval_source NOT NULL,
    status              late_approval_status NOT NULL DEFAULT 'undoing',
    -- What the last answer of the provider said, for the human who confirms it.
    detail              text,
    -- The provider's id of the void (the charge's own id) or of the refund.
    provider_undo_id    text,
    -- The due queue of the reconciler (`payments::due`): an undo whose answer was unknown, or
    -- that was never sent (a crash right after the row was committed), is asked again with
    -- the same provider keys (`payorch_<id>_void`, `payorch_<id>_refund`).
    next_check_at       timestamptz,
    checks              integer              NOT NULL DEFAULT 0,
    detected_at         timestamptz          NOT NULL DEFAULT now(),
    undone_at           timestamptz,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts (merchant_id, id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id),
    CONSTRAINT late_approvals_open_is_checked
        CHECK ((status = 'undoing') = (next_check_at IS NOT NULL)),
    CONSTRAINT late_approvals_final_is_finished
        CHECK ((status = 'undoing') = (undone_at IS NULL))
);
-- One late approval per attempt: the same news told twice (a redelivery, another event of the
-- same charge, a webhook and a lookup) makes one row, and so one undo.
CREATE UNIQUE INDEX late_approvals_once ON late_approvals (merchant_id, attempt_id);
CREATE INDEX late_approvals_due ON late_approvals (next_check_at) WHERE status IN ('undoing');
-- Support's list, newest first.
CREATE INDEX late_approvals_detected ON late_approvals (detected_at);

-- One way, and only the status and what the provider said may change.
CREATE FUNCTION late_approvals_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'undoing' THEN
        RAISE EXCEPTION 'late approval % is % and final', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'late_approvals_final';
    END IF;
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id
       OR NEW.attempt_id <> OLD.attempt_id OR NEW.order_id <> OLD.order_id
       OR NEW.provider <> OLD.provider OR NEW.provider_payment_id <> OLD.provider_payment_id
       OR NEW.amount <> OLD.amount OR NEW.currency <> OLD.currency
       OR NEW.approved_as <> OLD.approved_as OR NEW.source <> OLD.source
       OR NEW.detected_at <> OLD.detected_at THEN
        RAISE EXCEPTION 'late approval % may change only its status and what the provider said', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'late_approvals_immutable';
    END IF;
    IF NEW.status <> 'undoing' THEN
        NEW.undone_at := now();
        NEW.next_check_at := NULL;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER late_approvals_guard_transition BEFORE UPDATE ON late_approvals
    FOR EACH ROW EXECUTE FUNCTION late_approvals_guard_transition();

-- Only of an attempt payorch holds as failed: that is the money taken unasked. An approval
-- of an attempt canceled by payorch's own void is that void's business.
CREATE FUNCTION late_approvals_of_a_failure() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.attempt_id AND status = 'failed'
          AND order_id = NEW.order_id AND provider = NEW.provider
          AND amount = NEW.amount AND currency = NEW.currency;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'attempt % is not a failed attempt of order % at % for % %',
            NEW.attempt_id, NEW.order_id, NEW.provider, NEW.amount, NEW.currency
            USING ERRCODE = 'check_violation', CONSTRAINT = 'late_approvals_of_a_failure';
    END IF;
    IF NEW.status <> 'undoing' THEN
        RAISE EXCEPTION 'a late approval starts undoing, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'late_approvals_start_undoing';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER late_approvals_of_a_failure BEFORE INSERT ON late_approvals
    FOR EACH ROW EXECUTE FUNCTION late_approvals_of_a_failure();

-- The merchant is told in the statement that makes the change, as for every other event
-- (migration 000013): `late_approval.detected` with the row, then `late_approval.voided`,
-- `late_approval.refunded` or `late_approval.undo_failed` when the undo ends.
--
-- NOT VALID, both, for migration 000023's reason: a list that only grows cannot refuse a
-- stored value, and proving it would scan every merchant event (and endpoint) under a lock
-- that stops their writes, checkouts among them (their triggers emit events), for the whole
-- scan, while the previous release's replicas serve. A value written from now on is checked
-- all the same.
ALTER DOMAIN event_type DROP CONSTRAINT event_type_known;
ALTER DOMAIN event_type ADD CONSTRAINT event_type_known CHECK (VALUE IN (
    'payment.pending', 'payment.requires_action', 'payment.authorized', 'payment.succeeded',
    'payment.failed', 'payment.canceled',
    'refund.succeeded', 'refund.failed',
    'order.paid', 'order.canceled', 'order.refunded',
    'late_approval.detected', 'late_approval.voided', 'late_approval.refunded',
    'late_approval.undo_failed')) NOT VALID;

ALTER TABLE webhook_endpoints
    DROP CONSTRAINT webhook_endpoints_enabled_events_check,
    ADD CONSTRAINT webhook_endpoints_enabled_events_check CHECK (cardinality(enabled_events) > 0
        AND enabled_events <@ ARRAY['*', 'payment.pending', 'payment.requires_action',
            'payment.authorized', 'payment.succeeded', 'payment.failed', 'payment.canceled',
            'refund.succeeded', 'refund.failed', 'order.paid', 'order.canceled', 'order.refunded',
            'late_approval.detected', 'late_approval.voided', 'late_approval.refunded',
            'late_approval.undo_failed']) NOT VALID;

CREATE FUNCTION late_approvals_emit_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM events_emit(NEW.merchant_id,
        CASE NEW.status WHEN 'undoing' THEN 'late_approval.detected'
                        ELSE 'late_approval.' || NEW.status END,
        NEW.id, NEW.order_id, jsonb_build_object('late_approval', to_jsonb(NEW)));
    RETURN NULL;
END;
$$;

CREATE TRIGGER late_approvals_emit_event_made AFTER INSERT ON late_approvals
    FOR EACH ROW EXECUTE FUNCTION late_approvals_emit_event();
CREATE TRIGGER late_approvals_emit_event AFTER UPDATE OF status ON late_approvals
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION late_approvals_emit_event();
