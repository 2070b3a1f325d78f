WITH moved AS (
    UPDATE payment_attempts SET status = $4,
        provider_payment_id = coalesce(provider_payment_id, $5),
        failure_code = $6, failure_message = $9, next_check_at = $10,
        failure_class = $7, provider_failure_code = $8,
        next_action = coalesce($11, next_action),
        authorized_until = least($12, authorized_until),
        cancellation_reason = $13
    WHERE merchant_id = $1 AND id = $2 AND status = $3 RETURNING *),
logged AS (
    INSERT INTO attempt_transitions (merchant_id, attempt_id, from_status, to_status, source, detail)
    SELECT merchant_id, id, $3, status, $14, $15 FROM moved WHERE status <> $3),
settled AS (
    UPDATE idempotency_keys SET state = 'completed', locked_until = NULL,
        recovery_point = 'finished', response_status = $20,
        unresolved = (SELECT status IN ('created', 'pending', 'authorized') FROM moved),
        updated_at = now()
    WHERE merchant_id = $16 AND key = $17 AND resource_type = $19
      AND resource_id = $18 AND (state = 'in_flight' OR unresolved)
      AND EXISTS (SELECT 1 FROM moved WHERE status IN ('authorized', 'succeeded', 'failed', 'canceled'))),
recorded AS (
    INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, detail,
        merchant_id, attempt_id, payload, provider_created_at, payload_kept)
    SELECT $21, $22, $23, $24, 'applied', $25, merchant_id, id,
        $26, $27, true
    FROM moved
    ON CONFLICT (provider, provider_event_id, provider_created_at) DO NOTHING RETURNING 1)
SELECT EXISTS (SELECT 1 FROM recorded) AS recorded FROM moved
