WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($1) AS got),
found AS MATERIALIZED (
    SELECT operation, fingerprint, state, locked_until, recovery_point, resource_type,
           resource_id, response_status, expires_at, unresolved
    FROM idempotency_keys WHERE merchant_id = $2 AND key = $3),
go AS MATERIALIZED (
    SELECT 1 AS go FROM lock WHERE got AND $4 AND NOT EXISTS (SELECT 1 FROM found)),
made_endpoint AS (
    INSERT INTO webhook_endpoints (merchant_id, id, url, description, enabled_events, secret)
    SELECT $2, $5, $6, $7, $8, $9
    FROM go RETURNING *),
done AS (SELECT id AS resource_id FROM made_endpoint),
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
       jsonb_build_object('endpoint', (
    SELECT to_jsonb(m) - 'previous_secret' FROM made_endpoint m)) AS fresh,
       CASE WHEN found.state <> 'in_flight' OR found.locked_until < now()
            THEN jsonb_build_object('endpoint', (
    SELECT to_jsonb(e) - 'previous_secret' FROM webhook_endpoints e
    WHERE e.merchant_id = $2 AND e.id = found.resource_id)) END AS current
FROM lock LEFT JOIN found ON true
