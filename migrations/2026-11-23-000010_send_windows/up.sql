-- When a create of an attempt may still be on its way to the provider (docs/DESIGN.md, "No
-- record, early"). Every sender moves it past the end of its send *before* sending: the
-- request that makes the attempt sets it to the end of its key lease, a resumed request and
-- the reconciler move it forward before they resend. The reconciler fails an attempt
-- `provider_no_record` only when a search made after `sending_until` plus the provider's
-- consistency delay found nothing, and only under the row lock that every sender's move takes
-- too: so either the verdict comes first and the sender, seeing a final attempt, sends
-- nothing, or the move comes first and the verdict is not given.
-- Rows already final get the epoch: nothing sends them again. Open ones, and rows inserted
-- by a binary that does not know the column yet (during a rolling deploy), get a day: their
-- senders did not move it, so no early verdict until every such send is long over.
ALTER TABLE payment_attempts ADD COLUMN sending_until timestamptz NOT NULL
    DEFAULT '1970-01-01 00:00:00+00';
UPDATE payment_attempts SET sending_until = now() + interval '1 day'
    WHERE status IN ('created', 'pending');
ALTER TABLE payment_attempts ALTER COLUMN sending_until SET DEFAULT now() + interval '1 day';

-- Beside the attempt guard: `sending_until` only moves forward, and no `provider_no_record`
-- while a send may still be under way.
CREATE FUNCTION payment_attempts_guard_sending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.sending_until < OLD.sending_until THEN
        RAISE EXCEPTION 'payment attempt %: sending_until only moves forward', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_sending_forward';
    END IF;
    IF NEW.status = 'failed' AND NEW.failure_code = 'provider_no_record'
       AND OLD.status <> 'failed' AND OLD.sending_until >= now() THEN
        RAISE EXCEPTION 'payment attempt % may still be on its way to the provider: no verdict of no record', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_no_record_after_sending';
    END IF;
    RETURN NEW;
END;
$$;

-- The WHEN keeps the function off the checkout's own updates.
CREATE TRIGGER payment_attempts_guard_sending BEFORE UPDATE ON payment_attempts
    FOR EACH ROW WHEN (NEW.sending_until < OLD.sending_until
                       OR NEW.failure_code IS NOT DISTINCT FROM 'provider_no_record')
    EXECUTE FUNCTION payment_attempts_guard_sending();
