WITH recorded AS (
    INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, detail,
        merchant_id, attempt_id, payload, provider_created_at, payload_kept)
    VALUES ($1, $2, $3, $4, 'conflict', $5, $6,
        $7, $8, $9, true)
    ON CONFLICT (provider, provider_event_id, provider_created_at) DO NOTHING
    RETURNING merchant_id, attempt_id),
made AS (
    INSERT INTO late_approvals (merchant_id, id, attempt_id, order_id, provider,
        provider_payment_id, amount, currency, approved_as, source, next_check_at)
    SELECT merchant_id, $10, attempt_id, $11, $2, $12, $13, $14,
        $15, $16, $17
    FROM recorded
    ON CONFLICT (merchant_id, attempt_id) DO NOTHING RETURNING *)
SELECT EXISTS (SELECT 1 FROM recorded) AS recorded, (SELECT to_jsonb(m) FROM made m) AS made
