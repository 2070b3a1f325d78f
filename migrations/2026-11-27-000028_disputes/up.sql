-- Disputes (docs/guides/disputes.md): a payer's bank takes a payment's money back (a
-- chargeback) or asks about it first (an inquiry). Stripe's `charge.dispute.*` events and
-- Adyen's chargeback notifications are folded into one state machine, Stripe's seven
-- statuses, which this migration enforces whatever writes the rows.
--
-- The rule that matters is the refunds' own (migration 000009): never more back than was
-- taken. A chargeback gives the payer the money back as surely as a refund does, so while a
-- dispute holds its amount (needs_response, under_review, lost) it is kept on the payment's
-- row (`payment_attempts.dispute_held`) under the same row lock the refunds take, and the
-- refund cap counts it: no refund may return money a chargeback already returned.
--
-- New tables, and one column with a constant default (no rewrite of payment_attempts): the
-- brief ACCESS EXCLUSIVE lock of that ALTER and the foreign keys' SHARE ROW EXCLUSIVE must
-- not queue behind a long transaction while checkouts queue behind them.
SET LOCAL lock_timeout = '5s';

-- Stripe's words (its `dispute.status`), documented and well known; Adyen's notifications map
-- onto them (src/providers/adyen/notification.rs).
CREATE DOMAIN dispute_status AS text
    CONSTRAINT dispute_status_known CHECK (VALUE IN ('warning_needs_response',
        'warning_under_review', 'warning_closed', 'needs_response', 'under_review', 'won', 'lost'));

-- How far the dispute went, in this order: a status may stay and the stage move on (lost at
-- the chargeback, then lost again at pre-arbitration), never back. `arbitration` is the card
-- scheme's ruling (Adyen's SCHEME_ARBITRATION_WON and _LOST), which ends it either way.
CREATE DOMAIN dispute_stage AS text
    CONSTRAINT dispute_stage_known CHECK (VALUE IN ('inquiry', 'chargeback',
        'second_chargeback', 'pre_arbitration', 'arbitration'));

-- Stripe's reason words; the provider's own reason is kept beside it (`provider_reason`).
CREATE DOMAIN dispute_reason AS text
    CONSTRAINT dispute_reason_known CHECK (VALUE IN ('bank_cannot_process',
        'credit_not_processed', 'customer_initiated', 'debit_not_authorized', 'duplicate',
        'fraudulent', 'general', 'incorrect_account_details', 'insufficient_funds',
        'product_not_received', 'product_unacceptable', 'subscription_canceled', 'unrecognized'));

-- The order of the stages, for the guard below and the domain's own judgement.
CREATE FUNCTION dispute_stage_rank(stage dispute_stage) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE stage WHEN 'inquiry' THEN 0 WHEN 'chargeback' THEN 1
                      WHEN 'second_chargeback' THEN 2 WHEN 'pre_arbitration' THEN 3
                      WHEN 'arbitration' THEN 4 END
$$;

-- The payer has the money back: a chargeback not (yet) reversed. An inquiry (warning_*)
-- moves no money, and a won dispute gives it back.
CREATE FUNCTION dispute_holds(status dispute_status) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT status IN ('needs_response', 'under_review', 'lost')
$$;

-- What the payment's open or lost disputes took back. Only `disputes_hold_amount` writes it.
ALTER TABLE payment_attempts ADD COLUMN dispute_held held_amount NOT NULL DEFAULT 0;

-- The attempt guard of migration 000014, now also letting `dispute_held` change, and only from
-- the disputes' trigger, whatever the attempt's status: a dispute may come on a charge payorch
-- holds as failed (a late approval), and the money is gone all the same.
CREATE OR REPLACE FUNCTION payment_attempts_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rest payment_attempts;
BEGIN
    IF NEW.dispute_held IS DISTINCT FROM OLD.dispute_held THEN
        rest := NEW;
        rest.dispute_held := OLD.dispute_held;
        IF pg_trigger_depth() < 2 OR rest IS DISTINCT FROM OLD THEN
            RAISE EXCEPTION 'the disputes of payment attempt % hold its dispute_held; nothing else sets it', OLD.id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_dispute_held_by_disputes';
        END IF;
        RETURN NEW;
    END IF;
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

-- The refund cap of migration 000014, less what disputes took: a refund of money a chargeback
-- already gave back would give it back twice. Both are held under the payment's row lock, so
-- a refund and a chargeback racing each other each count the other.
CREATE OR REPLACE FUNCTION refunds_hold_amount() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    left_to_refund bigint;
BEGIN
    IF NEW.status <> 'created' THEN
        RAISE EXCEPTION 'a refund starts as created, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_start_created';
    END IF;
    SELECT COALESCE(amount_captured, amount) - refund_held - dispute_held INTO left_to_refund
        FROM payment_attempts
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
        RAISE EXCEPTION 'payment attempt % has % left to refund', NEW.payment_id, greatest(left_to_refund, 0)
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_within_payment';
    END IF;
    UPDATE payment_attempts SET refund_held = refund_held + NEW.amount
        WHERE merchant_id = NEW.merchant_id AND id = NEW.payment_id
        RETURNING currency, order_id INTO NEW.currency, NEW.order_id;
    RETURN NEW;
END;
$$;

CREATE TABLE disputes (
    merchant_id           uuid           NOT NULL,
    id                    uuid           NOT NULL,
    -- The payment disputed, and its order.
    attempt_id            uuid           NOT NULL,
    order_id              uuid           NOT NULL,
    provider              provider_name  NOT NULL,
    -- Stripe's `du_…`; Adyen's dispute pspReference (its notifications' `pspReference`).
    provider_dispute_id   text           NOT NULL,
    -- The provider's payment: Stripe's `pi_…`; Adyen's pspReference (`originalReference`).
    provider_payment_id   text           NOT NULL,
    status                dispute_status NOT NULL,
    stage                 dispute_stage  NOT NULL,
    amount                amount_minor   NOT NULL,
    currency              currency_code  NOT NULL,
    reason                dispute_reason NOT NULL,
    provider_reason       text           NOT NULL,
    evidence_due_by       timestamptz,
    -- Set when the dispute starts holding money while refunds hold some: what was refunded
    -- (or being refunded) then, and the part of the dispute that returns money twice unless
    -- it is won. The merchant's answer is the refund (docs/guides/disputes.md).
    refunded_before       held_amount    NOT NULL DEFAULT 0,
    overlap               held_amount    NOT NULL DEFAULT 0,
    -- The provider's time of the last event applied: an older one arriving later is stale.
    provider_updated_at   timestamptz    NOT NULL,
    evidence_submitted_at timestamptz,
    opened_at             timestamptz    NOT NULL DEFAULT now(),
    updated_at            timestamptz    NOT NULL DEFAULT now(),
    closed_at             timestamptz,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts (merchant_id, id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id),
    CONSTRAINT disputes_closed_is_finished
        CHECK ((status IN ('won', 'lost', 'warning_closed')) = (closed_at IS NOT NULL))
);
-- One dispute per provider dispute: a redelivery, or two events racing, find the same row.
CREATE UNIQUE INDEX disputes_provider_dispute ON disputes (provider, provider_dispute_id);
-- A payment's disputes (its view, the support story).
CREATE INDEX disputes_attempt ON disputes (merchant_id, attempt_id);
-- A merchant's list, newest first (ids are time-ordered), a page after a cursor id.
CREATE INDEX disputes_of_merchant ON disputes (merchant_id, id);
-- Support's list across merchants.
CREATE INDEX disputes_id ON disputes (id);

-- A dispute's timeline, like a refund's.
CREATE TABLE dispute_transitions (
    merchant_id  uuid              NOT NULL,
    id           bigint            GENERATED ALWAYS AS IDENTITY,
    dispute_id   uuid              NOT NULL,
    from_status  dispute_status,
    to_status    dispute_status    NOT NULL,
    stage        dispute_stage     NOT NULL,
    source       transition_source NOT NULL,
    detail       text,
    created_at   timestamptz       NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, dispute_id) REFERENCES disputes (merchant_id, id)
);
CREATE INDEX dispute_transitions_dispute ON dispute_transitions (merchant_id, dispute_id, id);

-- A dispute is of a payment payorch made at that provider, in its currency. Created in any
-- status: the first news may be of any stage (a delivery lost, or out of order).
CREATE FUNCTION disputes_of_a_payment() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.attempt_id
          AND order_id = NEW.order_id AND provider = NEW.provider AND currency = NEW.currency;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'attempt % is not a payment of order % at % in %',
            NEW.attempt_id, NEW.order_id, NEW.provider, NEW.currency
            USING ERRCODE = 'check_violation', CONSTRAINT = 'disputes_of_a_payment';
    END IF;
    NEW.closed_at := CASE WHEN NEW.status IN ('won', 'lost', 'warning_closed') THEN now() END;
    RETURN NEW;
END;
$$;

-- Runs before `disputes_overlap_flag` (triggers of one event run by name), and the hold is
-- written after the insert: a dispute of no such payment holds nothing there.
CREATE TRIGGER disputes_of_a_payment BEFORE INSERT ON disputes
    FOR EACH ROW EXECUTE FUNCTION disputes_of_a_payment();

-- The moves (docs/guides/disputes.md, "Statuses"):
--   warning_needs_response → warning_under_review | warning_closed | needs_response | under_review | won | lost
--   warning_under_review   → warning_closed | needs_response | under_review | won | lost
--   needs_response         → under_review | won | lost
--   under_review           → won | lost
--   won  → lost   only at the second chargeback (Adyen SECOND_CHARGEBACK) or the scheme's
--                 arbitration (SCHEME_ARBITRATION_LOST)
--   lost → won    only at pre-arbitration (Adyen PREARBITRATION_WON) or arbitration
--                 (SCHEME_ARBITRATION_WON)
--   a status kept at a later stage; warning_closed is final; a stage never goes back;
--   the scheme's ruling (won or lost at arbitration) is final.
-- Only the status, stage, amount, reason, due date and what the provider said may change.
CREATE FUNCTION disputes_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id
       OR NEW.attempt_id <> OLD.attempt_id OR NEW.order_id <> OLD.order_id
       OR NEW.provider <> OLD.provider OR NEW.provider_dispute_id <> OLD.provider_dispute_id
       OR NEW.provider_payment_id <> OLD.provider_payment_id
       OR NEW.currency <> OLD.currency OR NEW.opened_at <> OLD.opened_at THEN
        RAISE EXCEPTION 'dispute % may change only its status, stage and what the provider said', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'disputes_immutable';
    END IF;
    IF dispute_stage_rank(NEW.stage) < dispute_stage_rank(OLD.stage) THEN
        RAISE EXCEPTION 'dispute % cannot go back from stage % to %', OLD.id, OLD.stage, NEW.stage
            USING ERRCODE = 'check_violation', CONSTRAINT = 'disputes_status_transition';
    END IF;
    IF (NEW.status, NEW.stage) IS DISTINCT FROM (OLD.status, OLD.stage) AND NOT (
        (NEW.status = OLD.status AND OLD.status <> 'warning_closed'
            AND dispute_stage_rank(NEW.stage) > dispute_stage_rank(OLD.stage)) OR
        (OLD.status = 'warning_needs_response' AND NEW.status IN ('warning_under_review',
            'warning_closed', 'needs_response', 'under_review', 'won', 'lost')) OR
        (OLD.status = 'warning_under_review' AND NEW.status IN ('warning_closed',
            'needs_response', 'under_review', 'won', 'lost')) OR
        (OLD.status = 'needs_response' AND NEW.status IN ('under_review', 'won', 'lost')) OR
        (OLD.status = 'under_review' AND NEW.status IN ('won', 'lost')) OR
        (OLD.status = 'won' AND NEW.status = 'lost' AND OLD.stage <> 'arbitration'
            AND NEW.stage IN ('second_chargeback', 'arbitration')) OR
        (OLD.status = 'lost' AND NEW.status = 'won' AND OLD.stage <> 'arbitration'
            AND NEW.stage IN ('pre_arbitration', 'arbitration'))
    ) THEN
        RAISE EXCEPTION 'dispute % cannot move from % (%) to % (%)',
            OLD.id, OLD.status, OLD.stage, NEW.status, NEW.stage
            USING ERRCODE = 'check_violation', CONSTRAINT = 'disputes_status_transition';
    END IF;
    NEW.updated_at := now();
    IF NEW.status IN ('won', 'lost', 'warning_closed') AND NEW.status IS DISTINCT FROM OLD.status THEN
        NEW.closed_at := now();
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER disputes_guard_transition BEFORE UPDATE ON disputes
    FOR EACH ROW EXECUTE FUNCTION disputes_guard_transition();

-- A dispute that holds money while refunds hold some is flagged with what was refunded and
-- the part returned twice, judged whenever its hold starts (opened, or lost again at a second
-- chargeback after refunds the win let through) or its amount changes while it holds, so the
-- flag is of the money it holds now; a hold that ends keeps its last flag. Read under the payment's row lock, the lock a
-- refund's insert takes (`refunds_hold_amount`), so a chargeback and a refund racing each
-- other wait for each other and whichever comes second counts the first. A BEFORE trigger,
-- to write the flags on the row; named to run after `disputes_guard_transition` and
-- `disputes_of_a_payment` (triggers of one event run by name).
CREATE FUNCTION disputes_overlap_flag() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was_held bigint := 0;
    now_held bigint := 0;
    captured bigint;
    refunds bigint;
    disputes bigint;
BEGIN
    IF TG_OP = 'UPDATE' AND dispute_holds(OLD.status) THEN
        was_held := OLD.amount;
    END IF;
    IF dispute_holds(NEW.status) THEN
        now_held := NEW.amount;
    END IF;
    IF was_held = now_held THEN
        RETURN NEW;
    END IF;
    SELECT COALESCE(amount_captured, amount), refund_held, dispute_held
        INTO captured, refunds, disputes FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.attempt_id
        FOR NO KEY UPDATE;
    -- A late approval payorch undid by a refund (migration 000026) gave the payer the money
    -- back too, though the failed attempt holds no refund: a chargeback of that charge
    -- returns it twice all the same. Being refunded counts as well: its refund was sent.
    refunds := refunds + COALESCE((
        SELECT sum(l.amount) FROM late_approvals l
        WHERE l.merchant_id = NEW.merchant_id AND l.attempt_id = NEW.attempt_id
          AND l.approved_as = 'succeeded' AND l.status IN ('undoing', 'refunded')), 0);
    IF now_held > 0 THEN
        -- `disputes` is what the payment's disputes hold before this change, this one's old
        -- hold among them.
        NEW.refunded_before := refunds;
        NEW.overlap := greatest(0, refunds + disputes - was_held + now_held - captured);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER disputes_overlap_flag BEFORE INSERT OR UPDATE ON disputes
    FOR EACH ROW EXECUTE FUNCTION disputes_overlap_flag();

-- Keeps `payment_attempts.dispute_held`: what the payment's disputes hold. An AFTER trigger,
-- never a BEFORE one: a BEFORE INSERT trigger runs before `INSERT … ON CONFLICT DO NOTHING`
-- finds the row another transaction made, so two first reports of one dispute (Stripe sends
-- `charge.dispute.created` and `.funds_withdrawn` together) would both add the amount and
-- only one row be kept; an AFTER trigger runs only for the row written. The payment's row
-- lock is `disputes_overlap_flag`'s, taken before.
CREATE FUNCTION disputes_hold_amount() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was_held bigint := 0;
    now_held bigint := 0;
BEGIN
    IF TG_OP = 'UPDATE' AND dispute_holds(OLD.status) THEN
        was_held := OLD.amount;
    END IF;
    IF dispute_holds(NEW.status) THEN
        now_held := NEW.amount;
    END IF;
    IF was_held <> now_held THEN
        UPDATE payment_attempts SET dispute_held = dispute_held - was_held + now_held
            WHERE merchant_id = NEW.merchant_id AND id = NEW.attempt_id;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER disputes_hold_amount AFTER INSERT OR UPDATE ON disputes
    FOR EACH ROW EXECUTE FUNCTION disputes_hold_amount();

-- The merchant is told in the statement that makes the change (migration 000013):
-- `dispute.created`, then `dispute.updated`, and `dispute.closed` on entering won, lost or
-- warning_closed, each with the dispute as it is.
--
-- NOT VALID, both, for migration 000023's reason (and 000026's): a list that only grows
-- cannot refuse a stored value, and proving it would scan every merchant event under a lock
-- that stops checkouts' event inserts. A value written from now on is checked all the same.
ALTER DOMAIN event_type DROP CONSTRAINT event_type_known;
ALTER DOMAIN event_type ADD CONSTRAINT event_type_known CHECK (VALUE IN (
    'payment.pending', 'payment.requires_action', 'payment.authorized', 'payment.succeeded',
    'payment.failed', 'payment.canceled',
    'refund.succeeded', 'refund.failed',
    'order.paid', 'order.canceled', 'order.refunded',
    'late_approval.detected', 'late_approval.voided', 'late_approval.refunded',
    'late_approval.undo_failed',
    'dispute.created', 'dispute.updated', 'dispute.closed')) NOT VALID;

ALTER TABLE webhook_endpoints
    DROP CONSTRAINT webhook_endpoints_enabled_events_check,
    ADD CONSTRAINT webhook_endpoints_enabled_events_check CHECK (cardinality(enabled_events) > 0
        AND enabled_events <@ ARRAY['*', 'payment.pending', 'payment.requires_action',
            'payment.authorized', 'payment.succeeded', 'payment.failed', 'payment.canceled',
            'refund.succeeded', 'refund.failed', 'order.paid', 'order.canceled', 'order.refunded',
            'late_approval.detected', 'late_approval.voided', 'late_approval.refunded',
            'late_approval.undo_failed',
            'dispute.created', 'dispute.updated', 'dispute.closed']) NOT VALID;

-- `merchant_events_once` holds one event per (resource, type): right for a payment, which is
-- final once, but a dispute may be updated, and closed, more than once (won, lost at the
-- second chargeback, won at pre-arbitration). Each of its changes is a (status, stage) it
-- never comes back to (a stage only moves on, and within one the moves have no cycle), so an
-- update's event names that change: a uuid of the dispute's id, status and stage. The
-- snapshot names the dispute.
CREATE FUNCTION disputes_emit_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM events_emit(NEW.merchant_id,
        CASE WHEN TG_OP = 'INSERT' THEN 'dispute.created'
             WHEN NEW.status IN ('won', 'lost', 'warning_closed')
                  AND NEW.status IS DISTINCT FROM OLD.status THEN 'dispute.closed'
             ELSE 'dispute.updated' END,
        CASE WHEN TG_OP = 'INSERT' THEN NEW.id
             ELSE md5(NEW.id::text || ':' || NEW.status || ':' || NEW.stage)::uuid END,
        NEW.order_id, jsonb_build_object('dispute', to_jsonb(NEW)));
    RETURN NULL;
END;
$$;

CREATE TRIGGER disputes_emit_event_made AFTER INSERT ON disputes
    FOR EACH ROW EXECUTE FUNCTION disputes_emit_event();
CREATE TRIGGER disputes_emit_event AFTER UPDATE OF status, stage ON disputes
    FOR EACH ROW WHEN ((OLD.status, OLD.stage) IS DISTINCT FROM (NEW.status, NEW.stage))
    EXECUTE FUNCTION disputes_emit_event();
