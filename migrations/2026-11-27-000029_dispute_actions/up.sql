-- A merchant's answer to a dispute (docs/guides/disputes.md, "Answering a dispute"):
-- `POST /v1/disputes/{id}/evidence` and `POST /v1/disputes/{id}/accept`, keyed POSTs whose
-- keys record 'submit_dispute_evidence' and 'accept_dispute' (docs/DESIGN.md, "Adding a
-- keyed operation"). Each action is a row here with its own provider key, sent the same on
-- every resend: an answer that told nothing leaves it pending, and a retry of the request
-- resends it under that key, never under a new one.
--
-- The refusals are the database's, whatever writes the row: an action only on a dispute
-- that still awaits an answer (needs_response, or warning_needs_response for an inquiry) —
-- so none on a closed one, none after an accept, none after evidence was taken — and one
-- pending action per dispute at a time.
SET LOCAL lock_timeout = '5s';

-- NOT VALID, as migration 000023's: a list that only grows cannot refuse a stored key, and
-- checking every key again would stop keyed writes during a rolling deploy.
ALTER DOMAIN key_operation DROP CONSTRAINT key_operation_known;
ALTER DOMAIN key_operation ADD CONSTRAINT key_operation_known CHECK (VALUE IN
    ('create_order', 'cancel_order', 'create_payment', 'checkout', 'create_refund',
     'create_webhook_endpoint', 'rotate_webhook_secret', 'capture_payment', 'cancel_payment',
     'update_order', 'submit_dispute_evidence', 'accept_dispute')) NOT VALID;

CREATE DOMAIN dispute_action_kind AS text
    CONSTRAINT dispute_action_kind_known CHECK (VALUE IN ('evidence', 'accept'));

-- pending: made, its provider call not answered yet (or answered with nothing certain);
-- succeeded: the provider took it; failed: the provider refused it, nothing was done.
CREATE DOMAIN dispute_action_status AS text
    CONSTRAINT dispute_action_status_known CHECK (VALUE IN ('pending', 'succeeded', 'failed'));

CREATE TABLE dispute_actions (
    merchant_id              uuid                  NOT NULL,
    id                       uuid                  NOT NULL,
    dispute_id               uuid                  NOT NULL,
    kind                     dispute_action_kind   NOT NULL,
    status                   dispute_action_status NOT NULL DEFAULT 'pending',
    provider                 provider_name         NOT NULL,
    provider_dispute_id      text                  NOT NULL,
    provider_idempotency_key text                  NOT NULL,
    -- What was sent (payorch's evidence: text fields, documents, a defence reason), so a
    -- resend sends the same request; '{}' for an accept.
    evidence                 jsonb                 NOT NULL DEFAULT '{}',
    failure_code             text,
    failure_message          text,
    -- Sends that may have reached the provider: counted before each send, uncounted when
    -- the send provably never left (the connection refused). A refusal answers the first
    -- such send only; after one whose answer was lost, a resend's refusal ("already under
    -- review", past the provider's key life) says nothing of the first, and the dispute's
    -- news settles the action (src/payments/disputes/keyed/act.rs).
    sends                    integer               NOT NULL DEFAULT 0 CHECK (sends >= 0),
    -- The client's Idempotency-Key.
    idempotency_key          text                  NOT NULL,
    created_at               timestamptz           NOT NULL DEFAULT now(),
    updated_at               timestamptz           NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, dispute_id) REFERENCES disputes (merchant_id, id),
    CONSTRAINT dispute_actions_failure_told
        CHECK ((status = 'failed') = (failure_code IS NOT NULL))
);
CREATE UNIQUE INDEX dispute_actions_provider_key ON dispute_actions (provider, provider_idempotency_key);
-- One action under way per dispute: a second waits for the first's outcome.
CREATE UNIQUE INDEX dispute_actions_one_pending ON dispute_actions (merchant_id, dispute_id)
    WHERE status = 'pending';
CREATE INDEX dispute_actions_dispute ON dispute_actions (merchant_id, dispute_id, id);

-- A new action is of a dispute that awaits an answer, read under the dispute's row lock so
-- a webhook closing it and an action racing each other wait for each other; the provider
-- and its dispute id are the dispute's.
CREATE FUNCTION dispute_actions_of_an_open_dispute() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d disputes;
BEGIN
    IF NEW.status <> 'pending' THEN
        RAISE EXCEPTION 'a dispute action starts pending, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'dispute_actions_start_pending';
    END IF;
    SELECT * INTO d FROM disputes
        WHERE merchant_id = NEW.merchant_id AND id = NEW.dispute_id FOR NO KEY UPDATE;
    IF NOT FOUND OR d.status NOT IN ('needs_response', 'warning_needs_response') THEN
        RAISE EXCEPTION 'dispute % is % and takes no answer', NEW.dispute_id, d.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'dispute_actions_dispute_answerable';
    END IF;
    -- An accepted inquiry keeps its status until the provider tells what came of it (see the
    -- accept's answer in src/payments/disputes/keyed/act.rs): accepted, it takes nothing more.
    PERFORM 1 FROM dispute_actions a
        WHERE a.merchant_id = NEW.merchant_id AND a.dispute_id = NEW.dispute_id
          AND a.kind = 'accept' AND a.status = 'succeeded';
    IF FOUND THEN
        RAISE EXCEPTION 'dispute % was accepted and takes no answer', NEW.dispute_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'dispute_actions_dispute_answerable';
    END IF;
    NEW.provider := d.provider;
    NEW.provider_dispute_id := d.provider_dispute_id;
    RETURN NEW;
END;
$$;

CREATE TRIGGER dispute_actions_of_an_open_dispute BEFORE INSERT ON dispute_actions
    FOR EACH ROW EXECUTE FUNCTION dispute_actions_of_an_open_dispute();

-- pending → succeeded | failed, once; what was asked never changes.
CREATE FUNCTION dispute_actions_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.merchant_id, NEW.id, NEW.dispute_id, NEW.kind, NEW.provider, NEW.provider_dispute_id,
        NEW.provider_idempotency_key, NEW.evidence, NEW.idempotency_key, NEW.created_at)
       IS DISTINCT FROM
       (OLD.merchant_id, OLD.id, OLD.dispute_id, OLD.kind, OLD.provider, OLD.provider_dispute_id,
        OLD.provider_idempotency_key, OLD.evidence, OLD.idempotency_key, OLD.created_at) THEN
        RAISE EXCEPTION 'dispute action % may change only its status', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'dispute_actions_immutable';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'dispute action % is % and final', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'dispute_actions_final';
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END;
$$;

CREATE TRIGGER dispute_actions_guard_transition BEFORE UPDATE ON dispute_actions
    FOR EACH ROW EXECUTE FUNCTION dispute_actions_guard_transition();


-- Nothing but its own request would end a pending action, and until then it blocks every
-- other answer (`dispute_actions_one_pending`) and keeps its key open work: a client that
-- gave up would hold the dispute past its due date. So the dispute's news ends it. When the
-- dispute leaves the statuses that take an answer, its pending action is decided by where it
-- went: succeeded if that is where the action leads (evidence: under review, then won or
-- lost; accept: lost, or an inquiry closed), else failed, `dispute_moved`, saying where; and
-- its key is completed, so a retry replays the action as it ended. The request's own answer,
-- recorded later, finds the action final and changes nothing (act.rs records only a pending
-- one). docs/guides/disputes.md, "Answering a dispute".
CREATE FUNCTION dispute_actions_end_with_the_dispute() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH ended AS (
        UPDATE dispute_actions a SET
            status = CASE WHEN led THEN 'succeeded' ELSE 'failed' END,
            failure_code = CASE WHEN led THEN NULL ELSE 'dispute_moved' END,
            failure_message = CASE WHEN led THEN NULL ELSE format(
                'the dispute moved to %s before this answer''s outcome was known', NEW.status) END
        FROM (SELECT p.merchant_id, p.id,
                     (p.kind = 'evidence' AND NEW.status IN ('under_review',
                          'warning_under_review', 'won', 'lost'))
                     OR (p.kind = 'accept' AND NEW.status IN ('lost', 'warning_closed')) AS led
              FROM dispute_actions p
              WHERE p.merchant_id = NEW.merchant_id AND p.dispute_id = NEW.id
                AND p.status = 'pending') judged
        WHERE a.merchant_id = judged.merchant_id AND a.id = judged.id AND a.status = 'pending'
        RETURNING a.merchant_id, a.id, a.idempotency_key)
    UPDATE idempotency_keys k SET state = 'completed', locked_until = NULL,
        recovery_point = 'finished', response_status = 200, unresolved = false,
        updated_at = now()
    FROM ended e
    WHERE k.merchant_id = e.merchant_id AND k.key = e.idempotency_key
      AND k.resource_type = 'dispute_action' AND k.resource_id = e.id
      AND k.state = 'in_flight';
    RETURN NULL;
END;
$$;

CREATE TRIGGER dispute_actions_end_with_the_dispute AFTER UPDATE OF status ON disputes
    FOR EACH ROW WHEN (OLD.status IN ('needs_response', 'warning_needs_response')
        AND NEW.status NOT IN ('needs_response', 'warning_needs_response'))
    EXECUTE FUNCTION dispute_actions_end_with_the_dispute();

-- A key whose action is still pending is open work, kept whatever its age; past its TTL a
-- dispute action's key is retired (it names what it made), never freed: a late retry under a
-- freed key would make a second answer of the dispute (README, "Idempotency").
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
        WHEN 'dispute_action' THEN EXISTS (
            SELECT 1 FROM dispute_actions d
            WHERE d.merchant_id = k.merchant_id AND d.id = k.resource_id
              AND d.status = 'pending')
        ELSE false END
$$;

CREATE OR REPLACE FUNCTION idempotency_key_made_money_move(k idempotency_keys) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(k.resource_type IN ('payment_attempt', 'refund', 'hold_operation',
        'dispute_action'), false)
$$;
