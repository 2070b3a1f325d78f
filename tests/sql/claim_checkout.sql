WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($1) AS got),
found AS MATERIALIZED (
    SELECT operation, fingerprint, state, locked_until, recovery_point, resource_type,
           resource_id, response_status, expires_at, unresolved
    FROM idempotency_keys WHERE merchant_id = $2 AND key = $3),
go AS MATERIALIZED (
    SELECT 1 AS go FROM lock WHERE got AND $4 AND NOT EXISTS (SELECT 1 FROM found)),
made_order AS (
    INSERT INTO orders (merchant_id, id, amount, currency, merchant_reference, description,
        metadata, checkout_demo)
    SELECT $2, $5, $6, $7, $8, $9, $10,
        $11
    FROM go RETURNING *),
made_attempt AS (
    INSERT INTO payment_attempts (merchant_id, id, order_id, status, payment_method,
        provider, provider_idempotency_key, idempotency_key, next_check_at, sending_until,
        capture_method, return_url, retry_of, retry_reason, three_d_secure)
    SELECT $2, $12, made_order.id, 'created', $13, $14, $15, $3,
        $16, $16, $17, $18, $19, $20, $22
    FROM made_order RETURNING *),
timeline AS (
    INSERT INTO attempt_transitions (merchant_id, attempt_id, from_status, to_status, source,
        detail)
    SELECT merchant_id, id, NULL, status, 'api', $21 FROM made_attempt),
done AS (SELECT id AS resource_id FROM made_attempt),
recorded AS (
    INSERT INTO idempotency_keys (merchant_id, key, operation, fingerprint, state,
        locked_until, recovery_point, resource_type, resource_id, response_status,
        unresolved, expires_at)
    SELECT $2, $3, $23, $24, $25,
        now() + $26 * interval '1 millisecond',
        $27, $28, done.resource_id, $29, $30,
        now() + $31 * interval '1 millisecond'
    FROM done RETURNING set_config('payorch.request', $32, true))
SELECT lock.got, EXISTS (SELECT 1 FROM recorded) AS recorded,
       found.operation, found.fingerprint, found.state, found.locked_until,
       found.response_status, found.resource_type, found.resource_id,
       found.expires_at, found.unresolved,
       (SELECT resource_id FROM done) AS made,
       jsonb_build_object('order', (SELECT to_jsonb(m) FROM made_order m),
                   'attempt', (SELECT to_jsonb(m) FROM made_attempt m)) AS fresh,
       CASE WHEN found.state <> 'in_flight' OR found.locked_until < now()
            THEN jsonb_build_object('order', (
    SELECT to_jsonb(o) FROM orders o JOIN payment_attempts a
        ON a.merchant_id = o.merchant_id AND a.order_id = o.id
    WHERE a.merchant_id = $2 AND a.id = found.resource_id), 'attempt', (
    SELECT to_jsonb(a) FROM payment_attempts a
    WHERE a.merchant_id = $2 AND a.id = found.resource_id)) END AS current
FROM lock LEFT JOIN found ON true
