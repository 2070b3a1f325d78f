WITH moved AS (
    SELECT * FROM hold_operations WHERE merchant_id = $1 AND id = $2 AND status = $3),
settled AS (
    UPDATE idempotency_keys SET state = 'completed', locked_until = NULL,
        recovery_point = 'finished', response_status = $8,
        unresolved = (SELECT status IN ('created', 'pending') FROM moved),
        updated_at = now()
    WHERE merchant_id = $4 AND key = $5 AND resource_type = $7
      AND resource_id = $6 AND (state = 'in_flight' OR unresolved)
      AND EXISTS (SELECT 1 FROM moved)),
called AS (
    INSERT INTO provider_calls (merchant_id, attempt_id, hold_operation_id, operation, source, outcome,
        http_status, latency_ms, detail)
    SELECT merchant_id, payment_id, id, $9, $10, $11, $12, $13, $14 FROM moved)
SELECT * FROM moved
