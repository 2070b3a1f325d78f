WITH moved AS (
    UPDATE hold_operations SET status = $4, failure_code = $5,
        failure_message = $6, next_check_at = $3
    WHERE merchant_id = $1 AND id = $2 RETURNING *),
settled AS (
    UPDATE idempotency_keys SET state = 'completed', locked_until = NULL,
        recovery_point = 'finished', response_status = $12,
        unresolved = (SELECT status IN ('created', 'pending') FROM moved),
        updated_at = now()
    WHERE merchant_id = $7 AND key = $8 AND resource_type = $11
      AND resource_id = $10 AND (state = 'in_flight' OR unresolved)
      AND EXISTS (SELECT 1 FROM moved)
    RETURNING set_config('payorch.request', $9, true)),
called AS (
    INSERT INTO provider_calls (merchant_id, attempt_id, hold_operation_id, operation, source, outcome,
        http_status, latency_ms, detail)
    SELECT merchant_id, payment_id, id, $13, $14, $15, $16, $17, $18 FROM moved)
SELECT * FROM moved
