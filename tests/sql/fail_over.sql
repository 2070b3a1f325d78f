WITH go AS (SELECT 1),
made_attempt AS (
    INSERT INTO payment_attempts (merchant_id, id, order_id, status, payment_method,
        provider, provider_idempotency_key, idempotency_key, next_check_at, sending_until,
        capture_method, return_url, retry_of, retry_reason, three_d_secure)
    SELECT $1, $4, $3, 'created', $5, $6, $7, $2,
        $8, $8, $9, $10, $11, $12, $14
    FROM go RETURNING *),
timeline AS (
    INSERT INTO attempt_transitions (merchant_id, attempt_id, from_status, to_status, source,
        detail)
    SELECT merchant_id, id, NULL, status, 'api', $13 FROM made_attempt),
done AS (SELECT id AS resource_id FROM made_attempt),
repointed AS (
    UPDATE idempotency_keys SET resource_id = (SELECT id FROM made_attempt),
        locked_until = $18, updated_at = now()
    WHERE merchant_id = $15 AND key = $16 AND state = 'in_flight'
      AND resource_type = $19 AND resource_id = $17
    RETURNING set_config('payorch.request', $20, true))
SELECT to_jsonb(m) AS attempt, (SELECT count(*) FROM repointed) AS repointed
FROM made_attempt m
