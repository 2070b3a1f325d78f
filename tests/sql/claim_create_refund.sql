WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($1) AS got),
found AS MATERIALIZED (
    SELECT operation, fingerprint, state, locked_until, recovery_point, resource_type,
           resource_id, response_status, expires_at, unresolved
    FROM idempotency_keys WHERE merchant_id = $2 AND key = $3),
go AS MATERIALIZED (
    SELECT 1 AS go FROM lock WHERE got AND $4 AND NOT EXISTS (SELECT 1 FROM found)),
made_refund AS (
    INSERT INTO refunds (merchant_id, id, payment_id, order_id, status, amount, currency,
        reason, provider, provider_idempotency_key, idempotency_key, next_check_at)
    SELECT $2, $5, $6, NULL, 'created', $7, NULL, $8,
        (SELECT provider FROM payment_attempts WHERE merchant_id = $2 AND id = $6),
        $9, $3, $10
    FROM go RETURNING *),
refund_timeline AS (
    INSERT INTO refund_transitions (merchant_id, refund_id, from_status, to_status, source)
    SELECT merchant_id, id, NULL, status, 'api' FROM made_refund),
done AS (SELECT id AS resource_id FROM made_refund),
recorded AS (
    INSERT INTO idempotency_keys (merchant_id, key, operation, fingerprint, state,
        locked_until, recovery_point, resource_type, resource_id, response_status,
        unresolved, expires_at)
    SELECT $2, $3, $11, $12, $13,
        now() + $14 * interval '1 millisecond',
        $15, $16, done.resource_id, $17, $18,
        now() + $19 * interval '1 millisecond'
    FROM done RETURNING set_config('payorch.request', $20, true))
SELECT lock.got, EXISTS (SELECT 1 FROM recorded) AS recorded,
       found.operation, found.fingerprint, found.state, found.locked_until,
       found.response_status, found.resource_type, found.resource_id,
       found.expires_at, found.unresolved,
       (SELECT resource_id FROM done) AS made,
       jsonb_build_object('refund', (SELECT to_jsonb(m) FROM made_refund m)) AS fresh,
       CASE WHEN found.state <> 'in_flight' OR found.locked_until < now()
            THEN jsonb_build_object('refund', (
    SELECT to_jsonb(r) FROM refunds r
    WHERE r.merchant_id = $2 AND r.id = found.resource_id)) END AS current
FROM lock LEFT JOIN found ON true
