WITH moved AS (
    UPDATE payment_attempts SET status = $4,
        provider_payment_id = coalesce(provider_payment_id, $5),
        failure_code = $6, failure_message = $7, next_check_at = $8,
        next_action = coalesce($9, next_action),
        authorized_until = least($10, authorized_until),
        cancellation_reason = $11
    WHERE merchant_id = $1 AND id = $2 AND status = $3 RETURNING *),
logged AS (
    INSERT INTO attempt_transitions (merchant_id, attempt_id, from_status, to_status, source, detail)
    SELECT merchant_id, id, $3, status, $12, $13 FROM moved WHERE status <> $3),
settled AS (
    UPDATE idempotency_keys SET state = 'completed', locked_until = NULL,
        recovery_point = 'finished', response_status = $18,
        unresolved = (SELECT status IN ('created', 'pending', 'authorized') FROM moved),
        updated_at = now()
    WHERE merchant_id = $14 AND key = $15 AND resource_type = $17
      AND resource_id = $16 AND (state = 'in_flight' OR unresolved)
      AND EXISTS (SELECT 1 FROM moved WHERE status IN ('authorized', 'succeeded', 'failed', 'canceled'))),
recorded AS (
    INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, detail,
        merchant_id, attempt_id, payload, provider_created_at, payload_kept)
    SELECT $19, $20, $21, $22, 'applied', $23, merchant_id, id,
        $24, $25, true
    FROM moved
    ON CONFLICT (provider, provider_event_id) DO NOTHING RETURNING 1)
SELECT EXISTS (SELECT 1 FROM recorded) AS recorded FROM moved
