DROP TRIGGER idempotency_keys_guard_retire ON idempotency_keys;
DROP TRIGGER idempotency_keys_guard_delete ON idempotency_keys;
DROP FUNCTION idempotency_keys_guard_life();
DROP FUNCTION idempotency_key_made_money_move(idempotency_keys);
DROP FUNCTION idempotency_key_work_is_open(idempotency_keys);
-- Retired keys go: before this migration a key past its TTL was simply deleted.
DELETE FROM idempotency_keys WHERE state = 'expired';
DROP INDEX idempotency_keys_expiry;
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at)
    WHERE state = 'completed' AND NOT unresolved;
ALTER DOMAIN key_state DROP CONSTRAINT key_state_known;
ALTER DOMAIN key_state ADD CONSTRAINT key_state_known CHECK (VALUE IN ('in_flight', 'completed'));
