WITH moved AS (
    UPDATE hold_operations SET status = $4, failure_code = $5,
        failure_message = $6, next_check_at = $3
    WHERE merchant_id = $1 AND id = $2 RETURNING *),
settled AS (
    UPDATE idempotency_keys SET state = 'completed', locked_until = NULL,
        recovery_point = 'finished', response_status = $11,
        unresolved = (SELECT status IN ('created', 'pending') FROM moved),
        updated_at = now()
    WHERE merchant_id = $7 AND key = $8 AND resource_type = $10
      AND resource_id = $9 AND (state = 'in_flight' OR unresolved)
      AND EXISTS (SELECT 1 FROM moved))
SELECT * FROM moved
