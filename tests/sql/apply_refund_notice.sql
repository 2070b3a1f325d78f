WITH moved AS (
    UPDATE refunds SET status = $5,
        provider_refund_id = coalesce(provider_refund_id, $6),
        failure_code = $7, failure_message = $8, next_check_at = $4
    WHERE merchant_id = $1 AND id = $2 AND status = $3 RETURNING *),
logged AS (
    INSERT INTO refund_transitions (merchant_id, refund_id, from_status, to_status, source, detail)
    SELECT merchant_id, id, $3, status, $9, $10 FROM moved WHERE status <> $3),
settled AS (
    UPDATE idempotency_keys SET state = 'completed', locked_until = NULL,
        recovery_point = 'finished', response_status = $15,
        unresolved = (SELECT status IN ('created', 'pending') FROM moved),
        updated_at = now()
    WHERE merchant_id = $11 AND key = $12 AND resource_type = $14
      AND resource_id = $13 AND (state = 'in_flight' OR unresolved)
      AND EXISTS (SELECT 1 FROM moved))
SELECT * FROM moved
