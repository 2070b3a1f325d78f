WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($1) AS got),
found AS MATERIALIZED (
    SELECT operation, fingerprint, state, locked_until, recovery_point, resource_type,
           resource_id, response_status, expires_at, unresolved
    FROM idempotency_keys WHERE merchant_id = $2 AND key = $3),
go AS MATERIALIZED (
    SELECT 1 AS go FROM lock WHERE got AND $4 AND NOT EXISTS (SELECT 1 FROM found)),
made_endpoint AS (
    UPDATE webhook_endpoints SET secret = $6, previous_secret = secret,
        previous_secret_until = now() + interval '86400 seconds', updated_at = now()
    WHERE merchant_id = $2 AND id = $5 AND deleted_at IS NULL
      AND EXISTS (SELECT 1 FROM go) RETURNING *),
done AS (SELECT id AS resource_id FROM made_endpoint),
recorded AS (
    INSERT INTO idempotency_keys (merchant_id, key, operation, fingerprint, state,
        locked_until, recovery_point, resource_type, resource_id, response_status,
        unresolved, expires_at)
    SELECT $2, $3, $7, $8, $9,
        now() + $10 * interval '1 millisecond',
        $11, $12, done.resource_id, $13, $14,
        now() + $15 * interval '1 millisecond'
    FROM done RETURNING set_config('payorch.request', $16, true))
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
