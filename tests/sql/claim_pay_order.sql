WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($1) AS got),
found AS MATERIALIZED (
    SELECT operation, fingerprint, state, locked_until, recovery_point, resource_type,
           resource_id, response_status, expires_at, unresolved
    FROM idempotency_keys WHERE merchant_id = $2 AND key = $3),
go AS MATERIALIZED (
    SELECT 1 AS go FROM lock WHERE got AND $4 AND NOT EXISTS (SELECT 1 FROM found)),
made_attempt AS (
    INSERT INTO payment_attempts (merchant_id, id, order_id, status, payment_method,
        provider, provider_idempotency_key, idempotency_key, next_check_at, sending_until,
        capture_method, return_url, retry_of, retry_reason, three_d_secure)
    SELECT $2, $6, $5, 'created', $7, $8, $9, $3,
        $10, $10, $11, $12, $13, $14, $16
    FROM go RETURNING *),
timeline AS (
    INSERT INTO attempt_transitions (merchant_id, attempt_id, from_status, to_status, source,
        detail)
    SELECT merchant_id, id, NULL, status, 'api', $15 FROM made_attempt),
done AS (SELECT id AS resource_id FROM made_attempt),
recorded AS (
    INSERT INTO idempotency_keys (merchant_id, key, operation, fingerprint, state,
        locked_until, recovery_point, resource_type, resource_id, response_status,
        unresolved, expires_at)
    SELECT $2, $3, $17, $18, $19,
        now() + $20 * interval '1 millisecond',
        $21, $22, done.resource_id, $23, $24,
        now() + $25 * interval '1 millisecond'
    FROM done RETURNING set_config('payorch.request', $26, true))
SELECT lock.got, EXISTS (SELECT 1 FROM recorded) AS recorded,
       found.operation, found.fingerprint, found.state, found.locked_until,
       found.response_status, found.resource_type, found.resource_id,
       found.expires_at, found.unresolved,
       (SELECT resource_id FROM done) AS made,
       jsonb_build_object('attempt', (SELECT to_jsonb(m) FROM made_attempt m)) AS fresh,
       CASE WHEN found.state <> 'in_flight' OR found.locked_until < now()
            THEN jsonb_build_object('attempt', (
    SELECT to_jsonb(a) FROM payment_attempts a
    WHERE a.merchant_id = $2 AND a.id = found.resource_id)) END AS current
FROM lock LEFT JOIN found ON true
