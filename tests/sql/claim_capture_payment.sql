WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($1) AS got),
found AS MATERIALIZED (
    SELECT operation, fingerprint, state, locked_until, recovery_point, resource_type,
           resource_id, response_status, expires_at, unresolved
    FROM idempotency_keys WHERE merchant_id = $2 AND key = $3),
go AS MATERIALIZED (
    SELECT 1 AS go FROM lock WHERE got AND $4 AND NOT EXISTS (SELECT 1 FROM found)),
made_operation AS (
    INSERT INTO hold_operations (merchant_id, id, payment_id, order_id, kind, status, amount,
        currency, provider, provider_idempotency_key, source, reason, idempotency_key,
        next_check_at)
    SELECT $2, $5, $6, NULL, $7, 'created', $8, NULL, NULL,
        $11, $9, $10, $3, $12
    FROM go RETURNING *),
done AS (SELECT id AS resource_id FROM made_operation),
recorded AS (
    INSERT INTO idempotency_keys (merchant_id, key, operation, fingerprint, state,
        locked_until, recovery_point, resource_type, resource_id, response_status,
        unresolved, expires_at)
    SELECT $2, $3, $13, $14, $15,
        now() + $16 * interval '1 millisecond',
        $17, $18, done.resource_id, $19, $20,
        now() + $21 * interval '1 millisecond'
    FROM done RETURNING set_config('payorch.request', $22, true))
SELECT lock.got, EXISTS (SELECT 1 FROM recorded) AS recorded,
       found.operation, found.fingerprint, found.state, found.locked_until,
       found.response_status, found.resource_type, found.resource_id,
       found.expires_at, found.unresolved,
       (SELECT resource_id FROM done) AS made,
       jsonb_build_object('operation', (SELECT to_jsonb(m) FROM made_operation m),
    'payment', (SELECT to_jsonb(a) FROM payment_attempts a, made_operation m
        WHERE a.merchant_id = m.merchant_id AND a.id = m.payment_id)) AS fresh,
       CASE WHEN found.state <> 'in_flight' OR found.locked_until < now()
            THEN (SELECT jsonb_build_object('operation', to_jsonb(o), 'payment', to_jsonb(a))
    FROM hold_operations o JOIN payment_attempts a
        ON a.merchant_id = o.merchant_id AND a.id = o.payment_id
    WHERE o.merchant_id = $2 AND o.id = found.resource_id) END AS current
FROM lock LEFT JOIN found ON true
