WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($1) AS got),
found AS MATERIALIZED (
    SELECT operation, fingerprint, state, locked_until, recovery_point, resource_type,
           resource_id, response_status, expires_at, unresolved
    FROM idempotency_keys WHERE merchant_id = $2 AND key = $3),
go AS MATERIALIZED (
    SELECT 1 AS go FROM lock WHERE got AND $4 AND NOT EXISTS (SELECT 1 FROM found)),
made_action AS (
    INSERT INTO dispute_actions (merchant_id, id, dispute_id, kind, status, provider,
        provider_dispute_id, provider_idempotency_key, evidence, idempotency_key)
    SELECT d.merchant_id, $5, d.id, $7, 'pending', d.provider, d.provider_dispute_id,
        $9, $8, $3
    FROM go, disputes d WHERE d.merchant_id = $2 AND d.id = $6
    RETURNING *),
done AS (SELECT id AS resource_id FROM made_action),
recorded AS (
    INSERT INTO idempotency_keys (merchant_id, key, operation, fingerprint, state,
        locked_until, recovery_point, resource_type, resource_id, response_status,
        unresolved, expires_at)
    SELECT $2, $3, $10, $11, $12,
        now() + $13 * interval '1 millisecond',
        $14, $15, done.resource_id, $16, $17,
        now() + $18 * interval '1 millisecond'
    FROM done RETURNING set_config('payorch.request', $19, true))
SELECT lock.got, EXISTS (SELECT 1 FROM recorded) AS recorded,
       found.operation, found.fingerprint, found.state, found.locked_until,
       found.response_status, found.resource_type, found.resource_id,
       found.expires_at, found.unresolved,
       (SELECT resource_id FROM done) AS made,
       jsonb_build_object('action', (SELECT to_jsonb(m) FROM made_action m),
    'dispute', (SELECT to_jsonb(d) FROM disputes d, made_action m
        WHERE d.merchant_id = m.merchant_id AND d.id = m.dispute_id)) AS fresh,
       CASE WHEN found.state <> 'in_flight' OR found.locked_until < now()
            THEN (SELECT jsonb_build_object('action', to_jsonb(a), 'dispute', to_jsonb(d))
    FROM dispute_actions a JOIN disputes d
        ON d.merchant_id = a.merchant_id AND d.id = a.dispute_id
    WHERE a.merchant_id = $2 AND a.id = found.resource_id) END AS current
FROM lock LEFT JOIN found ON true
