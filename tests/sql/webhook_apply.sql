WITH moved AS (
    UPDATE payment_attempts SET status = $4,
        provider_payment_id = coalesce(provider_payment_id, $5),
        failure_code = $6, failure_message = $7, next_check_at = $8
    WHERE merchant_id = $1 AND id = $2 AND status = $3 RETURNING *),
logged AS (
    INSERT INTO attempt_events (merchant_id, attempt_id, from_status, to_status, source, detail)
    SELECT merchant_id, id, $3, status, $9, $10 FROM moved WHERE status <> $3),
settled AS (
    UPDATE idempotency_keys SET state = 'completed', locked_until = NULL,
        recovery_point = 'finished', response_status = $15,
        unresolved = (SELECT status IN ('created', 'pending') FROM moved),
        updated_at = now()
    WHERE merchant_id = $11 AND key = $12 AND resource_type = $14
      AND resource_id = $13 AND (state = 'in_flight' OR unresolved)
      AND EXISTS (SELECT 1 FROM moved WHERE status IN ('succeeded', 'failed'))),
recorded AS (
    INSERT INTO webhook_events (id, provider, provider_event_id, event_type, outcome, detail,
        merchant_id, attempt_id, payload, provider_created_at)
    SELECT $16, $17, $18, $19, 'applied', $20, merchant_id, id,
        $21, $22
    FROM moved
    ON CONFLICT (provider, provider_event_id) DO NOTHING RETURNING 1)
SELECT EXISTS (SELECT 1 FROM recorded) AS recorded FROM moved
